/* cublas_schemes.cu: which split-K reduction cuBLASLt picks for the cuBLAS calls of moects' cuBLAS
 * kernels (cuda.fp4_gemm.dequant_cublas, cuda.moe_gemm.w4a16_cublas, cuda.moe_gemm.w4a8_cublas) on
 * every GEMM shape of the registry's smoke and full cases they support (issue 25). Each case's calls
 * are made as the kernel makes them (moects__cublas_gemm_nt_bf16 / moects__cublas_moe_gemm on the
 * process's handle, its math mode included; per-expert rows from moects__moe_counts, segments at the
 * row offsets of the case's row layout) on device buffers of the case's size, without dequantizing
 * or judging: cuBLASLt's heuristic looks at shapes, types, alignment and math mode, not at values.
 * cuBLASLt's logger (level 5, a callback) reports each chosen algorithm's reductionScheme and
 * numSplitsK; a call that logs REDUCTION_SCHEME_OUTPUT_TYPE adds split-K partials in the BF16 output,
 * which the kernels' declared class (FP32 accumulation) excludes.
 *
 *   moects_cublas_schemes [--tier smoke|full|all] [--glob CASE_GLOB] [--default-math] [-v]
 *
 * --default-math: the handle back in CUBLAS_DEFAULT_MATH (the kernels before issue 25), the negative
 * control: OUTPUT_TYPE must then show on the issue's shapes. Prints one line per kernel (calls,
 * schemes, most splits) and, -v, one per distinct call; exit 0 when every call logged the algorithms
 * it ran (or ran as one cublasGemmGroupedBatchedEx, which logs no algorithm: not observable here, the
 * accumulation check judges those outputs; or had K = 0) and none reduced in OUTPUT_TYPE, 1 otherwise
 * (a call that logged nothing else is unknown, not a pass), 2 on bad usage or a CUDA/cuBLAS error.
 * Runs on the GPU host
 * (tools/h200_check.sh); MOECTS_ROOT names the checkout. */
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <string>
#include <unordered_set>
#include <vector>

#include "cuda_util.cuh"
extern "C" {
#include "moects_cases.h"
#include "moects_inputs.h"
#include "moects_kernel.h"
#include "moects_registry.h"
}

namespace {

/* What cuBLASLt's logger said since the last call: the algorithms it ran (a Trace line holding
 * "algo=[") and their split-K reduction schemes (none named: no split-K); the functions it logged. */
struct log_state {
    int algos, output_type, compute_type, inplace, other, max_splits;
    std::string first_output_type, functions;
};
log_state g_log;

void on_log(int, const char *fn, const char *msg)
{
    if (fn && g_log.functions.find(fn) == std::string::npos && g_log.functions.size() < 400)
        g_log.functions += std::string(g_log.functions.empty() ? "" : " ") + fn;
    if (!msg || !strstr(msg, "algo=[")) return;
    g_log.algos++;
    const char *p = strstr(msg, "reductionScheme=");
    if (!p) return; /* no split-K */
    p += strlen("reductionScheme=");
    if (!strncmp(p, "REDUCTION_SCHEME_OUTPUT_TYPE", 28)) {
        if (!g_log.output_type++) g_log.first_output_type = msg;
    } else if (!strncmp(p, "REDUCTION_SCHEME_COMPUTE_TYPE", 29)) g_log.compute_type++;
    else if (!strncmp(p, "REDUCTION_SCHEME_INPLACE", 24)) g_log.inplace++;
    else g_log.other++;
    const char *s = strstr(msg, "numSplitsK=");
    if (s) {
        const int n = atoi(s + 11);
        if (n > g_log.max_splits) g_log.max_splits = n;
    }
}

/* cuBLASLt's logger, from the libcublasLt.so.13 that libcublas.so.13 loaded. */
int install_logger(char *why, size_t len)
{
    void *lt = dlopen("libcublasLt.so.13", RTLD_NOW | RTLD_NOLOAD);
    if (!lt) lt = dlopen("libcublasLt.so.13", RTLD_NOW);
    typedef int (*set_cb_fn)(void (*)(int, const char *, const char *));
    typedef int (*set_level_fn)(int);
    typedef int (*set_file_fn)(FILE *);
    set_cb_fn set_cb = lt ? (set_cb_fn)dlsym(lt, "cublasLtLoggerSetCallback") : NULL;
    set_level_fn set_level = lt ? (set_level_fn)dlsym(lt, "cublasLtLoggerSetLevel") : NULL;
    set_file_fn set_file = lt ? (set_file_fn)dlsym(lt, "cublasLtLoggerSetFile") : NULL;
    FILE *devnull = fopen("/dev/null", "w"); /* the log's text goes to the callback alone, not stdout */
    if (set_file && devnull) set_file(devnull);
    if (!set_cb || !set_level || set_cb(on_log) != 0 || set_level(5) != 0) {
        snprintf(why, len, "cuBLASLt logger not available (libcublasLt.so.13: %s)", lt ? "no logger API" : dlerror());
        return -1;
    }
    return 0;
}

/* Per kernel: the calls made and what they logged (a call counts once in each scheme it used). */
struct tally {
    const char *kernel;
    long calls, output_type, compute_type, inplace, other, no_split, grouped, empty, silent;
    int max_splits;
    std::string silent_case; /* the first call that logged no algorithm and is neither grouped nor empty */
};

/* Device buffers grown to the largest call (contents never read for a verdict). */
struct buffers {
    void *a = NULL, *b = NULL, *d = NULL, **ptrs = NULL;
    size_t na = 0, nb = 0, nd = 0, np = 0;
};

int grow(void **p, size_t *have, size_t want)
{
    if (want <= *have) return 0;
    cudaFree(*p);
    *have = 0;
    if (cudaMalloc(p, want) != cudaSuccess) return fprintf(stderr, "cudaMalloc of %zu bytes failed\n", want), -1;
    *have = want;
    return 0;
}

/* One case's cuBLAS call as kernel k makes it. *key: the call's identity, to skip repeats. */
int call_case(const moects_case *c, const moects__cublas *cb, const char *k, buffers *bf, std::string *key,
              int dry, char *why, size_t len)
{
    cudaStream_t st = 0;
    if (c->op == MOECTS_OP_FP4_GEMM) {
        const int dt = c->out_dtype == MOECTS_BF16 ? MOECTS__CUDA_R_16BF : MOECTS__CUDA_R_32F;
        *key = std::to_string(c->M) + "x" + std::to_string(c->N) + "x" + std::to_string(c->K) + "/" + std::to_string(dt);
        if (dry) return 0;
        if (grow(&bf->a, &bf->na, (size_t)(c->M * c->K) * 2 + 16) || grow(&bf->b, &bf->nb, (size_t)(c->N * c->K) * 2 + 16) ||
            grow(&bf->d, &bf->nd, (size_t)(c->M * c->N) * 4 + 16))
            return -1;
        return moects__cublas_gemm_nt_bf16(cb, st, c->M, c->N, c->K, 1.0f, bf->a, bf->b, bf->d, dt, why, len);
    }
    moects_moe_gemm_shape s;
    moects__moe_case_shape(c, &s);
    std::vector<int64_t> cnt((size_t)c->E);
    if (moects__moe_counts(c, 1, cnt.data(), why, len)) return -1;
    const int w4a8 = !strcmp(k, "cuda.moe_gemm.w4a8_cublas");
    const int in = w4a8 ? MOECTS__CUDA_R_32F : MOECTS__CUDA_R_16BF;
    const int out = c->out_dtype == MOECTS_BF16 && !w4a8 ? MOECTS__CUDA_R_16BF : MOECTS__CUDA_R_32F;
    std::vector<moects__moe_seg> seg;
    int64_t row = 0, max_m = 0;
    for (int64_t e = 0; e < c->E; e++) max_m = cnt[(size_t)e] > max_m ? cnt[(size_t)e] : max_m;
    if (c->rows == MOECTS_ROWS_MASKED && s.M > max_m) max_m = s.M; /* the masked layout's max_m */
    *key = std::to_string(c->N) + "x" + std::to_string(c->K) + "/" + std::to_string(in) + std::to_string(out) + "/" +
           std::to_string((int)c->rows) + "/" + std::to_string(c->align) + ":";
    for (int64_t e = 0; e < c->E; e++) {
        const int64_t r = cnt[(size_t)e];
        const int64_t row0 = c->rows == MOECTS_ROWS_MASKED ? e * max_m : row;
        seg.push_back(moects__moe_seg{row0, r, (int)e, 1.0f});
        row += c->rows == MOECTS_ROWS_CONTIGUOUS ? (r + c->align - 1) / c->align * c->align : r;
        *key += std::to_string(r) + ",";
    }
    if (dry) return 0;
    const int64_t rows = c->rows == MOECTS_ROWS_MASKED ? c->E * max_m : row;
    const size_t isz = in == MOECTS__CUDA_R_32F ? 4 : 2, osz = out == MOECTS__CUDA_R_32F ? 4 : 2;
    if (grow(&bf->a, &bf->na, (size_t)(rows * c->K) * isz + 16) || grow(&bf->b, &bf->nb, (size_t)(c->E * c->N * c->K) * isz + 16) ||
        grow(&bf->d, &bf->nd, (size_t)(rows * c->N) * osz + 16) ||
        grow((void **)&bf->ptrs, &bf->np, seg.size() * 3 * sizeof(void *) + 8))
        return -1;
    return moects__cublas_moe_gemm(cb, st, seg.data(), (int)seg.size(), (long)c->N, (long)c->K, in, bf->a, bf->b, bf->d,
                                   out, bf->ptrs, why, len);
}

/* The shape struct supports() takes for case c. */
int supported(const moects_kernel *k, const moects_case *c)
{
    char why[256];
    if (c->op == MOECTS_OP_FP4_GEMM) {
        moects_fp4_gemm_shape s = {c->M, c->N, c->K, c->format, c->scale_layout, c->out_dtype};
        return k->supports(&s, why, sizeof why);
    }
    moects_moe_gemm_shape s;
    moects__moe_case_shape(c, &s);
    return k->supports(&s, why, sizeof why);
}

const moects_kernel *find_kernel(const char *name)
{
    size_t n = 0;
    const moects_kernel *const *v = moects__builtin_kernels(&n);
    for (size_t i = 0; i < n; i++)
        if (!strcmp(v[i]->name, name)) return v[i];
    return NULL;
}

/* grouped: the call ran as one cublasGemmGroupedBatchedEx (it logs no algorithm: counted apart); a
 * case of K = 0 or no rows launches no GEMM. */
void absorb(tally *t, int verbose, const moects_case *c, int grouped)
{
    t->calls++;
    const int empty = c->K == 0 || (c->op == MOECTS_OP_FP4_GEMM && (c->M == 0 || c->N == 0));
    if (!g_log.algos && (grouped || empty)) {
        t->grouped += grouped, t->empty += !grouped;
        return;
    }
    t->output_type += g_log.output_type > 0, t->compute_type += g_log.compute_type > 0;
    t->inplace += g_log.inplace > 0, t->other += g_log.other > 0;
    t->no_split += g_log.algos > g_log.output_type + g_log.compute_type + g_log.inplace + g_log.other;
    if (!g_log.algos && !t->silent++) t->silent_case = std::string(c->id) + " (logged: " + (g_log.functions.empty() ? "nothing" : g_log.functions) + ")";
    if (g_log.max_splits > t->max_splits) t->max_splits = g_log.max_splits;
    if (verbose || g_log.output_type)
        printf("  %s %s: %d algorithms, OUTPUT_TYPE %d, COMPUTE_TYPE %d, INPLACE %d, splits <= %d%s%s\n", t->kernel,
               c->id, g_log.algos, g_log.output_type, g_log.compute_type, g_log.inplace, g_log.max_splits,
               g_log.output_type ? "\n    first: " : "", g_log.first_output_type.c_str());
}

} // namespace

int main(int argc, char **argv)
{
    unsigned tiers = MOECTS_TIER_SMOKE | MOECTS_TIER_FULL;
    const char *glob = "*";
    int default_math = 0, verbose = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--tier") && i + 1 < argc) {
            const char *t = argv[++i];
            tiers = !strcmp(t, "smoke") ? MOECTS_TIER_SMOKE : !strcmp(t, "full") ? MOECTS_TIER_FULL
                  : !strcmp(t, "all")   ? MOECTS_TIER_SMOKE | MOECTS_TIER_FULL : 0;
            if (!tiers) return fprintf(stderr, "cublas_schemes: --tier: smoke, full or all, not \"%s\"\n", t), 2;
        } else if (!strcmp(argv[i], "--glob") && i + 1 < argc) glob = argv[++i];
        else if (!strcmp(argv[i], "--default-math")) default_math = 1;
        else if (!strcmp(argv[i], "-v")) verbose = 1;
        else return fprintf(stderr, "usage: moects_cublas_schemes [--tier smoke|full|all] [--glob G] [--default-math] [-v]\n"), 2;
    }
    char why[512];
    const moects__cublas *cb = moects__cublas_get(why, sizeof why);
    if (!cb) return fprintf(stderr, "cublas_schemes: %s\n", why), 2;
    if (default_math && cb->set_math_mode(cb->handle, 0) != 0) return fprintf(stderr, "cublas_schemes: cublasSetMathMode(0) failed\n"), 2;
    if (install_logger(why, sizeof why)) return fprintf(stderr, "cublas_schemes: %s\n", why), 2;
    moects_case_list all = {0};
    const char *root = getenv("MOECTS_ROOT") ? getenv("MOECTS_ROOT") : ".";
    if (moects__cases_builtin(root, &all, why, sizeof why)) return fprintf(stderr, "cublas_schemes: %s\n", why), 2;
    tally tk[3] = {};
    tk[0].kernel = "cuda.fp4_gemm.dequant_cublas", tk[1].kernel = "cuda.moe_gemm.w4a16_cublas";
    tk[2].kernel = "cuda.moe_gemm.w4a8_cublas";
    buffers bf;
    printf("cublas_schemes: math mode %s, tiers %s, cases %s\n",
           default_math ? "CUBLAS_DEFAULT_MATH (negative control)" : "the kernels' (DISALLOW_REDUCED_PRECISION_REDUCTION)",
           tiers == MOECTS_TIER_SMOKE ? "smoke" : tiers == MOECTS_TIER_FULL ? "full" : "smoke+full", glob);
    for (tally &t : tk) {
        const moects_kernel *k = find_kernel(t.kernel);
        if (!k) return fprintf(stderr, "cublas_schemes: kernel %s not built in\n", t.kernel), 2;
        std::unordered_set<std::string> seen;
        for (size_t i = 0; i < all.n; i++) {
            const moects_case *c = &all.v[i];
            if (c->op != k->op || !(c->tiers & tiers) || fnmatch(glob, c->id, 0) || !supported(k, c)) continue;
            std::string key;
            if (call_case(c, cb, t.kernel, &bf, &key, 1, why, sizeof why) == 0 && !seen.insert(key).second) continue;
            g_log = log_state();
            const unsigned long grouped0 = moects__cublas_grouped_calls;
            if (call_case(c, cb, t.kernel, &bf, &key, 0, why, sizeof why) || cudaDeviceSynchronize() != cudaSuccess)
                return fprintf(stderr, "cublas_schemes: %s: %s: %s\n", t.kernel, c->id, why), 2;
            absorb(&t, verbose, c, moects__cublas_grouped_calls != grouped0);
        }
        printf("%-30s %5ld distinct calls: split-K reduced in OUTPUT_TYPE %ld, COMPUTE_TYPE %ld, INPLACE %ld, "
               "other %ld; no split-K %ld; grouped (cublasGemmGroupedBatchedEx, logs no algorithm) %ld; no GEMM (K 0) %ld; unknown "
               "%ld%s%s; numSplitsK <= %d\n",
               t.kernel, t.calls, t.output_type, t.compute_type, t.inplace, t.other, t.no_split, t.grouped, t.empty,
               t.silent, t.silent ? ", first " : "", t.silent_case.c_str(), t.max_splits);
        fflush(stdout);
    }
    long bad = 0, silent = 0, calls = 0;
    for (const tally &t : tk) bad += t.output_type, silent += t.silent, calls += t.calls;
    if (!calls || silent) printf("FAIL: %ld of %ld calls logged no algorithm and ran no grouped GEMM: their reduction is unknown\n", silent, calls);
    else if (bad) printf("FAIL: split-K partials reduced in the output type (BF16) on %ld calls\n", bad);
    else printf("PASS: no call of %ld reduced split-K partials in the output type\n", calls);
    moects__case_list_free(&all);
    return !calls || silent || bad;
}
