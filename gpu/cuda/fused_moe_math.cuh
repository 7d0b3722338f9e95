/* fused_moe_math.cuh: the device arithmetic of the CUDA fused MoE layer kernels (fused_moe.cu): an
 * exact dot product of BF16 x {BF16, MXFP4} operands rounded once to FP32 (a fixed-point accumulator
 * wide enough for every product, moe_gemm.exact_v1's definition), correctly rounded binary32 exp,
 * tanh and erf (ref/crmath.c's method on the device's double functions), the activations in the
 * layer recipe's FP32 order (ref/moects_layer.h, mirroring gpu/cpu/fused_moe_math.c), BF16 and E4M3
 * rounding. Every FP32 operation is an explicit __f*_rn intrinsic or fmaf, so that nvcc's -fmad=true
 * contracts nothing the recipe rounds twice. Internal to gpu/cuda/, no ABI. */
#ifndef MOECTS_FUSED_MOE_MATH_CUH
#define MOECTS_FUSED_MOE_MATH_CUH
#ifndef FMCU_HOST_EMU /* tests/fixtures/fused_moe_cuda_emu.cpp: the host shims instead */
#include <cuda_runtime.h>
#endif
#include <stdint.h>

#include "moects_types.h"

namespace fmcu {

/* ---- rounding ---- */

/* FP32 -> BF16 with RNE as a float (NaN stays a quiet NaN, overflow to Inf): gpu/cpu's moects__fml_bf16. */
__device__ __forceinline__ float bf16r(float x)
{
    uint32_t u = __float_as_uint(x);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) u |= 0x00400000u;
    else u += 0x7FFFu + ((u >> 16) & 1u);
    return __uint_as_float(u & 0xFFFF0000u);
}
__device__ __forceinline__ float bf16_val(uint16_t b) { return __uint_as_float((uint32_t)b << 16); }
__device__ __forceinline__ uint16_t bf16_bits(float x) { return (uint16_t)(__float_as_uint(bf16r(x)) >> 16); }

/* x rounded to OCP E4M3FN (RNE, saturating to +-448, Inf included; NaN stays NaN), as its value:
 * quantum 2^(max(e, -6) - 3) for x in [2^e, 2^(e+1)); x / q and the product are exact. */
__device__ __forceinline__ float e4m3_rne(float x)
{
    if (x != x) return x;
    const float ax = fabsf(x);
    if (ax >= 448.0f) return copysignf(448.0f, x);
    int ex;
    frexpf(ax, &ex); /* ax in [2^(ex-1), 2^ex); ax = 0: ex = 0 */
    const float q = ldexpf(1.0f, (ex - 1 < -6 ? -6 : ex - 1) - 3);
    return copysignf(__fmul_rn(rintf(__fdiv_rn(ax, q)), q), x);
}

/* ---- operands as integer x 2^q ---- */

/* A BF16 or MXFP4 element as (-1)^neg m 2^q, m an integer below 2^8; cls 0 zero, 1 finite, 2 Inf, 3 NaN. */
struct Opd {
    uint32_t m;
    int q, neg, cls;
};
/* BF16 bits: normal 1.f 2^(E-127) = (128 + f) 2^(E-134), subnormal f 2^-133. */
__device__ __forceinline__ Opd dec_bf16(uint16_t b)
{
    const int E = (b >> 7) & 0xFF, f = b & 0x7F, neg = b >> 15;
    if (E == 0xFF) return Opd{0, 0, neg, f ? 3 : 2};
    if (E == 0 && f == 0) return Opd{0, 0, neg, 0};
    return Opd{(uint32_t)(E ? 0x80 | f : f), (E ? E : 1) - 134, neg, 1};
}
/* MXFP4: E2M1 code c (magnitudes 0, .5, 1, 1.5, 2, 3, 4, 6 = c2 / 2) times UE8M0 s (2^(s-127), 0xFF
 * NaN): c2 2^(s-128). */
__device__ __forceinline__ Opd dec_mx(uint32_t c, uint32_t s)
{
    const uint32_t c2 = (0xC8643210u >> (4 * (c & 7u))) & 15u; /* 0 1 2 3 4 6 8 12 */
    if (s == 0xFFu) return Opd{0, 0, 0, 3};
    return Opd{c2, (int)s - 128, (int)(c >> 3) & 1, c2 ? 1 : 0};
}
/* Element k of weight row `row` (of K columns): BF16 [rows][K] or MXFP4 codes [rows][K/2] (even k in
 * the low nibble) with UE8M0 scales [rows][K/32]. */
__device__ __forceinline__ Opd dec_w(int mx, const void *w, const uint8_t *ws, int64_t row, int64_t K, int64_t k)
{
    if (!mx) return dec_bf16(__ldg(static_cast<const uint16_t *>(w) + row * K + k));
    const uint32_t byte = __ldg(static_cast<const uint8_t *>(w) + row * (K / 2) + k / 2);
    return dec_mx(k & 1 ? byte >> 4 : byte & 15u, __ldg(ws + row * (K / 32) + k / 32));
}
/* The same element as an exact double (NaN for a NaN scale): the bounded kernel's operand. */
__device__ __forceinline__ double w_double(int mx, const void *w, const uint8_t *ws, int64_t row, int64_t K, int64_t k)
{
    const Opd o = dec_w(mx, w, ws, row, K, k);
    if (o.cls == 3) return __longlong_as_double(0x7FF8000000000000LL);
    if (o.cls == 2) return o.neg ? -INFINITY : INFINITY;
    const double v = (double)o.m * __longlong_as_double((long long)(o.q + 1023) << 52); /* exact: q in [-134, 126] */
    return o.neg ? -v : v;
}

/* ---- the exact dot product ---- */

/* A fixed-point sum of products in units of 2^-288: BF16 x BF16 products reach 2^-266, BF16 x MXFP4
 * 2^-261; the GPU reference's GEMM2 (gpu/gpuref/gpuref_layer.cuh) multiplies an FP32 or FP8-times-scale
 * intermediate (down to 2^-149) by a BF16 weight (2^-133): 2^-282. The largest product is below 2^264
 * (448 x 2^127, an Inf group's FP8 value, times a BF16 below 2^128). NDIG signed 64-bit words of
 * 32-bit digits, so a term touches two words (acc_add) or three (acc_add_wide) and carries wait until
 * the end (each word absorbs 2^30 terms below 2^32). Digit 19's top: 2^(640 - 288) > 2^20 x 2^264, any
 * K up to 2^20. Inf and NaN terms in flags, as IEEE adds them (NaN: a NaN term, Inf x 0, +Inf meeting
 * -Inf). */
#define FMCU_NDIG 20
#define FMCU_LSB 288
struct Acc {
    long long d[FMCU_NDIG];
    int nan, pinf, ninf;
};
__device__ __forceinline__ void acc_init(Acc &a)
{
    for (int i = 0; i < FMCU_NDIG; i++) a.d[i] = 0;
    a.nan = a.pinf = a.ninf = 0;
}
__device__ __forceinline__ void acc_add(Acc &a, Opd x, Opd w)
{
    if (x.cls == 3 || w.cls == 3) { a.nan = 1; return; }
    if (x.cls == 2 || w.cls == 2) {
        if (x.cls == 0 || w.cls == 0) a.nan = 1;
        else if (x.neg ^ w.neg) a.ninf = 1;
        else a.pinf = 1;
        return;
    }
    if (x.cls == 0 || w.cls == 0) return;
    const int pos = x.q + w.q + FMCU_LSB; /* 0 .. 512 */
    const unsigned long long sh = (unsigned long long)(x.m * w.m) << (pos & 31); /* < 2^47 */
    const long long lo = (long long)(sh & 0xFFFFFFFFull), hi = (long long)(sh >> 32);
    const int d = pos >> 5;
    if (x.neg ^ w.neg) a.d[d] -= lo, a.d[d + 1] -= hi;
    else a.d[d] += lo, a.d[d + 1] += hi;
}
/* acc_add for operands whose significands' product may reach 2^64 (x.m, w.m below 2^32 each): the
 * shifted product spread over three words. */
__device__ __forceinline__ void acc_add_wide(Acc &a, Opd x, Opd w)
{
    if (x.cls != 1 || w.cls != 1) return acc_add(a, x, w); /* zero, Inf, NaN: no digits */
    const int pos = x.q + w.q + FMCU_LSB, s = pos & 31, d = pos >> 5;
    const unsigned long long P = (unsigned long long)x.m * w.m;
    const unsigned long long r = s ? P >> (32 - s) : P >> 32; /* the digits above the first word */
    const long long w0 = (long long)((P << s) & 0xFFFFFFFFull), w1 = (long long)(r & 0xFFFFFFFFull);
    const long long w2 = (long long)(r >> 32);
    if (x.neg ^ w.neg) a.d[d] -= w0, a.d[d + 1] -= w1, a.d[d + 2] -= w2;
    else a.d[d] += w0, a.d[d + 1] += w1, a.d[d + 2] += w2;
}
/* Carries up: every word but the top one in [0, 2^32), the value unchanged. */
__device__ __forceinline__ void acc_norm(Acc &a)
{
    for (int i = 0; i < FMCU_NDIG - 1; i++) {
        const long long c = a.d[i] >> 32; /* floor division (arithmetic shift) */
        a.d[i] &= 0xFFFFFFFFLL;
        a.d[i + 1] += c;
    }
}
__device__ __forceinline__ int acc_bit(const Acc &a, int b) { return (int)((a.d[b >> 5] >> (b & 31)) & 1); }

/* The exact sum rounded once to FP32, RNE: subnormals from 2^-149 (bit LSB - 149), overflow to Inf; an exact
 * zero is +0 (as ref/exact.c's xsum); Inf/NaN as the flags say. */
__device__ inline float acc_round(Acc &a)
{
    if (a.nan || (a.pinf && a.ninf)) return __uint_as_float(0x7FC00000u);
    if (a.pinf || a.ninf) return a.pinf ? INFINITY : -INFINITY;
    acc_norm(a);
    const int neg = a.d[FMCU_NDIG - 1] < 0;
    if (neg) {
        for (int i = 0; i < FMCU_NDIG; i++) a.d[i] = -a.d[i];
        acc_norm(a);
    }
    int top = FMCU_NDIG - 1;
    while (top >= 0 && a.d[top] == 0) top--;
    if (top < 0) return 0.0f;
    /* the top word may exceed 32 bits only past the range (K > 2^20, refused) */
    const int P = top * 32 + 63 - __clzll(a.d[top]);
    const int Lb = P - 23 > FMCU_LSB - 149 ? P - 23 : FMCU_LSB - 149;
    uint32_t M = 0;
    for (int b = P; b >= Lb; b--) M = M << 1 | (uint32_t)acc_bit(a, b);
    const int rnd = acc_bit(a, Lb - 1);
    int sticky = 0;
    const int sw = (Lb - 1) >> 5;
    for (int i = 0; i < sw; i++) sticky |= a.d[i] != 0;
    sticky |= (a.d[sw] & ((1LL << ((Lb - 1) & 31)) - 1)) != 0;
    if (rnd && (sticky || (M & 1u))) M++;
    /* M 2^(Lb - LSB): exact in double; on the FP32 grid, or >= 2^128 (Inf) */
    const float f = __double2float_rn((double)M * __longlong_as_double((long long)(Lb - FMCU_LSB + 1023) << 52));
    return neg ? -f : f;
}

/* ---- correctly rounded exp, tanh, erf (ref/crmath.c's method) ----
 * y = the device's double exp/tanh/erf, within 1, 1 and 2 double ulps (CUDA Math API, double
 * precision: exp, tanh 1 ulp, erf 2 ulp). Decided when y lies more than M = MOECTS_CR_MARGIN = 16
 * double ulps from every binary32 rounding boundary (E <= M: the true value rounds as y). Otherwise x
 * is in ref/crmath_table.c, which holds every x whose glibc result lies within 2M of a boundary: with
 * glibc within 2.2 ulps and the device within 2, |y_glibc - b| <= 16 + 4.2 < 32. An x found
 * ambiguous and missing from the table sets *err (the run fails; never a guessed value). */
struct CrTab {
    const uint2 *e[3]; /* (x bits, result bits), sorted by x: exp, tanh, erf */
    int n[3];
};
__device__ __forceinline__ double cr_grid(uint32_t u) { return u >= 0x7F800000u ? 0x1p128 : (double)__uint_as_float(u); }
__device__ __forceinline__ double cr_ulps_from(double a, double b)
{
    const unsigned long long e = ((__double_as_longlong(b) >> 52) - 52) << 52;
    return fabs(a - b) / __longlong_as_double((long long)e);
}
__device__ inline double cr_boundary_ulps(double y)
{
    const double a = fabs(y);
    if (!(a < INFINITY)) return INFINITY;
    const uint32_t u = __float_as_uint(__double2float_rn(a));
    double d = INFINITY;
    if (u > 0) d = cr_ulps_from(a, (cr_grid(u - 1) + cr_grid(u)) * 0.5);
    if (u < 0x7F800000u) d = fmin(d, cr_ulps_from(a, (cr_grid(u) + cr_grid(u + 1)) * 0.5));
    return d;
}
__device__ inline float cr_round(const CrTab &tb, int fn, float x, double y, int *err)
{
    if (x != x) return __fadd_rn(x, x);
    if (!(cr_boundary_ulps(y) <= 16.0)) return __double2float_rn(y);
    const uint32_t xb = __float_as_uint(x);
    int lo = 0, hi = tb.n[fn] - 1;
    while (lo <= hi) {
        const int mid = (lo + hi) / 2;
        const uint2 en = tb.e[fn][mid];
        if (en.x == xb) return __uint_as_float(en.y);
        if (en.x < xb) lo = mid + 1;
        else hi = mid - 1;
    }
    atomicExch(err, 2);
    return __uint_as_float(0x7FC00000u);
}

#ifndef FMCU_HOST_EMU
/* ref/crmath_table.c on the current device, copied once per process (gpu/cuda/fused_moe.cu; the layer
 * kernels and the GPU reference share it). 0, or -1 (CUDA error, on stderr). */
int device_cr_table(CrTab *out);
#endif

/* ---- the activations (ref/moects_layer.h's order; gpu/cpu/fused_moe_math.c moects__fml_act) ---- */

/* What the activation stage needs of the recipe and the shape. */
struct ActP {
    int act;               /* moects_activation */
    float L, alpha;        /* act_limit, act_alpha */
    int act_bf16, sig_rcp; /* recipe keys act=bf16, sig=rcp */
    int exact;             /* 1: exp/tanh/erf correctly rounded; 0: CUDA's expf/tanhf/erff (<= 2 ulp) */
};
struct Fn {
    const ActP &p;
    const CrTab &tb;
    int *err;
    __device__ float exp_(float x) const { return p.exact ? cr_round(tb, 0, x, exp((double)x), err) : expf(x); }
    __device__ float tanh_(float x) const { return p.exact ? cr_round(tb, 1, x, tanh((double)x), err) : tanhf(x); }
    __device__ float erf_(float x) const { return p.exact ? cr_round(tb, 2, x, erf((double)x), err) : erff(x); }
    __device__ float sig(float g, float e) const /* g / (1 + e), or g * (1 / (1 + e)) */
    {
        return p.sig_rcp ? __fmul_rn(g, __fdiv_rn(1.0f, __fadd_rn(1.0f, e))) : __fdiv_rn(g, __fadd_rn(1.0f, e));
    }
    __device__ float rnd(float v) const { return p.act_bf16 ? bf16r(v) : v; }
};

/* The gate's activation, act rounding applied: silu (and silu_clamp after its clamp), gelu_tanh,
 * gelu_erf, situ. Constants as gpu/cpu/fused_moe_math.c: fl(sqrt(2/pi)), 0.044715f, fl(1/sqrt 2). */
__device__ inline float gated(const Fn &f, float g)
{
    const float BETA = (float)(1.41421356237309504880 * 1.12837916709551257390 * 0.5), KAPPA = 0.044715f;
    switch (f.p.act) {
    case MOECTS_ACT_GELU_TANH: {
        const float cube = __fmul_rn(__fmul_rn(g, g), g);
        const float inner = __fmul_rn(BETA, __fadd_rn(g, __fmul_rn(KAPPA, cube)));
        return f.rnd(__fmul_rn(__fmul_rn(0.5f, g), __fadd_rn(1.0f, f.tanh_(inner))));
    }
    case MOECTS_ACT_GELU_ERF:
        return f.rnd(__fmul_rn(__fmul_rn(g, 0.5f), __fadd_rn(1.0f, f.erf_(__fmul_rn(g, (float)0.70710678118654752440)))));
    case MOECTS_ACT_SITU: {
        const float inv_a = __fdiv_rn(1.0f, f.p.alpha);
        return f.rnd(f.sig(__fmul_rn(f.p.alpha, f.tanh_(__fmul_rn(g, inv_a))), f.exp_(-g)));
    }
    default: return f.rnd(f.sig(g, f.exp_(-g)));
    }
}

/* act(g, u) of one column (relu2 reads g only). */
__device__ inline float activation(const Fn &f, float g, float u)
{
    if (f.p.act == MOECTS_ACT_RELU2) {
        const float m = g > 0.0f ? g : (g == g ? 0.0f : g);
        return f.rnd(__fmul_rn(m, m)); /* act=bf16 rounds relu2's square (ref/fused_moe_act.c) */
    }
    const float L = f.p.L;
    if (f.p.act == MOECTS_ACT_SILU_CLAMP || f.p.act == MOECTS_ACT_GPT_OSS) {
        g = g > L ? L : g;
        u = u > L ? L : (u < -L ? -L : u);
    }
    if (f.p.act == MOECTS_ACT_SITU && L > 0.0f) u = __fmul_rn(L, f.tanh_(__fmul_rn(u, __fdiv_rn(1.0f, L))));
    if (f.p.act == MOECTS_ACT_GPT_OSS) {
        const float glu = f.rnd(f.sig(g, f.exp_(-__fmul_rn(g, f.p.alpha))));
        return __fmul_rn(__fadd_rn(u, 1.0f), glu);
    }
    return __fmul_rn(gated(f, g), u);
}

} // namespace fmcu
#endif
