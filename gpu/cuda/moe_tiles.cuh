/* moe_tiles.cuh: the tile list of the grouped MoE GEMM kernels (moe_gemm_blockwise.cu and its mutants,
 * moe_gemm_w4a16_mma.cu): 128-row tiles, each of one expert, per row layout (DESIGN.md "Grouped MoE
 * GEMM"), built on the device on the caller's stream:
 *   contiguous, groups padded to a multiple of 128: tile t is rows 128t .. 128t+127, its expert the id
 *     of its first valid row, -1 when it has none; `tight` ends the tile after the last row of that
 *     expert (the padding rows after it are neither read nor computed); `shift` starts every tile that
 *     many rows early (a mutant: tiles straddle two experts);
 *   contiguous, groups padded otherwise (align 64, say): one thread walks m_indices, tiles of each run
 *     of one valid id (`packed`: runs placed as if the padding rows were not there, a mutant);
 *   masked: ceil(max_m/128) tiles per expert, rows e*max_m + 128j .. up to masked_m[e] (`masked_first`:
 *     masked_m[0] for every expert, a mutant);
 *   offsets: ceil(rows/128) tiles per expert from expert_offsets (any row start).
 * The kernels are templates over the tile record (T: row0, row_end, expert, pad), so each GEMM keeps
 * its own record type. Not installed, not part of any ABI. */
#ifndef MOECTS_MOE_TILES_CUH
#define MOECTS_MOE_TILES_CUH
#include <cuda_runtime.h>
#include <stdint.h>

#include "moects_kernel.h"

namespace moects_moe_tiles {

/* One 128-row tile of one expert: rows [row0, row_end) of A and D; expert < 0: an empty slot. */
struct Tile {
    int64_t row0, row_end;
    int32_t expert, pad;
};

/* How the list is built: 0 everywhere for the honest blockwise list; the mutants set one field. */
struct Mode {
    int shift;        /* contiguous, 128-aligned: tiles start this many rows early */
    int packed;       /* contiguous: runs placed as if the padding rows were not there */
    int masked_first; /* masked: masked_m[0] for every expert */
    int tight;        /* contiguous, 128-aligned: a tile ends after its expert's last row */
};

/* Contiguous groups padded to a multiple of 128 rows: tile t is rows 128t .. 128t+127, one expert's. */
static inline bool aligned128(const moects_moe_gemm_shape *s) { return s->align > 0 && s->align % 128 == 0; }

/* Tile slots of the layout (an upper bound; unused slots get expert -1). per128: the contiguous list is
 * one slot per 128 rows (the honest list of 128-aligned groups); else one per run of rows as well. */
static inline int64_t tile_slots(const moects_moe_gemm_shape *s, bool per128)
{
    if (s->rows == MOECTS_ROWS_MASKED) return s->E * ((s->M + 127) / 128);
    if (s->rows == MOECTS_ROWS_CONTIGUOUS && per128 && aligned128(s)) return (s->M + 127) / 128;
    return (s->M + 127) / 128 + s->E + 1; /* offsets, runs of rows, and the contiguous mutants' tilings */
}

/* Contiguous (the per-128 list, and the straddling mutant's with tiles shifted): one thread per slot. */
template <class T>
__global__ void tiles_contiguous(T *t, int64_t slots, const int32_t *m_idx, int64_t M, int64_t E, int shift, int tight)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= slots) return;
    const int64_t r0 = i * 128 - shift < 0 ? 0 : i * 128 - shift;
    int64_t r1 = i * 128 + 128 - shift < M ? i * 128 + 128 - shift : M;
    int32_t e = -1;
    for (int64_t r = r0; r < r1; r++) /* the first id in [0, E) */
        if (m_idx[r] >= 0 && m_idx[r] < E) {
            e = m_idx[r];
            break;
        }
    if (tight && e >= 0)
        while (m_idx[r1 - 1] != e) r1--; /* stops at the first valid row at the latest */
    T x = {r0, r1, e, 0};
    t[i] = x;
}

/* Masked: slot i = expert i / tpe, its tile i % tpe. */
template <class T>
__global__ void tiles_masked(T *t, int64_t slots, const int32_t *masked_m, int64_t max_m, int64_t tpe, int masked_first)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= slots) return;
    const int64_t e = i / tpe, j = i % tpe;
    int64_t cnt = masked_m[masked_first ? 0 : e];
    cnt = cnt < 0 ? 0 : cnt > max_m ? max_m : cnt;
    const int64_t hi = cnt < 128 * j + 128 ? cnt : 128 * j + 128;
    T x = {e * max_m + 128 * j, e * max_m + hi, 128 * j < cnt ? (int32_t)e : -1, 0};
    t[i] = x;
}

/* One thread: the tiles of a list of segments (row0, rows, expert), in order, then -1 slots.
 * offsets (off): expert e's rows [off[e], off[e+1]) (clamped to [0, M]). Contiguous (m_idx): each run
 * of rows of one valid id; packed: the same runs placed at the sum of the earlier runs' lengths. */
template <class T>
__global__ void tiles_serial(T *t, int64_t slots, const int64_t *off, const int32_t *m_idx, int64_t M, int64_t E,
                             int packed_rows)
{
    int64_t n = 0, packed = 0;
    auto emit = [&](int64_t r0, int64_t rows, int32_t e) {
        for (int64_t j = 0; j < rows && n < slots; j += 128) {
            T x = {r0 + j, r0 + (j + 128 < rows ? j + 128 : rows), e, 0};
            t[n++] = x;
        }
    };
    if (off) {
        for (int64_t e = 0; e < E; e++) {
            int64_t a = off[e] < 0 ? 0 : off[e] > M ? M : off[e], b = off[e + 1] < 0 ? 0 : off[e + 1] > M ? M : off[e + 1];
            if (b > a) emit(a, b - a, (int32_t)e);
        }
    } else {
        for (int64_t r = 0; r < M;) {
            const int32_t id = m_idx[r];
            int64_t r1 = r + 1;
            while (r1 < M && m_idx[r1] == id) r1++;
            if (id >= 0 && id < E) emit(packed_rows ? packed : r, r1 - r, id), packed += r1 - r;
            r = r1;
        }
    }
    for (; n < slots; n++) {
        T x = {0, 0, -1, 0};
        t[n] = x;
    }
}

/* The tile list of (s, a) into t (slots entries, tile_slots(s, per128) with per128 = the Mode takes the
 * per-128 contiguous list: shift == 0 and !packed). Launch errors are the caller's to check. */
template <class T>
static void make_tiles(const moects_moe_gemm_shape *s, const moects_moe_gemm_args *a, const Mode &m, T *t,
                       int64_t slots, cudaStream_t st)
{
    const unsigned blocks = (unsigned)((slots + 255) / 256);
    if (s->rows == MOECTS_ROWS_MASKED)
        tiles_masked<T><<<blocks, 256, 0, st>>>(t, slots, a->masked_m, s->M, (s->M + 127) / 128, m.masked_first);
    else if (s->rows == MOECTS_ROWS_OFFSETS)
        tiles_serial<T><<<1, 1, 0, st>>>(t, slots, a->expert_offsets, NULL, s->M, s->E, 0);
    else if (m.packed || (m.shift == 0 && !aligned128(s)))
        tiles_serial<T><<<1, 1, 0, st>>>(t, slots, NULL, a->m_indices, s->M, s->E, m.packed);
    else
        tiles_contiguous<T><<<blocks, 256, 0, st>>>(t, slots, a->m_indices, s->M, s->E, m.shift, m.tight);
}

} // namespace moects_moe_tiles

#endif
