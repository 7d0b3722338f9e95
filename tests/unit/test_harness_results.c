/* test_harness_results.c: verdict words and results.json I/O (harness/model/results.c). Expected values
 * are written by hand from the fixture tests/fixtures/data/results/basic.json and the schema comment. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "moects_harness.h"

#define DATA MOECTS_SOURCE_DIR "/tests/fixtures/data/results/"

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
    static const char *const words[] = {"PASS_EXACT", "PASS_BOUNDED", "PASS_TOLERANCE", "PASS_TIE", "FAIL_MISMATCH",
                                        "FAIL_CRASH", "FAIL_TIMEOUT", "FAIL_OOB_WRITE", "FAIL_NONDETERMINISTIC",
                                        "FAIL_BATCH_VARIANT", "UNSUPPORTED", "SKIP", "FAIL_REFERENCE"};
    cr_assert_eq(MOECTS_VERDICT_COUNT, 13);
    for (int v = 0; v < 13; v++) {
        cr_assert_str_eq(moects__verdict_name((moects_verdict)v), words[v]);
        moects_verdict got;
        cr_assert_eq(moects__verdict_parse(words[v], &got), 0);
        cr_assert_eq(got, (moects_verdict)v);
    }
    moects_verdict got;
    cr_assert_eq(moects__verdict_parse("pass_exact", &got), -1);
    cr_assert_eq(moects__verdict_parse("PASS", &got), -1);
    cr_assert_eq(moects__verdict_parse("", &got), -1);
    cr_assert_str_eq(moects__verdict_name((moects_verdict)99), "?");
    cr_assert(moects_verdict_is_pass(MOECTS_PASS_TOLERANCE) && !moects_verdict_is_pass(MOECTS_UNSUPPORTED));
    cr_assert(moects_verdict_is_fail(MOECTS_FAIL_TIMEOUT) && !moects_verdict_is_fail(MOECTS_SKIP));
    cr_assert(moects_verdict_is_fail(MOECTS_FAIL_OOB_WRITE) && moects_verdict_is_fail(MOECTS_FAIL_NONDETERMINISTIC));
    cr_assert(moects_verdict_is_fail(MOECTS_FAIL_BATCH_VARIANT) && !moects_verdict_is_fail(MOECTS_UNSUPPORTED));
    size_t n[MOECTS_VERDICT_COUNT] = {[MOECTS_PASS_EXACT] = 5, [MOECTS_FAIL_BATCH_VARIANT] = 2, [MOECTS_SKIP] = 1};
    cr_assert_eq(moects__fail_count(n), 2, "FAIL_BATCH_VARIANT counts as a failure");
}

Test(results, reads_hand_written_fixture)
{
    moects_run run;
    char err[512] = "";
    cr_assert_eq(moects__results_read(DATA "basic.json", &run, err, sizeof err), 0, "%s", err);
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

    /* zero values, as the writer writes them */
    const moects_result *c = &run.v[2];
    cr_assert_eq(c->op, MOECTS_OP_FP4_GEMM);
    cr_assert_eq(c->verdict, MOECTS_UNSUPPORTED);
    cr_assert_str_eq(c->reason, "K % 32 != 0");
    cr_assert_str_eq(c->recipe, "");
    cr_assert_eq(c->mismatches, 0);
    cr_assert_eq(c->max_ulp, 0);
    cr_assert_eq(c->first_index, -1);
    moects__run_free(&run);
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
        cr_assert_eq(moects__run_push(&run, &r), 0);
    }
    moects_result r = mk("cpu.ep_gather", "ep_gather/kimi-k3/tp8/t6", MOECTS_FAIL_MISMATCH);
    r.calc_diff = NAN;
    r.perf_value = INFINITY;
    r.perf_fraction = -INFINITY;
    cr_assert_eq(moects__run_push(&run, &r), 0);

    char path[128], err[512] = "";
    snprintf(path, sizeof path, "%s/results.json", tmpdir);
    cr_assert_eq(moects__results_write(path, &run, err, sizeof err), 0, "%s", err);

    /* the number conventions, by hand: 2^53-1 stays an integer, 2^53 is a string, an unbounded ULP
     * distance (UINT64_MAX) the word "unbounded" (the fixture basic.json keeps the older digits) */
    const char *text = slurp(path);
    cr_assert_not_null(strstr(text, "\"seed\": \"9007199254740992\""));
    cr_assert_not_null(strstr(text, "\"seed\": 9007199254740991,"));
    cr_assert_not_null(strstr(text, "\"max_ulp\": \"unbounded\""));
    cr_assert_null(strstr(text, "18446744073709551615"));
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
    cr_assert_eq(moects__results_read(path, &back, err, sizeof err), 0, "%s", err);
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
    moects__run_free(&back);
    moects__run_free(&run);
}

Test(results, write_is_atomic_and_leaves_no_temp, .init = mk_tmp, .fini = rm_tmp)
{
    moects_run run;
    memset(&run, 0, sizeof run);
    strcpy(run.moects_version, "0.1");
    char path[128], err[512];
    snprintf(path, sizeof path, "%s/r.json", tmpdir);
    cr_assert_eq(moects__results_write(path, &run, err, sizeof err), 0, "%s", err);
    cr_assert_str_eq(slurp(path), "{\n\"moects_version\": \"0.1\",\n\"commit\": \"\",\n\"date\": \"\",\n"
                                  "\"machine\": \"\",\n\"filter\": \"\",\n\"shard\": \"\",\n\"seed\": 0,\n"
                                  "\"results\": []\n}\n");
    char cmd[256];
    snprintf(cmd, sizeof cmd, "test $(ls %s | wc -l) -eq 1", tmpdir);
    cr_assert_eq(system(cmd), 0);
    snprintf(path, sizeof path, "%s/no/such/dir/r.json", tmpdir);
    cr_assert_eq(moects__results_write(path, &run, err, sizeof err), -1);
}

/* Bad files: each gives exactly one line "path: field: problem". */
static void expect_error(const char *body, const char *want_suffix)
{
    const char *path = put("bad.json", body);
    moects_run run;
    char err[512] = "", want[768];
    cr_assert_eq(moects__results_read(path, &run, err, sizeof err), -1, "accepted: %s", body);
    snprintf(want, sizeof want, "%s: %s", path, want_suffix);
    cr_assert_str_eq(err, want);
    cr_assert_null(strchr(err, '\n'));
    cr_assert_eq(run.n, 0);
    cr_assert_null(run.v);
}

/* The fields of a complete file, in the writer's order: top level, then one result. A test drops
 * or replaces one of them to make a bad file. */
typedef struct {
    const char *key, *value;
} field;
static const field top_fields[] = {
    {"moects_version", "\"0.1\""}, {"commit", "\"c\""}, {"date", "\"d\""}, {"machine", "\"h\""},
    {"filter", "\"\""},            {"shard", "\"\""},   {"seed", "1"},
};
static const field result_fields[] = {
    {"kernel", "\"k\""},    {"case", "\"c\""},     {"model", "\"m\""},        {"layout", "\"tp1\""},
    {"op", "\"ep_gather\""}, {"mutant", "false"},   {"verdict", "\"SKIP\""},  {"recipe", "\"\""},
    {"mismatches", "0"},    {"max_ulp", "0"},      {"calc_diff", "0"},       {"first_mismatch", "null"},
    {"reason", "\"\""},     {"seed", "1"},         {"kernel_ms", "0"},       {"perf_value", "0"},
    {"perf_fraction", "0"},
};
#define NFIELDS(a) (sizeof a / sizeof *a)

/* Append to buf the object of fields f, key `change` set to value (NULL: left out; a key not
 * among f: added at the end), case id `case_id`. */
static void put_object(char *buf, size_t cap, const field *f, size_t n, const char *change, const char *value,
                       const char *case_id)
{
    size_t l = strlen(buf);
    int first = 1, found = 0;
    l += (size_t)snprintf(buf + l, cap - l, "{");
    for (size_t i = 0; i < n; i++) {
        const char *v = f[i].value;
        if (change && !strcmp(change, f[i].key)) {
            found = 1;
            if (!value) continue;
            v = value;
        } else if (case_id && !strcmp(f[i].key, "case")) {
            v = case_id;
        }
        l += (size_t)snprintf(buf + l, cap - l, "%s\"%s\": %s", first ? "" : ", ", f[i].key, v);
        first = 0;
    }
    if (change && !found && value) l += (size_t)snprintf(buf + l, cap - l, ", \"%s\": %s", change, value);
    snprintf(buf + l, cap - l, "}");
}

/* A file of nres results (cases "c0", "c1"...); the last result's `rkey` and the top level's
 * `tkey` changed as put_object says (NULL: no change). Static buffer. */
static const char *file_with(int nres, const char *tkey, const char *tval, const char *rkey, const char *rval)
{
    static char buf[8192];
    buf[0] = '\0';
    put_object(buf, sizeof buf, top_fields, NFIELDS(top_fields), tkey, tval, NULL);
    size_t l = strlen(buf) - 1; /* reopen the top-level object */
    l += (size_t)snprintf(buf + l, sizeof buf - l, ", \"results\": [");
    for (int i = 0; i < nres; i++) {
        char id[16];
        snprintf(id, sizeof id, "\"c%d\"", i);
        if (i) strcat(buf, ",\n");
        int last = i == nres - 1;
        put_object(buf, sizeof buf, result_fields, NFIELDS(result_fields), last ? rkey : NULL, last ? rval : NULL, id);
    }
    strcat(buf, "]}\n");
    return buf;
}

Test(results, complete_file_reads, .init = mk_tmp, .fini = rm_tmp)
{
    moects_run run;
    char err[512] = "";
    cr_assert_eq(moects__results_read(put("ok.json", file_with(4, NULL, NULL, NULL, NULL)), &run, err, sizeof err), 0,
                 "%s", err);
    cr_assert_eq(run.n, 4);
    cr_assert_str_eq(run.v[3].case_id, "c3");
    cr_assert_eq(run.v[3].verdict, MOECTS_SKIP);
    cr_assert_eq(run.v[3].first_index, -1);
    cr_assert_str_eq(run.v[3].known, "");
    moects__run_free(&run);
}

/* Every field the writer always writes is required: leaving one out is "FILE: FIELD: missing". The
 * optional ones ("known", "timing") may be left out. */
Test(results, every_written_field_is_required, .init = mk_tmp, .fini = rm_tmp)
{
    char want[128];
    for (size_t i = 0; i < NFIELDS(top_fields); i++) {
        snprintf(want, sizeof want, "%s: missing", top_fields[i].key);
        expect_error(file_with(1, top_fields[i].key, NULL, NULL, NULL), want);
    }
    for (size_t i = 0; i < NFIELDS(result_fields); i++) {
        snprintf(want, sizeof want, "results[3].%s: missing", result_fields[i].key);
        expect_error(file_with(4, NULL, NULL, result_fields[i].key, NULL), want);
    }
    expect_error("{\"moects_version\": \"0.1\", \"commit\": \"c\", \"date\": \"d\", \"machine\": \"h\", \"filter\": \"\", "
                 "\"shard\": \"\", \"seed\": 1}",
                 "results: missing");
}

#define TOP "{\"moects_version\": \"0.1\", \"commit\": \"c\", \"date\": \"d\", \"machine\": \"h\", \"filter\": \"\", " \
            "\"shard\": \"\", \"seed\": 1"

Test(results, bad_input_one_line_errors, .init = mk_tmp, .fini = rm_tmp)
{
    expect_error("[]", "(top level): expected an object, got an array");
    expect_error(TOP ", \"results\": {}}", "results: expected an array, got an object");
    expect_error(file_with(1, "colour", "1", NULL, NULL), "colour: unknown field");
    expect_error(file_with(1, "moects_version", "1", NULL, NULL), "moects_version: expected a string, got an integer");
    expect_error(file_with(1, "seed", "-1", NULL, NULL), "seed: negative");
    expect_error(file_with(1, "commit", "null", NULL, NULL), "commit: expected a string, got null");
    expect_error(TOP ", \"results\": [3]}", "results[0]: expected an object, got an integer");
    expect_error(file_with(2, NULL, NULL, "kernel", NULL), "results[1].kernel: missing");
    expect_error(file_with(1, NULL, NULL, "extra", "1"), "results[0].extra: unknown field");
    expect_error(file_with(1, NULL, NULL, "verdict", "\"PASSED\""), "results[0].verdict: unknown verdict \"PASSED\"");
    expect_error(file_with(1, NULL, NULL, "op", "\"gemm\""), "results[0].op: unknown op \"gemm\" (ep_gather, fp4_gemm)");
    expect_error(file_with(1, NULL, NULL, "mutant", "0"), "results[0].mutant: expected a boolean, got an integer");
    expect_error(file_with(1, NULL, NULL, "mismatches", "-3"), "results[0].mismatches: negative");
    expect_error(file_with(1, NULL, NULL, "mismatches", "1.5"), "results[0].mismatches: expected an integer, got a number");
    expect_error(file_with(1, NULL, NULL, "max_ulp", "\"12x\""),
                 "results[0].max_ulp: \"12x\" is not a 64-bit unsigned integer");
    expect_error(file_with(1, NULL, NULL, "max_ulp", "\"18446744073709551616\""),
                 "results[0].max_ulp: \"18446744073709551616\" is not a 64-bit unsigned integer");
    expect_error(file_with(1, NULL, NULL, "calc_diff", "\"NaN\""),
                 "results[0].calc_diff: \"NaN\" is not a number (strings allowed: nan, inf, -inf)");
    expect_error(file_with(1, NULL, NULL, "first_mismatch", "{\"got\": \"a\", \"want\": \"b\"}"),
                 "results[0].first_mismatch.index: missing");
    expect_error(file_with(1, NULL, NULL, "first_mismatch", "{\"index\": 1, \"want\": \"b\"}"),
                 "results[0].first_mismatch.got: missing");
    expect_error(file_with(1, NULL, NULL, "first_mismatch", "{\"index\": 1, \"got\": \"a\", \"want\": \"b\", \"x\": 0}"),
                 "results[0].first_mismatch.x: unknown field");
    expect_error(file_with(1, NULL, NULL, "first_mismatch", "5"),
                 "results[0].first_mismatch: expected an object or null, got an integer");
    expect_error(file_with(2, NULL, NULL, "case", "\"c0\""), "results[1]: duplicate of results[0] (kernel k, case c0)");
    /* jansson's position: the closing quote of the repeated key, 1-based */
    expect_error("{\"a\": 1, \"a\": 2}", "line 1 column 12: duplicate object key near '\"a\"'");
    expect_error("{\"moects_version\": \"0.1\",\n \"results\": [}", "line 2 column 14: unexpected token near '}'");
    char longk[200];
    memset(longk, 'x', 120);
    longk[0] = '"';
    longk[119] = '"';
    longk[120] = '\0';
    expect_error(file_with(1, NULL, NULL, "kernel", longk), "results[0].kernel: longer than 95 bytes");
}

Test(results, missing_file_is_an_error)
{
    moects_run run;
    char err[512];
    cr_assert_eq(moects__results_read("/nonexistent/results.json", &run, err, sizeof err), -1);
    cr_assert_eq(strncmp(err, "/nonexistent/results.json: cannot read: ", 40), 0, "%s", err);
}

Test(results, diag_round_trip, .init = mk_tmp, .fini = rm_tmp)
{
    /* a grouped (expert, row, col) diag with one first and one worst element, BF16: written as the
     * schema says (by hand: 0x3f81 is 1 + 2^-7 = 1.0078125) and read back bit for bit */
    moects_run run;
    memset(&run, 0, sizeof run);
    strcpy(run.moects_version, "0.1");
    moects_result r = mk("cpu.ep_gather", "ep_gather/kimi-k3/tp8/t1", MOECTS_FAIL_MISMATCH);
    r.mismatches = 1;
    r.diag.ndims = 3;
    strcpy(r.diag.axes[0], "expert");
    strcpy(r.diag.axes[1], "row");
    strcpy(r.diag.axes[2], "col");
    r.diag.dtype = MOECTS_BF16;
    strcpy(r.diag.pattern, "every row of expert 3, column 7");
    moects_diag_elem e = {.index = 99, .at = {3, 1, 7}, .got = 0x3f81, .want = 0x3f80, .ulp = 1};
    r.diag.first[0] = r.diag.worst[0] = e;
    r.diag.nfirst = r.diag.nworst = 1;
    cr_assert_eq(moects__run_push(&run, &r), 0);
    char path[128], err[512] = "";
    snprintf(path, sizeof path, "%s/results.json", tmpdir);
    cr_assert_eq(moects__results_write(path, &run, err, sizeof err), 0, "%s", err);
    const char *text = slurp(path);
    cr_assert_not_null(strstr(text, "\"diag\": {\"axes\": [\"expert\", \"row\", \"col\"], \"pattern\": \"every row of "
                                    "expert 3, column 7\", \"first\": [{\"at\": [3, 1, 7], \"index\": 99, \"got\": "
                                    "\"0x3f81 (1.0078125)\", \"want\": \"0x3f80 (1)\", \"ulp\": 1}]"));
    moects_run back;
    cr_assert_eq(moects__results_read(path, &back, err, sizeof err), 0, "%s", err);
    const moects_diag *d = &back.v[0].diag;
    cr_assert_eq(d->ndims, 3);
    cr_assert_str_eq(d->axes[2], "col");
    cr_assert_eq(d->dtype, MOECTS_BF16);
    cr_assert_str_eq(d->pattern, "every row of expert 3, column 7");
    cr_assert_eq(d->nfirst, 1);
    cr_assert_eq(d->nworst, 1);
    cr_assert_eq(d->worst[0].at[0], 3);
    cr_assert_eq(d->worst[0].at[2], 7);
    cr_assert_eq(d->worst[0].index, 99);
    cr_assert_eq(d->worst[0].got, 0x3f81);
    cr_assert_eq(d->worst[0].ulp, 1);
    moects__run_free(&back);
    moects__run_free(&run);
}

/* text (a file_with file) with every "SKIP" verdict made `verdict` (static buffer). */
static const char *verdicts_made(const char *text, const char *verdict)
{
    static char out[8192];
    size_t o = 0;
    for (const char *p = text; *p && o + 32 < sizeof out;) {
        if (!strncmp(p, "\"SKIP\"", 6)) {
            o += (size_t)snprintf(out + o, sizeof out - o, "\"%s\"", verdict);
            p += 6;
        } else {
            out[o++] = *p++;
        }
    }
    out[o] = '\0';
    return out;
}

/* A bounded verdict's optional "acc_check" (the accumulation check): read, written back the same,
 * absent means not run (acc_n 0); its one-line errors, a PASS_BOUNDED whose RMS fails the check and
 * an acc_check on a verdict that is not bounded among them. */
Test(results, acc_check_reads_writes_and_refuses, .init = mk_tmp, .fini = rm_tmp)
{
    moects_run run;
    char err[512] = "", path[128];
    const char *acc = "{\"rms_sigma\": 0.25, \"elements\": 4096}";
    const char *ok = verdicts_made(file_with(2, NULL, NULL, "acc_check", acc), "PASS_BOUNDED");
    cr_assert_eq(moects__results_read(put("acc.json", ok), &run, err, sizeof err), 0, "%s", err);
    cr_assert_eq(run.v[1].acc_rms, 0.25);
    cr_assert_eq(run.v[1].acc_n, 4096);
    cr_assert_eq(run.v[0].acc_n, 0);
    snprintf(path, sizeof path, "%s/back.json", tmpdir);
    cr_assert_eq(moects__results_write(path, &run, err, sizeof err), 0, "%s", err);
    const char *text = slurp(path);
    cr_assert_not_null(strstr(text, "\"acc_check\": {\"rms_sigma\": 0.25, \"elements\": 4096}"), "%s", text);
    cr_assert_null(strstr(strstr(text, "acc_check") + 1, "acc_check"), "only the result that has it: %s", text);
    moects__run_free(&run);
#define BAD_ACC(v, want) expect_error(verdicts_made(file_with(1, NULL, NULL, "acc_check", v), "FAIL_MISMATCH"), want)
    BAD_ACC("[]", "results[0].acc_check: expected an object, got an array");
    BAD_ACC("{\"rms_sigma\": 1.0}", "results[0].acc_check.elements: missing");
    BAD_ACC("{\"rms_sigma\": -1.0, \"elements\": 3}", "results[0].acc_check.rms_sigma: not a finite number >= 0");
    BAD_ACC("{\"rms_sigma\": 1.0, \"elements\": 0}",
            "results[0].acc_check.elements: must be >= 1 (the key is left out when the check did not run)");
    BAD_ACC("{\"rms_sigma\": 1.0, \"elements\": 3, \"x\": 1}", "results[0].acc_check.x: unknown field");
#undef BAD_ACC
    expect_error(verdicts_made(file_with(1, NULL, NULL, "acc_check", "{\"rms_sigma\": 5.0, \"elements\": 7168}"),
                               "PASS_BOUNDED"),
                 "results[0].acc_check: rms_sigma 5 over 7168 elements fails the accumulation check (over 2), but the "
                 "verdict is PASS_BOUNDED");
    expect_error(verdicts_made(file_with(1, NULL, NULL, "acc_check", acc), "PASS_EXACT"),
                 "results[0].acc_check: only on a bounded verdict's PASS_BOUNDED or FAIL_MISMATCH (not on PASS_EXACT)");
}

/* An unbounded diag element (a NaN against a number) is "ulp": "unbounded" and reads back as
 * UINT64_MAX; a misspelt word is a one-line error naming the field. */
Test(results, unbounded_ulp_is_a_word, .init = mk_tmp, .fini = rm_tmp)
{
    moects_run run;
    memset(&run, 0, sizeof run);
    strcpy(run.moects_version, "0.1");
    moects_result r = mk("cpu.ep_gather", "ep_gather/kimi-k3/tp8/t1", MOECTS_FAIL_MISMATCH);
    r.mismatches = 1;
    r.max_ulp = UINT64_MAX;
    r.diag.ndims = 2;
    strcpy(r.diag.axes[0], "t");
    strcpy(r.diag.axes[1], "d");
    r.diag.dtype = MOECTS_BF16;
    strcpy(r.diag.pattern, "one element");
    moects_diag_elem e = {.index = 5, .at = {0, 5}, .got = 0x7fc0, .want = 0x3f80, .ulp = UINT64_MAX};
    r.diag.first[0] = e;
    r.diag.nfirst = 1;
    cr_assert_eq(moects__run_push(&run, &r), 0);
    char path[128], err[512] = "";
    snprintf(path, sizeof path, "%s/results.json", tmpdir);
    cr_assert_eq(moects__results_write(path, &run, err, sizeof err), 0, "%s", err);
    const char *text = slurp(path);
    cr_assert_not_null(strstr(text, "\"max_ulp\": \"unbounded\""));
    cr_assert_not_null(strstr(text, "\"want\": \"0x3f80 (1)\", \"ulp\": \"unbounded\"}"));
    moects_run back;
    cr_assert_eq(moects__results_read(path, &back, err, sizeof err), 0, "%s", err);
    cr_assert_eq(back.v[0].max_ulp, UINT64_MAX);
    cr_assert_eq(back.v[0].diag.first[0].ulp, UINT64_MAX);
    moects__run_free(&back);
    moects__run_free(&run);
    expect_error(file_with(1, NULL, NULL, "max_ulp", "\"Unbounded\""),
                 "results[0].max_ulp: \"Unbounded\" is not a decimal integer");
}

/* The reason of a no-device SKIP is recognised by its prefix (harness/moects_harness.h), and only it. */
Test(results, no_device_reason)
{
    cr_assert(moects__reason_is_no_device("no CUDA device (cudaGetDeviceCount: CUDA driver version is insufficient "
                                          "for CUDA runtime version)"));
    cr_assert(moects__reason_is_no_device("no CUDA device"));
    cr_assert(!moects__reason_is_no_device("no CUDA devices here"));
    cr_assert(!moects__reason_is_no_device("out of device memory (4096 bytes for the output)"));
    cr_assert(!moects__reason_is_no_device(""));
    cr_assert(!moects__reason_is_no_device(NULL));
}
