/* fused_moe.cu: the CUDA fused MoE layer kernels (op fused_moe, DESIGN.md "The fused MoE layer",
 * docs/fused_moe.md) and their mutants. One generic pipeline, parameterised like the CPU layer kernels
 * (gpu/cpu/fused_moe.c) by a declared layer recipe string (ref/moects_layer.h, parsed once) and a bug:
 *   slots:   each (token t, slot j) pair's local expert (expert_map, -1 for none)
 *   gemm1:   one thread per (pair, intermediate column i): the gate and up rows of W13 (the recipe's
 *            order), + b13, g1 rounding, the activation (fused_moe_math.cuh), the intermediate
 *   mid:     (bounded kernels) FP8 E4M3 per token: amax of the BF16-rounded row, s = max(amax, 1e-10) /
 *            448, m = RN32(e4m3(bf16(a) / s) * s), one block per pair
 *   gemm2:   one thread per (pair, hidden column n): + b2, the router weight in the epilogue, slot
 *            rounding; then a stored per-slot row, or (combine=f32_any) an FP32 atomicAdd into [T, H]
 *   combine: one thread per (t, n): FP32 over the valid slots in slot order, then out_dtype
 *
 * cuda.fused_moe.vllm declares fused_moe.layer_v1 (vLLM TritonExperts' BF16 recipe: [gate | up],
 * GEMM1 and silu(g) rounded to BF16, BF16 intermediate, FP32 weight in GEMM2's epilogue, slot BF16,
 * FP32 slot-order combine) and mirrors cpu.fused_moe.vllm's arithmetic order: each GEMM element is
 * the exact dot product rounded once to FP32 (a fixed-point accumulator, fused_moe_math.cuh), exp,
 * tanh and erf correctly rounded, every other step one FP32 RNE operation in the recipe's order
 * (explicit __f*_rn, no contraction): PASS_EXACT. One thread per element, K in order: each output
 * row depends on its own token alone (batch invariant). Weights BF16 or MXFP4 (W4A16: BF16
 * activations, E2M1 codes with linear UE8M0 scales per 32 along K).
 *
 * cuda.fused_moe.fp8_atomic declares CUTLASS's recipe ([up | gate], FP32 GEMM1 and activation, FP8
 * E4M3 per-token intermediate, the weight in the combine) with FlashInfer cutlass_fused_moe's fused
 * finalize (FP32 atomics in any order: combine=f32_any, not run-to-run deterministic) and CUDA's
 * expf/tanhf/erff (within 2 ulps: fn=ulp2), GEMMs as one FP32 sum per element (each product, and each
 * FP8 scale product, rounded to FP32): the accumulation class (24, RNE) of cpu.fused_moe.fast, judged
 * by the enclosure (PASS_BOUNDED). Not declared batch invariant (the atomics' order).
 *
 * Workspace from cudaMallocAsync, sized from the case: P = T k slot experts, the intermediate [P, I],
 * per-slot rows [P, H] FP32 (or the [T, H] FP32 atomic sums), an error word. Reads: x rows and weights
 * only of valid slots, expert_map only below E_global. A map entry >= E, or an exp/tanh/erf input the
 * hard-case table lacks, fails the run with last_error() saying which. */
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cuda_util.cuh"
#include "fused_moe_stages.cuh"
#include "moects_kernel.h"
extern "C" {
#include "moects_crmath.h"
}

namespace {
using namespace fmcu;

char g_err[256];
const char *last_error() { return g_err; }

/* ---- host: the hard-case table, the run ---- */

/* ref/crmath_table.c on the device, copied once per process (kept for good: a first call's setup). */
int cr_table(CrTab *out)
{
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    static int state = 0;
    static CrTab tab;
    pthread_mutex_lock(&mu);
    for (int fn = 0; fn < 3 && state == 0; fn++) {
        const size_t n = moects__cr_count[fn], bytes = (n ? n : 1) * sizeof(uint2);
        static_assert(sizeof(moects_cr_entry) == sizeof(uint2), "table entry layout");
        void *d = NULL;
        if (MOECTS_CU(cudaMalloc(&d, bytes)) ||
            (n && MOECTS_CU(cudaMemcpy(d, moects__cr_table[fn], n * sizeof(uint2), cudaMemcpyHostToDevice))) ||
            MOECTS_CU(cudaDeviceSynchronize())) { /* the legacy stream's copy done before any stream reads it */
            state = -1;
            break;
        }
        tab.e[fn] = static_cast<const uint2 *>(d), tab.n[fn] = (int)n;
        if (fn == 2) state = 1;
    }
    const int ok = state == 1;
    pthread_mutex_unlock(&mu);
    if (ok) *out = tab;
    else snprintf(g_err, sizeof g_err, "could not copy the exp/tanh/erf hard-case table to the device (see stderr)");
    return ok ? 0 : -1;
}

unsigned blocks_for(int64_t n) { return (unsigned)(n / 256 + 1 < 1048576 ? n / 256 + 1 : 1048576); }
size_t up256(size_t b) { return (b + 255) & ~(size_t)255; }

/* The stages on stream st over workspace ws (layout as run_layer sizes it). */
int launch(const Lp &p, const moects_fused_moe_args &a, const CrTab &tb, uint8_t *ws, size_t o_mid, size_t o_sc,
           size_t o_y, cudaStream_t st)
{
    int *err = reinterpret_cast<int *>(ws), *slot_e = reinterpret_cast<int *>(ws + 256);
    void *mid = ws + o_mid;
    float *sc = reinterpret_cast<float *>(ws + o_sc), *ys = reinterpret_cast<float *>(ws + o_y);
    const int64_t P = p.T * p.k;
    if (p.atomic && MOECTS_CU(cudaMemsetAsync(ys, 0, (size_t)(p.T * p.H) * 4, st))) return -1;
    if (P > 0) {
        slots_kernel<<<blocks_for(P), 256, 0, st>>>(p, a, slot_e, err);
        gemm1_kernel<<<blocks_for(P * p.I), 256, 0, st>>>(p, a, tb, slot_e, mid, err);
        if (p.mid == MOECTS_MID_FP8_TOKEN)
            fp8_scale_kernel<<<(unsigned)(P < 65536 ? P : 65536), 256, 0, st>>>(p, static_cast<float *>(mid), slot_e, sc);
        if (!p.ap.exact) mid_kernel<<<blocks_for(P * p.I), 256, 0, st>>>(p, static_cast<float *>(mid), slot_e, sc, a.mid_out);
        gemm2_kernel<<<blocks_for(P * p.H), 256, 0, st>>>(p, a, slot_e, mid, ys);
    }
    if (p.atomic) finish_kernel<<<blocks_for(p.T * p.H), 256, 0, st>>>(p, a, ys);
    else combine_kernel<<<blocks_for(p.T * p.H), 256, 0, st>>>(p, a, slot_e, ys);
    return MOECTS_CU_LAUNCH("fused_moe stages") ? -1 : 0;
}

int run_layer(Kern *k, const void *shape, const void *args, void *stream)
{
    const moects_fused_moe_shape *s = static_cast<const moects_fused_moe_shape *>(shape);
    const moects_fused_moe_args *a = static_cast<const moects_fused_moe_args *>(args);
    cudaStream_t st = static_cast<cudaStream_t>(stream);
    g_err[0] = 0;
    char why[160];
    if (!supports_layer(k, shape, why, sizeof why)) return snprintf(g_err, sizeof g_err, "unsupported: %s", why), -1;
    if (s->T == 0) return 0;
    const Lp p = layer_params(s, &k->r, k->bug);
    CrTab tb;
    memset(&tb, 0, sizeof tb);
    if (p.ap.exact && cr_table(&tb)) return -1;
    const size_t P = (size_t)(p.T * p.k);
    const size_t o_mid = 256 + up256(P * 4), o_sc = o_mid + up256(P * (size_t)p.I * (p.ap.exact ? 2 : 4));
    const size_t o_y = o_sc + up256(P * 4), total = o_y + up256((p.atomic ? (size_t)p.T : P) * (size_t)p.H * 4);
    uint8_t *ws = NULL;
    if (MOECTS_CU(cudaMallocAsync(reinterpret_cast<void **>(&ws), total, st)))
        return snprintf(g_err, sizeof g_err, "cudaMallocAsync of %zu bytes failed", total), -1;
    int rc = MOECTS_CU(cudaMemsetAsync(ws, 0, 4, st)) ? -1 : launch(p, *a, tb, ws, o_mid, o_sc, o_y, st);
    int err = 0;
    if (rc == 0 && (MOECTS_CU(cudaMemcpyAsync(&err, ws, 4, cudaMemcpyDeviceToHost, st)) || MOECTS_CU(cudaStreamSynchronize(st))))
        rc = -1;
    if (MOECTS_CU(cudaFreeAsync(ws, st))) rc = -1;
    if (rc && !g_err[0]) snprintf(g_err, sizeof g_err, "CUDA error (see stderr)");
    if (err == 1) snprintf(g_err, sizeof g_err, "an expert_map entry >= E (local experts)");
    if (err == 2) snprintf(g_err, sizeof g_err, "an exp/tanh/erf input near a rounding boundary is missing from ref/crmath_table.c");
    return rc || err ? -1 : 0;
}

#define FMCU_KERNEL_FNS(sym, rec, bugv)                                                                         \
    Kern sym##_k = {rec, bugv, PTHREAD_MUTEX_INITIALIZER, 0, {}, ""};                                          \
    int sym##_sup(const void *s, char *w, size_t l) { return supports_layer(&sym##_k, s, w, l); }             \
    int sym##_run(const void *s, const void *a, void *st) { return run_layer(&sym##_k, s, a, st); }

#define FP8_ATOMIC_RECIPE                                                                                       \
    "fused_moe.layer_v1(w13=up_gate,g1=f32,act=f32,mid=fp8_token,weight=combine,slot=f32,combine=f32_any,fn=ulp2)"

FMCU_KERNEL_FNS(vllm, MOECTS_LAYER_RECIPE_V1, BUG_NONE)
FMCU_KERNEL_FNS(fp8_atomic, FP8_ATOMIC_RECIPE, BUG_NONE)
FMCU_KERNEL_FNS(gate_up_swapped, MOECTS_LAYER_RECIPE_V1, BUG_GATE_UP_SWAPPED)
FMCU_KERNEL_FNS(weight_twice, MOECTS_LAYER_RECIPE_V1, BUG_WEIGHT_TWICE)
FMCU_KERNEL_FNS(fp8_atomic_weight_twice, FP8_ATOMIC_RECIPE, BUG_WEIGHT_TWICE)

} // namespace

int fmcu::device_cr_table(CrTab *out) { return cr_table(out); }

/* Descriptors: exact kernels declare no class ({0, 0}) and batch invariance; the atomic ones (24, RNE).
 * Every one exposes its intermediates (MOECTS_KERNEL_INTERMEDIATES: g1_out, act_out, mid_out, y_out
 * written by the stages where the args give them, device pointers). */
#define FMCU_DESC(sym, cname, nm, rec, bugtext, bits, fl)                                                       \
    extern const moects_kernel cname;                                                                          \
    const moects_kernel cname = {MOECTS_KERNEL_ABI_VERSION, nm, MOECTS_OP_FUSED_MOE, MOECTS_DEVICE_CUDA, rec,  \
                                 {0, 0}, bugtext, sym##_sup, sym##_run, {bits, 0}, last_error, {0, MOECTS_BF16}, fl};
extern "C" {
FMCU_DESC(vllm, moects_cuda_fused_moe_vllm, "cuda.fused_moe.vllm", MOECTS_LAYER_RECIPE_V1, NULL, 0,
          MOECTS_KERNEL_BATCH_INVARIANT | MOECTS_KERNEL_INTERMEDIATES)
FMCU_DESC(fp8_atomic, moects_cuda_fused_moe_fp8_atomic, "cuda.fused_moe.fp8_atomic", FP8_ATOMIC_RECIPE, NULL, 24,
          MOECTS_KERNEL_INTERMEDIATES)
FMCU_DESC(gate_up_swapped, moects_cuda_mutant_fused_moe_gate_up_swapped, "cuda.mutant.fused_moe.gate_up_swapped",
          MOECTS_LAYER_RECIPE_V1, "W13's gate rows read as up and up rows as gate ([up | gate] under a [gate | up] claim)",
          0, MOECTS_KERNEL_BATCH_INVARIANT | MOECTS_KERNEL_INTERMEDIATES)
FMCU_DESC(weight_twice, moects_cuda_mutant_fused_moe_weight_twice, "cuda.mutant.fused_moe.weight_twice",
          MOECTS_LAYER_RECIPE_V1, "the router weight applied in GEMM2's epilogue and again in the combine", 0,
          MOECTS_KERNEL_BATCH_INVARIANT | MOECTS_KERNEL_INTERMEDIATES)
FMCU_DESC(fp8_atomic_weight_twice, moects_cuda_mutant_fused_moe_fp8_atomic_weight_twice,
          "cuda.mutant.fused_moe.fp8_atomic_weight_twice", FP8_ATOMIC_RECIPE,
          "the router weight applied in GEMM2's epilogue and again in the atomic combine", 24, MOECTS_KERNEL_INTERMEDIATES)
}
