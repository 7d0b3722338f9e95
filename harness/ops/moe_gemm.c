/* moe_gemm.c: the moe_gemm op (grouped MoE GEMM over all local experts; DESIGN.md "Grouped MoE GEMM"):
 * its rows from the routing, inputs from (seed, case id), binding, references, bounds, geometry, costs
 * and tensor descriptions. */
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moects_gpuref.h"
#include "moects_guard.h"
#include "moects_harness.h"
#include "moects_op.h"
#include "ops_internal.h"

int moects__moe_counts(const moects_case *c, uint64_t seed, int64_t *cnt, char *err, size_t errlen)
{
    const int64_t E = c->E;
    if (c->n_counts > 0) {
        for (int64_t e = 0; e < E; e++) cnt[e] = c->counts[e % c->n_counts];
        return 0;
    }
    int64_t first = 0, nl = moects__ep_local_experts(c->E_global, c->ep_size, c->ep_rank, &first);
    int rt = c->routing;
    if (nl != E) {
        snprintf(err, errlen, "case %s: E: %lld local experts, but rank %d of %d holds %lld of %lld", c->id,
                 (long long)E, c->ep_rank, c->ep_size, (long long)nl, (long long)c->E_global);
        return -1;
    }
    if (c->T < 0 || c->k < 1 || c->k > c->E_global - (rt == MOECTS_ROUTE_ZERO_EXPERT) ||
        (rt != MOECTS_ROUTE_UNIFORM && rt != MOECTS_ROUTE_SKEWED && rt != MOECTS_ROUTE_ZERO_EXPERT &&
         rt != MOECTS_ROUTE_ONE_EXPERT)) {
        snprintf(err, errlen, "case %s: routing: T %lld, k %lld of %lld experts, %s: not a moe_gemm routing",
                 c->id, (long long)c->T, (long long)c->k, (long long)c->E_global, moects__routing_name(c->routing));
        return -1;
    }
    int64_t *prev = malloc((size_t)c->k * sizeof *prev);
    if (!prev) {
        snprintf(err, errlen, "case %s: " MOECTS_HOST_OOM, c->id);
        return -2;
    }
    uint64_t kid = moects__input_key(seed, c->id, "topk_ids"), kch = moects__input_key(seed, c->id, "routing");
    int64_t zero_e = first + (int64_t)(moects__draw(kch, 0) % (uint64_t)nl), hot_e = first + (int64_t)(moects__draw(kch, 1) % (uint64_t)nl);
    memset(cnt, 0, (size_t)E * sizeof *cnt);
    for (int64_t t = 0; t < c->T; t++)
        for (int64_t j = 0; j < c->k; j++) {
            int64_t e = rt == MOECTS_ROUTE_ONE_EXPERT && j == 0
                            ? hot_e
                            : moects__pick_expert(c, kid, prev, t, j, first,
                                          rt == MOECTS_ROUTE_ZERO_EXPERT ? zero_e
                                          : rt == MOECTS_ROUTE_ONE_EXPERT ? hot_e : -1, 0, 0);
            prev[j] = e;
            if (e >= first && e < first + nl) cnt[e - first]++;
        }
    free(prev);
    return 0;
}

void moects__moe_case_shape(const moects_case *c, moects_moe_gemm_shape *s)
{
    memset(s, 0, sizeof *s);
    if (c->op != MOECTS_OP_MOE_GEMM || c->E < 1) return;
    double rows = moects__moe_expected_rows(c), per = rows / (double)c->E;
    int64_t M = (int64_t)rows;
    if (c->rows == MOECTS_ROWS_CONTIGUOUS) M += c->E * (c->align - 1);
    if (c->rows == MOECTS_ROWS_MASKED) M = ((int64_t)(2 * per) + 128) / 128 * 128;
    *s = (moects_moe_gemm_shape){.E = c->E, .M = M, .N = c->N, .K = c->K, .format = c->moe_format,
                                 .b_format = c->b_format, .rows = c->rows, .align = c->align,
                                 .a_scale_block = c->moe_format == MOECTS_MOE_W4A8 ? c->a_scale_block : 0,
                                 .a_scale_f32 = c->moe_format == MOECTS_MOE_W4A8 && c->a_scale_f32,
                                 .scale_layout = c->scale_layout, .out_dtype = c->out_dtype ? c->out_dtype : MOECTS_BF16};
}

/* An E4M3 code that is not NaN (0x7F, 0xFF): a draw with 0x7F read as 0x7E (448). */
static uint8_t e4m3_value(moects_data d, uint64_t u)
{
    uint8_t b = (uint8_t)u;
    if (d == MOECTS_DATA_NAN && ((u >> 20) & 255) == 0) return (u >> 8) & 1 ? 0xff : 0x7f;
    if (d != MOECTS_DATA_ADVERSARIAL) b = (uint8_t)((b & 0x87) | (uint8_t)((4 + (u >> 8) % 8) << 3)); /* 2^-3 .. 2^4 */
    return (b & 0x7f) == 0x7f ? (uint8_t)(b - 1) : b;
}

/* A W4A8 FP32 activation scale: 8 significant bits times 2^-4 .. 2^4; NaN data: 1 in 64 NaN. */
static float f32_scale_value(moects_data d, uint64_t u)
{
    if (d == MOECTS_DATA_NAN && (u & 63) == 0) return moects__f32_bits(0x7fc00000u);
    int e = (int)((u >> 8) % 9) - 4 + (d == MOECTS_DATA_ADVERSARIAL ? (int)((u >> 20) % 41) - 20 : 0);
    return ldexpf((float)(128 + (u >> 32) % 128) / 128.0f, e);
}

/* Bytes of row r of a generated operand: element values from (key, r * elems + i), or for a pooled
 * tensor a copy from the pool at a row-keyed offset. kind 0: packed E2M1 bytes, 1: E4M3, 2: BF16. */
typedef struct {
    int kind;
    moects_data data;
    int64_t row_bytes;
    uint64_t key, koff;
    const uint8_t *pool;
    int64_t pool_bytes;
} row_gen;

static void gen_row(const row_gen *g, int64_t r, uint8_t *row)
{
    if (g->pool) {
        int64_t step = g->kind == 2 ? 2 : 1, slots = (g->pool_bytes - g->row_bytes) / step + 1;
        memcpy(row, g->pool + (int64_t)(moects__draw(g->koff, (uint64_t)r) % (uint64_t)slots) * step, (size_t)g->row_bytes);
        return;
    }
    uint64_t base = (uint64_t)r * (uint64_t)g->row_bytes;
    if (g->kind == 0) {
        for (int64_t i = 0; i < g->row_bytes; i++) row[i] = (uint8_t)(moects__draw(g->key, (base + (uint64_t)i) / 8) >> (8 * ((base + (uint64_t)i) % 8)));
    } else if (g->kind == 1) {
        for (int64_t i = 0; i < g->row_bytes; i++) row[i] = e4m3_value(g->data, moects__draw(g->key, base + (uint64_t)i));
    } else {
        for (int64_t i = 0; i < g->row_bytes / 2; i++) {
            uint16_t v = moects__bf16_input(g->data, moects__draw(g->key, base / 2 + (uint64_t)i), i);
            memcpy(row + 2 * i, &v, 2);
        }
    }
}

/* A pool of valid values for a big operand (NULL pool_bytes 0 when it is small). */
static uint8_t *gen_pool(row_gen *g, int64_t rows, int64_t pool_min, uint64_t kpool)
{
    g->pool = NULL;
    g->pool_bytes = 0;
    if (rows * g->row_bytes <= pool_min) return NULL;
    int64_t P = POOL_ELEMS > 2 * g->row_bytes ? POOL_ELEMS : 2 * g->row_bytes;
    uint8_t *p = malloc((size_t)P);
    if (!p) return NULL;
    row_gen flat = *g;
    flat.key = kpool;
    flat.row_bytes = P;
    gen_row(&flat, 0, p);
    g->pool = p;
    g->pool_bytes = P;
    return p;
}

/* Poison for a row a kernel must not read: NaN-producing codes (E2M1 has no NaN: the row's scales
 * are NaN instead), E4M3 0x7F/0xFF, BF16 quiet NaNs with random payloads. */
static void poison_row(int kind, uint64_t key, int64_t r, uint8_t *row, int64_t bytes)
{
    for (int64_t i = 0; i < bytes; i++) {
        uint64_t u = moects__draw(key, (uint64_t)r * (uint64_t)bytes + (uint64_t)i);
        if (kind == 0) row[i] = (uint8_t)u;
        else if (kind == 1) row[i] = u & 1 ? 0xff : 0x7f;
        else if (i % 2 == 0) row[i] = (uint8_t)u;                     /* BF16 low byte: payload */
        else row[i] = (uint8_t)(0x7f | (u & 0x80)), row[i - 1] |= 0xc0; /* exponent all ones, quiet bit */
    }
}

/* Scale bytes of one [rows][nkb] block-scale operand in layout l (0 rows: 0). */
static size_t scale_bytes(int64_t rows, int64_t nkb, moects_scale_layout l)
{
    if (!rows) return 0;
    return l == MOECTS_SCALES_SWIZZLED_128X4 ? moects_swizzle_bytes(rows, nkb) : (size_t)rows * (size_t)nkb;
}
static size_t scale_offset(int64_t r, int64_t kb, int64_t nkb, moects_scale_layout l)
{
    return l == MOECTS_SCALES_SWIZZLED_128X4 ? moects__swizzle_offset(r, kb, nkb) : (size_t)(r * nkb + kb);
}

/* Row metadata of the grouped layout from the per-expert counts: rows, row_valid, m_indices /
 * masked_m / expert_offsets. -1/-2 with err as moects__inputs_build. */
static int moe_rows(const moects_case *c, const int64_t *cnt, moects_inputs *in, char *err, size_t errlen)
{
    const int64_t E = c->E;
    int64_t M = 0, maxc = 0;
    for (int64_t e = 0; e < E; e++) {
        if (c->rows == MOECTS_ROWS_CONTIGUOUS) M += (cnt[e] + c->align - 1) / c->align * c->align;
        else M += cnt[e];
        if (cnt[e] > maxc) maxc = cnt[e];
    }
    if (c->rows == MOECTS_ROWS_MASKED) M = maxc ? (maxc + 127) / 128 * 128 : 128; /* max_m as engines allocate */
    in->mg.M = M;
    in->rows = c->rows == MOECTS_ROWS_MASKED ? E * M : M;
    if (in->rows > INT32_MAX) {
        snprintf(err, errlen, "case %s: rows: %lld rows do not fit m_indices (int32)", c->id, (long long)in->rows);
        return -1;
    }
    int rc;
    if ((rc = moects__input_alloc(in, MOECTS_MG_M_INDICES, "m_indices",
                           c->rows == MOECTS_ROWS_CONTIGUOUS ? (size_t)M * 4 : 0, c->id, err, errlen)) ||
        (rc = moects__input_alloc(in, MOECTS_MG_MASKED_M, "masked_m", c->rows == MOECTS_ROWS_MASKED ? (size_t)E * 4 : 0,
                           c->id, err, errlen)) ||
        (rc = moects__input_alloc(in, MOECTS_MG_EXPERT_OFFSETS, "expert_offsets",
                           c->rows == MOECTS_ROWS_OFFSETS ? (size_t)(E + 1) * 8 : 0, c->id, err, errlen)))
        return rc;
    in->row_valid = calloc((size_t)in->rows + 1, 1);
    in->row_expert = malloc(((size_t)in->rows + 1) * sizeof *in->row_expert);
    if (!in->row_valid || !in->row_expert) {
        snprintf(err, errlen, "case %s: " MOECTS_HOST_OOM " (row mask)", c->id);
        return -2;
    }
    int32_t *mi = in->t[MOECTS_MG_M_INDICES].host, *mm = in->t[MOECTS_MG_MASKED_M].host;
    int64_t *off = in->t[MOECTS_MG_EXPERT_OFFSETS].host;
    int64_t r = 0;
    if (off) off[0] = 0;
    for (int64_t e = 0; e < E; e++) {
        if (c->rows == MOECTS_ROWS_MASKED) {
            mm[e] = (int32_t)cnt[e];
            memset(in->row_valid + e * M, 1, (size_t)cnt[e]);
            continue;
        }
        int64_t g = c->rows == MOECTS_ROWS_CONTIGUOUS ? (cnt[e] + c->align - 1) / c->align * c->align : cnt[e];
        for (int64_t i = 0; i < g; i++, r++) {
            if (mi) mi[r] = i < cnt[e] ? (int32_t)e : -1;
            in->row_valid[r] = i < cnt[e];
        }
        if (off) off[e + 1] = r;
    }
    for (int64_t i = 0; i < in->rows; i++) in->valid_rows += in->row_valid[i];
    for (int64_t e = 0, i = 0; e < E; e++) { /* masked: E blocks of M rows; else each expert's rows in turn */
        int64_t g = c->rows == MOECTS_ROWS_MASKED ? M
                    : c->rows == MOECTS_ROWS_CONTIGUOUS ? (cnt[e] + c->align - 1) / c->align * c->align : cnt[e];
        for (int64_t j = 0; j < g; j++, i++) in->row_expert[i] = in->row_valid[i] ? (int32_t)e : -1;
    }
    return 0;
}

/* Where A's row r and its scales sit (moe_a's layout): kind 0 FP4 codes, 1 E4M3, 2 BF16 (no scales);
 * FP4 scales per block of its format in scale_layout per expert block (masked) or for all rows
 * (contiguous; offsets: linear); W4A8 [rows][ceil(K/a_scale_block)] linear, UE8M0 or FP32 (esz 4). */
typedef struct {
    int kind;
    int64_t row_bytes, nkb, grows, groups;
    moects_scale_layout l;
    size_t esz, gbytes; /* bytes of a scale, of one group's scales */
} a_layout;

static a_layout a_layout_of(const moects_moe_gemm_shape *s, int64_t rows)
{
    const int64_t K = s->K;
    const int fp4 = s->format == MOECTS_MOE_MXFP4 || s->format == MOECTS_MOE_NVFP4;
    a_layout g = {.kind = fp4 ? 0 : s->format == MOECTS_MOE_W4A8 ? 1 : 2};
    g.row_bytes = fp4 ? (K + 1) / 2 : g.kind == 1 ? K : 2 * K;
    const int64_t blk = fp4 ? moects_fp4_block(s->b_format) : s->a_scale_block;
    g.nkb = g.kind == 2 ? 0 : (K + blk - 1) / blk;
    g.l = fp4 && s->rows != MOECTS_ROWS_OFFSETS ? s->scale_layout : MOECTS_SCALES_LINEAR;
    g.groups = s->rows == MOECTS_ROWS_MASKED ? s->E : 1, g.grows = rows / g.groups;
    g.esz = g.kind == 1 && s->a_scale_f32 ? 4 : 1;
    g.gbytes = g.kind == 2 ? 0 : scale_bytes(g.grows, g.nkb, g.l) * g.esz;
    return g;
}

/* Byte offset of A's scale (row r, K-block kb) in sa. */
static size_t a_scale_at(const a_layout *g, int64_t r, int64_t kb)
{
    return (size_t)(r / g->grows) * g->gbytes + scale_offset(r % g->grows, kb, g->nkb, g->l) * g->esz;
}

/* A: codes (or E4M3, BF16) of valid rows from the data mode, poison in the others; its scales. */
static int moe_a(const moects_case *c, uint64_t seed, int64_t pool_min, moects_inputs *in, char *err, size_t errlen)
{
    const moects_moe_gemm_shape *s = &in->mg;
    const int64_t K = s->K, rows = in->rows;
    const a_layout al = a_layout_of(s, rows);
    int fp4 = al.kind == 0, kind = al.kind;
    int64_t row_bytes = al.row_bytes;
    int rc = moects__input_alloc(in, MOECTS_MG_A, "a", (size_t)rows * (size_t)row_bytes, c->id, err, errlen);
    if (rc) return rc;
    uint8_t *a = in->t[MOECTS_MG_A].host;
    moects_data d = c->data == MOECTS_DATA_NAN ? MOECTS_DATA_EXACT : c->data; /* NaN data: expert 0's B scales */
    row_gen g = {kind, d, row_bytes, moects__input_key(seed, c->id, "a"), moects__input_key(seed, c->id, "a.row_offset"),
                 NULL, 0};
    uint8_t *pool = gen_pool(&g, rows, pool_min, moects__input_key(seed, c->id, "a.pool"));
    uint64_t kpad = moects__input_key(seed, c->id, "a.padding");
    for (int64_t r = 0; r < rows; r++) {
        uint8_t *row = a + (size_t)r * (size_t)row_bytes;
        if (in->row_valid[r]) gen_row(&g, r, row);
        else poison_row(kind, kpad, r, row, row_bytes);
        if (fp4 && K % 2) row[row_bytes - 1] = (uint8_t)((row[row_bytes - 1] & 0x0f) | 0x70);
    }
    free(pool);
    if (kind == 2) return 0; /* W4A16: no A scale */

    const int64_t nkb = al.nkb;
    const size_t bytes = al.gbytes * (size_t)al.groups;
    if ((rc = moects__input_alloc(in, MOECTS_MG_SA, "sa", bytes, c->id, err, errlen))) return rc;
    uint8_t *sa = in->t[MOECTS_MG_SA].host;
    if (sa) memset(sa, 0xff, bytes); /* swizzle padding: NaN */
    uint64_t ks = moects__input_key(seed, c->id, "sa");
    moects_fp4_format sf = fp4 ? s->b_format : MOECTS_FP4_MXFP4;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t kb = 0; kb < nkb; kb++) {
            uint64_t u = moects__draw(ks, (uint64_t)(r * nkb + kb));
            size_t o = a_scale_at(&al, r, kb);
            if (al.esz == 4) {
                float v = in->row_valid[r] ? f32_scale_value(d, u) : moects__f32_bits(0x7fc00000u | (uint32_t)(u & 0xffff));
                memcpy(sa + o, &v, 4);
            } else {
                sa[o] = in->row_valid[r] ? moects__fp4_scale_code(sf, d, u) : 0xff;
            }
        }
    return 0;
}

/* B [E][N][ceil(K/2)] codes, per-expert block scales (0xFF in swizzle padding), alpha and the
 * global scales. */
static int moe_b(const moects_case *c, uint64_t seed, int64_t pool_min, moects_inputs *in, char *err, size_t errlen)
{
    const moects_moe_gemm_shape *s = &in->mg;
    const int64_t E = s->E, N = s->N, K = s->K, kbytes = (K + 1) / 2;
    const int64_t blk = moects_fp4_block(s->b_format), nkb = (K + blk - 1) / blk;
    size_t ebytes = scale_bytes(N, nkb, s->scale_layout);
    int nv = s->format == MOECTS_MOE_NVFP4, w16nv = s->format == MOECTS_MOE_W4A16 && s->b_format == MOECTS_FP4_NVFP4;
    int rc;
    if ((rc = moects__input_alloc(in, MOECTS_MG_B, "b", (size_t)(E * N) * (size_t)kbytes, c->id, err, errlen)) ||
        (rc = moects__input_alloc(in, MOECTS_MG_SB, "sb", ebytes * (size_t)E, c->id, err, errlen)) ||
        (rc = moects__input_alloc(in, MOECTS_MG_ALPHA, "alpha", (size_t)E * 4, c->id, err, errlen)) ||
        (rc = moects__input_alloc(in, MOECTS_MG_GS_A, "gs_a", nv ? (size_t)E * 4 : 0, c->id, err, errlen)) ||
        (rc = moects__input_alloc(in, MOECTS_MG_GS_B, "gs_b", nv || w16nv ? (size_t)E * 4 : 0, c->id, err, errlen)))
        return rc;
    uint8_t *b = in->t[MOECTS_MG_B].host, *sb = in->t[MOECTS_MG_SB].host;
    row_gen g = {0, c->data, kbytes, moects__input_key(seed, c->id, "b"), moects__input_key(seed, c->id, "b.row_offset"),
                 NULL, 0};
    uint8_t *pool = gen_pool(&g, E * N, pool_min, moects__input_key(seed, c->id, "b.pool"));
    for (int64_t r = 0; r < E * N; r++) {
        uint8_t *row = b + (size_t)r * (size_t)kbytes;
        gen_row(&g, r, row);
        if (K % 2) row[kbytes - 1] = (uint8_t)((row[kbytes - 1] & 0x0f) | 0x70);
    }
    free(pool);
    if (sb) memset(sb, 0xff, ebytes * (size_t)E);
    uint64_t ks = moects__input_key(seed, c->id, "sb");
    /* NaN data (bug-reports.md row 22): only expert 0's scales hold NaNs, its first byte among them;
     * every other expert's output must stay what exact_v1 says */
    for (int64_t e = 0; e < E; e++) {
        moects_data d = c->data == MOECTS_DATA_NAN && e > 0 ? MOECTS_DATA_EXACT : c->data;
        for (int64_t n = 0; n < N; n++)
            for (int64_t kb = 0; kb < nkb; kb++)
                sb[(size_t)e * ebytes + scale_offset(n, kb, nkb, s->scale_layout)] =
                    moects__fp4_scale_code(s->b_format, d, moects__draw(ks, (uint64_t)((e * N + n) * nkb + kb)));
    }
    if (c->data == MOECTS_DATA_NAN && N && nkb) sb[0] = 0xff;
    /* alpha: 1, or from per-expert global scales 448*6/amax, amax in [1/16, 256] (FP32 ops) */
    float *alpha = in->t[MOECTS_MG_ALPHA].host, *gsa = in->t[MOECTS_MG_GS_A].host, *gsb = in->t[MOECTS_MG_GS_B].host;
    uint64_t kg = moects__input_key(seed, c->id, "global_scale");
    for (int64_t e = 0; e < E; e++) {
        float amax_a = (float)(1 + moects__draw(kg, (uint64_t)(2 * e)) % 4096) / 16.0f;
        float amax_b = (float)(1 + moects__draw(kg, (uint64_t)(2 * e + 1)) % 4096) / 16.0f;
        if (gsb) gsb[e] = 448.0f * 6.0f / amax_b;
        if (gsa) gsa[e] = 448.0f * 6.0f / amax_a;
        if (nv) {
            float prod = gsa[e] * gsb[e];
            alpha[e] = 1.0f / prod;
        } else {
            alpha[e] = w16nv ? 1.0f / gsb[e] : 1.0f;
        }
    }
    return 0;
}

static int mg_build(const moects_case *c, uint64_t seed, int64_t pool_min, moects_inputs *in, char *err,
                    size_t errlen)
{
    const char *id = c->id;
#define BAD(...) do { snprintf(err, errlen, __VA_ARGS__); return -1; } while (0)
    if (c->E < 1 || c->E > INT32_MAX / 2) BAD("case %s: E: out of range (%lld)", id, (long long)c->E);
    if (c->N < 0 || c->K < 1) BAD("case %s: N/K: N %lld, K %lld (K >= 1)", id, (long long)c->N, (long long)c->K);
    if (c->moe_format < MOECTS_MOE_MXFP4 || c->moe_format > MOECTS_MOE_W4A16) BAD("case %s: moe_format: unknown", id);
    if (c->rows < MOECTS_ROWS_CONTIGUOUS || c->rows > MOECTS_ROWS_OFFSETS) BAD("case %s: rows: unknown", id);
    if (c->rows == MOECTS_ROWS_CONTIGUOUS ? c->align < 1 : c->align != 1)
        BAD("case %s: align: %lld (contiguous: >= 1; else 1)", id, (long long)c->align);
    if (c->moe_format == MOECTS_MOE_W4A8 && c->a_scale_block != 128 && c->a_scale_block != 32)
        BAD("case %s: a_scale_block: %lld (W4A8: 128 or 32)", id, (long long)c->a_scale_block);
    if (c->b_format != (c->moe_format == MOECTS_MOE_NVFP4 ? MOECTS_FP4_NVFP4 : c->b_format) ||
        (c->moe_format != MOECTS_MOE_W4A16 && c->moe_format != MOECTS_MOE_NVFP4 && c->b_format != MOECTS_FP4_MXFP4))
        BAD("case %s: b_format: %s with %s", id, c->b_format == MOECTS_FP4_NVFP4 ? "nvfp4" : "mxfp4",
            moects__moe_format_name(c->moe_format));
    if (c->data == MOECTS_DATA_NEGZERO) BAD("case %s: data: negzero is defined for fp4_gemm MXFP4 only", id);
    if (c->out_dtype != MOECTS_BF16 && c->out_dtype != MOECTS_F32) BAD("case %s: out_dtype: not bf16/f32", id);
#undef BAD
    in->op = MOECTS_OP_MOE_GEMM;
    moects__moe_case_shape(c, &in->mg); /* M set by moe_rows */
    int64_t *cnt = malloc((size_t)c->E * sizeof *cnt);
    if (!cnt) {
        snprintf(err, errlen, "case %s: " MOECTS_HOST_OOM, id);
        return -2;
    }
    int rc = moects__moe_counts(c, seed, cnt, err, errlen);
    if (!rc) rc = moe_rows(c, cnt, in, err, errlen);
    free(cnt);
    if (!rc) rc = moe_a(c, seed, pool_min, in, err, errlen);
    if (!rc) rc = moe_b(c, seed, pool_min, in, err, errlen);
    if (rc) return rc;
    in->out_dtype = c->out_dtype;
    in->out_elems = in->rows * c->N;
    in->out_bytes = (size_t)in->out_elems * (c->out_dtype == MOECTS_F32 ? 4 : 2);
    return 0;
}

/* ---- batch invariance (moects__op_def.batch) ---- */

/* Each expert's valid rows of in: count cnt[e] and first row first[e] (valid rows of one expert are
 * consecutive in every layout). */
static void expert_rows(const moects_inputs *in, int64_t *cnt, int64_t *first)
{
    for (int64_t r = in->rows - 1; r >= 0; r--)
        if (in->row_valid[r]) cnt[in->row_expert[r]]++, first[in->row_expert[r]] = r;
}

/* The case's A row r (and its scales) into big's row r2. */
static void copy_a_row(const moects_inputs *in, moects_inputs *big, int64_t r, int64_t r2)
{
    const a_layout al = a_layout_of(&in->mg, in->rows), bl = a_layout_of(&big->mg, big->rows);
    const uint8_t *a = in->t[MOECTS_MG_A].host, *sa = in->t[MOECTS_MG_SA].host;
    uint8_t *a2 = big->t[MOECTS_MG_A].host, *sa2 = big->t[MOECTS_MG_SA].host;
    memcpy(a2 + (size_t)(r2 * bl.row_bytes), a + (size_t)(r * al.row_bytes), (size_t)al.row_bytes);
    for (int64_t kb = 0; sa && kb < al.nkb; kb++) memcpy(sa2 + a_scale_at(&bl, r2, kb), sa + a_scale_at(&al, r, kb), al.esz);
}

/* Expert e's cnt[e] rows of the case become 2 cnt[e] + 3 rows of a batch in the same layout, the
 * case's row i of e at the expert's row 2i + 1, the others A rows of the batch seed: every expert
 * (one with no row too) computes beside other rows. B, its scales, alpha and the global scales are
 * in's tensors themselves (moects__input_borrow: in outlives big). */
static int mg_batch(const moects_case *c, uint64_t seed, const moects_inputs *in, moects_inputs *big,
                    moects__batch *b, char *err, size_t errlen)
{
    const int64_t E = c->E;
    int64_t *cnt = calloc((size_t)E * 4 + 1, sizeof *cnt), *first = cnt + E, *cnt2 = cnt + 2 * E, *first2 = cnt + 3 * E;
    b->row_of = malloc(((size_t)in->rows + 1) * sizeof *b->row_of);
    if (!cnt || !b->row_of) return free(cnt), snprintf(err, errlen, "case %s: " MOECTS_HOST_OOM " (batch rows)", c->id), -2;
    expert_rows(in, cnt, first);
    for (int64_t e = 0; e < E; e++) cnt2[e] = 2 * cnt[e] + 3;
    big->op = MOECTS_OP_MOE_GEMM;
    big->mg = in->mg;
    int rc = moe_rows(c, cnt2, big, err, errlen);
    if (!rc) rc = moe_a(c, moects__batch_seed(seed), MOECTS_POOL_MIN_ELEMS, big, err, errlen);
    for (int i = MOECTS_MG_B; i <= MOECTS_MG_GS_B && !rc; i++) moects__input_borrow(big, i, in);
    if (!rc) {
        memset(cnt2, 0, (size_t)E * sizeof *cnt2);
        expert_rows(big, cnt2, first2);
        for (int64_t r = 0; r < in->rows; r++) {
            const int64_t e = in->row_expert[r];
            b->row_of[r] = in->row_valid[r] ? first2[e] + 2 * (r - first[e]) + 1 : -1;
            if (b->row_of[r] >= 0) copy_a_row(in, big, r, b->row_of[r]);
        }
        big->out_dtype = in->out_dtype;
        big->out_elems = big->rows * c->N;
        big->out_bytes = (size_t)big->out_elems * (in->out_dtype == MOECTS_F32 ? 4 : 2);
        b->rows = in->rows, b->n = in->valid_rows, b->n_big = big->valid_rows, b->unit = "rows";
    }
    free(cnt);
    return rc;
}

/* ---- the case ---- */

static void mg_case_shape(const moects_case *c, moects__kshape *s) { moects__moe_case_shape(c, &s->mg); }

/* moects_moe_gemm_shape's fields (include/moects/moects_types.h), enums by name; M -1 unbuilt. */
static json_t *mg_shape_json(const moects_case *c, const moects_inputs *in)
{
    moects_moe_gemm_shape s;
    moects__moe_case_shape(c, &s);
    return json_pack("{sI sI sI sI ss ss ss sI sI sb ss ss ss}", "E", (json_int_t)s.E, "M",
                     (json_int_t)(in ? in->mg.M : -1), "N", (json_int_t)s.N, "K", (json_int_t)s.K, "format",
                     moects__moe_format_name(s.format), "b_format", moects__fp4_format_name(s.b_format), "rows",
                     moects__row_layout_name(s.rows), "align", (json_int_t)s.align, "a_scale_block",
                     (json_int_t)s.a_scale_block, "a_scale_f32", s.a_scale_f32, "scale_layout",
                     moects__scale_layout_name(s.scale_layout), "out_dtype", moects__abi_dtype(s.out_dtype), "gemm",
                     c->gemm);
}

/* W4A16 has no blockwise recipe (DESIGN.md "Grouped MoE GEMM"). */
static int mg_recipes(const moects_case *c, const char **names)
{
    if (c->moe_format == MOECTS_MOE_W4A16) return names[0] = "moe_gemm.exact_v1", 1;
    names[0] = "moe_gemm.blockwise_v1", names[1] = "moe_gemm.exact_v1";
    return 2;
}

/* Its expected valid rows x N x (K+1), plus E*N*K/8 for generating the weights. */
static double mg_cost(const moects_case *c)
{
    return (moects__moe_expected_rows(c) + (double)c->E / 8) * (double)c->N * (double)(c->K + 1);
}

/* A [rows, K] (BF16 at most), B [E, N, K] codes and out [rows, N], rows its expected valid rows. */
static double mg_bytes(const moects_case *c)
{
    const double n = (double)c->N, k = (double)c->K, rows = moects__moe_expected_rows(c);
    return rows * k * 2 + (double)c->E * n * k / 2 + rows * n * (c->out_dtype == MOECTS_F32 ? 4 : 2);
}

static double mg_ref_flops(const moects_case *c) { return 2.0 * moects__moe_expected_rows(c) * (double)c->N * (double)c->K; }

static void mg_shape_key(const moects_case *c, char *dst, size_t cap)
{
    snprintf(dst, cap, "N=%" PRId64 " K=%" PRId64 " E=%" PRId64, c->N, c->K, c->E);
}

static int mg_dims(const moects_case *c, const char *op, char out[3][96])
{
    snprintf(out[0], 96, "%s|N=%" PRId64, op, c->N);
    snprintf(out[1], 96, "%s|K=%" PRId64, op, c->K);
    return 2;
}

/* ---- its inputs ---- */

static const void *mg_shape(const moects_inputs *in) { return &in->mg; }

/* Tensors the format or row layout has none of: NULL. */
static void mg_bind(const moects_inputs *in, void *const ptr[MOECTS_INPUTS_MAX], void *out, moects_op_args *args)
{
    const moects_moe_gemm_shape *s = &in->mg;
    int nv = s->format == MOECTS_MOE_NVFP4, w16 = s->format == MOECTS_MOE_W4A16;
    args->mg.a = ptr[MOECTS_MG_A];
    args->mg.sa = w16 ? NULL : ptr[MOECTS_MG_SA];
    args->mg.b = ptr[MOECTS_MG_B];
    args->mg.sb = ptr[MOECTS_MG_SB];
    args->mg.alpha = ptr[MOECTS_MG_ALPHA];
    args->mg.gs_a = nv ? ptr[MOECTS_MG_GS_A] : NULL;
    args->mg.gs_b = nv || (w16 && s->b_format == MOECTS_FP4_NVFP4) ? ptr[MOECTS_MG_GS_B] : NULL;
    args->mg.m_indices = s->rows == MOECTS_ROWS_CONTIGUOUS ? ptr[MOECTS_MG_M_INDICES] : NULL;
    args->mg.masked_m = s->rows == MOECTS_ROWS_MASKED ? ptr[MOECTS_MG_MASKED_M] : NULL;
    args->mg.expert_offsets = s->rows == MOECTS_ROWS_OFFSETS ? ptr[MOECTS_MG_EXPERT_OFFSETS] : NULL;
    args->mg.d = out;
}

/* A row of A (BF16 at most 2 bytes an element), of B, of a scale. */
static size_t mg_row_bytes(const moects_inputs *in, int i)
{
    const moects_moe_gemm_shape *s = &in->mg;
    if (i < 0) return (size_t)s->N * (s->out_dtype == MOECTS_F32 ? 4 : 2);
    if (i == MOECTS_MG_A) return (size_t)s->K * 2;
    if (i == MOECTS_MG_B) return (size_t)(s->K + 1) / 2;
    return i == MOECTS_MG_SA || i == MOECTS_MG_SB ? 512 : 4;
}

/* t as [rows, inner] of dt, or [E, max_m, inner] for masked rows (moects_moe_gemm_args's A side). */
static void rows_dims(moects_tensor_info *t, const moects_moe_gemm_shape *s, int64_t rows, moects_dtype dt, int64_t inner)
{
    moects__tinfo_2d(t, dt, rows, inner);
    if (s->rows == MOECTS_ROWS_MASKED) t->ndim = 3, t->dims[0] = s->E, t->dims[1] = s->M, t->dims[2] = inner;
}

static void vec(moects_tensor_info *t, moects_dtype dt, int64_t n) { moects__tinfo_2d(t, dt, n, 0), t->ndim = 1; }

static const char *const MG_NAMES[MOECTS_MG_NT] = {"a", "sa", "b", "sb", "alpha", "gs_a", "gs_b",
                                                    "m_indices", "masked_m", "expert_offsets"};

/* Tensor j per moects_moe_gemm_args (include/moects/moects_types.h); 1 when the format and row layout have no
 * such tensor (run() gets NULL). Swizzled scales: their bytes. */
static int mg_describe(const moects_inputs *in, int j, moects_tensor_info *t)
{
    const moects_moe_gemm_shape *s = &in->mg;
    const int64_t E = s->E, N = s->N, K = s->K, g = moects_fp4_block(s->b_format), nkb = (K + g - 1) / g;
    const int fp4 = s->format == MOECTS_MOE_MXFP4 || s->format == MOECTS_MOE_NVFP4;
    const int w4a16 = s->format == MOECTS_MOE_W4A16, nv = s->format == MOECTS_MOE_NVFP4;
    t->name = MG_NAMES[j];
    switch (j) {
    case MOECTS_MG_A: rows_dims(t, s, in->rows, w4a16 ? MOECTS_BF16 : MOECTS__DT_U8, fp4 ? (K + 1) / 2 : K); return 0;
    case MOECTS_MG_SA:
        if (w4a16) return 1;
        if (fp4 && s->rows != MOECTS_ROWS_OFFSETS && s->scale_layout != MOECTS_SCALES_LINEAR) return 0;
        rows_dims(t, s, in->rows, s->a_scale_f32 ? MOECTS_F32 : MOECTS__DT_U8,
                  fp4 ? nkb : (K + s->a_scale_block - 1) / s->a_scale_block);
        return 0;
    case MOECTS_MG_B: moects__tinfo_2d(t, MOECTS__DT_U8, E, N), t->ndim = 3, t->dims[2] = (K + 1) / 2; return 0;
    case MOECTS_MG_SB:
        if (s->scale_layout == MOECTS_SCALES_LINEAR) moects__tinfo_2d(t, MOECTS__DT_U8, E, N), t->ndim = 3, t->dims[2] = nkb;
        else moects__tinfo_2d(t, MOECTS__DT_U8, E, (int64_t)in->t[j].bytes / E);
        return 0;
    case MOECTS_MG_ALPHA: vec(t, MOECTS_F32, E); return 0;
    case MOECTS_MG_GS_A: return nv ? (vec(t, MOECTS_F32, E), 0) : 1;
    case MOECTS_MG_GS_B: return nv || (w4a16 && s->b_format == MOECTS_FP4_NVFP4) ? (vec(t, MOECTS_F32, E), 0) : 1;
    case MOECTS_MG_M_INDICES: return s->rows == MOECTS_ROWS_CONTIGUOUS ? (vec(t, MOECTS_I32, s->M), 0) : 1;
    case MOECTS_MG_MASKED_M: return s->rows == MOECTS_ROWS_MASKED ? (vec(t, MOECTS_I32, E), 0) : 1;
    default: return s->rows == MOECTS_ROWS_OFFSETS ? (vec(t, MOECTS_I64, E + 1), 0) : 1;
    }
}

static void mg_describe_out(const moects_inputs *in, moects_tensor_info *t)
{
    if (in->mg.rows == MOECTS_ROWS_MASKED) t->ndim = 3, t->dims[0] = in->mg.E, t->dims[1] = in->mg.M, t->dims[2] = in->mg.N;
    else t->dims[0] = in->mg.M, t->dims[1] = in->mg.N;
}

/* ---- local cases (issue 32, `moects case add`: harness/run/localcase.c) ---- */

static int enum_at(const char *s, const char *const *names, int n)
{
    for (int i = 0; s && i < n; i++)
        if (!strcmp(s, names[i])) return i;
    return -1;
}

/* A case file's shape (mg_shape_json's fields) into c. Its rows per expert are the captured tensors'
 * (mg_local_shape): until they are read, each expert gets M / E rows (masked: M), the size the memory
 * budget and the first build go by. Returns 1 (a shape whose rows the tensors give), or -1 with err. */
static int mg_shape_parse(const char *path, json_t *sh, moects_case *c, char *err, size_t errlen)
{
    static const char *const fp4[] = {"mxfp4", "nvfp4"}, *const lay[] = {"linear", "swizzled_128x4"};
    const char *f = json_string_value(json_object_get(sh, "format")), *r = json_string_value(json_object_get(sh, "rows"));
    const int bf = enum_at(json_string_value(json_object_get(sh, "b_format")), fp4, 2);
    const int sl = enum_at(json_string_value(json_object_get(sh, "scale_layout")), lay, 2);
    int64_t M = 0;
    if (moects__json_int(path, sh, "E", &c->E, err, errlen) || moects__json_int(path, sh, "M", &M, err, errlen) ||
        moects__json_int(path, sh, "N", &c->N, err, errlen) || moects__json_int(path, sh, "K", &c->K, err, errlen) ||
        moects__json_int(path, sh, "align", &c->align, err, errlen) ||
        moects__json_int(path, sh, "a_scale_block", &c->a_scale_block, err, errlen) ||
        moects__json_dtype(path, "out_dtype", sh, &c->out_dtype, err, errlen))
        return -1;
    const char *bad = !f || moects__moe_format_parse(f, &c->moe_format) ? "format: not mxfp4, nvfp4, w4a8 or w4a16"
                      : !r || moects__row_layout_parse(r, &c->rows) ? "rows: not contiguous, masked or offsets"
                      : bf < 0 ? "b_format: not mxfp4 or nvfp4" : sl < 0 ? "scale_layout: not linear or swizzled_128x4"
                      : c->E < 1 || c->E > INT32_MAX / 2 || M < 0 ? "E/M: out of range" : NULL;
    if (bad) return snprintf(err, errlen, "%s: moects.case: shape.%s", path, bad), -1;
    c->b_format = bf ? MOECTS_FP4_NVFP4 : MOECTS_FP4_MXFP4;
    c->scale_layout = sl ? MOECTS_SCALES_SWIZZLED_128X4 : MOECTS_SCALES_LINEAR;
    c->a_scale_f32 = json_is_true(json_object_get(sh, "a_scale_f32"));
    const char *g = json_string_value(json_object_get(sh, "gemm"));
    snprintf(c->gemm, sizeof c->gemm, "%s", g ? g : "");
    c->E_global = c->E, c->ep_size = 1, c->ep_rank = 0;
    c->n_counts = 1, c->counts[0] = c->rows == MOECTS_ROWS_MASKED ? M : (M + c->E - 1) / c->E;
    return 1;
}

static const moects__src_tensor *src_named(const moects__src_tensor *src, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(src[i].name, name)) return &src[i];
    return NULL;
}

/* Each row's expert (re, -1 padding) of a contiguous m_indices [M]: ids in [-1, E), M a multiple of
 * align, each tile of align rows one expert's (kernels take a tile's expert from its first row), each
 * expert's rows one run (its rows together). -1 with "m_indices...: rule" in err. */
static int rows_contiguous(const moects_case *c, const int32_t *mi, int64_t M, int32_t *re, char *err, size_t errlen)
{
    const int64_t E = c->E, al = c->align;
    if (M % al) return snprintf(err, errlen, "m_indices: %lld rows, not a multiple of align %lld", (long long)M, (long long)al), -1;
    int64_t *next = calloc((size_t)E + 1, sizeof *next); /* 1 + the last row of expert e so far; 0 none */
    if (!next) return snprintf(err, errlen, "m_indices: " MOECTS_HOST_OOM), -2;
    int rc = 0;
    for (int64_t r = 0, te = -1; r < M && !rc; r++) {
        const int32_t v = mi[r];
        if (r % al == 0) te = -1;
        if (v < -1 || v >= E)
            rc = snprintf(err, errlen, "m_indices[%lld] = %d: not in [-1, E %lld)", (long long)r, v, (long long)E);
        else if (v >= 0 && te >= 0 && te != v)
            rc = snprintf(err, errlen, "m_indices[%lld] = %d: the tile of %lld rows from row %lld holds experts %lld and "
                          "%d (align)", (long long)r, v, (long long)al, (long long)(r - r % al), (long long)te, v);
        else if (v >= 0 && next[v] && next[v] != r)
            rc = snprintf(err, errlen, "m_indices[%lld] = %d: expert %d's rows are not one run (its row %lld before)",
                          (long long)r, v, v, (long long)next[v] - 1);
        if (v >= 0 && !rc) te = v, next[v] = r + 1;
        re[r] = v;
    }
    free(next);
    return rc ? -1 : 0;
}

/* Each row's expert (re) of masked_m [E] over max_m rows an expert: 0 <= masked_m[e] <= max_m. */
static int rows_masked(const moects_case *c, const int32_t *mm, int64_t max_m, int32_t *re, char *err, size_t errlen)
{
    for (int64_t e = 0; e < c->E; e++) {
        if (mm[e] < 0 || mm[e] > max_m)
            return snprintf(err, errlen, "masked_m[%lld] = %d: not in [0, max_m %lld] (a's dim 1)", (long long)e, mm[e],
                            (long long)max_m), -1;
        for (int64_t i = 0; i < max_m; i++) re[e * max_m + i] = i < mm[e] ? (int32_t)e : -1;
    }
    return 0;
}

/* Each row's expert (re) of expert_offsets [E + 1]: 0 first, never decreasing (its last, the rows,
 * already checked against INT32_MAX). */
static int rows_offsets(const moects_case *c, const int64_t *off, int32_t *re, char *err, size_t errlen)
{
    if (off[0] != 0) return snprintf(err, errlen, "expert_offsets[0] = %lld: not 0", (long long)off[0]), -1;
    for (int64_t e = 0; e < c->E; e++) {
        if (off[e + 1] < off[e])
            return snprintf(err, errlen, "expert_offsets[%lld] = %lld: below expert_offsets[%lld] = %lld", (long long)e + 1,
                            (long long)off[e + 1], (long long)e, (long long)off[e]), -1;
        for (int64_t r = off[e]; r < off[e + 1]; r++) re[r] = (int32_t)e;
    }
    return 0;
}

/* in's rows from a local case's: re (taken) each row's expert, rows of A and the output, M the
 * shape's (rows; masked: max_m). A, its scales and the row tensor re-sized to them (their bytes are
 * the capture's, copied next); row_valid, valid_rows and the output follow. 0, or -2 out of memory. */
static int rows_apply(const moects_case *c, moects_inputs *in, int32_t *re, int64_t rows, int64_t M, char *err,
                      size_t errlen)
{
    free(in->row_valid), free(in->row_expert);
    in->row_expert = re, in->rows = rows, in->mg.M = M, in->valid_rows = 0, in->pooled = 0;
    if (!(in->row_valid = calloc((size_t)rows + 1, 1))) return snprintf(err, errlen, "a: " MOECTS_HOST_OOM), -2;
    for (int64_t r = 0; r < rows; r++) in->valid_rows += in->row_valid[r] = re[r] >= 0;
    const a_layout al = a_layout_of(&in->mg, rows);
    const int64_t E = c->E;
    const int slot[5] = {MOECTS_MG_A, MOECTS_MG_SA, MOECTS_MG_M_INDICES, MOECTS_MG_MASKED_M, MOECTS_MG_EXPERT_OFFSETS};
    const size_t bytes[5] = {(size_t)rows * (size_t)al.row_bytes, al.gbytes * (size_t)al.groups,
                             c->rows == MOECTS_ROWS_CONTIGUOUS ? (size_t)M * 4 : 0,
                             c->rows == MOECTS_ROWS_MASKED ? (size_t)E * 4 : 0,
                             c->rows == MOECTS_ROWS_OFFSETS ? (size_t)(E + 1) * 8 : 0};
    for (int i = 0; i < 5; i++) {
        moects__guard_free(&in->t[slot[i]].g);
        const int rc = moects__input_alloc(in, slot[i], MG_NAMES[slot[i]], bytes[i], c->id, err, errlen);
        if (rc) return rc;
    }
    in->out_elems = rows * c->N;
    in->out_bytes = (size_t)in->out_elems * (c->out_dtype == MOECTS_F32 ? 4 : 2);
    return 0;
}

/* The row tensor of c's layout (m_indices [M] I32, masked_m [E] I32 beside a [E, max_m, ..],
 * expert_offsets [E + 1] I64) and the rows and M it gives: 1; 0 when it (or masked's a) is not there
 * as the layout wants (the shape check then names it); -1 too many rows for int32 (err). */
static int rows_of_src(const moects_case *c, const moects__src_tensor *src, size_t n, const moects__src_tensor **rt,
                       int64_t *rows, int64_t *M, char *err, size_t errlen)
{
    static const char *const name[] = {"?", "m_indices", "masked_m", "expert_offsets"};
    const int64_t want = c->rows == MOECTS_ROWS_MASKED ? c->E : c->E + 1;
    const moects__src_tensor *a = src_named(src, n, "a"), *t = *rt = src_named(src, n, name[c->rows]);
    if (!t || t->ndim != 1 || strcmp(t->dtype, c->rows == MOECTS_ROWS_OFFSETS ? "I64" : "I32") ||
        t->bytes != (size_t)t->dims[0] * (c->rows == MOECTS_ROWS_OFFSETS ? 8 : 4) ||
        (c->rows != MOECTS_ROWS_CONTIGUOUS && t->dims[0] != want))
        return 0;
    if (c->rows == MOECTS_ROWS_MASKED && (!a || a->ndim != 3 || a->dims[0] != c->E)) return 0;
    *M = c->rows == MOECTS_ROWS_CONTIGUOUS ? t->dims[0] : c->rows == MOECTS_ROWS_MASKED ? a->dims[1] : 0;
    if (c->rows == MOECTS_ROWS_OFFSETS) memcpy(M, (const char *)t->data + 8 * c->E, 8); /* its last: the rows */
    *rows = c->rows == MOECTS_ROWS_MASKED ? c->E * *M : *M;
    if (*M < 0 || *rows > INT32_MAX)
        return snprintf(err, errlen, "%s: %lld rows: not in [0, INT32_MAX] (m_indices and row ids are int32)", t->name,
                        (long long)*rows), -1;
    return 1;
}

/* A local case's rows per expert are its tensors' (moects__op_def.local_shape): m_indices, masked_m or
 * expert_offsets, whichever the row layout has, checked (rows_contiguous, rows_masked, rows_offsets),
 * then A, its scales and the output re-sized to them. 0; -1 with "TENSOR: rule" in err; -2. */
static int mg_local_shape(const moects_case *c, moects_inputs *in, const moects__src_tensor *src, size_t n, char *err,
                          size_t errlen)
{
    const moects__src_tensor *rt = NULL;
    int64_t rows = 0, M = 0;
    const int got = rows_of_src(c, src, n, &rt, &rows, &M, err, errlen);
    if (got <= 0) return got;
    int32_t *re = malloc(((size_t)rows + 1) * sizeof *re);
    void *v = malloc(rt->bytes + 8); /* the row tensor aligned (a file's data need not be) */
    if (!re || !v) return free(re), free(v), snprintf(err, errlen, "%s: " MOECTS_HOST_OOM, rt->name), -2;
    memcpy(v, rt->data, rt->bytes);
    int rc = c->rows == MOECTS_ROWS_CONTIGUOUS ? rows_contiguous(c, v, M, re, err, errlen)
             : c->rows == MOECTS_ROWS_MASKED   ? rows_masked(c, v, M, re, err, errlen)
                                               : rows_offsets(c, v, re, err, errlen);
    free(v);
    if (rc) return free(re), rc;
    return rows_apply(c, in, re, rows, M, err, errlen);
}

/* 1 when scale code u is NaN: UE8M0 0xFF (MXFP4, W4A8's UE8M0 A scales), UE4M3 S.1111.111 (NVFP4). */
static int nan_code(moects_fp4_format f, uint8_t u) { return f == MOECTS_FP4_NVFP4 ? (u & 0x7f) == 0x7f : u == 0xff; }

/* The first NaN A scale of a valid row (the others are padding, never read): its row and block. */
static int nan_a_scale(const moects_inputs *in, int64_t *row, int64_t *kb)
{
    const a_layout al = a_layout_of(&in->mg, in->rows);
    const uint8_t *sa = in->t[MOECTS_MG_SA].host;
    const moects_fp4_format sf = al.kind == 0 ? in->mg.b_format : MOECTS_FP4_MXFP4;
    for (int64_t r = 0; sa && r < in->rows; r++)
        for (int64_t b = 0; in->row_valid[r] && b < al.nkb; b++) {
            const uint8_t *p = sa + a_scale_at(&al, r, b);
            float f = 0;
            if (al.esz == 4) memcpy(&f, p, 4);
            if (al.esz == 4 ? isnan(f) : nan_code(sf, *p)) return *row = r, *kb = b, 1;
        }
    return 0;
}

/* The contract on a local case's values (moects__op_def.check; the rows were checked by
 * mg_local_shape): unless the case's data is nan, no NaN scale in a valid row's A scales or in B's
 * (swizzle padding holds 0xFF and is not read) and finite alpha and global scales. */
static int mg_contract(const moects_case *c, const moects_inputs *in, const char *where, char *err, size_t errlen)
{
    if (c->data == MOECTS_DATA_NAN) return 0;
    const moects_moe_gemm_shape *s = &in->mg;
    const char *dn = moects__data_name(c->data);
    int64_t r, kb;
    if (nan_a_scale(in, &r, &kb))
        return snprintf(err, errlen, "%s: sa[row %lld, block %lld]: a NaN scale (the case's data is %s, not nan)", where,
                        (long long)r, (long long)kb, dn), -1;
    const int64_t blk = moects_fp4_block(s->b_format), nkb = (s->K + blk - 1) / blk;
    const size_t eb = scale_bytes(s->N, nkb, s->scale_layout);
    const uint8_t *sb = in->t[MOECTS_MG_SB].host;
    for (int64_t e = 0; sb && e < s->E; e++)
        for (int64_t n = 0; n < s->N; n++)
            for (kb = 0; kb < nkb; kb++) {
                const uint8_t u = sb[(size_t)e * eb + scale_offset(n, kb, nkb, s->scale_layout)];
                if (nan_code(s->b_format, u))
                    return snprintf(err, errlen, "%s: sb[expert %lld, row %lld, block %lld] = 0x%02x: a NaN scale (the "
                                    "case's data is %s, not nan)", where, (long long)e, (long long)n, (long long)kb, u,
                                    dn), -1;
            }
    for (int j = MOECTS_MG_ALPHA; j <= MOECTS_MG_GS_B; j++)
        for (int64_t e = 0; in->t[j].host && e < s->E; e++) {
            float f;
            memcpy(&f, (const char *)in->t[j].host + 4 * e, 4);
            if (!isfinite(f))
                return snprintf(err, errlen, "%s: %s[%lld] = %g: not finite (the case's data is %s)", where, in->t[j].name,
                                (long long)e, (double)f, dn), -1;
        }
    return 0;
}

/* ---- reference, bound, verdict, perf ---- */

static int mg_reference(const moects_inputs *in, const moects_op_args *a, moects_recipe r)
{
    return moects__ref_moe_gemm(&in->mg, &a->mg, r); /* rows not valid: left as they were */
}

static int mg_reference_pair(const moects_inputs *in, const moects_op_args *a, void *blockwise, void *exact)
{
    return moects__ref_moe_gemm_recipes(&in->mg, &a->mg, blockwise, exact);
}

/* moects__op_def.reference_gpu: gpu/moects_gpuref.h, exact_v1 of MXFP4 and NVFP4 (W4A8, W4A16 and
 * blockwise_v1 take the CPU path). */
static int mg_reference_gpu(const moects_inputs *in, const moects_op_args *a, moects_recipe r, int mode, char *why,
                            size_t whylen)
{
    return moects__gpuref_moe_gemm((moects_gpuref_mode)mode, &in->mg, &a->mg, r, why, whylen);
}

static int mg_bound(const moects_inputs *in, const moects_op_args *a, const moects_acc_class *cls, double *bound,
                    const moects_bound_stats *st)
{
    return moects__ref_moe_gemm_bound_class(&in->mg, &a->mg, cls, bound, st);
}

static int64_t mg_reduction_k(const moects_inputs *in) { return in->mg.K; }

/* (expert, row within the expert's rows, col); padding rows are -1. */
static void mg_geometry(const moects_inputs *in, moects_out_geom *g)
{
    g->axis[0] = "expert";
    g->axis[1] = "row";
    g->axis[2] = "col";
    g->col_extent = "N";
    g->rows = in->rows;
    g->cols = in->mg.N;
    g->row_group = in->row_expert;
    g->groups = in->mg.E;
    g->group_word = "expert";
}

static const char *mg_claim_refused(const moects_case *c, moects_recipe recipe, int bounded)
{
    (void)bounded;
    if (c->moe_format != MOECTS_MOE_W4A16 || recipe != MOECTS_RECIPE_FP4_BLOCKWISE_V1) return NULL;
    return "which W4A16 does not have (BF16 x E2M1 block partials are not exact): declare a bound (or refuse W4A16 "
           "cases)";
}

/* The valid rows of all experts, as one GEMM of the same flops. */
static double mg_perf_bytes(const moects_inputs *in, long mnk[3])
{
    mnk[0] = (long)in->valid_rows, mnk[1] = (long)in->mg.N, mnk[2] = (long)in->mg.K;
    return -1;
}

const moects__op_def moects__op_moe_gemm = {
    .op = MOECTS_OP_MOE_GEMM, .name = "moe_gemm",
    .case_shape = mg_case_shape, .shape_json = mg_shape_json, .shape_parse = mg_shape_parse, .recipes = mg_recipes,
    /* secs_per_cost: 155.5 s over 774 runs of summed cost 2.93e10 of a smoke run fitted on a loaded machine,
     * times 0.25: on 2 quiet cores the smoke run took 134 s where the fit said 600 s (run/progress.c) */
    .secs_per_cost = 1.3e-9,
    .cost = mg_cost, .bytes = mg_bytes, .ref_flops = mg_ref_flops, .shape_key = mg_shape_key, .dims = mg_dims,
    .build = mg_build, .shape = mg_shape, .bind = mg_bind, .row_bytes = mg_row_bytes, .describe = mg_describe,
    .describe_out = mg_describe_out, .scalars = NULL, .check = mg_contract, .local_shape = mg_local_shape,
    .reference = mg_reference, .reference_pair = mg_reference_pair, .reference_gpu = mg_reference_gpu,
    .bound = mg_bound, .reduction_k = mg_reduction_k,
    .geometry = mg_geometry, .claim_refused = mg_claim_refused, .batch = mg_batch,
    .perf_unit = "TFLOP/s", .perf_key = "tflops", .perf_bytes = mg_perf_bytes,
};
