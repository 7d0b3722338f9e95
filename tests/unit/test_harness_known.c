/* test_harness_known.c: the known-findings file (harness/report/known.c) and what a known finding does to
 * a run's status, TAP, summary.md and results.json (tap.c, results.c). The lines are written by
 * hand; every expectation is worked out from the format in moects_known.h. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "moects_known.h"

/* results.json requires every field the writer writes (harness/model/results.c): the top level up to
 * "results": [, and the fields of a result after op, mutant, verdict, mismatches (and known). */
#define RUN_TOP "{\"moects_version\": \"0.1\", \"commit\": \"c\", \"date\": \"d\", \"machine\": \"h\", " \
                "\"filter\": \"\", \"shard\": \"\", \"seed\": 1, \"results\": ["
#define REST ", \"recipe\": \"\", \"max_ulp\": 0, \"calc_diff\": 0, \"first_mismatch\": null, \"reason\": \"\", " \
             "\"seed\": 1, \"kernel_ms\": 0, \"perf_value\": 0, \"perf_fraction\": 0"
#include "moects_tap.h"
#include "test_slurp.h"

static void expect_error(const char *text, const char *want)
{
    moects_known kf;
    char err[512] = "";
    cr_assert_eq(moects__known_parse(text, "kf.txt", &kf, err, sizeof err), -1, "accepted: %s", text);
    cr_assert_str_eq(err, want);
    cr_assert_eq(kf.n, 0);
    cr_assert_null(kf.v);
}

Test(known, parses_entries_comments_and_blanks)
{
    const char *text = "# known findings\n"
                       "\n"
                       "   # indented comment\n"
                       "cpu.fp4_gemm.dequant_sgemm  fp4_gemm.mxfp4/*/adversarial  UE8M0 codes >= 253: 6 * 2^127 > FLT_MAX\n"
                       "\tcuda.*\t\tep_gather/regression/addr64-*/h[37]*\t a reason # with a hash kept \r\n"
                       "x y z";
    moects_known kf;
    char err[512] = "";
    cr_assert_eq(moects__known_parse(text, "kf.txt", &kf, err, sizeof err), 0, "%s", err);
    cr_assert_eq(kf.n, 3);
    cr_assert_str_eq(kf.v[0].kernel_glob, "cpu.fp4_gemm.dequant_sgemm");
    cr_assert_str_eq(kf.v[0].case_glob, "fp4_gemm.mxfp4/*/adversarial");
    cr_assert_str_eq(kf.v[0].reason, "UE8M0 codes >= 253: 6 * 2^127 > FLT_MAX");
    cr_assert_eq(kf.v[0].line, 4);
    cr_assert_str_eq(kf.v[1].kernel_glob, "cuda.*");
    cr_assert_str_eq(kf.v[1].case_glob, "ep_gather/regression/addr64-*/h[37]*");
    cr_assert_str_eq(kf.v[1].reason, "a reason # with a hash kept"); /* '#' only comments a whole line */
    cr_assert_eq(kf.v[1].line, 5);
    cr_assert_str_eq(kf.v[2].reason, "z"); /* last line without a newline */
    cr_assert_eq(kf.v[2].line, 6);
    moects__known_free(&kf);
    cr_assert_eq(kf.n, 0);

    cr_assert_eq(moects__known_parse("", "kf.txt", &kf, err, sizeof err), 0);
    cr_assert_eq(kf.n, 0);
    cr_assert_eq(moects__known_parse("# only\n\n  \n", "kf.txt", &kf, err, sizeof err), 0);
    cr_assert_eq(kf.n, 0);
}

Test(known, malformed_lines_are_one_line_errors)
{
    expect_error("# c\ncpu.k\n", "kf.txt:2: missing CASE_GLOB (want: KERNEL_GLOB CASE_GLOB reason...)");
    expect_error("cpu.k ep_gather/a\n", "kf.txt:1: missing reason (want: KERNEL_GLOB CASE_GLOB reason...)");
    expect_error("cpu.k ep_gather/a   \t \n", "kf.txt:1: missing reason (want: KERNEL_GLOB CASE_GLOB reason...)");
    expect_error("\n\ncpu.k * everything fails\n",
                 "kf.txt:3: CASE_GLOB \"*\": matches everything (a blanket): name the class of cases");
    expect_error("*?* ep_gather/a r\n",
                 "kf.txt:1: KERNEL_GLOB \"*?*\": matches everything (a blanket): name the class of cases");
    expect_error("cpu.k */[ab r\n", "kf.txt:1: CASE_GLOB \"*/[ab\": unclosed '['");
    expect_error("cpu.k a/b first\ncpu.k a/b second\n", "kf.txt:2: same KERNEL_GLOB and CASE_GLOB as line 1");
    expect_error("cpu.k a/b bell\a\n", "kf.txt:1: control character in the line");
    char line[400];
    memset(line, 'r', sizeof line);
    memcpy(line, "cpu.k a/b ", 10);
    line[10 + 256] = '\0'; /* a reason of 256 bytes */
    expect_error(line, "kf.txt:1: reason longer than 255 bytes");
    line[10 + 255] = '\0'; /* 255: the most allowed */
    moects_known kf;
    char err[512];
    cr_assert_eq(moects__known_parse(line, "kf.txt", &kf, err, sizeof err), 0, "%s", err);
    cr_assert_eq(strlen(kf.v[0].reason), 255);
    moects__known_free(&kf);
}

Test(known, load_missing_file_is_empty_and_names_the_file)
{
    moects_known kf;
    char err[512] = "";
    cr_assert_eq(moects__known_load("/nonexistent/known-findings.txt", &kf, err, sizeof err), 0);
    cr_assert_eq(kf.n, 0);
    char path[] = "/tmp/moects_known_XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    const char *text = "# ok\na.b c/d fine\nbroken-line\n";
    cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    cr_assert_eq(moects__known_load(path, &kf, err, sizeof err), -1);
    char want[128];
    snprintf(want, sizeof want, "%s:3: missing CASE_GLOB (want: KERNEL_GLOB CASE_GLOB reason...)", path);
    cr_assert_str_eq(err, want);
    unlink(path);
}

Test(known, match_first_entry_in_file_order)
{
    moects_known kf;
    char err[512];
    cr_assert_eq(moects__known_parse("cpu.fp4_gemm.dequant_* fp4_gemm.mxfp4/*/adversarial first\n"
                                    "cpu.* fp4_gemm.*/regression/* second\n",
                                    "kf.txt", &kf, err, sizeof err),
                 0, "%s", err);
    const moects_known_entry *e;
    e = moects__known_match(&kf, "cpu.fp4_gemm.dequant_sgemm", "fp4_gemm.mxfp4/regression/k-tail/n256/k48/m16/adversarial");
    cr_assert_not_null(e);
    cr_assert_str_eq(e->reason, "first"); /* both match: the first line wins */
    e = moects__known_match(&kf, "cpu.fp4_gemm.blockwise", "fp4_gemm.mxfp4/regression/k-tail/n256/k48/m16/adversarial");
    cr_assert_str_eq(e->reason, "second");
    /* '*' crosses '/' (fnmatch flags 0): kimi-k3/tp8/gemm1/m100 is one '*' */
    cr_assert_not_null(moects__known_match(&kf, "cpu.fp4_gemm.dequant_sgemm", "fp4_gemm.mxfp4/kimi-k3/tp8/gemm1/m100/adversarial"));
    /* neither: NVFP4, nan data, another kernel family */
    cr_assert_null(moects__known_match(&kf, "cpu.fp4_gemm.dequant_sgemm", "fp4_gemm.nvfp4/kimi-k3/tp8/gemm1/m100/adversarial"));
    cr_assert_null(moects__known_match(&kf, "cpu.fp4_gemm.dequant_sgemm", "fp4_gemm.mxfp4/kimi-k3/tp8/gemm2/m16/nan"));
    cr_assert_null(moects__known_match(&kf, "cuda.fp4_gemm.dequant_cublas", "fp4_gemm.mxfp4/kimi-k3/tp8/gemm1/m100/adversarial"));
    cr_assert_null(moects__known_match(NULL, "a", "b"));
    moects__known_free(&kf);
}

Test(known, check_cases_names_a_stale_entry)
{
    moects_case_list all = {0};
    moects_case c;
    memset(&c, 0, sizeof c);
    strcpy(c.id, "fp4_gemm.mxfp4/m/tp8/gemm1/m100/adversarial");
    cr_assert_eq(moects__case_list_push(&all, &c), 0);
    moects_known kf;
    char err[512] = "";
    cr_assert_eq(moects__known_parse("k fp4_gemm.mxfp4/*/adversarial ok\n# gone:\nk fp4_gemm.nvfp4/*/adversarial stale\n",
                                    "kf.txt", &kf, err, sizeof err),
                 0);
    cr_assert_eq(moects__known_check_cases(&kf, "kf.txt", &all, err, sizeof err), -1);
    cr_assert_str_eq(err, "kf.txt:3: CASE_GLOB \"fp4_gemm.nvfp4/*/adversarial\" matches no registered case");
    kf.n = 1; /* the first entry alone is fine */
    cr_assert_eq(moects__known_check_cases(&kf, "kf.txt", &all, err, sizeof err), 0);
    kf.n = 2;
    moects__known_free(&kf);
    moects__case_list_free(&all);
}

/* ---- a run with known findings ---- */

static const moects_kernel k_tol = {.abi_version = MOECTS_KERNEL_ABI_VERSION, .name = "cpu.fp4_gemm.dequant_sgemm",
                                    .op = MOECTS_OP_FP4_GEMM, .tol = {1e-5, 4294967295u}};
static const moects_kernel k_mut = {.abi_version = MOECTS_KERNEL_ABI_VERSION, .name = "cpu.mutant.fp4_gemm.x",
                                    .op = MOECTS_OP_FP4_GEMM, .recipe = "fp4_gemm.blockwise_v1", .bug = "a bug"};

static void add(moects_run *run, const moects_kernel *k, const char *id, moects_verdict v)
{
    moects_result r;
    memset(&r, 0, sizeof r);
    snprintf(r.kernel, sizeof r.kernel, "%s", k->name);
    snprintf(r.case_id, sizeof r.case_id, "%s", id);
    snprintf(r.model, sizeof r.model, "m");
    snprintf(r.layout, sizeof r.layout, "tp8");
    r.op = k->op;
    r.is_mutant = k->bug != NULL;
    r.verdict = v;
    r.first_index = -1;
    r.seed = 1;
    cr_assert_eq(moects__run_push(run, &r), 0);
}

#define ADV "fp4_gemm.mxfp4/m/tp8/gemm1/m100/adversarial"
#define NAN_ID "fp4_gemm.mxfp4/m/tp8/gemm2/m16/nan"
#define PLAIN "fp4_gemm.mxfp4/m/tp8/gemm1/m16"

static moects_known entries(const char *text)
{
    moects_known kf;
    char err[512] = "";
    cr_assert_eq(moects__known_parse(text, "kf.txt", &kf, err, sizeof err), 0, "%s", err);
    return kf;
}

Test(known, apply_marks_honest_fail_and_pass_only)
{
    moects_run run = {0};
    add(&run, &k_tol, PLAIN, MOECTS_PASS_TOLERANCE);
    add(&run, &k_mut, PLAIN, MOECTS_FAIL_MISMATCH);
    add(&run, &k_tol, ADV, MOECTS_FAIL_MISMATCH);
    add(&run, &k_mut, ADV, MOECTS_FAIL_MISMATCH);
    add(&run, &k_tol, NAN_ID, MOECTS_UNSUPPORTED);
    moects_known kf = entries("cpu.* */adversarial overflow\ncpu.fp4_gemm.dequant_sgemm */nan nan reason\n");
    cr_assert_eq(moects__known_apply(&kf, &run), 1);
    cr_assert_str_eq(run.v[0].known, "");           /* no entry matches */
    cr_assert_str_eq(run.v[1].known, "");           /* a mutant: never known */
    cr_assert_str_eq(run.v[2].known, "overflow");   /* honest FAIL_MISMATCH */
    cr_assert_str_eq(run.v[3].known, "");           /* mutant, though cpu.* matches it */
    cr_assert_str_eq(run.v[4].known, "");           /* UNSUPPORTED is neither a pass nor a fail */
    /* honest kernel: known failure only -> PASS status, run not failed */
    size_t fixed = 99;
    cr_assert_eq(moects__kernel_status_of(&run, k_tol.name, 0, NULL), MOECTS_KS_PASS);
    cr_assert_eq(moects__kernel_known_of(&run, k_tol.name, 0, &fixed), 1);
    cr_assert_eq(fixed, 0);
    cr_assert_eq(moects__kernel_status_of(&run, k_mut.name, 1, NULL), MOECTS_KS_CAUGHT);
    cr_assert_eq(moects__kernel_known_of(&run, k_mut.name, 1, NULL), 0);
    /* the same failure without the entry fails the kernel */
    moects_known none = {0};
    moects__known_apply(&none, &run);
    cr_assert_eq(moects__kernel_status_of(&run, k_tol.name, 0, NULL), MOECTS_KS_FAIL);
    /* an entry on a passing case: "fixed?" */
    moects_known kf2 = entries("cpu.fp4_gemm.dequant_sgemm fp4_gemm.mxfp4/m/tp8/gemm1/* was broken\n");
    cr_assert_eq(moects__known_apply(&kf2, &run), 1);
    cr_assert_str_eq(run.v[0].known, "was broken");
    cr_assert_eq(moects__kernel_known_of(&run, k_tol.name, 0, &fixed), 1);
    cr_assert_eq(fixed, 1);
    cr_assert_eq(moects__kernel_status_of(&run, k_tol.name, 0, NULL), MOECTS_KS_PASS);
    /* a host-dependent entry: its failure is known, a pass (another host) is not "fixed?" */
    moects_known kf3 = entries("cpu.fp4_gemm.dequant_sgemm fp4_gemm.mxfp4/m/tp8/* host-dependent: unfused BLAS\n");
    cr_assert_eq(moects__known_apply(&kf3, &run), 1);
    cr_assert_str_eq(run.v[0].known, "");
    cr_assert_str_eq(run.v[2].known, "host-dependent: unfused BLAS");
    cr_assert_eq(moects__kernel_known_of(&run, k_tol.name, 0, &fixed), 1);
    cr_assert_eq(fixed, 0);
    moects__known_free(&kf3);
    moects__known_free(&kf);
    moects__known_free(&kf2);
    moects__run_free(&run);
}

Test(known, an_unknown_failure_still_fails_the_kernel)
{
    moects_run run = {0};
    add(&run, &k_tol, ADV, MOECTS_FAIL_MISMATCH);
    add(&run, &k_tol, PLAIN, MOECTS_FAIL_CRASH);
    moects_known kf = entries("cpu.fp4_gemm.dequant_sgemm */adversarial overflow\n");
    cr_assert_eq(moects__known_apply(&kf, &run), 1);
    cr_assert_eq(moects__kernel_status_of(&run, k_tol.name, 0, NULL), MOECTS_KS_FAIL);
    const moects_kernel *ks[] = {&k_tol};
    moects_tap_opts o = {.version = 13};
    char *tap = moects__tap_render(&run, ks, 1, &o, NULL);
    cr_assert_not_null(strstr(tap, "not ok 1 - cpu.fp4_gemm.dequant_sgemm: 1 of 2 cases fail (and 1 known finding)\n"), "%s", tap);
    /* the YAML list of failures names the unknown one only */
    cr_assert_not_null(strstr(tap, "  known_findings: 1\n  failed:\n    - \"" PLAIN "\"\n  ...\n"), "%s", tap);
    free(tap);
    moects__known_free(&kf);
    moects__run_free(&run);
}

Test(known, tap_todo_summary_and_results_json)
{
    moects_run run = {0};
    snprintf(run.moects_version, sizeof run.moects_version, "0.1");
    add(&run, &k_tol, PLAIN, MOECTS_PASS_TOLERANCE);
    add(&run, &k_mut, PLAIN, MOECTS_FAIL_MISMATCH);
    add(&run, &k_tol, ADV, MOECTS_FAIL_MISMATCH);
    add(&run, &k_mut, ADV, MOECTS_FAIL_MISMATCH);
    add(&run, &k_tol, NAN_ID, MOECTS_PASS_TOLERANCE);
    moects_known kf = entries("cpu.fp4_gemm.dequant_sgemm */adversarial overflow # FP32\n"
                              "cpu.fp4_gemm.dequant_sgemm */nan old entry\n");
    moects__known_apply(&kf, &run);
    const moects_kernel *ks[] = {&k_tol, &k_mut};
    moects_tap_opts o = {.version = 13};
    char *tap = moects__tap_render(&run, ks, 2, &o, NULL);
    cr_assert_not_null(strstr(tap, "    ok 1 - " PLAIN "\n"), "%s", tap);
    cr_assert_not_null(strstr(tap, "    not ok 2 - " ADV " # TODO known finding: overflow # FP32\n"), "%s", tap);
    cr_assert_not_null(strstr(tap, "      known: \"overflow # FP32\"\n"), "%s", tap);
    cr_assert_not_null(strstr(tap, "    ok 3 - " NAN_ID "\n"), "%s", tap); /* a pass gets no TODO */
    cr_assert_not_null(strstr(tap, "ok 1 - cpu.fp4_gemm.dequant_sgemm: 2 of 3 cases pass, 1 known finding (TODO), "
                                   "1 known finding now passes (fixed?)\n"),
                       "%s", tap);
    cr_assert_not_null(strstr(tap, "    not ok 2 - " ADV " # TODO mutant: a bug\n"), "%s", tap);
    cr_assert_not_null(strstr(tap, "ok 2 - cpu.mutant.fp4_gemm.x: mutant caught by 2 of 2 cases\n"), "%s", tap);
    free(tap);

    char *sum = moects__summary_render(&run, ks, 2, &o, NULL);
    cr_assert_not_null(strstr(sum, "| `cpu.fp4_gemm.dequant_sgemm` | kernel | 0 | 0 | 2 | 0 | 1 | 0 | 0 | 0 | 0 | 0 | 0 | 0 | 0 | pass (1 known finding) |"), "%s", sum);
    cr_assert_not_null(strstr(sum, "Known findings: 1 of the FAIL_* results above is a known finding of honest kernels"), "%s", sum);
    cr_assert_null(strstr(sum, "## Failures (honest kernels)"), "%s", sum);
    cr_assert_not_null(strstr(sum, "| `cpu.fp4_gemm.dequant_sgemm` | `" ADV "` | FAIL_MISMATCH | overflow # FP32 |"), "%s", sum);
    cr_assert_not_null(strstr(sum, "## Known findings that now pass: fixed? remove from known-findings"), "%s", sum);
    cr_assert_not_null(strstr(sum, "| `cpu.fp4_gemm.dequant_sgemm` | `" NAN_ID "` | PASS_TOLERANCE | old entry "
                                   "(fixed? remove from known-findings) |"),
                       "%s", sum);
    free(sum);

    /* results.json: "known" written on the two marked results only, read back */
    char dir[] = "/tmp/moects_knownjson_XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char path[128], err[512] = "";
    snprintf(path, sizeof path, "%s/results.json", dir);
    cr_assert_eq(moects__results_write(path, &run, err, sizeof err), 0, "%s", err);
    FILE *f = fopen(path, "r");
    char text[8192];
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    int count = 0;
    for (const char *p = text; (p = strstr(p, "\"known\": ")); p++) count++;
    cr_assert_eq(count, 2, "%s", text);
    cr_assert_not_null(strstr(text, "\"reason\": \"\", \"known\": \"overflow # FP32\", \"seed\": 1"), "%s", text);
    moects_run back;
    cr_assert_eq(moects__results_read(path, &back, err, sizeof err), 0, "%s", err);
    cr_assert_eq(back.n, 5);
    cr_assert_str_eq(back.v[2].known, "overflow # FP32");
    cr_assert_str_eq(back.v[4].known, "old entry");
    cr_assert_str_eq(back.v[0].known, "");
    cr_assert_eq(moects__kernel_status_of(&back, k_tol.name, 0, NULL), MOECTS_KS_PASS);
    moects__run_free(&back);

    /* the reader is strict about "known": a string, and only on an honest FAIL_* / PASS_* (the
     * other fields are all required: RUN_TOP and REST fill them in) */
    static const struct {
        const char *field, *want;
    } bad[] = {
        {"\"mutant\": false, \"verdict\": \"FAIL_MISMATCH\", \"known\": 5", "results[0].known: expected a string, got an integer"},
        {"\"mutant\": true, \"verdict\": \"FAIL_MISMATCH\", \"known\": \"x\"",
         "results[0].known: only on a FAIL_* or PASS_* result of an honest kernel (not on a mutant's FAIL_MISMATCH)"},
        {"\"mutant\": false, \"verdict\": \"SKIP\", \"known\": \"x\"",
         "results[0].known: only on a FAIL_* or PASS_* result of an honest kernel (not on SKIP)"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        f = fopen(path, "w");
        fprintf(f, RUN_TOP "{\"kernel\": \"k\", \"case\": \"c\", \"model\": \"m\", "
                   "\"layout\": \"-\", \"op\": \"fp4_gemm\", %s, \"mismatches\": 0" REST "}]}\n",
                bad[i].field);
        fclose(f);
        cr_assert_eq(moects__results_read(path, &back, err, sizeof err), -1, "%s", bad[i].field);
        char want[512];
        snprintf(want, sizeof want, "%s: %s", path, bad[i].want);
        cr_assert_str_eq(err, want);
    }
    unlink(path);
    rmdir(dir);
    moects__known_free(&kf);
    moects__run_free(&run);
}

/* ---- moects gate on a run with known findings ---- */

#include "moects_commands.h"

/* k.tol fails ADV (known or not, per `known`), passes NAN_ID (an entry matches it: "fixed?"); a
 * mutant is caught on ADV; the must-pass list holds ADV. */
static int gate_on(const char *dir, int known, char **summary_text)
{
    char run_path[128], mp[128], sum[128];
    snprintf(run_path, sizeof run_path, "%s/run.json", dir);
    snprintf(mp, sizeof mp, "%s/mustpass.txt", dir);
    snprintf(sum, sizeof sum, "%s/summary.md", dir);
    FILE *f = fopen(run_path, "w");
    fprintf(f,
            RUN_TOP "\n"
            "{\"kernel\": \"k.tol\", \"case\": \"" ADV "\", \"model\": \"m\", \"layout\": \"tp8\", \"op\": \"fp4_gemm\", "
            "\"mutant\": false, \"verdict\": \"FAIL_MISMATCH\", \"mismatches\": 3" REST "%s},\n"
            "{\"kernel\": \"k.exact\", \"case\": \"" ADV "\", \"model\": \"m\", \"layout\": \"tp8\", \"op\": \"fp4_gemm\", "
            "\"mutant\": false, \"verdict\": \"PASS_EXACT\", \"mismatches\": 0" REST "},\n"
            "{\"kernel\": \"m.x\", \"case\": \"" ADV "\", \"model\": \"m\", \"layout\": \"tp8\", \"op\": \"fp4_gemm\", "
            "\"mutant\": true, \"verdict\": \"FAIL_MISMATCH\", \"mismatches\": 0" REST "},\n"
            "{\"kernel\": \"k.tol\", \"case\": \"" NAN_ID "\", \"model\": \"m\", \"layout\": \"tp8\", \"op\": \"fp4_gemm\", "
            "\"mutant\": false, \"verdict\": \"PASS_TOLERANCE\", \"known\": \"old\", \"mismatches\": 0" REST "}]}\n",
            known ? ", \"known\": \"overflow\"" : "");
    fclose(f);
    f = fopen(mp, "w");
    fputs(ADV "\n", f);
    fclose(f);
    cr_assert_not_null(freopen("/dev/null", "w", stdout));
    const char *argv[] = {"gate", run_path, "--mustpass", mp, "--summary", sum};
    int rc = moects__cmd_gate(6, (char **)argv);
    *summary_text = slurp(sum);
    return rc;
}

Test(known, gate_counts_known_findings_apart)
{
    char dir[] = "/tmp/moects_knowngate_XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char *s;
    cr_assert_eq(gate_on(dir, 1, &s), 0);
    cr_assert_not_null(strstr(s, "## moects gate: PASS\n"), "%s", s);
    cr_assert_not_null(strstr(s, "1 honest failure is a known finding (cases/known-findings.txt; not gating):\n\n"
                                 "- `k.tol`: 1 case: overflow\n"),
                       "%s", s);
    cr_assert_not_null(strstr(s, "1 passing result matches a known-findings entry: fixed?"), "%s", s);
    free(s);
    /* the same failure without "known": one new failure (must-pass does not list it twice, and
     * k.exact passed the case) */
    cr_assert_eq(gate_on(dir, 0, &s), 1);
    cr_assert_not_null(strstr(s, "## moects gate: FAIL (1 problem)\n"), "%s", s);
    cr_assert_not_null(strstr(s, "**new failure** `" ADV "` on `k.tol`"), "%s", s);
    free(s);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
}
