/* parallel.c: the references' own thread split (moects_gemm_internal.h). OpenBLAS runs on one
 * thread inside each of ours, so a result never depends on OpenBLAS's threading. */
#include <cblas.h>
#include <pthread.h>

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
