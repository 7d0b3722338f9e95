/* test_harness_merge.c: `moects merge` (harness/report/merge.c, cli/cmd_merge.c) on hand-built shard files under
 * tests/fixtures/data/merge/: the merged results.json must equal the hand-built expected.json (case order of
 * cases.txt, kernels by first appearance since none is built in, the case missing from cases.txt
 * last, date = the later shard's, machines joined), and bad shard sets must be refused. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moects_commands.h"
#include "moects_harness.h"
#include "test_slurp.h"

#define DATA MOECTS_SOURCE_DIR "/tests/fixtures/data/merge/"

static char tmpdir[64], errfile[128];

static void setup(void)
{
    strcpy(tmpdir, "/tmp/moects_merge_XXXXXX");
    cr_assert_not_null(mkdtemp(tmpdir));
    snprintf(errfile, sizeof errfile, "%s/stderr.txt", tmpdir);
    cr_assert_not_null(freopen(errfile, "w", stderr));
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    cr_assert_eq(system(cmd), 0);
}

static int merge(int argc, const char **argv)
{
    int rc = moects__cmd_merge(argc, (char **)argv);
    fflush(stderr);
    return rc;
}

static int same_double(double a, double b)
{
    return (isnan(a) && isnan(b)) || memcmp(&a, &b, sizeof a) == 0;
}

static void assert_same_run(const moects_run *a, const moects_run *b)
{
    cr_assert_str_eq(a->moects_version, b->moects_version);
    cr_assert_str_eq(a->commit, b->commit);
    cr_assert_str_eq(a->date, b->date);
    cr_assert_str_eq(a->machine, b->machine);
    cr_assert_str_eq(a->filter, b->filter);
    cr_assert_str_eq(a->shard, b->shard);
    cr_assert_eq(a->seed, b->seed);
    cr_assert_eq(a->n, b->n);
    for (size_t i = 0; i < a->n; i++) {
        const moects_result *x = &a->v[i], *y = &b->v[i];
        cr_assert_str_eq(x->kernel, y->kernel, "results[%zu]", i);
        cr_assert_str_eq(x->case_id, y->case_id, "results[%zu]", i);
        cr_assert_str_eq(x->model, y->model);
        cr_assert_str_eq(x->layout, y->layout);
        cr_assert_eq(x->op, y->op);
        cr_assert_eq(x->is_mutant, y->is_mutant);
        cr_assert_eq(x->verdict, y->verdict, "results[%zu]", i);
        cr_assert_str_eq(x->recipe, y->recipe);
        cr_assert_eq(x->mismatches, y->mismatches);
        cr_assert_eq(x->max_ulp, y->max_ulp);
        cr_assert(same_double(x->calc_diff, y->calc_diff));
        cr_assert_eq(x->first_index, y->first_index);
        cr_assert_str_eq(x->got, y->got);
        cr_assert_str_eq(x->want, y->want);
        cr_assert_str_eq(x->reason, y->reason);
        cr_assert_eq(x->seed, y->seed);
        cr_assert(same_double(x->kernel_ms, y->kernel_ms));
        cr_assert(same_double(x->perf_value, y->perf_value));
        cr_assert(same_double(x->perf_fraction, y->perf_fraction));
    }
}

Test(merge, two_shards_equal_the_hand_built_run, .init = setup, .fini = teardown)
{
    char out[128], path[192], err[512];
    snprintf(out, sizeof out, "%s/merged", tmpdir);
    /* shards given in reverse: the order comes from cases.txt, not from the command line */
    const char *argv[] = {"merge", out, DATA "shard1.json", DATA "shard0.json", "--cases", DATA "cases.txt"};
    /* exit 1: the fixture's x.g1 refused its only case (UNSUPPORTED), which the merge judges */
    cr_assert_eq(merge(6, argv), 1, "%s", slurp(errfile));
    char *log = slurp(errfile);
    cr_assert_not_null(strstr(log, "moects merge: kernel x.g1 refused every case of the merged run\n"), "%s", log);
    free(log);

    moects_run got, want;
    snprintf(path, sizeof path, "%s/results.json", out);
    cr_assert_eq(moects__results_read(path, &got, err, sizeof err), 0, "%s", err);
    cr_assert_eq(moects__results_read(DATA "expected.json", &want, err, sizeof err), 0, "%s", err);
    assert_same_run(&got, &want);
    moects__run_free(&got);
    moects__run_free(&want);

    snprintf(path, sizeof path, "%s/run.tap", out);
    char *tap = slurp(path);
    cr_assert_eq(strncmp(tap, "TAP version 13\n", 15), 0, "%s", tap);
    free(tap);
    snprintf(path, sizeof path, "%s/summary.md", out);
    char *md = slurp(path);
    cr_assert_neq(md[0], '\0');
    free(md);
    /* omega/tp1/t1 is not in cases.txt */
    char *e = slurp(errfile);
    cr_assert_not_null(strstr(e, "note: 1 cases not in the "), "%s", e);
    free(e);
}

/* Write DATA/name with `from` replaced by `to` (first occurrence) into tmpdir/out. */
static const char *variant(const char *name, const char *from, const char *to, const char *out)
{
    static char path[4][192];
    static int k;
    char src[192];
    snprintf(src, sizeof src, "%s%s", DATA, name);
    char *t = slurp(src), *p = strstr(t, from);
    cr_assert_not_null(p, "%s not in %s", from, name);
    char *dst = path[k++ % 4];
    snprintf(dst, 192, "%s/%s", tmpdir, out);
    FILE *f = fopen(dst, "w");
    fwrite(t, 1, (size_t)(p - t), f);
    fputs(to, f);
    fputs(p + strlen(from), f);
    fclose(f);
    free(t);
    return dst;
}

static void expect_fail(int argc, const char **argv, const char *want_line)
{
    cr_assert_eq(merge(argc, argv), 2);
    char *e = slurp(errfile);
    cr_assert_not_null(strstr(e, want_line), "stderr: %s\nwanted: %s", e, want_line);
    free(e);
    cr_assert_not_null(freopen(errfile, "w", stderr));
}

Test(merge, bad_shard_sets_are_refused, .init = setup, .fini = teardown)
{
    char out[128], line[512];
    snprintf(out, sizeof out, "%s/merged", tmpdir);

    const char *a1[] = {"merge", out, DATA "shard0.json", "--cases", DATA "cases.txt"};
    expect_fail(5, a1, DATA "shard0.json: shard: the run has 2 shards; missing: 1/2\n");

    const char *seed = variant("shard1.json", "\"seed\": 7,", "\"seed\": 8,", "seed.json");
    const char *a2[] = {"merge", out, DATA "shard0.json", seed, "--cases", DATA "cases.txt"};
    snprintf(line, sizeof line, "%s: seed: differs from %sshard0.json: shards of one run must agree\n", seed, DATA);
    expect_fail(6, a2, line);

    const char *commit = variant("shard1.json", "c0ffee", "deadbeef", "commit.json");
    const char *a3[] = {"merge", out, DATA "shard0.json", commit, "--cases", DATA "cases.txt"};
    snprintf(line, sizeof line, "%s: commit: differs from %sshard0.json", commit, DATA);
    expect_fail(6, a3, line);

    const char *count = variant("shard1.json", "\"1/2\"", "\"1/3\"", "count.json");
    const char *a4[] = {"merge", out, DATA "shard0.json", count, "--cases", DATA "cases.txt"};
    snprintf(line, sizeof line, "%s: shard: differs from %sshard0.json", count, DATA);
    expect_fail(6, a4, line);

    const char *twice = variant("shard1.json", "\"1/2\"", "\"0/2\"", "twice.json");
    const char *a5[] = {"merge", out, DATA "shard0.json", twice, "--cases", DATA "cases.txt"};
    expect_fail(6, a5, "shard: 0/2 also given by ");

    /* a pair of shard0 (x.k1 on beta/tp2/t16) also in shard1 */
    const char *dup = variant("shard1.json", "\"case\": \"ep_gather/alpha/ep8/t1\", \"model\": \"alpha\", \"layout\": \"ep8\"",
                              "\"case\": \"ep_gather/beta/tp2/t16\", \"model\": \"beta\", \"layout\": \"tp2\"", "dup.json");
    const char *a6[] = {"merge", out, DATA "shard0.json", dup, "--cases", DATA "cases.txt"};
    snprintf(line, sizeof line, "%s: results[3]: kernel x.k1, case ep_gather/beta/tp2/t16: also in %sshard0.json\n",
             dup, DATA);
    expect_fail(6, a6, line);

    const char *whole = variant("shard1.json", "\"1/2\"", "\"\"", "whole.json");
    const char *a7[] = {"merge", out, DATA "shard0.json", whole, "--cases", DATA "cases.txt"};
    snprintf(line, sizeof line, "%s: shard: empty: not the results of a shard", whole);
    expect_fail(6, a7, line);

    const char *a8[] = {"merge", out};
    expect_fail(2, a8, "usage: moects merge");

    /* nothing was written by any failed merge */
    snprintf(line, sizeof line, "test ! -e %s", out);
    cr_assert_eq(system(line), 0);
}

/* OUT_DIR/results.json that is one of the inputs (the same file, however spelled: the path as given,
 * with "..", a trailing slash, through a symlinked directory or a symlinked file) is refused before
 * anything is read: exit 2, one line naming it, the shard untouched and nothing else written. An
 * input in OUT_DIR under another name is not OUT_DIR/results.json: that merge goes ahead. */
Test(merge, out_dir_holding_an_input_is_refused, .init = setup, .fini = teardown)
{
    char cmd[2048], s0[128], s1[128], in0[160], in1[160], line[1024];
    snprintf(s0, sizeof s0, "%s/s0", tmpdir);
    snprintf(s1, sizeof s1, "%s/s1", tmpdir);
    snprintf(in0, sizeof in0, "%s/results.json", s0);
    snprintf(in1, sizeof in1, "%s/results.json", s1);
    snprintf(cmd, sizeof cmd,
             "mkdir %s %s && cp %sshard0.json %s && cp %sshard1.json %s && ln -s s0 %s/link && "
             "ln -s s0/results.json %s/link.json",
             s0, s1, DATA, in0, DATA, in1, tmpdir, tmpdir);
    cr_assert_eq(system(cmd), 0);

    char dotdot[192], slash[192], link[192], linkjson[192];
    snprintf(dotdot, sizeof dotdot, "%s/../s0", s1);
    snprintf(slash, sizeof slash, "%s/", s0);
    snprintf(link, sizeof link, "%s/link", tmpdir);
    snprintf(linkjson, sizeof linkjson, "%s/link.json", tmpdir);
    const char *outs[] = {s0, dotdot, slash, link, s0};
    const char *firsts[] = {in0, in0, in0, in0, linkjson};
    for (int i = 0; i < 5; i++) {
        const char *argv[] = {"merge", outs[i], in1, firsts[i], "--cases", DATA "cases.txt"};
        /* named as given, OUT_DIR's trailing slashes dropped */
        snprintf(line, sizeof line,
                 "moects merge: %.*s/results.json is the input %s: merging would overwrite it; choose another "
                 "OUT_DIR\n",
                 (int)(strlen(outs[i]) - (outs[i] == slash)), outs[i], firsts[i]);
        cr_assert_eq(merge(6, argv), 2, "%s", outs[i]);
        char *e = slurp(errfile);
        cr_assert_str_eq(e, line);
        free(e);
        cr_assert_not_null(freopen(errfile, "w", stderr));
    }
    /* the shard is byte for byte the fixture, and s0 holds nothing else */
    snprintf(cmd, sizeof cmd, "cmp -s %sshard0.json %s && test \"$(ls -A %s)\" = results.json", DATA, in0, s0);
    cr_assert_eq(system(cmd), 0);

    /* the shard under another name in OUT_DIR: OUT_DIR/results.json is no input, the merge is made */
    snprintf(cmd, sizeof cmd, "mv %s %s/shard0.json", in0, s0);
    cr_assert_eq(system(cmd), 0);
    snprintf(in0, sizeof in0, "%s/shard0.json", s0);
    const char *ok[] = {"merge", s0, in0, in1, "--cases", DATA "cases.txt"};
    cr_assert_eq(merge(6, ok), 1, "%s", slurp(errfile)); /* made; 1: x.g1 refused its case, as above */
    moects_run got, want;
    char path[192], err[512];
    snprintf(path, sizeof path, "%s/results.json", s0);
    cr_assert_eq(moects__results_read(path, &got, err, sizeof err), 0, "%s", err);
    cr_assert_eq(moects__results_read(DATA "expected.json", &want, err, sizeof err), 0, "%s", err);
    assert_same_run(&got, &want);
    moects__run_free(&got);
    moects__run_free(&want);
}
