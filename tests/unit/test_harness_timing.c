/* test_harness_timing.c: the task timing in results.json (harness/model/results.c) and summary.md's
 * "Where the time went" (harness/report/tap.c), and where the tasks ran: each result's "gpu" and the
 * GPUs' shares of a run (moects__gpu_shares, summary.md's "GPUs"; issue 33). Expected texts and sums
 * are worked out by hand; files written before the timing existed (the committed gate baseline) must
 * keep loading. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moects_harness.h"
#include "moects_tap.h"
#include "reports_internal.h"
#include "test_slurp.h"
#include "test_tmpdir.h"

static void setup(void) { mk_tmpdir("/tmp/moects-timing-XXXXXX"); }

static moects_result res(const char *kernel, const char *case_id)
{
    moects_result r;
    memset(&r, 0, sizeof r);
    snprintf(r.kernel, sizeof r.kernel, "%s", kernel);
    snprintf(r.case_id, sizeof r.case_id, "%s", case_id);
    snprintf(r.model, sizeof r.model, "m");
    snprintf(r.layout, sizeof r.layout, "tp1");
    r.op = MOECTS_OP_FP4_GEMM;
    r.verdict = MOECTS_PASS_EXACT;
    r.first_index = -1;
    r.seed = 1;
    return r;
}

/* 1 when the two files hold the same bytes (whole files, any size). */
static int same_file(const char *a, const char *b)
{
    FILE *f = fopen(a, "rb"), *g = fopen(b, "rb");
    cr_assert(f && g, "%s, %s", a, b);
    int x, y, same = 1;
    do {
        x = fgetc(f);
        y = fgetc(g);
        if (x != y) same = 0;
    } while (same && x != EOF);
    fclose(f);
    fclose(g);
    return same;
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
}

Test(timing, baseline_without_timing_loads_and_writes_back_unchanged, .init = setup, .fini = rm_tmp)
{
    const char *base = MOECTS_SOURCE_DIR "/reports/baseline/results.json";
    moects_run run;
    char err[512], path[300];
    cr_assert_eq(moects__results_read(base, &run, err, sizeof err), 0, "%s", err);
    cr_assert_gt(run.n, 0u);
    for (size_t i = 0; i < run.n; i++) {
        const moects_result *r = &run.v[i];
        cr_assert(r->wall_s == 0 && r->inputs_s == 0 && r->reference_s == 0 && r->kernel_s == 0 &&
                  r->compare_s == 0 && r->ref_threads == 0);
    }
    /* untimed results write no "timing": an old file reads and writes back byte for byte */
    snprintf(path, sizeof path, "%s/back.json", tmpdir);
    cr_assert_eq(moects__results_write(path, &run, err, sizeof err), 0, "%s", err);
    cr_assert(same_file(base, path), "%s written back differs from %s", path, base);
    moects__run_free(&run);
}

Test(timing, round_trip_and_text, .init = setup, .fini = rm_tmp)
{
    moects_run run, back;
    memset(&run, 0, sizeof run);
    snprintf(run.moects_version, sizeof run.moects_version, "0.1");
    moects_result r = res("k", "c1");
    r.wall_s = 0.25, r.inputs_s = 0.01, r.reference_s = 0.2, r.kernel_s = 0.03, r.compare_s = 0.005;
    r.ref_threads = 4;
    cr_assert_eq(moects__run_push(&run, &r), 0);
    moects_result u = res("k", "c2"); /* untimed: no "timing" */
    cr_assert_eq(moects__run_push(&run, &u), 0);
    char err[512], path[300];
    snprintf(path, sizeof path, "%s/t.json", tmpdir);
    cr_assert_eq(moects__results_write(path, &run, err, sizeof err), 0, "%s", err);
    char *t = slurp(path);
    cr_assert_not_null(strstr(t, "\"perf_fraction\": 0.0, \"timing\": {\"wall_s\": 0.25, \"inputs_s\": 0.01, "
                                 "\"reference_s\": 0.2, \"kernel_s\": 0.03, \"compare_s\": 0.005, \"ref_threads\": 4}}"),
                      "%s", t);
    cr_assert_eq(strstr(strstr(t, "\"timing\"") + 1, "\"timing\""), NULL, "second result timed: %s", t);
    free(t);
    cr_assert_eq(moects__results_read(path, &back, err, sizeof err), 0, "%s", err);
    cr_assert_eq(back.n, 2u);
    cr_assert(back.v[0].wall_s == 0.25 && back.v[0].inputs_s == 0.01 && back.v[0].reference_s == 0.2 &&
              back.v[0].kernel_s == 0.03 && back.v[0].compare_s == 0.005 && back.v[0].ref_threads == 4);
    cr_assert(back.v[1].wall_s == 0 && back.v[1].ref_threads == 0);
    moects__run_free(&back);
    moects__run_free(&run);
}

/* a complete file but for the closing of its one result (every field but "timing" is required) */
static const char *head_json =
    "{\"moects_version\": \"0.1\", \"commit\": \"c\", \"date\": \"d\", \"machine\": \"h\", \"filter\": \"\", "
    "\"shard\": \"\", \"seed\": 1, \"results\": [\n"
    "{\"kernel\": \"k\", \"case\": \"c\", \"model\": \"m\", \"layout\": \"tp1\", \"op\": \"fp4_gemm\", \"mutant\": false, "
    "\"verdict\": \"PASS_EXACT\", \"recipe\": \"\", \"mismatches\": 0, \"max_ulp\": 0, \"calc_diff\": 0, "
    "\"first_mismatch\": null, \"reason\": \"\", \"seed\": 1, \"kernel_ms\": 0, \"perf_value\": 0, \"perf_fraction\": 0";
#define T_REST "\"inputs_s\": 0, \"reference_s\": 0, \"kernel_s\": 0, \"compare_s\": 0, \"ref_threads\": 0"

static void expect_error(const char *timing, const char *want)
{
    char text[1024], path[300], err[512] = "";
    snprintf(text, sizeof text, "%s, \"timing\": %s}\n]}\n", head_json, timing);
    snprintf(path, sizeof path, "%s/bad.json", tmpdir);
    write_text(path, text);
    moects_run run;
    cr_assert_eq(moects__results_read(path, &run, err, sizeof err), -1, "accepted %s", timing);
    char full[600];
    snprintf(full, sizeof full, "%s: %s", path, want);
    cr_assert_str_eq(err, full);
}

Test(timing, bad_timing_is_a_one_line_error_naming_the_field, .init = setup, .fini = rm_tmp)
{
    expect_error("{\"wall_s\": -1.0, " T_REST "}", "results[0].timing.wall_s: not a finite number of seconds >= 0");
    expect_error("{\"wall_s\": 1, \"inputs_s\": 0, \"reference_s\": 0, \"kernel_s\": \"inf\", \"compare_s\": 0, "
                 "\"ref_threads\": 0}",
                 "results[0].timing.kernel_s: not a finite number of seconds >= 0");
    expect_error("{\"wall_s\": 1, \"inputs_s\": 0, \"reference_s\": 0, \"kernel_s\": 0, \"compare_s\": \"nan\", "
                 "\"ref_threads\": 0}",
                 "results[0].timing.compare_s: not a finite number of seconds >= 0");
    expect_error("{\"wall_s\": 1, \"inputs_s\": \"x\", \"reference_s\": 0, \"kernel_s\": 0, \"compare_s\": 0, "
                 "\"ref_threads\": 0}",
                 "results[0].timing.inputs_s: \"x\" is not a number (strings allowed: nan, inf, -inf)");
    expect_error("{\"wall_s\": 1, \"inputs_s\": 0, \"reference_s\": 0, \"kernel_s\": 0, \"compare_s\": 0, "
                 "\"ref_threads\": 1.5}",
                 "results[0].timing.ref_threads: expected an integer, got a number");
    expect_error("{\"wall_s\": 1, \"inputs_s\": 0, \"reference_s\": 0, \"kernel_s\": 0, \"compare_s\": 0, "
                 "\"ref_threads\": -2}",
                 "results[0].timing.ref_threads: negative");
    expect_error("{\"wall\": 1}", "results[0].timing.wall: unknown field");
    expect_error("[1]", "results[0].timing: expected an object, got an array");
}

/* "timing" may be absent (files written before it existed), but when present it holds all six keys:
 * a missing one is an error naming it, whichever it is. */
Test(timing, timing_object_missing_a_key_is_an_error, .init = setup, .fini = rm_tmp)
{
    static const char *const keys[] = {"wall_s", "inputs_s", "reference_s", "kernel_s", "compare_s", "ref_threads"};
    for (int drop = 0; drop < 6; drop++) {
        char t[300] = "{", want[100];
        for (int i = 0, first = 1; i < 6; i++)
            if (i != drop) {
                snprintf(t + strlen(t), sizeof t - strlen(t), "%s\"%s\": 1", first ? "" : ", ", keys[i]);
                first = 0;
            }
        strcat(t, "}");
        snprintf(want, sizeof want, "results[0].timing.%s: missing", keys[drop]);
        expect_error(t, want);
    }
    /* all six present: reads */
    char text[1024], path[300], err[512] = "";
    snprintf(text, sizeof text, "%s, \"timing\": {\"wall_s\": 2, \"inputs_s\": 0, \"reference_s\": 1.5, "
                                "\"kernel_s\": 0.25, \"compare_s\": 0, \"ref_threads\": 3}}\n]}\n", head_json);
    snprintf(path, sizeof path, "%s/full.json", tmpdir);
    write_text(path, text);
    moects_run run;
    cr_assert_eq(moects__results_read(path, &run, err, sizeof err), 0, "%s", err);
    cr_assert(run.v[0].wall_s == 2 && run.v[0].reference_s == 1.5 && run.v[0].inputs_s == 0 &&
              run.v[0].kernel_s == 0.25 && run.v[0].compare_s == 0 && run.v[0].ref_threads == 3);
    moects__run_free(&run);
    /* and absent: all zero */
    snprintf(text, sizeof text, "%s}\n]}\n", head_json);
    write_text(path, text);
    cr_assert_eq(moects__results_read(path, &run, err, sizeof err), 0, "%s", err);
    cr_assert(run.v[0].wall_s == 0 && run.v[0].ref_threads == 0);
    moects__run_free(&run);
}

/* 12 cases c01..c12, two tasks each: the first (wall i, inputs 0.1, reference i/2 on 2 threads,
 * kernel 0.2, compare 0.05), the second (wall 0.5, kernel 0.4, compare 0.05). A case's wall is
 * i + 0.5: the slowest ten are c12 down to c03. Totals: wall sum(1..12) + 12 * 0.5 = 84,
 * inputs 1.2, reference 39, kernel 12 * 0.6 = 7.2, compare 12 * 0.1 = 1.2, other 84 - 48.6 = 35.4. */
Test(timing, summary_lists_the_slowest_cases, .init = setup, .fini = rm_tmp)
{
    moects_run run;
    memset(&run, 0, sizeof run);
    snprintf(run.moects_version, sizeof run.moects_version, "0.1");
    for (int i = 1; i <= 12; i++) {
        char id[16];
        snprintf(id, sizeof id, "c%02d", i);
        moects_result a = res("k1", id), b = res("k2", id);
        a.wall_s = i, a.inputs_s = 0.1, a.reference_s = i / 2.0, a.ref_threads = 2, a.kernel_s = 0.2, a.compare_s = 0.05;
        b.wall_s = 0.5, b.kernel_s = 0.4, b.compare_s = 0.05;
        cr_assert_eq(moects__run_push(&run, &a), 0);
        cr_assert_eq(moects__run_push(&run, &b), 0);
    }
    size_t len;
    char *md = moects__summary_render(&run, NULL, 0, NULL, &len);
    cr_assert_not_null(md);
    cr_assert_not_null(strstr(md, "## Where the time went\n\n24 tasks took 84.0 s of worker time (summed over the "
                                  "workers): inputs 1.2 s, reference 39.0 s, kernel 7.2 s, compare 1.2 s, other 35.4 s.\n"),
                       "%s", md);
    const char *rows = strstr(md, "|---|---:|---:|---:|---:|---:|---:|\n");
    cr_assert_not_null(rows, "%s", md);
    rows += strlen("|---|---:|---:|---:|---:|---:|---:|\n");
    char want[2048] = "";
    for (int i = 12; i >= 3; i--) {
        char line[160];
        snprintf(line, sizeof line, "| `c%02d` | 2 | %.3f | 0.100 | %.3f (2) | 0.600 | 0.100 |\n", i, i + 0.5, i / 2.0);
        strcat(want, line);
    }
    cr_assert_str_eq(rows, want);
    free(md);
    /* untimed: no section */
    for (size_t i = 0; i < run.n; i++) {
        moects_result *r = &run.v[i];
        r->wall_s = r->inputs_s = r->reference_s = r->kernel_s = r->compare_s = 0;
        r->ref_threads = 0;
    }
    md = moects__summary_render(&run, NULL, 0, NULL, &len);
    cr_assert_null(strstr(md, "Where the time went"));
    free(md);
    moects__run_free(&run);
}

/* "gpu": written last in a result that has one, read back as written; absent (no GPU list, older
 * files): none written, read as "". Not a string: a one-line error naming the field. */
Test(timing, gpu_round_trip_and_type, .init = setup, .fini = rm_tmp)
{
    moects_run run, back;
    memset(&run, 0, sizeof run);
    snprintf(run.moects_version, sizeof run.moects_version, "0.1");
    moects_result r = res("k", "c1"), u = res("k", "c2");
    snprintf(r.gpu, sizeof r.gpu, "GPU-8f6c2a1e");
    cr_assert_eq(moects__run_push(&run, &r), 0);
    cr_assert_eq(moects__run_push(&run, &u), 0);
    char err[512], path[300];
    snprintf(path, sizeof path, "%s/g.json", tmpdir);
    cr_assert_eq(moects__results_write(path, &run, err, sizeof err), 0, "%s", err);
    char *t = slurp(path);
    cr_assert_not_null(strstr(t, "\"perf_fraction\": 0.0, \"gpu\": \"GPU-8f6c2a1e\"}"), "%s", t);
    cr_assert_eq(strstr(strstr(t, "\"gpu\"") + 1, "\"gpu\""), NULL, "second result has a gpu: %s", t);
    free(t);
    cr_assert_eq(moects__results_read(path, &back, err, sizeof err), 0, "%s", err);
    cr_assert_str_eq(back.v[0].gpu, "GPU-8f6c2a1e");
    cr_assert_str_eq(back.v[1].gpu, "");
    moects__run_free(&back);
    moects__run_free(&run);
    char text[1024];
    snprintf(text, sizeof text, "%s, \"gpu\": 3}\n]}\n", head_json);
    write_text(path, text);
    cr_assert_eq(moects__results_read(path, &back, err, sizeof err), -1);
    char want[400];
    snprintf(want, sizeof want, "%s: results[0].gpu: expected a string, got an integer", path);
    cr_assert_str_eq(err, want);
}

/* Seven results over five cases: c1 twice on "10" (1 s, 2 s), c2 and c3 on "2" (0.5 s, 0.25 s), c4
 * with no GPU (left out), c5 on "0" (4 s), c6 on "GPU-x" (1 s). In order: "0" (1 case, 1 result,
 * 4 s), "2" (2, 2, 0.75 s), "10" (1, 2, 3 s: numbers by value), "GPU-x" (1, 1, 1 s: names after them). */
Test(timing, gpu_shares_and_summary, .init = setup, .fini = rm_tmp)
{
    static const struct { const char *c, *gpu; double wall; } in[] = {
        {"c1", "10", 1}, {"c1", "10", 2}, {"c2", "2", 0.5}, {"c3", "2", 0.25}, {"c4", "", 7}, {"c5", "0", 4},
        {"c6", "GPU-x", 1}};
    moects_run run;
    memset(&run, 0, sizeof run);
    for (size_t i = 0; i < sizeof in / sizeof in[0]; i++) {
        char k[8];
        snprintf(k, sizeof k, "k%zu", i);
        moects_result r = res(k, in[i].c);
        snprintf(r.gpu, sizeof r.gpu, "%s", in[i].gpu);
        r.wall_s = in[i].wall;
        cr_assert_eq(moects__run_push(&run, &r), 0);
    }
    moects__gpu_share *g;
    cr_assert_eq(moects__gpu_shares(&run, &g), 4);
    static const struct { const char *gpu; size_t cases, results; double wall; } want[] = {
        {"0", 1, 1, 4}, {"2", 2, 2, 0.75}, {"10", 1, 2, 3}, {"GPU-x", 1, 1, 1}};
    for (int i = 0; i < 4; i++) {
        cr_assert_str_eq(g[i].gpu, want[i].gpu);
        cr_assert(g[i].cases == want[i].cases && g[i].results == want[i].results && g[i].wall_s == want[i].wall,
                  "GPU %s: %zu cases, %zu results, %g s", g[i].gpu, g[i].cases, g[i].results, g[i].wall_s);
    }
    free(g);
    size_t len;
    char *md = moects__summary_render(&run, NULL, 0, NULL, &len);
    const char *t = md ? strstr(md, "| GPU | cases | results | worker seconds |\n|---|---:|---:|---:|\n") : NULL;
    cr_assert_not_null(t, "%s", md);
    cr_assert_str_eq(strchr(strchr(t, '\n') + 1, '\n') + 1,
                     "| 0 | 1 | 1 | 4.0 |\n| 2 | 2 | 2 | 0.8 |\n| 10 | 1 | 2 | 3.0 |\n| GPU-x | 1 | 1 | 1.0 |\n");
    free(md);
    for (size_t i = 0; i < run.n; i++) run.v[i].gpu[0] = '\0'; /* no GPU named: no section, no share */
    cr_assert_eq(moects__gpu_shares(&run, &g), 0);
    free(g);
    md = moects__summary_render(&run, NULL, 0, NULL, &len);
    cr_assert_null(strstr(md, "## GPUs"), "%s", md);
    free(md);
    moects__run_free(&run);
}
