/* test_ref_moe_gen.h: random grouped-GEMM problems for the moe_gemm tests (every format, row layout,
 * scale layout and out dtype; per-expert row counts, scales and alpha), for tests only. */
#ifndef TEST_REF_MOE_GEN_H
#define TEST_REF_MOE_GEN_H
#include <stdlib.h>

#include "test_ref_moe_oracle.h"
#include "test_rng.h"

#define FILL 0xA5 /* sentinel byte of d: rows that are not valid must keep it */

/* One generated problem: the shape, the arguments and the buffers they point into. */
typedef struct {
    moects_moe_gemm_shape s;
    moects_moe_gemm_args a;
    void *A, *SA, *D;
    uint8_t *B, *SB;
    float *alpha;
    int32_t *mi, *mm;
    int64_t *off;
    int64_t rows, nkb;
} prob;

/* Value pickers: `wide` spreads exponents (subnormal scales included). */
static inline uint8_t pick_ue8m0(int wide, int64_t e) { return (uint8_t)(wide ? rnd() % 255 : 124 + e % 4 + rnd() % 6); }
static inline uint8_t pick_e4m3_scale(int wide, int64_t e)
{
    return (uint8_t)(wide ? 1 + rnd() % 0x7E : 0x30 + (e % 3) * 8 + rnd() % 16); /* positive, not NaN */
}
static inline uint8_t pick_e4m3(void)
{
    uint8_t x;
    do x = (uint8_t)rnd();
    while ((x & 0x7F) == 0x7F);
    return x;
}
static inline uint16_t pick_bf16(int wide)
{
    int e = wide ? 1 + (int)(rnd() % 254) : 120 + (int)(rnd() % 12);
    uint16_t m = (uint16_t)(rnd() & 0x7F), sgn = (uint16_t)((rnd() & 1) << 15);
    if (wide && rnd() % 8 == 0) e = 0; /* a subnormal (or zero) */
    return (uint16_t)(sgn | e << 7 | m);
}

/* Build a problem: counts[E] valid rows per expert; layout rows; K may have a tail. */
static inline void gen(prob *p, moects_moe_format fmt, moects_fp4_format bf, moects_row_layout rows, int64_t E,
                const int64_t *counts, int64_t N, int64_t K, moects_scale_layout sl, moects_dtype od, int64_t asb,
                int af32, int wide)
{
    memset(p, 0, sizeof *p);
    moects_moe_gemm_shape *s = &p->s;
    *s = (moects_moe_gemm_shape){E, 0, N, K, fmt, bf, rows, 1, asb, af32, sl, od};
    int64_t g = fmt == MOECTS_MOE_NVFP4 || (fmt == MOECTS_MOE_W4A16 && bf == MOECTS_FP4_NVFP4) ? 16 : 32;
    p->nkb = (K + g - 1) / g;
    if (rows == MOECTS_ROWS_CONTIGUOUS) {
        s->align = 4;
        for (int64_t e = 0; e < E; e++) s->M += (counts[e] + 3) / 4 * 4;
        p->mi = malloc((size_t)s->M * 4 + 4);
        int64_t r = 0;
        for (int64_t e = 0; e < E; e++)
            for (int64_t i = 0; i < (counts[e] + 3) / 4 * 4; i++) p->mi[r++] = i < counts[e] ? (int32_t)e : -1;
        p->a.m_indices = p->mi;
    } else if (rows == MOECTS_ROWS_MASKED) {
        for (int64_t e = 0; e < E; e++) s->M = counts[e] > s->M ? counts[e] : s->M;
        s->M += 1; /* one row more than the largest expert: never valid */
        p->mm = malloc((size_t)E * 4);
        for (int64_t e = 0; e < E; e++) p->mm[e] = (int32_t)counts[e];
        p->a.masked_m = p->mm;
    } else {
        p->off = malloc((size_t)(E + 1) * 8);
        p->off[0] = 0;
        for (int64_t e = 0; e < E; e++) p->off[e + 1] = p->off[e] + counts[e];
        s->M = p->off[E];
        p->a.expert_offsets = p->off;
    }
    p->rows = rows == MOECTS_ROWS_MASKED ? E * s->M : s->M;
    const int64_t R = p->rows, rb = (K + 1) / 2;
    /* A and its scales */
    if (fmt == MOECTS_MOE_W4A8) {
        uint8_t *A = malloc((size_t)(R * K + 1));
        for (int64_t i = 0; i < R * K; i++) A[i] = pick_e4m3();
        int64_t nsa = (K + asb - 1) / asb;
        if (af32) {
            float *SA = malloc((size_t)(R * nsa + 1) * 4);
            for (int64_t i = 0; i < R * nsa; i++)
                SA[i] = ldexpf(1.0f + (float)(rnd() % 1000) / 1000.0f, wide ? (int)(rnd() % 60) - 150 : (int)(rnd() % 8) - 10);
            p->SA = SA;
        } else {
            uint8_t *SA = malloc((size_t)(R * nsa + 1));
            for (int64_t i = 0; i < R * nsa; i++) SA[i] = pick_ue8m0(wide, i);
            p->SA = SA;
        }
        p->A = A;
    } else if (fmt == MOECTS_MOE_W4A16) {
        uint16_t *A = malloc((size_t)(R * K + 1) * 2);
        for (int64_t i = 0; i < R * K; i++) A[i] = pick_bf16(wide);
        p->A = A;
    } else {
        uint8_t *A = malloc((size_t)(R * rb + 1));
        for (int64_t i = 0; i < R * rb; i++) A[i] = (uint8_t)rnd();
        int64_t rs = rows == MOECTS_ROWS_MASKED ? s->M : R;
        moects_scale_layout al = rows == MOECTS_ROWS_OFFSETS ? MOECTS_SCALES_LINEAR : sl;
        int64_t per = mo_bytes(rs, p->nkb, al), nblk = rows == MOECTS_ROWS_MASKED ? E : 1;
        uint8_t *SA = malloc((size_t)(per * nblk + 1));
        for (int64_t i = 0; i < per * nblk; i++)
            SA[i] = fmt == MOECTS_MOE_NVFP4 ? pick_e4m3_scale(wide, i / (per + 1)) : pick_ue8m0(wide, i);
        p->A = A;
        p->SA = SA;
    }
    /* B per expert, scales per expert (each expert its own range), alpha */
    int64_t per = mo_bytes(N, p->nkb, sl);
    p->B = malloc((size_t)(E * N * rb + 1));
    for (int64_t i = 0; i < E * N * rb; i++) p->B[i] = (uint8_t)rnd();
    p->SB = malloc((size_t)(E * per + 1));
    for (int64_t e = 0; e < E; e++)
        for (int64_t i = 0; i < per; i++)
            p->SB[e * per + i] = bf == MOECTS_FP4_NVFP4 ? pick_e4m3_scale(wide, e) : pick_ue8m0(wide, e);
    p->alpha = malloc((size_t)E * 4);
    for (int64_t e = 0; e < E; e++)
        p->alpha[e] = bf == MOECTS_FP4_NVFP4 ? 1.0f / (float)(1 + rnd() % 3000) : 1.0f;
    p->a.a = p->A;
    p->a.sa = p->SA;
    p->a.b = p->B;
    p->a.sb = p->SB;
    p->a.alpha = p->alpha;
    size_t dbytes = (size_t)(R * N) * (od == MOECTS_BF16 ? 2 : 4);
    p->D = malloc(dbytes + 1);
    memset(p->D, FILL, dbytes);
    p->a.d = p->D;
}

static inline void drop(prob *p)
{
    free(p->A);
    free(p->SA);
    free(p->D);
    free(p->B);
    free(p->SB);
    free(p->alpha);
    free(p->mi);
    free(p->mm);
    free(p->off);
}

#endif
