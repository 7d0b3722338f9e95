/* test_fused_layer.h: a small fused MoE layer for the reference tests (test_ref_fused_moe.c,
 * test_ref_fused_enclosure.c): shape, args, recipe and zeroed buffers, set element by element with
 * BF16 values that must be exact, or drawn at random (test_rng.h). Criterion asserts inside. */
#ifndef TEST_FUSED_LAYER_H
#define TEST_FUSED_LAYER_H
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "moects_layer.h"
#include "test_rng.h"

typedef struct {
    moects_fused_moe_shape s;
    moects_fused_moe_args a;
    moects_layer_recipe r;
    int64_t N1;
    uint16_t *x;
    int32_t *ids, *map;
    float *w, *b13, *b2, gs[64];
    uint8_t *w13, *w2, *w13s, *w2s; /* BF16 (as bytes) or MXFP4 codes; UE8M0 scales */
    void *out, *out2, *lo, *hi, *sim; /* [T, H] FP32-sized: outputs, enclosure ends, a simulated run */
} layer;

/* T tokens of top-k over E local experts (no map, no bias, FP32 output, the default layer recipe). */
static inline void lay_init(layer *L, int64_t T, int64_t k, int64_t H, int64_t I, int64_t E, moects_activation act,
                            moects_layer_format f)
{
    memset(L, 0, sizeof *L);
    L->s = (moects_fused_moe_shape){T, k, H, I, E, E, 0, f, act, 0.0f, 0.0f, 0, MOECTS_F32};
    char err[160];
    cr_assert_eq(moects__layer_recipe_parse(MOECTS_LAYER_RECIPE_V1, &L->r, err, sizeof err), 0);
    L->N1 = act == MOECTS_ACT_RELU2 ? I : 2 * I;
    const int64_t n13 = E * L->N1 * H, n2 = E * H * I;
    L->x = calloc((size_t)(T * H + 1), 2);
    L->ids = calloc((size_t)(T * k + 1), 4);
    L->w = calloc((size_t)(T * k + 1), 4);
    L->map = calloc(300, 4);
    L->w13 = calloc((size_t)(f == MOECTS_LAYER_BF16 ? n13 * 2 : n13 / 2) + 1, 1);
    L->w2 = calloc((size_t)(f == MOECTS_LAYER_BF16 ? n2 * 2 : n2 / 2) + 1, 1);
    L->w13s = calloc((size_t)(n13 / 32 + 1), 1);
    L->w2s = calloc((size_t)(n2 / 32 + 1), 1);
    L->b13 = calloc((size_t)(E * L->N1 + 1), 4);
    L->b2 = calloc((size_t)(E * H + 1), 4);
    void **outs[] = {&L->out, &L->out2, &L->lo, &L->hi, &L->sim};
    for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++) *outs[i] = calloc((size_t)(T * H + 1), 4);
    L->a = (moects_fused_moe_args){L->x, L->ids, L->w, NULL, L->w13, f == MOECTS_LAYER_MXFP4 ? L->w13s : NULL,
                                   L->w2, f == MOECTS_LAYER_MXFP4 ? L->w2s : NULL, NULL, NULL, L->gs, L->out, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
}

static inline void lay_free(layer *L)
{
    free(L->x), free(L->ids), free(L->w), free(L->map), free(L->w13), free(L->w2), free(L->w13s);
    free(L->w2s), free(L->b13), free(L->b2), free(L->out), free(L->out2), free(L->lo), free(L->hi), free(L->sim);
}

static inline void use_map(layer *L, int64_t E_global)
{
    L->s.has_expert_map = 1;
    L->s.E_global = E_global;
    L->a.expert_map = L->map;
}

static inline void use_bias(layer *L)
{
    L->s.has_bias = 1;
    L->a.b13 = L->b13;
    L->a.b2 = L->b2;
}

static inline void set_recipe(layer *L, const char *str)
{
    char err[160];
    cr_assert_eq(moects__layer_recipe_parse(str, &L->r, err, sizeof err), 0, "%s: %s", str, err);
}

/* BF16 bits of v, which must be exact in BF16. */
static inline uint16_t bfx(float v)
{
    uint16_t b = moects__bf16_from_f32(v);
    cr_assert(moects__bf16_to_f32(b) == v || v != v, "%a is not a BF16 value", (double)v);
    return b;
}

static inline void set_x(layer *L, int64_t t, int64_t h, float v) { L->x[t * L->s.H + h] = bfx(v); }
static inline void set_w13(layer *L, int64_t e, int64_t n, int64_t k, float v)
{
    ((uint16_t *)L->w13)[(e * L->N1 + n) * L->s.H + k] = bfx(v);
}
static inline void set_w2(layer *L, int64_t e, int64_t h, int64_t i, float v)
{
    ((uint16_t *)L->w2)[(e * L->s.H + h) * L->s.inter + i] = bfx(v);
}

/* A random BF16 value, exponent in [lo, hi], random sign; 1 in 16 a zero. */
static inline uint16_t r_bf16(int lo, int hi)
{
    const uint16_t sgn = (uint16_t)((rnd() & 1) << 15);
    if (rnd() % 16 == 0) return sgn;
    return (uint16_t)(sgn | (uint16_t)(lo + 127 + (int)(rnd() % (uint32_t)(hi - lo + 1))) << 7 | (rnd() & 0x7F));
}

static inline int64_t pick(int64_t given, int64_t random) { return given ? given : random; }
#endif
