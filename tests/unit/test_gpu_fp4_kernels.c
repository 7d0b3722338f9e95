/* test_gpu_fp4_kernels.c: the CPU FP4 GEMM kernels under test (gpu/cpu/fp4_*.c), found through the
 * registry: cpu.fp4_gemm.blockwise matches the reference's blockwise_v1 bit for bit;
 * cpu.fp4_gemm.dequant_sgemm matches exact_v1 exactly where every FP32 step is exact and stays
 * within its declared tolerance elsewhere; each mutant agrees where its bug is hidden and differs on
 * a problem built to expose it, with the values worked out by hand. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "moects_quant.h"
#include "moects_ref.h"
#include "moects_registry.h"
#include "test_rng.h"

static const moects_kernel *find(const char *name)
{
    size_t n;
    const moects_kernel *const *all = moects__builtin_kernels(&n);
    for (size_t i = 0; i < n; i++)
        if (strcmp(all[i]->name, name) == 0) return all[i];
    cr_assert_fail("kernel %s not registered", name);
    return NULL;
}

static const char *const MUTANTS[] = {"cpu.mutant.fp4_gemm.nibble_swap", "cpu.mutant.fp4_gemm.tail_scale",
                                      "cpu.mutant.fp4_gemm.e4m3_as_ue8m0", "cpu.mutant.fp4_gemm.scale_ftz"};

Test(fp4_kernels, registered)
{
    const moects_kernel *b = find("cpu.fp4_gemm.blockwise"), *d = find("cpu.fp4_gemm.dequant_sgemm");
    cr_assert_str_eq(b->recipe, "fp4_gemm.blockwise_v1");
    cr_assert_null(b->bug);
    cr_assert_null(d->recipe);
    cr_assert(d->acc.bits == 24 && !d->acc.truncation); /* FP32 accumulation, RNE, order any */
    for (size_t i = 0; i < 4; i++) {
        const moects_kernel *k = find(MUTANTS[i]);
        cr_assert_str_eq(k->recipe, "fp4_gemm.blockwise_v1", "%s", MUTANTS[i]);
        cr_assert_not_null(k->bug);
    }
    const char *all[] = {"cpu.fp4_gemm.blockwise", "cpu.fp4_gemm.dequant_sgemm", MUTANTS[0], MUTANTS[1], MUTANTS[2],
                         MUTANTS[3]};
    for (size_t i = 0; i < 6; i++) {
        const moects_kernel *k = find(all[i]);
        cr_assert_eq(k->abi_version, MOECTS_KERNEL_ABI_VERSION);
        cr_assert_eq(k->op, MOECTS_OP_FP4_GEMM);
        cr_assert_eq(k->device, MOECTS_DEVICE_CPU);
        char why[128] = "";
        moects_fp4_gemm_shape s = {4096, 3584, 384, MOECTS_FP4_NVFP4, MOECTS_SCALES_SWIZZLED_128X4, MOECTS_BF16};
        cr_assert_eq(k->supports(&s, why, sizeof why), 1, "%s: %s", all[i], why);
        s.format = MOECTS_FP4_MXFP4;
        s.K = 7;
        int want = strcmp(all[i], "cpu.mutant.fp4_gemm.e4m3_as_ue8m0") != 0;
        cr_assert_eq(k->supports(&s, why, sizeof why), want, "%s", all[i]);
        if (!want) cr_assert_str_eq(why, "scope: mutant of the NVFP4 scale decode only");
        s.out_dtype = MOECTS_I32;
        cr_assert_eq(k->supports(&s, why, sizeof why), 0);
        cr_assert_str_eq(why, "format: output dtype not f32/bf16");
    }
}

/* ---- problems ---- */

typedef struct {
    moects_fp4_gemm_shape s;
    moects_fp4_gemm_args a;
    uint8_t *A, *B, *sa, *sb;
    void *d;
} prob;

/* wide: scales over the whole range (incl. subnormal, 0, NaN); else narrow: 2^-2..2^2-ish */
static void make(prob *p, int64_t M, int64_t N, int64_t K, moects_fp4_format f, moects_scale_layout lay,
                 moects_dtype out, int wide)
{
    memset(p, 0, sizeof *p);
    p->s = (moects_fp4_gemm_shape){M, N, K, f, lay, out};
    int64_t g = moects_fp4_block(f), nkb = (K + g - 1) / g, rb = (K + 1) / 2;
    p->A = malloc((size_t)(M * rb + 1));
    p->B = malloc((size_t)(N * rb + 1));
    for (int64_t i = 0; i < M * rb; i++) p->A[i] = (uint8_t)rnd();
    for (int64_t i = 0; i < N * rb; i++) p->B[i] = (uint8_t)rnd();
    uint8_t *ls[2] = {malloc((size_t)(M * nkb + 1)), malloc((size_t)(N * nkb + 1))};
    int64_t rows[2] = {M, N};
    for (int o = 0; o < 2; o++)
        for (int64_t i = 0; i < rows[o] * nkb; i++) {
            if (f == MOECTS_FP4_MXFP4) ls[o][i] = wide ? (uint8_t)(rnd() % 256) : (uint8_t)(125 + rnd() % 5);
            else ls[o][i] = wide ? (uint8_t)(rnd() % 128) : (uint8_t)(0x28 + rnd() % 24);
        }
    for (int o = 0; o < 2; o++) {
        uint8_t *dst;
        if (lay == MOECTS_SCALES_LINEAR) {
            dst = ls[o];
        } else {
            dst = malloc((size_t)moects__scale_bytes(rows[o], nkb, lay) + 1);
            moects__scales_swizzle(ls[o], rows[o], nkb, dst);
            free(ls[o]);
        }
        if (o == 0) p->sa = dst;
        else p->sb = dst;
    }
    p->d = malloc((size_t)(M * N + 1) * 4);
    p->a = (moects_fp4_gemm_args){p->A, p->B, p->sa, p->sb, f == MOECTS_FP4_NVFP4 ? 0.3125f : 1.0f, p->d};
}

static void release(prob *p)
{
    free(p->A);
    free(p->B);
    free(p->sa);
    free(p->sb);
    free(p->d);
}

static size_t out_bytes(const prob *p) { return (size_t)(p->s.M * p->s.N) * (p->s.out_dtype == MOECTS_BF16 ? 2 : 4); }

/* Output of kernel `name` (or of the reference when name is NULL) into a new buffer. */
static void *run_into(prob *p, const char *name, moects_recipe rec)
{
    void *buf = malloc(out_bytes(p) + 1);
    p->a.d = buf;
    if (name) {
        const moects_kernel *k = find(name);
        char why[128];
        cr_assert_eq(k->supports(&p->s, why, sizeof why), 1, "%s: %s", name, why);
        cr_assert_eq(k->run(&p->s, &p->a, NULL), 0, "%s failed", name);
    } else {
        cr_assert_eq(moects__ref_fp4_gemm(&p->s, &p->a, rec), 0);
    }
    p->a.d = p->d;
    return buf;
}

/* Bitwise equal, any NaN equal to any NaN. */
static int64_t mismatches(const prob *p, const void *x, const void *y)
{
    int64_t bad = 0, n = p->s.M * p->s.N;
    for (int64_t i = 0; i < n; i++) {
        if (p->s.out_dtype == MOECTS_BF16) {
            uint16_t a = ((const uint16_t *)x)[i], b = ((const uint16_t *)y)[i];
            int na = (a & 0x7F80) == 0x7F80 && (a & 0x7F), nb = (b & 0x7F80) == 0x7F80 && (b & 0x7F);
            bad += na ? !nb : (nb || a != b);
        } else {
            float a = ((const float *)x)[i], b = ((const float *)y)[i];
            bad += isnan(a) ? !isnan(b) : (isnan(b) || memcmp(&a, &b, 4) != 0);
        }
    }
    return bad;
}

Test(fp4_kernels, blockwise_matches_reference)
{
    rng_state = 11;
    const int64_t shapes[][3] = {{1, 1, 1}, {3, 5, 33}, {17, 20, 100}, {130, 9, 64}, {2, 40, 257}, {5, 3, 7}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int f = 1; f <= 2; f++)
            for (int lay = 0; lay < 2; lay++)
                for (int o = 0; o < 2; o++)
                    for (int wide = 0; wide < 2; wide++) {
                        prob p;
                        make(&p, shapes[i][0], shapes[i][1], shapes[i][2], (moects_fp4_format)f,
                             (moects_scale_layout)lay, o ? MOECTS_BF16 : MOECTS_F32, wide);
                        void *want = run_into(&p, NULL, MOECTS_RECIPE_FP4_BLOCKWISE_V1);
                        void *got = run_into(&p, "cpu.fp4_gemm.blockwise", 0);
                        cr_assert_eq(mismatches(&p, got, want), 0, "shape %zu f %d lay %d o %d wide %d", i, f, lay, o,
                                     wide);
                        free(want);
                        free(got);
                        release(&p);
                    }
}

/* Narrow scales, K <= 32: every dequantized value, product and partial sum is exact in FP32 (terms
 * are multiples of 2^-10 below 2^11, sums below 2^16), so dequant_sgemm's one rounding of
 * sum * alpha is exact_v1's. */
Test(fp4_kernels, dequant_sgemm_exact_where_fp32_is_exact)
{
    rng_state = 12;
    const int64_t shapes[][3] = {{1, 1, 1}, {4, 6, 16}, {9, 3, 31}, {40, 33, 32}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int f = 1; f <= 2; f++)
            for (int lay = 0; lay < 2; lay++)
                for (int o = 0; o < 2; o++) {
                    prob p;
                    make(&p, shapes[i][0], shapes[i][1], shapes[i][2], (moects_fp4_format)f,
                         (moects_scale_layout)lay, o ? MOECTS_BF16 : MOECTS_F32, 0);
                    void *want = run_into(&p, NULL, MOECTS_RECIPE_EXACT_V1);
                    void *got = run_into(&p, "cpu.fp4_gemm.dequant_sgemm", 0);
                    cr_assert_eq(mismatches(&p, got, want), 0, "shape %zu f %d lay %d o %d", i, f, lay, o);
                    free(want);
                    free(got);
                    release(&p);
                }
}

static double calc_diff(const prob *p, const void *x, const void *y)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < p->s.M * p->s.N; i++) {
        double a, b;
        if (p->s.out_dtype == MOECTS_BF16) {
            a = moects__bf16_to_f32(((const uint16_t *)x)[i]);
            b = moects__bf16_to_f32(((const uint16_t *)y)[i]);
        } else {
            a = ((const float *)x)[i];
            b = ((const float *)y)[i];
        }
        num += (a - b) * (a - b);
        den += a * a + b * b;
    }
    return den == 0 ? 0 : num / den;
}

/* Within its declared accumulation class: every element within moects__ref_fp4_gemm_bound (p = 24,
 * RNE) of exact_v1, and the old global tolerance (calc_diff <= 1e-5) holds too. */
Test(fp4_kernels, dequant_sgemm_within_its_bound)
{
    rng_state = 13;
    const moects_kernel *k = find("cpu.fp4_gemm.dequant_sgemm");
    for (int f = 1; f <= 2; f++)
        for (int o = 0; o < 2; o++) {
            prob p;
            make(&p, 33, 47, 2048 + 5, (moects_fp4_format)f, MOECTS_SCALES_LINEAR, o ? MOECTS_BF16 : MOECTS_F32, 0);
            void *want = run_into(&p, NULL, MOECTS_RECIPE_EXACT_V1);
            void *got = run_into(&p, k->name, 0);
            double *bound = malloc((size_t)(p.s.M * p.s.N) * sizeof *bound);
            cr_assert_eq(moects__ref_fp4_gemm_bound(&p.s, &p.a, k->acc.bits, k->acc.truncation, bound), 0);
            for (int64_t i = 0; i < p.s.M * p.s.N; i++) {
                double g = o ? moects__bf16_to_f32(((const uint16_t *)got)[i]) : ((const float *)got)[i];
                double w = o ? moects__bf16_to_f32(((const uint16_t *)want)[i]) : ((const float *)want)[i];
                cr_assert_leq(fabs(g - w), bound[i], "f %d o %d element %lld: %g vs %g, bound %g", f, o, (long long)i, g,
                              w, bound[i]);
            }
            cr_assert(calc_diff(&p, got, want) <= 1e-5);
            free(bound);
            free(want);
            free(got);
            release(&p);
        }
}

/* ---- mutants: one hand-worked problem each ---- */

/* M = N = 1; A and B given as packed bytes, scales linear. Returns D as float. */
static float one(const char *kernel, moects_fp4_format f, int64_t K, const uint8_t *A, const uint8_t *B,
                 const uint8_t *sa, const uint8_t *sb, float alpha)
{
    float d = -12345.0f;
    moects_fp4_gemm_shape s = {1, 1, K, f, MOECTS_SCALES_LINEAR, MOECTS_F32};
    moects_fp4_gemm_args a = {A, B, sa, sb, alpha, &d};
    const moects_kernel *k = find(kernel);
    cr_assert_eq(k->run(&s, &a, NULL), 0);
    return d;
}

/* A = (1.0, 0, ...), B = (2.0, 0, ...): p = 2. The swapped reading of B takes element 0 from the
 * high nibble (0) and element 1 from the low one (2.0): p = 1*0 + 0*2 = 0. With B's pair
 * symmetric (2.0, 2.0) and A's (1.0, 1.0) both readings give 4. */
Test(fp4_kernels, mutant_nibble_swap)
{
    uint8_t A[16] = {0x02}, B[16] = {0x04}, s1[1] = {127};
    cr_assert_eq(one("cpu.fp4_gemm.blockwise", MOECTS_FP4_MXFP4, 32, A, B, s1, s1, 1.0f), 2.0f);
    cr_assert_eq(one(MUTANTS[0], MOECTS_FP4_MXFP4, 32, A, B, s1, s1, 1.0f), 0.0f);
    A[0] = 0x22;
    B[0] = 0x44;
    cr_assert_eq(one(MUTANTS[0], MOECTS_FP4_MXFP4, 32, A, B, s1, s1, 1.0f), 4.0f);
    /* odd K: element K-1 = 0 sits in a low nibble; the swapped read takes the pad nibble (6.0) */
    uint8_t A3[2] = {0x00, 0x02}, B3[2] = {0x00, 0x72};
    cr_assert_eq(one("cpu.fp4_gemm.blockwise", MOECTS_FP4_MXFP4, 3, A3, B3, s1, s1, 1.0f), 1.0f);
    cr_assert_eq(one(MUTANTS[0], MOECTS_FP4_MXFP4, 3, A3, B3, s1, s1, 1.0f), 6.0f);
}

/* K = 64, A = B = all 1.0: p0 = p1 = 32; sA = (1, 1), sB = (1, 2): D = 32 + 64 = 96. The mutant
 * scales block 1 with block 0's scales: 32 + 32 = 64. One block (K = 32): both give 32. */
Test(fp4_kernels, mutant_tail_scale)
{
    uint8_t A[32], B[32], sa[2] = {127, 127}, sb[2] = {127, 128};
    memset(A, 0x22, sizeof A);
    memset(B, 0x22, sizeof B);
    cr_assert_eq(one("cpu.fp4_gemm.blockwise", MOECTS_FP4_MXFP4, 64, A, B, sa, sb, 1.0f), 96.0f);
    cr_assert_eq(one(MUTANTS[1], MOECTS_FP4_MXFP4, 64, A, B, sa, sb, 1.0f), 64.0f);
    cr_assert_eq(one(MUTANTS[1], MOECTS_FP4_MXFP4, 32, A, B, sa, sb, 1.0f), 32.0f);
    /* NVFP4, K = 20 (a 4-element tail block): p0 = 16, p1 = 4; sB = (1.0 = 0x38, 2.0 = 0x40):
     * 16 + 8 = 24 honest, 16 + 4 = 20 mutant */
    uint8_t sa4[2] = {0x38, 0x38}, sb4[2] = {0x38, 0x40};
    cr_assert_eq(one("cpu.fp4_gemm.blockwise", MOECTS_FP4_NVFP4, 20, A, B, sa4, sb4, 1.0f), 24.0f);
    cr_assert_eq(one(MUTANTS[1], MOECTS_FP4_NVFP4, 20, A, B, sa4, sb4, 1.0f), 20.0f);
}

/* NVFP4 K = 16, A = B = all 1.0: p = 16, sA = sB = 0x38 = 1.0: D = 16. Read as UE8M0, 0x38 = 56 is
 * 2^(56-127) = 2^-71: D = 16 * 2^-142 = 2^-138 (an FP32 subnormal). */
Test(fp4_kernels, mutant_e4m3_as_ue8m0)
{
    uint8_t A[8], B[8], s[1] = {0x38};
    memset(A, 0x22, sizeof A);
    memset(B, 0x22, sizeof B);
    cr_assert_eq(one("cpu.fp4_gemm.blockwise", MOECTS_FP4_NVFP4, 16, A, B, s, s, 1.0f), 16.0f);
    cr_assert_eq(one(MUTANTS[2], MOECTS_FP4_NVFP4, 16, A, B, s, s, 1.0f), 0x1p-138f);
}

/* MXFP4 K = 32, A = B = all 1.0: p = 32; sA = 2^-127 (code 0, an FP32 subnormal), sB = 2^127:
 * s = 1, D = 32; flushed: 0. NVFP4 K = 16: p = 16, sA = 0x01 = 2^-9, sB = 1.0: D = 2^-5; flushed:
 * 0. Normal scales: both agree. */
Test(fp4_kernels, mutant_scale_ftz)
{
    uint8_t A[16], B[16], sa[1] = {0}, sb[1] = {254};
    memset(A, 0x22, sizeof A);
    memset(B, 0x22, sizeof B);
    cr_assert_eq(one("cpu.fp4_gemm.blockwise", MOECTS_FP4_MXFP4, 32, A, B, sa, sb, 1.0f), 32.0f);
    cr_assert_eq(one(MUTANTS[3], MOECTS_FP4_MXFP4, 32, A, B, sa, sb, 1.0f), 0.0f);
    uint8_t na[1] = {0x01}, nb[1] = {0x38};
    cr_assert_eq(one("cpu.fp4_gemm.blockwise", MOECTS_FP4_NVFP4, 16, A, B, na, nb, 1.0f), 0x1p-5f);
    cr_assert_eq(one(MUTANTS[3], MOECTS_FP4_NVFP4, 16, A, B, na, nb, 1.0f), 0.0f);
    uint8_t ma[1] = {120}, mb[1] = {130}; /* 2^-7 * 2^3 = 2^-4: 32 / 16 = 2 */
    cr_assert_eq(one(MUTANTS[3], MOECTS_FP4_MXFP4, 32, A, B, ma, mb, 1.0f), 2.0f);
}

/* Where the bug cannot show, each mutant equals the reference bit for bit on random data (this is
 * what makes a caught mutant's failure the bug's and nothing else's). */
Test(fp4_kernels, mutants_exact_where_bug_hidden)
{
    rng_state = 14;
    prob p;
    /* tail_scale: one K-block */
    make(&p, 7, 9, 32, MOECTS_FP4_MXFP4, MOECTS_SCALES_SWIZZLED_128X4, MOECTS_F32, 1);
    void *want = run_into(&p, NULL, MOECTS_RECIPE_FP4_BLOCKWISE_V1), *got = run_into(&p, MUTANTS[1], 0);
    cr_assert_eq(mismatches(&p, got, want), 0);
    free(got);
    /* scale_ftz on MXFP4 scales without code 0 (narrow) */
    release(&p);
    free(want);
    make(&p, 7, 9, 100, MOECTS_FP4_MXFP4, MOECTS_SCALES_LINEAR, MOECTS_BF16, 0);
    want = run_into(&p, NULL, MOECTS_RECIPE_FP4_BLOCKWISE_V1);
    got = run_into(&p, MUTANTS[3], 0);
    cr_assert_eq(mismatches(&p, got, want), 0);
    free(got);
    free(want);
    release(&p);
}

/* And on random wide-range data each mutant is caught (differs somewhere). */
Test(fp4_kernels, mutants_caught_on_random_data)
{
    rng_state = 15;
    for (size_t i = 0; i < 4; i++) {
        prob p;
        /* odd K so that the swapped nibble read reaches the pad nibble too; wide scales */
        make(&p, 9, 11, 101, MOECTS_FP4_NVFP4, MOECTS_SCALES_SWIZZLED_128X4, MOECTS_F32, 1);
        void *want = run_into(&p, NULL, MOECTS_RECIPE_FP4_BLOCKWISE_V1), *got = run_into(&p, MUTANTS[i], 0);
        cr_assert_gt(mismatches(&p, got, want), 0, "%s escaped", MUTANTS[i]);
        free(want);
        free(got);
        release(&p);
    }
}
