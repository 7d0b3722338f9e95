/* localcase.c: local cases (issue 32): a case made from an op's captured inputs, a safetensors file in
 * `moects export`'s names and layouts, judged like any registry case (tier local). `moects case add`
 * checks the file against the op's contract and writes, in the user case folder (default
 * <root>/cases/local, MOECTS_CASES_DIR, `--cases-dir`):
 *
 *   blobs/<XXH3-128 of the bytes>.bin   each tensor's raw bytes, stored once, shared between cases
 *   <id, '/' as "__">.json              the manifest: {"moects_local_case": 1, "id", "op", "from",
 *                                       "seed", "recipe", "case" (moects.case with its shape),
 *                                       "scalars", "tensors": {NAME: {"dtype", "shape", "blob"}}}
 *
 * The id is "<the file's id prefix>/local/[NAME-]<XXH3-64 of the manifest without its id>". The
 * file's ref.* tensors are ignored: moects computes the reference (harness/ops/local.c loads the
 * inputs). moects__cases_registry is the built-in registry with the local cases appended. */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "capi_internal.h"
#include "cases_internal.h"
#include "moects_op.h"
#include "moects_runner.h"
#include "reports_internal.h"
#include "safetensors.h"

void moects__local_dir(const char *root, char *buf, size_t len)
{
    const char *e = getenv("MOECTS_CASES_DIR");
    if (e && *e) snprintf(buf, len, "%s", e);
    else snprintf(buf, len, "%s/cases/local", root);
}

static void str_of(json_t *o, const char *k, char *dst, size_t n)
{
    const char *s = json_string_value(json_object_get(o, k));
    snprintf(dst, n, "%s", s ? s : "");
}

int moects__case_parse(const char *path, const char *json, moects_case *c, char *err, size_t errlen)
{
    memset(c, 0, sizeof *c);
    json_error_t je;
    json_t *o = json ? json_loads(json, 0, &je) : NULL;
    if (!json_is_object(o)) {
        json_decref(o);
        return snprintf(err, errlen, "%s: moects.case: %s", path, json ? je.text : "missing"), -1;
    }
    str_of(o, "id", c->id, sizeof c->id);
    str_of(o, "model", c->model, sizeof c->model);
    str_of(o, "layout", c->layout, sizeof c->layout);
    str_of(o, "source", c->source, sizeof c->source);
    const char *op = json_string_value(json_object_get(o, "op")), *data = json_string_value(json_object_get(o, "data"));
    int rc = 0;
    moects_data dd;
    if (moects__op_parse(op ? op : "", &c->op))
        rc = (snprintf(err, errlen, "%s: moects.case: op: not an op of moects", path), -1);
    else if (!moects__op(c->op)->shape_parse) /* an op whose shape names a registry case */
        rc = (snprintf(err, errlen, "%s: moects.case: op %s: its shape names a registry case", path, op), -2);
    else if (moects__data_parse(data ? data : "", &dd))
        rc = (snprintf(err, errlen, "%s: moects.case: data: unknown", path), -1);
    else if (!c->id[0])
        rc = (snprintf(err, errlen, "%s: moects.case: id: missing", path), -1);
    else
        c->data = dd, rc = moects__op(c->op)->shape_parse(path, json_object_get(o, "shape"), c, err, errlen);
    c->tiers = MOECTS_TIER_SMOKE;
    json_decref(o);
    return rc;
}

/* ------------------------------------------------------------- the registry ---- */

/* One manifest (dir/name) as a case of tier local. */
static int load_manifest(const char *dir, const char *name, moects_case *c, char *err, size_t errlen)
{
    char path[1200];
    json_error_t je;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    json_t *m = json_load_file(path, JSON_REJECT_DUPLICATES, &je), *cj = json_object_get(m, "case");
    const char *id = json_string_value(json_object_get(m, "id")), *from = json_string_value(json_object_get(m, "from"));
    char *cs = json_is_object(cj) ? json_dumps(cj, JSON_COMPACT) : NULL, own[1200];
    int rc = !m ? moects__fail(err, errlen, "%s: %s", path, je.text)
           : !id || !cs ? moects__fail(err, errlen, "%s: not a local case manifest (id, case)", path)
                        : moects__case_parse(path, cs, c, err, errlen) < 0 ? -1 : 0;
    if (!rc) moects__case_file(own, sizeof own, dir, id, ".json");
    if (!rc && strcmp(own, path)) rc = moects__fail(err, errlen, "%s: id %s: that case's manifest is %s", path, id, own);
    if (!rc && (strlen(id) >= sizeof c->id || strlen(path) >= sizeof c->file))
        rc = moects__fail(err, errlen, "%s: id or path too long", path);
    if (!rc) {
        snprintf(c->id, sizeof c->id, "%s", id);
        snprintf(c->model, sizeof c->model, "local");
        snprintf(c->source, sizeof c->source, "local case from %.200s", from ? from : "?");
        snprintf(c->file, sizeof c->file, "%s", path);
        c->tiers = MOECTS_TIER_LOCAL;
    }
    free(cs);
    json_decref(m);
    return rc;
}

int moects__cases_registry(const char *root, moects_case_list *out, char *err, size_t errlen)
{
    if (moects__cases_builtin(root, out, err, errlen)) return -1;
    char dir[1024];
    struct stat st;
    moects__local_dir(root, dir, sizeof dir);
    if (stat(dir, &st) != 0) return 0; /* no local case yet */
    char **names;
    size_t n;
    if (moects__json_names(dir, &names, &n, err, errlen)) return -1;
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        moects_case c;
        rc = load_manifest(dir, names[i], &c, err, errlen);
        if (!rc && moects__case_list_push(out, &c)) rc = moects__fail(err, errlen, "%s: out of memory", dir);
    }
    moects__names_free(names, n);
    return rc;
}

/* ------------------------------------------------------------------ case add ---- */

/* Host memory available to a case: MOECTS_HOST_MEM_BUDGET (bytes) when set, else MemAvailable. */
static double mem_budget(void)
{
    const char *e = getenv("MOECTS_HOST_MEM_BUDGET");
    if (e && *e) return strtod(e, NULL);
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    double kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lf kB", &kb) == 1) break;
    if (f) fclose(f);
    return kb > 0 ? kb * 1024 : 1e300;
}

/* The case, seed and recipe of a file of captured inputs (its moects.* metadata), within the host's
 * memory budget. 0, or -1 with "FILE: FIELD: problem". */
static int file_case(const char *file, const moects__st_file *f, moects_case *c, uint64_t *seed, const char **recipe,
                     char *err, size_t errlen)
{
    /* 1: a shape whose rows the tensors give (moe_gemm), as a local case's are */
    if (moects__case_parse(file, moects__st_meta(f, "moects.case"), c, err, errlen) < 0) return -1;
    const char *sd = moects__st_meta(f, "moects.seed");
    if (!sd || sscanf(sd, "%" SCNu64, seed) != 1)
        return moects__fail(err, errlen, "%s: moects.seed: missing or not an integer", file);
    const char *names[4];
    *recipe = moects__st_meta(f, "moects.recipe");
    if (!*recipe) *recipe = moects__op(c->op)->recipes(c, names) ? names[0] : "";
    moects_recipe r;
    if (moects__recipe_parse(*recipe, c->op, &r))
        return moects__fail(err, errlen, "%s: moects.recipe: %s is not a recipe of %s", file, *recipe, moects__op_name(c->op));
    const double need = moects__op(c->op)->bytes(c), have = mem_budget();
    if (need > have)
        return moects__fail(err, errlen, "%s: the case needs %.0f bytes (%.2f GiB) of host memory, the budget is %.0f "
                            "(%.2f GiB%s); nothing loaded", file, need, need / 1073741824.0, have, have / 1073741824.0,
                            getenv("MOECTS_HOST_MEM_BUDGET") ? ", MOECTS_HOST_MEM_BUDGET" : ", MemAvailable");
    return 0;
}

/* The file's input tensors (every tensor but its ref.* references) as sources; count, -1 out of memory. */
static long file_sources(const moects__st_file *f, moects__src_tensor **out)
{
    moects__src_tensor *s = calloc(f->n + 1, sizeof *s);
    long n = 0;
    for (size_t i = 0; s && i < f->n; i++) {
        const moects__st_tensor *t = &f->t[i];
        if (!strncmp(t->name, "ref.", 4)) continue;
        s[n++] = (moects__src_tensor){t->name, t->dtype, t->ndim, t->dims, t->bytes, t->data ? t->data : ""};
    }
    *out = s;
    return s ? n : -1;
}

/* The manifest of a local case (without its id) from the file's case and its sources. */
static json_t *manifest_of(const char *file, const char *cjson, uint64_t seed, const char *recipe, const char *scalars,
                           const moects__src_tensor *s, size_t n)
{
    json_t *ts = json_object(), *cj = json_loads(cjson, 0, NULL), *sc = scalars ? json_loads(scalars, 0, NULL) : NULL;
    for (size_t i = 0; i < n; i++) {
        char hex[33];
        json_t *sh = json_array();
        for (int d = 0; d < s[i].ndim; d++) json_array_append_new(sh, json_integer(s[i].dims[d]));
        moects__blob_name(s[i].data, s[i].bytes, hex);
        json_object_set_new(ts, s[i].name, json_pack("{ss so ss}", "dtype", s[i].dtype, "shape", sh, "blob", hex));
    }
    const char *base = strrchr(file, '/') ? strrchr(file, '/') + 1 : file;
    return json_pack("{si ss ss sI ss so so so}", "moects_local_case", 1, "op", json_string_value(json_object_get(cj, "op")),
                     "from", base, "seed", (json_int_t)seed, "recipe", recipe, "case", cj ? cj : json_object(), "scalars",
                     sc ? sc : json_object(), "tensors", ts);
}

/* "<prefix of the file's case id>/local/[NAME-]<XXH3-64 of what the case is: op, data, shape, seed, recipe,
 * scalars, tensors>" into id. */
static void local_id(json_t *m, const char *name, char *id, size_t len)
{
    json_t *cj = json_object_get(m, "case");
    json_t *what = json_pack("{sO sO sO sO sO sO sO}", "op", json_object_get(m, "op"), "data", json_object_get(cj, "data"),
                             "shape", json_object_get(cj, "shape"), "seed", json_object_get(m, "seed"), "recipe",
                             json_object_get(m, "recipe"), "scalars", json_object_get(m, "scalars"), "tensors",
                             json_object_get(m, "tensors"));
    char *s = json_dumps(what, JSON_COMPACT | JSON_SORT_KEYS);
    const char *orig = json_string_value(json_object_get(cj, "id")), *op = json_string_value(json_object_get(m, "op"));
    const char *sl = orig ? strchr(orig, '/') : NULL;
    snprintf(id, len, "%.*s/local/%s%s%016" PRIx64, sl ? (int)(sl - orig) : (int)strlen(op ? op : "?"), sl ? orig : op ? op : "?",
             name ? name : "", name ? "-" : "", (uint64_t)XXH3_64bits(s ? s : "", s ? strlen(s) : 0));
    free(s);
    json_decref(what);
}

/* Write bytes to path through a temporary file and a rename. 0, or -1 with err. */
static int write_atomic(const char *path, const void *data, size_t bytes, char *err, size_t errlen)
{
    char tmp[1300];
    if (moects__report_tmp(path, tmp, sizeof tmp, err, errlen)) return -1;
    FILE *f = fopen(tmp, "wb");
    int ok = f && (!bytes || fwrite(data, 1, bytes, f) == bytes);
    ok = f && fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path)) {
        snprintf(err, errlen, "%s: cannot write: %s", path, strerror(errno));
        return unlink(tmp), -1;
    }
    return 0;
}

/* Each source's bytes as dir/blobs/<hash>.bin, unless a blob of that content is there already. */
static int write_blobs(const char *dir, json_t *m, const moects__src_tensor *s, size_t n, char *err, size_t errlen)
{
    char bd[1100], path[1200];
    snprintf(bd, sizeof bd, "%s/blobs", dir);
    if (moects__mkdirs(bd, err, errlen)) return -1;
    for (size_t i = 0; i < n; i++) {
        const char *hex = json_string_value(json_object_get(json_object_get(json_object_get(m, "tensors"), s[i].name), "blob"));
        snprintf(path, sizeof path, "%s/%s.bin", bd, hex);
        if (access(path, F_OK) != 0 && write_atomic(path, s[i].data, s[i].bytes, err, errlen)) return -1;
    }
    return 0;
}

/* The manifest m (its id set) and its blobs into dir; *existed 1 when the case was there already. */
static int store(const char *dir, json_t *m, const moects__src_tensor *s, size_t n, int *existed, char *err, size_t errlen)
{
    char path[1200];
    moects__case_file(path, sizeof path, dir, json_string_value(json_object_get(m, "id")), ".json");
    *existed = access(path, F_OK) == 0;
    if (*existed) return 0;
    char *txt = json_dumps(m, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
    int rc = txt ? write_blobs(dir, m, s, n, err, errlen) : moects__fail(err, errlen, "%s: out of memory", path);
    if (!rc) {
        size_t l = strlen(txt);
        txt[l] = '\n'; /* json_dumps's NUL becomes the last line's end */
        rc = write_atomic(path, txt, l + 1, err, errlen);
    }
    free(txt);
    return rc;
}

/* NAME: lower-case letters, digits, '.', '-', '_', at most 64. */
static int name_ok(const char *name)
{
    size_t l = name ? strlen(name) : 1;
    if (!l || l > 64) return 0;
    for (const char *p = name; p && *p; p++)
        if (!strchr("abcdefghijklmnopqrstuvwxyz0123456789._-", *p)) return 0;
    return 1;
}

/* Check the file's inputs against the op's contract on the case's built inputs; sources into *src. */
static long checked_sources(const char *file, const moects__st_file *f, const moects_case *c, uint64_t seed,
                            moects__src_tensor **src, char *err, size_t errlen)
{
    moects_inputs in;
    char e[2048];
    if (moects__inputs_build(c, seed, &in, e, sizeof e)) return moects__fail(err, errlen, "%s: %s", file, e), -1;
    const char *sj = moects__st_meta(f, "moects.scalars");
    json_t *sc = sj ? json_loads(sj, 0, NULL) : NULL;
    long n = (sj && !json_is_object(sc)) ? (moects__fail(err, errlen, "%s: moects.scalars: not a JSON object", file), -1)
                                         : file_sources(f, src);
    if (n >= 0) moects__local_scalars(sc, &in);
    if (n >= 0 && moects__inputs_replace(c, &in, *src, (size_t)n, file, err, errlen)) n = -1;
    json_decref(sc);
    moects__inputs_free(&in);
    return n;
}

int moects__case_add(const char *file, const char *dir, const char *name, char *id, size_t idlen, int *existed,
                     char *err, size_t errlen)
{
    if (name && !name_ok(name))
        return moects__fail(err, errlen, "--name %s: not 1 to 64 of a-z 0-9 . - _", name);
    moects__st_file f;
    if (moects__st_read(file, &f, err, errlen)) return -1;
    moects_case c;
    uint64_t seed = 0;
    const char *recipe = NULL;
    moects__src_tensor *src = NULL;
    long n = file_case(file, &f, &c, &seed, &recipe, err, errlen) ? -1 : checked_sources(file, &f, &c, seed, &src, err, errlen);
    json_t *m = n < 0 ? NULL : manifest_of(file, moects__st_meta(&f, "moects.case"), seed, recipe,
                                           moects__st_meta(&f, "moects.scalars"), src, (size_t)n);
    int rc = n < 0 ? -1 : !m ? moects__fail(err, errlen, "%s: out of memory", file) : 0;
    if (!rc) {
        local_id(m, name, id, idlen);
        json_object_set_new(m, "id", json_string(id));
        rc = moects__mkdirs(dir, err, errlen) ? -1 : store(dir, m, src, (size_t)n, existed, err, errlen);
    }
    json_decref(m);
    free(src);
    moects__st_free(&f);
    return rc;
}
