/* results.c: verdict names, the results.json file (read and write), and the report helpers shared
 * by gate.c, coverage.c and merge.c (reports_internal.h).
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
 *     "kernel_libs": [{"path": "/abs/lib.so", "sha256": "64 hex digits"}],   optional: the --kernel-lib
 *                                         libraries the run loaded ("" sha256: the file was unreadable)
 *     "results": [                        case-major: all kernels of case 1, then case 2...
 *       {"kernel": "cpu.ep_gather",       not empty
 *        "case": "ep_gather/kimi-k3/tp8/t128",   not empty, unique with kernel
 *        "model": "kimi-k3", "layout": "tp8",    ("regression", "-" for regressions)
 *        "op": "ep_gather",               "ep_gather" | "fp4_gemm" | "moe_gemm"
 *        "mutant": false,                 the kernel has a declared bug
 *        "verdict": "PASS_EXACT",         PASS_EXACT PASS_BOUNDED PASS_TOLERANCE FAIL_MISMATCH
 *                                           FAIL_CRASH FAIL_TIMEOUT FAIL_OOB_WRITE
 *                                           FAIL_NONDETERMINISTIC UNSUPPORTED SKIP
 *        "recipe": "ep_gather.fma_v1",    "" when none
 *        "mismatches": 0,                 i64 >= 0: elements whose bits differ; bounded
 *                                           verdicts: elements outside their bounds
 *        "max_ulp": 0,                    u64
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
 *                                           case's tensor order (at most 12); written whenever
 *                                           the worker built the inputs (harness/report/hashes.c)
 *        "reference_xxh64": "8899aabbccddeeff"}   optional: XXH64 of the reference output under
 *                                           "recipe", written whenever it was computed; both
 *                                           absent from files written before they existed
 *     ]
 *   }
 *
 * Number conventions: a u64 (seed, max_ulp) is a JSON integer when below 2^53 (exact in every JSON
 * reader, JavaScript included), else its decimal digits as a string: UINT64_MAX (a NaN or Inf
 * against another value) is "18446744073709551615". A double is written with the fewest digits that
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
    "PASS_EXACT", "PASS_BOUNDED", "PASS_TOLERANCE", "FAIL_MISMATCH", "FAIL_CRASH", "FAIL_TIMEOUT",
    "FAIL_OOB_WRITE", "FAIL_NONDETERMINISTIC", "UNSUPPORTED", "SKIP",
};

/* The words of DESIGN.md "Verdicts"; "?" for a value outside the enum. */
const char *moects_verdict_name(moects_verdict v)
{
    return (unsigned)v < MOECTS_VERDICT_COUNT ? verdict_names[v] : "?";
}

/* Exact, case-sensitive match of a verdict word. 0, or -1 for an unknown word. */
int moects_verdict_parse(const char *s, moects_verdict *out)
{
    for (int i = 0; i < MOECTS_VERDICT_COUNT; i++)
        if (s && strcmp(s, verdict_names[i]) == 0) {
            *out = (moects_verdict)i;
            return 0;
        }
    return -1;
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

int moects_run_push(moects_run *run, const moects_result *r)
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

void moects_run_free(moects_run *run)
{
    free(run->v);
    memset(run, 0, sizeof *run);
}

/* ---- text buffer ---- */

static void buf_reserve(moects__buf *b, size_t more)
{
    if (b->oom) return;
    if (b->n + more + 1 <= b->cap) return;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->n + more + 1) cap *= 2;
    char *s = realloc(b->s, cap);
    if (!s) {
        b->oom = 1;
        return;
    }
    b->s = s;
    b->cap = cap;
}

void moects__buf_addn(moects__buf *b, const char *s, size_t n)
{
    buf_reserve(b, n);
    if (b->oom) return;
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = '\0';
}

void moects__buf_add(moects__buf *b, const char *s) { moects__buf_addn(b, s, strlen(s)); }

void moects__buf_printf(moects__buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    buf_reserve(b, (size_t)n);
    if (b->oom) return;
    va_start(ap, fmt);
    vsnprintf(b->s + b->n, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->n += (size_t)n;
}

void moects__buf_json_str(moects__buf *b, const char *s)
{
    moects__buf_add(b, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"') moects__buf_add(b, "\\\"");
        else if (*p == '\\') moects__buf_add(b, "\\\\");
        else if (*p == '\n') moects__buf_add(b, "\\n");
        else if (*p == '\t') moects__buf_add(b, "\\t");
        else if (*p < 0x20 || *p == 0x7f) moects__buf_printf(b, "\\u%04x", *p);
        else moects__buf_addn(b, (const char *)p, 1);
    }
    moects__buf_add(b, "\"");
}

void moects__buf_html(moects__buf *b, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '&': moects__buf_add(b, "&amp;"); break;
        case '<': moects__buf_add(b, "&lt;"); break;
        case '>': moects__buf_add(b, "&gt;"); break;
        case '"': moects__buf_add(b, "&quot;"); break;
        case '\'': moects__buf_add(b, "&#39;"); break;
        default: moects__buf_addn(b, s, 1);
        }
    }
}

void moects__buf_md(moects__buf *b, const char *s)
{
    for (; *s; s++) {
        if (strchr("\\`*_[]<>|#", *s)) {
            moects__buf_add(b, "\\");
            moects__buf_addn(b, s, 1);
        } else if (*s == '\n' || *s == '\r') {
            moects__buf_add(b, " ");
        } else {
            moects__buf_addn(b, s, 1);
        }
    }
}

void moects__buf_md_code(moects__buf *b, const char *s)
{
    for (; *s; s++) {
        if (*s == '`') moects__buf_add(b, "'");
        else if (*s == '\n' || *s == '\r') moects__buf_add(b, " ");
        else moects__buf_addn(b, s, 1);
    }
}

void moects__buf_free(moects__buf *b)
{
    free(b->s);
    memset(b, 0, sizeof *b);
}

int moects__buf_write(const moects__buf *b, const char *path, char *err, size_t errlen)
{
    return moects__buf_stage(b, NULL, path, err, errlen);
}

int moects__buf_stage(const moects__buf *b, moects_report_set *set, const char *path, char *err, size_t errlen)
{
    if (b->oom) {
        snprintf(err, errlen, "%s: out of memory building the file", path);
        return -1;
    }
    return set ? moects_report_stage(set, path, b->s ? b->s : "", b->n, err, errlen)
               : moects_write_file_atomic(path, b->s ? b->s : "", b->n, err, errlen);
}

/* ---- write ---- */

#define SAFE_INT_MAX 9007199254740991ull /* 2^53 - 1 */

static void put_u64(moects__buf *b, uint64_t v)
{
    if (v <= SAFE_INT_MAX) moects__buf_printf(b, "%" PRIu64, v);
    else moects__buf_printf(b, "\"%" PRIu64 "\"", v);
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
        moects_diag_value(d, e[i].got, v, sizeof v);
        moects__buf_json_str(b, v);
        moects__buf_add(b, ", \"want\": ");
        moects_diag_value(d, e[i].want, v, sizeof v);
        moects__buf_json_str(b, v);
        moects__buf_add(b, ", \"ulp\": ");
        put_u64(b, e[i].ulp);
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
    moects__buf_add(b, ", "); put_key(b, "verdict"); moects__buf_json_str(b, moects_verdict_name(r->verdict));
    moects__buf_add(b, ", "); put_key(b, "recipe"); moects__buf_json_str(b, r->recipe);
    moects__buf_add(b, ", "); put_key(b, "mismatches"); moects__buf_printf(b, "%" PRId64, r->mismatches);
    moects__buf_add(b, ", "); put_key(b, "max_ulp"); put_u64(b, r->max_ulp);
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
    moects__buf_add(b, "}");
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
int moects_results_stage(moects_report_set *set, const char *path, const moects_run *run, char *err,
                         size_t errlen)
{
    moects__buf b = {0};
    int rc = render_results(&b, path, run, err, errlen) || moects__buf_stage(&b, set, path, err, errlen) ? -1 : 0;
    moects__buf_free(&b);
    return rc;
}

int moects_results_write(const char *path, const moects_run *run, char *err, size_t errlen)
{
    return moects_results_stage(NULL, path, run, err, errlen);
}

/* ---- read ---- */

typedef struct {
    const char *path;
    char *err;
    size_t errlen;
    char where[64]; /* "results[3]." or "" */
} rd;

__attribute__((format(printf, 3, 4))) static int fail(rd *c, const char *field, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(c->err, c->errlen, "%s: %s%s: %s", c->path, c->where, field, msg);
    return -1;
}

static const char *type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "?";
}

/* Field getters: v NULL means absent, which is an error ("missing") but for get_str(required 0).
 * Each returns 0, or -1 with the error written. */
static int get_str(rd *c, const char *field, const json_t *v, char *dst, size_t cap, int required)
{
    if (!v) {
        if (required) return fail(c, field, "missing");
        dst[0] = '\0';
        return 0;
    }
    if (!json_is_string(v)) return fail(c, field, "expected a string, got %s", type_name(v));
    const char *s = json_string_value(v);
    size_t n = json_string_length(v);
    if (strlen(s) != n) return fail(c, field, "string holds a NUL byte");
    if (n >= cap) return fail(c, field, "longer than %zu bytes", cap - 1);
    memcpy(dst, s, n + 1);
    return 0;
}

static int get_u64(rd *c, const char *field, const json_t *v, uint64_t *dst)
{
    *dst = 0;
    if (!v) return fail(c, field, "missing");
    if (json_is_integer(v)) {
        if (json_integer_value(v) < 0) return fail(c, field, "negative");
        *dst = (uint64_t)json_integer_value(v);
        return 0;
    }
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        char *end;
        if (!isdigit((unsigned char)s[0])) return fail(c, field, "\"%s\" is not a decimal integer", s);
        errno = 0;
        unsigned long long x = strtoull(s, &end, 10);
        if (*end || errno == ERANGE) return fail(c, field, "\"%s\" is not a 64-bit unsigned integer", s);
        *dst = x;
        return 0;
    }
    return fail(c, field, "expected an integer, got %s", type_name(v));
}

static int get_i64(rd *c, const char *field, const json_t *v, int64_t *dst)
{
    *dst = 0;
    if (!v) return fail(c, field, "missing");
    if (!json_is_integer(v)) return fail(c, field, "expected an integer, got %s", type_name(v));
    if (json_integer_value(v) < 0) return fail(c, field, "negative");
    *dst = (int64_t)json_integer_value(v);
    return 0;
}

static int get_double(rd *c, const char *field, const json_t *v, double *dst)
{
    *dst = 0;
    if (!v) return fail(c, field, "missing");
    if (json_is_number(v)) {
        *dst = json_number_value(v);
        return 0;
    }
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        if (strcmp(s, "nan") == 0) *dst = NAN;
        else if (strcmp(s, "inf") == 0) *dst = INFINITY;
        else if (strcmp(s, "-inf") == 0) *dst = -INFINITY;
        else return fail(c, field, "\"%s\" is not a number (strings allowed: nan, inf, -inf)", s);
        return 0;
    }
    return fail(c, field, "expected a number, got %s", type_name(v));
}

static int check_keys(rd *c, const json_t *obj, const char *const *known)
{
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)obj, key, val) {
        int ok = 0;
        for (const char *const *k = known; *k; k++) ok |= strcmp(key, *k) == 0;
        if (!ok) return fail(c, key, "unknown field");
    }
    return 0;
}

/* A hash: exactly 16 lower-case hex digits (as written). */
static int get_xxh64(rd *c, const char *field, const json_t *v, uint64_t *dst)
{
    if (!json_is_string(v)) return fail(c, field, "expected a string of 16 hex digits, got %s", type_name(v));
    const char *s = json_string_value(v);
    size_t n = strspn(s, "0123456789abcdef");
    if (n != 16 || s[n] || json_string_length(v) != 16)
        return fail(c, field, "\"%.40s\" is not 16 lower-case hex digits", s);
    *dst = strtoull(s, NULL, 16);
    return 0;
}

/* The optional input_xxh64 object and reference_xxh64 string of a result. */
static int read_hashes(rd *c, const json_t *o, moects_result *r)
{
    const json_t *h = json_object_get(o, "input_xxh64");
    if (h) {
        if (!json_is_object(h)) return fail(c, "input_xxh64", "expected an object, got %s", type_name(h));
        if (json_object_size(h) > MOECTS_RESULT_HASHES_MAX)
            return fail(c, "input_xxh64", "more than %d tensors", MOECTS_RESULT_HASHES_MAX);
        size_t wl = strlen(c->where);
        snprintf(c->where + wl, sizeof c->where - wl, "input_xxh64.");
        const char *key;
        json_t *val;
        json_object_foreach((json_t *)h, key, val) {
            moects_tensor_hash *t = &r->hashes[r->n_hashes];
            if (!key[0] || strlen(key) >= sizeof t->name) return fail(c, "(key)", "tensor name empty or too long");
            snprintf(t->name, sizeof t->name, "%s", key);
            if (get_xxh64(c, key, val, &t->xxh64)) return -1;
            r->n_hashes++;
        }
        c->where[wl] = '\0';
    }
    const json_t *rh = json_object_get(o, "reference_xxh64");
    if (rh) {
        if (get_xxh64(c, "reference_xxh64", rh, &r->ref_xxh64)) return -1;
        r->has_ref_hash = 1;
    }
    return 0;
}

/* The optional "acc_check" of a result: {"rms_sigma": finite >= 0, "elements": > 0}. */
static int read_acc_check(rd *c, const json_t *ac, moects_result *r)
{
    if (!ac) return 0;
    if (!json_is_object(ac)) return fail(c, "acc_check", "expected an object, got %s", type_name(ac));
    static const char *const keys[] = {"rms_sigma", "elements", NULL};
    size_t wl = strlen(c->where);
    snprintf(c->where + wl, sizeof c->where - wl, "acc_check.");
    if (check_keys(c, ac, keys) || get_double(c, "rms_sigma", json_object_get(ac, "rms_sigma"), &r->acc_rms) ||
        get_i64(c, "elements", json_object_get(ac, "elements"), &r->acc_n))
        return -1;
    if (!(r->acc_rms >= 0) || isinf(r->acc_rms)) return fail(c, "rms_sigma", "not a finite number >= 0");
    if (r->acc_n < 1) return fail(c, "elements", "must be >= 1 (the key is left out when the check did not run)");
    c->where[wl] = '\0';
    if (r->verdict != MOECTS_PASS_BOUNDED && r->verdict != MOECTS_FAIL_MISMATCH)
        return fail(c, "acc_check", "only on a bounded verdict's PASS_BOUNDED or FAIL_MISMATCH (not on %s)",
                    moects_verdict_name(r->verdict));
    if (r->verdict == MOECTS_PASS_BOUNDED && r->acc_n >= MOECTS_ACC_CHECK_MIN && r->acc_rms > MOECTS_ACC_CHECK_LIMIT)
        return fail(c, "acc_check", "rms_sigma %g over %" PRId64 " elements fails the accumulation check (over %g), "
                    "but the verdict is PASS_BOUNDED", r->acc_rms, r->acc_n, MOECTS_ACC_CHECK_LIMIT);
    return 0;
}

static const char *const result_keys[] = {
    "kernel", "case", "model", "layout", "op", "mutant", "verdict", "recipe", "mismatches", "max_ulp",
    "calc_diff", "acc_check", "first_mismatch", "diag", "reason", "known", "seed", "kernel_ms", "perf_value",
    "perf_fraction", "timing", "input_xxh64", "reference_xxh64", NULL};
static const char *const top_keys[] = {
    "moects_version", "commit", "date", "machine", "filter", "shard", "seed", "kernel_libs", "results", NULL};

/* Bits of a "0x3f80 (1)" value; its hex digits tell the dtype (4: BF16, 8: FP32). */
static int read_bits(rd *c, const char *field, const json_t *v, uint32_t *bits, moects_dtype *dt)
{
    char s[64];
    if (get_str(c, field, v, s, sizeof s, 1)) return -1;
    char *end;
    unsigned long u = strtoul(s, &end, 16);
    size_t nd = (size_t)(end - s);
    if (strncmp(s, "0x", 2) != 0 || (nd != 6 && nd != 10))
        return fail(c, field, "expected \"0x\" and 4 or 8 hex digits, got \"%s\"", s);
    *bits = (uint32_t)u;
    *dt = nd == 6 ? MOECTS_BF16 : MOECTS_F32;
    return 0;
}

static int read_elems(rd *c, const char *key, const json_t *a, moects_diag *d, moects_diag_elem *e, int max, int *n)
{
    if (!json_is_array(a)) return fail(c, key, "expected an array, got %s", type_name(a));
    if (json_array_size(a) > (size_t)max) return fail(c, key, "more than %d elements", max);
    static const char *const keys[] = {"at", "index", "got", "want", "ulp", NULL};
    size_t wl = strlen(c->where);
    for (size_t i = 0; i < json_array_size(a); i++) {
        const json_t *o = json_array_get(a, i);
        snprintf(c->where + wl, sizeof c->where - wl, "%s[%zu].", key, i);
        if (!json_is_object(o)) return fail(c, "", "expected an object, got %s", type_name(o));
        if (check_keys(c, o, keys)) return -1;
        const json_t *at = json_object_get(o, "at");
        if (!json_is_array(at) || json_array_size(at) != (size_t)d->ndims)
            return fail(c, "at", "expected an array of %d integers", d->ndims);
        for (int k = 0; k < d->ndims; k++)
            if (get_i64(c, "at", json_array_get(at, (size_t)k), &e[i].at[k])) return -1;
        if (get_i64(c, "index", json_object_get(o, "index"), &e[i].index) ||
            read_bits(c, "got", json_object_get(o, "got"), &e[i].got, &d->dtype) ||
            read_bits(c, "want", json_object_get(o, "want"), &e[i].want, &d->dtype) ||
            get_u64(c, "ulp", json_object_get(o, "ulp"), &e[i].ulp))
            return -1;
    }
    c->where[wl] = '\0';
    *n = (int)json_array_size(a);
    return 0;
}

static int read_diag(rd *c, const json_t *dg, moects_diag *d)
{
    if (!json_is_object(dg)) return fail(c, "diag", "expected an object, got %s", type_name(dg));
    static const char *const keys[] = {"axes", "pattern", "first", "worst", NULL};
    size_t wl = strlen(c->where);
    snprintf(c->where + wl, sizeof c->where - wl, "diag.");
    if (check_keys(c, dg, keys)) return -1;
    const json_t *axes = json_object_get(dg, "axes");
    if (!json_is_array(axes) || json_array_size(axes) < 2 || json_array_size(axes) > 3)
        return fail(c, "axes", "expected an array of 2 or 3 names");
    d->ndims = (int)json_array_size(axes);
    for (int k = 0; k < d->ndims; k++)
        if (get_str(c, "axes", json_array_get(axes, (size_t)k), d->axes[k], sizeof d->axes[k], 1)) return -1;
    if (get_str(c, "pattern", json_object_get(dg, "pattern"), d->pattern, sizeof d->pattern, 1) ||
        read_elems(c, "first", json_object_get(dg, "first"), d, d->first, MOECTS_DIAG_FIRST, &d->nfirst) ||
        read_elems(c, "worst", json_object_get(dg, "worst"), d, d->worst, MOECTS_DIAG_WORST, &d->nworst))
        return -1;
    c->where[wl] = '\0';
    return 0;
}

/* "kernel_libs" (optional): [{"path": "...", "sha256": "..."}, ...], at most MOECTS_RUN_LIBS. */
static int read_libs(rd *c, const json_t *a, moects_run *run)
{
    if (!a) return 0;
    if (!json_is_array(a)) return fail(c, "kernel_libs", "expected an array, got %s", type_name(a));
    if (json_array_size(a) > MOECTS_RUN_LIBS) return fail(c, "kernel_libs", "more than %d libraries", MOECTS_RUN_LIBS);
    static const char *const keys[] = {"path", "sha256", NULL};
    for (size_t i = 0; i < json_array_size(a); i++) {
        const json_t *o = json_array_get(a, i);
        snprintf(c->where, sizeof c->where, "kernel_libs[%zu].", i);
        if (!json_is_object(o)) return fail(c, "", "expected an object, got %s", type_name(o));
        if (check_keys(c, o, keys) ||
            get_str(c, "path", json_object_get(o, "path"), run->libs[i].path, sizeof run->libs[i].path, 1) ||
            get_str(c, "sha256", json_object_get(o, "sha256"), run->libs[i].sha256, sizeof run->libs[i].sha256, 1))
            return -1;
    }
    c->where[0] = '\0';
    run->nlibs = json_array_size(a);
    return 0;
}

static int read_result(rd *c, const json_t *o, moects_result *r)
{
    memset(r, 0, sizeof *r);
    r->first_index = -1;
    if (!json_is_object(o)) {
        c->where[strlen(c->where) - 1] = '\0'; /* "results[3]" without the dot */
        return fail(c, "", "expected an object, got %s", type_name(o));
    }
    if (check_keys(c, o, result_keys)) return -1;
    char tmp[32];
    if (get_str(c, "kernel", json_object_get(o, "kernel"), r->kernel, sizeof r->kernel, 1) ||
        get_str(c, "case", json_object_get(o, "case"), r->case_id, sizeof r->case_id, 1) ||
        get_str(c, "model", json_object_get(o, "model"), r->model, sizeof r->model, 1) ||
        get_str(c, "layout", json_object_get(o, "layout"), r->layout, sizeof r->layout, 1) ||
        get_str(c, "op", json_object_get(o, "op"), tmp, sizeof tmp, 1))
        return -1;
    if (!r->kernel[0]) return fail(c, "kernel", "empty");
    if (!r->case_id[0]) return fail(c, "case", "empty");
    if (moects__op_parse(tmp, &r->op)) return fail(c, "op", "unknown op \"%s\" (ep_gather, fp4_gemm)", tmp);
    const json_t *m = json_object_get(o, "mutant");
    if (!m) return fail(c, "mutant", "missing");
    if (!json_is_boolean(m)) return fail(c, "mutant", "expected a boolean, got %s", type_name(m));
    r->is_mutant = json_is_true(m);
    if (get_str(c, "verdict", json_object_get(o, "verdict"), tmp, sizeof tmp, 1)) return -1;
    if (moects_verdict_parse(tmp, &r->verdict)) return fail(c, "verdict", "unknown verdict \"%s\"", tmp);
    if (get_str(c, "recipe", json_object_get(o, "recipe"), r->recipe, sizeof r->recipe, 1) ||
        get_i64(c, "mismatches", json_object_get(o, "mismatches"), &r->mismatches) ||
        get_u64(c, "max_ulp", json_object_get(o, "max_ulp"), &r->max_ulp) ||
        get_double(c, "calc_diff", json_object_get(o, "calc_diff"), &r->calc_diff) ||
        get_str(c, "reason", json_object_get(o, "reason"), r->reason, sizeof r->reason, 1) ||
        get_str(c, "known", json_object_get(o, "known"), r->known, sizeof r->known, 0) ||
        get_u64(c, "seed", json_object_get(o, "seed"), &r->seed) ||
        get_double(c, "kernel_ms", json_object_get(o, "kernel_ms"), &r->kernel_ms) ||
        get_double(c, "perf_value", json_object_get(o, "perf_value"), &r->perf_value) ||
        get_double(c, "perf_fraction", json_object_get(o, "perf_fraction"), &r->perf_fraction))
        return -1;
    if (r->known[0] && (r->is_mutant || !(moects_verdict_is_fail(r->verdict) || moects_verdict_is_pass(r->verdict))))
        return fail(c, "known", "only on a FAIL_* or PASS_* result of an honest kernel (not on %s%s)",
                    r->is_mutant ? "a mutant's " : "", moects_verdict_name(r->verdict));
    if (read_acc_check(c, json_object_get(o, "acc_check"), r)) return -1;
    const json_t *tm = json_object_get(o, "timing");
    if (tm) {
        if (!json_is_object(tm)) return fail(c, "timing", "expected an object, got %s", type_name(tm));
        static const char *const tm_keys[] = {"wall_s", "inputs_s", "reference_s", "kernel_s", "compare_s",
                                              "ref_threads", NULL};
        size_t wl = strlen(c->where);
        snprintf(c->where + wl, sizeof c->where - wl, "timing.");
        if (check_keys(c, tm, tm_keys)) return -1;
        double *secs[] = {&r->wall_s, &r->inputs_s, &r->reference_s, &r->kernel_s, &r->compare_s};
        for (int i = 0; i < 5; i++) {
            if (get_double(c, tm_keys[i], json_object_get(tm, tm_keys[i]), secs[i])) return -1;
            if (!(*secs[i] >= 0) || isinf(*secs[i]))
                return fail(c, tm_keys[i], "not a finite number of seconds >= 0");
        }
        int64_t th;
        if (get_i64(c, "ref_threads", json_object_get(tm, "ref_threads"), &th)) return -1;
        if (th > 1000000) return fail(c, "ref_threads", "%" PRId64 " is too many", th);
        r->ref_threads = (int)th;
        c->where[wl] = '\0';
    }
    const json_t *dg = json_object_get(o, "diag");
    if (dg && read_diag(c, dg, &r->diag)) return -1;
    if (read_hashes(c, o, r)) return -1;
    const json_t *fm = json_object_get(o, "first_mismatch");
    if (!fm) return fail(c, "first_mismatch", "missing");
    if (!json_is_null(fm)) {
        if (!json_is_object(fm))
            return fail(c, "first_mismatch", "expected an object or null, got %s", type_name(fm));
        static const char *const fm_keys[] = {"index", "got", "want", NULL};
        size_t wl = strlen(c->where);
        snprintf(c->where + wl, sizeof c->where - wl, "first_mismatch.");
        if (check_keys(c, fm, fm_keys)) return -1;
        if (get_i64(c, "index", json_object_get(fm, "index"), &r->first_index) ||
            get_str(c, "got", json_object_get(fm, "got"), r->got, sizeof r->got, 1) ||
            get_str(c, "want", json_object_get(fm, "want"), r->want, sizeof r->want, 1))
            return -1;
        c->where[wl] = '\0';
    }
    return 0;
}

int moects__result_parse(const char *text, size_t len, const char *path, const char *where, moects_result *r,
                         char *err, size_t errlen)
{
    rd c = {path, err, errlen, ""};
    snprintf(c.where, sizeof c.where, "%s", where);
    json_error_t je;
    json_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    int rc = -1;
    if (!o) snprintf(err, errlen, "%s: %s%s", path, where, je.text);
    else rc = read_result(&c, o, r);
    json_decref(o);
    if (rc) moects__oneline(err);
    return rc;
}

typedef struct {
    const char *kernel, *case_id;
    size_t i;
} pair_ref;

static int pair_cmp(const void *a, const void *b)
{
    const pair_ref *x = a, *y = b;
    int d = strcmp(x->case_id, y->case_id);
    if (!d) d = strcmp(x->kernel, y->kernel);
    if (!d) d = (x->i > y->i) - (x->i < y->i);
    return d;
}

/* Parse path into run (any previous content is not freed: pass a zeroed or freed run). The file
 * is strict JSON plus the conventions above. Returns 0, or -1 with "path: field: problem" in err
 * and run left empty. */
int moects_results_read(const char *path, moects_run *run, char *err, size_t errlen)
{
    memset(run, 0, sizeof *run);
    rd c = {path, err, errlen, ""};
    json_error_t je;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        if (je.line < 0) snprintf(err, errlen, "%s: cannot read: %s", path, je.text);
        else snprintf(err, errlen, "%s: line %d column %d: %s", path, je.line, je.column, je.text);
        moects__oneline(err);
        return -1;
    }
    int rc = -1;
    if (!json_is_object(root)) {
        fail(&c, "(top level)", "expected an object, got %s", type_name(root));
        goto out;
    }
    if (check_keys(&c, root, top_keys) ||
        get_str(&c, "moects_version", json_object_get(root, "moects_version"), run->moects_version,
                sizeof run->moects_version, 1) ||
        get_str(&c, "commit", json_object_get(root, "commit"), run->commit, sizeof run->commit, 1) ||
        get_str(&c, "date", json_object_get(root, "date"), run->date, sizeof run->date, 1) ||
        get_str(&c, "machine", json_object_get(root, "machine"), run->machine, sizeof run->machine, 1) ||
        get_str(&c, "filter", json_object_get(root, "filter"), run->filter, sizeof run->filter, 1) ||
        get_str(&c, "shard", json_object_get(root, "shard"), run->shard, sizeof run->shard, 1) ||
        get_u64(&c, "seed", json_object_get(root, "seed"), &run->seed) ||
        read_libs(&c, json_object_get(root, "kernel_libs"), run))
        goto out;
    const json_t *arr = json_object_get(root, "results");
    if (!arr) {
        fail(&c, "results", "missing");
        goto out;
    }
    if (!json_is_array(arr)) {
        fail(&c, "results", "expected an array, got %s", type_name(arr));
        goto out;
    }
    size_t n = json_array_size(arr);
    for (size_t i = 0; i < n; i++) {
        moects_result r;
        snprintf(c.where, sizeof c.where, "results[%zu].", i);
        if (read_result(&c, json_array_get(arr, i), &r)) goto out;
        if (moects_run_push(run, &r)) {
            snprintf(err, errlen, "%s: out of memory", path);
            goto out;
        }
    }
    if (run->n > 1) {
        pair_ref *p = malloc(run->n * sizeof *p);
        if (!p) {
            snprintf(err, errlen, "%s: out of memory", path);
            goto out;
        }
        for (size_t i = 0; i < run->n; i++) p[i] = (pair_ref){run->v[i].kernel, run->v[i].case_id, i};
        qsort(p, run->n, sizeof *p, pair_cmp);
        for (size_t i = 1; i < run->n; i++)
            if (!strcmp(p[i].case_id, p[i - 1].case_id) && !strcmp(p[i].kernel, p[i - 1].kernel)) {
                snprintf(err, errlen, "%s: results[%zu]: duplicate of results[%zu] (kernel %s, case %s)",
                         path, p[i].i, p[i - 1].i, p[i].kernel, p[i].case_id);
                free(p);
                goto out;
            }
        free(p);
    }
    rc = 0;
out:
    json_decref(root);
    if (rc) {
        moects_run_free(run);
        moects__oneline(err); /* JSON strings quoted in it may hold control characters */
    }
    return rc;
}

/* ---- shared report helpers ---- */

void moects__shell_quote(moects__buf *b, const char *s)
{
    int plain = *s != '\0';
    for (const char *p = s; *p; p++)
        if (!isalnum((unsigned char)*p) && !strchr("/._-:=+,@%", *p)) plain = 0;
    if (plain) {
        moects__buf_add(b, s);
        return;
    }
    moects__buf_add(b, "'");
    for (; *s; s++) {
        if (*s == '\'') moects__buf_add(b, "'\\''");
        else moects__buf_addn(b, s, 1);
    }
    moects__buf_add(b, "'");
}

/* One case alone under one kernel, same seed: `moects run --kernel K --seed S CASE` (the form
 * harness/report/tap.c prints). */
const char *moects_self_program(void)
{
    static char prog[4200];
    if (prog[0]) return prog;
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    snprintf(prog, sizeof prog, "moects");
    if (n <= 0) return prog;
    self[n] = '\0';
    const char *path = getenv("PATH");
    for (const char *p = path ? path : ""; *p;) { /* the first moects on PATH: is it this binary? */
        size_t l = strcspn(p, ":");
        char cand[4200];
        snprintf(cand, sizeof cand, "%.*s/moects", (int)(l < 4096 ? l : 4096), p);
        char *real = l ? realpath(cand, NULL) : NULL;
        if (real) {
            int same = strcmp(real, self) == 0;
            free(real);
            if (same) return prog;
            break;
        }
        p += l + (p[l] == ':');
    }
    moects__buf b = {0};
    moects__shell_quote(&b, self);
    if (b.s) snprintf(prog, sizeof prog, "%s", b.s);
    moects__buf_free(&b);
    return prog;
}

void moects_repro_dir(const char *case_id, char *buf, size_t len)
{
    int n = snprintf(buf, len, "reports/repro/");
    for (const char *c = case_id; *c && n >= 0 && (size_t)n + 1 < len; c++, n++)
        buf[n] = isalnum((unsigned char)*c) || strchr("._-", *c) ? *c : '_';
    if (n >= 0 && (size_t)n < len) buf[n] = '\0';
}

void moects__repro(moects__buf *b, const moects_result *r)
{
    char dir[256];
    moects_repro_dir(r->case_id, dir, sizeof dir);
    moects__buf_add(b, moects_self_program());
    moects__buf_add(b, " run --kernel ");
    moects__shell_quote(b, r->kernel);
    moects__buf_printf(b, " --seed %" PRIu64 " --out ", r->seed);
    moects__shell_quote(b, dir);
    moects__buf_add(b, " ");
    moects__shell_quote(b, r->case_id);
}

void moects__filter_carried(moects__buf *b, const char *filter)
{
    static const char *const carried[] = {"--kernel-lib ", "--kernel-py ", "--config "};
    for (int o = 0; o < 3; o++)
        for (const char *p = filter; (p = strstr(p, carried[o])) != NULL;) {
            p += strlen(carried[o]);
            size_t n = strcspn(p, " ");
            char path[4096];
            snprintf(path, sizeof path, "%.*s", (int)(n < sizeof path ? n : sizeof path - 1), p);
            moects__buf_printf(b, " %s", carried[o]);
            moects__shell_quote(b, path);
            p += n;
        }
}

void moects__repro_filter(moects__buf *b, const moects_result *r, const char *filter)
{
    moects__repro(b, r);
    moects__filter_carried(b, filter);
}

void moects__md_counts(moects__buf *b, const moects_run *run)
{
    size_t cnt[2][MOECTS_VERDICT_COUNT] = {{0}};
    for (size_t i = 0; i < run->n; i++)
        if ((unsigned)run->v[i].verdict < MOECTS_VERDICT_COUNT) cnt[run->v[i].is_mutant != 0][run->v[i].verdict]++;
    moects__buf_add(b, "| verdict | kernels | mutants |\n|---|---:|---:|\n");
    for (int v = 0; v < MOECTS_VERDICT_COUNT; v++)
        if (cnt[0][v] || cnt[1][v])
            moects__buf_printf(b, "| %s | %zu | %zu |\n", verdict_names[v], cnt[0][v], cnt[1][v]);
    size_t t0 = 0, t1 = 0;
    for (int v = 0; v < MOECTS_VERDICT_COUNT; v++) t0 += cnt[0][v], t1 += cnt[1][v];
    moects__buf_printf(b, "| total | %zu | %zu |\n", t0, t1);
}

static int layout_rank(const char *s, long *num)
{
    char *end;
    if ((s[0] == 't' || s[0] == 'e') && s[1] == 'p' && isdigit((unsigned char)s[2])) {
        *num = strtol(s + 2, &end, 10);
        if (*end == '\0') return s[0] == 't' ? 0 : 1;
    }
    *num = 0;
    return 2;
}

int moects__layout_cmp(const char *a, const char *b)
{
    long na, nb;
    int ra = layout_rank(a, &na), rb = layout_rank(b, &nb);
    if (ra != rb) return ra < rb ? -1 : 1;
    if (na != nb) return na < nb ? -1 : 1;
    return strcmp(a, b);
}

static uint64_t fnv1a(uint64_t h, const char *s)
{
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

static uint64_t pair_hash(const char *kernel, const char *case_id)
{
    return fnv1a(fnv1a(0xcbf29ce484222325ull, kernel) * 31 + 1, case_id);
}

int moects__index_build(moects__index *ix, const moects_run *run)
{
    ix->run = run;
    ix->cap = 16;
    while (ix->cap < 2 * run->n + 1) ix->cap *= 2;
    ix->slot = calloc(ix->cap, sizeof *ix->slot);
    if (!ix->slot) return -1;
    for (size_t i = 0; i < run->n; i++) {
        size_t h = (size_t)pair_hash(run->v[i].kernel, run->v[i].case_id) & (ix->cap - 1);
        while (ix->slot[h]) {
            const moects_result *o = &run->v[ix->slot[h] - 1];
            if (!strcmp(o->kernel, run->v[i].kernel) && !strcmp(o->case_id, run->v[i].case_id)) break;
            h = (h + 1) & (ix->cap - 1);
        }
        if (!ix->slot[h]) ix->slot[h] = i + 1; /* a duplicate keeps the first */
    }
    return 0;
}

long moects__index_find(const moects__index *ix, const char *kernel, const char *case_id)
{
    size_t h = (size_t)pair_hash(kernel, case_id) & (ix->cap - 1);
    while (ix->slot[h]) {
        const moects_result *o = &ix->run->v[ix->slot[h] - 1];
        if (!strcmp(o->kernel, kernel) && !strcmp(o->case_id, case_id)) return (long)ix->slot[h] - 1;
        h = (h + 1) & (ix->cap - 1);
    }
    return -1;
}

void moects__index_free(moects__index *ix)
{
    free(ix->slot);
    ix->slot = NULL;
    ix->cap = 0;
}

static const char *const cell_names[MOECTS__CELL_COUNT] = {
    "PASS", "FAIL", "UNSUPPORTED", "NOT_REGISTERED", "NOT_RUN"};

const char *moects__cell_name(moects__cell_state s)
{
    return (unsigned)s < MOECTS__CELL_COUNT ? cell_names[s] : "?";
}

moects__cell_state moects__cell_state_of(const moects__cell *c)
{
    if (c->n[MOECTS_FAIL_MISMATCH] + c->n[MOECTS_FAIL_CRASH] + c->n[MOECTS_FAIL_TIMEOUT] +
        c->n[MOECTS_FAIL_OOB_WRITE] + c->n[MOECTS_FAIL_NONDETERMINISTIC]) return MOECTS__CELL_FAIL;
    if (c->n[MOECTS_UNSUPPORTED]) return MOECTS__CELL_UNSUPPORTED;
    if (c->n[MOECTS_PASS_EXACT] + c->n[MOECTS_PASS_BOUNDED] + c->n[MOECTS_PASS_TOLERANCE]) return MOECTS__CELL_PASS;
    return MOECTS__CELL_NOT_RUN;
}

static int cell_key_cmp(const char *k1, const char *m1, const char *l1, const char *k2, const char *m2,
                        const char *l2)
{
    int d = strcmp(k1, k2);
    if (!d) d = strcmp(m1, m2);
    if (!d) d = strcmp(l1, l2);
    return d;
}

static int cells_sort_cmp(const void *a, const void *b, void *ctx)
{
    const moects_run *run = ctx;
    const moects_result *x = &run->v[*(const size_t *)a], *y = &run->v[*(const size_t *)b];
    int d = cell_key_cmp(x->kernel, x->model, x->layout, y->kernel, y->model, y->layout);
    if (!d) d = (*(const size_t *)a > *(const size_t *)b) - (*(const size_t *)a < *(const size_t *)b);
    return d;
}

long moects__cells(const moects_run *run, const char *keep, moects__cell **out)
{
    *out = NULL;
    size_t *ord = malloc((run->n ? run->n : 1) * sizeof *ord);
    moects__cell *v = malloc((run->n ? run->n : 1) * sizeof *v);
    if (!ord || !v) {
        free(ord);
        free(v);
        return -1;
    }
    size_t m = 0;
    for (size_t i = 0; i < run->n; i++)
        if (!keep || keep[i]) ord[m++] = i;
    qsort_r(ord, m, sizeof *ord, cells_sort_cmp, (void *)run);
    long n = 0;
    for (size_t j = 0; j < m; j++) {
        const moects_result *r = &run->v[ord[j]];
        moects__cell *c = n ? &v[n - 1] : NULL;
        if (!c || cell_key_cmp(c->kernel, c->model, c->layout, r->kernel, r->model, r->layout)) {
            c = &v[n++];
            memset(c, 0, sizeof *c);
            c->kernel = r->kernel;
            c->model = r->model;
            c->layout = r->layout;
            c->op = r->op;
            c->is_mutant = r->is_mutant;
            c->first_bad = -1;
        }
        c->n[r->verdict]++;
        if (moects_verdict_is_fail(r->verdict) &&
            (c->first_bad < 0 || !moects_verdict_is_fail(run->v[c->first_bad].verdict)))
            c->first_bad = (long)ord[j];
        else if (r->verdict == MOECTS_UNSUPPORTED && c->first_bad < 0)
            c->first_bad = (long)ord[j];
    }
    free(ord);
    *out = v;
    return n;
}

const moects__cell *moects__cell_find(const moects__cell *v, long n, const char *kernel, const char *model,
                                      const char *layout)
{
    long lo = 0, hi = n;
    while (lo < hi) {
        long mid = lo + (hi - lo) / 2;
        int d = cell_key_cmp(v[mid].kernel, v[mid].model, v[mid].layout, kernel, model, layout);
        if (!d) return &v[mid];
        if (d < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

const char *moects__source_root(void)
{
    const char *r = getenv("MOECTS_ROOT");
    if (r && *r) return r;
#ifdef MOECTS_SOURCE_DIR
    return MOECTS_SOURCE_DIR;
#else
    return ".";
#endif
}
