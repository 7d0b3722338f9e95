/* moects_gemm_internal.h: what the block-scaled GEMM references share (ref/ only, not installed).
 * One "job" is a dense NT GEMM D[M, N] = alpha * A[M, K] * B[N, K]^T whose block scales are
 * already decoded; fp4_gemm runs one job, moe_gemm one per run of rows of the same expert. */
#ifndef MOECTS_GEMM_INTERNAL_H
#define MOECTS_GEMM_INTERNAL_H
#include <stdint.h>

#include "moects_exact.h"
#include "moects_ref.h"
#include "moects_types.h"

typedef struct {
    int64_t M, N, K, g;           /* rows, columns, depth, K-block (scale granularity, both sides) */
    moects_dtype out_dtype;       /* MOECTS_F32 or MOECTS_BF16 */
    const float *sa;              /* [M][nkb] A scale of each K-block (1 where A has none) */
    const float *sbt;             /* [nkb][N] B scales, transposed */
    const uint8_t *nan_a, *nan_b; /* [M], [N]: the row / column has a NaN scale (exact_v1 -> NaN) */
    float alpha;
    void *out_bw, *out_ex;        /* [M][N] out_dtype: blockwise_v1 / exact_v1 results, NULL = skip */
} moects__gemm_job;

/* A operand kinds: packed E2M1 codes, E4M3 bytes, BF16. */
typedef enum { MOECTS__A_FP4 = 0, MOECTS__A_E4M3 = 1, MOECTS__A_BF16 = 2 } moects__a_kind;

/* FP4 x FP4 job (ref/fp4_gemm.c): a, b packed E2M1 codes [M|N][ceil(K/2)]; g 16 or 32.
 * Returns 0, or -1 out of memory. */
int moects__fp4_gemm_job(const moects__gemm_job *j, const uint8_t *a, const uint8_t *b);
/* E4M3 or BF16 A [M][K] against E2M1 B [N][ceil(K/2)] (ref/wxa_gemm.c): block partials by dgemm.
 * blockwise_v1 (E4M3 only) rounds each exact partial once to FP32. Returns 0, or -1 out of memory. */
int moects__wxa_gemm_job(const moects__gemm_job *j, const void *a, moects__a_kind kind, const uint8_t *b);

/* A bound request: the kernel's accumulation class and where the bounds (and the accumulation
 * check's arrays, st NULL: not wanted) go, all [rows][N]. */
typedef struct {
    uint32_t bits;        /* accumulator precision p */
    int truncation;       /* 1: truncation, 0: RNE */
    uint32_t bf16_splits; /* 0, or at most this many K pieces whose partials are added in BF16 */
    double *bound;
    const moects_bound_stats *st;
} moects__bound_req;

/* 1 when bq's class is one the bound takes (bits 2..64, truncation 0 or 1, bf16_splits 0..256) and its st, if any, has
 * all three arrays; else 0 (the public bound functions then return -1). */
int moects__bound_req_ok(const moects__bound_req *bq);
/* The accumulation check's inputs (moects_bound_stats, DESIGN.md "Bounded verdicts") of one GEMM element
 * of K terms t_k (exact in double), from dgemm sums over them: S >= sum |t_k| (already an upper bound),
 * xm = sum t_k, qm = sum t_k^2; times alpha. sig_rel: sigma's factor of the class at K
 * (moects__ref_acc_sigma_factor); abs_err: the absolute allowances (underflow, alpha's rounding...)
 * beside x's own error, which this adds. Out: x = alpha xm, det = abs_err + x's error, sigma =
 * |alpha| sig_rel sqrt(qm (1 + 2 gamma(K, 2^-53))), det and sigma widened by 2^-40 for their own
 * roundings (the caller rounds them up to float). moe_gemm's bound (ref/bound.c) and the fused layer's
 * stage checks (ref/fused_encl_stats.c) share it. */
void moects__acc_stats(int64_t K, double sig_rel, float alpha, double S, double xm, double qm, double abs_err,
                       double *x, double *det, double *sigma);
/* Element o of st marked as one the accumulation check does not judge (det +Inf). */
void moects__stats_unchecked(const moects_bound_stats *st, int64_t o);

/* The per-element bound of moects__ref_moe_gemm_bound (and st) for one job (ref/bound.c) into rows
 * row0.. of bq's arrays, row stride N; j->out_bw, j->out_ex unused. Returns 0, or -1 out of memory. */
int moects__bound_job(const moects__gemm_job *j, const void *a, moects__a_kind kind, const uint8_t *b,
                      const moects__bound_req *bq, int64_t row0);

/* Run fn(ctx, id, nth) for id = 0..nth-1 on nth = min(units, OpenBLAS's thread count) threads of
 * our own (the caller's thread is id 0), OpenBLAS set to one thread meanwhile and restored after.
 * A thread that cannot be started has its share run on the caller's thread. */
void moects__parallel(int64_t units, void (*fn)(void *ctx, int64_t id, int64_t nth), void *ctx);

/* One allocation for a job's decoded scales: sa [M][nkb], sbt [nkb][N], nan_a [M] and nan_b [N]
 * (zeroed). Returns the block to free(), or NULL out of memory (ref/gemm_job.c). */
void *moects__job_scales(int64_t M, int64_t N, int64_t nkb, float **sa, float **sbt, uint8_t **nan_a,
                         uint8_t **nan_b);
/* Store a finished tile: rows [m0, m0+mr), columns [n0, n0+nt) of the job's outputs, from the
 * blockwise accumulators acc ([mr][nt], times alpha, then to out_dtype) and exact sums hi + xs
 * (moects__exact_store); NULL arrays for recipes the job does not want. */
void moects__store_tile(const moects__gemm_job *j, int64_t m0, int64_t n0, int64_t mr, int64_t nt, const float *acc,
                        const double *hi, moects_xsum *xs);

/* exact_v1's last step for one element: value (h + x) * alpha rounded once to out_dtype, stored at
 * out[o] (F32 or BF16 bits); nan: the element is NaN. x may be modified. */
void moects__exact_store(double h, moects_xsum *x, float alpha, int nan, int bf16, void *out, int64_t o);

/* Knuth's TwoSum: *s = RN(a + b), *e = a + b - *s exactly. */
static inline void moects__two_sum(double a, double b, double *s, double *e)
{
    double x = a + b, bv = x - a, av = x - bv;
    *s = x;
    *e = (a - av) + (b - bv);
}

static inline int64_t moects__cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
#endif
