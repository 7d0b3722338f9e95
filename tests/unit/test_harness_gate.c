/* test_harness_gate.c: `moects gate` (harness/report/gate.c, cli/cmd_gate.c) on hand-built results files under
 * tests/fixtures/data/gate/. The scenario, worked by hand (honest kernels k.a, k.b; mutants m.x, m.y):
 *   alpha/tp1/t1 k.b PASS_EXACT -> FAIL_CRASH           regression (and cell alpha x tp1 on k.b lost)
 *   alpha/tp8/t1 k.b UNSUPPORTED -> FAIL_MISMATCH       new failure (the cell was not PASS: not lost)
 *   beta/tp1/t1  k.b FAIL_MISMATCH in both              known; on the must-pass list: must-pass problem
 *   beta/ep8/t1  k.a PASS_EXACT -> UNSUPPORTED          cell beta x ep8 on k.a lost
 *   m.y caught (FAIL_CRASH) on alpha/tp1/t2, now on no case   mutant escaped
 *   must-pass glob ep_gather/delta/(star) matches nothing   missing
 * = 7 problems.
 * Bad input (a run sharing nothing with the baseline, an unwritable --summary, a must-pass list
 * without case ids) is checked for its exit status, its one stderr line, an empty stdout and no
 * file left behind. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "moects_commands.h"
#include "moects_harness.h"
#include "test_slurp.h"

#define DATA MOECTS_SOURCE_DIR "/tests/fixtures/data/gate/"

static char tmpdir[64], summary[128];

static void setup(void)
{
    strcpy(tmpdir, "/tmp/moects_gate_XXXXXX");
    cr_assert_not_null(mkdtemp(tmpdir));
    snprintf(summary, sizeof summary, "%s/summary.md", tmpdir);
    cr_assert_not_null(freopen("/dev/null", "w", stdout));
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    cr_assert_eq(system(cmd), 0);
}

static int gate(int argc, const char **argv)
{
    return moects__cmd_gate(argc, (char **)argv);
}

/* file contents with @MUSTPASS@ replaced by the must-pass file's path, @PROG@ by the program repro lines call */
static char *expected(const char *name)
{
    char *t = slurp(name), *out = calloc(1, 1 << 16);
    const char *p = t, *q;
    while ((q = strstr(p, "@"))) {
        strncat(out, p, (size_t)(q - p));
        if (!strncmp(q, "@MUSTPASS@", 10)) strcat(out, DATA "mustpass.txt"), p = q + 10;
        else if (!strncmp(q, "@PROG@", 6)) strcat(out, moects__self_program()), p = q + 6;
        else strcat(out, "@"), p = q + 1;
    }
    strcat(out, p);
    free(t);
    return out;
}

Test(gate, broken_run_lists_problems_capped, .init = setup, .fini = teardown)
{
    const char *argv[] = {"gate", DATA "run_bad.json", "--baseline", DATA "base.json", "--mustpass",
                          DATA "mustpass.txt", "--summary", summary, "--limit", "3"};
    cr_assert_eq(gate(10, argv), 1);
    char *got = slurp(summary), *want = expected(DATA "expected_bad_limit3.md");
    cr_assert_str_eq(got, want);
    free(got);
    free(want);
}

Test(gate, broken_run_full_list, .init = setup, .fini = teardown)
{
    const char *argv[] = {"gate", DATA "run_bad.json", "--baseline", DATA "base.json", "--mustpass",
                          DATA "mustpass.txt", "--summary", summary};
    cr_assert_eq(gate(8, argv), 1);
    char *got = slurp(summary), *want = expected(DATA "expected_bad_rest.md");
    /* the first three problems as in the capped summary, then the other four */
    const char *cut = strstr(got, "- **must-pass** `ep_gather/delta/*`");
    cr_assert_not_null(cut);
    cr_assert_str_eq(cut, want);
    cr_assert_null(strstr(got, " more "));
    free(got);
    free(want);
}

Test(gate, same_run_passes, .init = setup, .fini = teardown)
{
    const char *argv[] = {"gate", DATA "base.json", "--baseline", DATA "base.json", "--summary", summary};
    cr_assert_eq(gate(6, argv), 0);
    char *got = slurp(summary);
    cr_assert_eq(strncmp(got, "## moects gate: PASS\n\n", 22), 0, "%s", got);
    /* k.b fails beta/tp1/t1 in both: known */
    cr_assert_not_null(strstr(got, "\n1 honest failure also failed in the baseline (known, not gating).\n"));
    free(got);
}

Test(gate, run_of_another_selection_is_gated_on_what_it_holds, .init = setup, .fini = teardown)
{
    /* run_alpha.json: the alpha cases of the baseline, made with another selection
     * ("ep_gather/alpha/(star)"): compared on them alone, the beta cells are not lost */
    const char *argv[] = {"gate", DATA "run_alpha.json", "--baseline", DATA "base.json", "--summary", summary};
    cr_assert_eq(gate(6, argv), 0);
    char *got = slurp(summary);
    /* 10 of the 14 baseline results are alpha cases */
    cr_assert_not_null(strstr(got, ": 14 results, 10 compared (the run's selection `ep_gather/alpha/*` is not the "
                                   "baseline's `(default)`: only the cases and kernels the run holds)."),
                       "%s", got);
    free(got);
}

Test(gate, must_pass_alone_without_baseline, .init = setup, .fini = teardown)
{
    /* no baseline: every honest failure is new (k.b on alpha/tp1/t1, alpha/tp8/t1, beta/tp1/t1 = 3);
     * must-pass: beta/tp1/t1's failure is already listed, delta/ * is missing = 1 */
    const char *argv[] = {"gate", DATA "run_bad.json", "--mustpass", DATA "mustpass.txt", "--summary", summary};
    cr_assert_eq(gate(6, argv), 1);
    char *got = slurp(summary);
    cr_assert_not_null(strstr(got, "## moects gate: FAIL (4 problems)\n"), "%s", got);
    cr_assert_not_null(strstr(got, "\nProblems: 3 new failures, 1 must-pass cases.\n"), "%s", got);
    cr_assert_not_null(strstr(got, ". No baseline; 1 must-pass list.\n"), "%s", got);
    free(got);
}

Test(gate, bad_input_exits_2, .init = setup, .fini = teardown)
{
    const char *a1[] = {"gate"};
    cr_assert_eq(gate(1, a1), 2);
    const char *a2[] = {"gate", DATA "no_such.json"};
    cr_assert_eq(gate(2, a2), 2);
    const char *a3[] = {"gate", DATA "base.json", "--mustpass", DATA "no_such.txt"};
    cr_assert_eq(gate(4, a3), 2);
    const char *a4[] = {"gate", DATA "base.json", "--bogus"};
    cr_assert_eq(gate(3, a4), 2);
    const char *a5[] = {"gate", DATA "base.json", "--mustpass"};
    cr_assert_eq(gate(3, a5), 2);
    /* a shard must be merged first */
    char shard[160];
    snprintf(shard, sizeof shard, "%s/shard.json", tmpdir);
    FILE *f = fopen(shard, "w");
    fputs("{\"moects_version\": \"0.1\", \"commit\": \"c\", \"date\": \"d\", \"machine\": \"h\", \"filter\": \"\", "
          "\"shard\": \"0/2\", \"seed\": 1, \"results\": []}",
          f);
    fclose(f);
    const char *a6[] = {"gate", shard};
    cr_assert_eq(gate(2, a6), 2);
}

Test(gate, empty_run_fails, .init = setup, .fini = teardown)
{
    char empty[160];
    snprintf(empty, sizeof empty, "%s/empty.json", tmpdir);
    FILE *f = fopen(empty, "w");
    fputs("{\"moects_version\": \"0.1\", \"commit\": \"c\", \"date\": \"d\", \"machine\": \"h\", \"filter\": \"\", "
          "\"shard\": \"\", \"seed\": 1, \"results\": []}",
          f);
    fclose(f);
    const char *argv[] = {"gate", empty, "--summary", summary};
    cr_assert_eq(gate(4, argv), 1);
    char *got = slurp(summary);
    cr_assert_not_null(strstr(got, "- **empty run**: the run holds no result\n"), "%s", got);
    free(got);
}

Test(gate, same_selection_missing_cells_are_lost, .init = setup, .fini = teardown)
{
    /* run_alpha.json claimed to be made like the baseline (filter ""): the beta cells are absent.
     * PASS in the baseline: k.a beta x tp1, k.a beta x ep8, k.b beta x ep8 (k.b beta x tp1 FAILed) */
    char *t = slurp(DATA "run_alpha.json"), *p = strstr(t, "\"filter\": \"ep_gather/alpha/*\"");
    cr_assert_not_null(p);
    char path[160];
    snprintf(path, sizeof path, "%s/same.json", tmpdir);
    FILE *f = fopen(path, "w");
    fwrite(t, 1, (size_t)(p - t), f);
    fputs("\"filter\": \"\"", f);
    fputs(p + strlen("\"filter\": \"ep_gather/alpha/*\""), f);
    fclose(f);
    free(t);
    const char *argv[] = {"gate", path, "--baseline", DATA "base.json", "--summary", summary};
    cr_assert_eq(gate(6, argv), 1);
    char *got = slurp(summary);
    cr_assert_not_null(strstr(got, ": 14 results, 14 compared."), "%s", got);
    cr_assert_not_null(strstr(got, "\nProblems: 3 lost coverage cells.\n"), "%s", got);
    cr_assert_not_null(strstr(got, "- **lost coverage** `beta` x `tp1` on `k.a`: PASS in the baseline, now absent\n"), "%s", got);
    cr_assert_not_null(strstr(got, "- **lost coverage** `beta` x `ep8` on `k.a`: PASS in the baseline, now absent\n"), "%s", got);
    cr_assert_not_null(strstr(got, "- **lost coverage** `beta` x `ep8` on `k.b`: PASS in the baseline, now absent\n"), "%s", got);
    free(got);
}

static char outfile[160], errfile[160];

/* setup, with stdout and stderr going to files of tmpdir */
static void setup_io(void)
{
    strcpy(tmpdir, "/tmp/moects_gate_XXXXXX");
    cr_assert_not_null(mkdtemp(tmpdir));
    snprintf(summary, sizeof summary, "%s/summary.md", tmpdir);
    snprintf(outfile, sizeof outfile, "%s/stdout.txt", tmpdir);
    snprintf(errfile, sizeof errfile, "%s/stderr.txt", tmpdir);
    cr_assert_not_null(freopen(outfile, "w", stdout));
    cr_assert_not_null(freopen(errfile, "w", stderr));
}

static int gate_io(int argc, const char **argv)
{
    int rc = gate(argc, argv);
    fflush(stdout);
    fflush(stderr);
    return rc;
}

/* the number of entries of tmpdir (stdout.txt and stderr.txt included) */
static int entries(void)
{
    char cmd[160];
    snprintf(cmd, sizeof cmd, "exit $(ls -A %s | wc -l)", tmpdir);
    int st = system(cmd);
    return WEXITSTATUS(st);
}

Test(gate, run_sharing_no_result_with_the_baseline_fails, .init = setup, .fini = teardown)
{
    /* one k.a result on a gamma case, which base.json (14 results, filter "") does not have */
    char path[160];
    snprintf(path, sizeof path, "%s/gamma.json", tmpdir);
    FILE *f = fopen(path, "w");
    fputs("{\"moects_version\": \"0.1\", \"commit\": \"c0c0\", \"date\": \"d\", \"machine\": \"h\", "
          "\"filter\": \"ep_gather/gamma/*\", \"shard\": \"\", \"seed\": 1, \"results\": [\n"
          "{\"kernel\": \"k.a\", \"case\": \"ep_gather/gamma/tp1/t1\", \"model\": \"gamma\", \"layout\": \"tp1\", "
          "\"op\": \"ep_gather\", \"mutant\": false, \"verdict\": \"PASS_EXACT\", \"recipe\": \"\", \"mismatches\": 0, "
          "\"max_ulp\": 0, \"calc_diff\": 0, \"first_mismatch\": null, \"reason\": \"\", \"seed\": 1, \"kernel_ms\": 0, "
          "\"perf_value\": 0, \"perf_fraction\": 0}]}",
          f);
    fclose(f);
    const char *argv[] = {"gate", path, "--baseline", DATA "base.json", "--summary", summary};
    cr_assert_eq(gate(6, argv), 1);
    char *got = slurp(summary);
    cr_assert_eq(strncmp(got, "## moects gate: FAIL (1 problem)\n\n", 34), 0, "%s", got);
    cr_assert_not_null(strstr(got, ": 14 results, 0 compared"), "%s", got);
    cr_assert_not_null(strstr(got, "\nProblems: 1 nothing compared.\n"), "%s", got);
    cr_assert_not_null(strstr(got, "\n- **nothing compared**: the run (selection `ep_gather/gamma/*`, 1 result) "
                                   "and the baseline (selection `(default)`, 14 results) share no (kernel, case) "
                                   "result\n"),
                       "%s", got);
    free(got);

    /* the same run claiming the baseline's selection: its result is still not in the baseline */
    char *t = slurp(path), *p = strstr(t, "ep_gather/gamma/*");
    f = fopen(path, "w");
    fwrite(t, 1, (size_t)(p - t), f);
    fputs(p + strlen("ep_gather/gamma/*"), f);
    fclose(f);
    free(t);
    cr_assert_eq(gate(6, argv), 1);
    got = slurp(summary);
    cr_assert_not_null(strstr(got, "\n- **nothing compared**: the run (selection `(default)`, 1 result) and the "
                                   "baseline (selection `(default)`, 14 results) share no (kernel, case) result\n"),
                       "%s", got);
    free(got);
}

Test(gate, unwritable_summary_is_refused_before_the_work, .init = setup_io, .fini = teardown)
{
    /* a directory that does not exist: ENOENT, named as given (not the writer's temp file) */
    char bad[192];
    snprintf(bad, sizeof bad, "%s/nodir/x.md", tmpdir);
    const char *a1[] = {"gate", DATA "run_bad.json", "--baseline", DATA "base.json", "--summary", bad};
    cr_assert_eq(gate_io(6, a1), 2);
    const char *a2[] = {"gate", DATA "run_bad.json", "--summary", "/proc/forbidden/x.md"};
    cr_assert_eq(gate_io(4, a2), 2);
    /* a directory as the summary file */
    const char *a3[] = {"gate", DATA "run_bad.json", "--summary", tmpdir};
    cr_assert_eq(gate_io(4, a3), 2);
    /* checked before the results are read */
    const char *a4[] = {"gate", DATA "no_such.json", "--summary", bad};
    cr_assert_eq(gate_io(4, a4), 2);
    char *e = slurp(errfile), want[1024];
    snprintf(want, sizeof want,
             "moects gate: --summary: %s: cannot create: No such file or directory\n"
             "moects gate: --summary: /proc/forbidden/x.md: cannot create: No such file or directory\n"
             "moects gate: --summary: %s: is a directory\n"
             "moects gate: --summary: %s: cannot create: No such file or directory\n",
             bad, tmpdir, bad);
    cr_assert_str_eq(e, want);
    free(e);
    /* nothing printed, nothing written: tmpdir holds stdout.txt and stderr.txt only */
    struct stat st;
    cr_assert_eq(stat(outfile, &st), 0);
    cr_assert_eq(st.st_size, 0);
    cr_assert_eq(entries(), 2);
}

Test(gate, writable_summary_leaves_no_probe_file, .init = setup_io, .fini = teardown)
{
    const char *argv[] = {"gate", DATA "base.json", "--baseline", DATA "base.json", "--summary", summary};
    cr_assert_eq(gate_io(6, argv), 0);
    char *got = slurp(summary), *printed = slurp(outfile);
    cr_assert_str_eq(printed, got);
    free(got);
    free(printed);
    cr_assert_eq(entries(), 3); /* summary.md, stdout.txt, stderr.txt */
}

/* --summary "" ($GITHUB_STEP_SUMMARY outside GitHub Actions): no file, one stderr line saying so,
 * the same summary on stdout as with a file, and the exit status of the run (base against itself
 * passes, 0; run_bad without the must-pass list has the scenario's 7 problems less its 2 must-pass
 * ones, 1). */
Test(gate, empty_summary_path_writes_no_file_and_keeps_the_exit_status, .init = setup_io, .fini = teardown)
{
    const char *with_file[] = {"gate", DATA "base.json", "--baseline", DATA "base.json", "--summary", summary};
    cr_assert_eq(gate_io(6, with_file), 0);
    char *want = slurp(summary);
    cr_assert_eq(unlink(summary), 0);
    const char *empty[] = {"gate", DATA "base.json", "--baseline", DATA "base.json", "--summary", ""};
    cr_assert_eq(gate_io(6, empty), 0);
    char *printed = slurp(outfile), both[1 << 16];
    snprintf(both, sizeof both, "%s%s", want, want); /* the run with the file printed it too */
    cr_assert_str_eq(printed, both);
    free(printed);
    free(want);
    const char *bad[] = {"gate", DATA "run_bad.json", "--baseline", DATA "base.json", "--summary", ""};
    cr_assert_eq(gate_io(6, bad), 1);
    printed = slurp(outfile);
    cr_assert_not_null(strstr(printed, "## moects gate: FAIL (5 problems)\n"), "%s", printed);
    free(printed);
    char *e = slurp(errfile);
    cr_assert_str_eq(e, "moects gate: --summary is empty: no summary file written\n"
                        "moects gate: --summary is empty: no summary file written\n");
    free(e);
    cr_assert_eq(entries(), 2); /* stdout.txt and stderr.txt: no summary file of any name */
}

/* A must-pass list with no case id (comments and blank lines only, or an empty file) is refused as
 * `moects run --cases` refuses it: exit 2, one line naming the file, before the results are read
 * or the --summary file is made; nothing on stdout. */
Test(gate, mustpass_list_without_ids_is_refused_before_the_work, .init = setup_io, .fini = teardown)
{
    char comments[192], zero[192];
    snprintf(comments, sizeof comments, "%s/comments.txt", tmpdir);
    snprintf(zero, sizeof zero, "%s/zero.txt", tmpdir);
    FILE *f = fopen(comments, "w");
    fputs("# only comments\n\n   \n\t# and blank lines\n", f);
    fclose(f);
    f = fopen(zero, "w");
    fclose(f);
    const char *a1[] = {"gate", DATA "base.json", "--mustpass", comments};
    cr_assert_eq(gate_io(4, a1), 2);
    /* checked before the results are read: the unreadable run is not what is reported */
    const char *a2[] = {"gate", DATA "no_such.json", "--mustpass", zero};
    cr_assert_eq(gate_io(4, a2), 2);
    /* a good list first, then the empty one; a --summary that would be written */
    const char *a3[] = {"gate", DATA "run_bad.json", "--mustpass", DATA "mustpass.txt", comments, "--summary", summary};
    cr_assert_eq(gate_io(7, a3), 2);
    char *e = slurp(errfile), want[1024];
    snprintf(want, sizeof want,
             "moects gate: --mustpass %s: no case ids\n"
             "moects gate: --mustpass %s: no case ids\n"
             "moects gate: --mustpass %s: no case ids\n",
             comments, zero, comments);
    cr_assert_str_eq(e, want);
    free(e);
    struct stat st;
    cr_assert_eq(stat(outfile, &st), 0);
    cr_assert_eq(st.st_size, 0);
    cr_assert_eq(entries(), 4); /* stdout.txt, stderr.txt, comments.txt, zero.txt: no summary.md */
}
