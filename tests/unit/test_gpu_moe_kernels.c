/* test_gpu_moe_kernels.c: the CPU grouped MoE GEMM kernels under test (gpu/cpu/moe_*.c), found
 * through the registry, on small problems worked out by hand (values in the comments): the honest
 * kernels give them, rows that are not valid stay untouched, and each mutant differs exactly where
 * its bug says. Codes: E2M1 0x2 = 1.0, 0x4 = 2.0 (a byte 0x22 holds two 1.0s); UE8M0 127 = 1,
 * 128 = 2, 129 = 4, 0xFF = NaN; E4M3 0x38 = 1.0. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "moects_registry.h"

static const moects_kernel *find(const char *name)
{
    size_t n;
    const moects_kernel *const *all = moects__builtin_kernels(&n);
    for (size_t i = 0; i < n; i++)
        if (strcmp(all[i]->name, name) == 0) return all[i];
    cr_assert_fail("kernel %s not registered", name);
    return NULL;
}

#define POISON 0x7fc0dead /* a NaN the kernels never produce: an unwritten element */

/* Runs kernel name on (s, a) into d[rows*N] (F32) prefilled with POISON; asserts supports() and run(). */
static void run(const char *name, const moects_moe_gemm_shape *s, moects_moe_gemm_args *a, float *d, int64_t n)
{
    for (int64_t i = 0; i < n; i++) memcpy(&d[i], &(uint32_t){POISON}, 4);
    a->d = d;
    const moects_kernel *k = find(name);
    char why[200] = "";
    cr_assert(k->supports(s, why, sizeof why), "%s: %s", name, why);
    cr_assert_eq(k->run(s, a, NULL), 0, "%s", name);
}

static int poisoned(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return u == POISON;
}

/* MXFP4, contiguous, align 4, K 32, N 1: expert 0 owns row 0, expert 1 row 4, rows 1-3 and 5-7 are
 * padding (id -1, A scale NaN). A rows all 1.0 (scale 1); B[0] all 1.0 scale 1, B[1] all 2.0 scale 2.
 * D[0] = 32 * 1 * 1 = 32; D[4] = 32 * (1 * 2) * 2 = 128. */
typedef struct {
    moects_moe_gemm_shape s;
    moects_moe_gemm_args a;
    uint8_t A[8][16], sa[8], B[2][16], sb[2];
    int32_t mi[8];
    float alpha[2];
} two_experts;

static void make_two(two_experts *p)
{
    memset(p, 0, sizeof *p);
    p->s = (moects_moe_gemm_shape){.E = 2, .M = 8, .N = 1, .K = 32, .format = MOECTS_MOE_MXFP4,
                                   .b_format = MOECTS_FP4_MXFP4, .rows = MOECTS_ROWS_CONTIGUOUS, .align = 4,
                                   .scale_layout = MOECTS_SCALES_LINEAR, .out_dtype = MOECTS_F32};
    memset(p->A, 0x22, sizeof p->A);
    for (int r = 0; r < 8; r++) {
        p->sa[r] = r % 4 ? 0xFF : 127;
        p->mi[r] = r % 4 ? -1 : r / 4;
    }
    memset(p->B[0], 0x22, 16);
    memset(p->B[1], 0x44, 16);
    p->sb[0] = 127, p->sb[1] = 128;
    p->alpha[0] = p->alpha[1] = 1.0f;
    p->a = (moects_moe_gemm_args){.a = p->A, .sa = p->sa, .b = &p->B[0][0], .sb = p->sb, .alpha = p->alpha,
                                  .m_indices = p->mi};
}

Test(moe_kernels, honest_kernels_on_two_experts)
{
    static const char *const honest[] = {"cpu.moe_gemm.blockwise", "cpu.moe_gemm.dequant_sgemm"};
    for (int h = 0; h < 2; h++) {
        two_experts p;
        make_two(&p);
        float d[8];
        run(honest[h], &p.s, &p.a, d, 8);
        cr_expect_eq(d[0], 32.0f, "%s: %g", honest[h], d[0]);
        cr_expect_eq(d[4], 128.0f, "%s: %g", honest[h], d[4]);
        for (int r = 0; r < 8; r++)
            if (r % 4) cr_expect(poisoned(d[r]), "%s wrote padding row %d", honest[h], r);
    }
    cr_expect_str_eq(find("cpu.moe_gemm.blockwise")->recipe, "moe_gemm.blockwise_v1");
    const moects_kernel *dq = find("cpu.moe_gemm.dequant_sgemm");
    cr_expect(dq->recipe == NULL && dq->acc.bits == 24 && !dq->acc.truncation);
}

/* pad_rows: rows 1-3 (padding, NaN A scale) share row 0's 128-row tile: NaN leaks into D[0] and D[4]. */
Test(moe_kernels, pad_rows_mutant_leaks_padding_nan)
{
    two_experts p;
    make_two(&p);
    float d[8];
    run("cpu.mutant.moe_gemm.pad_rows", &p.s, &p.a, d, 8);
    cr_expect(isnan(d[0]) && !poisoned(d[0]) && isnan(d[4]));
}

/* tile_straddle: align 4 puts both experts in one 128-row tile; row 4 then uses expert 0's weights:
 * 32 * 1 * 1 = 32 instead of 128. */
Test(moe_kernels, tile_straddle_mutant_takes_the_first_expert)
{
    two_experts p;
    make_two(&p);
    float d[8];
    run("cpu.mutant.moe_gemm.tile_straddle", &p.s, &p.a, d, 8);
    cr_expect_eq(d[0], 32.0f);
    cr_expect_eq(d[4], 32.0f);
}

/* alpha0: NVFP4 (16-wide blocks, E4M3 scale 0x38 = 1), alpha {1, 0.25}: D[4] = 32 * 2 * 0.25 = 16;
 * the mutant applies alpha[0] = 1: 64. */
Test(moe_kernels, alpha0_mutant_uses_expert_0s_alpha)
{
    two_experts p;
    make_two(&p);
    uint8_t sa[8][2], sb[2][2];
    for (int r = 0; r < 8; r++) sa[r][0] = sa[r][1] = r % 4 ? 0x7F : 0x38;
    memset(sb, 0x38, sizeof sb);
    p.s.format = MOECTS_MOE_NVFP4, p.s.b_format = MOECTS_FP4_NVFP4;
    p.a.sa = sa, p.a.sb = &sb[0][0];
    p.alpha[1] = 0.25f;
    float gs[2] = {1, 1};
    p.a.gs_a = p.a.gs_b = gs;
    float d[8];
    run("cpu.moe_gemm.blockwise", &p.s, &p.a, d, 8);
    cr_expect(d[0] == 32.0f && d[4] == 16.0f, "%g %g", d[0], d[4]);
    run("cpu.mutant.moe_gemm.alpha0", &p.s, &p.a, d, 8);
    cr_expect(d[0] == 32.0f && d[4] == 64.0f, "%g %g", d[0], d[4]);
}

/* masked_m_ignored: masked, M 4, masked_m {1, 3}; A all 1.0, B as above: expert 1's rows 4, 5, 6
 * are 128. The mutant computes ceil(4 / 2) = 2 rows per expert: row 6 stays unwritten. */
Test(moe_kernels, masked_m_mutant_leaves_a_valid_row_unwritten)
{
    two_experts p;
    make_two(&p);
    int32_t mm[2] = {1, 3};
    uint8_t sa[8];
    memset(sa, 127, sizeof sa);
    p.s.rows = MOECTS_ROWS_MASKED, p.s.M = 4, p.s.align = 1;
    p.a.m_indices = NULL, p.a.masked_m = mm, p.a.sa = sa;
    float d[8];
    run("cpu.moe_gemm.blockwise", &p.s, &p.a, d, 8);
    cr_expect(d[0] == 32.0f && d[4] == 128.0f && d[5] == 128.0f && d[6] == 128.0f);
    cr_expect(poisoned(d[1]) && poisoned(d[7]), "rows >= masked_m written");
    run("cpu.mutant.moe_gemm.masked_m_ignored", &p.s, &p.a, d, 8);
    cr_expect(d[4] == 128.0f && d[5] == 128.0f && poisoned(d[6]));
}

/* scale_stride: contiguous rows {0: expert 0, 1: expert 1}, swizzled scales (one K-block: 512 bytes
 * per 128-row tile): expert 1's B scale sits at 512, A's row 1 scale at 16. Honest: D[1] = 128; the
 * mutant reads expert 1's scale at 1 * N * nkb = 1, swizzle padding 0xFF: NaN. */
Test(moe_kernels, scale_stride_mutant_reads_the_unpadded_offset)
{
    two_experts p;
    make_two(&p);
    static uint8_t sa[512], sb[1024];
    memset(sa, 0xFF, sizeof sa);
    memset(sb, 0xFF, sizeof sb);
    sa[0] = sa[16] = 127;
    sb[0] = 127, sb[512] = 128;
    int32_t mi[2] = {0, 1};
    p.s.M = 2, p.s.align = 1, p.s.scale_layout = MOECTS_SCALES_SWIZZLED_128X4;
    p.a.a = p.A[3], p.a.sa = sa, p.a.sb = sb, p.a.m_indices = mi;
    float d[2];
    run("cpu.moe_gemm.blockwise", &p.s, &p.a, d, 2);
    cr_expect(d[0] == 32.0f && d[1] == 128.0f, "%g %g", d[0], d[1]);
    run("cpu.mutant.moe_gemm.scale_stride", &p.s, &p.a, d, 2);
    cr_expect(d[0] == 32.0f && isnan(d[1]) && !poisoned(d[1]));
}

/* W4A8, one expert, one row, K 256, a_scale_block 128: A all E4M3 1.0, A scales {1, 4}; B all 1.0,
 * scale 1. Blocks 0-3 use A scale 1, blocks 4-7 scale 4: 4 * 32 + 4 * 32 * 4 = 640. The per-32
 * mutant reads scale b for block b (kept inside the tensor): 32 * 1 + 7 * 32 * 4 = 928. */
Test(moe_kernels, w4a8_scale_per32_mutant)
{
    uint8_t A[256], sa[2] = {127, 129}, B[128], sb[8];
    memset(A, 0x38, sizeof A);
    memset(B, 0x22, sizeof B);
    memset(sb, 127, sizeof sb);
    int32_t mi[1] = {0};
    float alpha[1] = {1};
    moects_moe_gemm_shape s = {.E = 1, .M = 1, .N = 1, .K = 256, .format = MOECTS_MOE_W4A8,
                               .b_format = MOECTS_FP4_MXFP4, .rows = MOECTS_ROWS_CONTIGUOUS, .align = 1,
                               .a_scale_block = 128, .scale_layout = MOECTS_SCALES_LINEAR, .out_dtype = MOECTS_F32};
    moects_moe_gemm_args a = {.a = A, .sa = sa, .b = B, .sb = sb, .alpha = alpha, .m_indices = mi};
    float d[1];
    run("cpu.moe_gemm.blockwise", &s, &a, d, 1);
    cr_expect_eq(d[0], 640.0f);
    run("cpu.moe_gemm.dequant_sgemm", &s, &a, d, 1);
    cr_expect_eq(d[0], 640.0f);
    run("cpu.mutant.moe_gemm.w4a8_scale_per32", &s, &a, d, 1);
    cr_expect_eq(d[0], 928.0f);
}

/* W4A16 (BF16 A, no scale) is dequant_sgemm's alone: one row of BF16 1.0 (0x3F80) against B all 2.0
 * scale 1 over K 32: 64. The blockwise kernel refuses it. */
Test(moe_kernels, w4a16_is_the_dequant_kernels)
{
    uint16_t A[32];
    for (int i = 0; i < 32; i++) A[i] = 0x3F80;
    uint8_t B[16], sb[1] = {127};
    memset(B, 0x44, sizeof B);
    int64_t off[2] = {0, 1};
    float alpha[1] = {1};
    moects_moe_gemm_shape s = {.E = 1, .M = 1, .N = 1, .K = 32, .format = MOECTS_MOE_W4A16,
                               .b_format = MOECTS_FP4_MXFP4, .rows = MOECTS_ROWS_OFFSETS, .align = 1,
                               .scale_layout = MOECTS_SCALES_LINEAR, .out_dtype = MOECTS_F32};
    moects_moe_gemm_args a = {.a = A, .b = B, .sb = sb, .alpha = alpha, .expert_offsets = off};
    float d[1];
    run("cpu.moe_gemm.dequant_sgemm", &s, &a, d, 1);
    cr_expect_eq(d[0], 64.0f);
    char why[200] = "";
    cr_expect_not(find("cpu.moe_gemm.blockwise")->supports(&s, why, sizeof why));
    cr_expect_not_null(strstr(why, "W4A16"));
}
