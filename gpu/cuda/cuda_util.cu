/* cuda_util.cu: error reporting and the dlopen'ed cuBLAS (see cuda_util.cuh). */
#include "cuda_util.cuh"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

int moects__cuda_check(cudaError_t e, const char *what, const char *file, int line)
{
    if (e == cudaSuccess) return 0;
    fprintf(stderr, "%s:%d: %s: %s (%s)\n", file, line, what, cudaGetErrorString(e), cudaGetErrorName(e));
    return 1;
}

static moects__cublas g_cublas;
static int g_lib_state;    /* 0 untried, 1 loaded, -1 failed */
static int g_cublas_state; /* 0 untried, 1 ok, -1 failed */
static char g_cublas_why[256];
static pthread_mutex_t g_cublas_mu = PTHREAD_MUTEX_INITIALIZER;

static void *open_cublas(char *tried, size_t tried_len)
{
    /* The soname first (LD_LIBRARY_PATH, ldconfig), then the usual toolkit and pip locations. */
    static const char *const names[] = {
        "libcublas.so.13",
        "/usr/local/cuda/lib64/libcublas.so.13",
        "/usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13",
        "/usr/lib/x86_64-linux-gnu/libcublas.so.13",
        "/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cu13/lib/libcublas.so.13",
        "/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cublas/lib/libcublas.so.13",
    };
    tried[0] = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (h) return h;
        const char *e = dlerror();
        if (i == 0) snprintf(tried, tried_len, "%s", e ? e : names[0]);
    }
    return NULL;
}

/* dlopen + dlsym only: no CUDA call, safe in a parent that forks workers. Caller holds the mutex. */
static int load_lib_locked(void)
{
    if (g_lib_state) return g_lib_state;
    char tried[200];
    moects__cublas c;
    memset(&c, 0, sizeof c);
    c.lib = open_cublas(tried, sizeof tried);
    if (!c.lib) {
        snprintf(g_cublas_why, sizeof g_cublas_why, "cuBLAS not available: dlopen libcublas.so.13 failed (%s)",
                 tried);
        return g_lib_state = -1;
    }
    *(void **)&c.create = dlsym(c.lib, "cublasCreate_v2");
    *(void **)&c.destroy = dlsym(c.lib, "cublasDestroy_v2");
    *(void **)&c.set_stream = dlsym(c.lib, "cublasSetStream_v2");
    *(void **)&c.gemm_ex = dlsym(c.lib, "cublasGemmEx");
    if (!c.create || !c.destroy || !c.set_stream || !c.gemm_ex) {
        snprintf(g_cublas_why, sizeof g_cublas_why,
                 "cuBLAS not available: libcublas.so.13 lacks cublasCreate_v2/cublasSetStream_v2/cublasGemmEx");
        return g_lib_state = -1;
    }
    g_cublas = c;
    return g_lib_state = 1;
}

int moects__cublas_probe(char *why, size_t why_len)
{
    pthread_mutex_lock(&g_cublas_mu);
    int ok = load_lib_locked() == 1;
    pthread_mutex_unlock(&g_cublas_mu);
    if (!ok && why && why_len) snprintf(why, why_len, "%s", g_cublas_why);
    return ok;
}

const moects__cublas *moects__cublas_get(char *why, size_t why_len)
{
    pthread_mutex_lock(&g_cublas_mu);
    if (g_cublas_state == 0) {
        if (load_lib_locked() != 1) {
            g_cublas_state = -1;
        } else {
            int st = g_cublas.create(&g_cublas.handle);
            if (st != 0) {
                snprintf(g_cublas_why, sizeof g_cublas_why, "cuBLAS: cublasCreate failed (status %d)", st);
                g_cublas_state = -1;
            } else {
                g_cublas_state = 1;
            }
        }
    }
    int ok = g_cublas_state == 1;
    pthread_mutex_unlock(&g_cublas_mu);
    if (!ok) {
        if (why && why_len) snprintf(why, why_len, "%s", g_cublas_why);
        return NULL;
    }
    return &g_cublas;
}
int moects__cublas_gemm_nt_bf16(const moects__cublas *cb, cudaStream_t s, long M, long N, long K,
                                float alpha, const void *A, const void *B, void *D, int d_type,
                                char *why, size_t why_len)
{
    if (M <= 0 || N <= 0) return 0;
    if (M > 2147483647L || N > 2147483647L || K > 2147483647L) {
        snprintf(why, why_len, "cuBLAS GemmEx: M, N, K must fit in int (M=%ld N=%ld K=%ld)", M, N, K);
        return -1;
    }
    /* Row-major D[M][N] is column-major D^T [N x M] = B (col-major [K x N], transposed) * A. */
    float beta = 0.0f;
    int st = cb->set_stream(cb->handle, s);
    if (st == 0)
        st = cb->gemm_ex(cb->handle, MOECTS__CUBLAS_OP_T, MOECTS__CUBLAS_OP_N, (int)N, (int)M, (int)K,
                         &alpha, B, MOECTS__CUDA_R_16BF, (int)K, A, MOECTS__CUDA_R_16BF, (int)K, &beta,
                         D, d_type, (int)N, MOECTS__CUBLAS_COMPUTE_32F, MOECTS__CUBLAS_GEMM_DEFAULT);
    if (st != 0) {
        snprintf(why, why_len, "cublasGemmEx failed (status %d) for M=%ld N=%ld K=%ld", st, M, N, K);
        return -1;
    }
    return 0;
}
