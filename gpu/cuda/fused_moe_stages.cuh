/* fused_moe_stages.cuh: the stages of the CUDA fused MoE layer pipeline (fused_moe.cu's header
 * comment describes them), as __global__ kernels over grid-stride loops, parameterised by Lp (the
 * shape and the layer recipe, flattened). Kept apart from the host code so that
 * tests/fixtures/fused_moe_cuda_emu.cpp can compile the same source for the host (one thread, every
 * loop sequential) and judge it on CPU; internal to gpu/cuda/, no ABI. */
#ifndef MOECTS_FUSED_MOE_STAGES_CUH
#define MOECTS_FUSED_MOE_STAGES_CUH
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "fused_moe_math.cuh"
#include "moects_types.h"
extern "C" {
#include "moects_layer.h"
}

namespace fmcu {

/* The layer as the device code computes it: the shape and the recipe, flattened. */
struct Lp {
    int64_t T, k, H, I, E, Eg, N1;
    int has_map, has_bias, mx, out_f32, relu2;
    int up_first, swap, g1_bf16, w_bf16, slot_bf16, w_gemm2, w_combine, atomic;
    int mid; /* moects_mid_format: BF16 (exact), BF16, F32 or FP8_TOKEN (bounded) */
    ActP ap;
};

/* ---- device stages ---- */

__device__ __forceinline__ float in_val(const uint16_t *in, int64_t k) { return bf16_val(in[k]); }
__device__ __forceinline__ float in_val(const float *in, int64_t k) { return in[k]; }

/* fp32_rne(exact sum_k in[k] w[row][k]): BF16 inputs, BF16 or MXFP4 weights (moe_gemm.exact_v1). */
__device__ float dot_exact(const uint16_t *in, int mx, const void *w, const uint8_t *ws, int64_t row, int64_t K)
{
    Acc a;
    acc_init(a);
    for (int64_t k = 0; k < K; k++) acc_add(a, dec_bf16(in[k]), dec_w(mx, w, ws, row, K, k));
    return acc_round(a);
}

/* The bounded kernels' sum: each product exact in double, rounded to FP32, added in FP32 in K order. */
template <class In>
__device__ float dot_f32(const In *in, int mx, const void *w, const uint8_t *ws, int64_t row, int64_t K)
{
    float acc = 0.0f;
    for (int64_t k = 0; k < K; k++)
        acc = __fadd_rn(acc, __double2float_rn((double)in_val(in, k) * w_double(mx, w, ws, row, K, k)));
    return acc;
}

__device__ __forceinline__ float gw(const Lp &p, const moects_fused_moe_args &a, int64_t pi)
{
    const float w = a.topk_weights[pi];
    return p.w_bf16 ? bf16r(w) : w;
}

/* Each pair's local expert, -1 for none (gpu/cpu/fused_moe.c slot_expert); a map entry >= E: *err = 1. */
__global__ void slots_kernel(Lp p, moects_fused_moe_args a, int *slot_e, int *err)
{
    for (int64_t pi = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; pi < p.T * p.k; pi += (int64_t)gridDim.x * blockDim.x) {
        const int32_t id = a.topk_ids[pi];
        int e = -1;
        if (id >= 0 && !p.has_map) e = id < p.E ? id : -1;
        else if (id >= 0 && id < p.Eg && a.expert_map[id] >= 0) {
            e = a.expert_map[id];
            if (e >= p.E) atomicExch(err, 1), e = -1;
        }
        slot_e[pi] = e;
    }
}

/* GEMM1 row n of expert e for token row x, + b13, g1 rounding. */
__device__ float g1_val(const Lp &p, const moects_fused_moe_args &a, const uint16_t *x, int64_t e, int64_t n)
{
    const int64_t row = e * p.N1 + n;
    float v = p.ap.exact ? dot_exact(x, p.mx, a.w13, a.w13_scale, row, p.H) : dot_f32(x, p.mx, a.w13, a.w13_scale, row, p.H);
    if (p.has_bias) v = __fadd_rn(v, a.b13[row]);
    return p.g1_bf16 ? bf16r(v) : v;
}

/* The exposed intermediates (moects_fused_moe_args g1_out, act_out, mid_out, y_out), written where the
 * args ask for them (non-NULL: a kernel with MOECTS_KERNEL_INTERMEDIATES; docs/fused_moe.md "Exposed
 * intermediates"), row pi of each. */
__device__ __forceinline__ void put_f(float *out, int64_t row, int64_t n, int64_t i, float v)
{
    if (out) out[row * n + i] = v;
}

/* One thread per (pair, column i): the activation; exact: the BF16 intermediate's bits, else FP32.
 * Exposes GEMM1's gate and up rows of column i, the activation and (exact) the BF16 intermediate. */
__global__ void gemm1_kernel(Lp p, moects_fused_moe_args a, CrTab tb, const int *slot_e, void *mid, int *err)
{
    const Fn f{p.ap, tb, err};
    for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < p.T * p.k * p.I;
         idx += (int64_t)gridDim.x * blockDim.x) {
        const int64_t pi = idx / p.I, i = idx % p.I, e = slot_e[pi];
        if (e < 0) continue;
        const uint16_t *x = a.x + (pi / p.k) * p.H;
        int64_t gr = i, ur = -1;
        if (!p.relu2) {
            gr = p.up_first ? p.I + i : i, ur = p.up_first ? i : p.I + i;
            if (p.swap) gr ^= ur, ur ^= gr, gr ^= ur;
        }
        const float g = g1_val(p, a, x, e, gr), u = ur >= 0 ? g1_val(p, a, x, e, ur) : 0.0f;
        const float v = activation(f, g, u);
        put_f(a.g1_out, pi, p.N1, gr, g);
        if (ur >= 0) put_f(a.g1_out, pi, p.N1, ur, u);
        put_f(a.act_out, pi, p.I, i, v);
        if (p.ap.exact && a.mid_out) a.mid_out[idx] = (double)bf16r(v);
        if (p.ap.exact) static_cast<uint16_t *>(mid)[idx] = bf16_bits(v);
        else static_cast<float *>(mid)[idx] = v;
    }
}

/* mid=fp8_token: per valid pair, s = max(amax |bf16(a)|, 1e-10) / 448 (NaN when a NaN is in the row).
 * blockDim 256; the valid test is uniform over the block. */
__global__ void fp8_scale_kernel(Lp p, const float *act, const int *slot_e, float *scale)
{
    __shared__ float smax[256];
    __shared__ int snan[256];
    const int tid = threadIdx.x;
    for (int64_t pi = blockIdx.x; pi < p.T * p.k; pi += gridDim.x) {
        if (slot_e[pi] < 0) continue;
        float m = 0.0f;
        int nan = 0;
        for (int64_t i = tid; i < p.I; i += blockDim.x) {
            const float v = fabsf(bf16r(act[pi * p.I + i]));
            nan |= v != v;
            if (v > m) m = v;
        }
        smax[tid] = m, snan[tid] = nan;
        __syncthreads();
        for (int s = blockDim.x / 2; s > 0; s >>= 1) { /* blockDim a power of two */
            if (tid < s) smax[tid] = fmaxf(smax[tid], smax[tid + s]), snan[tid] |= snan[tid + s];
            __syncthreads();
        }
        if (tid == 0) scale[pi] = snan[0] ? __uint_as_float(0x7FC00000u) : __fdiv_rn(fmaxf(smax[0], 1e-10f), 448.0f);
        __syncthreads();
    }
}

/* The bounded intermediate in place: bf16(a), a itself, or RN32(e4m3(bf16(a) / s) * s); exposed as its
 * exact value (mid_out: FP8, the E4M3 value times s in double, as the recipe defines it). */
__global__ void mid_kernel(Lp p, float *act, const int *slot_e, const float *scale, double *mid_out)
{
    for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < p.T * p.k * p.I;
         idx += (int64_t)gridDim.x * blockDim.x) {
        const int64_t pi = idx / p.I;
        if (slot_e[pi] < 0) continue;
        const float v = p.mid == MOECTS_MID_F32 ? act[idx] : bf16r(act[idx]);
        const float q = p.mid == MOECTS_MID_FP8_TOKEN ? e4m3_rne(__fdiv_rn(v, scale[pi])) : v;
        act[idx] = p.mid == MOECTS_MID_FP8_TOKEN ? __fmul_rn(q, scale[pi]) : v;
        if (mid_out) mid_out[idx] = p.mid == MOECTS_MID_FP8_TOKEN ? (double)q * (double)scale[pi] : (double)v;
    }
}

/* One thread per (pair, n): y = GEMM2 + b2, the weight in the epilogue, slot rounding (exposed as
 * y_out); stored to ys [P, H], or (atomic) added to sums [T, H] (times w under weight=combine). */
__global__ void gemm2_kernel(Lp p, moects_fused_moe_args a, const int *slot_e, const void *mid, float *ys)
{
    for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < p.T * p.k * p.H;
         idx += (int64_t)gridDim.x * blockDim.x) {
        const int64_t pi = idx / p.H, n = idx % p.H, e = slot_e[pi];
        if (e < 0) continue;
        const int64_t row = e * p.H + n;
        float y = p.ap.exact ? dot_exact(static_cast<const uint16_t *>(mid) + pi * p.I, p.mx, a.w2, a.w2_scale, row, p.I)
                             : dot_f32(static_cast<const float *>(mid) + pi * p.I, p.mx, a.w2, a.w2_scale, row, p.I);
        if (p.has_bias) y = __fadd_rn(y, a.b2[row]);
        const float w = gw(p, a, pi);
        if (p.w_gemm2) y = __fmul_rn(y, w);
        if (p.slot_bf16) y = bf16r(y);
        put_f(a.y_out, pi, p.H, n, y);
        if (p.atomic) atomicAdd(ys + (pi / p.k) * p.H + n, p.w_combine ? __fmul_rn(y, w) : y);
        else ys[idx] = y;
    }
}

__device__ __forceinline__ void put_out(const Lp &p, void *out, int64_t idx, float v)
{
    if (p.out_f32) static_cast<float *>(out)[idx] = v;
    else static_cast<uint16_t *>(out)[idx] = bf16_bits(v);
}

/* One thread per (t, n): FP32 over the valid slots in slot order (weight=combine: fmaf(y, w, acc)). */
__global__ void combine_kernel(Lp p, moects_fused_moe_args a, const int *slot_e, const float *ys)
{
    for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < p.T * p.H; idx += (int64_t)gridDim.x * blockDim.x) {
        const int64_t t = idx / p.H, n = idx % p.H;
        float acc = 0.0f;
        for (int64_t j = 0; j < p.k; j++) {
            const int64_t pi = t * p.k + j;
            if (slot_e[pi] < 0) continue;
            const float y = ys[pi * p.H + n];
            acc = p.w_combine ? fmaf(y, gw(p, a, pi), acc) : __fadd_rn(acc, y);
        }
        put_out(p, a.out, idx, acc);
    }
}

/* combine=f32_any: the atomic sums [T, H] to out_dtype. */
__global__ void finish_kernel(Lp p, moects_fused_moe_args a, const float *sums)
{
    for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < p.T * p.H; idx += (int64_t)gridDim.x * blockDim.x)
        put_out(p, a.out, idx, sums[idx]);
}

/* The one bug a layer kernel carries. */
enum Bug {
    BUG_NONE = 0,
    BUG_GATE_UP_SWAPPED, /* the declared order's gate rows read as up and up rows as gate */
    BUG_WEIGHT_TWICE     /* the router weight in GEMM2's epilogue and again in the combine */
};

/* A kernel: its declared recipe string (parsed on first use) and its bug. */
struct Kern {
    const char *recipe;
    Bug bug;
    pthread_mutex_t mu;
    int state; /* 0 not parsed, 1 r valid, -1 err says why */
    moects_layer_recipe r;
    char err[160];
};

/* ---- host: recipe, supports, parameters ---- */

inline const moects_layer_recipe *recipe_of(Kern *k)
{
    pthread_mutex_lock(&k->mu);
    if (k->state == 0) k->state = moects__layer_recipe_parse(k->recipe, &k->r, k->err, sizeof k->err) ? -1 : 1;
    const int ok = k->state == 1;
    pthread_mutex_unlock(&k->mu);
    return ok ? &k->r : NULL;
}

/* The recipe values this pipeline implements (the rest refused, whatever the case). */
inline const char *impl_refuses(const moects_layer_recipe *r)
{
    if (r->w13 != MOECTS_W13_GATE_UP && r->w13 != MOECTS_W13_UP_GATE) return "recipe: w13 interleaved is not implemented";
    if (r->weight != MOECTS_WEIGHT_GEMM2 && r->weight != MOECTS_WEIGHT_COMBINE)
        return "recipe: weight=input and weight=act are not implemented";
    if (r->combine == MOECTS_COMBINE_BF16_CHAIN) return "recipe: combine=bf16_chain is not implemented";
    if (r->combine == MOECTS_COMBINE_F32_ANY && !r->fn) return "recipe: combine=f32_any has no exact result";
    if (!r->fn && r->mid != MOECTS_MID_BF16) return "recipe: the exact pipeline takes mid=bf16 only";
    if (r->mid != MOECTS_MID_BF16 && r->mid != MOECTS_MID_F32 && r->mid != MOECTS_MID_FP8_TOKEN)
        return "recipe: mid=fp8_128 and mid=mxfp8 are not implemented";
    return NULL;
}

inline const char *shape_refuses(const moects_fused_moe_shape *s)
{
    if (s->T < 0 || s->k < 0 || s->H < 1 || s->inter < 1 || s->E < 1) return "shape: T, k < 0 or H, I, E < 1";
    if (s->H > (1 << 20) || s->inter > (1 << 20)) return "shape: H or I above 2^20 (the exact accumulator's range)";
    if (s->has_expert_map && s->E_global < 1) return "layout: an expert map of E_global < 1";
    if (s->format != MOECTS_LAYER_BF16 && s->format != MOECTS_LAYER_MXFP4)
        return "format: BF16 and MXFP4 weights only (FP8 block-128 not implemented)";
    if (s->format == MOECTS_LAYER_MXFP4 && (s->H % 32 || s->inter % 32)) return "shape: MXFP4 needs H and I multiples of 32";
    if (s->activation < MOECTS_ACT_SILU || s->activation > MOECTS_ACT_SITU) return "activation: unknown";
    if (s->activation == MOECTS_ACT_SITU && !(s->act_alpha > 0.0f && s->act_alpha < INFINITY))
        return "activation: situ needs 0 < a (beta) < Inf";
    if (s->activation == MOECTS_ACT_SITU && !(s->act_limit >= 0.0f && s->act_limit < INFINITY))
        return "activation: situ needs L (linear_beta) 0 (none) or finite";
    if (s->out_dtype != MOECTS_BF16 && s->out_dtype != MOECTS_F32) return "format: output dtype not bf16/f32";
    return NULL;
}

inline int supports_layer(Kern *k, const void *shape, char *why, size_t why_len)
{
    const moects_fused_moe_shape *s = static_cast<const moects_fused_moe_shape *>(shape);
    const moects_layer_recipe *r = recipe_of(k);
    const char *no = !r ? "recipe: the kernel's recipe does not parse" : impl_refuses(r);
    if (!no) no = shape_refuses(s);
    if (!no && s->activation == MOECTS_ACT_RELU2 && r->w13 != MOECTS_W13_GATE_UP)
        no = "recipe: relu2 has no gate: W13 order other than gate_up";
    if (!no && k->bug == BUG_GATE_UP_SWAPPED && s->activation == MOECTS_ACT_RELU2) no = "scope: mutant of gated activations";
    if (!no) return 1;
    if (why && why_len) snprintf(why, why_len, "%s", no);
    return 0;
}

inline Lp layer_params(const moects_fused_moe_shape *s, const moects_layer_recipe *r, Bug bug)
{
    Lp p;
    memset(&p, 0, sizeof p);
    p.T = s->T, p.k = s->k, p.H = s->H, p.I = s->inter, p.E = s->E, p.Eg = s->E_global;
    p.relu2 = s->activation == MOECTS_ACT_RELU2;
    p.N1 = p.relu2 ? p.I : 2 * p.I;
    p.has_map = s->has_expert_map, p.has_bias = s->has_bias, p.mx = s->format == MOECTS_LAYER_MXFP4;
    p.out_f32 = s->out_dtype == MOECTS_F32;
    p.up_first = r->w13 == MOECTS_W13_UP_GATE, p.swap = bug == BUG_GATE_UP_SWAPPED;
    p.g1_bf16 = r->g1_bf16, p.w_bf16 = r->w_bf16, p.slot_bf16 = r->slot_bf16, p.mid = r->mid;
    p.w_gemm2 = r->weight == MOECTS_WEIGHT_GEMM2 || bug == BUG_WEIGHT_TWICE;
    p.w_combine = r->weight == MOECTS_WEIGHT_COMBINE || bug == BUG_WEIGHT_TWICE;
    p.atomic = r->combine == MOECTS_COMBINE_F32_ANY;
    p.ap = ActP{(int)s->activation, s->act_limit, s->act_alpha, r->act_bf16, r->sig_rcp, r->fn == 0};
    return p;
}

} // namespace fmcu
#endif
