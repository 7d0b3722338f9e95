/* cuda_util.cu: error reporting, the dlopen'ed cuBLAS and shared shape checks (see cuda_util.cuh). */
#include "cuda_util.cuh"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int moects__scales_out_check(moects_scale_layout scale_layout, moects_dtype out_dtype, char *why, size_t why_len)
{
    if (scale_layout != MOECTS_SCALES_LINEAR && scale_layout != MOECTS_SCALES_SWIZZLED_128X4) {
        snprintf(why, why_len, "layout: unknown scale layout %d", (int)scale_layout);
        return 0;
    }
    if (out_dtype != MOECTS_BF16 && out_dtype != MOECTS_F32) {
        snprintf(why, why_len, "format: out_dtype must be bf16 or fp32");
        return 0;
    }
    return 1;
}

int moects__cuda_check(cudaError_t e, const char *what, const char *file, int line)
{
    if (e == cudaSuccess) return 0;
    fprintf(stderr, "%s:%d: %s: %s (%s)\n", file, line, what, cudaGetErrorString(e), cudaGetErrorName(e));
    return 1;
}

unsigned long moects__cublas_grouped_calls;

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
        snprintf(g_cublas_why, sizeof g_cublas_why, "resource: cuBLAS not available: dlopen libcublas.so.13 failed (%s)",
                 tried);
        return g_lib_state = -1;
    }
    *(void **)&c.create = dlsym(c.lib, "cublasCreate_v2");
    *(void **)&c.destroy = dlsym(c.lib, "cublasDestroy_v2");
    *(void **)&c.set_stream = dlsym(c.lib, "cublasSetStream_v2");
    *(void **)&c.gemm_ex = dlsym(c.lib, "cublasGemmEx");
    *(void **)&c.set_math_mode = dlsym(c.lib, "cublasSetMathMode");
    *(void **)&c.grouped = dlsym(c.lib, "cublasGemmGroupedBatchedEx"); /* optional */
    *(void **)&c.set_workspace = dlsym(c.lib, "cublasSetWorkspace_v2"); /* optional */
    if (!c.create || !c.destroy || !c.set_stream || !c.gemm_ex || !c.set_math_mode) {
        snprintf(g_cublas_why, sizeof g_cublas_why, "resource: cuBLAS not available: libcublas.so.13 lacks "
                 "cublasCreate_v2/cublasSetStream_v2/cublasGemmEx/cublasSetMathMode");
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
            int st = g_cublas.create(&g_cublas.handle), mm = -1;
            if (st != 0) {
                snprintf(g_cublas_why, sizeof g_cublas_why, "resource: cuBLAS: cublasCreate failed (status %d)", st);
                g_cublas_state = -1;
            } else if ((mm = g_cublas.set_math_mode(g_cublas.handle, MOECTS__CUBLAS_MATH_FP32_REDUCTION)) != 0) {
                /* without it cuBLAS may reduce split-K partials in BF16: not the class the kernels declare */
                snprintf(g_cublas_why, sizeof g_cublas_why,
                         "resource: cuBLAS: cublasSetMathMode(DEFAULT | DISALLOW_REDUCED_PRECISION_REDUCTION) failed (status %d)", mm);
                g_cublas.destroy(g_cublas.handle);
                g_cublas.handle = NULL;
                g_cublas_state = -1;
            } else {
                g_cublas_state = 1;
                /* cuBLASLt's split-K reduction reads workspace bytes its GEMM kernel did not write in
                 * that call (compute-sanitizer initcheck on the H200, results correct): a workspace
                 * zeroed once keeps initcheck's reports to the kernels under test. */
                if (g_cublas.set_workspace && cudaMalloc(&g_cublas.ws, MOECTS__CUBLAS_WS_BYTES) == cudaSuccess &&
                    (cudaMemset(g_cublas.ws, 0, MOECTS__CUBLAS_WS_BYTES) != cudaSuccess ||
                     cudaDeviceSynchronize() != cudaSuccess)) { /* done before a non-blocking stream uses it */
                    cudaFree(g_cublas.ws);
                    g_cublas.ws = NULL;
                }
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
/* cublasSetStream, then the zeroed workspace again (cublasSetStream resets it to cuBLAS's pool). */
static int bind_stream(const moects__cublas *cb, cudaStream_t s)
{
    int st = cb->set_stream(cb->handle, s);
    if (st == 0 && cb->ws) st = cb->set_workspace(cb->handle, cb->ws, MOECTS__CUBLAS_WS_BYTES);
    return st;
}

int moects__cublas_gemm_nt_bf16(const moects__cublas *cb, cudaStream_t s, long M, long N, long K,
                                float alpha, const void *A, const void *B, void *D, int d_type,
                                char *why, size_t why_len)
{
    if (M <= 0 || N <= 0) return 0;
    if (M > 2147483647L || N > 2147483647L || K > 2147483647L) {
        snprintf(why, why_len, "shape: cuBLAS GemmEx: M, N, K must fit in int (M=%ld N=%ld K=%ld)", M, N, K);
        return -1;
    }
    /* Row-major D[M][N] is column-major D^T [N x M] = B (col-major [K x N], transposed) * A. */
    float beta = 0.0f;
    int st = bind_stream(cb, s);
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

int moects__cublas_moe_gemm(const moects__cublas *cb, cudaStream_t s, const moects__moe_seg *seg, int nseg, long N,
                            long K, int in_type, const void *A, const void *B, void *D, int d_type, void **ptrs,
                            char *why, size_t why_len)
{
    const size_t osz = d_type == MOECTS__CUDA_R_16BF ? 2 : 4, isz = in_type == MOECTS__CUDA_R_16BF ? 2 : 4;
    if (N > 2147483647L || K > 2147483647L) {
        snprintf(why, why_len, "shape: cuBLAS: N and K must fit in int (N=%ld K=%ld)", N, K);
        return -1;
    }
    int st = bind_stream(cb, s);
    if (st == 0 && cb->grouped && nseg > 0) {
        /* one group per segment (m, n differ): column-major D^T [N x rows] = B_e^T-view * A rows */
        int *iv = (int *)malloc((size_t)nseg * 9 * sizeof(int));
        float *fv = (float *)malloc((size_t)nseg * 2 * sizeof(float));
        const void **hp = (const void **)malloc((size_t)nseg * 3 * sizeof(void *));
        int g = 0;
        if (!iv || !fv || !hp) {
            free(iv), free(fv), free(hp);
            snprintf(why, why_len, "cuBLAS grouped GEMM: host out of memory");
            return -1;
        }
        for (int i = 0; i < nseg; i++) {
            if (seg[i].rows <= 0) continue;
            iv[0 * nseg + g] = MOECTS__CUBLAS_OP_T, iv[1 * nseg + g] = MOECTS__CUBLAS_OP_N;
            iv[2 * nseg + g] = (int)N, iv[3 * nseg + g] = (int)seg[i].rows, iv[4 * nseg + g] = (int)K;
            iv[5 * nseg + g] = (int)K, iv[6 * nseg + g] = (int)K, iv[7 * nseg + g] = (int)N, iv[8 * nseg + g] = 1;
            fv[g] = seg[i].alpha, fv[nseg + g] = 0.0f;
            hp[g] = (const char *)B + (size_t)seg[i].expert * (size_t)N * (size_t)K * isz;
            hp[nseg + g] = (const char *)A + (size_t)seg[i].row0 * (size_t)K * isz;
            hp[2 * nseg + g] = (const char *)D + (size_t)seg[i].row0 * (size_t)N * osz;
            g++;
        }
        if (g > 0) {
            /* pageable source: the copy is staged before cudaMemcpyAsync returns, so hp may be freed */
            for (int j = 0; j < 3 && st == 0; j++)
                if (cudaMemcpyAsync(ptrs + (size_t)j * nseg, hp + (size_t)j * nseg, (size_t)g * sizeof(void *),
                                    cudaMemcpyHostToDevice, s) != cudaSuccess)
                    st = -1;
            if (st == 0)
                st = cb->grouped(cb->handle, iv, iv + nseg, iv + 2 * nseg, iv + 3 * nseg, iv + 4 * nseg, fv,
                                 (const void *const *)ptrs, in_type, iv + 5 * nseg,
                                 (const void *const *)(ptrs + nseg), in_type, iv + 6 * nseg, fv + nseg,
                                 (void *const *)(ptrs + 2 * nseg), d_type, iv + 7 * nseg, g, iv + 8 * nseg,
                                 MOECTS__CUBLAS_COMPUTE_32F);
        }
        free(iv), free(fv), free(hp);
        if (st == 0) return moects__cublas_grouped_calls++, 0;
        /* e.g. CUBLAS_STATUS_NOT_SUPPORTED (15) for these types: one cublasGemmEx per segment instead */
        static int told;
        if (!told++)
            fprintf(stderr, "cuda_util: cublasGemmGroupedBatchedEx failed (status %d, %d groups, N=%ld K=%ld): "
                    "per-expert cublasGemmEx instead\n", st, g, N, K);
        st = 0;
    }
    for (int i = 0; i < nseg && st == 0; i++) {
        if (seg[i].rows <= 0) continue;
        const float beta = 0.0f;
        st = cb->gemm_ex(cb->handle, MOECTS__CUBLAS_OP_T, MOECTS__CUBLAS_OP_N, (int)N, (int)seg[i].rows, (int)K,
                         &seg[i].alpha, (const char *)B + (size_t)seg[i].expert * (size_t)N * (size_t)K * isz,
                         in_type, (int)K, (const char *)A + (size_t)seg[i].row0 * (size_t)K * isz,
                         in_type, (int)K, &beta, (char *)D + (size_t)seg[i].row0 * (size_t)N * osz,
                         d_type, (int)N, MOECTS__CUBLAS_COMPUTE_32F, MOECTS__CUBLAS_GEMM_DEFAULT);
    }
    if (st != 0) {
        snprintf(why, why_len, "cuBLAS per-expert GemmEx failed (status %d), N=%ld K=%ld", st, N, K);
        return -1;
    }
    return 0;
}
