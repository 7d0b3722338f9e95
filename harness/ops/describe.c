/* describe.c: a case's tensors described the same way for every route (moects_tensor_info: ABI names
 * and order, dtypes, dims with row structure; DESIGN.md "Kernels from Python, and from any language"),
 * a case as JSON (its shape by the ABI's field names, from the op's entry) and the shape's readers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capi_internal.h"
#include "moects_op.h"
#include "ops_internal.h"
#include "reports_internal.h"

const char *moects__abi_dtype(moects_dtype d)
{
    switch ((int)d) {
    case MOECTS_BF16: return "BF16";
    case MOECTS_F32: return "F32";
    case MOECTS_I32: return "I32";
    case MOECTS_I64: return "I64";
    default: return "U8";
    }
}

void moects__tinfo_2d(moects_tensor_info *t, moects_dtype dt, int64_t a, int64_t b)
{
    t->dtype = moects__abi_dtype(dt);
    t->ndim = 2;
    t->dims[0] = a;
    t->dims[1] = b;
}

const char *moects__fp4_format_name(moects_fp4_format f) { return f == MOECTS_FP4_NVFP4 ? "nvfp4" : "mxfp4"; }

const char *moects__scale_layout_name(moects_scale_layout l)
{
    return l == MOECTS_SCALES_SWIZZLED_128X4 ? "swizzled_128x4" : "linear";
}

char *moects__case_json(const moects_case *c, const moects_inputs *in)
{
    json_t *tiers = json_array();
    if (c->tiers & MOECTS_TIER_SMOKE) json_array_append_new(tiers, json_string("smoke"));
    if (c->tiers & MOECTS_TIER_FULL) json_array_append_new(tiers, json_string("full"));
    if (c->tiers & MOECTS_TIER_LARGE) json_array_append_new(tiers, json_string("large"));
    if (c->tiers & MOECTS_TIER_LOCAL) json_array_append_new(tiers, json_string("local"));
    const moects__op_def *op = moects__op(c->op);
    json_t *o = json_pack("{ss ss ss ss ss so ss so}", "id", c->id, "op", op ? op->name : "?", "model", c->model,
                          "layout", c->layout, "source", c->source, "tiers", tiers, "data", moects__data_name(c->data),
                          "shape", op ? op->shape_json(c, in) : json_object());
    char *s = o ? json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
    json_decref(o);
    return s;
}

static size_t dtype_size(const char *abi)
{
    return !strcmp(abi, "BF16") ? 2 : !strcmp(abi, "I64") ? 8 : !strcmp(abi, "F32") || !strcmp(abi, "I32") ? 4 : 1;
}

void moects__tensor_describe(const moects_inputs *in, int j, moects_tensor_info *t)
{
    const moects_tensor *x = &in->t[j];
    memset(t, 0, sizeof *t);
    t->name = x->name;
    t->data = x->bytes ? x->host : NULL;
    t->bytes = x->bytes;
    if (moects__op_of_inputs(in)->describe(in, j, t)) { /* absent: ndim 0, no data */
        t->dtype = "U8", t->ndim = 0, t->data = NULL, t->bytes = 0;
        return;
    }
    /* anything else, or a layout without row structure (swizzled scales): the bytes, 1-D */
    size_t n = t->ndim ? dtype_size(t->dtype) : 0;
    for (int k = 0; k < t->ndim; k++) n *= (size_t)t->dims[k];
    if (!t->ndim || n != x->bytes) {
        t->dtype = "U8";
        t->ndim = 1;
        t->dims[0] = (int64_t)x->bytes;
        t->dims[1] = 0;
    }
}

void moects__output_describe(const moects_inputs *in, moects_tensor_info *t)
{
    memset(t, 0, sizeof *t);
    t->name = "out";
    t->dtype = moects__abi_dtype(in->out_dtype);
    t->bytes = in->out_bytes;
    t->ndim = 2;
    moects__op_of_inputs(in)->describe_out(in, t);
}

/* ---- a case file's "shape" object ---- */

static int enum_of(const char *path, const char *field, const char *s, const char *const *names, const int *vals,
                   int n, int *out, char *err, size_t errlen)
{
    for (int i = 0; s && i < n; i++)
        if (!strcmp(s, names[i])) return *out = vals[i], 0;
    return snprintf(err, errlen, "%s: moects.case: %s: unknown \"%s\"", path, field, s ? s : "(missing)"), -1;
}

int moects__json_dtype(const char *path, const char *field, json_t *o, moects_dtype *d, char *err, size_t errlen)
{
    static const char *const n[] = {"BF16", "F32", "I32", "I64"};
    static const int v[] = {MOECTS_BF16, MOECTS_F32, MOECTS_I32, MOECTS_I64};
    int x;
    if (enum_of(path, field, json_string_value(json_object_get(o, field)), n, v, 4, &x, err, errlen)) return -1;
    *d = (moects_dtype)x;
    return 0;
}

int moects__json_int(const char *path, json_t *o, const char *field, int64_t *v, char *err, size_t errlen)
{
    json_t *x = json_object_get(o, field);
    if (!json_is_integer(x)) return snprintf(err, errlen, "%s: moects.case: shape.%s: not an integer", path, field), -1;
    *v = json_integer_value(x);
    return 0;
}

int moects__json_fp4(const char *path, json_t *sh, moects_fp4_format *f, moects_scale_layout *l, char *err,
                     size_t errlen)
{
    static const char *const fn[] = {"mxfp4", "nvfp4"}, *const ln[] = {"linear", "swizzled_128x4"};
    static const int fv[] = {MOECTS_FP4_MXFP4, MOECTS_FP4_NVFP4}, lv[] = {MOECTS_SCALES_LINEAR, MOECTS_SCALES_SWIZZLED_128X4};
    int fi, li;
    if (enum_of(path, "shape.format", json_string_value(json_object_get(sh, "format")), fn, fv, 2, &fi, err, errlen) ||
        enum_of(path, "shape.scale_layout", json_string_value(json_object_get(sh, "scale_layout")), ln, lv, 2, &li, err,
                errlen))
        return -1;
    *f = (moects_fp4_format)fi, *l = (moects_scale_layout)li;
    return 0;
}
