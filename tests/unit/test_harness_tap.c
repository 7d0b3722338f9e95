/* Tests of harness/report/tap.c: the TAP text of a hand-built run, line by line as DESIGN.md "Harness"
 * prescribes, and (when perl is installed) Perl TAP::Parser reading it without parse errors. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "moects_tap.h"

static const moects_kernel k_honest = {.abi_version = MOECTS_KERNEL_ABI_VERSION, .name = "cpu.ep_gather",
                                       .op = MOECTS_OP_EP_GATHER, .recipe = "ep_gather.fma_v1"};
static const moects_kernel k_mut = {.abi_version = MOECTS_KERNEL_ABI_VERSION, .name = "cpu.mutant.ep_gather.block",
                                    .op = MOECTS_OP_EP_GATHER, .recipe = "ep_gather.fma_v1",
                                    .bug = "block size min(H, 1024) # assumed to divide H"};
static const moects_kernel k_esc = {.abi_version = MOECTS_KERNEL_ABI_VERSION, .name = "cpu.mutant.escapes",
                                    .op = MOECTS_OP_EP_GATHER, .recipe = "ep_gather.fma_v1", .bug = "int32 addressing"};
static const moects_kernel k_uns = {.abi_version = MOECTS_KERNEL_ABI_VERSION, .name = "cuda.ep_gather",
                                    .op = MOECTS_OP_EP_GATHER, .recipe = "ep_gather.fma_v1"};

static void add(moects_run *run, const moects_kernel *k, const char *id, moects_verdict v, const char *reason)
{
    moects_result r;
    memset(&r, 0, sizeof r);
    snprintf(r.kernel, sizeof r.kernel, "%s", k->name);
    snprintf(r.case_id, sizeof r.case_id, "%s", id);
    snprintf(r.recipe, sizeof r.recipe, "%s", k->recipe);
    snprintf(r.reason, sizeof r.reason, "%s", reason);
    r.op = k->op;
    r.is_mutant = k->bug != NULL;
    r.verdict = v;
    r.first_index = -1;
    r.seed = 42;
    if (v == MOECTS_FAIL_MISMATCH) {
        r.mismatches = 3;
        r.max_ulp = 2;
        r.first_index = 17;
        snprintf(r.got, sizeof r.got, "0x3f80 (1)");
        snprintf(r.want, sizeof r.want, "0x3f81 (1.0078125)");
        r.calc_diff = 0.25;
    }
    cr_assert_eq(moects__run_push(run, &r), 0);
}

static moects_run sample(void)
{
    moects_run run;
    memset(&run, 0, sizeof run);
    snprintf(run.moects_version, sizeof run.moects_version, "0.1");
    snprintf(run.commit, sizeof run.commit, "abc123");
    run.seed = 42;
    /* case-major order, as the runner produces it */
    add(&run, &k_honest, "ep_gather/a/tp1/t1", MOECTS_PASS_EXACT, "");
    add(&run, &k_mut, "ep_gather/a/tp1/t1", MOECTS_PASS_EXACT, "");
    add(&run, &k_esc, "ep_gather/a/tp1/t1", MOECTS_PASS_EXACT, "");
    add(&run, &k_uns, "ep_gather/a/tp1/t1", MOECTS_SKIP, "no CUDA device");
    add(&run, &k_honest, "ep_gather/b#1/tp8/t2", MOECTS_FAIL_MISMATCH, "");
    add(&run, &k_mut, "ep_gather/b#1/tp8/t2", MOECTS_FAIL_CRASH, "worker killed by signal 11 (\"SEGV\")\nback\\slash");
    add(&run, &k_esc, "ep_gather/b#1/tp8/t2", MOECTS_UNSUPPORTED, "H % 1024 != 0");
    add(&run, &k_uns, "ep_gather/b#1/tp8/t2", MOECTS_UNSUPPORTED, "needs sm_100");
    return run;
}

static const moects_kernel *const kernels[] = {&k_honest, &k_mut, &k_esc, &k_uns};

static const char *expected13 =
    "TAP version 13\n"
    "1..5\n"
    "# moects 0.1 seed 42 commit abc123\n"
    "# Subtest: cpu.ep_gather\n"
    "    1..2\n"
    "    ok 1 - ep_gather/a/tp1/t1\n"
    "    not ok 2 - ep_gather/b\\#1/tp8/t2\n"
    "      ---\n"
    "      verdict: FAIL_MISMATCH\n"
    "      kernel: \"cpu.ep_gather\"\n"
    "      recipe: \"ep_gather.fma_v1\"\n"
    "      mismatches: 3\n"
    "      max_ulp: 2\n"
    "      first_mismatch:\n"
    "        index: 17\n"
    "        got: \"0x3f80 (1)\"\n"
    "        want: \"0x3f81 (1.0078125)\"\n"
    "      calc_diff: 0.25\n"
    "      seed: 42\n"
    "      repro: \"moects run --kernel 'cpu.ep_gather' --seed 42 --out reports/repro/ep_gather_b_1_tp8_t2 'ep_gather/b#1/tp8/t2'\"\n"
    "      ...\n"
    "not ok 1 - cpu.ep_gather: 1 of 2 cases fail\n"
    "  ---\n"
    "  kernel: \"cpu.ep_gather\"\n"
    "  cases: 2\n"
    "  PASS_EXACT: 1\n"
    "  FAIL_MISMATCH: 1\n"
    "  failed:\n"
    "    - \"ep_gather/b#1/tp8/t2\"\n"
    "  ...\n"
    "# Subtest: cpu.mutant.ep_gather.block\n"
    "    1..2\n"
    "    ok 1 - ep_gather/a/tp1/t1\n"
    "    not ok 2 - ep_gather/b\\#1/tp8/t2 # TODO mutant: block size min(H, 1024) # assumed to divide H\n"
    "      ---\n"
    "      verdict: FAIL_CRASH\n"
    "      kernel: \"cpu.mutant.ep_gather.block\"\n"
    "      recipe: \"ep_gather.fma_v1\"\n"
    "      mismatches: 0\n"
    "      max_ulp: 0\n"
    "      first_mismatch: ~\n"
    "      calc_diff: 0\n"
    "      seed: 42\n"
    "      reason: \"worker killed by signal 11 (\\\"SEGV\\\")\\x0aback\\\\slash\"\n"
    "      repro: \"moects run --kernel 'cpu.mutant.ep_gather.block' --seed 42 --out reports/repro/ep_gather_b_1_tp8_t2 'ep_gather/b#1/tp8/t2'\"\n"
    "      ...\n"
    "ok 2 - cpu.mutant.ep_gather.block: mutant caught by 1 of 2 cases\n"
    "# Subtest: cpu.mutant.escapes\n"
    "    1..2\n"
    "    ok 1 - ep_gather/a/tp1/t1\n"
    "    ok 2 - ep_gather/b\\#1/tp8/t2 # SKIP UNSUPPORTED: H % 1024 != 0\n"
    "not ok 3 - cpu.mutant.escapes: mutant escaped, passed all 1 exercised cases\n"
    "  ---\n"
    "  kernel: \"cpu.mutant.escapes\"\n"
    "  cases: 2\n"
    "  PASS_EXACT: 1\n"
    "  UNSUPPORTED: 1\n"
    "  bug: \"int32 addressing\"\n"
    "  ...\n"
    "# Subtest: cuda.ep_gather\n"
    "    1..2\n"
    "    ok 1 - ep_gather/a/tp1/t1 # SKIP no CUDA device\n"
    "    ok 2 - ep_gather/b\\#1/tp8/t2 # SKIP UNSUPPORTED: needs sm_100\n"
    "ok 4 - cuda.ep_gather # SKIP no case exercised it (1 UNSUPPORTED, 1 SKIP): no CUDA device\n"
    "not ok 5 - must-pass case ep_gather/zz/tp1/t1 is not registered (mp.txt)\n";

Test(tap, full_text_v13)
{
    moects_run run = sample();
    char *missing[] = {"ep_gather/zz/tp1/t1"};
    moects_tap_opts o = {.version = 13, .missing = missing, .nmissing = 1, .missing_file = "mp.txt"};
    size_t len;
    char *t = moects__tap_render(&run, kernels, 4, &o, &len);
    cr_assert_not_null(t);
    cr_assert_eq(len, strlen(t));
    cr_assert_str_eq(t, expected13);
    free(t);
    moects__run_free(&run);
}

Test(tap, version14_header_and_verbose_yaml_on_pass)
{
    moects_run run = sample();
    moects_tap_opts o = {.version = 14, .verbose = 1, .repro_extra = " --kernel-lib 'x.so'"};
    char *t = moects__tap_render(&run, kernels, 1, &o, NULL);
    cr_assert(strncmp(t, "TAP version 14\n1..1\n", 20) == 0, "%s", t);
    cr_assert_not_null(strstr(t, "    ok 1 - ep_gather/a/tp1/t1\n      ---\n      verdict: PASS_EXACT\n"));
    cr_assert_not_null(strstr(t, "--seed 42 --out reports/repro/ep_gather_a_tp1_t1 --kernel-lib 'x.so' 'ep_gather/a/tp1/t1'"));
    free(t);
    moects__run_free(&run);
}

Test(tap, empty_run_has_skip_plan)
{
    moects_run run;
    memset(&run, 0, sizeof run);
    moects_tap_opts o = {.version = 13, .empty_reason = "no cases in shard 3/4"};
    char *t = moects__tap_render(&run, kernels, 4, &o, NULL);
    cr_assert(strncmp(t, "TAP version 13\n1..0 # SKIP no cases in shard 3/4\n", 48) == 0, "%s", t);
    free(t);
}

Test(tap, status_rules)
{
    moects_run run = sample();
    cr_assert_eq(moects__kernel_status_of(&run, "cpu.ep_gather", 0, NULL), MOECTS_KS_FAIL);
    cr_assert_eq(moects__kernel_status_of(&run, "cpu.mutant.ep_gather.block", 1, NULL), MOECTS_KS_CAUGHT);
    cr_assert_eq(moects__kernel_status_of(&run, "cpu.mutant.escapes", 1, NULL), MOECTS_KS_ESCAPED);
    cr_assert_eq(moects__kernel_status_of(&run, "cuda.ep_gather", 0, NULL), MOECTS_KS_NOT_EXERCISED);
    cr_assert(moects__kernel_status_fails(MOECTS_KS_FAIL));
    cr_assert(moects__kernel_status_fails(MOECTS_KS_ESCAPED));
    cr_assert_not(moects__kernel_status_fails(MOECTS_KS_CAUGHT));
    cr_assert_not(moects__kernel_status_fails(MOECTS_KS_NOT_EXERCISED));
    moects__run_free(&run);
}

Test(tap, shell_quote)
{
    char *b = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&b, &n);
    moects__shell_quote_file(f, "it's");
    fclose(f);
    cr_assert_str_eq(b, "'it'\\''s'");
    free(b);
}

/* Perl's TAP::Parser (the parser prove uses) must read the text without parse errors and
 * see the top-level points with the expected pass/fail and directives. */
Test(tap, perl_tap_parser_accepts_it)
{
    if (system("perl -MTAP::Parser -e 1 >/dev/null 2>&1") != 0) cr_skip_test("perl TAP::Parser not installed");
    moects_run run = sample();
    char *missing[] = {"ep_gather/zz/tp1/t1"};
    moects_tap_opts o = {.version = 13, .verbose = 1, .missing = missing, .nmissing = 1, .missing_file = "mp.txt"};
    char *t = moects__tap_render(&run, kernels, 4, &o, NULL);
    char path[] = "/tmp/moects_tap_XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, t, strlen(t)), (ssize_t)strlen(t));
    close(fd);
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "perl -MTAP::Parser -e 'open F, $ARGV[0] or die; local $/; $t = <F>; $p = TAP::Parser->new({tap => $t}); "
             "while ($r = $p->next) { print $r->is_ok ? \"ok\" : \"nok\", $r->has_skip ? \"+skip\" : \"\", "
             "\"\\n\" if $r->is_test; } print \"errors:\", scalar($p->parse_errors), \"\\n\"; "
             "print \"$_\\n\" for $p->parse_errors;' %s",
             path);
    FILE *p = popen(cmd, "r");
    char out[512] = "";
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    pclose(p);
    unlink(path);
    cr_assert_str_eq(out, "nok\nok\nnok\nok+skip\nnok\nerrors:0\n");
    free(t);
    moects__run_free(&run);
}

Test(summary, counts_per_kernel)
{
    moects_run run = sample();
    moects_tap_opts o = {.version = 13};
    char *s = moects__summary_render(&run, kernels, 4, &o, NULL);
    cr_assert_not_null(strstr(s, "| `cpu.ep_gather` | kernel | 1 | 0 | 0 | 0 | 1 | 0 | 0 | 0 | 0 | 0 | 0 | 0 | 0 | **FAIL** |"), "%s", s);
    cr_assert_not_null(strstr(s, "| `cpu.mutant.escapes` | mutant | 1 | 0 | 0 | 0 | 0 | 0 | 0 | 0 | 0 | 0 | 1 | 0 | 0 | **ESCAPED** |"));
    cr_assert_not_null(strstr(s, "| total | | 3 | 0 | 0 | 0 | 1 | 1 | 0 | 0 | 0 | 0 | 2 | 1 |"));
    free(s);
    moects__run_free(&run);
}

/* A shard cannot judge a mutant that escapes it (another shard may catch it): its point is "ok"
 * with a TODO directive and no failure YAML; the honest failure stays "not ok". */
Test(tap, shard_escape_is_todo)
{
    moects_run run = sample();
    snprintf(run.shard, sizeof run.shard, "0/2");
    moects_tap_opts o = {.version = 13};
    size_t len = 0;
    char *t = moects__tap_render(&run, kernels, 4, &o, &len);
    cr_assert_not_null(t);
    cr_assert_not_null(strstr(t, "\nok 3 - cpu.mutant.escapes: mutant escaped in this shard, passed all 1 exercised "
                                 "cases # TODO judged on the merged run (moects merge)\n# Subtest"),
                       "%s", t);
    cr_assert_not_null(strstr(t, "\nnot ok 1 - cpu.ep_gather: 1 of 2 cases fail\n"), "%s", t);
    cr_assert_null(strstr(t, "  bug: "), "%s", t);
    free(t);
    char *s = moects__summary_render(&run, kernels, 4, &o, &len);
    cr_assert_not_null(s);
    cr_assert_not_null(strstr(s, "escaped in this shard (judged on the merged run) |"), "%s", s);
    free(s);
    moects__run_free(&run);
}

/* UNSUPPORTED is a gap, never a pass: an honest kernel that refused every case it was given fails;
 * one whose cases were also SKIPped (no GPU here) was only not exercised. */
Test(tap, refused_every_case_fails)
{
    moects_run run;
    memset(&run, 0, sizeof run);
    add(&run, &k_honest, "ep_gather/a/tp1/t1", MOECTS_UNSUPPORTED, "H % 7 != 0");
    add(&run, &k_honest, "ep_gather/b/tp1/t1", MOECTS_UNSUPPORTED, "H % 7 != 0");
    add(&run, &k_uns, "ep_gather/a/tp1/t1", MOECTS_UNSUPPORTED, "needs sm_100");
    add(&run, &k_uns, "ep_gather/b/tp1/t1", MOECTS_SKIP, "no CUDA device");
    cr_assert_eq(moects__kernel_status_of(&run, "cpu.ep_gather", 0, NULL), MOECTS_KS_REFUSED);
    cr_assert(moects__kernel_status_fails(MOECTS_KS_REFUSED));
    cr_assert_eq(moects__kernel_status_of(&run, "cuda.ep_gather", 0, NULL), MOECTS_KS_NOT_EXERCISED);
    moects_tap_opts o = {.version = 13};
    char *t = moects__tap_render(&run, kernels, 4, &o, NULL);
    cr_assert_not_null(strstr(t, "\nnot ok 1 - cpu.ep_gather: refused all 2 cases it was given (UNSUPPORTED): "
                                 "H % 7 != 0\n  ---\n  kernel: \"cpu.ep_gather\"\n  cases: 2\n  UNSUPPORTED: 2\n"
                                 "  refused:\n    - \"ep_gather/a/tp1/t1\"\n    - \"ep_gather/b/tp1/t1\"\n  ...\n"),
                       "%s", t);
    cr_assert_not_null(strstr(t, "\nok 2 - cuda.ep_gather # SKIP no case exercised it (1 UNSUPPORTED, 1 SKIP)"), "%s", t);
    free(t);
    /* a shard may hold only cases the kernel refuses: TODO there, judged on the merged run */
    snprintf(run.shard, sizeof run.shard, "0/2");
    t = moects__tap_render(&run, kernels, 4, &o, NULL);
    cr_assert_not_null(strstr(t, "\nok 1 - cpu.ep_gather: refused all 2 cases it was given in this shard (UNSUPPORTED): "
                                 "H % 7 != 0 # TODO judged on the merged run (moects merge)\n"),
                       "%s", t);
    free(t);
    t = moects__summary_render(&run, kernels, 4, &o, NULL); /* the summary says the same */
    cr_assert_not_null(strstr(t, "| `cpu.ep_gather` | kernel | 0 | 0 | 0 | 0 | 0 | 0 | 0 | 0 | 0 | 0 | 2 | 0 | 0 | refused in this shard "
                                 "(judged on the merged run) |\n"),
                       "%s", t);
    free(t);
    moects__run_free(&run);
}

/* Must-pass lists: a case is judged when an honest kernel passed or failed it; a mutant's verdict or
 * SKIP/UNSUPPORTED alone leave it unjudged. Cases a..d worked out by hand below. */
Test(tap, unjudged_mustpass_cases)
{
    moects_run run;
    memset(&run, 0, sizeof run);
    add(&run, &k_uns, "ep_gather/d/tp1/t1", MOECTS_SKIP, "no CUDA device");               /* d: unjudged */
    add(&run, &k_honest, "ep_gather/d/tp1/t1", MOECTS_SKIP, "case d: out of host memory"); /* (first honest) */
    add(&run, &k_honest, "ep_gather/a/tp1/t1", MOECTS_PASS_EXACT, "");                     /* a: judged */
    add(&run, &k_mut, "ep_gather/c/tp1/t1", MOECTS_FAIL_CRASH, "SEGV");                    /* c: mutant only */
    add(&run, &k_honest, "ep_gather/b/tp1/t1", MOECTS_FAIL_MISMATCH, "");                  /* b: judged (fails) */
    const char **ids, **why;
    cr_assert_eq(moects__unjudged_cases(&run, &ids, &why), 2);
    cr_assert_str_eq(ids[0], "ep_gather/d/tp1/t1"); /* first-appearance order */
    cr_assert_str_eq(why[0], "no CUDA device");      /* cuda.ep_gather is honest too */
    cr_assert_str_eq(ids[1], "ep_gather/c/tp1/t1");
    cr_assert_str_eq(why[1], "no honest kernel selected");
    moects_tap_opts o = {.version = 13, .unjudged = ids, .unjudged_why = why, .nunjudged = 2};
    char *t = moects__tap_render(&run, kernels, 4, &o, NULL);
    cr_assert_not_null(strstr(t, "\n1..5\n"), "%s", t); /* 3 kernels with results + 2 unjudged cases */
    cr_assert_not_null(strstr(t, "\nnot ok 5 - must-pass case ep_gather/c/tp1/t1 was not judged: no honest kernel "
                                 "passed or failed it (no honest kernel selected)\n"),
                       "%s", t);
    free(t);
    free(ids);
    free(why);
    moects__run_free(&run);
}

/* moects__tap_yaml of one FAIL_MISMATCH with diagnostics (ep_gather, (t, d) coordinates) into a string. */
static char *yaml_of(const moects_result *r)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_not_null(f);
    moects_tap_opts o = {.version = 13};
    moects__tap_yaml(f, "", r, &o);
    fclose(f);
    return buf;
}

/* A diag whose n mismatches lie at (t 0, d i) for i < n, each with ULP distance ulp(i); first and
 * worst filled as harness/judge/diag.c keeps them (worst: largest first, earlier first among equals). */
static moects_result diag_result(int n, uint64_t (*ulp)(int))
{
    moects_result r;
    memset(&r, 0, sizeof r);
    snprintf(r.kernel, sizeof r.kernel, "cpu.ep_gather");
    snprintf(r.case_id, sizeof r.case_id, "ep_gather/a/tp1/t1");
    r.verdict = MOECTS_FAIL_MISMATCH;
    r.mismatches = n;
    r.first_index = 0;
    r.diag.ndims = 2;
    strcpy(r.diag.axes[0], "t");
    strcpy(r.diag.axes[1], "d");
    r.diag.dtype = MOECTS_BF16;
    strcpy(r.diag.pattern, "token 0");
    for (int i = 0; i < n; i++) {
        moects_diag_elem e = {.index = i, .at = {0, i}, .got = 0x7fc0, .want = 0x3f80, .ulp = ulp(i)};
        if (r.diag.nfirst < MOECTS_DIAG_FIRST) r.diag.first[r.diag.nfirst++] = e;
        int at = r.diag.nworst < MOECTS_DIAG_WORST ? r.diag.nworst++ : MOECTS_DIAG_WORST - 1;
        if (at == MOECTS_DIAG_WORST - 1 && r.diag.nworst == MOECTS_DIAG_WORST && r.diag.worst[at].ulp >= e.ulp) continue;
        while (at > 0 && r.diag.worst[at - 1].ulp < e.ulp) r.diag.worst[at] = r.diag.worst[at - 1], at--;
        r.diag.worst[at] = e;
    }
    return r;
}
static uint64_t all_nan(int i) { return (void)i, UINT64_MAX; }
static uint64_t growing(int i) { return (uint64_t)i + 1; }

/* The worst list is left out when it would repeat the first (all NaN: a tie, so element order; or 5
 * mismatches or fewer: the same elements), kept when the ranking says something; first_mismatch
 * carries its coordinates, as the lists do. */
Test(tap, worst_list_only_when_it_adds)
{
    moects_result r = diag_result(12, all_nan);
    char *y = yaml_of(&r);
    cr_assert_not_null(strstr(y, "first_mismatch:\n  at: \"(t 0, d 0)\"\n  index: 0\n"), "%s", y);
    cr_assert_not_null(strstr(y, "first_mismatches:\n"), "%s", y);
    cr_assert_null(strstr(y, "worst_mismatches"), "%s", y);
    free(y);
    r = diag_result(3, growing);
    y = yaml_of(&r);
    cr_assert_null(strstr(y, "worst_mismatches"), "%s", y);
    free(y);
    /* 12 elements of ULP 1..12: the worst is (t 0, d 11) with 12, listed first */
    r = diag_result(12, growing);
    y = yaml_of(&r);
    cr_assert_not_null(strstr(y, "worst_mismatches:\n  - at: \"(t 0, d 11)\"\n    index: 11\n"), "%s", y);
    free(y);
}

/* A run's filter narrows its cases when it holds a case glob or --cases; the values of the options that
 * take one (--kernel GLOB, --tier T, --config FILE --tp N, --kernel-lib, --kernel-py) are not case
 * globs. The filters as cmd_run.c's run_filter spells them, worked out by hand. */
Test(tap, filter_narrowed)
{
    cr_assert_eq(moects__filter_narrowed(""), 0);
    cr_assert_eq(moects__filter_narrowed("--kernel cpu.ep_gather --tier full"), 0);
    cr_assert_eq(moects__filter_narrowed("--kernel-lib /b/lib.so --kernel-py /e/n.py:kernel"), 0);
    cr_assert_eq(moects__filter_narrowed("--config /m/new-moe.json --tp 8 --ep 16 --tier smoke"), 0);
    cr_assert_eq(moects__filter_narrowed("ep_gather/kimi-k3/tp8/*"), 1);
    cr_assert_eq(moects__filter_narrowed("--kernel-py /e/n.py:kernel ep_gather/deepseek-v3/*"), 1);
    cr_assert_eq(moects__filter_narrowed("--cases cases/mustpass/smoke-core.txt --kernel cpu.*"), 1);
    cr_assert_eq(moects__filter_narrowed("--tier full ep_gather/gpt-oss-20b/*/t16* fp4_gemm.mxfp4/gpt-oss-20b/tp*/*/m16*"), 1);
}
