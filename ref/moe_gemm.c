/* moe_gemm.c: the grouped MoE GEMM reference (DESIGN.md "Grouped MoE GEMM"), recipes
 * moe_gemm.blockwise_v1 (MXFP4, NVFP4, W4A8) and moe_gemm.exact_v1 (all four formats).
 *
 * The row layout is turned into runs: maximal ranges of consecutive rows of one expert (contiguous:
 * equal m_indices >= 0; masked: rows [e*M, e*M + masked_m[e]); offsets: [off[e], off[e+1])). Each
 * run is one dense NT GEMM D[run] = alpha[e] * A[run] * B[e]^T on the run's rows, with the run's A
 * scales and expert e's B scales decoded to FP32: FP4 x FP4 runs go to the dense FP4 GEMM's
 * machinery (ref/fp4_gemm.c, sgemm block partials), W4A8 and W4A16 runs to the double-partial path
 * (ref/wxa_gemm.c, dgemm block partials). So a result element depends only on its row, its expert
 * and its column: never on the other experts, the tiles or the threads.
 *
 * Scales (moects_types.h): B's of expert e start at e * moects__scale_bytes(N, nkb, scale_layout);
 * FP4 A scales are one [rows][nkb] tensor in scale_layout (contiguous), one [M][nkb] block per expert
 * in scale_layout (masked), linear [rows][nkb] (offsets); W4A8 A scales are linear
 * [rows][ceil(K / a_scale_block)], the one of K-block b (32 wide) at column b * 32 / a_scale_block.
 * A NaN scale (UE8M0 0xFF, E4M3 0x7F/0xFF, FP32 NaN or Inf) makes every exact_v1 output of its row
 * (A) or expert column (B) NaN; blockwise_v1 propagates it as IEEE arithmetic does. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "moects_gemm_internal.h"
#include "moects_quant.h"
#include "moects_ref.h"

typedef struct {
    int64_t e, r0, m; /* expert, first row of A and D, rows */
} run;

/* p + off bytes, NULL staying NULL (K = 0 needs no operands). */
static const uint8_t *at(const void *p, int64_t off) { return p ? (const uint8_t *)p + off : NULL; }

/* g: the K-block of the scales (the finer of A's and B's). */
static int64_t block_of(const moects_moe_gemm_shape *s)
{
    if (s->format == MOECTS_MOE_NVFP4) return 16;
    if (s->format == MOECTS_MOE_W4A16) return moects_fp4_block(s->b_format);
    return 32;
}

static int bad_shape(const moects_moe_gemm_shape *s)
{
    if (s->E < 1 || s->M < 0 || s->N < 0 || s->K < 0) return 1;
    if (s->out_dtype != MOECTS_F32 && s->out_dtype != MOECTS_BF16) return 1;
    if (s->scale_layout != MOECTS_SCALES_LINEAR && s->scale_layout != MOECTS_SCALES_SWIZZLED_128X4) return 1;
    if (s->rows != MOECTS_ROWS_CONTIGUOUS && s->rows != MOECTS_ROWS_MASKED && s->rows != MOECTS_ROWS_OFFSETS)
        return 1;
    if (s->rows == MOECTS_ROWS_CONTIGUOUS && s->align < 1) return 1;
    switch (s->format) {
    case MOECTS_MOE_MXFP4: return s->b_format != MOECTS_FP4_MXFP4;
    case MOECTS_MOE_NVFP4: return s->b_format != MOECTS_FP4_NVFP4;
    case MOECTS_MOE_W4A8:
        return s->b_format != MOECTS_FP4_MXFP4 || (s->a_scale_block != 32 && s->a_scale_block != 128) ||
               (s->a_scale_f32 != 0 && s->a_scale_f32 != 1);
    case MOECTS_MOE_W4A16: return s->b_format != MOECTS_FP4_MXFP4 && s->b_format != MOECTS_FP4_NVFP4;
    }
    return 1;
}

/* The runs of the row layout, checking its metadata. *out: malloc'd (free it), *n runs.
 * Returns 0, or -1 for bad metadata or out of memory. */
static int make_runs(const moects_moe_gemm_shape *s, const moects_moe_gemm_args *a, run **out, int64_t *n)
{
    const int64_t E = s->E, M = s->M;
    int64_t cap = s->rows == MOECTS_ROWS_CONTIGUOUS ? M : E, k = 0;
    run *r = malloc((size_t)(cap + 1) * sizeof *r);
    if (!r) return -1;
    if (s->rows == MOECTS_ROWS_CONTIGUOUS) {
        if (M > 0 && !a->m_indices) goto bad;
        for (int64_t i = 0; i < M; i++) {
            int32_t e = a->m_indices[i];
            if (e < -1 || e >= E) goto bad;
            if (e < 0) continue;
            if (k > 0 && r[k - 1].e == e && r[k - 1].r0 + r[k - 1].m == i) r[k - 1].m++;
            else r[k++] = (run){e, i, 1};
        }
    } else if (s->rows == MOECTS_ROWS_MASKED) {
        if (!a->masked_m) goto bad;
        for (int64_t e = 0; e < E; e++) {
            if (a->masked_m[e] < 0 || a->masked_m[e] > M) goto bad;
            if (a->masked_m[e] > 0) r[k++] = (run){e, e * M, a->masked_m[e]};
        }
    } else {
        const int64_t *off = a->expert_offsets;
        if (!off || off[0] != 0 || off[E] != M) goto bad;
        for (int64_t e = 0; e < E; e++) {
            if (off[e + 1] < off[e]) goto bad;
            if (off[e + 1] > off[e]) r[k++] = (run){e, off[e], off[e + 1] - off[e]};
        }
    }
    *out = r;
    *n = k;
    return 0;
bad:
    free(r);
    return -1;
}

static float dec_fp4_scale(moects_fp4_format f, uint8_t x)
{
    return f == MOECTS_FP4_NVFP4 ? moects__e4m3_decode(x) : moects__ue8m0_decode(x);
}

/* The A scale of row i of run r (0 <= i < r->m) for K-block b (g wide) -> FP32 value; lut: the
 * byte scales' values (UE8M0 for W4A8, else b_format's). */
static float a_scale(const moects_moe_gemm_shape *s, const moects_moe_gemm_args *a, const run *r, int64_t i,
                     int64_t b, int64_t nkb, const float *lut)
{
    if (s->format == MOECTS_MOE_W4A16) return 1.0f;
    if (s->format == MOECTS_MOE_W4A8) {
        const int64_t nsa = moects__cdiv(s->K, s->a_scale_block), at = (r->r0 + i) * nsa + b * 32 / s->a_scale_block;
        if (!s->a_scale_f32) return lut[((const uint8_t *)a->sa)[at]];
        float v;
        memcpy(&v, (const uint8_t *)a->sa + at * (int64_t)sizeof v, sizeof v);
        return v;
    }
    const uint8_t *base = a->sa;
    int64_t row = r->r0 + i;
    moects_scale_layout lay = s->scale_layout;
    if (s->rows == MOECTS_ROWS_MASKED) {
        base += r->e * moects__scale_bytes(s->M, nkb, lay);
        row = i;
    } else if (s->rows == MOECTS_ROWS_OFFSETS) {
        lay = MOECTS_SCALES_LINEAR;
    }
    return lut[base[moects__scale_offset(row, b, nkb, lay)]];
}

/* One run: decode its scales, run the job into the run's rows of out_bw / out_ex, or (bq) its
 * bound into the run's rows of bq->bound. */
static int run_one(const moects_moe_gemm_shape *s, const moects_moe_gemm_args *a, const run *r, void *out_bw,
                   void *out_ex, const moects__bound_req *bq)
{
    const int64_t N = s->N, K = s->K, g = block_of(s), nkb = moects__cdiv(K, g), m = r->m;
    const size_t elt = s->out_dtype == MOECTS_BF16 ? 2 : 4;
    float *sa, *sbt;
    uint8_t *nan_a, *nan_b;
    void *buf = moects__job_scales(m, N, nkb, &sa, &sbt, &nan_a, &nan_b);
    int rc = -1;
    if (!buf) return -1;
    float lut_b[256], lut_a[256];
    for (int x = 0; x < 256; x++) {
        lut_b[x] = dec_fp4_scale(s->b_format, (uint8_t)x);
        lut_a[x] = s->format == MOECTS_MOE_W4A8 ? moects__ue8m0_decode((uint8_t)x) : lut_b[x];
    }
    for (int64_t i = 0; i < m; i++)
        for (int64_t b = 0; b < nkb; b++) {
            float v = a_scale(s, a, r, i, b, nkb, lut_a);
            sa[i * nkb + b] = v;
            if (!isfinite(v)) nan_a[i] = 1;
        }
    const uint8_t *sb = at(a->sb, r->e * moects__scale_bytes(N, nkb, s->scale_layout));
    for (int64_t b = 0; b < nkb; b++) /* n inner: sbt written in order */
        for (int64_t n = 0; n < N; n++) {
            const int64_t o = s->scale_layout == MOECTS_SCALES_LINEAR ? n * nkb + b : moects__scale_offset(n, b, nkb, s->scale_layout);
            float v = lut_b[sb[o]];
            sbt[b * N + n] = v;
            if (isnan(v)) nan_b[n] = 1;
        }
    const size_t rowd = (size_t)(r->r0 * N) * elt;
    moects__gemm_job j = {m, N, K, g, s->out_dtype, sa, sbt, nan_a, nan_b, a->alpha ? a->alpha[r->e] : 1.0f,
                          out_bw ? (uint8_t *)out_bw + rowd : NULL, out_ex ? (uint8_t *)out_ex + rowd : NULL};
    const int64_t rb = moects__cdiv(K, 2);
    const uint8_t *b = at(a->b, r->e * N * rb);
    if (bq) {
        moects__a_kind kind = s->format == MOECTS_MOE_W4A8    ? MOECTS__A_E4M3
                              : s->format == MOECTS_MOE_W4A16 ? MOECTS__A_BF16
                                                              : MOECTS__A_FP4;
        int64_t row_bytes = kind == MOECTS__A_FP4 ? rb : kind == MOECTS__A_E4M3 ? K : 2 * K;
        rc = moects__bound_job(&j, at(a->a, r->r0 * row_bytes), kind, b, bq, r->r0);
    } else switch (s->format) {
    case MOECTS_MOE_MXFP4:
    case MOECTS_MOE_NVFP4: rc = moects__fp4_gemm_job(&j, at(a->a, r->r0 * rb), b); break;
    case MOECTS_MOE_W4A8: rc = moects__wxa_gemm_job(&j, at(a->a, r->r0 * K), MOECTS__A_E4M3, b); break;
    case MOECTS_MOE_W4A16: rc = moects__wxa_gemm_job(&j, at(a->a, r->r0 * K * 2), MOECTS__A_BF16, b); break;
    }
    free(buf);
    return rc;
}

/* Every entry point: the wanted recipes into out_bw / out_ex (a->d unused), or with bq the bound. */
static int moe_gemm(const moects_moe_gemm_shape *s, const moects_moe_gemm_args *a, int want_bw, void *out_bw,
                    int want_ex, void *out_ex, const moects__bound_req *bq)
{
    if (!s || !a || bad_shape(s) || (!want_bw && !want_ex && !bq)) return -1;
    if (want_bw && s->format == MOECTS_MOE_W4A16) return -1; /* no blockwise recipe (DESIGN.md) */
    run *runs = NULL;
    int64_t nr = 0;
    if (make_runs(s, a, &runs, &nr)) return -1;
    int rc = 0;
    if (nr > 0 && s->N > 0) {
        int need_sa = s->format != MOECTS_MOE_W4A16;
        if ((want_bw && !out_bw) || (want_ex && !out_ex) || (bq && !bq->bound) ||
            (s->K > 0 && (!a->a || !a->b || !a->sb || (need_sa && !a->sa))))
            rc = -1;
        for (int64_t i = 0; i < nr && rc == 0; i++)
            rc = run_one(s, a, &runs[i], want_bw ? out_bw : NULL, want_ex ? out_ex : NULL, bq);
    }
    free(runs);
    return rc;
}

int moects__ref_moe_gemm(const moects_moe_gemm_shape *s, const moects_moe_gemm_args *a, moects_recipe recipe)
{
    if (!a || (recipe != MOECTS_RECIPE_FP4_BLOCKWISE_V1 && recipe != MOECTS_RECIPE_EXACT_V1)) return -1;
    const int bw = recipe == MOECTS_RECIPE_FP4_BLOCKWISE_V1;
    return moe_gemm(s, a, bw, bw ? a->d : NULL, !bw, bw ? NULL : a->d, NULL);
}

int moects__ref_moe_gemm_recipes(const moects_moe_gemm_shape *s, const moects_moe_gemm_args *a,
                                void *out_blockwise, void *out_exact)
{
    return moe_gemm(s, a, out_blockwise != NULL, out_blockwise, out_exact != NULL, out_exact, NULL);
}

int moects__ref_moe_gemm_bound_class(const moects_moe_gemm_shape *s, const moects_moe_gemm_args *a,
                                    const moects_acc_class *c, double *bound, const moects_bound_stats *st)
{
    if (!c) return -1;
    moects__bound_req bq = {c->bits, c->truncation, c->bf16_splits, bound, st};
    if (!s || !a || bad_shape(s) || !moects__bound_req_ok(&bq)) return -1;
    const int64_t rows = s->rows == MOECTS_ROWS_MASKED ? s->E * s->M : s->M, n = rows * s->N;
    if (rows > 0 && s->N > 0) {
        if (!bound) return -1;
        memset(bound, 0, (size_t)n * sizeof(double)); /* invalid rows: 0, not checked */
        for (int64_t i = 0; st && i < n; i++) moects__stats_unchecked(st, i);
    }
    return moe_gemm(s, a, 0, NULL, 0, NULL, &bq);
}

int moects__ref_moe_gemm_bound_stats(const moects_moe_gemm_shape *s, const moects_moe_gemm_args *a, uint32_t bits,
                                    int truncation, double *bound, const moects_bound_stats *st)
{
    const moects_acc_class c = {bits, truncation, 0};
    return moects__ref_moe_gemm_bound_class(s, a, &c, bound, st);
}

int moects__ref_moe_gemm_bound(const moects_moe_gemm_shape *s, const moects_moe_gemm_args *a, uint32_t bits,
                              int truncation, double *bound)
{
    return moects__ref_moe_gemm_bound_stats(s, a, bits, truncation, bound, NULL);
}
