/* fused_local.c: fused_moe local cases (issue 32, `moects case add`, harness/run/localcase.c): the
 * case's shape from a case file's "shape" object (the reverse of fused_moe.c's shape JSON), the dims
 * of the captured tensors checked rule by rule before their bytes replace the generated ones, and the
 * op's contract on their values (ids in range, expert_map entries valid, no NaN scale unless the
 * case's data is nan). The table entries are in fused_moe.c. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "moects_harness.h"
#include "moects_op.h"
#include "ops_internal.h"

/* An activation by its registry name (moects__activation_name): 0, or -1 unknown. */
static int activation_parse(const char *s, moects_activation *a)
{
    for (int v = MOECTS_ACT_SILU; s && v <= MOECTS_ACT_SITU; v++)
        if (!strcmp(s, moects__activation_name((moects_activation)v))) return *a = (moects_activation)v, 0;
    return -1;
}

/* A number field of the shape (act_limit, act_alpha) as FP32; a field left out is 0. */
static int json_f32(const char *path, json_t *sh, const char *field, float *v, char *err, size_t errlen)
{
    json_t *x = json_object_get(sh, field);
    if (x && !json_is_number(x)) return snprintf(err, errlen, "%s: moects.case: shape.%s: not a number", path, field), -1;
    *v = x ? (float)json_number_value(x) : 0.0f;
    return 0;
}

/* The names of a case file's shape (fm_shape_json's fields): T, k, H, I, E, E_global, format,
 * activation, has_expert_map, has_bias, ep_size, ep_rank, out_dtype, routing ("uniform" when left
 * out), act_limit and act_alpha (0 when left out: the activation has none). The build then refuses a
 * shape the layer cannot have (fused_inputs.c fm_check: E against the EP split, FP8 and MXFP4 widths). */
int moects__fused_shape_parse(const char *path, json_t *sh, moects_case *c, char *err, size_t errlen)
{
    int64_t ep_size = 0, ep_rank = 0;
    const char *f = json_string_value(json_object_get(sh, "format")), *a = json_string_value(json_object_get(sh, "activation"));
    const char *rt = json_string_value(json_object_get(sh, "routing"));
    if (moects__json_int(path, sh, "T", &c->T, err, errlen) || moects__json_int(path, sh, "k", &c->k, err, errlen) ||
        moects__json_int(path, sh, "H", &c->H, err, errlen) || moects__json_int(path, sh, "I", &c->inter, err, errlen) ||
        moects__json_int(path, sh, "E", &c->E, err, errlen) ||
        moects__json_int(path, sh, "E_global", &c->E_global, err, errlen) ||
        moects__json_int(path, sh, "ep_size", &ep_size, err, errlen) ||
        moects__json_int(path, sh, "ep_rank", &ep_rank, err, errlen) ||
        moects__json_dtype(path, "out_dtype", sh, &c->out_dtype, err, errlen) ||
        json_f32(path, sh, "act_limit", &c->act_limit, err, errlen) ||
        json_f32(path, sh, "act_alpha", &c->act_alpha, err, errlen))
        return -1;
    if (!f || moects__layer_format_parse(f, &c->layer_format) || c->layer_format > MOECTS_LAYER_FP8_128)
        return snprintf(err, errlen, "%s: moects.case: shape.format: not bf16, mxfp4 or fp8_128 (local nvfp4 and w4a8 "
                        "cases: not yet)", path), -1;
    if (activation_parse(a, &c->activation))
        return snprintf(err, errlen, "%s: moects.case: shape.activation: not silu, gelu_tanh, gelu_erf, relu2, "
                        "silu_clamp, gpt_oss or situ", path), -1;
    if (rt ? moects__routing_parse(rt, &c->routing) != 0 : (c->routing = MOECTS_ROUTE_UNIFORM, 0))
        return snprintf(err, errlen, "%s: moects.case: shape.routing: unknown \"%s\"", path, rt), -1;
    if (ep_size < 1 || ep_size > 1 << 20 || ep_rank < 0 || ep_rank >= ep_size)
        return snprintf(err, errlen, "%s: moects.case: shape.ep_rank: rank %lld of %lld", path, (long long)ep_rank,
                        (long long)ep_size), -1;
    c->ep_size = (int)ep_size, c->ep_rank = (int)ep_rank;
    c->has_map = json_is_true(json_object_get(sh, "has_expert_map"));
    c->has_bias = json_is_true(json_object_get(sh, "has_bias"));
    return 0;
}

/* The captured tensor called name, or NULL. */
static const moects__src_tensor *src_of(const moects__src_tensor *src, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(src[i].name, name)) return &src[i];
    return NULL;
}

/* A local case's W13 and W2 against the layer's widths, named by the rule (the dims the generic
 * shape check then compares name only the shape): W13 holds N1 = 2 I rows per expert (gate and up;
 * I for relu2) of H columns, W2 H rows of I columns (MXFP4: two codes a byte). Nothing is re-sized:
 * every dim of a fused_moe case is the case's. -1 with "TENSOR: the rule broken" in err. */
int moects__fused_local_shape(const moects_case *c, moects_inputs *in, const moects__src_tensor *src, size_t n,
                              char *err, size_t errlen)
{
    const moects_fused_moe_shape *s = &in->fm;
    const int gated = s->activation != MOECTS_ACT_RELU2, per = s->format == MOECTS_LAYER_MXFP4 ? 2 : 1;
    const int64_t N1 = gated ? 2 * s->inter : s->inter;
    const moects__src_tensor *w13 = src_of(src, n, "w13"), *w2 = src_of(src, n, "w2");
    (void)c;
    if (w13 && w13->ndim == 3 && w13->dims[1] != N1)
        return snprintf(err, errlen, "w13: %" PRId64 " rows per expert, the layer wants %s = %" PRId64 " (I %" PRId64
                        " from the case; %s)", w13->dims[1], gated ? "2*I" : "I", N1, s->inter,
                        gated ? "gate and up rows of each expert" : "relu2 has no gate"), -1;
    if (w13 && w13->ndim == 3 && w13->dims[2] * per != s->H)
        return snprintf(err, errlen, "w13: %" PRId64 " columns hold %" PRId64 " values, the layer's input width H is %"
                        PRId64, w13->dims[2], w13->dims[2] * per, s->H), -1;
    if (w2 && w2->ndim == 3 && (w2->dims[1] != s->H || w2->dims[2] * per != s->inter))
        return snprintf(err, errlen, "w2: [%" PRId64 ", %" PRId64 ", %" PRId64 "] holds %" PRId64 " x %" PRId64
                        " values per expert, the layer wants H x I = %" PRId64 " x %" PRId64, w2->dims[0], w2->dims[1],
                        w2->dims[2], w2->dims[1], w2->dims[2] * per, s->H, s->inter), -1;
    return 0;
}

/* topk_ids in [0, E_global) (each an expert of the model); expert_map entries in [-1, E) (a local
 * expert, or -1 for another rank's). */
static int ids_ok(const moects_inputs *in, const char *where, char *err, size_t errlen)
{
    const moects_fused_moe_shape *s = &in->fm;
    const int32_t *ids = in->t[MOECTS_FM_IDS].host, *map = in->t[MOECTS_FM_MAP].host;
    for (int64_t i = 0; i < s->T * s->k; i++)
        if (ids[i] < 0 || ids[i] >= s->E_global)
            return snprintf(err, errlen, "%s: topk_ids[%" PRId64 ", %" PRId64 "] = %d: not in [0, E_global %" PRId64 ")",
                            where, i / s->k, i % s->k, ids[i], s->E_global), -1;
    for (int64_t g = 0; s->has_expert_map && map && g < s->E_global; g++)
        if (map[g] < -1 || map[g] >= s->E)
            return snprintf(err, errlen, "%s: expert_map[%" PRId64 "] = %d: not in [-1, E %" PRId64 ") (the rank's local "
                            "experts)", where, g, map[g], s->E), -1;
    return 0;
}

/* The first scale of tensor j that is NaN (MXFP4 UE8M0 0xFF, FP8 block scales FP32 NaN), or -1. */
static int64_t nan_scale(const moects_inputs *in, int j, uint32_t *bits)
{
    const moects_tensor *t = &in->t[j];
    const int f8 = in->fm.format == MOECTS_LAYER_FP8_128;
    for (size_t i = 0; t->host && i < t->bytes / (f8 ? 4 : 1); i++) {
        uint32_t u = ((const uint8_t *)t->host)[i];
        if (f8) memcpy(&u, (const uint8_t *)t->host + 4 * i, 4);
        if (f8 ? isnan(moects__f32_bits(u)) : u == 0xff) return *bits = u, (int64_t)i;
    }
    return -1;
}

/* The contract on a local case's values (moects__op_def.check): ids_ok, and unless the case's data is
 * nan no NaN weight scale (MXFP4's UE8M0 0xFF, a NaN FP8 block scale) and a finite positive
 * intermediate global scale (448 * 6 / amax). */
int moects__fused_contract(const moects_case *c, const moects_inputs *in, const char *where, char *err, size_t errlen)
{
    if (ids_ok(in, where, err, errlen)) return -1;
    if (c->data == MOECTS_DATA_NAN) return 0;
    for (int j = MOECTS_FM_W13S; j <= MOECTS_FM_W2S; j += MOECTS_FM_W2S - MOECTS_FM_W13S) {
        uint32_t bits = 0;
        const int64_t i = nan_scale(in, j, &bits);
        if (i >= 0)
            return snprintf(err, errlen, "%s: %s[%" PRId64 "] = 0x%0*x: a NaN scale (the case's data is %s, not nan)", where,
                            in->t[j].name, i, in->fm.format == MOECTS_LAYER_FP8_128 ? 8 : 2, bits,
                            moects__data_name(c->data)), -1;
    }
    const float *gs = in->t[MOECTS_FM_MID_GS].host;
    for (int64_t e = 0; gs && e < in->fm.E; e++)
        if (!isfinite(gs[e]) || !(gs[e] > 0))
            return snprintf(err, errlen, "%s: mid_global_scale[%" PRId64 "] = %g: not a finite positive global scale "
                            "(448 * 6 / amax)", where, e, (double)gs[e]), -1;
    return 0;
}
