/* fused_moe_math.c: the arithmetic of the CPU fused MoE layer kernels' stages (fused_moe_internal.h):
 * the exactly rounded dot product of both GEMMs, the activations, the intermediate's quantization.
 * Every FP32 operation is written out as the layer recipe orders it (ref/moects_layer.h); this file
 * is ISO C (CMAKE_C_EXTENSIONS OFF), so GCC contracts no a * b + c into an fma. Own codecs: E4M3
 * rounding by its quantum (OCP FP8 E4M3FN: 3 fraction bits, normal from 2^-6, subnormal quantum 2^-9,
 * largest 448). */
#include <float.h>
#include <limits.h>
#include <math.h>

#include "fused_moe_internal.h"
#include "moects_crmath.h"
#include "moects_exact.h"

/* 1 with *f the FP32 rounding of the exact sum X when the double sum S of K exact products (A the
 * double sum of their magnitudes) decides it: |S - X| <= gamma(K) A < (K + 2) 2^-52 A =: err (any
 * summation order, Higham sec. 4.2), and S +- err lies strictly inside f's rounding interval (the
 * midpoints to its FP32 neighbours), so X rounds to f too. 0 for a zero, an FP32 overflow, a
 * non-finite term: those go to xsum (the sign of an exact zero, ties, Inf and NaN). */
static int decided(double S, double A, int64_t K, float *f)
{
    if (!isfinite(A) || !isfinite(S)) return 0;
    float r = (float)S;
    if (r == 0.0f || !(fabsf(r) < FLT_MAX)) return 0;
    double err = A * (double)(K + 2) * 0x1p-52;
    double lo = ((double)r + (double)nextafterf(r, -INFINITY)) * 0.5;
    double hi = ((double)r + (double)nextafterf(r, INFINITY)) * 0.5;
    if (!(S - lo > err && hi - S > err)) return 0;
    *f = r;
    return 1;
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("arch=x86-64-v3", "default")))
#endif
static void sums(const double *a, const double *b, int64_t K, double *S, double *A)
{
    /* four 4-wide running sums (GCC vector types: the adds' latency overlapped); any order is fine,
     * decided()'s bound holds for every one */
    typedef double v4d __attribute__((vector_size(32)));
    typedef long long v4i __attribute__((vector_size(32)));
    const v4i absmask = {0x7FFFFFFFFFFFFFFFll, 0x7FFFFFFFFFFFFFFFll, 0x7FFFFFFFFFFFFFFFll, 0x7FFFFFFFFFFFFFFFll};
    v4d s[4] = {{0}}, m[4] = {{0}};
    int64_t k = 0;
    for (; k + 16 <= K; k += 16)
        for (int i = 0; i < 4; i++) {
            v4d x, y;
            memcpy(&x, a + k + 4 * i, sizeof x);
            memcpy(&y, b + k + 4 * i, sizeof y);
            const v4d p = x * y;
            s[i] += p;
            m[i] += (v4d)((v4i)p & absmask);
        }
    const v4d st = (s[0] + s[1]) + (s[2] + s[3]), mt = (m[0] + m[1]) + (m[2] + m[3]);
    double ss = (st[0] + st[1]) + (st[2] + st[3]), mm = (mt[0] + mt[1]) + (mt[2] + mt[3]);
    for (; k < K; k++) {
        double p = a[k] * b[k];
        ss += p;
        mm += fabs(p);
    }
    *S = ss;
    *A = mm;
}

/* 1 with *f the IEEE value of a sum with a NaN or an infinite product (NaN when a product is NaN or
 * +Inf and -Inf meet, else that Inf); 0 when every product is finite. */
static int special(const double *a, const double *b, int64_t K, float *f)
{
    int pos = 0, neg = 0;
    for (int64_t k = 0; k < K; k++) {
        double p = a[k] * b[k];
        if (isnan(p)) return *f = NAN, 1;
        pos |= p == INFINITY, neg |= p == -INFINITY;
    }
    *f = pos && neg ? NAN : pos ? INFINITY : -INFINITY;
    return pos || neg;
}

float moects__fml_dot_f32(const double *a, const double *b, int64_t K)
{
    float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t k = 0;
    for (; k + 8 <= K; k += 8)
        for (int i = 0; i < 8; i++) s[i] += (float)(a[k + i] * b[k + i]);
    for (; k < K; k++) s[k % 8] += (float)(a[k] * b[k]);
    return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

float moects__fml_dot_bf16(const double *a, const double *b, int64_t K)
{
    float acc = 0.0f;
    for (int64_t k = 0; k < K; k++) acc = moects__fml_bf16(acc + (float)(a[k] * b[k]));
    return acc;
}

/* The FP32 rounding (RNE) of v 2^e, v a nonzero 128-bit integer: v cut to its top 52 bits plus one
 * sticky bit (the OR of the bits dropped), a 53-bit integer exact in double and as far below the
 * FP32 rounding position as the cut bits were, so the one rounding (double -> float) sees the same
 * round and sticky information as the exact value's (normal, subnormal or overflowing alike). */
static float f32_of_int(__int128 v, int e)
{
    const int neg = v < 0;
    const unsigned __int128 m = neg ? -(unsigned __int128)v : (unsigned __int128)v;
    int len = 0;
    while (len < 128 && (m >> len) != 0) len++;
    uint64_t t = (uint64_t)m; /* len <= 53: m itself */
    if (len > 53) {
        const int cut = len - 52;
        const int sticky = (m & (((unsigned __int128)1 << cut) - 1)) != 0;
        t = (uint64_t)(m >> cut) << 1 | (uint64_t)sticky;
        e += cut - 1;
    }
    const double d = ldexp((double)t, e); /* exact: t < 2^53, e well inside double's range */
    return (float)(neg ? -d : d);
}

/* 1 with *f the FP32 rounding of the exact sum of the K products, when they are finite and span at
 * most 126 - bitlen(K) binades (a sum of them in a signed 128-bit integer cannot overflow); else 0.
 * An exact zero is +0 (x + (-x) under RNE). The layer's products, at most 36 significant bits of
 * magnitudes in [2^-282, 2^266], mostly fit: a cheap exact path where the double sum cannot decide. */
static int int_sum(const double *a, const double *b, int64_t K, float *f)
{
    int lo = INT_MAX, hi = INT_MIN;
    for (int64_t k = 0; k < K; k++) {
        const double p = a[k] * b[k];
        uint64_t u;
        memcpy(&u, &p, sizeof u);
        const int ex = (int)(u >> 52 & 0x7FF);
        const uint64_t m = (u & 0xFFFFFFFFFFFFFull) | 1ull << 52;
        if (ex == 0x7FF || (ex == 0 && (u << 1))) return 0; /* not finite, or a subnormal product */
        if (ex == 0) continue;                               /* +-0 */
        lo = ex - 1075 + __builtin_ctzll(m) < lo ? ex - 1075 + __builtin_ctzll(m) : lo;
        hi = ex - 1075 + 53 > hi ? ex - 1075 + 53 : hi;
    }
    if (lo == INT_MAX) return *f = 0.0f, 1;
    if (hi - lo + 64 - __builtin_clzll((uint64_t)K) > 126) return 0;
    __int128 v = 0;
    for (int64_t k = 0; k < K; k++) {
        const double p = a[k] * b[k];
        uint64_t u;
        memcpy(&u, &p, sizeof u);
        const int ex = (int)(u >> 52 & 0x7FF);
        if (ex == 0) continue;
        const uint64_t sig = (u & 0xFFFFFFFFFFFFFull) | 1ull << 52;
        const int z = __builtin_ctzll(sig); /* p = (sig >> z) 2^(ex - 1075 + z), ex - 1075 + z >= lo */
        const __int128 m = (__int128)(sig >> z) << (ex - 1075 + z - lo);
        v += u >> 63 ? -m : m;
    }
    *f = v == 0 ? 0.0f : f32_of_int(v, lo);
    return 1;
}

float moects__fml_dot(const double *a, const double *b, int64_t K)
{
    double S, A;
    float f;
    sums(a, b, K, &S, &A);
    if (decided(S, A, K, &f)) return f;
    if (!isfinite(A) && special(a, b, K, &f)) return f; /* a NaN or infinite term: IEEE decides */
    if (int_sum(a, b, K, &f)) return f;
    moects_xsum x;
    moects__xsum_init(&x);
    for (int64_t k = 0; k < K; k++) moects__xsum_add_product(&x, a[k], b[k]);
    return moects__xsum_round_f32(&x);
}

/* g * sigmoid(g) as the recipe's sig orders it: g / (1 + exp(-g)) or g * (1 / (1 + exp(-g))). */
static float sig_prod(const moects_layer_recipe *r, float g, float e)
{
    return r->sig_rcp ? g * (1.0f / (1.0f + e)) : g / (1.0f + e);
}

/* exp, tanh, erf: correctly rounded, or libm's (within glibc's documented 1-2 ulps) under fn=ulpN. */
static float fn_exp(const moects_layer_recipe *r, float x) { return r->fn ? expf(x) : moects_cr_expf(x); }
static float fn_tanh(const moects_layer_recipe *r, float x) { return r->fn ? tanhf(x) : moects_cr_tanhf(x); }
static float fn_erf(const moects_layer_recipe *r, float x) { return r->fn ? erff(x) : moects_cr_erff(x); }

static float act_round(const moects_layer_recipe *r, float v) { return r->act_bf16 ? moects__fml_bf16(v) : v; }

/* The gate's activation of g (silu and silu_clamp, the clamp already applied; gelu_tanh; gelu_erf;
 * situ: (a * tanh(g * (1 / a))) * sigmoid(g), a = act_alpha), act rounding applied. */
static float gated(const moects_fused_moe_shape *s, const moects_layer_recipe *r, float g)
{
    const float BETA = (float)(M_SQRT2 * M_2_SQRTPI * 0.5), KAPPA = 0.044715f;
    switch (s->activation) {
    case MOECTS_ACT_GELU_TANH: {
        float cube = g * g * g;
        float inner = BETA * (g + KAPPA * cube);
        return act_round(r, (0.5f * g) * (1.0f + fn_tanh(r, inner)));
    }
    case MOECTS_ACT_GELU_ERF: return act_round(r, (g * 0.5f) * (1.0f + fn_erf(r, g * (float)M_SQRT1_2)));
    case MOECTS_ACT_SITU: {
        float inv_a = 1.0f / s->act_alpha, z = r->situ_div ? g / s->act_alpha : g * inv_a;
        return act_round(r, sig_prod(r, s->act_alpha * fn_tanh(r, z), fn_exp(r, -g)));
    }
    default: return act_round(r, sig_prod(r, g, fn_exp(r, -g))); /* SILU, SILU_CLAMP */
    }
}

float moects__fml_act(const moects_fused_moe_shape *s, const moects_layer_recipe *r, moects__fml_bug bug, float g,
                      float u)
{
    if (s->activation == MOECTS_ACT_RELU2) { /* act=bf16 rounds the square (ref/moects_layer.h) */
        float m = g > 0.0f ? g : (g == g ? 0.0f : g);
        return act_round(r, m * m);
    }
    const float L = s->act_limit;
    if (s->activation == MOECTS_ACT_SILU_CLAMP || s->activation == MOECTS_ACT_GPT_OSS) {
        g = g > L ? L : g;
        u = u > L ? L : (u < -L ? -L : u);
    }
    if (s->activation == MOECTS_ACT_SITU && L > 0.0f) { /* up squashed: L * tanh(u * (1 / L)) */
        float inv_l = 1.0f / L;
        u = L * fn_tanh(r, r->situ_div ? u / L : u * inv_l);
    }
    if (bug == MOECTS__FML_BUG_ACT_ON_UP) { /* each half clamped (squashed) as itself, then the roles swapped */
        float t = g;
        g = u, u = t;
    }
    if (s->activation == MOECTS_ACT_GPT_OSS) {
        float glu = act_round(r, sig_prod(r, g, fn_exp(r, -(g * s->act_alpha))));
        return bug == MOECTS__FML_BUG_GPT_OSS_NO_PLUS1 ? u * glu : (u + 1.0f) * glu;
    }
    return gated(s, r, g) * u;
}

/* x rounded to E4M3 (RNE, saturating to +-448, Inf included; NaN stays NaN), as its value. */
static double e4m3_value(float x)
{
    if (x != x) return x;
    double ax = fabs((double)x);
    if (ax >= 448.0) return copysign(448.0, (double)x);
    int ex;
    frexp(ax, &ex); /* ax in [2^(ex-1), 2^ex) */
    double q = ldexp(1.0, (ex - 1 < -6 ? -6 : ex - 1) - 3);
    return copysign(nearbyint(ax / q) * q, (double)x); /* ax / q and the product: exact */
}

/* The smallest power of two 2^e with 448 * 2^e >= amax (exact comparisons), e clamped to [-127, 127]. */
static float ue8m0_scale(float amax)
{
    int e = -127;
    if (isinf(amax)) e = 127;
    else if (amax > 0.0f) {
        frexp((double)amax / 448.0, &e);
        while (e > -127 && ldexp(448.0, e - 1) >= (double)amax) e--;
        while (e < 127 && ldexp(448.0, e) < (double)amax) e++;
    }
    return ldexpf(1.0f, e < -127 ? -127 : e);
}

/* One FP8 group of n: q [n] the E4M3 values, the scale returned. */
static float fp8_group(const float *a, int64_t n, int ue8m0, double *q)
{
    float amax = 0.0f;
    int nan = 0; /* a NaN in the group makes its scale, so all of it, NaN (ref/moects_layer.h) */
    for (int64_t i = 0; i < n; i++) {
        float v = fabsf(moects__fml_bf16(a[i]));
        nan |= v != v;
        if (v > amax) amax = v;
    }
    float sc = nan ? NAN : ue8m0 ? ue8m0_scale(amax) : fmaxf(amax, 1e-10f) / 448.0f;
    for (int64_t i = 0; i < n; i++) q[i] = e4m3_value(moects__fml_bf16(a[i]) / sc);
    return sc;
}

void moects__fml_quant(const float *a, int64_t n, int64_t G, int ue8m0, double *q, float *sc)
{
    for (int64_t g0 = 0; g0 < n; g0 += G) sc[g0 / G] = fp8_group(a + g0, G, ue8m0, q + g0);
}

double moects__fml_e4m3(uint8_t code)
{
    const int e = code >> 3 & 15, f = code & 7;
    if (e == 15 && f == 7) return NAN;
    const double v = e ? ldexp(8 + f, e - 10) : ldexp(f, -9); /* normal 1.f 2^(e-7), subnormal f 2^-9 */
    return code & 0x80 ? -v : v;
}

void moects__fml_mid(const moects_layer_recipe *r, const float *a, int64_t I, double *m)
{
    if (r->mid == MOECTS_MID_BF16 || r->mid == MOECTS_MID_F32) {
        for (int64_t i = 0; i < I; i++) m[i] = r->mid == MOECTS_MID_BF16 ? moects__fml_bf16(a[i]) : a[i];
        return;
    }
    int64_t G = r->mid == MOECTS_MID_FP8_TOKEN ? I : r->mid == MOECTS_MID_FP8_128 ? 128 : 32;
    int ue8m0 = r->scale_ue8m0 || r->mid == MOECTS_MID_MXFP8;
    for (int64_t g0 = 0; g0 < I; g0 += G) {
        int64_t n = I - g0 < G ? I - g0 : G;
        float sc = fp8_group(a + g0, n, ue8m0, m + g0);
        for (int64_t i = 0; i < n; i++) m[g0 + i] *= (double)sc;
    }
}

/* x rounded to E2M1 (RNE on the grid 0, 0.5, 1, 1.5, 2, 3, 4, 6, saturating at 6), as its value: below
 * 2 the quantum is 0.5, from 2 to 4 it is 1, from 4 it is 2. */
static double e2m1_value(float x)
{
    double ax = fabs((double)x);
    if (!(ax < 6.0)) return copysign(6.0, (double)x); /* Inf saturates; a NaN group never comes here */
    double q = ax < 2.0 ? 0.5 : ax < 4.0 ? 1.0 : 2.0;
    double v = nearbyint(ax / q) * q; /* RNE; 1.75 -> 2 and 3.5 -> 4 move to the next quantum's grid */
    return copysign(v, (double)x);
}

void moects__fml_nvfp4(const float *a, int64_t I, float gs, double *m)
{
    for (int64_t g0 = 0; g0 < I; g0 += 16) {
        int64_t n = I - g0 < 16 ? I - g0 : 16;
        float amax = 0.0f;
        int nan = 0;
        for (int64_t i = 0; i < n; i++) {
            float v = fabsf(moects__fml_bf16(a[g0 + i]));
            nan |= v != v;
            if (v > amax) amax = v;
        }
        float sixth = 1.0f / 6.0f, inv_gs = 1.0f / gs;
        float sf = gs * (amax * sixth);
        float b = (float)e4m3_value(sf);
        float o = b != 0.0f ? 1.0f / (b * inv_gs) : 0.0f;
        for (int64_t i = 0; i < n; i++)
            m[g0 + i] = nan ? NAN : e2m1_value(moects__fml_bf16(a[g0 + i]) * o) * (double)b;
    }
}
