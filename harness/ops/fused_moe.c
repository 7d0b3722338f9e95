/* fused_moe.c: the fused_moe op (the whole routed MoE layer; DESIGN.md "The fused MoE layer") as the
 * op table's entry: the kernel shape of a case, its tensors, binding, the reference under a kernel's
 * layer recipe, geometry and costs. The inputs: harness/ops/fused_inputs.c. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "moects_gpuref.h"
#include "moects_harness.h"
#include "moects_layer.h"
#include "moects_op.h"
#include "ops_internal.h"

void moects__fused_case_shape(const moects_case *c, moects_fused_moe_shape *s)
{
    memset(s, 0, sizeof *s);
    if (c->op != MOECTS_OP_FUSED_MOE) return;
    *s = (moects_fused_moe_shape){.T = c->T, .k = c->k, .H = c->H, .inter = c->inter, .E = c->E,
                                  .E_global = c->E_global, .has_expert_map = c->has_map, .format = c->layer_format,
                                  .activation = c->activation, .act_limit = c->act_limit, .act_alpha = c->act_alpha,
                                  .has_bias = c->has_bias, .out_dtype = c->out_dtype ? c->out_dtype : MOECTS_BF16};
}

static int64_t n1_of(const moects_fused_moe_shape *s) { return s->activation == MOECTS_ACT_RELU2 ? s->inter : 2 * s->inter; }

/* ---- the case ---- */

static void fm_case_shape(const moects_case *c, moects__kshape *s) { moects__fused_case_shape(c, &s->fm); }

/* moects_fused_moe_shape's fields, enums by name, and the layout; T the built inputs' (a batch-invariance
 * batch holds more tokens than its case). */
static json_t *fm_shape_json(const moects_case *c, const moects_inputs *in)
{
    moects_fused_moe_shape s;
    moects__fused_case_shape(c, &s);
    if (in) s.T = in->fm.T;
    return json_pack("{sI sI sI sI sI sI sb ss ss sf sf sb ss si si ss}", "T", (json_int_t)s.T, "k", (json_int_t)s.k,
                     "H", (json_int_t)s.H, "I", (json_int_t)s.inter, "E", (json_int_t)s.E, "E_global",
                     (json_int_t)s.E_global, "has_expert_map", s.has_expert_map, "format",
                     moects__layer_format_name(s.format), "activation", moects__activation_name(s.activation),
                     "act_limit", (double)s.act_limit, "act_alpha", (double)s.act_alpha, "has_bias", s.has_bias,
                     "out_dtype", moects__abi_dtype(s.out_dtype), "ep_size", c->ep_size, "ep_rank", c->ep_rank,
                     "routing", moects__routing_name(c->routing));
}

/* The default layer recipe (vLLM's BF16 fused_experts); every kernel brings its own. */
static int fm_recipes(const moects_case *c, const char **names)
{
    (void)c;
    names[0] = MOECTS_LAYER_RECIPE_V1;
    return 1;
}

/* Products of both GEMMs over every slot, plus the weights generated. */
static double fm_cost(const moects_case *c)
{
    const double per = 3.0 * (double)c->inter * (double)c->H;
    return (double)c->T * (double)c->k * per + (double)c->E * per / 8;
}

static double fm_bytes(const moects_case *c)
{
    const moects_layer_format f = c->layer_format;
    const double w = f == MOECTS_LAYER_MXFP4 || f == MOECTS_LAYER_W4A8 ? 0.55 : f == MOECTS_LAYER_NVFP4 ? 0.57
                     : f == MOECTS_LAYER_FP8_128 ? 1.0 : 2;
    return (double)c->E * 3.0 * (double)c->inter * (double)c->H * w + (double)c->T * (double)c->H * 8;
}

static double fm_ref_flops(const moects_case *c) { return 4.0 * (double)c->T * (double)c->k * 3.0 * (double)c->inter * (double)c->H; }

static void fm_shape_key(const moects_case *c, char *dst, size_t cap)
{
    snprintf(dst, cap, "H=%" PRId64 " I=%" PRId64 " E=%" PRId64 " topk=%" PRId64 " %s", c->H, c->inter, c->E, c->k,
             moects__activation_name(c->activation));
}

static int fm_dims(const moects_case *c, const char *op, char out[3][96])
{
    snprintf(out[0], 96, "%s|H=%" PRId64, op, c->H);
    snprintf(out[1], 96, "%s|I=%" PRId64, op, c->inter);
    snprintf(out[2], 96, "%s|act=%s", op, moects__activation_name(c->activation));
    return 3;
}

/* ---- its inputs ---- */

static const void *fm_shape(const moects_inputs *in) { return &in->fm; }

static void fm_bind(const moects_inputs *in, void *const ptr[MOECTS_INPUTS_MAX], void *out, moects_op_args *args)
{
    const moects_fused_moe_shape *s = &in->fm;
    const int mx = s->format == MOECTS_LAYER_MXFP4 || s->format == MOECTS_LAYER_W4A8 || s->format == MOECTS_LAYER_NVFP4;
    const int f8 = s->format == MOECTS_LAYER_FP8_128, nv = s->format == MOECTS_LAYER_NVFP4;
    args->fm = (moects_fused_moe_args){
        .x = ptr[MOECTS_FM_X], .topk_ids = ptr[MOECTS_FM_IDS], .topk_weights = ptr[MOECTS_FM_W],
        .expert_map = s->has_expert_map ? ptr[MOECTS_FM_MAP] : NULL, .w13 = ptr[MOECTS_FM_W13],
        .w13_scale = mx ? ptr[MOECTS_FM_W13S] : NULL, .w2 = ptr[MOECTS_FM_W2], .w2_scale = mx ? ptr[MOECTS_FM_W2S] : NULL,
        .b13 = s->has_bias ? ptr[MOECTS_FM_B13] : NULL, .b2 = s->has_bias ? ptr[MOECTS_FM_B2] : NULL,
        .mid_global_scale = ptr[MOECTS_FM_MID_GS], .out = out,
        .w13_block_scale = f8 ? ptr[MOECTS_FM_W13S] : NULL, .w2_block_scale = f8 ? ptr[MOECTS_FM_W2S] : NULL,
        .w13_alpha = nv ? ptr[MOECTS_FM_W13A] : NULL, .w2_alpha = nv ? ptr[MOECTS_FM_W2A] : NULL};
}

static size_t fm_row_bytes(const moects_inputs *in, int i)
{
    const moects_fused_moe_shape *s = &in->fm;
    const int f8 = s->format == MOECTS_LAYER_FP8_128, nv = s->format == MOECTS_LAYER_NVFP4;
    const size_t el = s->format == MOECTS_LAYER_BF16 ? 4 : f8 ? 2 : 1; /* bytes of 2 values */
    const size_t g = nv ? 16 : 32;                                    /* an FP4 scale's elements */
    switch (i) {
    case -1: return (size_t)s->H * (s->out_dtype == MOECTS_F32 ? 4 : 2);
    case MOECTS_FM_X: return (size_t)s->H * 2;
    case MOECTS_FM_IDS: case MOECTS_FM_W: return (size_t)s->k * 4;
    case MOECTS_FM_W13: return (size_t)s->H * el / 2;
    case MOECTS_FM_W2: return (size_t)s->inter * el / 2;
    case MOECTS_FM_W13S: return f8 ? (size_t)s->H / 128 * 4 : (size_t)s->H / g; /* FP8: a block row */
    case MOECTS_FM_W2S: return f8 ? (size_t)s->inter / 128 * 4 : (size_t)s->inter / g;
    case MOECTS_FM_B13: return (size_t)n1_of(s) * 4;
    case MOECTS_FM_B2: return (size_t)s->H * 4;
    default: return 4;
    }
}

static const char *const FM_NAMES[MOECTS_FM_NT] = {"x", "topk_ids", "topk_weights", "expert_map", "w13", "w13_scale",
                                                   "w2", "w2_scale", "b13", "b2", "mid_global_scale",
                                                   "w13_alpha", "w2_alpha"};

static void dims3(moects_tensor_info *t, moects_dtype dt, int64_t a, int64_t b, int64_t c)
{
    moects__tinfo_2d(t, dt, a, b);
    t->ndim = 3, t->dims[2] = c;
}

/* Tensor j per moects_fused_moe_args; 1 when the format or shape has none (run() gets NULL). */
static int fm_describe(const moects_inputs *in, int j, moects_tensor_info *t)
{
    const moects_fused_moe_shape *s = &in->fm;
    const int64_t E = s->E, H = s->H, I = s->inter, N1 = n1_of(s);
    const int nv = s->format == MOECTS_LAYER_NVFP4, f8 = s->format == MOECTS_LAYER_FP8_128;
    const int mx = s->format == MOECTS_LAYER_MXFP4 || s->format == MOECTS_LAYER_W4A8 || nv; /* E2M1 codes */
    const int64_t g = nv ? 16 : 32;
    const moects_dtype w = mx || f8 ? MOECTS__DT_U8 : MOECTS_BF16;
    t->name = f8 && j == MOECTS_FM_W13S ? "w13_block_scale" : f8 && j == MOECTS_FM_W2S ? "w2_block_scale" : FM_NAMES[j];
    switch (j) {
    case MOECTS_FM_X: moects__tinfo_2d(t, MOECTS_BF16, s->T, H); return 0;
    case MOECTS_FM_IDS: moects__tinfo_2d(t, MOECTS_I32, s->T, s->k); return 0;
    case MOECTS_FM_W: moects__tinfo_2d(t, MOECTS_F32, s->T, s->k); return 0;
    case MOECTS_FM_MAP: return s->has_expert_map ? (moects__tinfo_2d(t, MOECTS_I32, s->E_global, 0), t->ndim = 1, 0) : 1;
    case MOECTS_FM_W13: dims3(t, w, E, N1, mx ? H / 2 : H); return 0;
    case MOECTS_FM_W13S:
        if (f8) return dims3(t, MOECTS_F32, E, N1 / 128, H / 128), 0; /* the block scales, FP32 */
        return mx ? (dims3(t, MOECTS__DT_U8, E, N1, H / g), 0) : 1;
    case MOECTS_FM_W2: dims3(t, w, E, H, mx ? I / 2 : I); return 0;
    case MOECTS_FM_W2S:
        if (f8) return dims3(t, MOECTS_F32, E, H / 128, I / 128), 0;
        return mx ? (dims3(t, MOECTS__DT_U8, E, H, I / g), 0) : 1;
    case MOECTS_FM_B13: return s->has_bias ? (moects__tinfo_2d(t, MOECTS_F32, E, N1), 0) : 1;
    case MOECTS_FM_B2: return s->has_bias ? (moects__tinfo_2d(t, MOECTS_F32, E, H), 0) : 1;
    case MOECTS_FM_W13A: case MOECTS_FM_W2A: return nv ? (moects__tinfo_2d(t, MOECTS_F32, E, 0), t->ndim = 1, 0) : 1;
    default: moects__tinfo_2d(t, MOECTS_F32, E, 0), t->ndim = 1; return 0;
    }
}

static void fm_describe_out(const moects_inputs *in, moects_tensor_info *t) { t->dims[0] = in->fm.T, t->dims[1] = in->fm.H; }

/* ---- reference, verdict, perf ---- */

/* The exact reference; of a recipe only a bounded claim can make (combine=f32_any, fn=ulpN), the one
 * admissible implementation that sums the slots in order with a correctly rounded exp (what
 * results.json's reference hash and --dump show; the verdict uses the enclosure). */
static int fm_reference(const moects_inputs *in, const moects_op_args *a, moects_recipe r)
{
    const moects_layer_recipe *lr = moects__layer_recipe_of(r);
    if (!lr) return -1;
    moects_layer_recipe point = *lr;
    if (point.combine == MOECTS_COMBINE_F32_ANY) point.combine = MOECTS_COMBINE_F32_SLOTS;
    point.fn = 0;
    return moects__ref_fused_moe(&in->fm, &a->fm, &point);
}

/* moects__op_def.reference_gpu: gpu/moects_gpuref.h, every exact layer recipe (the exact point of a
 * bounded one, as fm_reference); the enclosure of a bounded verdict stays on the CPU (bounds.c). */
static int fm_reference_gpu(const moects_inputs *in, const moects_op_args *a, moects_recipe r, int mode, char *why,
                            size_t whylen)
{
    return moects__gpuref_fused_moe((moects_gpuref_mode)mode, &in->fm, &a->fm, r, why, whylen);
}

static int fm_enclosure(const moects_inputs *in, const moects_op_args *a, moects_recipe r, const moects_acc_class *cls,
                        void *lo, void *hi, moects_layer_tightness *tight)
{
    const moects_layer_recipe *lr = moects__layer_recipe_of(r);
    if (!lr || cls->bf16_splits > 1) return -1;
    const moects_layer_claim cl = {cls->bits, cls->truncation, moects__layer_fn_ulp(lr)};
    return moects__ref_fused_moe_enclosure(&in->fm, &a->fm, lr, &cl, lo, hi, tight);
}

static void fm_geometry(const moects_inputs *in, moects_out_geom *g)
{
    g->axis[0] = "t";
    g->axis[1] = "d";
    g->row_word = "token";
    g->col_extent = "H";
    g->rows = in->fm.T;
    g->cols = in->fm.H;
}

/* A layer is judged under its layer recipe; an exact claim needs a recipe with an exact result on the
 * case, a bounded one (its enclosure) only one the shape can take. */
static const char *fm_claim_refused(const moects_case *c, moects_recipe recipe, int bounded)
{
    const moects_layer_recipe *r = moects__layer_recipe_of(recipe);
    if (!r) return "which fused_moe has not: a layer is judged under its layer recipe (" MOECTS_LAYER_RECIPE_V1 "(...))";
    moects_fused_moe_shape s;
    moects__fused_case_shape(c, &s);
    if (!bounded && r->fn) return "an exp, tanh or erf within ulps (fn) has no exact result: declare a bound";
    moects_layer_recipe shape_only = *r;
    if (bounded) shape_only.combine = MOECTS_COMBINE_F32_SLOTS;
    return moects__layer_recipe_inexact(&shape_only, &s);
}

/* Both GEMMs of every slot as one GEMM of the same flops: [T*k, 3I] x [3I, H]. */
static double fm_perf_bytes(const moects_inputs *in, long mnk[3])
{
    mnk[0] = (long)(in->fm.T * in->fm.k), mnk[1] = (long)(3 * in->fm.inter), mnk[2] = (long)in->fm.H;
    return -1;
}

const moects__op_def moects__op_fused_moe = {
    .op = MOECTS_OP_FUSED_MOE, .name = "fused_moe",
    .case_shape = fm_case_shape, .shape_json = fm_shape_json, .shape_parse = moects__fused_shape_parse,
    .recipes = fm_recipes,
    .secs_per_cost = 2e-9, /* a first guess: the CPU layer kernels' naive loops */
    .cost = fm_cost, .bytes = fm_bytes, .ref_flops = fm_ref_flops, .shape_key = fm_shape_key, .dims = fm_dims,
    .build = moects__fused_build, .shape = fm_shape, .bind = fm_bind, .row_bytes = fm_row_bytes,
    .describe = fm_describe, .describe_out = fm_describe_out, .scalars = NULL,
    .check = moects__fused_contract, .local_shape = moects__fused_local_shape, /* local cases: fused_local.c */
    .reference = fm_reference, .reference_pair = NULL, .reference_gpu = fm_reference_gpu, .bound = NULL, .reduction_k = NULL, .geometry = fm_geometry,
    .claim_refused = fm_claim_refused, .enclosure = fm_enclosure, .batch = moects__fused_batch,
    .stages = moects__fused_stages,
    .perf_unit = "TFLOP/s", .perf_key = "tflops", .perf_bytes = fm_perf_bytes,
};
