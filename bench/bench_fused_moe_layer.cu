/* bench_fused_moe_layer.cu: the CUDA fused MoE layer kernels (gpu/cuda/fused_moe.cu:
 * cuda.fused_moe.vllm, cuda.fused_moe.fp8_atomic) timed against the same layer composed from cuBLAS
 * BF16 GEMMs, at the registered models' shapes (issue 29 item 4; docs/perf.md "Fused MoE layer against cuBLAS").
 *
 *   bench_fused_moe_layer [--root DIR] [--models a,b,...|all] [--tokens 1,16,128,1024] [--formats bf16,mxfp4]
 *                         [--reps R] [--warmup W] [--cell-ms MS] [--budget-s S]
 *
 * Shapes: each model's grid layouts of the registry (the layouts holding fused_moe.bf16/<model>/<layout>/t128:
 * tp8 or its largest TP, and ep8), rank 0, H, I, E, E_global, k, activation, L, alpha and biases of
 * that case, T replaced by each --tokens value. Data: x and BF16 weights uniform in [-1, 1) (weights
 * scaled by 1/sqrt(K)); MXFP4 weights random E2M1 codes with UE8M0 scales near 1/sqrt(K); routing
 * uniform (k distinct global experts a token; under EP only the rank's own are computed), weights
 * random positive summing to 1.
 *
 * The baseline, one call (every step on the stream, timed as a whole): gather the local (token, slot)
 * pairs' x rows grouped by expert (BF16), GEMM1 [rows, H] x W13[e]^T -> BF16 [rows, N1] (cuBLAS
 * grouped BF16 x BF16, FP32 compute: moects__cublas_moe_gemm, the house's loader and math mode), a
 * CUDA activation kernel (+ b13, CUDA expf/tanhf/erff, [gate | up]) -> BF16 [rows, I], GEMM2 -> BF16
 * [rows, H], a combine kernel (FP32, + b2, times the router weight, slot order) -> BF16 [T, H]. Its
 * weights are BF16: an MXFP4 case's weights dequantized once, untimed. The routing's sort (rows per
 * expert, the permutation) is computed on the host and uploaded once, untimed: an engine's
 * align/sort kernel is not in the baseline. The layer kernels take topk_ids as they are and each
 * run() call (timed whole) includes its slot mapping, its workspace cudaMallocAsync / cudaFreeAsync
 * and its final stream synchronisation.
 *
 * Timing: CUDA events around each call on one stream, --warmup calls first (default 2), then --reps
 * (default 10, at least 10) timed calls: the median in ms. A cell whose first call times t with
 * t * (warmup + reps) > --cell-ms (default 2000) prints that one call's time, marked "(1 run)"; a
 * cell whose time, estimated from the previous T of the same row linearly in T, is over --cell-ms
 * is not run ("skip"). After --budget-s (default 100) seconds the remaining rows are not run (said
 * on the last line). cuda.fused_moe.vllm is deliberately slow: one thread per output element, K in
 * order into an exact fixed-point accumulator (PASS_EXACT), no tiling, no tensor cores; the table
 * measures it, it does not race it. cuda.fused_moe.fp8_atomic: one thread per element, FP32 sums of
 * double products, no tensor cores either.
 *
 * Output: a Markdown table on stdout (docs/perf.md-ready), progress on stderr. Column "check": the
 * baseline against cuda.fused_moe.vllm on the same weights (max |diff| / max |vllm|; BF16 roundings
 * of GEMM outputs give about 1e-2), so a broken baseline shows. Exit 0, 1 on a CUDA/cuBLAS error, 2
 * on bad usage. Needs a GPU and libcublas.so.13; MOECTS_ROOT or --root names the checkout. */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <algorithm>
#include <string>
#include <vector>

#include "cuda_util.cuh"
extern "C" {
#include "moects_cases.h"
#include "moects_kernel.h"
extern const moects_kernel moects_cuda_fused_moe_vllm;
extern const moects_kernel moects_cuda_fused_moe_fp8_atomic;
}

namespace {

/* ---- device helpers: fill, dequantize, the baseline's small kernels ---- */

__device__ __forceinline__ uint32_t hash32(uint64_t i, uint64_t seed)
{
    uint64_t z = i * 0x9E3779B97F4A7C15ull + seed;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (uint32_t)((z ^ (z >> 31)) >> 32);
}

/* p[i] = bf16(scale * U[-1, 1)), n elements. */
__global__ void fill_bf16(__nv_bfloat16 *p, size_t n, uint64_t seed, float scale)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = __float2bfloat16_rn(scale * ((float)hash32(i, seed) * 4.656612873e-10f - 1.0f));
}

/* p[i] = lo + hash % span (bytes: codes with span 256, UE8M0 scales near lo). */
__global__ void fill_u8(uint8_t *p, size_t n, uint64_t seed, uint32_t lo, uint32_t span)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = (uint8_t)(lo + hash32(i, seed) % span);
}

__device__ __forceinline__ float e2m1(uint32_t c)
{
    const uint32_t e = (c >> 1) & 3u, m = c & 1u;
    const uint32_t mag = e == 0 ? (m ? 0x3F000000u : 0u) : ((e + 126u) << 23 | m << 22);
    return __uint_as_float(mag | (c & 8u) << 28);
}

/* p[i] = base + scale * U[-1, 1) (FP32 biases; base 1, scale 0: the global scales). */
__global__ void fill_f32(float *p, size_t n, uint64_t seed, float base, float scale)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = base + scale * ((float)hash32(i, seed) * 4.656612873e-10f - 1.0f);
}

/* MXFP4 [rows, K] (codes low nibble first, UE8M0 per 32 along K; scale bytes 1..254 here) -> BF16. */
__global__ void dequant_mx(const uint8_t *q, const uint8_t *s, __nv_bfloat16 *out, size_t rows, size_t K)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < rows * K; i += (size_t)gridDim.x * blockDim.x) {
        const size_t r = i / K, k = i % K;
        const uint32_t byte = q[r * (K / 2) + k / 2];
        const float sc = __uint_as_float((uint32_t)s[r * (K / 32) + k / 32] << 23);
        out[i] = __float2bfloat16_rn(e2m1(k & 1 ? byte >> 4 : byte & 15u) * sc);
    }
}

/* xs[r, :] = x[perm[r] / k, :], BF16 rows of H. */
__global__ void gather_rows(const __nv_bfloat16 *x, const int32_t *perm, int64_t k, int64_t H, int64_t R, __nv_bfloat16 *xs)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < R * H; i += (int64_t)gridDim.x * blockDim.x)
        xs[i] = x[(perm[i / H] / k) * H + i % H];
}

struct ActArgs {
    int act;
    float L, a;
    int64_t R, I, N1;
    const __nv_bfloat16 *g1;
    const float *b13; /* [E, N1] or NULL */
    const int32_t *row_e;
    __nv_bfloat16 *mid;
};

__device__ __forceinline__ float sigm(float v) { return 1.0f / (1.0f + expf(-v)); }

/* The activations of moects_types.h in plain CUDA float math ([gate | up] halves). */
__device__ float act_val(const ActArgs &p, float g, float u)
{
    switch (p.act) {
    case MOECTS_ACT_SILU: return g * sigm(g) * u;
    case MOECTS_ACT_GELU_TANH: return 0.5f * g * (1.0f + tanhf(0.7978845608f * (g + 0.044715f * g * g * g))) * u;
    case MOECTS_ACT_GELU_ERF: return 0.5f * g * (1.0f + erff(g * 0.7071067812f)) * u;
    case MOECTS_ACT_RELU2: return g > 0.0f ? g * g : 0.0f;
    case MOECTS_ACT_SILU_CLAMP: g = fminf(g, p.L); return g * sigm(g) * fminf(fmaxf(u, -p.L), p.L);
    case MOECTS_ACT_GPT_OSS: g = fminf(g, p.L); return (fminf(fmaxf(u, -p.L), p.L) + 1.0f) * g * sigm(p.a * g);
    default: return p.a * tanhf(g / p.a) * sigm(g) * (p.L > 0.0f ? p.L * tanhf(u / p.L) : u); /* SITU */
    }
}

__global__ void act_kernel(ActArgs p)
{
    const int gated = p.act != MOECTS_ACT_RELU2;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < p.R * p.I; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / p.I, c = i % p.I, e = p.row_e[r];
        float g = __bfloat162float(p.g1[r * p.N1 + c]), u = gated ? __bfloat162float(p.g1[r * p.N1 + p.I + c]) : 0.0f;
        if (p.b13) g += p.b13[e * p.N1 + c], u += gated ? p.b13[e * p.N1 + p.I + c] : 0.0f;
        p.mid[i] = __float2bfloat16_rn(act_val(p, g, u));
    }
}

/* out[t, n] = bf16(sum over the pair's valid slots j of w[t, j] (y[row, n] + b2[e, n])), FP32, slot order. */
__global__ void combine_rows(const __nv_bfloat16 *y, const int32_t *inv, const int32_t *row_e, const float *w,
                             const float *b2, int64_t T, int64_t k, int64_t H, __nv_bfloat16 *out)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < T * H; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t t = i / H, n = i % H;
        float acc = 0.0f;
        for (int64_t j = 0; j < k; j++) {
            const int32_t r = inv[t * k + j];
            if (r < 0) continue;
            const float v = __bfloat162float(y[(int64_t)r * H + n]) + (b2 ? b2[(int64_t)row_e[r] * H + n] : 0.0f);
            acc += w[t * k + j] * v;
        }
        out[i] = __float2bfloat16_rn(acc);
    }
}

unsigned grid_for(int64_t n) { return (unsigned)std::min<int64_t>(n / 256 + 1, 65536); }

/* ---- options ---- */

struct Opt {
    std::string root;
    std::vector<std::string> models;
    std::vector<int64_t> tokens{1, 16, 128, 1024};
    int bf16 = 1, mxfp4 = 1, reps = 10, warmup = 2;
    double cell_ms = 2000, budget_s = 100;
};

const char *const DEFAULT_MODELS[] = {"deepseek-v3", "kimi-k3", "gpt-oss-120b", "qwen3-235b-a22b", "mixtral-8x7b",
                                      "nemotron-3-nano-30b-a3b"};

std::vector<std::string> split(const char *s)
{
    std::vector<std::string> v;
    for (const char *p = s; *p;) {
        const char *c = strchr(p, ',');
        const size_t n = c ? (size_t)(c - p) : strlen(p);
        if (n) v.emplace_back(p, n);
        p += n + (c ? 1 : 0);
    }
    return v;
}

int parse(int argc, char **argv, Opt *o)
{
    const char *r = getenv("MOECTS_ROOT");
    o->root = r ? r : ".";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) return -1;
        i++;
        if (!strcmp(a, "--root")) o->root = v;
        else if (!strcmp(a, "--models")) o->models = split(v);
        else if (!strcmp(a, "--tokens")) {
            o->tokens.clear();
            for (const std::string &t : split(v)) o->tokens.push_back(atoll(t.c_str()));
        } else if (!strcmp(a, "--formats")) {
            const std::string f = std::string(",") + v + ",";
            o->bf16 = f.find(",bf16,") != std::string::npos, o->mxfp4 = f.find(",mxfp4,") != std::string::npos;
        } else if (!strcmp(a, "--reps")) o->reps = atoi(v);
        else if (!strcmp(a, "--warmup")) o->warmup = atoi(v);
        else if (!strcmp(a, "--cell-ms")) o->cell_ms = atof(v);
        else if (!strcmp(a, "--budget-s")) o->budget_s = atof(v);
        else return -1;
    }
    if (o->models.empty()) o->models.assign(std::begin(DEFAULT_MODELS), std::end(DEFAULT_MODELS));
    if (o->reps < 10) o->reps = 10;
    if (o->warmup < 1) o->warmup = 1;
    return o->tokens.empty() || (!o->bf16 && !o->mxfp4) ? -1 : 0;
}

double now_s()
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

} // namespace

namespace {

/* ---- device memory of one row or layout, freed together ---- */

struct Pool {
    std::vector<void *> p;
    template <class X> X *get(size_t n)
    {
        void *q = NULL;
        if (cudaMalloc(&q, n ? n * sizeof(X) : 1) != cudaSuccess) return cudaGetLastError(), (X *)NULL;
        p.push_back(q);
        return static_cast<X *>(q);
    }
    ~Pool()
    {
        for (void *q : p) cudaFree(q);
    }
};

/* The weights of one (model, layout, format): the kernels' and the baseline's BF16 ones (the same
 * buffers for BF16; dequantized copies for MXFP4). */
struct Weights {
    void *w13 = NULL, *w2 = NULL;
    uint8_t *s13 = NULL, *s2 = NULL;
    __nv_bfloat16 *w13b = NULL, *w2b = NULL;
    float *b13 = NULL, *b2 = NULL, *gscale = NULL;
};

int64_t n1_of(const moects_case &c) { return c.activation == MOECTS_ACT_RELU2 ? c.inter : 2 * c.inter; }

/* One weight matrix [rows, K]: BF16 scaled by 1/sqrt(K), or MXFP4 with scales near 0.2/sqrt(K) and its
 * BF16 dequantization. 0, or -1 when device memory is short. */
int make_matrix(Pool &pl, int mx, size_t rows, size_t K, uint64_t seed, void **w, uint8_t **s, __nv_bfloat16 **wb,
                cudaStream_t st)
{
    const unsigned g = grid_for((int64_t)std::min<size_t>(rows * K, (size_t)1 << 30));
    if (!mx) {
        __nv_bfloat16 *b = pl.get<__nv_bfloat16>(rows * K);
        if (!b) return -1;
        fill_bf16<<<g, 256, 0, st>>>(b, rows * K, seed, 1.0f / sqrtf((float)K));
        return *w = b, *wb = b, 0;
    }
    uint8_t *q = pl.get<uint8_t>(rows * K / 2), *sc = pl.get<uint8_t>(rows * K / 32);
    __nv_bfloat16 *b = pl.get<__nv_bfloat16>(rows * K);
    if (!q || !sc || !b) return -1;
    const int lo = 127 + (int)floorf(log2f(0.2f / sqrtf((float)K)));
    fill_u8<<<g, 256, 0, st>>>(q, rows * K / 2, seed, 0, 256);
    fill_u8<<<g, 256, 0, st>>>(sc, rows * K / 32, seed + 1, (uint32_t)lo, 2);
    dequant_mx<<<g, 256, 0, st>>>(q, sc, b, rows, K);
    return *w = q, *s = sc, *wb = b, 0;
}

int make_weights(const moects_case &c, int mx, Pool &pl, Weights *w, cudaStream_t st)
{
    const size_t E = (size_t)c.E, N1 = (size_t)n1_of(c), H = (size_t)c.H, I = (size_t)c.inter;
    if (make_matrix(pl, mx, E * N1, H, 11, &w->w13, &w->s13, &w->w13b, st) ||
        make_matrix(pl, mx, E * H, I, 23, &w->w2, &w->s2, &w->w2b, st) || !(w->gscale = pl.get<float>(E)))
        return -1;
    fill_f32<<<1, 256, 0, st>>>(w->gscale, E, 0, 1.0f, 0.0f);
    if (c.has_bias) {
        if (!(w->b13 = pl.get<float>(E * N1)) || !(w->b2 = pl.get<float>(E * H))) return -1;
        fill_f32<<<grid_for((int64_t)(E * N1)), 256, 0, st>>>(w->b13, E * N1, 31, 0.0f, 0.1f);
        fill_f32<<<grid_for((int64_t)(E * H)), 256, 0, st>>>(w->b2, E * H, 37, 0.0f, 0.1f);
    }
    return MOECTS_CU_LAUNCH("weights") || MOECTS_CU(cudaStreamSynchronize(st)) ? -2 : 0;
}

/* ---- routing (host): uniform distinct global ids, the baseline's sort ---- */

struct Route {
    std::vector<int32_t> ids, map, perm, inv, row_e;
    std::vector<float> w;
    std::vector<moects__moe_seg> seg;
};

uint64_t g_rng = 0x2545F4914F6CDD1Dull;
uint32_t rnd()
{
    g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
    return (uint32_t)(g_rng >> 32);
}

void make_route(const moects_case &c, int64_t T, Route *r)
{
    const int64_t k = c.k, P = T * k;
    r->ids.assign((size_t)P, 0), r->w.assign((size_t)P, 0.0f), r->inv.assign((size_t)P, -1);
    if (c.has_map) {
        r->map.assign((size_t)c.E_global, -1);
        moects__expert_map(c.E_global, c.ep_size, c.ep_rank, r->map.data());
    }
    std::vector<std::vector<int32_t>> by_e((size_t)c.E);
    for (int64_t t = 0; t < T; t++) {
        float sum = 0.0f;
        for (int64_t j = 0; j < k; j++) {
            int32_t id;
            bool dup;
            do { /* k distinct ids */
                id = (int32_t)(rnd() % (uint32_t)c.E_global), dup = false;
                for (int64_t q = 0; q < j; q++) dup |= r->ids[(size_t)(t * k + q)] == id;
            } while (dup);
            r->ids[(size_t)(t * k + j)] = id;
            sum += r->w[(size_t)(t * k + j)] = 0.05f + (float)(rnd() % 1000) * 1e-3f;
            const int32_t e = c.has_map ? r->map[(size_t)id] : id;
            if (e >= 0) by_e[(size_t)e].push_back((int32_t)(t * k + j));
        }
        for (int64_t j = 0; j < k; j++) r->w[(size_t)(t * k + j)] /= sum;
    }
    r->perm.clear(), r->row_e.clear(), r->seg.clear();
    for (int64_t e = 0; e < c.E; e++) {
        r->seg.push_back({(long)r->perm.size(), (long)by_e[(size_t)e].size(), (int)e, 1.0f});
        for (int32_t pi : by_e[(size_t)e]) {
            r->inv[(size_t)pi] = (int32_t)r->perm.size();
            r->perm.push_back(pi), r->row_e.push_back((int32_t)e);
        }
    }
}

/* ---- one row: T tokens on one (model, layout, format) ---- */

/* The baseline's buffers and call (the header comment's steps). */
struct Base {
    const moects__cublas *cb;
    cudaStream_t st;
    const moects_case *c;
    const Route *rt;
    const Weights *w;
    int64_t T, R, N1;
    const __nv_bfloat16 *x;
    const int32_t *perm, *inv, *row_e;
    const float *tw;
    __nv_bfloat16 *xs, *g1, *mid, *y, *out;
    void **ptrs;
    char why[256];
};

int run_base(void *p)
{
    Base &b = *static_cast<Base *>(p);
    const moects_case &c = *b.c;
    const int nseg = (int)b.rt->seg.size();
    gather_rows<<<grid_for(b.R * c.H), 256, 0, b.st>>>(b.x, b.perm, c.k, c.H, b.R, b.xs);
    if (moects__cublas_moe_gemm(b.cb, b.st, b.rt->seg.data(), nseg, (long)b.N1, (long)c.H, MOECTS__CUDA_R_16BF, b.xs,
                                b.w->w13b, b.g1, MOECTS__CUDA_R_16BF, b.ptrs, b.why, sizeof b.why))
        return -1;
    const ActArgs a = {(int)c.activation, c.act_limit, c.act_alpha, b.R, c.inter, b.N1, b.g1, b.w->b13, b.row_e, b.mid};
    act_kernel<<<grid_for(b.R * c.inter), 256, 0, b.st>>>(a);
    if (moects__cublas_moe_gemm(b.cb, b.st, b.rt->seg.data(), nseg, (long)c.H, (long)c.inter, MOECTS__CUDA_R_16BF, b.mid,
                                b.w->w2b, b.y, MOECTS__CUDA_R_16BF, b.ptrs, b.why, sizeof b.why))
        return -1;
    combine_rows<<<grid_for(b.T * c.H), 256, 0, b.st>>>(b.y, b.inv, b.row_e, b.tw, b.w->b2, b.T, c.k, c.H, b.out);
    return MOECTS_CU_LAUNCH("baseline") ? -1 : 0;
}

struct KRun {
    const moects_kernel *k;
    moects_fused_moe_shape s;
    moects_fused_moe_args a;
    cudaStream_t st;
};

int run_kern(void *p)
{
    KRun &r = *static_cast<KRun *>(p);
    if (r.k->run(&r.s, &r.a, r.st) == 0) return 0;
    fprintf(stderr, "%s: %s\n", r.k->name, r.k->last_error ? r.k->last_error() : "run failed");
    return -1;
}

/* A cell's time: median ms of reps calls, one call's ms (runs 1), an estimate (skipped), or an error. */
struct Cell {
    double ms = -1;
    int runs = 0, skipped = 0, error = 0;
    std::string refused;
};

int one_call(int (*fn)(void *), void *ctx, cudaStream_t st, cudaEvent_t ev[2], double *ms)
{
    float f = 0;
    if (MOECTS_CU(cudaEventRecord(ev[0], st)) || fn(ctx) || MOECTS_CU(cudaEventRecord(ev[1], st)) ||
        MOECTS_CU(cudaEventSynchronize(ev[1])) || MOECTS_CU(cudaEventElapsedTime(&f, ev[0], ev[1])))
        return -1;
    return *ms = f, 0;
}

/* est_ms: this cell's time guessed from the row before (< 0: none); over cell_ms: not run. */
Cell time_cell(int (*fn)(void *), void *ctx, cudaStream_t st, const Opt &o, double est_ms)
{
    Cell c;
    if (est_ms > o.cell_ms) return c.ms = est_ms, c.skipped = 1, c;
    cudaEvent_t ev[2];
    if (MOECTS_CU(cudaEventCreate(&ev[0])) || MOECTS_CU(cudaEventCreate(&ev[1]))) return c.error = 1, c;
    std::vector<double> t((size_t)o.reps);
    double first = 0;
    if (one_call(fn, ctx, st, ev, &first)) c.error = 1;
    else if (first * (o.warmup + o.reps) > o.cell_ms) c.ms = first, c.runs = 1;
    else {
        for (int i = 1; i < o.warmup && !c.error; i++) c.error = fn(ctx) != 0;
        for (int i = 0; i < o.reps && !c.error; i++) c.error = one_call(fn, ctx, st, ev, &t[(size_t)i]) != 0;
        std::sort(t.begin(), t.end());
        c.ms = o.reps % 2 ? t[(size_t)o.reps / 2] : 0.5 * (t[(size_t)o.reps / 2 - 1] + t[(size_t)o.reps / 2]);
        c.runs = o.reps;
    }
    cudaEventDestroy(ev[0]), cudaEventDestroy(ev[1]);
    return c;
}

std::string cell_text(const Cell &c)
{
    char s[96];
    if (!c.refused.empty()) return "refused";
    if (c.error) return "error";
    if (c.skipped) snprintf(s, sizeof s, "skip (est. %.0f)", c.ms);
    else snprintf(s, sizeof s, c.ms < 1 ? "%.4f%s" : c.ms < 100 ? "%.3f%s" : "%.1f%s", c.ms, c.runs == 1 ? " (1 run)" : "");
    return s;
}

std::string ratio_text(const Cell &k, const Cell &base)
{
    if (k.ms <= 0 || k.skipped || k.error || !k.refused.empty() || base.ms <= 0 || base.runs == 0) return "-";
    char s[32];
    const double r = k.ms / base.ms;
    snprintf(s, sizeof s, r < 10 ? "%.2f" : "%.0f", r);
    return s;
}

/* max |a - b| / max |b| over n BF16 values (device), or -1 on a CUDA error. */
double rel_diff(const __nv_bfloat16 *a, const __nv_bfloat16 *b, size_t n)
{
    std::vector<__nv_bfloat16> ha(n), hb(n);
    if (MOECTS_CU(cudaMemcpy(ha.data(), a, n * 2, cudaMemcpyDeviceToHost)) ||
        MOECTS_CU(cudaMemcpy(hb.data(), b, n * 2, cudaMemcpyDeviceToHost)))
        return -1;
    double md = 0, mb = 0;
    for (size_t i = 0; i < n; i++) {
        const double x = __bfloat162float(ha[i]), y = __bfloat162float(hb[i]);
        md = std::max(md, fabs(x - y)), mb = std::max(mb, fabs(y));
    }
    return mb > 0 ? md / mb : md;
}

/* Per row kind (baseline, vllm, fp8_atomic), the last timed (T, ms) of the current (model, layout,
 * format), for the next T's estimate. */
struct Last {
    int64_t T = 0;
    double ms = -1;
    double est(int64_t T2) const { return ms > 0 && T > 0 ? ms * (double)T2 / (double)T : -1; }
    void set(int64_t T2, const Cell &c)
    {
        if (c.ms > 0 && !c.skipped && !c.error) T = T2, ms = c.ms;
        else if (c.skipped) T = T2, ms = c.ms;
    }
};

template <class X> X *upload(Pool &pl, const std::vector<X> &v)
{
    X *d = pl.get<X>(v.size());
    if (d && !v.empty() && MOECTS_CU(cudaMemcpy(d, v.data(), v.size() * sizeof(X), cudaMemcpyHostToDevice))) return NULL;
    return d;
}

moects_fused_moe_shape shape_of(const moects_case &c, int64_t T)
{
    moects_fused_moe_shape s;
    memset(&s, 0, sizeof s);
    s.T = T, s.k = c.k, s.H = c.H, s.inter = c.inter, s.E = c.E, s.E_global = c.E_global, s.has_expert_map = c.has_map;
    s.format = c.layer_format, s.activation = c.activation, s.act_limit = c.act_limit, s.act_alpha = c.act_alpha;
    s.has_bias = c.has_bias, s.out_dtype = MOECTS_BF16;
    return s;
}

/* Time one kernel on the row's inputs (refused: the reason in the cell). */
Cell kernel_cell(const moects_kernel *k, const moects_fused_moe_shape &s, const moects_fused_moe_args &a, cudaStream_t st,
                 const Opt &o, double est)
{
    char why[200] = "";
    if (!k->supports(&s, why, sizeof why)) {
        Cell c;
        c.refused = why;
        return c;
    }
    KRun r = {k, s, a, st};
    return time_cell(run_kern, &r, st, o, est);
}

/* One table row; -1 on a CUDA or cuBLAS error (the device may be unusable), -2 when memory is short. */
int row(const Opt &o, const moects_case &c, const Weights &w, int64_t T, const moects__cublas *cb, cudaStream_t st,
        Last last[3], std::vector<std::string> *notes)
{
    Route rt;
    make_route(c, T, &rt);
    Pool pl;
    const int64_t R = (int64_t)rt.perm.size(), N1 = n1_of(c), H = c.H;
    __nv_bfloat16 *x = pl.get<__nv_bfloat16>((size_t)(T * H)), *out_k = pl.get<__nv_bfloat16>((size_t)(T * H));
    Base b = {cb, st, &c, &rt, &w, T, R, N1, x, upload(pl, rt.perm), upload(pl, rt.inv), upload(pl, rt.row_e),
              upload(pl, rt.w), pl.get<__nv_bfloat16>((size_t)(R * H)), pl.get<__nv_bfloat16>((size_t)(R * N1)),
              pl.get<__nv_bfloat16>((size_t)(R * c.inter)), pl.get<__nv_bfloat16>((size_t)(R * H)),
              pl.get<__nv_bfloat16>((size_t)(T * H)), pl.get<void *>(3 * rt.seg.size()), ""};
    const int32_t *ids = upload(pl, rt.ids), *map = c.has_map ? upload(pl, rt.map) : NULL;
    if (!x || !out_k || !b.perm || !b.inv || !b.row_e || !b.tw || !b.xs || !b.g1 || !b.mid || !b.y || !b.out || !b.ptrs ||
        !ids || (c.has_map && !map))
        return -2;
    fill_bf16<<<grid_for(T * H), 256, 0, st>>>(x, (size_t)(T * H), 1000 + (uint64_t)T, 1.0f);
    if (MOECTS_CU_LAUNCH("fill x") || MOECTS_CU(cudaStreamSynchronize(st))) return -1;
    const moects_fused_moe_shape s = shape_of(c, T);
    const moects_fused_moe_args a = {reinterpret_cast<const uint16_t *>(x), ids, b.tw, map, w.w13, w.s13, w.w2, w.s2,
                                     w.b13, w.b2, w.gscale, out_k, NULL, NULL};
    const Cell cb_cell = time_cell(run_base, &b, st, o, last[0].est(T));
    if (cb_cell.error) fprintf(stderr, "baseline: %s\n", b.why);
    const Cell v = kernel_cell(&moects_cuda_fused_moe_vllm, s, a, st, o, last[1].est(T));
    double check = -1;
    if (v.runs > 0 && cb_cell.runs > 0) check = rel_diff(b.out, out_k, (size_t)(T * H));
    const Cell f = kernel_cell(&moects_cuda_fused_moe_fp8_atomic, s, a, st, o, last[2].est(T));
    last[0].set(T, cb_cell), last[1].set(T, v), last[2].set(T, f);
    const std::string nv = v.refused.empty() ? "" : std::string("cuda.fused_moe.vllm refuses: ") + v.refused;
    const std::string nf = f.refused.empty() ? "" : std::string("cuda.fused_moe.fp8_atomic refuses: ") + f.refused;
    for (const std::string &n : {nv, nf})
        if (!n.empty() && std::find(notes->begin(), notes->end(), n) == notes->end()) notes->push_back(n);
    char chk[32] = "-";
    if (check >= 0) snprintf(chk, sizeof chk, "%.1e", check);
    printf("| %s | %s | %s | %lld | %lld | %s | %s | %s | %s | %s | %s |\n", c.model, c.layout,
           moects__layer_format_name(c.layer_format), (long long)T, (long long)R, cell_text(cb_cell).c_str(),
           cell_text(v).c_str(), ratio_text(v, cb_cell).c_str(), cell_text(f).c_str(), ratio_text(f, cb_cell).c_str(), chk);
    fflush(stdout);
    return cb_cell.error || v.error || f.error ? -1 : 0;
}

/* The registry's grid layouts of a model: its fused_moe.bf16/<model>/<layout>/t128 cases. */
std::vector<moects_case> grid_layouts(const moects_case_list &all, const std::string &model)
{
    std::vector<moects_case> v;
    for (size_t i = 0; i < all.n; i++) {
        const moects_case &c = all.v[i];
        char id[192];
        if (c.op != MOECTS_OP_FUSED_MOE || model != c.model) continue;
        snprintf(id, sizeof id, "fused_moe.bf16/%s/%s/t128", c.model, c.layout);
        if (!strcmp(id, c.id)) v.push_back(c);
    }
    return v;
}

int has_mxfp4(const moects_case_list &all, const moects_case &c)
{
    char id[192];
    snprintf(id, sizeof id, "fused_moe.mxfp4/%s/%s/t128", c.model, c.layout);
    for (size_t i = 0; i < all.n; i++)
        if (!strcmp(all.v[i].id, id)) return 1;
    return 0;
}

/* Every T of one (model, layout, format): its weights once, then a row per T until the budget is spent
 * (*stopped). 0, or 1 on a CUDA or cuBLAS error. */
int run_rows(const Opt &o, const moects_case &lay, int mx, const moects__cublas *cb, cudaStream_t st, double t0,
             std::vector<std::string> *notes, int *stopped)
{
    moects_case c = lay;
    c.layer_format = mx ? MOECTS_LAYER_MXFP4 : MOECTS_LAYER_BF16;
    const char *fmt = moects__layer_format_name(c.layer_format);
    Pool pl;
    Weights w;
    const int wr = make_weights(c, mx, pl, &w, st);
    if (wr) {
        printf("| %s | %s | %s | - | - | %s | | | | | |\n", c.model, c.layout, fmt, wr == -1 ? "out of device memory" : "error");
        return wr == -1 ? 0 : 1;
    }
    Last last[3];
    for (int64_t T : o.tokens) {
        if (now_s() - t0 > o.budget_s) {
            *stopped = 1;
            notes->push_back("budget of " + std::to_string((int)o.budget_s) + " s spent: stopped before " + c.model + " " +
                             c.layout + " " + fmt + " T=" + std::to_string(T));
            return 0;
        }
        fprintf(stderr, "%s %s %s T=%lld (%.0f s)\n", c.model, c.layout, fmt, (long long)T, now_s() - t0);
        const int r = row(o, c, w, T, cb, st, last, notes);
        if (r == -2) printf("| %s | %s | %s | %lld | - | out of device memory | | | | | |\n", c.model, c.layout, fmt, (long long)T);
        if (r == -1) return 1;
    }
    return 0;
}

void header(const Opt &o)
{
    cudaDeviceProp p;
    memset(&p, 0, sizeof p);
    int dev = 0;
    cudaGetDevice(&dev), cudaGetDeviceProperties(&p, dev);
    time_t t = time(NULL);
    char date[32];
    strftime(date, sizeof date, "%Y-%m-%d", gmtime(&t));
    const char *commit = getenv("MOECTS_COMMIT");
    printf("## Fused MoE layer: CUDA layer kernels against a cuBLAS BF16 layer\n\n");
    printf("- `bench_fused_moe_layer`, commit `%s`, %s, %s\n", commit ? commit : "unknown", date, p.name);
    printf("- median of %d calls after %d warm-up (CUDA events, ms); a cell over %.0f ms: one call \"(1 run)\" or "
           "not run \"skip (est. ms)\"; ratio = kernel / cuBLAS layer (above 1: slower)\n",
           o.reps, o.warmup, o.cell_ms);
    printf("- cuBLAS layer: gather, grouped BF16 GEMM1 -> BF16, activation, grouped BF16 GEMM2 -> BF16, weighted FP32 "
           "combine; BF16 weights (MXFP4 dequantized, untimed); routing sort on the host, untimed\n");
    printf("- `cuda.fused_moe.vllm` is slow by design: one thread per output element, K in order into an exact "
           "fixed-point accumulator (PASS_EXACT), no tiling, no tensor cores; `cuda.fused_moe.fp8_atomic` is one thread "
           "per element too (FP32 sums, FP32 atomics). They are measured here, not tuned to win\n");
    printf("- check: max |cuBLAS layer - vllm| / max |vllm| on the same inputs (BF16 roundings: about 1e-2)\n\n");
    printf("| model | layout | weights | T | local slots | cuBLAS layer ms | vllm ms | vllm / cuBLAS | fp8_atomic ms | "
           "fp8_atomic / cuBLAS | check |\n|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
}

} // namespace

int main(int argc, char **argv)
{
    Opt o;
    if (parse(argc, argv, &o)) {
        fprintf(stderr, "usage: %s [--root DIR] [--models a,b|all] [--tokens 1,16,128,1024] [--formats bf16,mxfp4] "
                        "[--reps R] [--warmup W] [--cell-ms MS] [--budget-s S]\n", argv[0]);
        return 2;
    }
    moects_case_list all;
    memset(&all, 0, sizeof all);
    char err[512];
    if (moects__cases_builtin(o.root.c_str(), &all, err, sizeof err) < 0) return fprintf(stderr, "%s\n", err), 2;
    if (o.models.size() == 1 && o.models[0] == "all") {
        o.models.clear();
        for (size_t i = 0; i < all.n; i++)
            if (all.v[i].op == MOECTS_OP_FUSED_MOE &&
                std::find(o.models.begin(), o.models.end(), all.v[i].model) == o.models.end())
                o.models.push_back(all.v[i].model);
    }
    const moects__cublas *cb = moects__cublas_get(err, sizeof err);
    cudaStream_t st;
    if (!cb || MOECTS_CU(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking)))
        return fprintf(stderr, "bench_fused_moe_layer: %s\n", cb ? "no CUDA stream" : err), 1;
    header(o);
    const double t0 = now_s();
    std::vector<std::string> notes;
    int rc = 0, stopped = 0;
    for (size_t i = 0; i < o.models.size() && !rc && !stopped; i++) {
        const std::vector<moects_case> lays = grid_layouts(all, o.models[i]);
        if (lays.empty()) notes.push_back(o.models[i] + ": no fused_moe grid layout in the registry");
        for (size_t j = 0; j < lays.size() * 2 && !rc && !stopped; j++)
            if (j % 2 ? o.mxfp4 && has_mxfp4(all, lays[j / 2]) : o.bf16)
                rc = run_rows(o, lays[j / 2], (int)(j % 2), cb, st, t0, &notes, &stopped);
    }
    printf("\n");
    for (const std::string &n : notes) printf("- %s\n", n.c_str());
    printf("- %.0f s in all%s\n", now_s() - t0, rc ? "; stopped at a CUDA or cuBLAS error (stderr)" : "");
    moects__case_list_free(&all);
    return rc;
}
