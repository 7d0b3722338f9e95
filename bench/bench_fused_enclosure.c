/* bench_fused_enclosure.c: the fused MoE layer's enclosure reference (moects__ref_fused_moe_enclosure)
 * on a realistic random layer: its time beside the exact reference's, its tightness (median and max
 * width in output ULPs, elements wider than one ULP), and how often a value one output ULP of its
 * row's largest |value| away from the exact output, in the direction nearer an end, falls outside
 * (what catches, e.g., a combine summed in BF16 where FP32 was declared).
 *
 * Data: x ~ N(0, 1) in BF16; BF16 weights ~ N(0, 1/H) (W13) and N(0, 1/I) (W2); MXFP4 weights: random
 * codes, block scales 2^-3 / sqrt(K) rounded to a power of two; top-k distinct experts per token,
 * router weights positive and summing to 1.
 *
 *   bench_fused_enclosure [--T n] [--k n] [--H n] [--I n] [--E n] [--fmt bf16|mxfp4]
 *                         [--act silu|gelu_tanh|gelu_erf|relu2|silu_clamp|gpt_oss] [--recipe STR]
 *                         [--bits n] [--trunc 0|1] [--fn n] [--out bf16|f32] [--seed n]
 * Defaults: T 16, k 8, H 7168, I 256, E 256, bf16, silu, fused_moe.layer_v1, bits 24, RNE, fn 0. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "moects_layer.h"

typedef struct {
    int64_t T, k, H, I, E, bits, trunc, fn, seed;
    const char *fmt, *act, *recipe, *out;
} opts;

static double gauss(void)
{
    double u = ((double)next() + 1.0) * 0x1p-32, v = (double)next() * 0x1p-32;
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

static int parse(int argc, char **argv, opts *o)
{
    *o = (opts){16, 8, 7168, 256, 256, 24, 0, 0, 1, "bf16", "silu", MOECTS_LAYER_RECIPE_V1, "bf16"};
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];
        int64_t *num = !strcmp(k, "--T") ? &o->T : !strcmp(k, "--k") ? &o->k : !strcmp(k, "--H") ? &o->H
                     : !strcmp(k, "--I") ? &o->I : !strcmp(k, "--E") ? &o->E : !strcmp(k, "--bits") ? &o->bits
                     : !strcmp(k, "--trunc") ? &o->trunc : !strcmp(k, "--fn") ? &o->fn : !strcmp(k, "--seed") ? &o->seed
                     : NULL;
        if (num) *num = atoll(v);
        else if (!strcmp(k, "--fmt")) o->fmt = v;
        else if (!strcmp(k, "--act")) o->act = v;
        else if (!strcmp(k, "--recipe")) o->recipe = v;
        else if (!strcmp(k, "--out")) o->out = v;
        else return fprintf(stderr, "unknown option %s\n", k), -1;
    }
    return 0;
}

static moects_activation act_of(const char *s)
{
    static const char *names[] = {"silu", "gelu_tanh", "gelu_erf", "relu2", "silu_clamp", "gpt_oss"};
    for (int i = 0; i < 6; i++)
        if (!strcmp(s, names[i])) return (moects_activation)(MOECTS_ACT_SILU + i);
    return MOECTS_ACT_SILU;
}

/* A pool of N(0, 1) draws, picked from at random: fast enough for billions of weights. */
#define POOL 65536
static float pool[POOL];

static void pool_init(void)
{
    for (int i = 0; i < POOL; i++) pool[i] = (float)gauss();
}

/* n weights of rows of K: BF16 N(0, 1/K), or MXFP4 random codes with scales 2^round(log2(2^-3/sqrt K)). */
static void fill_weights(int mx, int64_t n, int64_t K, uint16_t *bf, uint8_t *codes, uint8_t *scales)
{
    if (!mx) {
        const float sd = (float)(1.0 / sqrt((double)K));
        for (int64_t i = 0; i < n; i++) bf[i] = moects__bf16_from_f32(pool[next() % POOL] * sd);
        return;
    }
    for (int64_t i = 0; i < n / 2; i++) codes[i] = (uint8_t)next();
    const int e = (int)lround(log2(0.125 / sqrt((double)K)));
    for (int64_t i = 0; i < n / 32; i++) scales[i] = (uint8_t)(127 + e);
}

typedef struct {
    moects_fused_moe_shape s;
    moects_fused_moe_args a;
    moects_layer_recipe r;
    void *out, *lo, *hi;
} lay;

/* The layer of o, or -1. */
static int build(const opts *o, lay *L)
{
    const int mx = !strcmp(o->fmt, "mxfp4");
    const moects_activation act = act_of(o->act);
    const int64_t T = o->T, k = o->k, H = o->H, I = o->I, E = o->E, N1 = act == MOECTS_ACT_RELU2 ? I : 2 * I;
    char err[200];
    if (moects__layer_recipe_parse(o->recipe, &L->r, err, sizeof err)) return fprintf(stderr, "%s\n", err), -1;
    L->s = (moects_fused_moe_shape){T, k, H, I, E, E, 0, mx ? MOECTS_LAYER_MXFP4 : MOECTS_LAYER_BF16, act,
                                    act == MOECTS_ACT_GPT_OSS ? 7.0f : 10.0f, 1.702f, 0,
                                    strcmp(o->out, "f32") ? MOECTS_BF16 : MOECTS_F32};
    uint16_t *x = malloc((size_t)(T * H) * 2);
    int32_t *ids = malloc((size_t)(T * k) * 4);
    float *w = malloc((size_t)(T * k) * 4);
    void *w13 = malloc((size_t)(E * N1 * H) * 2), *w2 = malloc((size_t)(E * H * I) * 2);
    uint8_t *s13 = malloc((size_t)(E * N1 * H / 32 + 1)), *s2 = malloc((size_t)(E * H * I / 32 + 1));
    L->out = malloc((size_t)(T * H) * 4), L->lo = malloc((size_t)(T * H) * 4), L->hi = malloc((size_t)(T * H) * 4);
    if (!x || !ids || !w || !w13 || !w2 || !s13 || !s2 || !L->out || !L->lo || !L->hi || k > E) return -1;
    rng ^= (uint64_t)o->seed * 0x9E3779B97F4A7C15ull;
    pool_init();
    for (int64_t i = 0; i < T * H; i++) x[i] = moects__bf16_from_f32((float)gauss());
    for (int64_t t = 0; t < T; t++) {
        double sum = 0.0;
        for (int64_t j = 0; j < k; j++) {
            int32_t e;
            int dup;
            do { /* distinct experts */
                e = (int32_t)(next() % (uint32_t)E), dup = 0;
                for (int64_t q = 0; q < j; q++) dup |= ids[t * k + q] == e;
            } while (dup);
            ids[t * k + j] = e;
            w[t * k + j] = (float)(0.2 + (double)next() * 0x1p-32);
            sum += w[t * k + j];
        }
        for (int64_t j = 0; j < k; j++) w[t * k + j] = (float)(w[t * k + j] / sum);
    }
    fill_weights(mx, E * N1 * H, H, w13, w13, s13);
    fill_weights(mx, E * H * I, I, w2, w2, s2);
    L->a = (moects_fused_moe_args){x, ids, w, NULL, w13, mx ? s13 : NULL, w2, mx ? s2 : NULL, NULL, NULL, NULL, L->out, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    return 0;
}

static double val(const lay *L, const void *p, int64_t i)
{
    return L->s.out_dtype == MOECTS_F32 ? ((const float *)p)[i] : moects__bf16_to_f32(((const uint16_t *)p)[i]);
}

static double ulp_at(double v, int bf16)
{
    const int e = v > 0.0 ? ilogb(v) : -126;
    return ldexp(1.0, (e > -126 ? e : -126) - (bf16 ? 7 : 23));
}

/* Elements of got outside [lo, hi] (NaN: outside unless expected); and, into *caught, the exact
 * output's elements moved one ULP of their row's max |value| towards the nearer end that leave. */
static int64_t outside(const lay *L, const void *got, int64_t *caught)
{
    const int64_t T = L->s.T, H = L->s.H;
    const int bf16 = L->s.out_dtype == MOECTS_BF16;
    int64_t n = 0, c = 0;
    for (int64_t t = 0; t < T; t++) {
        double rowmax = 0.0;
        for (int64_t h = 0; h < H; h++) rowmax = fmax(rowmax, fabs(val(L, L->out, t * H + h)));
        const double u = ulp_at(rowmax, bf16);
        for (int64_t i = t * H; i < (t + 1) * H; i++) {
            const double lo = val(L, L->lo, i), hi = val(L, L->hi, i), v = val(L, got, i), x = val(L, L->out, i);
            n += !(v >= lo && v <= hi) && !(v != v && lo != lo);
            const double p = hi - x < x - lo ? x + u : x - u;
            c += p < lo || p > hi;
        }
    }
    *caught = c;
    return n;
}

int main(int argc, char **argv)
{
    opts o;
    lay L;
    if (parse(argc, argv, &o) || build(&o, &L)) return 2;
    const moects_layer_claim cl = {(uint32_t)o.bits, (int)o.trunc, (uint32_t)o.fn};
    moects_layer_recipe ex = L.r; /* the exact reference of f32_any: the slot order */
    if (ex.combine == MOECTS_COMBINE_F32_ANY) ex.combine = MOECTS_COMBINE_F32_SLOTS;
    double t0 = now();
    if (moects__ref_fused_moe(&L.s, &L.a, &ex)) return fprintf(stderr, "exact reference refused\n"), 1;
    double t1 = now();
    moects_layer_tightness tg;
    if (moects__ref_fused_moe_enclosure(&L.s, &L.a, &L.r, &cl, L.lo, L.hi, &tg))
        return fprintf(stderr, "enclosure refused\n"), 1;
    double t2 = now();
    int64_t caught, chain_caught;
    const int64_t exact_out = outside(&L, L.out, &caught), n = tg.elements;
    char rs[300];
    moects__layer_recipe_format(&L.r, rs, sizeof rs);
    printf("%s %s act %s T %lld k %lld H %lld I %lld E %lld claim (%lld, %lld, %lld)\n", rs, o.fmt, o.act,
           (long long)o.T, (long long)o.k, (long long)o.H, (long long)o.I, (long long)o.E, (long long)o.bits,
           (long long)o.trunc, (long long)o.fn);
    printf("time: exact %.2f s, enclosure %.2f s\n", t1 - t0, t2 - t1);
    printf("width (output ULPs): median %g, max %g; wider than 1 ULP %.1f%%; below 1 ULP of the row max %.1f%%;"
           " NaN %lld, unbounded %lld\n",
           tg.median_ulps, tg.max_ulps, 100.0 * (double)tg.wide / (double)n, 100.0 * (double)tg.narrow_rowmax / (double)n,
           (long long)tg.nan, (long long)tg.unbounded);
    printf("exact reference outside: %lld; exact +- 1 ULP of the row max outside: %.1f%%\n", (long long)exact_out,
           100.0 * (double)caught / (double)n);
    if (L.r.combine == MOECTS_COMBINE_F32_SLOTS) { /* a kernel that sums the slots in BF16 instead */
        void *keep = L.out;
        L.out = L.a.out = malloc((size_t)(L.s.T * L.s.H) * 4);
        ex.combine = MOECTS_COMBINE_BF16_CHAIN;
        if (!L.out || moects__ref_fused_moe(&L.s, &L.a, &ex)) return 1;
        const int64_t chain_out = outside(&L, L.out, &chain_caught);
        printf("a BF16 running sum (combine=bf16_chain) outside: %.1f%% of elements\n", 100.0 * (double)chain_out / (double)n);
        free(L.out), L.out = keep;
    }
    return 0;
}
