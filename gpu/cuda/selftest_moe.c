/* selftest_moe.c: the grouped MoE GEMM part of moects_gpu_selftest (selftest.c): each CUDA moe_gemm
 * kernel against moects__ref_moe_gemm on small shapes in the three row layouts, and --perf of the
 * grouped kernels on DeepSeek-V3 and Kimi K3 prefill routing beside cuBLAS BF16 grouped GEMM.
 *
 * A kernel declaring a recipe must give the reference's bits on every valid row; a kernel declaring an
 * accumulation class (acc.bits) must be within moects__ref_moe_gemm_bound of exact_v1 on every valid
 * element (NaN only where the reference is NaN). Rows that are not valid (id -1 padding, rows past
 * masked_m[e]) hold NaN activations and NaN scales: they must neither leak into valid rows nor be
 * compared. Outputs start as NaN bytes, so a valid element left unwritten fails. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moects_device.h"
#include "moects_quant.h"
#include "moects_ref.h"
#include "selftest_moe.h"

typedef struct {
    const char *name;
    moects_moe_format f;
    moects_fp4_format bf;
    moects_row_layout rows;
    moects_scale_layout l;
    moects_dtype out;
    int64_t E, N, K, max_m; /* max_m: masked only */
    int64_t cnt[6];         /* valid rows per expert */
    int64_t align;          /* contiguous: group padding (0: 128) */
    int64_t ablk;           /* W4A8: K elements per A scale (UE8M0), 32 or 128 */
} moe_case;

#define MXF MOECTS_FP4_MXFP4
#define NVF MOECTS_FP4_NVFP4
#define CONT MOECTS_ROWS_CONTIGUOUS
#define MASK MOECTS_ROWS_MASKED
#define OFFS MOECTS_ROWS_OFFSETS
#define LINL MOECTS_SCALES_LINEAR
#define SWZL MOECTS_SCALES_SWIZZLED_128X4
/* Expert 0 with exactly 128 rows before a non-empty expert (a tile shifted by 64 rows straddles
 * them); padding rows; groups padded to 64 rows; zero-row experts; swizzled N not a multiple of 128 (the unpadded scale stride
 * differs); masked_m[0] below another expert's; per-expert alpha (NVFP4); K tails. */
static const moe_case cases[] = {
    {"mx_contig_lin_bf16_e4", MOECTS_MOE_MXFP4, MXF, CONT, LINL, MOECTS_BF16, 4, 96, 200, 0, {128, 64, 0, 130}, 0, 0},
    {"mx_contig_swz_f32_e3", MOECTS_MOE_MXFP4, MXF, CONT, SWZL, MOECTS_F32, 3, 160, 256, 0, {1, 129, 5}, 0, 0},
    {"mx_masked_swz_bf16_e3", MOECTS_MOE_MXFP4, MXF, MASK, SWZL, MOECTS_BF16, 3, 130, 4111, 200, {5, 0, 200}, 0, 0},
    {"mx_offsets_lin_bf16_e3", MOECTS_MOE_MXFP4, MXF, OFFS, LINL, MOECTS_BF16, 3, 200, 2880, 0, {77, 0, 33}, 0, 0},
    {"nv_masked_swz_bf16_e3", MOECTS_MOE_NVFP4, NVF, MASK, SWZL, MOECTS_BF16, 3, 130, 272, 200, {5, 0, 200}, 0, 0},
    {"nv_offsets_swz_f32_e5", MOECTS_MOE_NVFP4, NVF, OFFS, SWZL, MOECTS_F32, 5, 64, 48, 0, {3, 0, 300, 17, 128}, 0, 0},
    {"nv_contig_swz_bf16_e2_k7168", MOECTS_MOE_NVFP4, NVF, CONT, SWZL, MOECTS_BF16, 2, 256, 7168, 0, {256, 3}, 0, 0},
    {"mx_contig_align64_lin_bf16_e3", MOECTS_MOE_MXFP4, MXF, CONT, LINL, MOECTS_BF16, 3, 64, 96, 0, {70, 64, 3}, 64, 0},
    {"w4a16_mx_contig_lin_bf16_e4", MOECTS_MOE_W4A16, MXF, CONT, LINL, MOECTS_BF16, 4, 96, 200, 0, {128, 64, 0, 130}, 0, 0},
    {"w4a16_nv_masked_swz_f32_e3", MOECTS_MOE_W4A16, NVF, MASK, SWZL, MOECTS_F32, 3, 130, 256, 200, {5, 0, 200}, 0, 0},
    {"w4a16_mx_offsets_swz_bf16_e3", MOECTS_MOE_W4A16, MXF, OFFS, SWZL, MOECTS_BF16, 3, 256, 2880, 0, {33, 0, 70}, 0, 0},
    /* W4A16 tails: N not a multiple of 128; K % 64 == 32; K % 32 != 0 (element loads), odd K (a padding
     * nibble), K % 8 != 0; groups padded to 64; more than 256 rows in one expert */
    {"w4a16_nv_contig_lin_bf16_e3_n200", MOECTS_MOE_W4A16, NVF, CONT, LINL, MOECTS_BF16, 3, 200, 7168, 0, {129, 0, 64}, 0, 0},
    {"w4a16_mx_masked_lin_bf16_e3_k96", MOECTS_MOE_W4A16, MXF, MASK, LINL, MOECTS_BF16, 3, 264, 96, 300, {257, 0, 300}, 0, 0},
    {"w4a16_mx_contig_align64_swz_bf16_e3_k4111", MOECTS_MOE_W4A16, MXF, CONT, SWZL, MOECTS_BF16, 3, 136, 4111, 0, {70, 64, 3}, 64, 0},
    {"w4a16_nv_offsets_lin_f32_e5_k100", MOECTS_MOE_W4A16, NVF, OFFS, LINL, MOECTS_F32, 5, 72, 100, 0, {3, 0, 300, 17, 128}, 0, 0},
    {"w4a8_contig_lin_bf16_e4_blk128", MOECTS_MOE_W4A8, MXF, CONT, LINL, MOECTS_BF16, 4, 96, 200, 0, {128, 64, 0, 130}, 0, 128},
    {"w4a8_masked_swz_f32_e3_blk32", MOECTS_MOE_W4A8, MXF, MASK, SWZL, MOECTS_F32, 3, 130, 272, 200, {5, 0, 200}, 0, 32},
    {"w4a8_offsets_lin_bf16_e3_blk128", MOECTS_MOE_W4A8, MXF, OFFS, LINL, MOECTS_BF16, 3, 64, 2880, 0, {33, 0, 70}, 0, 128},
};

static uint64_t rng_state;
static uint64_t rnd64(void)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static int64_t below(int64_t n) { return (int64_t)(rnd64() % (uint64_t)n); }

/* Host tensors of one case, and which rows are valid. */
typedef struct {
    moects_moe_gemm_shape s;
    int64_t rows, rb, nkb, sa_bytes, sb_e; /* sb_e: one expert's B scale bytes */
    size_t a_bytes, osz;
    void *a;
    uint8_t *sa, *b, *sb, *valid;
    float *alpha, *gs_a, *gs_b;
    int32_t *m_idx, *masked_m;
    int64_t *off;
} moe_host;

/* One expert's [rows][nkb] scales (rows r0.. of a taller matrix when whole), in layout: finite codes
 * varying with the expert (MXFP4 UE8M0 110..140 + e; NVFP4 E4M3 0x08..0x76), NaN (0xFF) for rows
 * that are not valid; the swizzle's padding is random. */
static void fill_scales(uint8_t *dst, int64_t bytes, int64_t rows, int64_t nkb, moects_scale_layout l,
                        moects_fp4_format f, int e, const uint8_t *valid)
{
    for (int64_t i = 0; i < bytes; i++) dst[i] = (uint8_t)rnd64();
    for (int64_t r = 0; r < rows; r++)
        for (int64_t kb = 0; kb < nkb; kb++)
            dst[moects__scale_offset(r, kb, nkb, l)] =
                valid && !valid[r] ? 0xFF : f == MXF ? (uint8_t)(110 + e + below(31)) : (uint8_t)(0x08 + below(0x6F));
}

/* The row metadata and valid[] of case c. Returns rows of A. */
static int64_t layout_rows(const moe_case *c, moe_host *h)
{
    int64_t M = 0;
    if (c->rows == CONT) {
        const int64_t al = c->align ? c->align : 128;
        for (int64_t e = 0; e < c->E; e++) M += (c->cnt[e] + al - 1) / al * al;
        h->m_idx = malloc((size_t)M * 4 + 4), h->valid = malloc((size_t)M + 1);
        int64_t r = 0;
        for (int64_t e = 0; e < c->E; e++)
            for (int64_t i = 0; i < (c->cnt[e] + al - 1) / al * al; i++, r++)
                h->m_idx[r] = i < c->cnt[e] ? (int32_t)e : -1, h->valid[r] = i < c->cnt[e];
        h->s.M = M;
        return M;
    }
    if (c->rows == MASK) {
        h->masked_m = malloc((size_t)c->E * 4), h->valid = malloc((size_t)(c->E * c->max_m) + 1);
        for (int64_t e = 0; e < c->E; e++) {
            h->masked_m[e] = (int32_t)c->cnt[e];
            for (int64_t i = 0; i < c->max_m; i++) h->valid[e * c->max_m + i] = i < c->cnt[e];
        }
        h->s.M = c->max_m;
        return c->E * c->max_m;
    }
    h->off = malloc((size_t)(c->E + 1) * 8);
    h->off[0] = 0;
    for (int64_t e = 0; e < c->E; e++) h->off[e + 1] = h->off[e] + c->cnt[e];
    M = h->off[c->E];
    h->valid = malloc((size_t)M + 1);
    memset(h->valid, 1, (size_t)M + 1);
    h->s.M = M;
    return M;
}

static void host_free(moe_host *h)
{
    free(h->a), free(h->sa), free(h->b), free(h->sb), free(h->valid), free(h->alpha), free(h->gs_a), free(h->gs_b);
    free(h->m_idx), free(h->masked_m), free(h->off);
}

/* Random inputs of case c (activations of rows that are not valid: NaN scales, NaN BF16). */
static int host_make(const moe_case *c, moe_host *h)
{
    memset(h, 0, sizeof *h);
    moects_moe_gemm_shape s = {c->E, 0, c->N, c->K, c->f, c->bf, c->rows,
                               c->rows != CONT ? 1 : c->align ? c->align : 128, c->ablk ? c->ablk : 128, 0, c->l,
                               c->out};
    h->s = s;
    h->rows = layout_rows(c, h);
    const int w4a16 = c->f == MOECTS_MOE_W4A16, w4a8 = c->f == MOECTS_MOE_W4A8;
    const int64_t g = moects_fp4_block(c->bf);
    h->rb = (c->K + 1) / 2, h->nkb = (c->K + g - 1) / g, h->osz = c->out == MOECTS_BF16 ? 2 : 4;
    h->a_bytes = (size_t)(h->rows * (w4a16 ? 2 * c->K : w4a8 ? c->K : h->rb));
    h->a = malloc(h->a_bytes + 2);
    h->b = malloc((size_t)(c->E * c->N * h->rb) + 1);
    h->sb_e = moects__scale_bytes(c->N, h->nkb, c->l);
    h->sb = malloc((size_t)(c->E * h->sb_e) + 1);
    h->alpha = malloc((size_t)c->E * 4), h->gs_a = malloc((size_t)c->E * 4), h->gs_b = malloc((size_t)c->E * 4);
    if (!h->a || !h->b || !h->sb || !h->alpha || !h->gs_a || !h->gs_b || !h->valid) return -1;
    if (w4a16) {
        uint16_t *x = h->a;
        for (int64_t r = 0; r < h->rows; r++)
            for (int64_t k = 0; k < c->K; k++)
                x[r * c->K + k] = h->valid[r] ? (uint16_t)((rnd64() & 0x8000u) | (uint16_t)(120 + below(15)) << 7 |
                                                           (uint16_t)below(128))
                                              : 0x7FC0;
    } else if (w4a8) { /* E4M3 codes but NaN (0x7F, 0xFF); UE8M0 scales 115..139 per 1 x ablk */
        uint8_t *x = h->a;
        const int64_t ns = (c->K + c->ablk - 1) / c->ablk;
        for (int64_t r = 0; r < h->rows; r++)
            for (int64_t k = 0; k < c->K; k++)
                x[r * c->K + k] = h->valid[r] ? (uint8_t)((rnd64() & 0x80u) | (uint8_t)below(0x7F)) : 0x7F;
        h->sa_bytes = h->rows * ns;
        h->sa = malloc((size_t)h->sa_bytes + 1);
        if (!h->sa) return -1;
        for (int64_t i = 0; i < h->sa_bytes; i++) h->sa[i] = h->valid[i / ns] ? (uint8_t)(115 + below(25)) : 0xFF;
    } else {
        uint8_t *x = h->a;
        for (size_t i = 0; i < h->a_bytes; i++) x[i] = (uint8_t)rnd64();
        const int swz_a = c->l == SWZL && c->rows != OFFS; /* offsets: A's scales are linear */
        const moects_scale_layout la = swz_a ? SWZL : LINL;
        const int64_t per = c->rows == MASK ? c->max_m : h->rows, groups = c->rows == MASK ? c->E : 1;
        const int64_t gb = moects__scale_bytes(per, h->nkb, la);
        h->sa_bytes = groups * gb;
        h->sa = malloc((size_t)h->sa_bytes + 1);
        if (!h->sa) return -1;
        for (int64_t e = 0; e < groups; e++)
            fill_scales(h->sa + e * gb, gb, per, h->nkb, la, c->bf, 0, h->valid + e * per);
    }
    for (int64_t i = 0; i < c->E * c->N * h->rb; i++) h->b[i] = (uint8_t)rnd64();
    for (int64_t e = 0; e < c->E; e++) {
        fill_scales(h->sb + e * h->sb_e, h->sb_e, c->N, h->nkb, c->l, c->bf, (int)e, NULL);
        h->gs_a[e] = 448.0f * 6.0f / (1.5f + (float)e), h->gs_b[e] = 448.0f * 6.0f / (0.75f + 2.0f * (float)e);
        h->alpha[e] = c->f == MOECTS_MOE_NVFP4 ? 1.0f / (h->gs_a[e] * h->gs_b[e])
                      : w4a16 && c->bf == NVF ? 1.0f / h->gs_b[e]
                                              : 1.0f;
    }
    return 0;
}

/* Args over host tensors (dev == NULL) or their device copies dev[0..9] (same order as the fields). */
static moects_moe_gemm_args bind(const moe_host *h, void *const *dev, void *d)
{
    const int nv = h->s.format == MOECTS_MOE_NVFP4, nvb = nv || (h->s.format == MOECTS_MOE_W4A16 && h->s.b_format == NVF);
    void *const p[10] = {h->a, h->sa, h->b, h->sb, h->alpha, h->gs_a, h->gs_b, h->m_idx, h->masked_m, h->off};
    void *const *q = dev ? dev : p;
    moects_moe_gemm_args a = {q[0], q[1], q[2], q[3], q[4], nv ? q[5] : NULL, nvb ? q[6] : NULL,
                              q[7], q[8], q[9], d};
    return a;
}

static double val(const void *p, int64_t i, int bf16)
{
    uint32_t u = bf16 ? (uint32_t)((const uint16_t *)p)[i] << 16 : ((const uint32_t *)p)[i];
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Compare the valid rows: bits (want from the recipe), or within bound[i] of want (exact_v1). */
static void judge(const moe_host *h, const void *got, const void *want, const double *bound, char *msg, size_t len,
                  int *pass)
{
    const int bf16 = h->osz == 2;
    int64_t bad = 0, first = -1, n = 0;
    for (int64_t r = 0; r < h->rows; r++) {
        if (!h->valid[r]) continue;
        for (int64_t j = 0; j < h->s.N; j++) {
            const int64_t i = r * h->s.N + j;
            const double g = val(got, i, bf16), w = val(want, i, bf16);
            int ok;
            if (!bound) ok = memcmp((const char *)got + i * h->osz, (const char *)want + i * h->osz, h->osz) == 0 ||
                            (isnan(g) && isnan(w));
            else ok = isnan(w) ? isnan(g) : isinf(w) ? g == w : !isnan(g) && fabs(g - w) <= bound[i];
            n++;
            if (!ok && bad++ == 0) first = i;
        }
    }
    *pass = bad == 0;
    if (bad)
        snprintf(msg, len, "%lld of %lld valid elements %s, first [row %lld, col %lld] got %.9g want %.9g%s", (long long)bad,
                 (long long)n, bound ? "outside their bound" : "differ", (long long)(first / h->s.N),
                 (long long)(first % h->s.N), val(got, first, bf16), val(want, first, bf16),
                 bound ? "" : " (bits)");
    else
        snprintf(msg, len, "%s on %lld valid elements", bound ? "within the per-element bound" : "bit-exact", (long long)n);
}

/* Reference of case h for kernel k: want (and bound for a bounded kernel). Returns 0 or -1 with msg. */
static int reference(const moects_kernel *k, const moe_host *h, void *want, double *bound, char *msg, size_t len)
{
    moects_recipe recipe = MOECTS_RECIPE_EXACT_V1;
    if (k->recipe && moects__recipe_parse(k->recipe, MOECTS_OP_MOE_GEMM, &recipe)) {
        snprintf(msg, len, "unknown recipe %s", k->recipe);
        return -1;
    }
    moects_moe_gemm_args a = bind(h, NULL, want);
    if (moects__ref_moe_gemm(&h->s, &a, recipe) ||
        (bound && moects__ref_moe_gemm_bound(&h->s, &a, k->acc.bits, k->acc.truncation, bound))) {
        snprintf(msg, len, "the reference refused the case");
        return -1;
    }
    return 0;
}

/* Upload, run, download. Returns 0, or -1 with msg. */
static int run_device(const moects_kernel *k, const moe_host *h, void *got, char *msg, size_t len)
{
    const size_t sizes[10] = {h->a_bytes, (size_t)h->sa_bytes, (size_t)(h->s.E * h->s.N * h->rb), (size_t)(h->s.E * h->sb_e),
                              (size_t)h->s.E * 4, (size_t)h->s.E * 4, (size_t)h->s.E * 4, h->m_idx ? (size_t)h->rows * 4 : 0,
                              h->masked_m ? (size_t)h->s.E * 4 : 0, h->off ? (size_t)(h->s.E + 1) * 8 : 0};
    moects_moe_gemm_args ha = bind(h, NULL, NULL);
    const void *src[10] = {ha.a, ha.sa, ha.b, ha.sb, ha.alpha, h->gs_a, h->gs_b, ha.m_indices, ha.masked_m,
                           ha.expert_offsets};
    void *dev[10] = {0};
    const size_t obytes = (size_t)(h->rows * h->s.N) * h->osz;
    void *dd = moects__cuda_malloc(obytes);
    int rc = dd && !moects__cuda_memset(dd, 0xFF, obytes) ? 0 : -1;
    for (int i = 0; i < 10 && rc == 0; i++)
        if (sizes[i] && src[i] && (!(dev[i] = moects__cuda_malloc(sizes[i])) || moects__cuda_h2d(dev[i], src[i], sizes[i])))
            rc = -1;
    if (rc) snprintf(msg, len, "device allocation or upload failed");
    char err[256] = "";
    if (rc == 0) {
        moects_moe_gemm_args da = bind(h, dev, dd);
        void *st = moects__cuda_stream();
        if (k->run(&h->s, &da, st) || moects__cuda_sync(st, err, sizeof err)) {
            const char *ke = k->last_error ? k->last_error() : NULL;
            snprintf(msg, len, "run failed: %s", ke && ke[0] ? ke : err[0] ? err : "run() returned an error");
            rc = -1;
        } else if (moects__cuda_d2h(got, dd, obytes)) {
            snprintf(msg, len, "download failed");
            rc = -1;
        }
    }
    for (int i = 0; i < 10; i++) moects__cuda_free(dev[i]);
    moects__cuda_free(dd);
    return rc;
}

int moects__selftest_moe(const moects_kernel *k, int *fails)
{
    int ran = 0;
    rng_state = 0x6D6F65ull;
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        moe_host h;
        char msg[320] = "", why[256] = "";
        int pass = 0;
        if (host_make(&cases[ci], &h)) {
            snprintf(msg, sizeof msg, "host out of memory");
        } else if (!k->supports(&h.s, why, sizeof why)) {
            host_free(&h);
            continue; /* another kernel's format or layout */
        } else {
            const size_t ob = (size_t)(h.rows * h.s.N) * h.osz;
            void *got = malloc(ob + 4), *want = malloc(ob + 4);
            double *bound = !k->recipe && k->acc.bits ? malloc((size_t)(h.rows * h.s.N) * 8 + 8) : NULL;
            if (!got || !want || (!k->recipe && k->acc.bits && !bound)) snprintf(msg, sizeof msg, "host out of memory");
            else if (!k->recipe && !k->acc.bits) snprintf(msg, sizeof msg, "declares neither a recipe nor acc.bits");
            else if (memset(want, 0xFF, ob), reference(k, &h, want, bound, msg, sizeof msg) == 0 &&
                     run_device(k, &h, got, msg, sizeof msg) == 0)
                judge(&h, got, want, bound, msg, sizeof msg, &pass);
            free(got), free(want), free(bound);
        }
        host_free(&h);
        ran++;
        *fails += !pass;
        printf("%s %s %s: %s\n", pass ? "PASS" : "FAIL", k->name, cases[ci].name, msg);
        fflush(stdout);
    }
    return ran;
}

/* ---- --perf: DeepSeek-V3 and Kimi K3 prefill routing, TP8 and EP8 ---- */
typedef struct {
    const moects_kernel *k;
    const moects_moe_gemm_shape *s;
    const moects_moe_gemm_args *a;
} perf_ctx;

static int perf_launch(void *p)
{
    perf_ctx *c = p;
    return c->k->run(c->s, c->a, moects__cuda_stream());
}

static const moects_kernel *kernel_named(const moects_kernel *const *ks, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(ks[i]->name, name)) return ks[i];
    return NULL;
}

/* Rows per local expert (the first E_local of E_global, rank 0) when T tokens each pick topk distinct
 * experts uniformly at random. */
static void route(int64_t T, int64_t topk, int64_t E_global, int64_t E_local, long *cnt)
{
    int32_t *perm = malloc((size_t)E_global * 4);
    for (int64_t e = 0; e < E_local; e++) cnt[e] = 0;
    if (!perm) return;
    for (int64_t e = 0; e < E_global; e++) perm[e] = (int32_t)e;
    for (int64_t t = 0; t < T; t++)
        for (int64_t j = 0; j < topk; j++) {
            const int64_t i = j + below(E_global - j);
            const int32_t x = perm[i];
            perm[i] = perm[j], perm[j] = x;
            if (x < E_local) cnt[x]++;
        }
    free(perm);
}

/* Time kernel k on the contiguous layout of counts cnt (groups padded to 128), random operands. */
static double time_kernel(const moects_kernel *k, moects_moe_format f, moects_fp4_format bf, int64_t E, const long *cnt,
                          int64_t N, int64_t K)
{
    int64_t M = 0;
    for (int64_t e = 0; e < E; e++) M += (cnt[e] + 127) / 128 * 128;
    const int64_t g = moects_fp4_block(bf), nkb = (K + g - 1) / g, rb = (K + 1) / 2;
    const int w4a16 = f == MOECTS_MOE_W4A16;
    moects_moe_gemm_shape s = {E, M, N, K, f, bf, CONT, 128, 128, 0, LINL, MOECTS_BF16};
    char why[256];
    if (!k->supports(&s, why, sizeof why)) return -1;
    int32_t *idx = malloc((size_t)M * 4 + 4);
    float *ones = malloc((size_t)E * 4);
    const size_t ab = (size_t)M * (size_t)(w4a16 ? 2 * K : rb), sab = w4a16 ? 0 : (size_t)(M * nkb);
    void *da = moects__cuda_malloc(ab), *dsa = sab ? moects__cuda_malloc(sab) : NULL;
    void *db = moects__cuda_malloc((size_t)(E * N * rb)), *dsb = moects__cuda_malloc((size_t)(E * N * nkb));
    void *dal = moects__cuda_malloc((size_t)E * 4), *didx = moects__cuda_malloc((size_t)M * 4);
    void *dd = moects__cuda_malloc((size_t)(M * N) * 2);
    double ms = -1;
    if (idx && ones && da && (dsa || !sab) && db && dsb && dal && didx && dd) {
        int64_t r = 0;
        for (int64_t e = 0; e < E; e++)
            for (int64_t i = 0; i < (cnt[e] + 127) / 128 * 128; i++) idx[r++] = i < cnt[e] ? (int32_t)e : -1;
        for (int64_t e = 0; e < E; e++) ones[e] = 1.0f;
        const int sc = bf == NVF ? 0x38 : 127; /* scale 1.0 */
        if (!moects__cuda_fill_random(da, ab, 1) && !moects__cuda_fill_random(db, (size_t)(E * N * rb), 2) &&
            (!sab || !moects__cuda_memset(dsa, sc, sab)) && !moects__cuda_memset(dsb, sc, (size_t)(E * N * nkb)) &&
            !moects__cuda_h2d(dal, ones, (size_t)E * 4) && !moects__cuda_h2d(didx, idx, (size_t)M * 4)) {
            moects_moe_gemm_args a = {da, dsa, db, dsb, dal, NULL, NULL, didx, NULL, NULL, dd};
            perf_ctx c = {k, &s, &a};
            if (moects__cuda_time(perf_launch, &c, 3, 20, &ms)) ms = -1;
        }
    }
    moects__cuda_free(da), moects__cuda_free(dsa), moects__cuda_free(db), moects__cuda_free(dsb);
    moects__cuda_free(dal), moects__cuda_free(didx), moects__cuda_free(dd);
    free(idx), free(ones);
    return ms;
}

static void perf_layer(const moects_kernel *const *ks, size_t nk, const char *model, const char *par, int64_t T,
                       int64_t topk, int64_t E_global, int64_t E, int64_t hidden, int64_t I_rank)
{
    long *cnt = malloc((size_t)E * sizeof *cnt);
    if (!cnt) return;
    route(T, topk, E_global, E, cnt);
    long valid = 0;
    for (int64_t e = 0; e < E; e++) valid += cnt[e];
    static const struct {
        const char *name;
        moects_moe_format f;
        moects_fp4_format bf;
    } ks_[] = {{"cuda.moe_gemm.blockwise", MOECTS_MOE_MXFP4, MXF},
               {"cuda.moe_gemm.blockwise", MOECTS_MOE_NVFP4, NVF},
               {"cuda.moe_gemm.w4a16_cublas", MOECTS_MOE_W4A16, MXF},
               {"cuda.moe_gemm.w4a16_mma", MOECTS_MOE_W4A16, MXF},
               {"cuda.moe_gemm.w4a16_mma", MOECTS_MOE_W4A16, NVF}};
    static const char *const fname[] = {"", "mxfp4", "nvfp4", "w4a8", "w4a16-mxfp4"};
    for (int gi = 0; gi < 2; gi++) {
        const int64_t N = gi ? hidden : 2 * I_rank, K = gi ? I_rank : hidden;
        char err[256] = "";
        double cub = 0;
        if (moects__cuda_cublas_moe_bf16_tflops((long)E, cnt, (long)N, (long)K, &cub, err, sizeof err)) cub = 0;
        printf("PERF moe %-6s %s T=%-5lld gemm%d E=%-4lld rows=%-6ld N=%-5lld K=%-5lld cuBLAS BF16 grouped %7.1f TFLOP/s%s%s\n",
               model, par, (long long)T, gi + 1, (long long)E, valid, (long long)N, (long long)K, cub, err[0] ? " " : "",
               err);
        for (size_t i = 0; i < sizeof ks_ / sizeof ks_[0]; i++) {
            const moects_kernel *k = kernel_named(ks, nk, ks_[i].name);
            const double ms = k ? time_kernel(k, ks_[i].f, ks_[i].bf, E, cnt, N, K) : -1;
            const double tf = ms > 0 ? 2.0 * (double)valid * (double)N * (double)K / (ms * 1e-3) / 1e12 : 0;
            printf("PERF moe %-6s %s T=%-5lld gemm%d %-28s %-12s %8.4f ms %7.1f TFLOP/s = %5.1f%% of cuBLAS BF16 grouped\n",
                   model, par, (long long)T, gi + 1, ks_[i].name,
                   ks_[i].f == MOECTS_MOE_W4A16 && ks_[i].bf == NVF ? "w4a16-nvfp4" : fname[ks_[i].f], ms, tf,
                   cub > 0 ? 100 * tf / cub : 0.0);
            fflush(stdout);
        }
    }
    free(cnt);
}

void moects__selftest_moe_perf(const moects_kernel *const *ks, size_t nk)
{
    rng_state = 4096;
    /* DeepSeek-V3: hidden 7168, I 2048, 256 experts, top-8. Kimi K3: latent 3584, I 3072, 896, top-16. */
    perf_layer(ks, nk, "dsv3", "tp8", 4096, 8, 256, 256, 7168, 2048 / 8);
    perf_layer(ks, nk, "dsv3", "ep8", 4096, 8, 256, 256 / 8, 7168, 2048);
    perf_layer(ks, nk, "k3", "tp8", 4096, 16, 896, 896, 3584, 3072 / 8);
    perf_layer(ks, nk, "k3", "ep8", 4096, 16, 896, 896 / 8, 3584, 3072);
    /* a larger prefill chunk: less padding per expert, the B prep shared by more rows */
    perf_layer(ks, nk, "dsv3", "tp8", 16384, 8, 256, 256, 7168, 2048 / 8);
    perf_layer(ks, nk, "dsv3", "ep8", 16384, 8, 256, 256 / 8, 7168, 2048);
}
