/* results.c: verdict and op names, runs, and the results.json file's writer (its reader is
 * results_read.c; reports_internal.h).
 *
 * results.json, written by `moects run` and `moects merge`, read by `moects gate|coverage|merge`:
 *
 *   {                                    every field below is required unless marked optional
 *     "moects_version": "0.1",
 *     "commit":  "858abae...",            git commit of the run ("-dirty" appended when tracked files
 *                                           differ from it), "unknown" outside a checkout
 *     "date":    "2026-11-30T16:34:04Z",  ISO 8601 UTC
 *     "machine": "host / NVIDIA H200",
 *     "filter":  "ep_gather/kimi-k3/tp8/t1", the run's case filter (a glob), "" for all
 *     "shard":   "0/4",                   "i/n" of a shard run, "" for a whole run
 *     "seed":    1,                       u64
 *     "kernel_libs": [{"path": "build/lib/x.so", "sha256": "64 hex digits"}],   optional: the --kernel-lib
 *                                         libraries the run loaded, named as moects__path_here does
 *                                         (relative to the run's folder when inside it, else absolute;
 *                                         older files: absolute) ("" sha256: the file was unreadable)
 *     "results": [                        case-major: all kernels of case 1, then case 2...
 *       {"kernel": "cpu.ep_gather",       not empty
 *        "case": "ep_gather/kimi-k3/tp8/t128",   not empty, unique with kernel
 *        "model": "kimi-k3", "layout": "tp8",    ("regression", "-" for regressions)
 *        "op": "ep_gather",               "ep_gather" | "fp4_gemm" | "moe_gemm" | "fused_moe"
 *        "mutant": false,                 the kernel has a declared bug
 *        "verdict": "PASS_EXACT",         PASS_EXACT PASS_BOUNDED PASS_TOLERANCE PASS_TIE FAIL_MISMATCH
 *                                           FAIL_CRASH FAIL_TIMEOUT FAIL_OOB_WRITE
 *                                           FAIL_NONDETERMINISTIC FAIL_BATCH_VARIANT UNSUPPORTED
 *                                           SKIP
 *        "recipe": "ep_gather.fma_v1",    "" when none
 *        "mismatches": 0,                 i64 >= 0: elements whose bits differ; bounded
 *                                           verdicts: elements outside their bounds
 *        "max_ulp": 0,                    u64, or "unbounded": a NaN or an Inf against another value
 *                                           (older files wrote "18446744073709551615": still read)
 *        "calc_diff": 0,                  double
 *        "acc_check": {"rms_sigma": 0.006, "elements": 4096},   optional: the accumulation check of a
 *                                           bounded verdict (moects_result.acc_rms, acc_n > 0)
 *        "first_mismatch": null,          or {"index": i64 >= 0, "got": "0x3f80 (1)", "want": "..."}
 *        "diag": {"axes": ["m", "n"],     optional, on a compared output that differs (moects_diag.h):
 *                 "pattern": "every row, column 3584 onwards (3584..4095 of 4096)",
 *                 "first": [{"at": [5, 3584], "index": i64, "got": "0x3f81 (1.0078125)",
 *                            "want": "0x3f80 (1)", "ulp": u64}, ...],   up to 5, element order
 *                 "worst": [...]}          up to 10, largest ULP distance first; axes: 2 or 3 names
 *        "reason": "",
 *        "refusal": "shape",              UNSUPPORTED only: the reason's class (moects_refusal: format
 *                                           shape layout activation routing recipe scope resource
 *                                           unspecified), the word that opens the reason
 *        "known": "dequantized ...",      optional: only on an honest FAIL_* / PASS_* result that a
 *                                           known-findings entry matches (harness/moects_known.h):
 *                                           the entry's reason; a known FAIL_* does not fail the
 *                                           run or the gate
 *        "seed": 1,                       u64
 *        "kernel_ms": 0, "perf_value": 0, "perf_fraction": 0,   doubles (--perf)
 *        "timing": {"wall_s": 0.25, "inputs_s": 0.01, "reference_s": 0.2, "kernel_s": 0.03,
 *                   "compare_s": 0.005, "ref_threads": 4}}
 *                                         optional: where the task's time went (moects_result:
 *                                           seconds >= 0, threads an integer >= 0; all six keys
 *                                           when present); left out when all are 0, absent from
 *                                           files written before it existed
 *        "input_xxh64": {"x": "0f1e2d3c4b5a6978", ...},   optional: XXH64 (seed 0) of each input
 *                                           tensor's bytes, 16 lower-case hex digits, in the
 *                                           case's tensor order (at most 16); written whenever
 *                                           the worker built the inputs (harness/report/hashes.c)
 *        "reference_xxh64": "8899aabbccddeeff",   optional: XXH64 of the reference output under
 *                                           "recipe", written whenever it was computed; both
 *                                           absent from files written before they existed
 *        "gpu": "0"}                      optional: the CUDA_VISIBLE_DEVICES of the worker set that
 *                                           ran the task (moects run --gpus; issue 33); absent
 *                                           when the run had no GPU list or the task was not run
 *     ]
 *   }
 *
 * Number conventions: a u64 (seed, max_ulp) is a JSON integer when below 2^53 (exact in every JSON
 * reader, JavaScript included), else its decimal digits as a string; an ULP distance (max_ulp, a
 * diag element's ulp) that is unbounded (UINT64_MAX: a NaN or Inf against another value) is the
 * string "unbounded", read back as UINT64_MAX, as is the older spelling "18446744073709551615". A double is written with the fewest digits that
 * read back to the same bits, always with a '.' or an exponent (so -0.0 keeps its sign); NaN and the
 * infinities, which JSON lacks, are the strings "nan", "inf", "-inf". The reader accepts either
 * form of each. Unknown keys, wrong types, missing keys (all but the optional ones) and duplicate
 * (kernel, case) pairs are errors: "path: results[3].max_ulp: missing". One result per line in the
 * file, so a committed baseline diffs line by line. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cases_internal.h"
#include "reports_internal.h"

static const char *const verdict_names[MOECTS_VERDICT_COUNT] = {
    "PASS_EXACT", "PASS_BOUNDED", "PASS_TOLERANCE", "PASS_TIE", "FAIL_MISMATCH", "FAIL_CRASH", "FAIL_TIMEOUT",
    "FAIL_OOB_WRITE", "FAIL_NONDETERMINISTIC", "FAIL_BATCH_VARIANT", "UNSUPPORTED", "SKIP", "FAIL_REFERENCE",
};

/* The words of DESIGN.md "Verdicts"; "?" for a value outside the enum. */
const char *moects__verdict_name(moects_verdict v)
{
    return (unsigned)v < MOECTS_VERDICT_COUNT ? verdict_names[v] : "?";
}

/* Exact, case-sensitive match of a verdict word. 0, or -1 for an unknown word. */
int moects__verdict_parse(const char *s, moects_verdict *out)
{
    for (int i = 0; i < MOECTS_VERDICT_COUNT; i++)
        if (s && strcmp(s, verdict_names[i]) == 0) {
            *out = (moects_verdict)i;
            return 0;
        }
    return -1;
}

static const char *const refusal_names[MOECTS_REFUSE_COUNT] = {
    "unspecified", "format", "shape", "layout", "activation", "routing", "recipe", "scope", "resource",
};

const char *moects__refusal_name(moects_refusal c)
{
    return (unsigned)c < MOECTS_REFUSE_COUNT ? refusal_names[c] : "?";
}

int moects__refusal_parse(const char *s, moects_refusal *out)
{
    for (int i = 0; i < MOECTS_REFUSE_COUNT; i++)
        if (s && strcmp(s, refusal_names[i]) == 0) return *out = (moects_refusal)i, 0;
    return -1;
}

moects_refusal moects__refusal_of(const char *reason)
{
    for (int i = 1; reason && i < MOECTS_REFUSE_COUNT; i++) {
        const size_t n = strlen(refusal_names[i]);
        if (!strncmp(reason, refusal_names[i], n) && reason[n] == ':' && reason[n + 1] == ' ') return (moects_refusal)i;
    }
    return MOECTS_REFUSE_UNSPECIFIED;
}

int moects__reason_is_no_device(const char *reason)
{
    const size_t n = strlen(MOECTS__NO_DEVICE);
    return reason && !strncmp(reason, MOECTS__NO_DEVICE, n) && (!reason[n] || !strncmp(reason + n, " (", 2));
}

/* The op names, from the op list (harness/ops/ops.def): the result model sits below the op table. */
static const struct {
    moects_op op;
    const char *name;
} op_names[] = {
#define MOECTS_OP_DEF(e, n, def) {e, n},
#include "ops/ops.def"
#undef MOECTS_OP_DEF
};

const char *moects__op_name(moects_op op)
{
    for (size_t i = 0; i < sizeof op_names / sizeof *op_names; i++)
        if (op_names[i].op == op) return op_names[i].name;
    return NULL;
}

int moects__op_parse(const char *s, moects_op *out)
{
    for (size_t i = 0; i < sizeof op_names / sizeof *op_names; i++)
        if (strcmp(s, op_names[i].name) == 0) return *out = op_names[i].op, 0;
    return -1;
}

/* ---- run ---- */

int moects__run_push(moects_run *run, const moects_result *r)
{
    if (run->n == run->cap) {
        size_t cap = run->cap ? 2 * run->cap : 256;
        moects_result *v = realloc(run->v, cap * sizeof *v);
        if (!v) return -1;
        run->v = v;
        run->cap = cap;
    }
    run->v[run->n++] = *r;
    return 0;
}

void moects__run_free(moects_run *run)
{
    free(run->v);
    for (size_t i = 0; i < run->nref_sampled; i++) free(run->ref_sampled[i]);
    free(run->ref_sampled);
    memset(run, 0, sizeof *run);
}

/* ---- write ---- */

#define SAFE_INT_MAX 9007199254740991ull /* 2^53 - 1 */

static void put_u64(moects__buf *b, uint64_t v)
{
    if (v <= SAFE_INT_MAX) moects__buf_printf(b, "%" PRIu64, v);
    else moects__buf_printf(b, "\"%" PRIu64 "\"", v);
}

/* An ULP distance: UINT64_MAX (a NaN or an Inf against another value) as MOECTS__ULP_UNBOUNDED. */
static void put_ulp(moects__buf *b, uint64_t v)
{
    if (v == UINT64_MAX) moects__buf_printf(b, "\"%s\"", MOECTS__ULP_UNBOUNDED);
    else put_u64(b, v);
}

/* Fewest significant digits (up to 17) that strtod reads back to the same double. */
static void put_double(moects__buf *b, double v)
{
    if (isnan(v)) {
        moects__buf_add(b, "\"nan\"");
        return;
    }
    if (isinf(v)) {
        moects__buf_add(b, v > 0 ? "\"inf\"" : "\"-inf\"");
        return;
    }
    char s[40];
    for (int p = 1; p <= 17; p++) {
        snprintf(s, sizeof s, "%.*g", p, v);
        if (strtod(s, NULL) == v && signbit(strtod(s, NULL)) == signbit(v)) break;
    }
    /* "-0" would read back as the integer 0: keep every double a JSON real */
    if (!strpbrk(s, ".e")) strcat(s, ".0");
    moects__buf_add(b, s);
}

static void put_key(moects__buf *b, const char *k)
{
    moects__buf_json_str(b, k);
    moects__buf_add(b, ": ");
}

static void put_elems(moects__buf *b, const moects_diag *d, const moects_diag_elem *e, int n)
{
    moects__buf_add(b, "[");
    for (int i = 0; i < n; i++) {
        char v[64];
        moects__buf_add(b, i ? ", {\"at\": [" : "{\"at\": [");
        for (int k = 0; k < d->ndims; k++) moects__buf_printf(b, "%s%" PRId64, k ? ", " : "", e[i].at[k]);
        moects__buf_printf(b, "], \"index\": %" PRId64 ", \"got\": ", e[i].index);
        moects__diag_value(d, e[i].got, v, sizeof v);
        moects__buf_json_str(b, v);
        moects__buf_add(b, ", \"want\": ");
        moects__diag_value(d, e[i].want, v, sizeof v);
        moects__buf_json_str(b, v);
        moects__buf_add(b, ", \"ulp\": ");
        put_ulp(b, e[i].ulp);
        moects__buf_add(b, "}");
    }
    moects__buf_add(b, "]");
}

/* "diag": {"axes": ["m", "n"], "pattern": "...", "first": [...], "worst": [...]} (moects_diag.h) */
static void put_diag(moects__buf *b, const moects_diag *d)
{
    moects__buf_add(b, "{\"axes\": [");
    for (int k = 0; k < d->ndims; k++) {
        if (k) moects__buf_add(b, ", ");
        moects__buf_json_str(b, d->axes[k]);
    }
    moects__buf_add(b, "], \"pattern\": ");
    moects__buf_json_str(b, d->pattern);
    moects__buf_add(b, ", \"first\": ");
    put_elems(b, d, d->first, d->nfirst);
    moects__buf_add(b, ", \"worst\": ");
    put_elems(b, d, d->worst, d->nworst);
    moects__buf_add(b, "}");
}

void moects__buf_result(moects__buf *b, const moects_result *r)
{
    const char *op = moects__op_name(r->op);
    moects__buf_add(b, "{");
    put_key(b, "kernel"); moects__buf_json_str(b, r->kernel);
    moects__buf_add(b, ", "); put_key(b, "case"); moects__buf_json_str(b, r->case_id);
    moects__buf_add(b, ", "); put_key(b, "model"); moects__buf_json_str(b, r->model);
    moects__buf_add(b, ", "); put_key(b, "layout"); moects__buf_json_str(b, r->layout);
    moects__buf_add(b, ", "); put_key(b, "op"); moects__buf_json_str(b, op ? op : "?");
    moects__buf_add(b, ", "); put_key(b, "mutant"); moects__buf_add(b, r->is_mutant ? "true" : "false");
    moects__buf_add(b, ", "); put_key(b, "verdict"); moects__buf_json_str(b, moects__verdict_name(r->verdict));
    moects__buf_add(b, ", "); put_key(b, "recipe"); moects__buf_json_str(b, r->recipe);
    moects__buf_add(b, ", "); put_key(b, "mismatches"); moects__buf_printf(b, "%" PRId64, r->mismatches);
    moects__buf_add(b, ", "); put_key(b, "max_ulp"); put_ulp(b, r->max_ulp);
    moects__buf_add(b, ", "); put_key(b, "calc_diff"); put_double(b, r->calc_diff);
    if (r->acc_n > 0) {
        moects__buf_add(b, ", "); put_key(b, "acc_check"); moects__buf_add(b, "{");
        put_key(b, "rms_sigma"); put_double(b, r->acc_rms);
        moects__buf_add(b, ", "); put_key(b, "elements"); moects__buf_printf(b, "%" PRId64, r->acc_n);
        moects__buf_add(b, "}");
    }
    moects__buf_add(b, ", "); put_key(b, "first_mismatch");
    if (r->first_index < 0) {
        moects__buf_add(b, "null");
    } else {
        moects__buf_printf(b, "{\"index\": %" PRId64 ", \"got\": ", r->first_index);
        moects__buf_json_str(b, r->got);
        moects__buf_add(b, ", \"want\": ");
        moects__buf_json_str(b, r->want);
        moects__buf_add(b, "}");
    }
    if (r->diag.ndims) {
        moects__buf_add(b, ", "); put_key(b, "diag"); put_diag(b, &r->diag);
    }
    moects__buf_add(b, ", "); put_key(b, "reason"); moects__buf_json_str(b, r->reason);
    if (r->verdict == MOECTS_UNSUPPORTED) {
        moects__buf_add(b, ", "); put_key(b, "refusal"); moects__buf_json_str(b, moects__refusal_name(moects__refusal_of(r->reason)));
    }
    if (r->known[0]) {
        moects__buf_add(b, ", "); put_key(b, "known"); moects__buf_json_str(b, r->known);
    }
    moects__buf_add(b, ", "); put_key(b, "seed"); put_u64(b, r->seed);
    moects__buf_add(b, ", "); put_key(b, "kernel_ms"); put_double(b, r->kernel_ms);
    moects__buf_add(b, ", "); put_key(b, "perf_value"); put_double(b, r->perf_value);
    moects__buf_add(b, ", "); put_key(b, "perf_fraction"); put_double(b, r->perf_fraction);
    if (r->wall_s || r->inputs_s || r->reference_s || r->kernel_s || r->compare_s || r->ref_threads) {
        moects__buf_add(b, ", "); put_key(b, "timing");
        moects__buf_add(b, "{"); put_key(b, "wall_s"); put_double(b, r->wall_s);
        moects__buf_add(b, ", "); put_key(b, "inputs_s"); put_double(b, r->inputs_s);
        moects__buf_add(b, ", "); put_key(b, "reference_s"); put_double(b, r->reference_s);
        moects__buf_add(b, ", "); put_key(b, "kernel_s"); put_double(b, r->kernel_s);
        moects__buf_add(b, ", "); put_key(b, "compare_s"); put_double(b, r->compare_s);
        moects__buf_add(b, ", "); put_key(b, "ref_threads"); moects__buf_printf(b, "%d", r->ref_threads);
        moects__buf_add(b, "}");
    }
    if (r->reference[0]) {
        moects__buf_add(b, ", "); put_key(b, "reference"); moects__buf_json_str(b, r->reference);
    }
    if (r->ref_check) {
        moects__buf_add(b, ", "); put_key(b, "reference_check"); moects__buf_json_str(b, r->ref_check == 1 ? "same" : "differs");
    }
    if (r->n_hashes > 0) {
        moects__buf_add(b, ", "); put_key(b, "input_xxh64"); moects__buf_add(b, "{");
        for (int i = 0; i < r->n_hashes && i < MOECTS_RESULT_HASHES_MAX; i++) {
            moects__buf_add(b, i ? ", " : "");
            put_key(b, r->hashes[i].name);
            moects__buf_printf(b, "\"%016" PRIx64 "\"", r->hashes[i].xxh64);
        }
        moects__buf_add(b, "}");
    }
    if (r->has_ref_hash) {
        moects__buf_add(b, ", "); put_key(b, "reference_xxh64");
        moects__buf_printf(b, "\"%016" PRIx64 "\"", r->ref_xxh64);
    }
    if (r->gpu[0]) {
        moects__buf_add(b, ", "); put_key(b, "gpu"); moects__buf_json_str(b, r->gpu);
    }
    moects__buf_add(b, "}");
}

/* "reference" (issue 31) and, under a GPU reference, "reference_check": the re-check sample's seed and
 * case ids. Nothing when the run did not say (older callers). */
static void put_reference(moects__buf *b, const moects_run *run)
{
    if (!run->reference[0]) return;
    moects__buf_add(b, ",\n"); put_key(b, "reference"); moects__buf_json_str(b, run->reference);
    if (strncmp(run->reference, "gpu", 3) != 0) return;
    moects__buf_add(b, ",\n"); put_key(b, "reference_check"); moects__buf_add(b, "{");
    put_key(b, "rechecked"); moects__buf_json_str(b, "every FAIL, every smoke case, a 1% sample of the rest");
    moects__buf_add(b, ", "); put_key(b, "sample_seed"); put_u64(b, run->ref_sample_seed);
    moects__buf_add(b, ", "); put_key(b, "sample"); moects__buf_add(b, "[");
    for (size_t i = 0; i < run->nref_sampled; i++) {
        moects__buf_add(b, i ? ", " : "");
        moects__buf_json_str(b, run->ref_sampled[i]);
    }
    moects__buf_add(b, "]}");
}

/* The JSON text of run (the schema above) into b (b->oom on allocation failure). 0, or -1 with err:
 * an op or verdict out of range. */
static int render_results(moects__buf *b, const char *path, const moects_run *run, char *err, size_t errlen)
{
    for (size_t i = 0; i < run->n; i++)
        if (!moects__op_name(run->v[i].op) || (unsigned)run->v[i].verdict >= MOECTS_VERDICT_COUNT) {
            snprintf(err, errlen, "%s: results[%zu]: op or verdict out of range", path, i);
            return -1;
        }
    moects__buf_add(b, "{\n");
    put_key(b, "moects_version");
    moects__buf_json_str(b, run->moects_version);
    moects__buf_add(b, ",\n"); put_key(b, "commit"); moects__buf_json_str(b, run->commit);
    moects__buf_add(b, ",\n"); put_key(b, "date"); moects__buf_json_str(b, run->date);
    moects__buf_add(b, ",\n"); put_key(b, "machine"); moects__buf_json_str(b, run->machine);
    moects__buf_add(b, ",\n"); put_key(b, "filter"); moects__buf_json_str(b, run->filter);
    moects__buf_add(b, ",\n"); put_key(b, "shard"); moects__buf_json_str(b, run->shard);
    moects__buf_add(b, ",\n"); put_key(b, "seed"); put_u64(b, run->seed);
    if (run->nlibs) {
        moects__buf_add(b, ",\n"); put_key(b, "kernel_libs"); moects__buf_add(b, "[");
        for (size_t i = 0; i < run->nlibs && i < MOECTS_RUN_LIBS; i++) {
            moects__buf_add(b, i ? ", {" : "{"); put_key(b, "path"); moects__buf_json_str(b, run->libs[i].path);
            moects__buf_add(b, ", "); put_key(b, "sha256"); moects__buf_json_str(b, run->libs[i].sha256);
            moects__buf_add(b, "}");
        }
        moects__buf_add(b, "]");
    }
    put_reference(b, run);
    moects__buf_add(b, ",\n"); put_key(b, "results"); moects__buf_add(b, "[");
    for (size_t i = 0; i < run->n; i++) {
        moects__buf_add(b, i ? ",\n  " : "\n  ");
        moects__buf_result(b, &run->v[i]);
    }
    moects__buf_add(b, run->n ? "\n]\n}\n" : "]\n}\n");
    return 0;
}

/* Serialise run to path, written atomically now (set NULL) or staged in set. 0, or -1 with err: an
 * op outside the enum, or the file cannot be written. */
int moects__results_stage(moects_report_set *set, const char *path, const moects_run *run, char *err,
                         size_t errlen)
{
    moects__buf b = {0};
    int rc = render_results(&b, path, run, err, errlen) || moects__buf_stage(&b, set, path, err, errlen) ? -1 : 0;
    moects__buf_free(&b);
    return rc;
}

int moects__results_write(const char *path, const moects_run *run, char *err, size_t errlen)
{
    return moects__results_stage(NULL, path, run, err, errlen);
}
