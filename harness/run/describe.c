/* describe.c: a case's tensors described the same way for every route (moects_tensor_info: ABI
 * names and order, dtypes, dims with row structure; DESIGN.md "Kernels from Python, and from any
 * language") and a case as JSON (its shape by the ABI's field names). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capi_internal.h"
#include "moects.h"
#include "moects_cases.h"
#include "moects_inputs.h"
#include "moects_ref.h"
#include "reports_internal.h"

static const char *dtype_name(moects_dtype d)
{
    switch ((int)d) {
    case MOECTS_BF16: return "BF16";
    case MOECTS_F32: return "F32";
    case MOECTS_I32: return "I32";
    case MOECTS_I64: return "I64";
    default: return "U8";
    }
}

/* moe_gemm's shape as moects_moe_gemm_shape's fields (ref/moects_types.h), enums by name; M -1 unbuilt. */
static json_t *moe_shape_json(const moects_case *c, const moects_inputs *in)
{
    moects_moe_gemm_shape s;
    moects_moe_case_shape(c, &s);
    return json_pack("{sI sI sI sI ss ss ss sI sI sb ss ss ss}", "E", (json_int_t)s.E, "M",
                     (json_int_t)(in ? in->mg.M : -1), "N", (json_int_t)s.N, "K", (json_int_t)s.K, "format",
                     moects_moe_format_name(s.format), "b_format", s.b_format == MOECTS_FP4_NVFP4 ? "nvfp4" : "mxfp4",
                     "rows", moects_row_layout_name(s.rows), "align", (json_int_t)s.align, "a_scale_block",
                     (json_int_t)s.a_scale_block, "a_scale_f32", s.a_scale_f32, "scale_layout",
                     s.scale_layout == MOECTS_SCALES_SWIZZLED_128X4 ? "swizzled_128x4" : "linear", "out_dtype",
                     dtype_name(s.out_dtype), "gemm", c->gemm);
}

char *moects__case_json(const moects_case *c, const moects_inputs *in)
{
    json_t *tiers = json_array();
    if (c->tiers & MOECTS_TIER_SMOKE) json_array_append_new(tiers, json_string("smoke"));
    if (c->tiers & MOECTS_TIER_FULL) json_array_append_new(tiers, json_string("full"));
    if (c->tiers & MOECTS_TIER_LARGE) json_array_append_new(tiers, json_string("large"));
    json_t *shape;
    if (c->op == MOECTS_OP_EP_GATHER)
        shape = json_pack("{sI sI sI sI sI ss ss sb si si ss}", "T", (json_int_t)c->T, "k", (json_int_t)c->k,
                          "M_sum", (json_int_t)(in ? in->eg.M_sum : -1), "H", (json_int_t)c->H, "E_global",
                          (json_int_t)c->E_global, "id_dtype", dtype_name(c->id_dtype), "out_dtype",
                          dtype_name(c->out_dtype), "has_expert_map", c->has_map, "ep_size", c->ep_size, "ep_rank",
                          c->ep_rank, "routing", moects_routing_name(c->routing));
    else if (c->op == MOECTS_OP_MOE_GEMM)
        shape = moe_shape_json(c, in);
    else
        shape = json_pack("{sI sI sI ss ss ss ss}", "M", (json_int_t)c->M, "N", (json_int_t)c->N, "K",
                          (json_int_t)c->K, "format", c->format == MOECTS_FP4_NVFP4 ? "nvfp4" : "mxfp4",
                          "scale_layout", c->scale_layout == MOECTS_SCALES_SWIZZLED_128X4 ? "swizzled_128x4" : "linear",
                          "out_dtype", dtype_name(c->out_dtype), "gemm", c->gemm);
    const char *op = moects__op_name(c->op);
    json_t *o = json_pack("{ss ss ss ss ss so ss so}", "id", c->id, "op", op ? op : "?", "model", c->model, "layout",
                          c->layout, "source", c->source, "tiers", tiers, "data", moects_data_name(c->data), "shape",
                          shape);
    char *s = o ? json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
    json_decref(o);
    return s;
}

static size_t dtype_size(moects_dtype d)
{
    return d == MOECTS_BF16 ? 2 : d == MOECTS_I64 ? 8 : d == MOECTS_F32 || d == MOECTS_I32 ? 4 : 1;
}

static void set2(moects_tensor_info *t, moects_dtype dt, int64_t a, int64_t b)
{
    t->dtype = dtype_name(dt);
    t->ndim = 2;
    t->dims[0] = a;
    t->dims[1] = b;
}

#define DT_U8 ((moects_dtype)0) /* bytes: codes, UE8M0 / E4M3 scales (dtype_name "U8") */

/* t as [rows, inner] of dt, or [E, max_m, inner] for masked rows (moects_moe_gemm_args's A side). */
static void moe_rows_dims(moects_tensor_info *t, const moects_moe_gemm_shape *s, int64_t rows, moects_dtype dt,
                          int64_t inner)
{
    set2(t, dt, rows, inner);
    if (s->rows == MOECTS_ROWS_MASKED) t->ndim = 3, t->dims[0] = s->E, t->dims[1] = s->M, t->dims[2] = inner;
}

/* moe_gemm tensor j's dtype and dims per moects_moe_gemm_args (ref/moects_types.h): 0, or 1 when the
 * format and row layout have no such tensor (the pointer run() gets is NULL). Swizzled scales: bytes. */
static int moe_describe(const moects_inputs *in, int j, moects_tensor_info *t)
{
    const moects_moe_gemm_shape *s = &in->mg;
    const int64_t E = s->E, N = s->N, K = s->K, g = moects_fp4_block(s->b_format), nkb = (K + g - 1) / g;
    const int fp4 = s->format == MOECTS_MOE_MXFP4 || s->format == MOECTS_MOE_NVFP4;
    const int w4a16 = s->format == MOECTS_MOE_W4A16, nv = s->format == MOECTS_MOE_NVFP4;
    switch (j) {
    case MOECTS_MG_A:
        moe_rows_dims(t, s, in->rows, w4a16 ? MOECTS_BF16 : DT_U8, fp4 ? (K + 1) / 2 : K);
        return 0;
    case MOECTS_MG_SA:
        if (w4a16) return 1;
        if (fp4 && s->rows != MOECTS_ROWS_OFFSETS && s->scale_layout != MOECTS_SCALES_LINEAR) return 0;
        moe_rows_dims(t, s, in->rows, s->a_scale_f32 ? MOECTS_F32 : DT_U8,
                      fp4 ? nkb : (K + s->a_scale_block - 1) / s->a_scale_block);
        return 0;
    case MOECTS_MG_B: set2(t, DT_U8, E, N), t->ndim = 3, t->dims[2] = (K + 1) / 2; return 0;
    case MOECTS_MG_SB:
        if (s->scale_layout == MOECTS_SCALES_LINEAR) set2(t, DT_U8, E, N), t->ndim = 3, t->dims[2] = nkb;
        else set2(t, DT_U8, E, (int64_t)in->t[j].bytes / E);
        return 0;
    case MOECTS_MG_ALPHA: set2(t, MOECTS_F32, E, 0), t->ndim = 1; return 0;
    case MOECTS_MG_GS_A: if (!nv) return 1; set2(t, MOECTS_F32, E, 0), t->ndim = 1; return 0;
    case MOECTS_MG_GS_B:
        if (!nv && !(w4a16 && s->b_format == MOECTS_FP4_NVFP4)) return 1;
        set2(t, MOECTS_F32, E, 0), t->ndim = 1;
        return 0;
    case MOECTS_MG_M_INDICES:
        if (s->rows != MOECTS_ROWS_CONTIGUOUS) return 1;
        set2(t, MOECTS_I32, s->M, 0), t->ndim = 1;
        return 0;
    case MOECTS_MG_MASKED_M: if (s->rows != MOECTS_ROWS_MASKED) return 1; set2(t, MOECTS_I32, E, 0), t->ndim = 1; return 0;
    default:
        if (s->rows != MOECTS_ROWS_OFFSETS) return 1;
        set2(t, MOECTS_I64, E + 1, 0), t->ndim = 1;
        return 0;
    }
}

static const char *const MOE_NAMES[MOECTS_MG_NT] = {"a", "sa", "b", "sb", "alpha", "gs_a", "gs_b",
                                                     "m_indices", "masked_m", "expert_offsets"};

void moects__tensor_describe(const moects_inputs *in, int j, moects_tensor_info *t)
{
    const moects_tensor *x = &in->t[j];
    memset(t, 0, sizeof *t);
    t->name = x->name;
    t->data = x->bytes ? x->host : NULL;
    t->bytes = x->bytes;
    if (in->op == MOECTS_OP_MOE_GEMM) {
        t->name = MOE_NAMES[j];
        if (moe_describe(in, j, t)) { /* absent: ndim 0, no data */
            t->dtype = "U8", t->ndim = 0, t->data = NULL, t->bytes = 0;
            return;
        }
    } else if (in->op == MOECTS_OP_EP_GATHER) {
        const moects_ep_gather_shape *s = &in->eg;
        switch (j) {
        case MOECTS_EG_X: set2(t, MOECTS_BF16, s->M_sum, s->H); break;
        case MOECTS_EG_IDS: set2(t, s->id_dtype, s->T, s->k); break;
        case MOECTS_EG_W: set2(t, MOECTS_F32, s->T, s->k); break;
        case MOECTS_EG_IDX: set2(t, MOECTS_I32, s->T, s->k); break;
        default: set2(t, MOECTS_I32, s->has_expert_map ? s->E_global : 0, 0), t->ndim = 1;
        }
    } else if (in->op == MOECTS_OP_FP4_GEMM) {
        const moects_fp4_gemm_shape *s = &in->fg;
        int64_t nkb = (s->K + moects_fp4_block(s->format) - 1) / moects_fp4_block(s->format);
        if (j == MOECTS_FG_A || j == MOECTS_FG_B) set2(t, 0, j == MOECTS_FG_A ? s->M : s->N, (s->K + 1) / 2);
        else if (s->scale_layout == MOECTS_SCALES_LINEAR) set2(t, 0, j == MOECTS_FG_SA ? s->M : s->N, nkb);
    }
    /* anything else, or a layout without row structure (swizzled scales): the bytes, 1-D */
    size_t n = t->ndim ? dtype_size(t->dtype[0] == 'B' ? MOECTS_BF16 : t->dtype[0] == 'F' ? MOECTS_F32
                                     : !strcmp(t->dtype, "I32") ? MOECTS_I32 : !strcmp(t->dtype, "I64") ? MOECTS_I64 : 0)
                       : 0;
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
    t->dtype = dtype_name(in->out_dtype);
    t->bytes = in->out_bytes;
    t->ndim = 2;
    if (in->op == MOECTS_OP_EP_GATHER) t->dims[0] = in->eg.T, t->dims[1] = in->eg.H;
    else if (in->op == MOECTS_OP_FP4_GEMM) t->dims[0] = in->fg.M, t->dims[1] = in->fg.N;
    else if (in->mg.rows == MOECTS_ROWS_MASKED) t->ndim = 3, t->dims[0] = in->mg.E, t->dims[1] = in->mg.M, t->dims[2] = in->mg.N;
    else t->dims[0] = in->mg.M, t->dims[1] = in->mg.N;
}
