/* plugin_planted.c: a kernel library with bugs planted on purpose, for the tests of the reports'
 * diagnostics (tests/cli/reports.sh "diag_planted", "repro", "fail_fast", "junit_native") and for a
 * new user to practise debugging from a report alone. Built like tests/plugin_example.c (ABI
 * headers only, -ffp-contract=off).
 *
 * planted.fp4_gemm: an honest MXFP4 fp4_gemm.blockwise_v1 (linear scales only; supports() refuses
 * NVFP4 and swizzled scales) whose result is changed by MOECTS_PLANTED in the environment:
 *   last_tile_elem  D[M-1][N-1] one ULP up (one wrong element in the last tile of N)
 *   hang            never returns (a kernel that hangs on every case)
 *   crash           abort() on every case
 *   (unset)         no bug: passes every case it supports. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "moects_kernel.h"

static const float E2M1[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

static float e2m1(const uint8_t *row, int64_t k) /* element k: 2j low nibble, 2j+1 high */
{
    uint8_t c = (uint8_t)(k & 1 ? row[k / 2] >> 4 : row[k / 2] & 0xf);
    return c & 8 ? -E2M1[c & 7] : E2M1[c & 7];
}

static float ue8m0(uint8_t x) { return x == 0xff ? NAN : ldexpf(1.0f, (int)x - 127); }

static uint16_t f32_to_bf16(float f) /* round to nearest even, NaN stays NaN */
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static int supports(const void *shape, char *why, size_t len)
{
    const moects_fp4_gemm_shape *s = shape;
    if (s->format != MOECTS_FP4_MXFP4 || s->scale_layout != MOECTS_SCALES_LINEAR) {
        strncpy(why, "MXFP4 with linear scales only", len - 1);
        why[len - 1] = '\0';
        return 0;
    }
    return 1;
}

/* D[m][n] = out_rne(alpha * acc), acc = fmaf(block partial, sA*sB, acc) over K-blocks of 32 in order. */
static int run(const void *shape, const void *args, void *stream)
{
    const moects_fp4_gemm_shape *s = shape;
    const moects_fp4_gemm_args *a = args;
    (void)stream;
    const char *bug = getenv("MOECTS_PLANTED");
    if (bug && !strcmp(bug, "hang"))
        for (;;) pause();
    if (bug && !strcmp(bug, "crash")) abort();
    int64_t kb = (s->K + 1) / 2, nkb = (s->K + 31) / 32;
    for (int64_t m = 0; m < s->M; m++)
        for (int64_t n = 0; n < s->N; n++) {
            float acc = 0.0f;
            for (int64_t b = 0; b < nkb; b++) {
                float p = 0.0f; /* exact: a multiple of 1/4, |p| <= 32*36 */
                for (int64_t k = b * 32; k < s->K && k < b * 32 + 32; k++)
                    p += e2m1(a->a + m * kb, k) * e2m1(a->b + n * kb, k);
                float sc = ue8m0(a->sa[m * nkb + b]) * ue8m0(a->sb[n * nkb + b]);
                acc = fmaf(p, sc, acc);
            }
            float d = acc * a->alpha;
            if (s->out_dtype == MOECTS_F32) ((float *)a->d)[m * s->N + n] = d;
            else ((uint16_t *)a->d)[m * s->N + n] = f32_to_bf16(d);
        }
    if (bug && !strcmp(bug, "last_tile_elem") && s->M > 0 && s->N > 0) {
        int64_t i = (s->M - 1) * s->N + (s->N - 1);
        if (s->out_dtype == MOECTS_F32) {
            uint32_t u;
            memcpy(&u, (float *)a->d + i, 4);
            u++;
            memcpy((float *)a->d + i, &u, 4);
        } else {
            ((uint16_t *)a->d)[i]++;
        }
    }
    return 0;
}

static const moects_kernel planted = {
    .abi_version = MOECTS_KERNEL_ABI_VERSION, .name = "planted.fp4_gemm", .op = MOECTS_OP_FP4_GEMM,
    .device = MOECTS_DEVICE_CPU, .recipe = "fp4_gemm.blockwise_v1", .supports = supports, .run = run};
static const moects_kernel *const kernels[] = {&planted};

__attribute__((visibility("default"))) const moects_kernel *const *moects_plugin_kernels(size_t *count)
{
    *count = 1;
    return kernels;
}
