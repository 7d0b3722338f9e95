/* ep_dispatch.cu: ep_dispatch_combine on CUDA over its own GPU transport, kernel
 * "cuda.ep_dispatch_combine.ipc" (recipe ep_dispatch_combine.fma_v1(order=expert); docs/ep_dispatch_combine.md
 * "The GPU transport") and its mutants (one known bug each, gpu/cuda/kernels.def).
 *
 * One call is one rank, a process of its own with its own CUDA context (harness/ops/ep_rank_cuda.c): on
 * a host with world GPUs rank r runs on GPU r, else every rank on GPU 0. DeepEP's intranode pair is the
 * model (deepseek-ai/DeepEP csrc/deep_ep.cpp Buffer::sync: each rank's NVLink buffer shared with its
 * peers by cudaIpcGetMemHandle / cudaIpcOpenMemHandle; csrc/kernels/intranode.cu notify_dispatch, dispatch,
 * combine): every rank cudaMallocs one buffer (below), the handles go round over the communicator
 * (moects' shared-memory transport), and every phase after is device code writing or reading the peers'
 * buffers directly, one phase from the next separated by cudaStreamSynchronize and the communicator's
 * barrier:
 *   1. counts: the rank's valid slots per expert, its row of the count matrix written into every peer;
 *   2. offsets: from the whole matrix, an exclusive scan: where this rank's rows for expert e start in the
 *      buffer of e's rank (that rank's earlier experts, then the earlier ranks' rows for e), each rank's
 *      total (more than its recv_cap: every rank refuses, as DeepEP asserts its buffer's capacity);
 *   3. dispatch: a block a slot writes x[t], its slot id and weight into the expert's rank's buffer at
 *      offset + the slot's index among this rank's slots for e (token order);
 *   4. experts: each rank copies its received rows to recv_x and recv_src (by local expert, source rank,
 *      token: order=expert) and turns them in place into y = bf16(x * expert_scale[e]);
 *   5. combine: on the token's rank, out[t][d] = bf16 of fmaf(y_j, w_j, acc) over its valid slots j in
 *      ascending order from +0, y_j read from the expert's rank's buffer where step 3 put the row.
 * The buffer of rank r (cap: its recv_cap): cnt int32 [world][E] (row s: rank s's slots per expert), rows
 * bf16 [cap][H], src int64 [cap], wt float [cap]; each part 16-byte aligned. */
#include <cuda_bf16.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cuda_util.cuh"
#include "moects_kernel.h"

namespace {

enum Bug { BUG_NONE, BUG_COUNT_PLUS_ONE, BUG_DROP_LAST_CHUNK, BUG_WEIGHTS_ON_SENDER, BUG_WEIGHTS_TWICE };
enum { MAXW = 64, CHUNK = 8, THREADS = 256 };

typedef moects_ep_dispatch_combine_shape Shape;
typedef moects_ep_dispatch_combine_args Args;

/* Every rank's buffer as this process sees it (its own, or a peer's opened IPC mapping). */
struct Peers {
    int32_t *cnt[MAXW];
    uint16_t *rows[MAXW];
    int64_t *src[MAXW];
    float *wt[MAXW];
};

__device__ __forceinline__ float bf16_f32(uint16_t b) { return __uint_as_float((uint32_t)b << 16); }

__device__ __forceinline__ uint16_t f32_bf16(float f)
{
    const __nv_bfloat16 b = __float2bfloat16_rn(f);
    return *reinterpret_cast<const uint16_t *>(&b);
}

/* The rank holding expert e (0 <= e < E): the last r with expert_first[r] <= e. */
__device__ __forceinline__ int owner(const int64_t *ef, int R, int64_t e)
{
    int r = 0;
    while (r + 1 < R && ef[r + 1] <= e) r++;
    return r;
}

/* 1. This rank's valid slots per expert, into mine [E] (zeroed). */
__global__ void count_kernel(const int32_t *ids, int64_t TK, int64_t E, int32_t *mine)
{
    const int64_t s = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (s < TK && ids[s] >= 0 && ids[s] < E) atomicAdd(&mine[ids[s]], 1);
}

/* 1. Block d writes this rank's count row into rank d's matrix (the mutant: every non-zero count + 1). */
__global__ void publish_kernel(Peers P, const int32_t *mine, int64_t E, int me, int bug)
{
    int32_t *row = P.cnt[blockIdx.x] + (int64_t)me * E;
    for (int64_t e = threadIdx.x; e < E; e += blockDim.x)
        row[e] = mine[e] + (bug == BUG_COUNT_PLUS_ONE && mine[e] > 0);
    __threadfence_system();
}

/* 2. From the count matrix cnt [R][E] (this rank's copy): off [E] where this rank's rows for e start in
 * e's rank's buffer, tot [R] every rank's rows, first [ne + 1] where this rank's local experts' rows start. */
__global__ void offsets_kernel(const int32_t *cnt, int R, int me, int64_t E, const int64_t *ef, int64_t *off,
                               int64_t *tot, int64_t *first)
{
    for (int64_t e = threadIdx.x; e < E; e += blockDim.x) {
        int64_t base = 0;
        for (int64_t e2 = ef[owner(ef, R, e)]; e2 < e; e2++)
            for (int s = 0; s < R; s++) base += cnt[(int64_t)s * E + e2];
        for (int s = 0; s < me; s++) base += cnt[(int64_t)s * E + e];
        off[e] = base;
    }
    for (int d = threadIdx.x; d < R; d += blockDim.x) {
        int64_t n = 0;
        for (int64_t e = ef[d]; e < ef[d + 1]; e++)
            for (int s = 0; s < R; s++) n += cnt[(int64_t)s * E + e];
        tot[d] = n;
    }
    for (int64_t le = threadIdx.x; le <= ef[me + 1] - ef[me]; le += blockDim.x) {
        int64_t n = 0;
        for (int64_t e = ef[me]; e < ef[me] + le; e++)
            for (int s = 0; s < R; s++) n += cnt[(int64_t)s * E + e];
        first[le] = n;
    }
}

struct Dispatch {
    const uint16_t *x;
    const int32_t *ids;
    const float *w;
    const int64_t *ef, *off;
    const int32_t *mine;
    int64_t *pos;  /* [T k]: each slot's row in its expert's rank's buffer */
    int32_t *dst;  /* [T k]: that rank, -1 for a slot routed nowhere */
    int64_t TK, k, H, E, slot0; /* slot0: this rank's first global slot id */
    int R, bug;
};

/* 3. Block s sends slot s's row (H bf16), slot id and weight to its expert's rank. */
__global__ void __launch_bounds__(THREADS) dispatch_kernel(Peers P, Dispatch D)
{
    __shared__ int64_t before;
    const int64_t s = blockIdx.x, e = D.ids[s];
    if (e < 0 || e >= D.E) {
        if (threadIdx.x == 0) D.dst[s] = -1;
        return;
    }
    if (threadIdx.x == 0) before = 0;
    __syncthreads();
    int64_t n = 0; /* this rank's earlier slots for e: the row's index in its run of rows */
    for (int64_t i = threadIdx.x; i < s; i += blockDim.x) n += D.ids[i] == e;
    atomicAdd(reinterpret_cast<unsigned long long *>(&before), (unsigned long long)n);
    __syncthreads();
    const int d = owner(D.ef, D.R, e);
    const int64_t at = D.off[e] + before;
    if (threadIdx.x == 0) D.dst[s] = d, D.pos[s] = at;
    if (D.bug == BUG_DROP_LAST_CHUNK && before >= D.mine[e] - D.mine[e] % CHUNK) return; /* never sent */
    const uint16_t *from = D.x + s / D.k * D.H;
    uint16_t *to = P.rows[d] + at * D.H;
    if (D.H % 8 == 0 && reinterpret_cast<uintptr_t>(from) % 16 == 0) {
        for (int64_t i = threadIdx.x; i < D.H / 8; i += blockDim.x)
            reinterpret_cast<uint4 *>(to)[i] = reinterpret_cast<const uint4 *>(from)[i];
    } else {
        for (int64_t i = threadIdx.x; i < D.H; i += blockDim.x) to[i] = from[i];
    }
    if (threadIdx.x == 0) P.src[d][at] = D.slot0 + s, P.wt[d][at] = D.w[s];
    __threadfence_system();
}

/* 4. Block i: received row i to recv_x and recv_src, then y = bf16(x * scale[e]) in place (the mutants:
 * times the weight it came with, rounded to BF16 again). Block 0 writes recv_count. */
__global__ void __launch_bounds__(THREADS) expert_kernel(uint16_t *rows, const int64_t *src, const float *wt,
                                                          int64_t n, int64_t H, const int64_t *first, int64_t ne,
                                                          int64_t e0, const float *scale, uint16_t *recv_x,
                                                          int64_t *recv_src, int64_t *recv_count, int bug)
{
    const int64_t i = blockIdx.x;
    if (i == 0 && threadIdx.x == 0) *recv_count = n;
    if (i >= n) return;
    int64_t le = 0;
    while (le + 1 < ne && first[le + 1] <= i) le++;
    const float sc = scale[e0 + le], w = wt[i];
    const bool weighted = bug == BUG_WEIGHTS_ON_SENDER || bug == BUG_WEIGHTS_TWICE;
    if (threadIdx.x == 0) recv_src[i] = src[i];
    for (int64_t d = threadIdx.x; d < H; d += blockDim.x) {
        const uint16_t xv = rows[i * H + d];
        recv_x[i * H + d] = xv;
        uint16_t y = f32_bf16(__fmul_rn(bf16_f32(xv), sc));
        if (weighted) y = f32_bf16(__fmul_rn(bf16_f32(y), w));
        rows[i * H + d] = y;
    }
}

/* 5. out[t][d] over this rank's tokens: the fma chain of its slots' y, read where each row went. */
__global__ void __launch_bounds__(THREADS) combine_kernel(Peers P, const float *w, const int64_t *pos,
                                                           const int32_t *dst, int64_t k, int64_t H, uint16_t *out,
                                                           int bug)
{
    const int64_t t = blockIdx.y, d = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (d >= H) return;
    float acc = 0.0f;
    for (int64_t j = 0; j < k; j++) {
        const int64_t s = t * k + j;
        const int r = dst[s];
        if (r < 0) continue;
        const float y = bf16_f32(P.rows[r][pos[s] * H + d]);
        acc = fmaf(y, bug == BUG_WEIGHTS_ON_SENDER ? 1.0f : w[s], acc);
    }
    out[t * H + d] = f32_bf16(acc);
}

size_t align16(size_t v) { return (v + 15) / 16 * 16; }

/* One rank's call: its buffer, its view of every peer's, its scratch. */
struct Rank {
    const Shape *s;
    const Args *a;
    cudaStream_t st;
    int R, me, bug;
    int refused;               /* every rank refused the same case (a total over a capacity): no hang */
    unsigned char *buf;        /* this rank's IPC buffer */
    void *opened[MAXW];        /* peers' mappings, closed at the end */
    int64_t cap[MAXW], tot[MAXW]; /* every rank's recv_cap, and the rows it receives (step 2) */
    Peers P;
    unsigned char *scratch;    /* mine [E] int32, off [E], tot [R], first [E + 1], pos [T k] int64, dst [T k] int32 */
    int32_t *mine, *dst;
    int64_t *off, *dtot, *first, *pos;
};

/* The parts of a buffer of cap rows at base into slot r of P; its bytes. */
size_t buffer_parts(unsigned char *base, int64_t cap, const Shape *s, Peers *P, int r)
{
    const size_t cnt = align16((size_t)(s->world * s->E) * 4), rows = align16((size_t)(cap * s->H) * 2);
    const size_t src = (size_t)cap * 8, wt = align16((size_t)cap * 4);
    if (P) {
        P->cnt[r] = reinterpret_cast<int32_t *>(base);
        P->rows[r] = reinterpret_cast<uint16_t *>(base + cnt);
        P->src[r] = reinterpret_cast<int64_t *>(base + cnt + rows);
        P->wt[r] = reinterpret_cast<float *>(base + cnt + rows + src);
    }
    return cnt + rows + src + wt;
}

struct Card { /* what each rank tells the others */
    cudaIpcMemHandle_t h;
    int64_t cap;
};

/* This rank's buffer and scratch, zeroed; every peer's buffer opened. 0, or -1. */
int open_peers(Rank *c)
{
    const Shape *s = c->s;
    const size_t bytes = buffer_parts(NULL, s->recv_cap, s, NULL, 0), TK = (size_t)(s->T * s->k);
    const size_t scr = align16((size_t)s->E * 4) + (size_t)(2 * s->E + c->R + 1) * 8 + TK * 12 + 16;
    if (MOECTS_CU(cudaMalloc(&c->buf, bytes)) || MOECTS_CU(cudaMalloc(&c->scratch, scr)) ||
        MOECTS_CU(cudaMemsetAsync(c->buf, 0, bytes, c->st)) || MOECTS_CU(cudaStreamSynchronize(c->st)))
        return -1;
    c->mine = reinterpret_cast<int32_t *>(c->scratch);
    c->off = reinterpret_cast<int64_t *>(c->scratch + align16((size_t)s->E * 4));
    c->dtot = c->off + s->E, c->first = c->dtot + c->R, c->pos = c->first + s->E + 1;
    c->dst = reinterpret_cast<int32_t *>(c->pos + TK);
    Card mine, all[MAXW];
    memset(&mine, 0, sizeof mine);
    mine.cap = s->recv_cap;
    if (MOECTS_CU(cudaIpcGetMemHandle(&mine.h, c->buf))) return -1;
    Card sendv[MAXW];
    size_t b[MAXW];
    for (int d = 0; d < c->R; d++) sendv[d] = mine, b[d] = sizeof(Card);
    if (c->a->comm->alltoallv(c->a->comm, sendv, b, all, b)) return -1;
    for (int r = 0; r < c->R; r++) {
        unsigned char *p = c->buf;
        if (r != c->me) {
            if (MOECTS_CU(cudaIpcOpenMemHandle(&c->opened[r], all[r].h, cudaIpcMemLazyEnablePeerAccess))) return -1;
            p = static_cast<unsigned char *>(c->opened[r]);
        }
        buffer_parts(p, all[r].cap, s, &c->P, r);
        c->cap[r] = all[r].cap;
    }
    return 0;
}

/* The stream drained, then every rank at the barrier. */
int settle(Rank *c)
{
    if (MOECTS_CU(cudaStreamSynchronize(c->st))) return -1;
    return c->a->comm->barrier(c->a->comm) ? -1 : 0;
}

/* Steps 1 and 2: counts, the matrix's scan; every rank's total against its capacity (each rank sees
 * every total: all refuse together, before any row moves). */
int count_and_scan(Rank *c)
{
    const Shape *s = c->s;
    const int64_t TK = s->T * s->k;
    if (MOECTS_CU(cudaMemsetAsync(c->mine, 0, (size_t)s->E * 4, c->st))) return -1;
    if (TK > 0) count_kernel<<<(unsigned)((TK + THREADS - 1) / THREADS), THREADS, 0, c->st>>>(c->a->topk_ids, TK, s->E, c->mine);
    publish_kernel<<<c->R, THREADS, 0, c->st>>>(c->P, c->mine, s->E, c->me, c->bug);
    if (MOECTS_CU_LAUNCH("publish_kernel") || settle(c)) return -1;
    offsets_kernel<<<1, THREADS, 0, c->st>>>(c->P.cnt[c->me], c->R, c->me, s->E, c->a->expert_first, c->off, c->dtot, c->first);
    if (MOECTS_CU_LAUNCH("offsets_kernel") ||
        MOECTS_CU(cudaMemcpyAsync(c->tot, c->dtot, (size_t)c->R * 8, cudaMemcpyDeviceToHost, c->st)) ||
        MOECTS_CU(cudaStreamSynchronize(c->st)))
        return -1;
    for (int r = 0; r < c->R; r++)
        if (c->tot[r] > c->cap[r]) {
            if (r == c->me)
                fprintf(stderr, "cuda ep_dispatch_combine: rank %d would receive %lld rows, recv_cap %lld\n", r,
                        (long long)c->tot[r], (long long)c->cap[r]);
            c->refused = 1;
        }
    return c->refused ? -1 : 0;
}

/* Steps 3, 4 and 5, each ended by the barrier. */
int move_rows(Rank *c)
{
    const Shape *s = c->s;
    const Args *a = c->a;
    const int64_t TK = s->T * s->k;
    int64_t tf = 0, ef[2];
    if (MOECTS_CU(cudaMemcpyAsync(&tf, a->token_first + c->me, 8, cudaMemcpyDeviceToHost, c->st)) ||
        MOECTS_CU(cudaMemcpyAsync(ef, a->expert_first + c->me, 16, cudaMemcpyDeviceToHost, c->st)) ||
        MOECTS_CU(cudaStreamSynchronize(c->st)))
        return -1;
    const Dispatch D = {a->x, a->topk_ids, a->topk_weights, a->expert_first, c->off, c->mine, c->pos, c->dst,
                        TK, s->k, s->H, s->E, tf * s->k, c->R, c->bug};
    if (TK > 0) dispatch_kernel<<<(unsigned)TK, THREADS, 0, c->st>>>(c->P, D);
    if (MOECTS_CU_LAUNCH("dispatch_kernel") || settle(c)) return -1;
    const int64_t n = c->tot[c->me];
    expert_kernel<<<(unsigned)(n > 0 ? n : 1), THREADS, 0, c->st>>>(
        c->P.rows[c->me], c->P.src[c->me], c->P.wt[c->me], n, s->H, c->first, ef[1] - ef[0], ef[0],
        a->expert_scale, a->recv_x, a->recv_src, a->recv_count, c->bug);
    if (MOECTS_CU_LAUNCH("expert_kernel") || settle(c)) return -1;
    if (s->T > 0 && s->H > 0)
        combine_kernel<<<dim3((unsigned)((s->H + THREADS - 1) / THREADS), (unsigned)s->T), THREADS, 0, c->st>>>(
            c->P, a->topk_weights, c->pos, c->dst, s->k, s->H, a->out, c->bug);
    return MOECTS_CU_LAUNCH("combine_kernel") || settle(c) ? -1 : 0;
}

/* The peers' mappings closed (after the last barrier: nobody reads this rank's buffer any more), then,
 * once every rank closed its own, the buffer freed. together: every rank got here the same way (done,
 * or refused together); otherwise a peer failed alone and no barrier is left to wait for: the rank's
 * process ends right after. */
void close_peers(Rank *c, int together)
{
    for (int r = 0; r < c->R; r++)
        if (c->opened[r]) (void)cudaIpcCloseMemHandle(c->opened[r]);
    if (together) (void)c->a->comm->barrier(c->a->comm);
    (void)cudaFree(c->buf);
    (void)cudaFree(c->scratch);
}

int run_bug(const void *shape, const void *args, void *stream, int bug)
{
    Rank c;
    memset(&c, 0, sizeof c);
    c.s = static_cast<const Shape *>(shape), c.a = static_cast<const Args *>(args);
    c.st = static_cast<cudaStream_t>(stream), c.bug = bug;
    c.R = (int)c.s->world, c.me = (int)c.s->rank;
    if (!c.a->comm || c.a->comm->world != c.R || c.R > MAXW || c.me < 0 || c.me >= c.R) return -1;
    const int rc = open_peers(&c) || count_and_scan(&c) || move_rows(&c) ? -1 : 0;
    close_peers(&c, rc == 0 || c.refused);
    return rc;
}

int supports(const void *shape, char *why, size_t len)
{
    const Shape *s = static_cast<const Shape *>(shape);
    if (s->world > MAXW) return snprintf(why, len, "shape: more than %d ranks", (int)MAXW), 0;
    if (s->T > 65535) return snprintf(why, len, "shape: more than 65535 tokens a rank"), 0;
    return 1;
}

} // namespace

/* A kernel of this file: its run() (bug switched on or not) and its descriptor, C linkage. */
#define ED_CUDA_KERNEL(sym, nm, bugv, bugtext)                                                              \
    static int sym##_run(const void *s, const void *a, void *st) { return run_bug(s, a, st, bugv); }        \
    extern "C" const moects_kernel sym;                                                                    \
    const moects_kernel sym = {MOECTS_KERNEL_ABI_VERSION, nm, MOECTS_OP_EP_DISPATCH_COMBINE, MOECTS_DEVICE_CUDA, \
                               "ep_dispatch_combine.fma_v1(order=expert)", {0, 0}, bugtext, supports, sym##_run}

ED_CUDA_KERNEL(moects_cuda_ep_dispatch_combine_ipc, "cuda.ep_dispatch_combine.ipc", BUG_NONE, NULL);
ED_CUDA_KERNEL(moects_cuda_mutant_ep_dispatch_combine_count_plus_one, "cuda.mutant.ep_dispatch_combine.count_plus_one",
               BUG_COUNT_PLUS_ONE,
               "every non-zero per-expert count published one more than the rows sent: the receivers' totals exceed "
               "recv_cap");
ED_CUDA_KERNEL(moects_cuda_mutant_ep_dispatch_combine_drop_last_chunk, "cuda.mutant.ep_dispatch_combine.drop_last_chunk",
               BUG_DROP_LAST_CHUNK, "each expert's rows sent in chunks of 8, a last partial chunk never written (counted, not sent)");
ED_CUDA_KERNEL(moects_cuda_mutant_ep_dispatch_combine_weights_on_sender,
               "cuda.mutant.ep_dispatch_combine.weights_on_sender", BUG_WEIGHTS_ON_SENDER,
               "the expert's rank multiplies y by the weight and rounds to BF16; the token's rank only adds");
ED_CUDA_KERNEL(moects_cuda_mutant_ep_dispatch_combine_weights_twice, "cuda.mutant.ep_dispatch_combine.weights_twice",
               BUG_WEIGHTS_TWICE, "the weight applied on the expert's rank and again in the token's rank's fma");
