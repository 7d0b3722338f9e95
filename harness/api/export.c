/* export.c: cases as safetensors files and the judgement of outputs written beside them
 * (include/moects/moects.h moects_export / moects_verify; the CLI in harness/cli/cmd_export.c and cmd_verify.c; run --dump).
 * DESIGN.md "Kernels from Python, and from any language".
 *
 * File layout (one case): DIR/<case id, '/' -> "__">.safetensors holds the inputs under their ABI
 * names, the references as "ref.<recipe>" (every recipe of the op, or the one compared for --dump),
 * and metadata strings: moects.case_id, moects.op, moects.case (the case JSON of moects_case_json,
 * with "shape"), moects.shape (that shape alone), moects.dtypes (tensor -> dtype), moects.out
 * ({"dtype", "shape"} a kernel must write), moects.recipe (the recipe verify judges under unless told),
 * moects.recipes, moects.scalars (fp4_gemm: alpha, gs_a, gs_b), moects.seed, moects.version.
 * A kernel's output goes beside it as <same base>.out.safetensors with one tensor "out". The files
 * are written by harness/run/casefile.c (also run --dump's). */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capi_internal.h"
#include "moects_op.h"
#include "moects_runner.h"
#include "reports_internal.h"
#include "safetensors.h"

long moects_export(const moects_caselist *l, uint64_t seed, const char *dir)
{
    char err[4600];
    if (!l || !dir) return moects__set_error("export: no cases or directory"), -1;
    if (moects__mkdirs(dir, err, sizeof err)) return moects__set_error("%s", err), -1;
    long n = 0;
    for (size_t i = 0; i < moects_caselist_count(l); i++) {
        const moects_case *c = moects__caselist_case(l, i);
        const char *rn[4];
        const moects__op_def *op = moects__op(c->op);
        int nr = op ? op->recipes(c, rn) : 0;
        if (!nr) return moects__set_error("%s: op %s: export not supported yet", c->id, moects__op_name(c->op)), -1;
        moects_casedata *d = moects__casedata_of(c, seed);
        if (!d) return -1;
        const void *refs[4];
        for (int r = 0; r < nr; r++) {
            moects_recipe rc;
            moects__recipe_parse(rn[r], c->op, &rc);
            if (!(refs[r] = moects__casedata_ref(d, rc))) return moects_casedata_free(d), -1;
        }
        int rc = moects__export_case(dir, c, seed, moects__casedata_inputs(d), rn, refs, nr, err, sizeof err);
        moects_casedata_free(d);
        if (rc) return moects__set_error("%s", err), -1;
        n++;
    }
    return n;
}

/* ---------------------------------------------------------------- verify ---- */

/* A case whose shape does not hold it (moe_gemm: its rows come from the model's routing): the
 * case of that id in the built-in registry; same_inputs then checks the file against it. */
static int registry_case(const char *path, const char *id, moects_case *c, char *err, size_t errlen)
{
    const char *g[] = {id}, *op = moects__op_name(c->op);
    moects_caselist *l = id[0] ? moects_cases_select(NULL, NULL, 0, 0, "all", g, 1) : NULL;
    const moects_case *x = l && moects_caselist_count(l) == 1 ? moects__caselist_case(l, 0) : NULL;
    if (x) *c = *x;
    else snprintf(err, errlen, "%s: moects.case: id %s: not a %s case of the built-in registry (%s "
                  "cases are derived from it again: a --config case cannot be verified)", path, id, op, op);
    moects_caselist_free(l);
    return x ? 0 : -1;
}

/* The case an exported file was made from (its moects.case metadata). */
int moects__case_from_json(const char *path, const char *json, moects_case *c, char *err, size_t errlen)
{
    int rc = moects__case_parse(path, json, c, err, errlen);
    if (rc == -2 || rc == 1) /* moe_gemm: its rows come from the registry's routing */
        rc = registry_case(path, c->id, c, err, errlen), c->tiers = MOECTS_TIER_SMOKE;
    return rc;
}

/* A judgement without an output (the .out file missing or malformed): FAIL_CRASH with the reason. */
static int crash_of(moects_casedata *d, const moects_kernel *k, const char *why, moects_result *r)
{
    moects_judgement *j = moects_judge_outcome(d, k, "FAIL_CRASH", why);
    if (!j) return -1;
    *r = *moects__judgement_result(j);
    moects_judgement_free(j);
    return 0;
}

/* The inputs of the exported file equal what this moects generates for its case and seed. */
static int same_inputs(const char *path, const moects__st_file *f, const moects_casedata *d, char *err, size_t errlen)
{
    const moects_inputs *in = moects__casedata_inputs(d);
    const char *v = moects__st_meta(f, "moects.version");
    for (int j = 0; j < in->nt; j++) {
        moects_tensor_info t;
        moects__tensor_describe(in, j, &t);
        if (!t.ndim) continue; /* absent (moe_gemm): not exported */
        const moects__st_tensor *s = moects__st_find(f, t.name);
        if (!s) return snprintf(err, errlen, "%s: %s: no such tensor", path, t.name), -1;
        if (s->bytes != t.bytes || strcmp(s->dtype, t.dtype) || (t.bytes && memcmp(s->data, t.data, t.bytes)))
            return snprintf(err, errlen, "%s: %s: not the input this moects %s generates for the case (exported by moects %s)",
                            path, t.name, MOECTS_VERSION, v ? v : "?"), -1;
    }
    return 0;
}

/* Each ref.<recipe> tensor of the exported file equals the reference this moects computes for the
 * case under that recipe (a file edited after export would mislead whoever compares against it). */
static int same_refs(const char *path, const moects__st_file *f, moects_casedata *d, char *err, size_t errlen)
{
    moects_tensor_info want;
    moects__output_describe(moects__casedata_inputs(d), &want);
    const size_t elt = moects__st_dtype_size(want.dtype);
    for (size_t i = 0; i < f->n; i++) {
        const moects__st_tensor *s = &f->t[i];
        moects_recipe rec;
        if (strncmp(s->name, "ref.", 4)) continue;
        if (moects__recipe_parse(s->name + 4, moects__casedata_case(d)->op, &rec))
            return snprintf(err, errlen, "%.2000s: %.127s: not a recipe of the case's op", path, s->name), -1;
        const uint8_t *ref = moects__casedata_ref(d, rec);
        if (!ref) return snprintf(err, errlen, "%.2000s: %.127s: %s", path, s->name, moects_errmsg()), -1;
        if (s->bytes != want.bytes || strcmp(s->dtype, want.dtype))
            return snprintf(err, errlen, "%.2000s: %.127s: %s of %zu bytes, the case's output is %s of %zu", path, s->name,
                            s->dtype, s->bytes, want.dtype, want.bytes), -1;
        size_t differ = 0, first = 0;
        for (size_t o = 0; elt && o < want.bytes; o += elt)
            if (memcmp((const uint8_t *)s->data + o, ref + o, elt) && !differ++) first = o / elt;
        if (differ)
            return snprintf(err, errlen, "%.2000s: %.127s: not the reference this moects %s computes for the case (%zu of %zu "
                            "elements differ, the first at index %zu; exported by moects %s)", path, s->name,
                            MOECTS_VERSION, differ, elt ? want.bytes / elt : 0, first,
                            moects__st_meta(f, "moects.version") ? moects__st_meta(f, "moects.version") : "?"), -1;
    }
    return 0;
}

/* "BF16 [2, 128, 2048]" into buf. */
static void dims_text(const char *dtype, int ndim, const int64_t *dims, char *buf, size_t len)
{
    int n = snprintf(buf, len, "%s [", dtype);
    for (int i = 0; i < ndim && n > 0 && (size_t)n < len; i++)
        n += snprintf(buf + n, len - (size_t)n, "%s%" PRId64, i ? ", " : "", dims[i]);
    if (n > 0 && (size_t)n < len) snprintf(buf + n, len - (size_t)n, "]");
}

/* The output a program wrote (BASE.out.safetensors, tensor "out") judged; its absence or a malformed
 * file is the kernel's FAIL_CRASH. */
static int judge_out(const char *outp, moects_casedata *d, const moects_kernel *k, moects_result *r)
{
    char why[4800];
    moects__st_file o;
    if (access(outp, F_OK) != 0) {
        snprintf(why, sizeof why, "no output written: %s", outp);
        return crash_of(d, k, why, r);
    }
    if (moects__st_read(outp, &o, why, sizeof why)) return crash_of(d, k, why, r);
    moects_tensor_info want;
    moects__output_describe(moects__casedata_inputs(d), &want);
    const moects__st_tensor *s = moects__st_find(&o, "out");
    int same = s && !strcmp(s->dtype, want.dtype) && s->ndim == want.ndim;
    for (int i = 0; same && i < want.ndim; i++) same = s->dims[i] == want.dims[i];
    int rc;
    if (!same) {
        char w[160], g[160];
        dims_text(want.dtype, want.ndim, want.dims, w, sizeof w);
        if (s) dims_text(s->dtype, s->ndim, s->dims, g, sizeof g);
        snprintf(why, sizeof why, "%s: out: %s%s, the case's output is %s", outp, s ? "" : "no such tensor",
                 s ? g : "", w);
        rc = crash_of(d, k, why, r);
    } else {
        moects_judgement *j = moects_judge(d, k, s->data, s->bytes);
        rc = j ? (*r = *moects__judgement_result(j), 0) : -1;
        moects_judgement_free(j);
    }
    moects__st_free(&o);
    return rc;
}

/* Judge one exported file (DIR/NAME) with k: 0 and r filled, -1 with err (the exported file itself
 * is bad or does not match this moects). */
static int verify_one(const char *dir, const char *name, const moects_kernel *k, moects_result *r, char *err,
                      size_t errlen)
{
    char path[4400], outp[4400];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(outp, sizeof outp, "%s/%.*s.out.safetensors", dir, (int)(strlen(name) - strlen(".safetensors")), name);
    moects__st_file f;
    if (moects__st_read(path, &f, err, errlen)) return -1;
    moects_case c;
    uint64_t seed = 0;
    const char *sd = moects__st_meta(&f, "moects.seed");
    int rc = moects__case_from_json(path, moects__st_meta(&f, "moects.case"), &c, err, errlen);
    if (!rc && (!sd || sscanf(sd, "%" SCNu64, &seed) != 1))
        rc = (snprintf(err, errlen, "%s: moects.seed: missing or not an integer", path), -1);
    const char *cid = moects__st_meta(&f, "moects.case_id");
    if (!rc && !cid) rc = (snprintf(err, errlen, "%.2000s: moects.case_id: missing", path), -1);
    if (!rc && strcmp(cid, c.id)) /* edited: judged as moects.case's case, not the one it names */
        rc = (snprintf(err, errlen, "%.2000s: moects.case_id %.190s: not the case of moects.case (%.190s)", path,
                       cid, c.id), -1);
    char own[4400];
    if (!rc) moects__case_file(own, sizeof own, dir, c.id, ".safetensors");
    if (!rc && strcmp(own, path)) /* renamed or copied: two files could claim one case, one judged */
        rc = (snprintf(err, errlen, "%.2000s: moects.case_id %.190s: that case's file is %.1000s (renamed or copied?)",
                       path, c.id, strrchr(own, '/') ? strrchr(own, '/') + 1 : own), -1);
    moects_casedata *d = rc ? NULL : moects__casedata_of(&c, seed);
    if (!rc && !d) rc = (snprintf(err, errlen, "%s: %s", path, moects_errmsg()), -1);
    if (!rc) rc = same_inputs(path, &f, d, err, errlen);
    if (!rc) rc = same_refs(path, &f, d, err, errlen);
    moects_kernel kk = *k;
    kk.op = c.op;
    int told = k->recipe || k->tol.max_calc_diff > 0 || k->tol.max_ulp > 0 || (k->abi_version >= 2 && k->acc.bits);
    if (!told) kk.recipe = moects__st_meta(&f, "moects.recipe");
    if (!rc && (rc = judge_out(outp, d, &kk, r))) snprintf(err, errlen, "%s: %s", path, moects_errmsg());
    moects_casedata_free(d);
    moects__st_free(&f);
    return rc;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The exported files of dir (NAME.safetensors, not NAME.out.safetensors), sorted; count or -1. */
static long exported_files(const char *dir, char ***out)
{
    DIR *d = opendir(dir);
    if (!d) return moects__set_error("%s: cannot open: %s", dir, strerror(errno)), -1;
    char **v = NULL;
    long n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t l = strlen(e->d_name), s = strlen(".safetensors"), o = strlen(".out.safetensors");
        if (l <= s || strcmp(e->d_name + l - s, ".safetensors") || (l > o && !strcmp(e->d_name + l - o, ".out.safetensors")))
            continue;
        char **nv = realloc(v, (size_t)(n + 1) * sizeof *v);
        if (!nv || !(nv[n] = strdup(e->d_name))) {
            v = nv ? nv : v;
            break;
        }
        v = nv;
        n++;
    }
    closedir(d);
    qsort(v, (size_t)n, sizeof *v, by_name);
    *out = v;
    return n;
}

long moects_verify(const char *dir, const moects_kernel *k, moects_resultset *s)
{
    if (!dir || !k || !k->name) return moects__set_error("verify: no directory or kernel description"), -1;
    char **files = NULL, err[4600];
    long n = exported_files(dir, &files), fails = 0;
    if (n == 0) moects__set_error("%s: no exported case (NAME.safetensors)", dir);
    for (long i = 0; i < n && fails >= 0; i++) {
        moects_result r;
        if (verify_one(dir, files[i], k, &r, err, sizeof err)) moects__set_error("%s", err), fails = -1;
        else if ((s && moects__resultset_push(s, &r)) ) fails = -1;
        else fails += moects_verdict_is_fail(r.verdict);
    }
    for (long i = 0; i < n; i++) free(files[i]);
    free(files);
    return n <= 0 ? -1 : fails;
}
