/* gpuref_layer.cuh: the fused MoE layer's GPU reference, element by element (docs/gpu_reference.md),
 * the same source compiled for the device (gpu/cuda/gpuref_layer.cu, one thread per element of each
 * stage, grid-stride) and for the host (gpu/gpuref_layer.cpp under gpu/cuda/fmcu_host.h: the stand-in
 * CTest runs). It mirrors ref/fused_moe.c stage for stage under every exact layer recipe (stage
 * conventions are Lp's fields): each GEMM element is the exact dot product rounded once to FP32 (the
 * fixed-point accumulator of gpu/cuda/fused_moe_math.cuh, shared with cuda.fused_moe.vllm), FP8_128's
 * block dots are integers (E4M3 values are multiples of 2^-9 below 2^9), exp/tanh/erf correctly
 * rounded (fused_moe_math.cuh's cr_round with ref/crmath_table.c), every other step the recipe's FP32
 * operation as an explicit __f*_rn or fmaf. What it cannot reproduce bit for bit is flagged per
 * element (gpuref_elem.h's GR_NAN, GR_REFUSE, GR_CRMISS) so the case takes the CPU path. C++, internal
 * to gpu/, no ABI. */
#ifndef MOECTS_GPUREF_LAYER_CUH
#define MOECTS_GPUREF_LAYER_CUH
#include <stdint.h>

#include "cuda/fused_moe_math.cuh"
#include "gpuref/gpuref_elem.h"
extern "C" {
#include "moects_layer.h"
}

namespace grl {
using namespace fmcu;

/* The layer as the reference computes it: the shape and the (exact) recipe, flattened. G: the
 * intermediate's group (FP8: I, 128 or 32 columns; BF16, F32: 128, the work unit only). */
struct Lp {
    int64_t T, k, H, I, E, Eg, N1, kb1, kb2, G, ng;
    int has_map, has_bias, mx, fp8, out_f32, relu2;
    int w13, g1_bf16, w_bf16, slot_bf16, weight, mid, ue8m0, chain;
    ActP ap;
};

/* The stages' buffers (device or host): P = T k pairs. hq, hs only under FP8_128. */
struct Ws {
    int *slot_e;  /* [P] local expert, -1 none */
    float *hq;    /* [P][H] x quantized per 128 (E4M3 values) */
    float *hs;    /* [P][kb1] their scales */
    float *g1;    /* [P][N1] GEMM1 after bias and g1 rounding */
    float *act;   /* [P][I] the activation (times w under weight=act) */
    double *m;    /* [P][I] the intermediate's exact value (FP8_128: its E4M3 values, unscaled) */
    float *ms;    /* [P][ng] the intermediate's FP8 group scales */
    float *y;     /* [P][H] per-slot GEMM2 outputs */
    int *err;     /* 2: an exp/tanh/erf input near a boundary missing from the table */
};

/* The stages, in order; each runs over stage_count elements. */
enum { ST_SLOT, ST_HQ, ST_G1, ST_ACT, ST_MID, ST_G2, ST_COMBINE, ST_N };

inline Lp params(const moects_fused_moe_shape *s, const moects_layer_recipe *r)
{
    Lp p;
    memset(&p, 0, sizeof p);
    p.T = s->T, p.k = s->k, p.H = s->H, p.I = s->inter, p.E = s->E, p.Eg = s->E_global;
    p.relu2 = s->activation == MOECTS_ACT_RELU2, p.N1 = p.relu2 ? p.I : 2 * p.I;
    p.has_map = s->has_expert_map, p.has_bias = s->has_bias, p.out_f32 = s->out_dtype == MOECTS_F32;
    p.mx = s->format == MOECTS_LAYER_MXFP4, p.fp8 = s->format == MOECTS_LAYER_FP8_128;
    p.kb1 = p.fp8 ? p.H / 128 : 0, p.kb2 = p.fp8 ? p.I / 128 : 0;
    p.w13 = r->w13, p.g1_bf16 = r->g1_bf16, p.w_bf16 = r->w_bf16, p.slot_bf16 = r->slot_bf16;
    p.weight = r->weight, p.mid = r->mid, p.ue8m0 = r->scale_ue8m0 || r->mid == MOECTS_MID_MXFP8;
    p.chain = r->combine == MOECTS_COMBINE_BF16_CHAIN;
    p.G = r->mid == MOECTS_MID_FP8_TOKEN ? p.I : r->mid == MOECTS_MID_MXFP8 ? 32 : 128;
    p.ng = (p.I + p.G - 1) / p.G;
    p.ap = ActP{(int)s->activation, s->act_limit, s->act_alpha, r->act_bf16, r->sig_rcp, 1};
    return p;
}

/* Elements of a stage. */
inline int64_t stage_count(const Lp &p, int st)
{
    const int64_t P = p.T * p.k;
    switch (st) {
    case ST_SLOT: return P;
    case ST_HQ: return P * p.kb1;
    case ST_G1: return P * p.N1;
    case ST_ACT: return P * p.I;
    case ST_MID: return P * p.ng;
    case ST_G2: return P * p.H;
    default: return p.T * p.H;
    }
}

/* ---- operands ---- */

__device__ __forceinline__ float wgt(const Lp &p, const moects_fused_moe_args &a, int64_t pi)
{
    const float w = a.topk_weights[pi];
    return p.w_bf16 ? bf16r(w) : w;
}
/* h's BF16 bits at column c of pair pi: x, or bf16(x w) under weight=input. */
__device__ __forceinline__ uint16_t h_bits(const Lp &p, const moects_fused_moe_args &a, int64_t pi, int64_t c)
{
    const uint16_t b = a.x[(pi / p.k) * p.H + c];
    return p.weight == MOECTS_WEIGHT_INPUT ? bf16_bits(__fmul_rn(bf16_val(b), wgt(p, a, pi))) : b;
}
/* A finite double of at most 32 significant bits (an FP32, or an E4M3 value times an FP32 scale) as
 * (-1)^neg m 2^q, m odd; zero, Inf and NaN as their class. */
__device__ __forceinline__ Opd dec_f64(double v)
{
    const unsigned long long u = (unsigned long long)__double_as_longlong(v);
    const int E = (int)((u >> 52) & 0x7FF), neg = (int)(u >> 63);
    unsigned long long M = u & 0xFFFFFFFFFFFFFull;
    if (E == 0x7FF) return Opd{0, 0, neg, M ? 3 : 2};
    if (E == 0 && M == 0) return Opd{0, 0, neg, 0};
    if (E) M |= 1ull << 52;
#ifdef __CUDA_ARCH__
    const int z = __ffsll((long long)M) - 1;
#else
    const int z = __builtin_ctzll(M);
#endif
    return Opd{(uint32_t)(M >> z), (E ? E : 1) - 1075 + z, neg, 1};
}
/* An E4M3 byte's value times 2^9, an integer (|v| <= 229376); *nan for 0x7F/0xFF. */
__device__ __forceinline__ long long e4m3_units(uint8_t b, int *nan)
{
    const int e = (b >> 3) & 15, m = b & 7;
    if (e == 15 && m == 7) return *nan = 1, 0;
    const long long v = e ? (long long)(8 + m) << (e - 1) : m;
    return b & 0x80 ? -v : v;
}
/* An FP8 group's scale (ref/fused_moe_act.c moects__fused_fp8_scale): NaN, fmaxf(amax, 1e-10f) / 448,
 * or the smallest power of two >= amax / 448 in [2^-127, 2^127]. */
__device__ __forceinline__ float fp8_scale(float amax, int nan, int ue8m0)
{
    if (nan) return __uint_as_float(0x7FC00000u);
    if (!ue8m0) return __fdiv_rn(fmaxf(amax, 1e-10f), 448.0f);
    if (amax == 0.0f) return 0x1p-127f;
    if (amax > 3.4028234663852886e38f) return 0x1p127f;
    int x = ilogb((double)amax) - 8;
    if (448.0 * ldexp(1.0, x) < (double)amax) x++;
    x = x < -127 ? -127 : x > 127 ? 127 : x;
    return (float)ldexp(1.0, x);
}

/* ---- stage elements; each returns its flags ---- */

/* A pair's local expert (ref/fused_moe.c moects__fused_route); a map entry >= E: the CPU refuses. */
__device__ __forceinline__ unsigned el_slot(const Lp &p, const moects_fused_moe_args &a, const Ws &w, int64_t pi)
{
    const int64_t id = a.topk_ids[pi];
    int64_t e = -1;
    if (!p.has_map) e = id >= 0 && id < p.E ? id : -1;
    else if (id >= 0 && id < p.Eg) e = a.expert_map[id] >= 0 ? a.expert_map[id] : -1;
    w.slot_e[pi] = e < p.E ? (int)e : -1;
    return e < p.E ? 0u : GR_REFUSE;
}

/* FP8_128: group g (128 columns) of pair pi's h quantized with the recipe's scale. */
__device__ __forceinline__ void el_hq(const Lp &p, const moects_fused_moe_args &a, const Ws &w, int64_t pi, int64_t g)
{
    float amax = 0.0f;
    int nan = 0;
    for (int64_t c = g * 128; c < (g + 1) * 128; c++) {
        const float v = fabsf(bf16_val(h_bits(p, a, pi, c)));
        nan |= v != v;
        amax = v > amax ? v : amax;
    }
    const float sc = fp8_scale(amax, nan, p.ue8m0);
    w.hs[pi * p.kb1 + g] = sc;
    for (int64_t c = g * 128; c < (g + 1) * 128; c++)
        w.hq[pi * p.H + c] = e4m3_rne(__fdiv_rn(bf16_val(h_bits(p, a, pi, c)), sc));
}

/* FP8_128's GEMM element (ref/fused_moe_gemm.c moects__fused_block_chain): per 128-block the exact
 * dot of the E4M3 values av and weight row `row` (of K bytes), rounded once to FP32 (an integer in
 * units of 2^-18 below 2^43: exact in double), then acc = fmaf(p, sa * sb, acc). */
template <class T>
__device__ float block_chain(const T *av, const float *sa, const uint8_t *wb, const float *sb, int64_t row,
                             int64_t K, int64_t nkb)
{
    float acc = 0.0f;
    for (int64_t kb = 0; kb < nkb; kb++) {
        long long sum = 0;
        int nan = 0;
        for (int64_t c = kb * 128; c < (kb + 1) * 128; c++) {
            const float v = (float)av[c];
            const long long wv = e4m3_units(wb[row * K + c], &nan);
            if (v != v) nan = 1;
            else sum += (long long)__fmul_rn(v, 512.0f) * wv; /* v 2^9: an integer */
        }
        const float pb = nan ? __uint_as_float(0x7FC00000u) : __double2float_rn((double)sum * 0x1p-18);
        acc = fmaf(pb, __fmul_rn(sa[kb], sb[kb]), acc);
    }
    return acc;
}

/* GEMM1 element (pi, n): the exact dot, + b13, g1 rounding. */
__device__ __forceinline__ void el_g1(const Lp &p, const moects_fused_moe_args &a, const Ws &w, int64_t pi, int64_t n)
{
    const int64_t e = w.slot_e[pi], row = e * p.N1 + n;
    if (e < 0) return;
    float v;
    if (p.fp8) {
        const float *sb = a.w13_block_scale + (e * (p.N1 / 128) + n / 128) * p.kb1;
        v = block_chain(w.hq + pi * p.H, w.hs + pi * p.kb1, static_cast<const uint8_t *>(a.w13), sb, row, p.H, p.kb1);
    } else {
        Acc acc;
        acc_init(acc);
        for (int64_t c = 0; c < p.H; c++)
            acc_add(acc, dec_bf16(h_bits(p, a, pi, c)), dec_w(p.mx, a.w13, a.w13_scale, row, p.H, c));
        v = acc_round(acc);
    }
    if (p.has_bias) v = __fadd_rn(v, a.b13[row]);
    w.g1[pi * p.N1 + n] = p.g1_bf16 ? bf16r(v) : v;
}

/* The activation of column i of pair pi (gate and up in W13's order), times w under weight=act. */
__device__ __forceinline__ void el_act(const Lp &p, const moects_fused_moe_args &a, const Ws &w, const CrTab &tb,
                                       int64_t pi, int64_t i)
{
    if (w.slot_e[pi] < 0) return;
    int64_t gi = i, ui = p.I + i; /* gate_up */
    if (p.w13 == MOECTS_W13_UP_GATE) gi = p.I + i, ui = i;
    else if (p.w13 == MOECTS_W13_INTERLEAVE1) gi = 2 * i, ui = 2 * i + 1;
    else if (p.w13 == MOECTS_W13_INTERLEAVE8) gi = 16 * (i / 8) + i % 8, ui = gi + 8;
    const Fn f{p.ap, tb, w.err};
    const float *g1 = w.g1 + pi * p.N1;
    float v = activation(f, g1[gi], p.relu2 ? 0.0f : g1[ui]);
    if (p.weight == MOECTS_WEIGHT_ACT) v = __fmul_rn(v, wgt(p, a, pi));
    w.act[pi * p.I + i] = v;
}

/* Group g of pair pi's intermediate (ref/fused_moe_act.c moects__fused_mid / fp8_groups). */
__device__ __forceinline__ void el_mid(const Lp &p, const Ws &w, int64_t pi, int64_t g)
{
    if (w.slot_e[pi] < 0) return;
    const int64_t i0 = g * p.G, i1 = i0 + p.G < p.I ? i0 + p.G : p.I;
    const float *act = w.act + pi * p.I;
    double *m = w.m + pi * p.I;
    if (p.mid == MOECTS_MID_BF16 || p.mid == MOECTS_MID_F32) {
        for (int64_t i = i0; i < i1; i++) m[i] = p.mid == MOECTS_MID_BF16 ? bf16r(act[i]) : act[i];
        return;
    }
    float amax = 0.0f;
    int nan = 0;
    for (int64_t i = i0; i < i1; i++) {
        const float v = fabsf(bf16r(act[i]));
        nan |= v != v;
        amax = v > amax ? v : amax;
    }
    const float sc = fp8_scale(amax, nan, p.ue8m0);
    w.ms[pi * p.ng + g] = sc;
    for (int64_t i = i0; i < i1; i++) {
        const float q = e4m3_rne(__fdiv_rn(bf16r(act[i]), sc));
        m[i] = p.fp8 ? (double)q : (double)q * (double)sc; /* exact: 4 + 24 bits */
    }
}

/* GEMM2 element (pi, h): the exact dot, + b2, the weight in the epilogue, slot rounding. */
__device__ __forceinline__ void el_g2(const Lp &p, const moects_fused_moe_args &a, const Ws &w, int64_t pi, int64_t h)
{
    const int64_t e = w.slot_e[pi], row = e * p.H + h;
    if (e < 0) return;
    float v;
    if (p.fp8) {
        const float *sb = a.w2_block_scale + (e * (p.H / 128) + h / 128) * p.kb2;
        v = block_chain(w.m + pi * p.I, w.ms + pi * p.ng, static_cast<const uint8_t *>(a.w2), sb, row, p.I, p.kb2);
    } else {
        Acc acc;
        acc_init(acc);
        const double *m = w.m + pi * p.I;
        for (int64_t c = 0; c < p.I; c++) acc_add_wide(acc, dec_f64(m[c]), dec_w(p.mx, a.w2, a.w2_scale, row, p.I, c));
        v = acc_round(acc);
    }
    if (p.has_bias) v = __fadd_rn(v, a.b2[row]);
    if (p.weight == MOECTS_WEIGHT_GEMM2) v = __fmul_rn(v, wgt(p, a, pi));
    w.y[pi * p.H + h] = p.slot_bf16 ? bf16r(v) : v;
}

/* Output (t, h): the combine over the valid slots in slot order, then out_dtype; NaN: GR_NAN. */
__device__ __forceinline__ unsigned el_combine(const Lp &p, const moects_fused_moe_args &a, const Ws &w, int64_t t,
                                               int64_t h)
{
    float acc = 0.0f;
    for (int64_t j = 0; j < p.k; j++) {
        const int64_t pi = t * p.k + j;
        if (w.slot_e[pi] < 0) continue;
        const float y = w.y[pi * p.H + h];
        const float v = p.weight == MOECTS_WEIGHT_COMBINE ? fmaf(y, wgt(p, a, pi), acc) : __fadd_rn(acc, y);
        acc = p.chain ? bf16r(v) : v;
    }
    if (p.out_f32) static_cast<float *>(a.out)[t * p.H + h] = acc;
    else static_cast<uint16_t *>(a.out)[t * p.H + h] = bf16_bits(acc);
    return acc != acc ? GR_NAN : 0u;
}

/* Element idx of stage st: its flags. */
__device__ __forceinline__ unsigned elem(int st, const Lp &p, const moects_fused_moe_args &a, const Ws &w,
                                         const CrTab &tb, int64_t idx)
{
    switch (st) {
    case ST_SLOT: return el_slot(p, a, w, idx);
    case ST_HQ: return el_hq(p, a, w, idx / p.kb1, idx % p.kb1), 0u;
    case ST_G1: return el_g1(p, a, w, idx / p.N1, idx % p.N1), 0u;
    case ST_ACT: return el_act(p, a, w, tb, idx / p.I, idx % p.I), 0u;
    case ST_MID: return el_mid(p, w, idx / p.ng, idx % p.ng), 0u;
    case ST_G2: return el_g2(p, a, w, idx / p.H, idx % p.H), 0u;
    default: return el_combine(p, a, w, idx / p.H, idx % p.H);
    }
}

} // namespace grl
#endif
