/* fp4_gemm.c: the fp4_gemm op (block-scaled FP4 GEMM, NT layout; DESIGN.md "Number formats"): its
 * inputs from (seed, case id), binding, references, bounds, geometry, costs and tensor descriptions. */
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moects_gpuref.h"
#include "moects_harness.h"
#include "moects_op.h"
#include "ops_internal.h"

/* Codes of one operand, [rows][kbytes] packed; pad nibble of odd K = 0x7 (6.0: caught if read). */
static void fill_codes(uint8_t *p, int64_t rows, int64_t K, uint64_t key, int pooled, uint64_t kpool,
                       uint64_t koff, uint8_t *pool, int64_t P)
{
    int64_t kbytes = (K + 1) / 2;
    if (pooled) {
        for (int64_t i = 0; i < P; i++) pool[i] = (uint8_t)(moects__draw(kpool, (uint64_t)i / 8) >> (8 * (i % 8)));
        for (int64_t r = 0; r < rows; r++)
            memcpy(p + (size_t)r * (size_t)kbytes, pool + moects__draw(koff, (uint64_t)r) % (uint64_t)(P - kbytes + 1),
                   (size_t)kbytes);
    } else {
        size_t n = (size_t)rows * (size_t)kbytes;
        for (size_t i = 0; i < n; i += 8) {
            uint64_t u = moects__draw(key, i / 8);
            for (size_t q = 0; q < 8 && i + q < n; q++) p[i + q] = (uint8_t)(u >> (8 * q));
        }
    }
    if (K % 2)
        for (int64_t r = 0; r < rows; r++) {
            uint8_t *b = p + (size_t)r * (size_t)kbytes + kbytes - 1;
            *b = (uint8_t)((*b & 0x0f) | 0x70);
        }
}

/* Set nibble k of a packed row (element 2j low, 2j+1 high). */
static void set_code(uint8_t *row, int64_t k, uint8_t code)
{
    uint8_t *p = row + k / 2;
    *p = k % 2 ? (uint8_t)((*p & 0x0f) | code << 4) : (uint8_t)((*p & 0xf0) | code);
}

/* MXFP4 negzero (the signed zero of a block partial, fp4_gemm.blockwise_v1): on top of exact data,
 * A rows m % 4 == 1 and B rows n % 4 == 2 are rewritten so that, for each such (m, n):
 *   block 0: A = code 0x9 (-0.5) at k = 0 and 0x0 (+0) elsewhere when m % 8 == 1, all 0x8 (-0)
 *            when m % 8 == 5; B = 0x1 (0.5) at k = 0, the rest random; scale codes sA 0 (2^-127),
 *            sB 105 (2^-22): s = 2^-149 exactly, so fmaf(-0.25, s, +0) underflows to -0;
 *   blocks b >= 1: A all 0x8 (-0); B random with the sign bit cleared (codes 0..7), scales as
 *            exact data: every product is -0, p = +0 (the reference's exact zero).
 * blockwise_v1 then gives D[m][n] = +0 (fmaf(+0, s, -0) = +0); a kernel whose partial of an
 * all -0 block is -0 gives -0 when m % 8 == 1. exact_v1: -2^-151 rounds to -0 (m % 8 == 1),
 * an exact zero sum is +0 (m % 8 == 5). Odd K keeps the pad nibble. */
static void negzero_rows(const moects_case *c, uint8_t *a, uint8_t *b, uint8_t *sa, uint8_t *sb)
{
    const int64_t K = c->K, g = 32, nkb = (K + g - 1) / g, kbytes = (K + 1) / 2;
    for (int64_t m = 1; m < c->M; m += 4) {
        uint8_t *row = a + (size_t)m * (size_t)kbytes;
        for (int64_t k = 0; k < K; k++) set_code(row, k, k < g && m % 8 == 1 ? 0x0 : 0x8);
        if (m % 8 == 1) set_code(row, 0, 0x9);
        sa[m * nkb] = 0;
    }
    for (int64_t n = 2; n < c->N; n += 4) {
        uint8_t *row = b + (size_t)n * (size_t)kbytes;
        for (int64_t k = g; k < K; k++) set_code(row, k, (uint8_t)((row[k / 2] >> (k % 2 * 4)) & 0x7));
        set_code(row, 0, 0x1);
        sb[n * nkb] = 105;
    }
}

/* The case's fields in range: 0, or -1 with err. */
static int fg_check(const moects_case *c, char *err, size_t errlen)
{
    const char *id = c->id;
#define BAD(...) return snprintf(err, errlen, __VA_ARGS__), -1
    if (c->M < 0 || c->N < 0) BAD("case %s: M/N: negative", id);
    if (c->K < 1) BAD("case %s: K: must be >= 1 (%lld)", id, (long long)c->K);
    if (c->format != MOECTS_FP4_MXFP4 && c->format != MOECTS_FP4_NVFP4) BAD("case %s: format: unknown", id);
    if (c->data == MOECTS_DATA_NEGZERO && c->format != MOECTS_FP4_MXFP4)
        BAD("case %s: data: negzero is defined for MXFP4 only", id);
    if (c->scale_layout != MOECTS_SCALES_LINEAR && c->scale_layout != MOECTS_SCALES_SWIZZLED_128X4)
        BAD("case %s: scale_layout: unknown", id);
    if (c->out_dtype != MOECTS_BF16 && c->out_dtype != MOECTS_F32) BAD("case %s: out_dtype: not bf16/f32", id);
#undef BAD
    return 0;
}

/* The codes of A [M, K] and B [N, K] (pooled when large). 0, or -2 out of memory. */
static int fg_codes(const moects_case *c, uint64_t seed, int64_t pool_min, moects_inputs *in, char *err, size_t errlen)
{
    const char *id = c->id;
    const int64_t M = c->M, N = c->N, K = c->K, kbytes = (K + 1) / 2;
    in->pooled = (M > N ? M : N) * K > pool_min;
    uint8_t *pool = NULL;
    int64_t P = 0;
    if (in->pooled) {
        P = POOL_ELEMS > 2 * kbytes ? POOL_ELEMS : 2 * kbytes;
        if (!(pool = malloc((size_t)P))) return snprintf(err, errlen, "case %s: " MOECTS_HOST_OOM " (pool)", id), -2;
    }
    fill_codes(in->t[MOECTS_FG_A].host, M, K, moects__input_key(seed, id, "a"), in->pooled,
               moects__input_key(seed, id, "a.pool"), moects__input_key(seed, id, "a.row_offset"), pool, P);
    fill_codes(in->t[MOECTS_FG_B].host, N, K, moects__input_key(seed, id, "b"), in->pooled,
               moects__input_key(seed, id, "b.pool"), moects__input_key(seed, id, "b.row_offset"), pool, P);
    free(pool);
    return 0;
}

/* The logical scales ls[0] [M][nkb] (A) and ls[1] [N][nkb] (B) from the data mode. MXFP4
 * adversarial: one A row in 8 has only UE8M0 codes 0 and 1 (2^-127 is an FP32 subnormal, 2^-126 the
 * least normal) and one B row in 4 has codes 150..200, so whole outputs hang on subnormal scales: a
 * flush-to-zero build loses them (a few stray subnormal blocks vanish in the rounding of normal sums
 * and would not show it). */
static void fg_scales(const moects_case *c, uint64_t seed, int64_t nkb, uint8_t *ls[2])
{
    const int64_t rows[2] = {c->M, c->N};
    const char *sname[2] = {"sa", "sb"};
    for (int o = 0; o < 2; o++) {
        uint64_t ks = moects__input_key(seed, c->id, sname[o]);
        for (int64_t i = 0; i < rows[o] * nkb; i++)
            ls[o][i] = moects__fp4_scale_code(c->format, c->data, moects__draw(ks, (uint64_t)i));
    }
    if (c->format != MOECTS_FP4_MXFP4 || c->data != MOECTS_DATA_ADVERSARIAL) return;
    uint64_t kr = moects__input_key(seed, c->id, "subnormal_rows");
    for (int o = 0; o < 2; o++)
        for (int64_t r = 0; r < rows[o]; r++) {
            uint64_t u = moects__draw(kr, ((uint64_t)o << 62) ^ (uint64_t)r);
            if (u % (o == 0 ? 8 : 4)) continue;
            for (int64_t kb = 0; kb < nkb; kb++)
                ls[o][r * nkb + kb] = o == 0 ? (uint8_t)((u >> (8 + kb % 48)) & 1) : (uint8_t)(150 + (u >> (8 + kb % 40)) % 51);
        }
}

/* Adversarial data (not pooled): all-zero blocks and cancelling K-block pairs in A and B. */
static void fg_adversarial(const moects_case *c, uint64_t seed, int64_t blk, int64_t nkb, uint8_t *a, uint8_t *b,
                           uint8_t *ls[2])
{
    const char *id = c->id;
    const int64_t K = c->K, kbytes = (K + 1) / 2, rows[2] = {c->M, c->N};
    uint8_t *op[2] = {a, b};
    int64_t bb = blk / 2; /* bytes per K-block (blk is even) */
    /* all-zero blocks (+0 and -0 codes) */
    uint64_t kz = moects__input_key(seed, id, "zero_blocks");
    for (int o = 0; o < 2; o++)
        for (int64_t r = 0; r < rows[o]; r++)
            for (int64_t kb = 0; kb < nkb; kb++) {
                uint64_t u = moects__draw(kz, ((uint64_t)o << 62) ^ ((uint64_t)r * (uint64_t)nkb + (uint64_t)kb));
                if (u % 16) continue;
                int64_t lo = kb * bb, hi = lo + bb < kbytes ? lo + bb : kbytes;
                for (int64_t q = lo; q < hi; q++) {
                    uint8_t *p = op[o] + (size_t)r * (size_t)kbytes + q;
                    uint8_t z = (uint8_t)((u >> (8 + (q - lo) % 48)) & 1 ? 0x88 : 0x00);
                    *p = (K % 2 && q == kbytes - 1) ? (uint8_t)((*p & 0xf0) | (z & 0x0f)) : z;
                }
            }
    /* cancellation: K-block pairs (kb, kb+1) where A's second block is the first negated and
     * B's repeats, with equal scales: block partials cancel and only rounding residues stay */
    uint64_t kp = moects__input_key(seed, id, "cancel_pairs");
    for (int64_t kb = 0; kb + 1 < nkb && (kb + 2) * blk <= K; kb += 2) {
        if (moects__draw(kp, (uint64_t)kb) % 2) continue;
        for (int o = 0; o < 2; o++)
            for (int64_t r = 0; r < rows[o]; r++) {
                uint8_t *p = op[o] + (size_t)r * (size_t)kbytes + kb * bb;
                for (int64_t q = 0; q < bb; q++) p[bb + q] = o == 0 ? (uint8_t)(p[q] ^ 0x88) : p[q];
                ls[o][r * nkb + kb + 1] = ls[o][r * nkb + kb];
            }
    }
}

/* The logical scales ls into the tensors sa, sb in the case's layout (swizzled padding: 0xFF). */
static void fg_layout(const moects_case *c, int64_t nkb, uint8_t *ls[2], moects_inputs *in)
{
    const int64_t rows[2] = {c->M, c->N};
    uint8_t *phys[2] = {in->t[MOECTS_FG_SA].host, in->t[MOECTS_FG_SB].host};
    for (int o = 0; o < 2; o++) {
        if (!phys[o]) continue;
        if (c->scale_layout != MOECTS_SCALES_SWIZZLED_128X4) {
            memcpy(phys[o], ls[o], (size_t)rows[o] * (size_t)nkb);
            continue;
        }
        memset(phys[o], 0xff, moects_swizzle_bytes(rows[o], nkb)); /* padding: 0xFF poison (NaN), never read */
        for (int64_t r = 0; r < rows[o]; r++)
            for (int64_t kb = 0; kb < nkb; kb++) phys[o][moects__swizzle_offset(r, kb, nkb)] = ls[o][r * nkb + kb];
    }
}

/* NVFP4: encode-direction global scales 448*6/amax for amax in [1/16, 256] and alpha, FP32 ops; else 1. */
static void fg_global(const moects_case *c, uint64_t seed, moects_inputs *in)
{
    if (c->format != MOECTS_FP4_NVFP4) {
        in->gs_a = in->gs_b = in->alpha = 1.0f;
        return;
    }
    uint64_t kg = moects__input_key(seed, c->id, "global_scale");
    float amax_a = (float)(1 + moects__draw(kg, 0) % 4096) / 16.0f, amax_b = (float)(1 + moects__draw(kg, 1) % 4096) / 16.0f;
    in->gs_a = 448.0f * 6.0f / amax_a;
    in->gs_b = 448.0f * 6.0f / amax_b;
    float prod = in->gs_a * in->gs_b;
    in->alpha = 1.0f / prod;
}

/* The inputs of an fp4_gemm case (moects__op_def.build): codes, scales, global scales. */
static int fg_build(const moects_case *c, uint64_t seed, int64_t pool_min, moects_inputs *in, char *err, size_t errlen)
{
    const char *id = c->id;
    const int64_t M = c->M, N = c->N, K = c->K;
    int rc = fg_check(c, err, errlen);
    if (rc) return rc;
    in->fg = (moects_fp4_gemm_shape){.M = M, .N = N, .K = K, .format = c->format, .scale_layout = c->scale_layout,
                                     .out_dtype = c->out_dtype};
    int64_t blk = moects_fp4_block(c->format), nkb = (K + blk - 1) / blk, kbytes = (K + 1) / 2;
    int swz = c->scale_layout == MOECTS_SCALES_SWIZZLED_128X4;
    size_t sa_bytes = swz ? (M ? moects_swizzle_bytes(M, nkb) : 0) : (size_t)M * (size_t)nkb;
    size_t sb_bytes = swz ? (N ? moects_swizzle_bytes(N, nkb) : 0) : (size_t)N * (size_t)nkb;
    if ((rc = moects__input_alloc(in, MOECTS_FG_A, "a", (size_t)M * (size_t)kbytes, id, err, errlen)) ||
        (rc = moects__input_alloc(in, MOECTS_FG_B, "b", (size_t)N * (size_t)kbytes, id, err, errlen)) ||
        (rc = moects__input_alloc(in, MOECTS_FG_SA, "sa", sa_bytes, id, err, errlen)) ||
        (rc = moects__input_alloc(in, MOECTS_FG_SB, "sb", sb_bytes, id, err, errlen)) ||
        (rc = fg_codes(c, seed, pool_min, in, err, errlen)))
        return rc;
    uint8_t *ls[2] = {malloc((size_t)M * (size_t)nkb + 1), malloc((size_t)N * (size_t)nkb + 1)};
    if (!ls[0] || !ls[1]) {
        free(ls[0]);
        free(ls[1]);
        return snprintf(err, errlen, "case %s: " MOECTS_HOST_OOM " (scales)", id), -2;
    }
    uint8_t *a = in->t[MOECTS_FG_A].host, *b = in->t[MOECTS_FG_B].host;
    fg_scales(c, seed, nkb, ls);
    if (c->data == MOECTS_DATA_NEGZERO) negzero_rows(c, a, b, ls[0], ls[1]);
    if (c->data == MOECTS_DATA_ADVERSARIAL && !in->pooled) fg_adversarial(c, seed, blk, nkb, a, b, ls);
    fg_layout(c, nkb, ls, in);
    free(ls[0]);
    free(ls[1]);
    fg_global(c, seed, in);
    in->out_dtype = c->out_dtype;
    in->out_elems = M * N;
    in->out_bytes = (size_t)in->out_elems * (c->out_dtype == MOECTS_F32 ? 4 : 2);
    return 0;
}

/* ---- the case ---- */

static void fg_case_shape(const moects_case *c, moects__kshape *s)
{
    s->fg = (moects_fp4_gemm_shape){.M = c->M, .N = c->N, .K = c->K, .format = c->format,
                                    .scale_layout = c->scale_layout,
                                    .out_dtype = c->out_dtype ? c->out_dtype : MOECTS_BF16};
}

static json_t *fg_shape_json(const moects_case *c, const moects_inputs *in)
{
    (void)in;
    return json_pack("{sI sI sI ss ss ss ss}", "M", (json_int_t)c->M, "N", (json_int_t)c->N, "K", (json_int_t)c->K,
                     "format", moects__fp4_format_name(c->format), "scale_layout",
                     moects__scale_layout_name(c->scale_layout), "out_dtype", moects__abi_dtype(c->out_dtype), "gemm",
                     c->gemm);
}

static int fg_shape_parse(const char *path, json_t *sh, moects_case *c, char *err, size_t errlen)
{
    if (moects__json_int(path, sh, "M", &c->M, err, errlen) || moects__json_int(path, sh, "N", &c->N, err, errlen) ||
        moects__json_int(path, sh, "K", &c->K, err, errlen) ||
        moects__json_fp4(path, sh, &c->format, &c->scale_layout, err, errlen) ||
        moects__json_dtype(path, "out_dtype", sh, &c->out_dtype, err, errlen))
        return -1;
    const char *g = json_string_value(json_object_get(sh, "gemm"));
    snprintf(c->gemm, sizeof c->gemm, "%s", g ? g : "");
    return 0;
}

static int fg_recipes(const moects_case *c, const char **names)
{
    (void)c;
    names[0] = "fp4_gemm.blockwise_v1", names[1] = "fp4_gemm.exact_v1";
    return 2;
}

/* M*N*(K+1): the reference's block partials. */
static double fg_cost(const moects_case *c) { return (double)c->M * (double)c->N * (double)(c->K + 1); }

/* A and B codes (K/2 bytes a row) and out [M, N]; scales (under 1/16 of the codes) left out. */
static double fg_bytes(const moects_case *c)
{
    const double n = (double)c->N, k = (double)c->K;
    return ((double)c->M + n) * k / 2 + (double)c->M * n * (c->out_dtype == MOECTS_F32 ? 4 : 2);
}

static double fg_ref_flops(const moects_case *c) { return 2.0 * (double)c->M * (double)c->N * (double)c->K; }

static void fg_shape_key(const moects_case *c, char *dst, size_t cap)
{
    snprintf(dst, cap, "N=%" PRId64 " K=%" PRId64, c->N, c->K);
}

static int fg_dims(const moects_case *c, const char *op, char out[3][96])
{
    snprintf(out[0], 96, "%s|N=%" PRId64, op, c->N);
    snprintf(out[1], 96, "%s|K=%" PRId64, op, c->K);
    return 2;
}

static const char *const fg_split_prefix[] = {"fp4_gemm.mxfp4/", "fp4_gemm.nvfp4/"}, *const fg_split_label[] = {"MXFP4", "NVFP4"};

/* ---- its inputs ---- */

static const void *fg_shape(const moects_inputs *in) { return &in->fg; }

static void fg_bind(const moects_inputs *in, void *const ptr[MOECTS_INPUTS_MAX], void *out, moects_op_args *args)
{
    args->fg.a = ptr[MOECTS_FG_A];
    args->fg.b = ptr[MOECTS_FG_B];
    args->fg.sa = ptr[MOECTS_FG_SA];
    args->fg.sb = ptr[MOECTS_FG_SB];
    args->fg.alpha = in->alpha;
    args->fg.d = out;
}

static size_t fg_row_bytes(const moects_inputs *in, int i)
{
    const moects_fp4_gemm_shape *s = &in->fg;
    int64_t nkb = (s->K + moects_fp4_block(s->format) - 1) / moects_fp4_block(s->format);
    if (i < 0) return (size_t)s->N * (s->out_dtype == MOECTS_F32 ? 4 : 2);
    if (i == MOECTS_FG_A || i == MOECTS_FG_B) return (size_t)(s->K + 1) / 2;
    return s->scale_layout == MOECTS_SCALES_LINEAR ? (size_t)nkb : 512;
}

/* Codes [rows, K/2] bytes; linear scales [rows, K-blocks]; swizzled scales: their bytes, 1-D. */
static int fg_describe(const moects_inputs *in, int j, moects_tensor_info *t)
{
    const moects_fp4_gemm_shape *s = &in->fg;
    int64_t nkb = (s->K + moects_fp4_block(s->format) - 1) / moects_fp4_block(s->format);
    if (j == MOECTS_FG_A || j == MOECTS_FG_B) moects__tinfo_2d(t, MOECTS__DT_U8, j == MOECTS_FG_A ? s->M : s->N, (s->K + 1) / 2);
    else if (s->scale_layout == MOECTS_SCALES_LINEAR) moects__tinfo_2d(t, MOECTS__DT_U8, j == MOECTS_FG_SA ? s->M : s->N, nkb);
    return 0;
}

static void fg_describe_out(const moects_inputs *in, moects_tensor_info *t) { t->dims[0] = in->fg.M, t->dims[1] = in->fg.N; }

static json_t *fg_scalars(const moects_inputs *in)
{
    return json_pack("{sf sf sf}", "alpha", (double)in->alpha, "gs_a", (double)in->gs_a, "gs_b", (double)in->gs_b);
}

/* ---- reference, bound, verdict, perf ---- */

static int fg_reference(const moects_inputs *in, const moects_op_args *a, moects_recipe r)
{
    return moects__ref_fp4_gemm(&in->fg, &a->fg, r);
}

static int fg_reference_pair(const moects_inputs *in, const moects_op_args *a, void *blockwise, void *exact)
{
    return moects__ref_fp4_gemm_recipes(&in->fg, &a->fg, blockwise, exact);
}

static int fg_bound(const moects_inputs *in, const moects_op_args *a, const moects_acc_class *cls, double *bound,
                    const moects_bound_stats *st)
{
    return moects__ref_fp4_gemm_bound_class(&in->fg, &a->fg, cls, bound, st);
}

static int64_t fg_reduction_k(const moects_inputs *in) { return in->fg.K; }

static void fg_geometry(const moects_inputs *in, moects_out_geom *g)
{
    g->axis[0] = "m";
    g->axis[1] = "n";
    g->col_extent = "N";
    g->rows = in->fg.M;
    g->cols = in->fg.N;
}

static double fg_perf_bytes(const moects_inputs *in, long mnk[3])
{
    mnk[0] = (long)in->fg.M, mnk[1] = (long)in->fg.N, mnk[2] = (long)in->fg.K;
    return -1;
}

/* The contract on outside inputs (moects__op_def.check): no NaN scale code (UE8M0 0xFF, UE4M3 S.1111.111)
 * and a finite alpha unless the case's data is nan. */
static int fg_contract(const moects_case *c, const moects_inputs *in, const char *where, char *err, size_t errlen)
{
    if (c->data == MOECTS_DATA_NAN) return 0;
    if (!isfinite(in->alpha)) return snprintf(err, errlen, "%s: alpha: %g is not finite (the case's data is %s)", where,
                                              (double)in->alpha, moects__data_name(c->data)), -1;
    const int64_t nkb = (in->fg.K + moects_fp4_block(in->fg.format) - 1) / moects_fp4_block(in->fg.format);
    const int swz = in->fg.scale_layout != MOECTS_SCALES_LINEAR; /* its padding holds 0xff: not read */
    for (int j = MOECTS_FG_SA; j <= MOECTS_FG_SB; j++) {
        const uint8_t *p = in->t[j].host;
        const int64_t rows = j == MOECTS_FG_SA ? in->fg.M : in->fg.N;
        for (int64_t r = 0; r < rows; r++)
            for (int64_t kb = 0; kb < nkb; kb++) {
                const size_t i = swz ? moects__swizzle_offset(r, kb, nkb) : (size_t)(r * nkb + kb);
                if (in->fg.format == MOECTS_FP4_MXFP4 ? p[i] == 0xff : (p[i] & 0x7f) == 0x7f)
                    return snprintf(err, errlen, "%s: %s[%lld, block %lld] = 0x%02x: a NaN scale (the case's data is %s, "
                                    "not nan)", where, in->t[j].name, (long long)r, (long long)kb, p[i],
                                    moects__data_name(c->data)), -1;
            }
    }
    return 0;
}

/* moects__op_def.reference_gpu: gpu/moects_gpuref.h, exact_v1 only (blockwise_v1 takes the CPU path). */
static int fg_reference_gpu(const moects_inputs *in, const moects_op_args *a, moects_recipe r, int mode, char *why,
                            size_t whylen)
{
    return moects__gpuref_fp4_gemm((moects_gpuref_mode)mode, &in->fg, &a->fg, r, why, whylen);
}

const moects__op_def moects__op_fp4_gemm = {
    .op = MOECTS_OP_FP4_GEMM, .name = "fp4_gemm",
    .case_shape = fg_case_shape, .shape_json = fg_shape_json, .shape_parse = fg_shape_parse, .recipes = fg_recipes,
    /* secs_per_cost: 750.6 s over 3904 runs of summed cost 1.38e11 of a smoke run fitted on a loaded machine,
     * times 0.25: on 2 quiet cores the smoke run took 134 s where the fit said 600 s (run/progress.c) */
    .secs_per_cost = 1.35e-9,
    .cost = fg_cost, .bytes = fg_bytes, .ref_flops = fg_ref_flops, .shape_key = fg_shape_key, .dims = fg_dims,
    .split_prefix = fg_split_prefix, .split_label = fg_split_label,
    .build = fg_build, .shape = fg_shape, .bind = fg_bind, .row_bytes = fg_row_bytes, .describe = fg_describe,
    .describe_out = fg_describe_out, .scalars = fg_scalars, .check = fg_contract,
    .reference = fg_reference, .reference_pair = fg_reference_pair, .reference_gpu = fg_reference_gpu,
    .bound = fg_bound, .reduction_k = fg_reduction_k,
    .geometry = fg_geometry, .claim_refused = NULL,
    .perf_unit = "TFLOP/s", .perf_key = "tflops", .perf_bytes = fg_perf_bytes,
};
