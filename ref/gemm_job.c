/* gemm_job.c: what every block-scaled GEMM job shares (moects_gemm_internal.h): its scale buffers,
 * the references' own thread split (OpenBLAS runs on one thread inside each of ours, so a result
 * never depends on OpenBLAS's threading), and the store of a finished tile. */
#include <cblas.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "moects_ref.h"

#include "moects_gemm_internal.h"

#define MAX_THREADS 64

typedef struct {
    void (*fn)(void *, int64_t, int64_t);
    void *ctx;
    int64_t id, nth;
} targ;

static void *trampoline(void *p)
{
    targ *t = p;
    t->fn(t->ctx, t->id, t->nth);
    return NULL;
}

void moects__parallel(int64_t units, void (*fn)(void *ctx, int64_t id, int64_t nth), void *ctx)
{
    int blas_threads = openblas_get_num_threads();
    int64_t nth = blas_threads < 1 ? 1 : blas_threads;
    if (nth > MAX_THREADS) nth = MAX_THREADS;
    if (nth > units) nth = units;
    if (nth < 1) nth = 1;
    openblas_set_num_threads(1);
    pthread_t th[MAX_THREADS];
    targ ta[MAX_THREADS];
    int started[MAX_THREADS] = {0};
    for (int64_t i = 0; i < nth; i++) ta[i] = (targ){fn, ctx, i, nth};
    for (int64_t i = 1; i < nth; i++) started[i] = pthread_create(&th[i], NULL, trampoline, &ta[i]) == 0;
    fn(ctx, 0, nth);
    for (int64_t i = 1; i < nth; i++) {
        if (started[i]) pthread_join(th[i], NULL);
        else fn(ctx, i, nth); /* could not start a thread: do its share here */
    }
    openblas_set_num_threads(blas_threads);
}

void *moects__job_scales(int64_t M, int64_t N, int64_t nkb, float **sa, float **sbt, uint8_t **nan_a,
                         uint8_t **nan_b)
{
    size_t nf = (size_t)((M + N) * nkb), bytes = nf * sizeof(float) + (size_t)(M + N) + 1;
    uint8_t *p = malloc(bytes);
    if (!p) return NULL;
    *sa = (float *)p;
    *sbt = *sa + M * nkb;
    *nan_a = p + nf * sizeof(float);
    *nan_b = *nan_a + M;
    memset(*nan_a, 0, (size_t)(M + N));
    return p;
}

void moects__store_tile(const moects__gemm_job *j, int64_t m0, int64_t n0, int64_t mr, int64_t nt, const float *acc,
                        const double *hi, moects_xsum *xs)
{
    const int bf16 = j->out_dtype == MOECTS_BF16;
    for (int64_t i = 0; i < mr; i++)
        for (int64_t jn = 0; jn < nt; jn++) {
            int64_t o = (m0 + i) * j->N + n0 + jn;
            if (j->out_bw) {
                float v = acc[i * nt + jn] * j->alpha;
                if (bf16) ((uint16_t *)j->out_bw)[o] = moects__bf16_from_f32(v);
                else ((float *)j->out_bw)[o] = v;
            }
            if (j->out_ex)
                moects__exact_store(hi[i * nt + jn], &xs[i * nt + jn], j->alpha, j->nan_a[m0 + i] || j->nan_b[n0 + jn],
                                    bf16, j->out_ex, o);
        }
}
