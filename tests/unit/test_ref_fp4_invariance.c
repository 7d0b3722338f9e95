/* test_ref_fp4_invariance.c: the FP4 GEMM reference gives identical output bits whatever OpenBLAS
 * kernel and thread count run its block partials (DESIGN.md: E2M1 block sums are exact in FP32 in
 * any order), and whatever vector width applies the scales. OpenBLAS reads OPENBLAS_CORETYPE and
 * OPENBLAS_NUM_THREADS when it loads, so the test re-runs this executable once per setting as a
 * child (MOECTS_FP4_INVARIANCE_CHILD=1): the child checks which core OpenBLAS picked and prints a
 * hash of every output; the parent compares them all. */
#include <cblas.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "moects_quant.h"
#include "moects_ref.h"
#include "test_rng.h"

#define NPROB 10

static uint64_t fnv(const void *p, size_t n)
{
    const uint8_t *b = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* Problem i: format, recipe, layout, out dtype vary with i; shapes cross the tiles; scales over a
 * wide range so that the fma rounding and the exact sums are exercised; large codes in some blocks
 * for i >= 4; i = 8, 9: both recipes from one moects__ref_fp4_gemm_recipes call. Returns the hash
 * of the output(s). */
static uint64_t run_problem(int i)
{
    rng_state = 1000 + (uint64_t)i;
    const int fused = i >= 8;
    if (fused) i = i == 8 ? 2 : 7;
    moects_fp4_format f = (i & 1) ? MOECTS_FP4_NVFP4 : MOECTS_FP4_MXFP4;
    moects_recipe rec = (i & 2) ? MOECTS_RECIPE_EXACT_V1 : MOECTS_RECIPE_FP4_BLOCKWISE_V1;
    moects_scale_layout lay = (i & 4) ? MOECTS_SCALES_SWIZZLED_128X4 : MOECTS_SCALES_LINEAR;
    moects_dtype out = (i & 4) ? MOECTS_BF16 : MOECTS_F32;
    const int64_t M = 300, N = (i & 2) ? 70 : 270, K = 1001, g = moects_fp4_block(f);
    const int64_t nkb = (K + g - 1) / g, rb = (K + 1) / 2;
    uint8_t *a = malloc((size_t)(M * rb)), *b = malloc((size_t)(N * rb));
    uint8_t *sa = malloc((size_t)(M * nkb)), *sb = malloc((size_t)(N * nkb));
    uint8_t *sas = malloc((size_t)moects__scale_bytes(M, nkb, MOECTS_SCALES_SWIZZLED_128X4));
    uint8_t *sbs = malloc((size_t)moects__scale_bytes(N, nkb, MOECTS_SCALES_SWIZZLED_128X4));
    void *d = malloc((size_t)(M * N) * 4), *d2 = malloc((size_t)(M * N) * 4);
    for (int64_t j = 0; j < M * rb; j++) a[j] = (uint8_t)rnd();
    for (int64_t j = 0; j < N * rb; j++) b[j] = (uint8_t)rnd();
    if (i & 4) { /* large codes (+-4, +-6) in every third K-block: the reference's two-sgemm path */
        static const uint8_t big[4] = {0x66, 0x77, 0xEE, 0xF6};
        for (int64_t r = 0; r < M; r++)
            for (int64_t k = 0; k + 1 < K; k += 2)
                if ((k / g) % 3 == 0) a[r * rb + k / 2] = big[rnd() % 4];
        for (int64_t r = 0; r < N; r++)
            for (int64_t k = 0; k + 1 < K; k += 2)
                if ((k / g) % 3 == 0) b[r * rb + k / 2] = big[rnd() % 4];
    }
    for (int64_t j = 0; j < M * nkb; j++)
        sa[j] = f == MOECTS_FP4_MXFP4 ? (uint8_t)(97 + rnd() % 60) : (uint8_t)(rnd() % 0x7F);
    for (int64_t j = 0; j < N * nkb; j++)
        sb[j] = f == MOECTS_FP4_MXFP4 ? (uint8_t)(97 + rnd() % 60) : (uint8_t)(rnd() % 0x7F);
    moects__scales_swizzle(sa, M, nkb, sas);
    moects__scales_swizzle(sb, N, nkb, sbs);
    moects_fp4_gemm_shape s = {M, N, K, f, lay, out};
    int sw = lay == MOECTS_SCALES_SWIZZLED_128X4;
    moects_fp4_gemm_args args = {a, b, sw ? sas : sa, sw ? sbs : sb, f == MOECTS_FP4_NVFP4 ? 0.375f : 1.0f, d};
    uint64_t h = 0;
    const size_t bytes = (size_t)(M * N) * (out == MOECTS_BF16 ? 2 : 4);
    if (fused) {
        if (moects__ref_fp4_gemm_recipes(&s, &args, d, d2) == 0) h = fnv(d, bytes) ^ (fnv(d2, bytes) << 1);
    } else if (moects__ref_fp4_gemm(&s, &args, rec) == 0) {
        h = fnv(d, bytes);
    }
    free(a);
    free(b);
    free(sa);
    free(sb);
    free(sas);
    free(sbs);
    free(d);
    free(d2);
    return h;
}

static int child_main(void)
{
    printf("core %s threads %d\n", openblas_get_corename(), openblas_get_num_threads());
    for (int i = 0; i < NPROB; i++) printf("%d %016llx\n", i, (unsigned long long)run_problem(i));
    return 0;
}

/* Run this executable as a child with the given environment prefix; read its core name, thread
 * count and hashes. Returns 0 or -1. */
static int run_child(const char *env, char *core, int *threads, uint64_t h[NPROB])
{
    char self[4096], cmd[8192];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return -1;
    self[n] = 0;
    /* env -i: a clean environment (Criterion's worker variables would make the child a worker) */
    snprintf(cmd, sizeof cmd, "env -i %s MOECTS_FP4_INVARIANCE_CHILD=1 '%s'", env, self);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    int ok = fscanf(p, "core %63s threads %d\n", core, threads) == 2;
    for (int i = 0; ok && i < NPROB; i++) {
        int idx;
        unsigned long long v;
        ok = fscanf(p, "%d %llx\n", &idx, &v) == 2 && idx == i;
        h[i] = v;
    }
    int st = pclose(p);
    return ok && st == 0 ? 0 : -1;
}

Test(fp4_invariance, coretypes_threads_and_vector_widths, .timeout = 900)
{
    uint64_t want[NPROB];
    for (int i = 0; i < NPROB; i++) {
        want[i] = run_problem(i);
        cr_assert_neq(want[i], 0, "problem %d failed in process", i);
    }
    /* Cores an x86-64 CPU with AVX2 and FMA can run, then those that need AVX-512 (SkylakeX) and
     * AVX-512 BF16 (Cooperlake), where this CPU has them; each name is what openblas_get_corename()
     * reports back for it. */
    static const char *cores[] = {"Haswell", "Zen",   "Sandybridge", "Nehalem",  "Prescott",
                                  "Core2",   "Barcelona", "Atom",    "SkylakeX", "Cooperlake"};
    size_t ncores = 8;
    if (__builtin_cpu_supports("avx512f")) ncores = __builtin_cpu_supports("avx512bf16") ? 10 : 9;
    static const char *threads[] = {"1", "2"}; /* OpenBLAS caps the count at the CPUs (2 here) */
    int runs = 0;
    for (size_t c = 0; c < ncores; c++)
        for (size_t t = 0; t < sizeof threads / sizeof threads[0]; t++) {
            char env[256], core[64];
            int nth;
            uint64_t h[NPROB];
            snprintf(env, sizeof env, "OPENBLAS_CORETYPE=%s OPENBLAS_NUM_THREADS=%s", cores[c], threads[t]);
            cr_assert_eq(run_child(env, core, &nth, h), 0, "child failed: %s", env);
            cr_assert_str_eq(core, cores[c], "%s: OpenBLAS ran %s", env, core);
            cr_assert_eq(nth, atoi(threads[t]), "%s: %d threads", env, nth);
            for (int i = 0; i < NPROB; i++)
                cr_assert_eq(h[i], want[i], "%s: problem %d differs (%016llx vs %016llx)", env, i,
                             (unsigned long long)h[i], (unsigned long long)want[i]);
            runs++;
        }
    static const char *isas[] = {"avx2", "c", "avx512"};
    for (size_t k = 0; k < (__builtin_cpu_supports("avx512f") ? 3u : 2u); k++) {
        char env[256], core[64];
        int nth;
        uint64_t h[NPROB];
        snprintf(env, sizeof env, "MOECTS_FP4_REF_ISA=%s OPENBLAS_NUM_THREADS=2", isas[k]);
        cr_assert_eq(run_child(env, core, &nth, h), 0, "child failed: %s", env);
        for (int i = 0; i < NPROB; i++)
            cr_assert_eq(h[i], want[i], "%s: problem %d differs", env, i);
        runs++;
    }
    cr_log_info("%d child settings gave identical bits", runs);
}

int main(int argc, char *argv[])
{
    if (getenv("MOECTS_FP4_INVARIANCE_CHILD")) return child_main();
    struct criterion_test_set *tests = criterion_initialize();
    int result = 0;
    if (criterion_handle_args(argc, argv, true)) result = !criterion_run_all_tests(tests);
    criterion_finalize(tests);
    return result;
}
