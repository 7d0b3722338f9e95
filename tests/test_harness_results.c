/* test_harness_results.c: verdict words and results.json I/O (harness/results.c). Expected values
 * are written by hand from the fixture tests/data/results/basic.json and the schema comment. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "moects_harness.h"

#define DATA MOECTS_SOURCE_DIR "/tests/data/results/"

static char tmpdir[64];

static void mk_tmp(void)
{
    strcpy(tmpdir, "/tmp/moects_results_XXXXXX");
    cr_assert_not_null(mkdtemp(tmpdir));
}

static void rm_tmp(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    cr_assert_eq(system(cmd), 0);
}

/* Write text to tmpdir/name; returns the path (static buffer). */
static const char *put(const char *name, const char *text)
{
    static char path[256];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
    return path;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

Test(verdict, names_are_the_design_words)
{
    static const char *const words[] = {"PASS_EXACT", "PASS_TOLERANCE", "FAIL_MISMATCH", "FAIL_CRASH",
                                        "FAIL_TIMEOUT", "UNSUPPORTED", "SKIP"};
    cr_assert_eq(MOECTS_VERDICT_COUNT, 7);
    for (int v = 0; v < 7; v++) {
        cr_assert_str_eq(moects_verdict_name((moects_verdict)v), words[v]);
        moects_verdict got;
        cr_assert_eq(moects_verdict_parse(words[v], &got), 0);
        cr_assert_eq(got, (moects_verdict)v);
    }
    moects_verdict got;
    cr_assert_eq(moects_verdict_parse("pass_exact", &got), -1);
    cr_assert_eq(moects_verdict_parse("PASS", &got), -1);
    cr_assert_eq(moects_verdict_parse("", &got), -1);
    cr_assert_str_eq(moects_verdict_name((moects_verdict)99), "?");
    cr_assert(moects_verdict_is_pass(MOECTS_PASS_TOLERANCE) && !moects_verdict_is_pass(MOECTS_UNSUPPORTED));
    cr_assert(moects_verdict_is_fail(MOECTS_FAIL_TIMEOUT) && !moects_verdict_is_fail(MOECTS_SKIP));
}

Test(results, reads_hand_written_fixture)
{
    moects_run run;
    char err[512] = "";
    cr_assert_eq(moects_results_read(DATA "basic.json", &run, err, sizeof err), 0, "%s", err);
    cr_assert_str_eq(run.moects_version, "0.1");
    cr_assert_str_eq(run.commit, "0123456789abcdef0123456789abcdef01234567");
    cr_assert_str_eq(run.date, "2026-11-30T12:00:00Z");
    cr_assert_str_eq(run.machine, "testhost / cpu");
    cr_assert_eq(run.seed, 42);
    cr_assert_eq(run.n, 3);

    const moects_result *a = &run.v[0];
    cr_assert_str_eq(a->kernel, "cpu.ep_gather");
    cr_assert_str_eq(a->case_id, "ep_gather/kimi-k3/tp8/t128");
    cr_assert_str_eq(a->model, "kimi-k3");
    cr_assert_str_eq(a->layout, "tp8");
    cr_assert_eq(a->op, MOECTS_OP_EP_GATHER);
    cr_assert_eq(a->is_mutant, 0);
    cr_assert_eq(a->verdict, MOECTS_PASS_EXACT);
    cr_assert_str_eq(a->recipe, "ep_gather.fma_v1");
    cr_assert_eq(a->first_index, -1);
    cr_assert_eq(a->seed, 1);

    const moects_result *b = &run.v[1];
    cr_assert_eq(b->is_mutant, 1);
    cr_assert_eq(b->verdict, MOECTS_FAIL_MISMATCH);
    cr_assert_eq(b->mismatches, 57344);
    cr_assert_eq(b->max_ulp, UINT64_MAX);
    cr_assert(isnan(b->calc_diff));
    cr_assert_eq(b->first_index, 3072);
    cr_assert_str_eq(b->got, "0x7fc0 (nan)");
    cr_assert_str_eq(b->want, "0x3f80 (1)");
    cr_assert_eq(b->seed, 12345678901234567890ull);
    cr_assert_eq(b->kernel_ms, 0.25);
    cr_assert_eq(b->perf_value, 1500.0);
    cr_assert_eq(b->perf_fraction, 0.5);

    /* optional fields absent: defaults */
    const moects_result *c = &run.v[2];
    cr_assert_eq(c->op, MOECTS_OP_FP4_GEMM);
    cr_assert_eq(c->verdict, MOECTS_UNSUPPORTED);
    cr_assert_str_eq(c->reason, "K % 32 != 0");
    cr_assert_str_eq(c->recipe, "");
    cr_assert_eq(c->mismatches, 0);
    cr_assert_eq(c->max_ulp, 0);
    cr_assert_eq(c->first_index, -1);
    moects_run_free(&run);
    cr_assert_eq(run.n, 0);
    cr_assert_null(run.v);
}

static moects_result mk(const char *kernel, const char *case_id, moects_verdict v)
{
    moects_result r;
    memset(&r, 0, sizeof r);
    snprintf(r.kernel, sizeof r.kernel, "%s", kernel);
    snprintf(r.case_id, sizeof r.case_id, "%s", case_id);
    strcpy(r.model, "kimi-k3");
    strcpy(r.layout, "tp8");
    r.op = MOECTS_OP_EP_GATHER;
    r.verdict = v;
    r.first_index = -1;
    return r;
}

static uint64_t bits(double d)
{
    uint64_t u;
    memcpy(&u, &d, 8);
    return u;
}

Test(results, write_read_round_trip_keeps_every_bit, .init = mk_tmp, .fini = rm_tmp)
{
    moects_run run;
    memset(&run, 0, sizeof run);
    strcpy(run.moects_version, "0.1");
    strcpy(run.commit, "abc");
    strcpy(run.date, "2026-11-30T12:00:00Z");
    strcpy(run.machine, "host \"q\" \\ tab\t");
    strcpy(run.filter, "ep_gather/*");
    strcpy(run.shard, "1/4");
    run.seed = 9007199254740992ull; /* 2^53: first value written as a string */

    static const double doubles[] = {0.1, 1e-300, 4.9406564584124654e-324, -0.0, 1.0 / 3.0, 2.5e17};
    for (int i = 0; i < 6; i++) {
        char id[64];
        snprintf(id, sizeof id, "ep_gather/kimi-k3/tp8/t%d", i);
        moects_result r = mk("cpu.ep_gather", id, (moects_verdict)(i % 7));
        r.calc_diff = doubles[i];
        r.kernel_ms = doubles[5 - i];
        r.max_ulp = i == 0 ? UINT64_MAX : (uint64_t)i * 1000;
        r.seed = i == 1 ? 9007199254740991ull : 7;
        r.is_mutant = i & 1;
        r.mismatches = i;
        if (i == 2) {
            r.first_index = 17;
            strcpy(r.got, "0x3f80 (1)");
            strcpy(r.want, "0xbf80 (-1)");
        }
        cr_assert_eq(moects_run_push(&run, &r), 0);
    }
    moects_result r = mk("cpu.ep_gather", "ep_gather/kimi-k3/tp8/t6", MOECTS_FAIL_MISMATCH);
    r.calc_diff = NAN;
    r.perf_value = INFINITY;
    r.perf_fraction = -INFINITY;
    cr_assert_eq(moects_run_push(&run, &r), 0);

    char path[128], err[512] = "";
    snprintf(path, sizeof path, "%s/results.json", tmpdir);
    cr_assert_eq(moects_results_write(path, &run, err, sizeof err), 0, "%s", err);

    /* the number conventions, by hand: 2^53-1 stays an integer, 2^53 and UINT64_MAX are strings */
    const char *text = slurp(path);
    cr_assert_not_null(strstr(text, "\"seed\": \"9007199254740992\""));
    cr_assert_not_null(strstr(text, "\"seed\": 9007199254740991,"));
    cr_assert_not_null(strstr(text, "\"max_ulp\": \"18446744073709551615\""));
    cr_assert_not_null(strstr(text, "\"calc_diff\": 0.1,"));
    cr_assert_not_null(strstr(text, "\"kernel_ms\": -0.0,"));
    cr_assert_not_null(strstr(text, "\"kernel_ms\": 2.5e+17,"));
    cr_assert_not_null(strstr(text, "\"calc_diff\": \"nan\""));
    cr_assert_not_null(strstr(text, "\"perf_value\": \"inf\""));
    cr_assert_not_null(strstr(text, "\"perf_fraction\": \"-inf\""));
    cr_assert_not_null(strstr(text, "\"first_mismatch\": {\"index\": 17, \"got\": \"0x3f80 (1)\", \"want\": \"0xbf80 (-1)\"}"));
    /* one result per line: 7 results -> 7 lines starting with "  {" */
    int lines = 0;
    for (const char *p = text; (p = strstr(p, "\n  {")); p++) lines++;
    cr_assert_eq(lines, 7);

    moects_run back;
    cr_assert_eq(moects_results_read(path, &back, err, sizeof err), 0, "%s", err);
    cr_assert_str_eq(back.machine, run.machine);
    cr_assert_str_eq(back.filter, "ep_gather/*");
    cr_assert_str_eq(back.shard, "1/4");
    cr_assert_eq(back.seed, 9007199254740992ull);
    cr_assert_eq(back.n, 7);
    for (size_t i = 0; i < 7; i++) {
        const moects_result *x = &run.v[i], *y = &back.v[i];
        cr_assert_str_eq(y->kernel, x->kernel);
        cr_assert_str_eq(y->case_id, x->case_id);
        cr_assert_eq(y->verdict, x->verdict);
        cr_assert_eq(y->is_mutant, x->is_mutant);
        cr_assert_eq(y->mismatches, x->mismatches);
        cr_assert_eq(y->max_ulp, x->max_ulp);
        cr_assert_eq(y->seed, x->seed);
        cr_assert_eq(y->first_index, x->first_index);
        cr_assert_str_eq(y->got, x->got);
        cr_assert_eq(bits(y->kernel_ms), bits(x->kernel_ms), "kernel_ms of %zu", i);
        if (isnan(x->calc_diff)) cr_assert(isnan(y->calc_diff));
        else cr_assert_eq(bits(y->calc_diff), bits(x->calc_diff), "calc_diff of %zu", i);
        cr_assert_eq(bits(y->perf_value), bits(x->perf_value));
        cr_assert_eq(bits(y->perf_fraction), bits(x->perf_fraction));
    }
    moects_run_free(&back);
    moects_run_free(&run);
}

Test(results, write_is_atomic_and_leaves_no_temp, .init = mk_tmp, .fini = rm_tmp)
{
    moects_run run;
    memset(&run, 0, sizeof run);
    strcpy(run.moects_version, "0.1");
    char path[128], err[512];
    snprintf(path, sizeof path, "%s/r.json", tmpdir);
    cr_assert_eq(moects_results_write(path, &run, err, sizeof err), 0, "%s", err);
    cr_assert_str_eq(slurp(path), "{\n\"moects_version\": \"0.1\",\n\"commit\": \"\",\n\"date\": \"\",\n"
                                  "\"machine\": \"\",\n\"filter\": \"\",\n\"shard\": \"\",\n\"seed\": 0,\n"
                                  "\"results\": []\n}\n");
    char cmd[256];
    snprintf(cmd, sizeof cmd, "test $(ls %s | wc -l) -eq 1", tmpdir);
    cr_assert_eq(system(cmd), 0);
    snprintf(path, sizeof path, "%s/no/such/dir/r.json", tmpdir);
    cr_assert_eq(moects_results_write(path, &run, err, sizeof err), -1);
}

/* Bad files: each gives exactly one line "path: field: problem". */
static void expect_error(const char *body, const char *want_suffix)
{
    const char *path = put("bad.json", body);
    moects_run run;
    char err[512] = "", want[768];
    cr_assert_eq(moects_results_read(path, &run, err, sizeof err), -1, "accepted: %s", body);
    snprintf(want, sizeof want, "%s: %s", path, want_suffix);
    cr_assert_str_eq(err, want);
    cr_assert_null(strchr(err, '\n'));
    cr_assert_eq(run.n, 0);
    cr_assert_null(run.v);
}

#define HDR "{\"moects_version\": \"0.1\", \"results\": ["
#define OK1 "{\"kernel\": \"k\", \"case\": \"c\", \"model\": \"m\", \"layout\": \"tp1\", \"op\": \"ep_gather\", " \
            "\"mutant\": false, \"verdict\": \"SKIP\""

Test(results, bad_input_one_line_errors, .init = mk_tmp, .fini = rm_tmp)
{
    expect_error("[]", "(top level): expected an object, got an array");
    expect_error("{\"results\": []}", "moects_version: missing");
    expect_error("{\"moects_version\": \"0.1\"}", "results: missing");
    expect_error("{\"moects_version\": \"0.1\", \"results\": {}}", "results: expected an array, got an object");
    expect_error("{\"moects_version\": \"0.1\", \"colour\": 1, \"results\": []}", "colour: unknown field");
    expect_error("{\"moects_version\": 1, \"results\": []}", "moects_version: expected a string, got an integer");
    expect_error("{\"moects_version\": \"0.1\", \"seed\": -1, \"results\": []}", "seed: negative");
    expect_error(HDR "3]}", "results[0]: expected an object, got an integer");
    expect_error(HDR OK1 "}, {\"case\": \"c\"}]}", "results[1].kernel: missing");
    expect_error(HDR OK1 ", \"extra\": 1}]}", "results[0].extra: unknown field");
    expect_error(HDR "{\"kernel\": \"k\", \"case\": \"c\", \"model\": \"m\", \"layout\": \"tp1\", \"op\": \"ep_gather\", "
                 "\"mutant\": false, \"verdict\": \"PASSED\"}]}",
                 "results[0].verdict: unknown verdict \"PASSED\"");
    expect_error(HDR "{\"kernel\": \"k\", \"case\": \"c\", \"model\": \"m\", \"layout\": \"tp1\", \"op\": \"gemm\", "
                 "\"mutant\": false, \"verdict\": \"SKIP\"}]}",
                 "results[0].op: unknown op \"gemm\" (ep_gather, fp4_gemm)");
    expect_error(HDR "{\"kernel\": \"k\", \"case\": \"c\", \"model\": \"m\", \"layout\": \"tp1\", \"op\": \"ep_gather\", "
                 "\"mutant\": 0, \"verdict\": \"SKIP\"}]}",
                 "results[0].mutant: expected a boolean, got an integer");
    expect_error(HDR OK1 ", \"mismatches\": -3}]}", "results[0].mismatches: negative");
    expect_error(HDR OK1 ", \"mismatches\": 1.5}]}", "results[0].mismatches: expected an integer, got a number");
    expect_error(HDR OK1 ", \"max_ulp\": \"12x\"}]}", "results[0].max_ulp: \"12x\" is not a 64-bit unsigned integer");
    expect_error(HDR OK1 ", \"max_ulp\": \"18446744073709551616\"}]}",
                 "results[0].max_ulp: \"18446744073709551616\" is not a 64-bit unsigned integer");
    expect_error(HDR OK1 ", \"calc_diff\": \"NaN\"}]}",
                 "results[0].calc_diff: \"NaN\" is not a number (strings allowed: nan, inf, -inf)");
    expect_error(HDR OK1 ", \"first_mismatch\": {\"got\": \"a\", \"want\": \"b\"}}]}",
                 "results[0].first_mismatch.index: missing");
    expect_error(HDR OK1 ", \"first_mismatch\": {\"index\": 1, \"got\": \"a\", \"want\": \"b\", \"x\": 0}}]}",
                 "results[0].first_mismatch.x: unknown field");
    expect_error(HDR OK1 ", \"first_mismatch\": 5}]}",
                 "results[0].first_mismatch: expected an object or null, got an integer");
    expect_error(HDR OK1 "}, " OK1 "}]}", "results[1]: duplicate of results[0] (kernel k, case c)");
    expect_error(HDR OK1 ", \"layout\": \"tp1\"}]}", "line 1 column 161: duplicate object key near '\"layout\"'");
    expect_error("{\"moects_version\": \"0.1\",\n \"results\": [}", "line 2 column 14: unexpected token near '}'");
    char longk[200];
    memset(longk, 'x', 120);
    longk[120] = '\0';
    char body[1024];
    snprintf(body, sizeof body, HDR "{\"kernel\": \"%s\"}]}", longk);
    expect_error(body, "results[0].kernel: longer than 95 bytes");
}

Test(results, missing_file_is_an_error)
{
    moects_run run;
    char err[512];
    cr_assert_eq(moects_results_read("/nonexistent/results.json", &run, err, sizeof err), -1);
    cr_assert_eq(strncmp(err, "/nonexistent/results.json: cannot read: ", 40), 0, "%s", err);
}
