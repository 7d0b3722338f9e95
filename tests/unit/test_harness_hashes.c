/* test_harness_hashes.c: the tensor hashes of results.json (harness/report/hashes.c, harness/run/runner.c,
 * harness/model/results.c). XXH64 values are published test vectors (the xxHash and python-xxhash
 * documentation); a task's hashes are checked against the XXH64 of the inputs built here. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "moects_inputs.h"
#include "moects_registry.h"
#include "moects_runner.h"
#include "test_slurp.h"
#include "test_tmpdir.h"

Test(xxh64, published_vectors)
{
    cr_assert_eq(moects__xxh64(NULL, 0), 0xef46db3751d8e999ull);
    cr_assert_eq(moects__xxh64("abc", 3), 0x44bc2cf5ad770999ull);
    cr_assert_eq(moects__xxh64("Nobody inspects the spammish repetition", 39), 0xfbcea83c8a378bf1ull);
}

static const moects_case *find_case(const moects_case_list *l, const char *id)
{
    for (size_t i = 0; i < l->n; i++)
        if (!strcmp(l->v[i].id, id)) return &l->v[i];
    cr_assert_fail("no case %s", id);
    return NULL;
}

static const moects_kernel *find_kernel(const char *name)
{
    size_t n;
    const moects_kernel *const *k = moects__builtin_kernels(&n);
    for (size_t i = 0; i < n; i++)
        if (!strcmp(k[i]->name, name)) return k[i];
    cr_assert_fail("no kernel %s", name);
    return NULL;
}

/* A task records the XXH64 of each input tensor as moects__inputs_build makes it, and of the
 * reference: the kernel passes bit-exact, so the hash of its own output (run here) is the
 * reference's. Another seed gives other bytes. */
Test(task, records_the_hashes_of_its_inputs_and_reference)
{
    moects_case_list all = {0};
    char err[512];
    cr_assert_eq(moects__cases_builtin(MOECTS_SOURCE_DIR, &all, err, sizeof err), 0, "%s", err);
    const moects_case *c = find_case(&all, "ep_gather/kimi-k3/tp8/t16");
    moects_inputs in;
    cr_assert_eq(moects__inputs_build(c, 7, &in, err, sizeof err), 0, "%s", err);
    moects_result r;
    moects__runner_task(c, find_kernel("cpu.ep_gather"), 7, 0, &r);
    cr_assert_eq(r.verdict, MOECTS_PASS_EXACT, "%s", r.reason);
    cr_assert_eq(r.n_hashes, in.nt);
    for (int i = 0; i < in.nt; i++) {
        cr_assert_str_eq(r.hashes[i].name, in.t[i].name);
        cr_assert_eq(r.hashes[i].xxh64, moects__xxh64(in.t[i].host, in.t[i].bytes), "%s", in.t[i].name);
    }
    cr_assert(r.has_ref_hash);
    /* the kernel passed bit-exact: its output is the reference, so their hashes agree */
    void *out = malloc(in.out_bytes);
    void *ptr[MOECTS_INPUTS_MAX];
    for (int i = 0; i < MOECTS_INPUTS_MAX; i++) ptr[i] = i < in.nt ? in.t[i].host : NULL;
    moects_op_args a;
    moects__inputs_bind(&in, ptr, out, &a);
    const moects_kernel *k = find_kernel("cpu.ep_gather");
    cr_assert_eq(k->run(moects__inputs_shape(&in), &a, NULL), 0);
    cr_assert_eq(r.ref_xxh64, moects__xxh64(out, in.out_bytes));
    free(out);
    moects__inputs_free(&in);
    /* another seed, other bytes */
    moects_result r2;
    moects__runner_task(c, find_kernel("cpu.ep_gather"), 8, 0, &r2);
    cr_assert_neq(r2.hashes[0].xxh64, r.hashes[0].xxh64);
    moects__case_list_free(&all);
}

static const char *put(const char *name, const char *text)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
    return path;
}

/* the writer's layout: one header field a line, one result a line */
#define HEAD "{\n\"moects_version\": \"0.1\",\n\"commit\": \"c\",\n\"date\": \"d\",\n\"machine\": \"m\",\n" \
             "\"filter\": \"\",\n\"shard\": \"\",\n\"seed\": 1,\n\"results\": [\n"
#define RES "{\"kernel\": \"k\", \"case\": \"c1\", \"model\": \"m\", \"layout\": \"tp1\", \"op\": \"ep_gather\", " \
            "\"mutant\": false, \"verdict\": \"PASS_EXACT\", \"recipe\": \"ep_gather.fma_v1\", \"mismatches\": 0, " \
            "\"max_ulp\": 0, \"calc_diff\": 0.0, \"first_mismatch\": null, \"reason\": \"\", \"seed\": 1, " \
            "\"kernel_ms\": 0.0, \"perf_value\": 0.0, \"perf_fraction\": 0.0"

Test(results_json, hashes_round_trip_and_older_files_read)
{
    mk_tmpdir("/tmp/moects-hashes-XXXXXX");
    const char *text = HEAD "  " RES ", \"input_xxh64\": {\"x\": \"0123456789abcdef\", \"topk_ids\": "
                            "\"ffffffffffffffff\"}, \"reference_xxh64\": \"0000000000000001\"}\n]\n}\n";
    const char *p = put("a.json", text);
    moects_run run;
    char err[512];
    cr_assert_eq(moects__results_read(p, &run, err, sizeof err), 0, "%s", err);
    cr_assert_eq(run.v[0].n_hashes, 2);
    cr_assert_str_eq(run.v[0].hashes[1].name, "topk_ids");
    cr_assert_eq(run.v[0].hashes[0].xxh64, 0x0123456789abcdefull);
    cr_assert_eq(run.v[0].hashes[1].xxh64, 0xffffffffffffffffull);
    cr_assert(run.v[0].has_ref_hash);
    cr_assert_eq(run.v[0].ref_xxh64, 1);
    char out[512];
    snprintf(out, sizeof out, "%s/b.json", tmpdir);
    cr_assert_eq(moects__results_write(out, &run, err, sizeof err), 0, "%s", err);
    char *back = slurp(out);
    cr_assert_str_eq(back, text);
    free(back);
    moects__run_free(&run);
    /* a file written before hashes existed reads, and writes back without them */
    const char *old = HEAD "  " RES "}\n]\n}\n";
    p = put("old.json", old);
    cr_assert_eq(moects__results_read(p, &run, err, sizeof err), 0, "%s", err);
    cr_assert_eq(run.v[0].n_hashes, 0);
    cr_assert_eq(run.v[0].has_ref_hash, 0);
    moects__run_free(&run);
    rm_tmp();
}

Test(results_json, bad_hashes_are_one_line_errors)
{
    mk_tmpdir("/tmp/moects-hashes-XXXXXX");
    static const struct {
        const char *tail, *want;
    } bad[] = {
        {", \"reference_xxh64\": \"0123\"}", ": results[0].reference_xxh64: \"0123\" is not 16 lower-case hex digits"},
        {", \"reference_xxh64\": \"0123456789ABCDEF\"}", ".reference_xxh64: \"0123456789ABCDEF\" is not 16"},
        {", \"reference_xxh64\": 5}", ".reference_xxh64: expected a string of 16 hex digits, got an integer"},
        {", \"input_xxh64\": []}", ".input_xxh64: expected an object, got an array"},
        {", \"input_xxh64\": {\"x\": null}}", "results[0].input_xxh64.x: expected a string of 16 hex digits, got null"},
        {", \"input_xxh64\": {\"\": \"0123456789abcdef\"}}", "input_xxh64.(key): tensor name empty or too long"},
        {", \"input_xxh64\": {\"a\": \"0\", \"b\": \"0\", \"c\": \"0\", \"d\": \"0\", \"e\": \"0\", \"f\": \"0\", "
         "\"g\": \"0\", \"h\": \"0\", \"i\": \"0\", \"j\": \"0\", \"k\": \"0\", \"l\": \"0\", \"m\": \"0\", "
         "\"n\": \"0\", \"o\": \"0\", \"p\": \"0\", \"q\": \"0\"}}",
         ".input_xxh64: more than 16 tensors"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char text[2048];
        snprintf(text, sizeof text, HEAD "  " RES "%s\n]\n}\n", bad[i].tail);
        const char *p = put("bad.json", text);
        moects_run run;
        char err[512];
        cr_assert_eq(moects__results_read(p, &run, err, sizeof err), -1, "case %zu read", i);
        cr_assert_not_null(strstr(err, bad[i].want), "case %zu: %s", i, err);
        cr_assert_null(strchr(err, '\n'));
    }
    rm_tmp();
}
