/* selftest.c: moects_gpu_selftest: every CUDA kernel of the registry (gpu/cuda/kernels.def) against
 * the CPU references (ref/moects_ref.h) on a few shapes, before and apart from the harness.
 *
 *   moects_gpu_selftest [--kernel SUBSTR] [--no-fork] [--no-large]
 *                       [--perf|--perf-only|--perf-fp4-only|--perf-moe-only]
 *
 * One line per (kernel, shape): PASS (bits identical to the declared recipe, or within the declared
 * tolerance of exact_v1) or FAIL with the mismatch count, max ULP distance, calc_diff and the first
 * mismatch. Each kernel runs in a child process (the parent never touches CUDA), so an abort or a
 * sticky CUDA error ends that kernel only. A real kernel is "ok" when every shape passes; a mutant
 * (kernel->bug set) is "ok" when at least one shape fails or its process dies ("detected").
 * --perf: the copy ceiling (D2D cudaMemcpy GB/s, read + written), ep_gather GB/s on DeepSeek-V3 and
 * Kimi K3 prefill shapes, FP4 GEMM TFLOP/s beside cuBLAS BF16 on the same shapes, grouped moe_gemm
 * TFLOP/s beside cuBLAS BF16 grouped GEMM on DeepSeek-V3 / Kimi K3 prefill routing at TP8 and EP8
 * (selftest_moe.c; medians of CUDA event timings). The moe_gemm kernels are checked against
 * moects__ref_moe_gemm in selftest_moe.c. Exit status: 0 all ok (or no device: SKIP), 1 otherwise. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "moects_device.h"
#include "moects_kernel.h"
#include "moects_quant.h"
#include "moects_ref.h"
#include "moects_registry.h"
#include "selftest_moe.h"
#ifndef MOECTS_SELFTEST_MOE /* built without ref/moe_gemm.c: no moe_gemm reference to check against */
int moects__selftest_moe(const moects_kernel *k, int *fails)
{
    printf("FAIL %s: this build has no moects__ref_moe_gemm (ref/moe_gemm.c)\n", k->name);
    return ++*fails, 1;
}
void moects__selftest_moe_perf(const moects_kernel *const *ks, size_t nk) { (void)ks, (void)nk; }
#endif

static int opt_fork = 1, opt_large = 1, opt_perf_ep = 1, opt_perf_fp4 = 1, opt_perf_moe = 1;

/* ---- random numbers (SplitMix64) ---- */
static uint64_t rng;
static uint64_t rnd(void)
{
    uint64_t z = (rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static int64_t rnd_below(int64_t n) { return n > 0 ? (int64_t)(rnd() % (uint64_t)n) : 0; }
static float rnd_unit(void) { return (float)(rnd() >> 40) * (1.0f / 16777216.0f); } /* [0, 1), 24 bits */

/* ---- comparison (bits; NaN equals NaN) ---- */
typedef struct {
    int64_t mismatches, first;
    uint64_t max_ulp;
    double calc_diff;
    uint32_t got, want;
} cmp_result;

static int64_t ordered(uint32_t bits, int bf16)
{
    uint32_t sign = bf16 ? 0x8000u : 0x80000000u;
    return bits & sign ? -(int64_t)(bits & (sign - 1)) : (int64_t)bits;
}

static int is_nan_bits(uint32_t b, int bf16)
{
    return bf16 ? (b & 0x7F80u) == 0x7F80u && (b & 0x7Fu) : (b & 0x7F800000u) == 0x7F800000u && (b & 0x7FFFFFu);
}

static float to_f32(uint32_t b, int bf16)
{
    float f;
    uint32_t u = bf16 ? b << 16 : b;
    memcpy(&f, &u, 4);
    return f;
}

static void compare(const void *got, const void *want, int64_t n, int bf16, cmp_result *r)
{
    double num = 0, den = 0;
    memset(r, 0, sizeof *r);
    r->first = -1;
    for (int64_t i = 0; i < n; i++) {
        uint32_t g = bf16 ? ((const uint16_t *)got)[i] : ((const uint32_t *)got)[i];
        uint32_t w = bf16 ? ((const uint16_t *)want)[i] : ((const uint32_t *)want)[i];
        int gn = is_nan_bits(g, bf16), wn = is_nan_bits(w, bf16);
        uint64_t d;
        if (gn || wn) {
            d = gn && wn ? 0 : UINT64_MAX;
        } else {
            int64_t x = ordered(g, bf16) - ordered(w, bf16);
            d = (uint64_t)(x < 0 ? -x : x);
            double fx = to_f32(g, bf16), fy = to_f32(w, bf16);
            num += (fx - fy) * (fx - fy);
            den += fx * fx + fy * fy;
        }
        if (g != w && d != 0) {
            if (r->first < 0) r->first = i, r->got = g, r->want = w;
            r->mismatches++;
        }
        if (d > r->max_ulp) r->max_ulp = d;
    }
    r->calc_diff = den > 0 ? num / den : 0;
}

/* ---- ep_gather cases ---- */
typedef struct {
    const char *name;
    int64_t T, k, H, E;
    int has_map;
    moects_dtype id, out;
    int64_t extra_rows; /* > 0: the used rows sit after this many unused rows of x (64-bit offsets) */
    int large;
} epg_case;

static const epg_case epg_cases[] = {
    {"dsv3_h7168_t64_k8_map_i32_bf16", 64, 8, 7168, 256, 1, MOECTS_I32, MOECTS_BF16, 0, 0},
    {"k3_h3584_t33_k16_map_i64_bf16", 33, 16, 3584, 896, 1, MOECTS_I64, MOECTS_BF16, 0, 0},
    {"h3584_t20_k16_nomap_i32_f32", 20, 16, 3584, 896, 0, MOECTS_I32, MOECTS_F32, 0, 0},
    {"h2880_t17_k4_nomap_i32_f32", 17, 4, 2880, 128, 0, MOECTS_I32, MOECTS_F32, 0, 0},
    {"h2880_t9_k4_map_i64_bf16", 9, 4, 2880, 128, 1, MOECTS_I64, MOECTS_BF16, 0, 0},
    {"h896_t50_k8_map_i32_bf16", 50, 8, 896, 64, 1, MOECTS_I32, MOECTS_BF16, 0, 0},
    {"h384_t7_k6_nomap_i64_bf16", 7, 6, 384, 32, 0, MOECTS_I64, MOECTS_BF16, 0, 0},
    {"h1_t5_k3_map_i32_bf16", 5, 3, 1, 8, 1, MOECTS_I32, MOECTS_BF16, 0, 0},
    {"h1_t3_k2_nomap_i64_f32", 3, 2, 1, 8, 0, MOECTS_I64, MOECTS_F32, 0, 0},
    {"h7_t9_k2_map_i32_bf16", 9, 2, 7, 16, 1, MOECTS_I32, MOECTS_BF16, 0, 0},
    {"h12_t4_k5_nomap_i32_bf16", 4, 5, 12, 16, 0, MOECTS_I32, MOECTS_BF16, 0, 0},
    {"h1030_t6_k3_map_i32_bf16", 6, 3, 1030, 16, 1, MOECTS_I32, MOECTS_BF16, 0, 0},
    {"h256_t3_k40_map_i32_bf16", 3, 40, 256, 64, 1, MOECTS_I32, MOECTS_BF16, 0, 0},
    {"h128_t0_k8_map_i32_bf16", 0, 8, 128, 64, 1, MOECTS_I32, MOECTS_BF16, 0, 0},
    {"h128_t4_k0_nomap_i32_bf16", 4, 0, 128, 64, 0, MOECTS_I32, MOECTS_BF16, 0, 0},
    /* M_sum * H = 2.15e9 > 2^31: the used rows sit at the end of x */
    {"large_h7168_msum300000_t64_k8", 64, 8, 7168, 256, 0, MOECTS_I32, MOECTS_BF16, 300000 - 64 * 8, 1},
};

static uint16_t rnd_bf16(void)
{
    uint64_t r = rnd();
    uint32_t sign = (uint32_t)(r & 1) << 15, e = 127 - 8 + (uint32_t)((r >> 1) % 17), m = (uint32_t)(r >> 8) & 0x7F;
    return (uint16_t)(sign | e << 7 | m);
}

typedef struct {
    char msg[256];
    int pass;
} verdict;

static void set_cmp_msg(verdict *v, const cmp_result *c, const char *what, int bf16)
{
    if (c->first < 0) {
        snprintf(v->msg, sizeof v->msg, "%s (max_ulp %llu, calc_diff %.3g)", what, (unsigned long long)c->max_ulp,
                 c->calc_diff);
        return;
    }
    snprintf(v->msg, sizeof v->msg, "%s: %lld mismatches, max_ulp %llu, calc_diff %.3g, first [%lld] got 0x%0*x (%g) want 0x%0*x (%g)",
             what, (long long)c->mismatches, (unsigned long long)c->max_ulp, c->calc_diff, (long long)c->first,
             bf16 ? 4 : 8, c->got, (double)to_f32(c->got, bf16), bf16 ? 4 : 8, c->want, (double)to_f32(c->want, bf16));
}

/* Runs kern on the device arguments on the worker's stream, waits, then downloads obytes of dout
 * into got. Returns 0, -2 when the run failed, -1 when the download did (v->msg says which). */
static int run_and_download(const moects_kernel *kern, const void *shape, const void *dargs, const void *dout,
                            void *got, size_t obytes, verdict *v)
{
    void *st = moects__cuda_stream();
    char err[256] = "";
    if (kern->run(shape, dargs, st) || moects__cuda_sync(st, err, sizeof err)) {
        snprintf(v->msg, sizeof v->msg, "run failed: %s", err[0] ? err : "run() returned an error");
        return -2;
    }
    if (moects__cuda_d2h(got, dout, obytes)) {
        snprintf(v->msg, sizeof v->msg, "download failed");
        return -1;
    }
    return 0;
}

static int run_epg_case(const moects_kernel *kern, const epg_case *c, verdict *v)
{
    moects_ep_gather_shape s = {c->T, c->k, 0, c->H, c->E, c->id, c->out, c->has_map};
    const int64_t nslot = c->T * c->k, H = c->H;
    const int64_t msmall = nslot + 5; /* rows the reference sees; a few never used */
    const size_t idsz = c->id == MOECTS_I64 ? 8 : 4, osz = c->out == MOECTS_BF16 ? 2 : 4;
    uint16_t *x = malloc((size_t)(msmall * H) * 2 + 2);
    void *ids = malloc((size_t)nslot * idsz + 8);
    float *w = malloc((size_t)nslot * 4 + 4);
    int32_t *idx = malloc((size_t)nslot * 4 + 4), *idx_dev = malloc((size_t)nslot * 4 + 4);
    int32_t *map = malloc((size_t)c->E * 4 + 4);
    void *got = malloc((size_t)(c->T * H) * osz + 4), *want = malloc((size_t)(c->T * H) * osz + 4);
    void *dx = NULL, *dids = NULL, *dw = NULL, *didx = NULL, *dmap = NULL, *dout = NULL;
    int rc = -1;
    moects_recipe recipe;
    v->pass = 0;
    if (!x || !ids || !w || !idx || !idx_dev || !map || !got || !want) {
        snprintf(v->msg, sizeof v->msg, "host out of memory");
        goto out;
    }
    for (int64_t i = 0; i < msmall * H; i++) x[i] = rnd_bf16();
    for (int64_t e = 0; e < c->E; e++) map[e] = rnd() % 2 ? (int32_t)e / 2 : -1;
    for (int64_t i = 0; i < nslot; i++) {
        int64_t id = rnd_below(c->E);
        uint64_t r = rnd() % 16;
        if (r == 0) id = -1;
        else if (r == 1) id = c->id == MOECTS_I64 ? -((int64_t)1 << 40) : INT32_MIN;
        else if (r == 2) id = c->E + rnd_below(100); /* stale id: invalid with a map only */
        else if (r == 3 && c->id == MOECTS_I64) id = (int64_t)1 << 40;
        if (c->id == MOECTS_I64) ((int64_t *)ids)[i] = id;
        else ((int32_t *)ids)[i] = (int32_t)id;
        int valid = id >= 0 && (!c->has_map || (id < c->E && map[id] >= 0));
        if (valid) {
            idx[i] = (int32_t)rnd_below(msmall);
            w[i] = rnd_unit() * 2.0f - 0.5f;
        } else { /* a kernel that reads these gets NaN or an out-of-bounds row */
            idx[i] = 0x7FFFFFF0;
            w[i] = NAN;
        }
        idx_dev[i] = valid ? (int32_t)(idx[i] + c->extra_rows) : idx[i];
    }
    s.M_sum = msmall + c->extra_rows;
    moects_ep_gather_args ha = {x, ids, w, idx, c->has_map ? map : NULL, want};
    moects_ep_gather_shape hs = s;
    hs.M_sum = msmall;
    if (moects__recipe_parse(kern->recipe, MOECTS_OP_EP_GATHER, &recipe)) {
        snprintf(v->msg, sizeof v->msg, "unknown recipe %s", kern->recipe ? kern->recipe : "(null)");
        goto out;
    }
    if (moects__ref_ep_gather(&hs, &ha, recipe)) {
        snprintf(v->msg, sizeof v->msg, "reference refused the case");
        goto out;
    }
    char why[256] = "";
    if (!kern->supports(&s, why, sizeof why)) {
        snprintf(v->msg, sizeof v->msg, "UNSUPPORTED: %s", why);
        goto out;
    }
    const size_t xbytes = (size_t)(s.M_sum * H) * 2, obytes = (size_t)(c->T * H) * osz;
    dx = moects__cuda_malloc(xbytes);
    dids = moects__cuda_malloc((size_t)nslot * idsz);
    dw = moects__cuda_malloc((size_t)nslot * 4);
    didx = moects__cuda_malloc((size_t)nslot * 4);
    dmap = moects__cuda_malloc((size_t)c->E * 4);
    dout = moects__cuda_malloc(obytes);
    if ((xbytes && !dx) || (nslot && (!dids || !dw || !didx)) || (obytes && !dout)) {
        snprintf(v->msg, sizeof v->msg, "device out of memory (x: %zu bytes)", xbytes);
        goto out;
    }
    if ((c->extra_rows && moects__cuda_memset(dx, 0, (size_t)(c->extra_rows * H) * 2)) ||
        moects__cuda_h2d((uint16_t *)dx + c->extra_rows * H, x, (size_t)(msmall * H) * 2) ||
        moects__cuda_h2d(dids, ids, (size_t)nslot * idsz) || moects__cuda_h2d(dw, w, (size_t)nslot * 4) ||
        moects__cuda_h2d(didx, idx_dev, (size_t)nslot * 4) || moects__cuda_h2d(dmap, map, (size_t)c->E * 4) ||
        moects__cuda_memset(dout, 0x7F, obytes)) {
        snprintf(v->msg, sizeof v->msg, "upload failed");
        goto out;
    }
    moects_ep_gather_args da = {dx, dids, dw, didx, c->has_map ? dmap : NULL, dout};
    if ((rc = run_and_download(kern, &s, &da, dout, got, obytes, v))) goto out;
    cmp_result cr;
    compare(got, want, c->T * H, c->out == MOECTS_BF16, &cr);
    v->pass = cr.mismatches == 0;
    set_cmp_msg(v, &cr, v->pass ? "bit-exact" : "mismatch", c->out == MOECTS_BF16);
    rc = 0;
out:
    moects__cuda_free(dx), moects__cuda_free(dids), moects__cuda_free(dw), moects__cuda_free(didx);
    moects__cuda_free(dmap), moects__cuda_free(dout);
    free(x), free(ids), free(w), free(idx), free(idx_dev), free(map), free(got), free(want);
    return rc;
}

/* ---- fp4_gemm cases ---- */
enum { DATA_NORMAL = 0, DATA_SUBNORMAL = 1 };
typedef struct {
    const char *name;
    int64_t M, N, K;
    moects_fp4_format f;
    moects_scale_layout l;
    moects_dtype out;
    int data;
} fp4_case;

#define MX MOECTS_FP4_MXFP4
#define NV MOECTS_FP4_NVFP4
#define LIN MOECTS_SCALES_LINEAR
#define SWZ MOECTS_SCALES_SWIZZLED_128X4
static const fp4_case fp4_cases[] = {
    {"mx_128x64x256_lin_bf16", 128, 64, 256, MX, LIN, MOECTS_BF16, DATA_NORMAL},
    {"mx_300x200x1000_lin_f32_tail8", 300, 200, 1000, MX, LIN, MOECTS_F32, DATA_NORMAL},
    {"mx_64x64x7168_swz_bf16", 64, 64, 7168, MX, SWZ, MOECTS_BF16, DATA_NORMAL},
    {"mx_129x65x33_lin_bf16_oddK", 129, 65, 33, MX, LIN, MOECTS_BF16, DATA_NORMAL},
    {"mx_77x91x31_swz_f32_oddK_aligned", 77, 91, 31, MX, SWZ, MOECTS_F32, DATA_NORMAL},
    {"mx_200x136x4111_swz_bf16_oddK", 200, 136, 4111, MX, SWZ, MOECTS_BF16, DATA_NORMAL},
    {"mx_1x1x1_lin_bf16", 1, 1, 1, MX, LIN, MOECTS_BF16, DATA_NORMAL},
    {"mx_5x3x0_lin_bf16_K0", 5, 3, 0, MX, LIN, MOECTS_BF16, DATA_NORMAL},
    {"mx_128x128x512_lin_f32_subnormal", 128, 128, 512, MX, LIN, MOECTS_F32, DATA_SUBNORMAL},
    {"mx_4100x576x1056_lin_bf16_big", 4100, 576, 1056, MX, LIN, MOECTS_BF16, DATA_NORMAL},
    {"nv_128x64x256_lin_bf16", 128, 64, 256, NV, LIN, MOECTS_BF16, DATA_NORMAL},
    {"nv_300x200x1000_swz_f32_tail8", 300, 200, 1000, NV, SWZ, MOECTS_F32, DATA_NORMAL},
    {"nv_65x33x17_lin_bf16_oddK", 65, 33, 17, NV, LIN, MOECTS_BF16, DATA_NORMAL},
    {"nv_256x512x7168_swz_bf16", 256, 512, 7168, NV, SWZ, MOECTS_BF16, DATA_NORMAL},
    {"nv_96x80x200_lin_f32_subnormal", 96, 80, 200, NV, LIN, MOECTS_F32, DATA_SUBNORMAL},
    {"nv_4100x576x1040_swz_bf16_big", 4100, 576, 1040, NV, SWZ, MOECTS_BF16, DATA_NORMAL},
};

/* Scale bytes of row r. MXFP4: UE8M0 codes 110..140 (normal); DATA_SUBNORMAL: A's even rows take
 * codes 0 and 1 only (2^-127 is an FP32 subnormal, 2^-126 the least normal), its odd rows 100..140,
 * B 120..200, so whole output rows depend on subnormal scales and products sA*sB (a flush to zero
 * shows). NVFP4: E4M3 0x08..0x7E (normal, positive), a few subnormals 0x01..0x07; DATA_SUBNORMAL:
 * mostly subnormal (m * 2^-9: normal in FP32). */
static uint8_t rnd_scale(moects_fp4_format f, int data, int is_a, int64_t r)
{
    if (f == MX) {
        if (data == DATA_SUBNORMAL)
            return is_a ? (uint8_t)(r % 2 == 0 ? rnd_below(2) : 100 + rnd_below(41)) : (uint8_t)(120 + rnd_below(81));
        return (uint8_t)(110 + rnd_below(31));
    }
    if (data == DATA_SUBNORMAL || rnd() % 16 == 0) return (uint8_t)(1 + rnd_below(7));
    return (uint8_t)(0x08 + rnd_below(0x7F - 0x08));
}

static void fill_scales(uint8_t *buf, int64_t bytes, int64_t rows, int64_t nkb, const fp4_case *c, int is_a)
{
    for (int64_t i = 0; i < bytes; i++) buf[i] = (uint8_t)rnd(); /* padding of the swizzle: garbage */
    for (int64_t r = 0; r < rows; r++)
        for (int64_t b = 0; b < nkb; b++) buf[moects__scale_offset(r, b, nkb, c->l)] = rnd_scale(c->f, c->data, is_a, r);
}

static int run_fp4_case(const moects_kernel *kern, const fp4_case *c, verdict *v)
{
    moects_fp4_gemm_shape s = {c->M, c->N, c->K, c->f, c->l, c->out};
    const int64_t rb = (c->K + 1) / 2, g = moects_fp4_block(c->f), nkb = (c->K + g - 1) / g;
    const int64_t sab = moects__scale_bytes(c->M, nkb, c->l), sbb = moects__scale_bytes(c->N, nkb, c->l);
    const size_t osz = c->out == MOECTS_BF16 ? 2 : 4, obytes = (size_t)(c->M * c->N) * osz;
    uint8_t *a = malloc((size_t)(c->M * rb) + 1), *b = malloc((size_t)(c->N * rb) + 1);
    uint8_t *sa = malloc((size_t)sab + 1), *sb = malloc((size_t)sbb + 1);
    void *got = malloc(obytes + 4), *want = malloc(obytes + 4);
    void *da = NULL, *db = NULL, *dsa = NULL, *dsb = NULL, *dd = NULL;
    int rc = -1;
    v->pass = 0;
    if (!a || !b || !sa || !sb || !got || !want) {
        snprintf(v->msg, sizeof v->msg, "host out of memory");
        goto out;
    }
    for (int64_t i = 0; i < c->M * rb; i++) a[i] = (uint8_t)rnd();
    for (int64_t i = 0; i < c->N * rb; i++) b[i] = (uint8_t)rnd();
    fill_scales(sa, sab, c->M, nkb, c, 1);
    fill_scales(sb, sbb, c->N, nkb, c, 0);
    const float alpha = c->f == NV ? 1.0f / (726.5f * 527.0625f) : 1.0f; /* 1 / (gs_a * gs_b) */
    moects_fp4_gemm_args ha = {a, b, sa, sb, alpha, want};
    moects_recipe recipe = MOECTS_RECIPE_EXACT_V1;
    if (kern->recipe && moects__recipe_parse(kern->recipe, MOECTS_OP_FP4_GEMM, &recipe)) {
        snprintf(v->msg, sizeof v->msg, "unknown recipe %s", kern->recipe);
        goto out;
    }
    if (moects__ref_fp4_gemm(&s, &ha, recipe)) {
        snprintf(v->msg, sizeof v->msg, "reference refused the case");
        goto out;
    }
    char why[256] = "";
    if (!kern->supports(&s, why, sizeof why)) {
        snprintf(v->msg, sizeof v->msg, "UNSUPPORTED: %s", why);
        rc = -3;
        goto out;
    }
    da = moects__cuda_malloc((size_t)(c->M * rb));
    db = moects__cuda_malloc((size_t)(c->N * rb));
    dsa = moects__cuda_malloc((size_t)sab);
    dsb = moects__cuda_malloc((size_t)sbb);
    dd = moects__cuda_malloc(obytes);
    if (moects__cuda_h2d(da, a, (size_t)(c->M * rb)) || moects__cuda_h2d(db, b, (size_t)(c->N * rb)) ||
        moects__cuda_h2d(dsa, sa, (size_t)sab) || moects__cuda_h2d(dsb, sb, (size_t)sbb) ||
        moects__cuda_memset(dd, 0x7F, obytes)) {
        snprintf(v->msg, sizeof v->msg, "upload failed");
        goto out;
    }
    moects_fp4_gemm_args dargs = {da, db, dsa, dsb, alpha, dd};
    if ((rc = run_and_download(kern, &s, &dargs, dd, got, obytes, v))) goto out;
    cmp_result cr;
    compare(got, want, c->M * c->N, c->out == MOECTS_BF16, &cr);
    if (kern->recipe) {
        v->pass = cr.mismatches == 0;
        set_cmp_msg(v, &cr, v->pass ? "bit-exact" : "mismatch", c->out == MOECTS_BF16);
    } else {
        v->pass = cr.calc_diff <= kern->tol.max_calc_diff && cr.max_ulp <= kern->tol.max_ulp;
        set_cmp_msg(v, &cr, v->pass ? "within tolerance of exact_v1" : "outside tolerance of exact_v1",
                    c->out == MOECTS_BF16);
    }
    rc = 0;
out:
    moects__cuda_free(da), moects__cuda_free(db), moects__cuda_free(dsa), moects__cuda_free(dsb), moects__cuda_free(dd);
    free(a), free(b), free(sa), free(sb), free(got), free(want);
    return rc;
}

/* All shapes of one kernel, in this process. Returns the number of failed shapes. */
static int test_kernel(const moects_kernel *k)
{
    int fails = 0;
    rng = 0x5EEDull ^ (uint64_t)strlen(k->name);
    if (k->op == MOECTS_OP_EP_GATHER) {
        for (size_t i = 0; i < sizeof epg_cases / sizeof epg_cases[0]; i++) {
            if (epg_cases[i].large && !opt_large) continue;
            verdict v;
            run_epg_case(k, &epg_cases[i], &v);
            printf("%s %s %s: %s\n", v.pass ? "PASS" : "FAIL", k->name, epg_cases[i].name, v.msg);
            fflush(stdout);
            fails += !v.pass;
        }
    } else if (k->op == MOECTS_OP_MOE_GEMM) {
        if (moects__selftest_moe(k, &fails) == 0) {
            printf("FAIL %s: took none of the moe_gemm self-test cases\n", k->name);
            fails++;
        }
    } else {
        for (size_t i = 0; i < sizeof fp4_cases / sizeof fp4_cases[0]; i++) {
            verdict v;
            run_fp4_case(k, &fp4_cases[i], &v);
            printf("%s %s %s: %s\n", v.pass ? "PASS" : "FAIL", k->name, fp4_cases[i].name, v.msg);
            fflush(stdout);
            fails += !v.pass;
        }
    }
    return fails;
}

/* ---- perf ---- */
typedef struct {
    const moects_kernel *k;
    const void *shape, *args;
} launch_ctx;

static int launch_once(void *p)
{
    launch_ctx *c = p;
    return c->k->run(c->shape, c->args, moects__cuda_stream());
}

static const moects_kernel *find_kernel(const char *name)
{
    size_t n;
    const moects_kernel *const *all = moects__builtin_kernels(&n);
    for (size_t i = 0; i < n; i++)
        if (!strcmp(all[i]->name, name)) return all[i];
    return NULL;
}

/* Upload n bytes of random data: a 64 MiB random block repeated (never zeros: METHOD.md). */
static int upload_random(void *dst, size_t n)
{
    size_t blk = (size_t)64 << 20;
    uint8_t *h = malloc(blk);
    if (!h) return -1;
    for (size_t i = 0; i + 8 <= blk; i += 8) {
        uint64_t r = rnd();
        memcpy(h + i, &r, 8);
    }
    int rc = 0;
    for (size_t off = 0; off < n && !rc; off += blk) rc = moects__cuda_h2d((uint8_t *)dst + off, h, n - off < blk ? n - off : blk);
    free(h);
    return rc;
}

static void perf_ep_gather(double copy_gbps, const char *model, int64_t T, int64_t k, int64_t H)
{
    const moects_kernel *kern = find_kernel("cuda.ep_gather");
    const int64_t rows = T * k;
    moects_ep_gather_shape s = {T, k, rows, H, 256, MOECTS_I32, MOECTS_BF16, 0};
    int32_t *ids = malloc((size_t)rows * 4), *idx = malloc((size_t)rows * 4);
    float *w = malloc((size_t)rows * 4);
    void *dx = moects__cuda_malloc((size_t)(rows * H) * 2), *dout = moects__cuda_malloc((size_t)(T * H) * 2);
    void *dids = moects__cuda_malloc((size_t)rows * 4), *didx = moects__cuda_malloc((size_t)rows * 4);
    void *dw = moects__cuda_malloc((size_t)rows * 4);
    if (!kern || !ids || !idx || !w || !dx || !dout || !dids || !didx || !dw) {
        printf("PERF ep_gather %s: allocation failed\n", model);
        goto out;
    }
    /* every row of x read once: input_index a random permutation of 0..rows-1 */
    for (int64_t i = 0; i < rows; i++) idx[i] = (int32_t)i, ids[i] = (int32_t)rnd_below(256), w[i] = rnd_unit();
    for (int64_t i = rows - 1; i > 0; i--) {
        int64_t j = rnd_below(i + 1);
        int32_t t = idx[i];
        idx[i] = idx[j], idx[j] = t;
    }
    if (upload_random(dx, (size_t)(rows * H) * 2) || moects__cuda_h2d(dids, ids, (size_t)rows * 4) ||
        moects__cuda_h2d(didx, idx, (size_t)rows * 4) || moects__cuda_h2d(dw, w, (size_t)rows * 4)) {
        printf("PERF ep_gather %s: upload failed\n", model);
        goto out;
    }
    moects_ep_gather_args a = {dx, dids, dw, didx, NULL, dout};
    launch_ctx lc = {kern, &s, &a};
    double ms;
    if (moects__cuda_time(launch_once, &lc, 5, 41, &ms)) {
        printf("PERF ep_gather %s: timing failed\n", model);
        goto out;
    }
    double bytes = (double)rows * H * 2 + (double)T * H * 2;
    double gbps = bytes / (ms * 1e-3) / 1e9;
    printf("PERF cuda.ep_gather %-10s T=%-6lld k=%-2lld H=%-5lld %8.4f ms %7.0f GB/s = %5.1f%% of D2D copy %.0f GB/s\n",
           model, (long long)T, (long long)k, (long long)H, ms, gbps, 100 * gbps / copy_gbps, copy_gbps);
out:
    free(ids), free(idx), free(w);
    moects__cuda_free(dx), moects__cuda_free(dout), moects__cuda_free(dids), moects__cuda_free(didx), moects__cuda_free(dw);
}

static void perf_fp4(const char *label, int64_t M, int64_t N, int64_t K)
{
    char err[256] = "";
    double cub = 0;
    if (moects__cuda_cublas_bf16_tflops(M, N, K, &cub, err, sizeof err)) {
        printf("PERF cuBLAS BF16 %s: %s\n", label, err);
        cub = 0;
    } else {
        printf("PERF cublas.bf16             %-16s M=%-5lld N=%-5lld K=%-5lld %7.1f TFLOP/s\n", label, (long long)M,
               (long long)N, (long long)K, cub);
    }
    static const char *const names[] = {"cuda.fp4_gemm.blockwise", "cuda.fp4_gemm.dequant_cublas"};
    for (int f = 0; f < 2; f++) {
        const moects_fp4_format fmt = f ? NV : MX;
        const int64_t rb = (K + 1) / 2, g = moects_fp4_block(fmt), nkb = (K + g - 1) / g;
        void *da = moects__cuda_malloc((size_t)(M * rb)), *db = moects__cuda_malloc((size_t)(N * rb));
        void *dsa = moects__cuda_malloc((size_t)(M * nkb)), *dsb = moects__cuda_malloc((size_t)(N * nkb));
        void *dd = moects__cuda_malloc((size_t)(M * N) * 2);
        uint8_t *hs = malloc((size_t)((M > N ? M : N) * nkb));
        fp4_case c = {"perf", M, N, K, fmt, LIN, MOECTS_BF16, DATA_NORMAL};
        if (!da || !db || !dsa || !dsb || !dd || !hs || upload_random(da, (size_t)(M * rb)) ||
            upload_random(db, (size_t)(N * rb))) {
            printf("PERF fp4 %s: allocation/upload failed\n", label);
            goto next;
        }
        fill_scales(hs, M * nkb, M, nkb, &c, 1);
        if (moects__cuda_h2d(dsa, hs, (size_t)(M * nkb))) goto next;
        fill_scales(hs, N * nkb, N, nkb, &c, 0);
        if (moects__cuda_h2d(dsb, hs, (size_t)(N * nkb))) goto next;
        moects_fp4_gemm_shape s = {M, N, K, fmt, LIN, MOECTS_BF16};
        moects_fp4_gemm_args a = {da, db, dsa, dsb, 1.0f, dd};
        for (int ki = 0; ki < 2; ki++) {
            const moects_kernel *kern = find_kernel(names[ki]);
            char why[256];
            if (!kern || !kern->supports(&s, why, sizeof why)) {
                printf("PERF %s: skipped (%s)\n", names[ki], kern ? why : "not registered");
                continue;
            }
            launch_ctx lc = {kern, &s, &a};
            double ms;
            if (moects__cuda_time(launch_once, &lc, 5, 41, &ms)) {
                printf("PERF %s: timing failed\n", names[ki]);
                continue;
            }
            double tf = 2.0 * M * N * K / (ms * 1e-3) / 1e12;
            printf("PERF %-28s %s %-10s M=%-5lld N=%-5lld K=%-5lld %7.1f TFLOP/s %8.4f ms = %5.1f%% of cuBLAS BF16\n",
                   names[ki], fmt == MX ? "mxfp4" : "nvfp4", label, (long long)M, (long long)N, (long long)K, tf, ms,
                   cub > 0 ? 100 * tf / cub : 0.0);
        }
    next:
        moects__cuda_free(da), moects__cuda_free(db), moects__cuda_free(dsa), moects__cuda_free(dsb), moects__cuda_free(dd);
        free(hs);
    }
}

static int perf(void)
{
    char err[256] = "", name[128];
    double copy = 0;
    /* as the runner's workers: device 0, its memory pool keeping what cudaMallocAsync took (a release
     * threshold of 0 maps each call's workspace again: the W4A16 kernel's BF16 weights are GBs) */
    if (moects__cuda_set_device(0, err, sizeof err)) {
        printf("PERF device set-up failed: %s\n", err);
        return 1;
    }
    moects__cuda_device_name(name, sizeof name);
    if (moects__cuda_copy_gbps((size_t)4 << 30, &copy, err, sizeof err)) {
        printf("PERF copy ceiling failed: %s\n", err);
        return 1;
    }
    printf("PERF device %s: D2D cudaMemcpy of 4 GiB: %.0f GB/s (read + written)\n", name, copy);
    rng = 42;
    if (opt_perf_ep) {
        perf_ep_gather(copy, "dsv3", 4096, 8, 7168);
        perf_ep_gather(copy, "dsv3", 16384, 8, 7168);
        perf_ep_gather(copy, "kimi-k3", 4096, 16, 3584);
        perf_ep_gather(copy, "kimi-k3", 16384, 16, 3584);
    }
    if (opt_perf_fp4) {
        perf_fp4("dsv3.gemm1.tp8", 4096, 512, 7168);
        perf_fp4("dsv3.gemm2.tp8", 4096, 7168, 256);
        perf_fp4("k3.gemm1.tp8", 4096, 768, 3584);
        perf_fp4("square", 4096, 4096, 4096);
    }
    if (opt_perf_moe) {
        size_t n;
        const moects_kernel *const *all = moects__builtin_kernels(&n);
        moects__selftest_moe_perf(all, n);
    }
    return 0;
}

/* ---- driver ---- */
static int child_status(pid_t pid, char *desc, size_t len)
{
    int st = 0;
    if (waitpid(pid, &st, 0) < 0) {
        snprintf(desc, len, "waitpid failed");
        return -1;
    }
    if (WIFSIGNALED(st)) {
        snprintf(desc, len, "process died on signal %d", WTERMSIG(st));
        return -1;
    }
    snprintf(desc, len, "exit %d", WEXITSTATUS(st));
    return WEXITSTATUS(st);
}

/* Run fn(k) in a child (or here with --no-fork); returns its status, -1 for a death. */
static int isolated(int (*fn)(const moects_kernel *), const moects_kernel *k, char *desc, size_t len)
{
    if (!opt_fork) {
        int r = fn(k);
        snprintf(desc, len, "in process");
        return r > 255 ? 255 : r;
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(desc, len, "fork failed");
        return -1;
    }
    if (pid == 0) {
        int r = fn(k);
        fflush(stdout);
        _exit(r > 255 ? 255 : r);
    }
    return child_status(pid, desc, len);
}

static int probe_device(const moects_kernel *unused)
{
    (void)unused;
    char why[256] = "", name[128] = "";
    int n = moects__cuda_device_count(why, sizeof why);
    if (n <= 0) {
        printf("SKIP: no CUDA device: %s\n", why);
        return 3;
    }
    moects__cuda_device_name(name, sizeof name);
    printf("device: %s (%d visible)\n", name, n);
    return 0;
}

static int perf_child(const moects_kernel *unused)
{
    (void)unused;
    return perf();
}

int main(int argc, char **argv)
{
    const char *filter = NULL;
    int do_perf = 0, do_tests = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--kernel") && i + 1 < argc) filter = argv[++i];
        else if (!strcmp(argv[i], "--no-fork")) opt_fork = 0;
        else if (!strcmp(argv[i], "--no-large")) opt_large = 0;
        else if (!strcmp(argv[i], "--perf")) do_perf = 1;
        else if (!strcmp(argv[i], "--perf-only")) do_perf = 1, do_tests = 0;
        else if (!strcmp(argv[i], "--perf-fp4-only")) do_perf = 1, do_tests = 0, opt_perf_ep = 0, opt_perf_moe = 0;
        else if (!strcmp(argv[i], "--perf-moe-only")) do_perf = 1, do_tests = 0, opt_perf_ep = 0, opt_perf_fp4 = 0;
        else {
            fprintf(stderr, "usage: %s [--kernel SUBSTR] [--no-fork] [--no-large] "
                    "[--perf|--perf-only|--perf-fp4-only|--perf-moe-only]\n", argv[0]);
            return 2;
        }
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    char desc[128];
    int r = isolated(probe_device, NULL, desc, sizeof desc);
    if (r == 3) return 0;
    if (r != 0) {
        printf("FAIL: device probe: %s\n", desc);
        return 1;
    }
    int bad = 0;
    size_t n;
    const moects_kernel *const *all = moects__builtin_kernels(&n);
    char summary[4096] = "";
    size_t used = 0;
    for (size_t i = 0; do_tests && i < n; i++) {
        const moects_kernel *k = all[i];
        if (k->device != MOECTS_DEVICE_CUDA || (filter && !strstr(k->name, filter))) continue;
        int fails = isolated(test_kernel, k, desc, sizeof desc);
        const char *verdict;
        if (!k->bug) verdict = fails == 0 ? "ok (every shape passes)" : "NOT OK (a real kernel failed)";
        else verdict = fails != 0 ? "ok (mutant detected)" : "NOT OK (mutant escaped)";
        if (k->bug ? fails == 0 : fails != 0) bad = 1;
        used += (size_t)snprintf(summary + used, used < sizeof summary ? sizeof summary - used : 0,
                                 "  %-40s %s [%s]\n", k->name, verdict, fails < 0 ? desc : "");
        if (used >= sizeof summary) used = sizeof summary - 1;
    }
    if (do_tests) printf("summary:\n%s%s\n", summary, bad ? "SELFTEST FAILED" : "SELFTEST OK");
    if (do_perf && isolated(perf_child, NULL, desc, sizeof desc) != 0) {
        printf("perf: %s\n", desc);
        bad = 1;
    }
    return bad;
}
