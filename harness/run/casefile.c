/* casefile.c: one case as a safetensors file (its inputs under their ABI names, its references as
 * "ref.<recipe>", its metadata) and a kernel's output beside it: the layout harness/api/export.c
 * describes, written for `moects export` and for run --dump (capi_internal.h). */
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capi_internal.h"
#include "moects_op.h"
#include "moects_runner.h"
#include "reports_internal.h"
#include "safetensors.h"

/* DIR/<id with '/' -> "__"><suffix>. */
void moects__case_file(char *buf, size_t len, const char *dir, const char *id, const char *suffix)
{
    size_t l = (size_t)snprintf(buf, len, "%s/", dir);
    for (const char *p = id; *p && l + 3 < len; p++) {
        if (*p == '/') buf[l++] = '_', buf[l++] = '_';
        else buf[l++] = *p;
    }
    snprintf(buf + (l < len ? l : len - 1), len - (l < len ? l : len - 1), "%s", suffix);
}

static void st_of(moects__st_tensor *s, const moects_tensor_info *t, const char *name)
{
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, "%s", name ? name : t->name);
    snprintf(s->dtype, sizeof s->dtype, "%s", t->dtype);
    s->ndim = t->ndim;
    for (int d = 0; d < t->ndim; d++) s->dims[d] = t->dims[d];
    s->bytes = t->bytes;
    s->data = t->data;
}

static char *json_str_of(json_t *o)
{
    char *s = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(o);
    return s;
}

/* The metadata of an exported case (key, value pairs into kv; malloc'ed values in own[]). */
static size_t export_meta(const moects_case *c, uint64_t seed, const moects_inputs *in, const char *recipe,
                          const char *const *recipes, int nrec, const moects__st_tensor *st, size_t nst,
                          const char **kv, char **own)
{
    size_t n = 0, no = 0;
    char *cj = moects__case_json(c, in);
    json_t *cjo = cj ? json_loads(cj, 0, NULL) : NULL;
    own[no++] = cj;
    own[no++] = json_str_of(json_incref(json_object_get(cjo, "shape")));
    json_decref(cjo);
    json_t *dt = json_object();
    for (size_t i = 0; i < nst; i++) json_object_set_new(dt, st[i].name, json_string(st[i].dtype));
    own[no++] = json_str_of(dt);
    moects_tensor_info o;
    moects__output_describe(in, &o);
    json_t *sh = json_array();
    for (int d = 0; d < o.ndim; d++) json_array_append_new(sh, json_integer(o.dims[d]));
    own[no++] = json_str_of(json_pack("{ss so}", "dtype", o.dtype, "shape", sh));
    char rl[256] = "";
    for (int i = 0; i < nrec; i++) snprintf(rl + strlen(rl), sizeof rl - strlen(rl), "%s%s", i ? "," : "", recipes[i]);
    own[no++] = strdup(rl);
    char sd[32];
    snprintf(sd, sizeof sd, "%" PRIu64, seed);
    own[no++] = strdup(sd);
    const moects__op_def *opd = moects__op_of_inputs(in);
    own[no++] = opd->scalars ? json_str_of(opd->scalars(in)) : strdup("{}");
    const char *keys[] = {"moects.case", "moects.shape", "moects.dtypes", "moects.out", "moects.recipes", "moects.seed",
                          "moects.scalars"};
    for (size_t i = 0; i < no; i++) kv[2 * n] = keys[i], kv[2 * n + 1] = own[i] ? own[i] : "", n++;
    const char *op = moects__op_name(c->op);
    kv[2 * n] = "moects.case_id", kv[2 * n + 1] = c->id, n++;
    kv[2 * n] = "moects.op", kv[2 * n + 1] = op ? op : "?", n++;
    kv[2 * n] = "moects.recipe", kv[2 * n + 1] = recipe, n++;
    kv[2 * n] = "moects.version", kv[2 * n + 1] = MOECTS_VERSION, n++;
    return n;
}

int moects__export_case(const char *dir, const moects_case *c, uint64_t seed, const moects_inputs *in,
                        const char *const *recipes, const void *const *refs, int nrec, char *err, size_t errlen)
{
    moects__st_tensor st[MOECTS_INPUTS_MAX + 4];
    size_t nst = 0;
    for (int j = 0; j < in->nt; j++) {
        moects_tensor_info t;
        moects__tensor_describe(in, j, &t);
        if (t.ndim) st_of(&st[nst++], &t, NULL); /* ndim 0: a moe_gemm tensor the case has none of */
    }
    for (int r = 0; r < nrec && nst < sizeof st / sizeof *st; r++) {
        moects_tensor_info t;
        moects__output_describe(in, &t);
        t.data = refs[r];
        char name[80];
        snprintf(name, sizeof name, "ref.%s", recipes[r]);
        st_of(&st[nst++], &t, name);
    }
    const char *kv[2 * 16];
    char *own[8] = {0};
    size_t nmeta = export_meta(c, seed, in, recipes[0], recipes, nrec, st, nst, kv, own);
    char path[4400];
    moects__case_file(path, sizeof path, dir, c->id, ".safetensors");
    int rc = moects__st_write(path, st, nst, kv, nmeta, err, errlen);
    for (int i = 0; i < 8; i++) free(own[i]);
    return rc;
}

int moects__write_out(const char *path, const moects_inputs *in, const void *got, char *err, size_t errlen)
{
    moects_tensor_info t;
    moects__output_describe(in, &t);
    t.data = got;
    moects__st_tensor st;
    st_of(&st, &t, "out");
    return moects__st_write(path, &st, 1, NULL, 0, err, errlen);
}
