/* results_read.c: the results.json reader (the format: results.c's opening comment). Every
 * problem is one line naming the file and the field: "path: results[3].max_ulp: missing". */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cases_internal.h"
#include "reports_internal.h"

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

/* An ULP distance: get_u64's forms, or MOECTS__ULP_UNBOUNDED for UINT64_MAX. */
static int get_ulp(rd *c, const char *field, const json_t *v, uint64_t *dst)
{
    if (json_is_string(v) && !strcmp(json_string_value(v), MOECTS__ULP_UNBOUNDED)) return *dst = UINT64_MAX, 0;
    return get_u64(c, field, v, dst);
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
                    moects__verdict_name(r->verdict));
    if (r->verdict == MOECTS_PASS_BOUNDED && r->acc_n >= MOECTS_ACC_CHECK_MIN && r->acc_rms > MOECTS_ACC_CHECK_LIMIT)
        return fail(c, "acc_check", "rms_sigma %g over %" PRId64 " elements fails the accumulation check (over %g), "
                    "but the verdict is PASS_BOUNDED", r->acc_rms, r->acc_n, MOECTS_ACC_CHECK_LIMIT);
    return 0;
}

/* "refusal" (optional; older files have none): on an UNSUPPORTED result only, the class word its
 * reason opens with. */
static int read_refusal(rd *c, const json_t *v, const moects_result *r)
{
    if (!v) return 0;
    moects_refusal cls;
    if (!json_is_string(v) || moects__refusal_parse(json_string_value(v), &cls))
        return fail(c, "refusal", "expected a refusal class (format, shape, layout, activation, routing, recipe, "
                    "scope, resource, unspecified)%s", "");
    if (r->verdict != MOECTS_UNSUPPORTED)
        return fail(c, "refusal", "only on an UNSUPPORTED result (not on %s)", moects__verdict_name(r->verdict));
    if (cls != moects__refusal_of(r->reason))
        return fail(c, "refusal", "\"%s\" but the reason opens with %s", json_string_value(v),
                    moects__refusal_name(moects__refusal_of(r->reason)));
    return 0;
}

static const char *const result_keys[] = {
    "kernel", "case", "model", "layout", "op", "mutant", "verdict", "recipe", "mismatches", "max_ulp",
    "calc_diff", "acc_check", "first_mismatch", "diag", "reason", "refusal", "known", "seed", "kernel_ms", "perf_value",
    "perf_fraction", "timing", "input_xxh64", "reference_xxh64", "reference", "reference_check", "gpu", NULL};
static const char *const top_keys[] = {
    "moects_version", "commit", "date", "machine", "filter", "shard", "seed", "kernel_libs", "results",
    "reference", "reference_check", NULL};

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
            get_ulp(c, "ulp", json_object_get(o, "ulp"), &e[i].ulp))
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
    if (moects__verdict_parse(tmp, &r->verdict)) return fail(c, "verdict", "unknown verdict \"%s\"", tmp);
    if (get_str(c, "reference_check", json_object_get(o, "reference_check"), tmp, sizeof tmp, 0)) return -1;
    r->ref_check = !strcmp(tmp, "same") ? 1 : !strcmp(tmp, "differs") ? 2 : 0;
    if (get_str(c, "recipe", json_object_get(o, "recipe"), r->recipe, sizeof r->recipe, 1) ||
        get_i64(c, "mismatches", json_object_get(o, "mismatches"), &r->mismatches) ||
        get_ulp(c, "max_ulp", json_object_get(o, "max_ulp"), &r->max_ulp) ||
        get_double(c, "calc_diff", json_object_get(o, "calc_diff"), &r->calc_diff) ||
        get_str(c, "reason", json_object_get(o, "reason"), r->reason, sizeof r->reason, 1) ||
        get_str(c, "known", json_object_get(o, "known"), r->known, sizeof r->known, 0) ||
        get_str(c, "reference", json_object_get(o, "reference"), r->reference, sizeof r->reference, 0) ||
        get_str(c, "gpu", json_object_get(o, "gpu"), r->gpu, sizeof r->gpu, 0) ||
        get_u64(c, "seed", json_object_get(o, "seed"), &r->seed) ||
        get_double(c, "kernel_ms", json_object_get(o, "kernel_ms"), &r->kernel_ms) ||
        get_double(c, "perf_value", json_object_get(o, "perf_value"), &r->perf_value) ||
        get_double(c, "perf_fraction", json_object_get(o, "perf_fraction"), &r->perf_fraction))
        return -1;
    if (read_refusal(c, json_object_get(o, "refusal"), r)) return -1;
    if (r->known[0] && (r->is_mutant || !(moects_verdict_is_fail(r->verdict) || moects_verdict_is_pass(r->verdict))))
        return fail(c, "known", "only on a FAIL_* or PASS_* result of an honest kernel (not on %s%s)",
                    r->is_mutant ? "a mutant's " : "", moects__verdict_name(r->verdict));
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
int moects__results_read(const char *path, moects_run *run, char *err, size_t errlen)
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
        get_str(&c, "reference", json_object_get(root, "reference"), run->reference, sizeof run->reference, 0) ||
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
        if (moects__run_push(run, &r)) {
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
        moects__run_free(run);
        moects__oneline(err); /* JSON strings quoted in it may hold control characters */
    }
    return rc;
}
