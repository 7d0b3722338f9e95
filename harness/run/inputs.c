/* inputs.c: deterministic case inputs (DESIGN.md "Determinism", "Cases", bug-reports.md).
 * Every value is a function of (seed, case id, tensor name, element index) through SplitMix64,
 * never of a running generator state, so generation order and the rest of the run do not matter.
 * Bulk tensors of large cases are tiled from a random pool (one memcpy per row) to stay fast. */
#include "moects_inputs.h"
#include "moects_guard.h"
#include "moects_harness.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GOLDEN 0x9e3779b97f4a7c15ull
#define POOL_ELEMS (1ll << 20)
#define ROWS_ALIGN 128              /* contiguous grouped layout: rows per expert padded to 128 */
#define STALE_ID_EXAMPLE 2071690107 /* vllm issue 41834 */
#define INVALID_WEIGHT_BITS 0x7fc00badu

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ull;
    }
    return h;
}

uint64_t moects_input_key(uint64_t seed, const char *case_id, const char *tensor)
{
    uint64_t k = mix64(seed + GOLDEN);
    k = mix64(k ^ fnv1a(case_id));
    return mix64(k ^ fnv1a(tensor));
}

uint64_t moects_input_u64(uint64_t key, uint64_t i) { return mix64(key + (i + 1) * GOLDEN); }

static uint64_t draw(uint64_t key, uint64_t i) { return moects_input_u64(key, i); }

size_t moects_swizzle_offset(int64_t r, int64_t kb, int64_t nkb)
{
    int64_t kb4 = (nkb + 3) / 4;
    return (size_t)(((r / 128) * kb4 + kb / 4) * 512 + (r % 32) * 16 + ((r / 32) % 4) * 4 + kb % 4);
}

size_t moects_swizzle_bytes(int64_t rows, int64_t nkb)
{
    return (size_t)(((rows + 127) / 128) * 128) * (size_t)(((nkb + 3) / 4) * 4);
}

void moects_inputs_free(moects_inputs *in)
{
    for (int i = 0; i < in->nt; i++) moects_guard_free(&in->t[i].g);
    free(in->row_valid);
    free(in->row_expert);
    memset(in, 0, sizeof *in);
}

const void *moects_inputs_shape(const moects_inputs *in)
{
    return in->op == MOECTS_OP_EP_GATHER ? (const void *)&in->eg
           : in->op == MOECTS_OP_MOE_GEMM ? (const void *)&in->mg : (const void *)&in->fg;
}

void moects_inputs_bind(const moects_inputs *in, void *const ptr[MOECTS_INPUTS_MAX], void *out,
                        moects_op_args *args)
{
    memset(args, 0, sizeof *args);
    if (in->op == MOECTS_OP_EP_GATHER) {
        args->eg.x = ptr[MOECTS_EG_X];
        args->eg.topk_ids = ptr[MOECTS_EG_IDS];
        args->eg.topk_weights = ptr[MOECTS_EG_W];
        args->eg.input_index = ptr[MOECTS_EG_IDX];
        args->eg.expert_map = in->eg.has_expert_map ? ptr[MOECTS_EG_MAP] : NULL;
        args->eg.out = out;
    } else if (in->op == MOECTS_OP_MOE_GEMM) {
        const moects_moe_gemm_shape *s = &in->mg; /* tensors the format/layout has none of: NULL */
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
    } else {
        args->fg.a = ptr[MOECTS_FG_A];
        args->fg.b = ptr[MOECTS_FG_B];
        args->fg.sa = ptr[MOECTS_FG_SA];
        args->fg.sb = ptr[MOECTS_FG_SB];
        args->fg.alpha = in->alpha;
        args->fg.d = out;
    }
}

/* Allocate tensor slot i (zero bytes: NULL). -2 with a message when memory runs out. */
static int alloc_tensor(moects_inputs *in, int i, const char *name, size_t bytes, const char *id,
                        char *err, size_t errlen)
{
    in->t[i].name = name;
    in->t[i].bytes = bytes;
    in->t[i].host = NULL;
    if (i >= in->nt) in->nt = i + 1;
    if (bytes == 0) return 0;
    /* between guard pages (harness/run/guard.c): a kernel's stray access faults at the access. Shared:
     * a fork for a kernel's call copies none of its page table (the child maps it read-only).
     * Measured against private mappings: 4 KiB pages built ~15% faster (48 ep_gather cases), with
     * MADV_HUGEPAGE the 5.5 GB addr64 case's inputs took 20-28 s instead of ~5 (page allocation). */
    if (moects_guard_alloc(&in->t[i].g, name, bytes, moects_guard_row_bytes(in, i), MOECTS_GUARD_SHARED) == 0)
        in->t[i].host = in->t[i].g.data;
    if (!in->t[i].host) {
        snprintf(err, errlen, "case %s: " MOECTS_HOST_OOM " (%zu bytes for %s)", id, bytes, name);
        return -2;
    }
    return 0;
}

static float f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* ---------------------------------------------------------------- ep_gather ---- */

/* One x element (bf16 bits) of column col for data mode d from a 64-bit draw. negzero (signed
 * zeros and underflow, issue 13): columns col % 4 == 0 hold -0, == 1 negative subnormals, == 2
 * subnormals of either sign, == 3 exact values; with negzero's weights (weight_value) a product
 * of a subnormal underflows to a signed zero, so a token's sum is -0, +0 or the sign of the last
 * product (order), and a denormals-are-zero reading changes the sign. */
static uint16_t x_value(moects_data d, uint64_t u, int64_t col)
{
    uint16_t sign = (uint16_t)((u & 1) << 15);
    if (d == MOECTS_DATA_NEGZERO && col % 4 != 3) {
        uint16_t sub = (uint16_t)(1 + (u >> 1) % 127);
        return col % 4 == 0 ? 0x8000 : col % 4 == 1 ? (uint16_t)(0x8000 | sub) : (uint16_t)(sign | sub);
    }
    if (d == MOECTS_DATA_ADVERSARIAL) {
        uint16_t m = (uint16_t)((u >> 1) & 0x7f);
        unsigned sel = (unsigned)((u >> 8) & 63);
        int e;
        if (sel == 0) e = 0;             /* subnormal (or +-0 when m == 0) */
        else if (sel == 1) e = 1;        /* smallest normal binade, 2^-126 */
        else if (sel == 2) e = 254;      /* largest binade, 2^127 */
        else e = 127 + (int)((u >> 16) % 61) - 30; /* 2^-30 .. 2^30 */
        return (uint16_t)(sign | (uint16_t)(e << 7) | m);
    }
    if (d == MOECTS_DATA_NAN && ((u >> 20) & 511) == 0) {
        static const uint16_t special[4] = {0x7fc1, 0xffc1, 0x7f80, 0xff80}; /* NaN, -NaN, +-Inf */
        return special[(u >> 29) & 3];
    }
    /* exactness-preserving: 4 significant bits, exponents 2^-3 .. 2^3 */
    int e = 127 + (int)((u >> 4) % 7) - 3;
    uint16_t m = (uint16_t)(((u >> 1) & 7) << 4);
    return (uint16_t)(sign | (uint16_t)(e << 7) | m);
}

/* Garbage for padding rows: random bits, half of them with an all-ones exponent (NaN/Inf). */
static uint16_t pad_value(uint64_t u)
{
    uint16_t b = (uint16_t)u;
    return (u >> 16) & 1 ? (uint16_t)(b | 0x7f80) : b;
}

/* One weight of token t. negzero: tokens t % 2 == 0 get small normal weights (1..64) * 2^-36,
 * odd tokens FP32 subnormals (1..64) * 2^-136 (a denormals-are-zero reading drops them). */
static float weight_value(moects_data d, uint64_t u, int64_t t)
{
    if (d == MOECTS_DATA_NEGZERO) return ldexpf((float)(1 + (int)(u % 64)), t % 2 ? -136 : -36);
    if (d != MOECTS_DATA_ADVERSARIAL) return (float)(1 + (int)(u % 64)) / 64.0f; /* k/64 */
    /* full 24-bit significand in [2^-6, 1); 1 in 16 scaled by 2^+-60; 1 in 8 negative */
    uint32_t e = 126 - (uint32_t)((u >> 8) % 6);
    unsigned sel = (unsigned)((u >> 40) & 15);
    if (sel == 0) e += 60;
    if (sel == 1) e -= 60;
    uint32_t bits = (e << 23) | (uint32_t)((u >> 41) & 0x7fffff);
    if (((u >> 4) & 7) == 0) bits |= 0x80000000u;
    return f32_from_bits(bits);
}

static int64_t get_id(const moects_inputs *in, int64_t i)
{
    return in->eg.id_dtype == MOECTS_I64 ? ((const int64_t *)in->t[MOECTS_EG_IDS].host)[i]
                                         : ((const int32_t *)in->t[MOECTS_EG_IDS].host)[i];
}

static void set_id(moects_inputs *in, int64_t i, int64_t v)
{
    if (in->eg.id_dtype == MOECTS_I64)
        ((int64_t *)in->t[MOECTS_EG_IDS].host)[i] = v;
    else
        ((int32_t *)in->t[MOECTS_EG_IDS].host)[i] = (int32_t)v;
}

/* Draw expert j of token t: distinct from the token's earlier slots, not excl, not in
 * [xlo, xhi), per the routing rule. */
static int64_t pick_expert(const moects_case *c, uint64_t key, const int64_t *prev, int64_t t,
                           int64_t j, int64_t first_local, int64_t excl, int64_t xlo, int64_t xhi)
{
    int64_t E = c->E_global;
    for (int a = 0;; a++) {
        uint64_t u = draw(key, ((uint64_t)t * (uint64_t)c->k + (uint64_t)j) * 64 + (uint64_t)a);
        int64_t e;
        if (c->routing == MOECTS_ROUTE_SKEWED) {
            /* Zipf-like: density ~ f^-2/3 near 0, hot experts start at this rank's first */
            double f = (double)(u >> 11) * 0x1p-53;
            e = ((int64_t)((double)E * f * f * f) + first_local) % E;
        } else {
            e = (int64_t)(u % (uint64_t)E);
        }
        if (a >= 64) { /* give up drawing: probe upwards deterministically */
            for (int64_t p = 0; p < E; p++, e = (e + 1) % E) {
                int dup = e == excl || (e >= xlo && e < xhi);
                for (int64_t q = 0; q < j && !dup; q++) dup = prev[q] == e;
                if (!dup) return e;
            }
            return -1; /* unreachable: k <= E - excluded experts is checked */
        }
        int dup = e == excl || (e >= xlo && e < xhi);
        for (int64_t q = 0; q < j && !dup; q++) dup = prev[q] == e;
        if (!dup) return e;
    }
}

static int build_ep_gather(const moects_case *c, uint64_t seed, int64_t pool_min, moects_inputs *in,
                           char *err, size_t errlen)
{
    const char *id = c->id;
    int64_t T = c->T, k = c->k, H = c->H, E = c->E_global;
    int64_t es = c->ep_size, er = c->ep_rank;
#define BAD(...) do { snprintf(err, errlen, __VA_ARGS__); return -1; } while (0)
#define OOM(...) do { snprintf(err, errlen, __VA_ARGS__); return -2; } while (0)
    if (T < 0) BAD("case %s: T: negative (%lld)", id, (long long)T);
    if (k < 1) BAD("case %s: k: must be >= 1 (%lld)", id, (long long)k);
    if (H < 1) BAD("case %s: H: must be >= 1 (%lld)", id, (long long)H);
    if (E < 1 || E > INT32_MAX / 2) BAD("case %s: E_global: out of range (%lld)", id, (long long)E);
    if (es < 1 || er < 0 || er >= es)
        BAD("case %s: ep_rank/ep_size: rank %lld of %lld", id, (long long)er, (long long)es);
    if (es > 1 && !c->has_map) BAD("case %s: has_map: ep_size %lld needs an expert_map", id, (long long)es);
    if (c->id_dtype != MOECTS_I32 && c->id_dtype != MOECTS_I64) BAD("case %s: id_dtype: not int32/int64", id);
    if (c->out_dtype != MOECTS_BF16 && c->out_dtype != MOECTS_F32) BAD("case %s: out_dtype: not bf16/f32", id);
    in->n_local = E / es + (er < E % es ? 1 : 0);
    in->first_local = er * (E / es) + (er < E % es ? er : E % es);
    int64_t nl = in->n_local, fl = in->first_local;
    int rt = c->routing;
    if (rt < MOECTS_ROUTE_UNIFORM || rt > MOECTS_ROUTE_NO_LOCAL) BAD("case %s: routing: unknown (%d)", id, rt);
    if ((rt == MOECTS_ROUTE_ZERO_EXPERT || rt == MOECTS_ROUTE_ONE_EXPERT) && nl == 0)
        BAD("case %s: routing: rank %lld holds no expert", id, (long long)er);
    if (k > E - (rt == MOECTS_ROUTE_ZERO_EXPERT) - (rt == MOECTS_ROUTE_NO_LOCAL ? nl : 0))
        BAD("case %s: k: %lld distinct experts out of %lld%s", id, (long long)k, (long long)E,
            rt == MOECTS_ROUTE_NO_LOCAL ? " non-local ones" : "");
    if (rt == MOECTS_ROUTE_NO_LOCAL && !c->has_map) BAD("case %s: routing: no-local needs an expert_map", id);
    int has_map = c->has_map;

    in->op = MOECTS_OP_EP_GATHER;
    in->eg = (moects_ep_gather_shape){.T = T, .k = k, .M_sum = 0, .H = H, .E_global = E,
                                      .id_dtype = c->id_dtype, .out_dtype = c->out_dtype,
                                      .has_expert_map = has_map};
    size_t idsz = c->id_dtype == MOECTS_I64 ? 8 : 4;
    size_t TK = (size_t)T * (size_t)k;
    int rc;
    if ((rc = alloc_tensor(in, MOECTS_EG_IDS, "topk_ids", TK * idsz, id, err, errlen)) ||
        (rc = alloc_tensor(in, MOECTS_EG_W, "topk_weights", TK * 4, id, err, errlen)) ||
        (rc = alloc_tensor(in, MOECTS_EG_IDX, "input_index", TK * 4, id, err, errlen)) ||
        (rc = alloc_tensor(in, MOECTS_EG_MAP, "expert_map", has_map ? (size_t)E * 4 : 0, id, err, errlen)))
        return rc;
    int32_t *map = in->t[MOECTS_EG_MAP].host;
    if (has_map)
        for (int64_t g = 0; g < E; g++) map[g] = (g >= fl && g < fl + nl) ? (int32_t)(g - fl) : -1;

    /* routing */
    uint64_t kid = moects_input_key(seed, id, "topk_ids");
    uint64_t kbad = moects_input_key(seed, id, "topk_ids.invalid");
    uint64_t kch = moects_input_key(seed, id, "routing");
    int64_t zero_e = nl ? fl + (int64_t)(draw(kch, 0) % (uint64_t)nl) : -1;
    int64_t hot_e = nl ? fl + (int64_t)(draw(kch, 1) % (uint64_t)nl) : -1;
    int64_t *prev = malloc((size_t)k * sizeof *prev);
    if (!prev) OOM("case %s: " MOECTS_HOST_OOM, id);
    int64_t nstale = 0;
    for (int64_t t = 0; t < T; t++) {
        for (int64_t j = 0; j < k; j++) {
            int64_t e;
            if (rt == MOECTS_ROUTE_ONE_EXPERT && j == 0) e = hot_e;
            else
                e = pick_expert(c, kid, prev, t, j, fl,
                                rt == MOECTS_ROUTE_ZERO_EXPERT ? zero_e
                                : rt == MOECTS_ROUTE_ONE_EXPERT ? hot_e : -1,
                                rt == MOECTS_ROUTE_NO_LOCAL ? fl : 0, rt == MOECTS_ROUTE_NO_LOCAL ? fl + nl : 0);
            prev[j] = e;
            uint64_t u = draw(kbad, (uint64_t)t * (uint64_t)k + (uint64_t)j);
            int spoil = (u % 4 == 0) || (T >= 2 && t == T - 1);
            if (rt == MOECTS_ROUTE_STALE_IDS && spoil) {
                if (nstale == 0) e = STALE_ID_EXAMPLE;
                else if (nstale == 1) e = E; /* one past the map: an off-by-one range check reads map[E] */
                else if (c->id_dtype == MOECTS_I64 && (u >> 8) % 2 && nl)
                    e = (1ll << 32) + fl + (int64_t)((u >> 16) % (uint64_t)nl); /* truncates to a local id */
                else
                    e = E + (int64_t)((u >> 16) % (uint64_t)(INT32_MAX - E));
                nstale++;
            } else if (rt == MOECTS_ROUTE_NEG_IDS && spoil) {
                unsigned s = (unsigned)((u >> 8) % 8);
                e = s == 0 ? INT32_MIN : s == 1 ? -2 : -1;
            }
            set_id(in, t * k + j, e);
        }
    }
    free(prev);

    /* buckets: local experts (index = expert_map value / expert id), plus one bucket for valid
     * ids >= E_global without a map (stale ids are valid there: the contract checks i >= 0) */
    int64_t nb = has_map ? nl : E + 1;
    int64_t *cnt = calloc((size_t)nb + 1, sizeof *cnt), *off = calloc((size_t)nb + 1, sizeof *off);
    if (!cnt || !off) {
        free(cnt);
        free(off);
        OOM("case %s: " MOECTS_HOST_OOM, id);
    }
    int32_t *idx = in->t[MOECTS_EG_IDX].host;
    float *w = in->t[MOECTS_EG_W].host;
    for (size_t s = 0; s < TK; s++) {
        int64_t e = get_id(in, (int64_t)s), b = -1;
        if (has_map) {
            if (e >= 0 && e < E && map[e] >= 0) b = map[e];
        } else if (e >= 0) {
            b = e < E ? e : E;
        }
        idx[s] = (int32_t)b; /* bucket for now */
        if (b >= 0) cnt[b]++;
    }
    for (int64_t b = 0; b < nb; b++) off[b + 1] = off[b] + (cnt[b] + ROWS_ALIGN - 1) / ROWS_ALIGN * ROWS_ALIGN;
    int64_t M_sum = off[nb];
    if (M_sum > INT32_MAX) {
        free(cnt);
        free(off);
        BAD("case %s: M_sum: %lld rows do not fit input_index (int32)", id, (long long)M_sum);
    }
    in->eg.M_sum = M_sum;
    uint64_t kw = moects_input_key(seed, id, "topk_weights");
    int64_t valid = 0;
    memset(cnt, 0, (size_t)nb * sizeof *cnt);
    for (size_t s = 0; s < TK; s++) {
        int64_t b = idx[s];
        if (b < 0) {
            idx[s] = INT32_MAX;
            w[s] = f32_from_bits(INVALID_WEIGHT_BITS);
        } else {
            idx[s] = (int32_t)(off[b] + cnt[b]++);
            w[s] = weight_value(c->data, draw(kw, s), (int64_t)s / k);
            valid++;
        }
    }
    in->valid_slots = valid;

    /* x: row r is valid iff r - off[b] < cnt[b] for its bucket b */
    if ((rc = alloc_tensor(in, MOECTS_EG_X, "x", (size_t)M_sum * (size_t)H * 2, id, err, errlen))) {
        free(cnt);
        free(off);
        return rc;
    }
    uint16_t *x = in->t[MOECTS_EG_X].host;
    uint64_t kx = moects_input_key(seed, id, "x"), kpad = moects_input_key(seed, id, "x.padding");
    in->pooled = M_sum * H > pool_min;
    uint16_t *pool = NULL;
    int64_t P = 0;
    if (in->pooled) {
        P = POOL_ELEMS > 2 * H ? POOL_ELEMS : 2 * H;
        pool = malloc((size_t)P * 2);
        if (!pool) {
            free(cnt);
            free(off);
            OOM("case %s: " MOECTS_HOST_OOM " (pool)", id);
        }
        uint64_t kp = moects_input_key(seed, id, "x.pool");
        for (int64_t i = 0; i < P; i++) pool[i] = x_value(c->data, draw(kp, (uint64_t)i), i);
    }
    uint64_t koff = moects_input_key(seed, id, "x.row_offset");
    for (int64_t b = 0; b < nb; b++) {
        for (int64_t r = off[b]; r < off[b + 1]; r++) {
            uint16_t *row = x + (size_t)r * (size_t)H;
            int is_pad = r - off[b] >= cnt[b];
            if (in->pooled) {
                if (is_pad) memset(row, 0xff, (size_t)H * 2);
                else memcpy(row, pool + draw(koff, (uint64_t)r) % (uint64_t)(P - H + 1), (size_t)H * 2);
            } else {
                for (int64_t d = 0; d < H; d++) {
                    uint64_t i = (uint64_t)r * (uint64_t)H + (uint64_t)d;
                    row[d] = is_pad ? pad_value(draw(kpad, i)) : x_value(c->data, draw(kx, i), d);
                }
            }
        }
    }
    free(pool);
    free(cnt);
    free(off);

    /* cancellation: the second valid slot of some tokens reads the negated row of the first
     * with the same weight, so the sum keeps only rounding residues (fma vs mul-add differ) */
    if (c->data == MOECTS_DATA_ADVERSARIAL && !in->pooled) {
        uint64_t kc = moects_input_key(seed, id, "cancel");
        for (int64_t t = 0; t < T; t++) {
            if (draw(kc, (uint64_t)t) % 2) continue;
            int64_t j1 = -1, j2 = -1;
            for (int64_t j = 0; j < k && j2 < 0; j++)
                if (idx[t * k + j] != INT32_MAX) {
                    if (j1 < 0) j1 = j;
                    else j2 = j;
                }
            if (j2 < 0) continue;
            const uint16_t *r1 = x + (size_t)idx[t * k + j1] * (size_t)H;
            uint16_t *r2 = x + (size_t)idx[t * k + j2] * (size_t)H;
            for (int64_t d = 0; d < H; d++) r2[d] = r1[d] ^ 0x8000;
            w[t * k + j2] = w[t * k + j1];
        }
    }
    in->out_dtype = c->out_dtype;
    in->out_elems = T * H;
    in->out_bytes = (size_t)in->out_elems * (c->out_dtype == MOECTS_F32 ? 4 : 2);
    return 0;
#undef BAD
#undef OOM
}

/* ---------------------------------------------------------------- fp4_gemm ---- */

static uint8_t scale_value(moects_fp4_format f, moects_data d, uint64_t u)
{
    unsigned sel = (unsigned)(u & 63);
    if (f == MOECTS_FP4_MXFP4) {
        if (d == MOECTS_DATA_NAN && sel == 0) return 0xff;
        if (d == MOECTS_DATA_ADVERSARIAL && sel < 8) {
            static const uint8_t special[8] = {0, 1, 2, 253, 254, 0, 1, 254};
            return special[sel];
        }
        if (d == MOECTS_DATA_ADVERSARIAL) return (uint8_t)(127 + (int)((u >> 8) % 41) - 20);
        return (uint8_t)(127 + (int)((u >> 8) % 9) - 4); /* 2^-4 .. 2^4 */
    }
    uint8_t m = (uint8_t)((u >> 8) & 7);
    if (d == MOECTS_DATA_NAN && sel == 0) return (u >> 16) & 1 ? 0xff : 0x7f;
    if (d == MOECTS_DATA_ADVERSARIAL) {
        if (sel < 8) return (uint8_t)(1 + (u >> 8) % 7); /* subnormal: 2^-9 .. 7*2^-9 */
        if (sel == 8) return 0x00;                        /* zero scale */
        uint8_t e = (uint8_t)(1 + (u >> 12) % 15);
        if (e == 15 && m == 7) m = 6;                     /* 0x7F is NaN; 0x7E = 448 */
        return (uint8_t)(e << 3 | m);
    }
    return (uint8_t)((4 + (u >> 12) % 7) << 3 | m);       /* normal, 2^-3 .. 15 */
}

/* Codes of one operand, [rows][kbytes] packed; pad nibble of odd K = 0x7 (6.0: caught if read). */
static void fill_codes(uint8_t *p, int64_t rows, int64_t K, uint64_t key, int pooled, uint64_t kpool,
                       uint64_t koff, uint8_t *pool, int64_t P)
{
    int64_t kbytes = (K + 1) / 2;
    if (pooled) {
        for (int64_t i = 0; i < P; i++) pool[i] = (uint8_t)(draw(kpool, (uint64_t)i / 8) >> (8 * (i % 8)));
        for (int64_t r = 0; r < rows; r++)
            memcpy(p + (size_t)r * (size_t)kbytes, pool + draw(koff, (uint64_t)r) % (uint64_t)(P - kbytes + 1),
                   (size_t)kbytes);
    } else {
        size_t n = (size_t)rows * (size_t)kbytes;
        for (size_t i = 0; i < n; i += 8) {
            uint64_t u = draw(key, i / 8);
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

static int build_fp4_gemm(const moects_case *c, uint64_t seed, int64_t pool_min, moects_inputs *in,
                          char *err, size_t errlen)
{
    const char *id = c->id;
    int64_t M = c->M, N = c->N, K = c->K;
#define BAD(...) do { snprintf(err, errlen, __VA_ARGS__); return -1; } while (0)
#define OOM(...) do { snprintf(err, errlen, __VA_ARGS__); return -2; } while (0)
    if (M < 0 || N < 0) BAD("case %s: M/N: negative", id);
    if (K < 1) BAD("case %s: K: must be >= 1 (%lld)", id, (long long)K);
    if (c->format != MOECTS_FP4_MXFP4 && c->format != MOECTS_FP4_NVFP4) BAD("case %s: format: unknown", id);
    if (c->data == MOECTS_DATA_NEGZERO && c->format != MOECTS_FP4_MXFP4)
        BAD("case %s: data: negzero is defined for MXFP4 only", id);
    if (c->scale_layout != MOECTS_SCALES_LINEAR && c->scale_layout != MOECTS_SCALES_SWIZZLED_128X4)
        BAD("case %s: scale_layout: unknown", id);
    if (c->out_dtype != MOECTS_BF16 && c->out_dtype != MOECTS_F32) BAD("case %s: out_dtype: not bf16/f32", id);
    in->op = MOECTS_OP_FP4_GEMM;
    in->fg = (moects_fp4_gemm_shape){.M = M, .N = N, .K = K, .format = c->format,
                                     .scale_layout = c->scale_layout, .out_dtype = c->out_dtype};
    int64_t blk = moects_fp4_block(c->format), nkb = (K + blk - 1) / blk, kbytes = (K + 1) / 2;
    int swz = c->scale_layout == MOECTS_SCALES_SWIZZLED_128X4;
    size_t sa_bytes = swz ? (M ? moects_swizzle_bytes(M, nkb) : 0) : (size_t)M * (size_t)nkb;
    size_t sb_bytes = swz ? (N ? moects_swizzle_bytes(N, nkb) : 0) : (size_t)N * (size_t)nkb;
    int rc;
    if ((rc = alloc_tensor(in, MOECTS_FG_A, "a", (size_t)M * (size_t)kbytes, id, err, errlen)) ||
        (rc = alloc_tensor(in, MOECTS_FG_B, "b", (size_t)N * (size_t)kbytes, id, err, errlen)) ||
        (rc = alloc_tensor(in, MOECTS_FG_SA, "sa", sa_bytes, id, err, errlen)) ||
        (rc = alloc_tensor(in, MOECTS_FG_SB, "sb", sb_bytes, id, err, errlen)))
        return rc;
    in->pooled = (M > N ? M : N) * K > pool_min;
    uint8_t *pool = NULL;
    int64_t P = 0;
    if (in->pooled) {
        P = POOL_ELEMS > 2 * kbytes ? POOL_ELEMS : 2 * kbytes;
        if (!(pool = malloc((size_t)P))) OOM("case %s: " MOECTS_HOST_OOM " (pool)", id);
    }
    uint8_t *a = in->t[MOECTS_FG_A].host, *b = in->t[MOECTS_FG_B].host;
    fill_codes(a, M, K, moects_input_key(seed, id, "a"), in->pooled, moects_input_key(seed, id, "a.pool"),
               moects_input_key(seed, id, "a.row_offset"), pool, P);
    fill_codes(b, N, K, moects_input_key(seed, id, "b"), in->pooled, moects_input_key(seed, id, "b.pool"),
               moects_input_key(seed, id, "b.row_offset"), pool, P);
    free(pool);

    /* logical scales [rows][nkb] */
    uint8_t *ls[2] = {malloc((size_t)M * (size_t)nkb + 1), malloc((size_t)N * (size_t)nkb + 1)};
    if (!ls[0] || !ls[1]) {
        free(ls[0]);
        free(ls[1]);
        OOM("case %s: " MOECTS_HOST_OOM " (scales)", id);
    }
    int64_t rows[2] = {M, N};
    const char *sname[2] = {"sa", "sb"};
    for (int o = 0; o < 2; o++) {
        uint64_t ks = moects_input_key(seed, id, sname[o]);
        for (int64_t i = 0; i < rows[o] * nkb; i++) ls[o][i] = scale_value(c->format, c->data, draw(ks, (uint64_t)i));
    }
    /* MXFP4 adversarial: one A row in 8 has only UE8M0 codes 0 and 1 (2^-127 is an FP32
     * subnormal, 2^-126 the least normal) and one B row in 4 has codes 150..200, so whole outputs
     * hang on subnormal scales: a flush-to-zero build loses them (a few stray subnormal blocks
     * vanish in the rounding of normal sums and would not show it). */
    if (c->format == MOECTS_FP4_MXFP4 && c->data == MOECTS_DATA_ADVERSARIAL) {
        uint64_t kr = moects_input_key(seed, id, "subnormal_rows");
        for (int o = 0; o < 2; o++)
            for (int64_t r = 0; r < rows[o]; r++) {
                uint64_t u = draw(kr, ((uint64_t)o << 62) ^ (uint64_t)r);
                if (u % (o == 0 ? 8 : 4)) continue;
                for (int64_t kb = 0; kb < nkb; kb++)
                    ls[o][r * nkb + kb] = o == 0 ? (uint8_t)((u >> (8 + kb % 48)) & 1)
                                                 : (uint8_t)(150 + (u >> (8 + kb % 40)) % 51);
            }
    }

    if (c->data == MOECTS_DATA_NEGZERO) negzero_rows(c, a, b, ls[0], ls[1]);

    if (c->data == MOECTS_DATA_ADVERSARIAL && !in->pooled) {
        uint8_t *op[2] = {a, b};
        int64_t bb = blk / 2; /* bytes per K-block (blk is even) */
        /* all-zero blocks (+0 and -0 codes) */
        uint64_t kz = moects_input_key(seed, id, "zero_blocks");
        for (int o = 0; o < 2; o++)
            for (int64_t r = 0; r < rows[o]; r++)
                for (int64_t kb = 0; kb < nkb; kb++) {
                    uint64_t u = draw(kz, ((uint64_t)o << 62) ^ ((uint64_t)r * (uint64_t)nkb + (uint64_t)kb));
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
        uint64_t kp = moects_input_key(seed, id, "cancel_pairs");
        for (int64_t kb = 0; kb + 1 < nkb && (kb + 2) * blk <= K; kb += 2) {
            if (draw(kp, (uint64_t)kb) % 2) continue;
            for (int o = 0; o < 2; o++)
                for (int64_t r = 0; r < rows[o]; r++) {
                    uint8_t *p = op[o] + (size_t)r * (size_t)kbytes + kb * bb;
                    for (int64_t q = 0; q < bb; q++) p[bb + q] = o == 0 ? (uint8_t)(p[q] ^ 0x88) : p[q];
                    ls[o][r * nkb + kb + 1] = ls[o][r * nkb + kb];
                }
        }
    }
    /* lay the scales out */
    uint8_t *phys[2] = {in->t[MOECTS_FG_SA].host, in->t[MOECTS_FG_SB].host};
    for (int o = 0; o < 2; o++) {
        if (!phys[o]) continue;
        if (!swz) {
            memcpy(phys[o], ls[o], (size_t)rows[o] * (size_t)nkb);
            continue;
        }
        memset(phys[o], 0xff, moects_swizzle_bytes(rows[o], nkb)); /* padding: 0xFF poison (NaN), never read */
        for (int64_t r = 0; r < rows[o]; r++)
            for (int64_t kb = 0; kb < nkb; kb++) phys[o][moects_swizzle_offset(r, kb, nkb)] = ls[o][r * nkb + kb];
    }
    free(ls[0]);
    free(ls[1]);

    if (c->format == MOECTS_FP4_NVFP4) {
        /* encode-direction global scales 448*6/amax for amax in [1/16, 256], FP32 ops */
        uint64_t kg = moects_input_key(seed, id, "global_scale");
        float amax_a = (float)(1 + draw(kg, 0) % 4096) / 16.0f, amax_b = (float)(1 + draw(kg, 1) % 4096) / 16.0f;
        in->gs_a = 448.0f * 6.0f / amax_a;
        in->gs_b = 448.0f * 6.0f / amax_b;
        float prod = in->gs_a * in->gs_b;
        in->alpha = 1.0f / prod;
    } else {
        in->gs_a = in->gs_b = in->alpha = 1.0f;
    }
    in->out_dtype = c->out_dtype;
    in->out_elems = M * N;
    in->out_bytes = (size_t)in->out_elems * (c->out_dtype == MOECTS_F32 ? 4 : 2);
    return 0;
#undef BAD
#undef OOM
}


/* ---------------------------------------------------------------- moe_gemm ---- */

int moects_moe_counts(const moects_case *c, uint64_t seed, int64_t *cnt, char *err, size_t errlen)
{
    const int64_t E = c->E;
    if (c->n_counts > 0) {
        for (int64_t e = 0; e < E; e++) cnt[e] = c->counts[e % c->n_counts];
        return 0;
    }
    int64_t first = 0, nl = moects_ep_local_experts(c->E_global, c->ep_size, c->ep_rank, &first);
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
                 c->id, (long long)c->T, (long long)c->k, (long long)c->E_global, moects_routing_name(c->routing));
        return -1;
    }
    int64_t *prev = malloc((size_t)c->k * sizeof *prev);
    if (!prev) {
        snprintf(err, errlen, "case %s: " MOECTS_HOST_OOM, c->id);
        return -2;
    }
    uint64_t kid = moects_input_key(seed, c->id, "topk_ids"), kch = moects_input_key(seed, c->id, "routing");
    int64_t zero_e = first + (int64_t)(draw(kch, 0) % (uint64_t)nl), hot_e = first + (int64_t)(draw(kch, 1) % (uint64_t)nl);
    memset(cnt, 0, (size_t)E * sizeof *cnt);
    for (int64_t t = 0; t < c->T; t++)
        for (int64_t j = 0; j < c->k; j++) {
            int64_t e = rt == MOECTS_ROUTE_ONE_EXPERT && j == 0
                            ? hot_e
                            : pick_expert(c, kid, prev, t, j, first,
                                          rt == MOECTS_ROUTE_ZERO_EXPERT ? zero_e
                                          : rt == MOECTS_ROUTE_ONE_EXPERT ? hot_e : -1, 0, 0);
            prev[j] = e;
            if (e >= first && e < first + nl) cnt[e - first]++;
        }
    free(prev);
    return 0;
}

void moects_moe_case_shape(const moects_case *c, moects_moe_gemm_shape *s)
{
    memset(s, 0, sizeof *s);
    if (c->op != MOECTS_OP_MOE_GEMM || c->E < 1) return;
    double rows = moects_moe_expected_rows(c), per = rows / (double)c->E;
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
    if (d == MOECTS_DATA_NAN && (u & 63) == 0) return f32_from_bits(0x7fc00000u);
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
        memcpy(row, g->pool + (int64_t)(draw(g->koff, (uint64_t)r) % (uint64_t)slots) * step, (size_t)g->row_bytes);
        return;
    }
    uint64_t base = (uint64_t)r * (uint64_t)g->row_bytes;
    if (g->kind == 0) {
        for (int64_t i = 0; i < g->row_bytes; i++) row[i] = (uint8_t)(draw(g->key, (base + (uint64_t)i) / 8) >> (8 * ((base + (uint64_t)i) % 8)));
    } else if (g->kind == 1) {
        for (int64_t i = 0; i < g->row_bytes; i++) row[i] = e4m3_value(g->data, draw(g->key, base + (uint64_t)i));
    } else {
        for (int64_t i = 0; i < g->row_bytes / 2; i++) {
            uint16_t v = x_value(g->data, draw(g->key, base / 2 + (uint64_t)i), i);
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
        uint64_t u = draw(key, (uint64_t)r * (uint64_t)bytes + (uint64_t)i);
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
    return l == MOECTS_SCALES_SWIZZLED_128X4 ? moects_swizzle_offset(r, kb, nkb) : (size_t)(r * nkb + kb);
}

/* Row metadata of the grouped layout from the per-expert counts: rows, row_valid, m_indices /
 * masked_m / expert_offsets. -1/-2 with err as moects_inputs_build. */
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
    if ((rc = alloc_tensor(in, MOECTS_MG_M_INDICES, "m_indices",
                           c->rows == MOECTS_ROWS_CONTIGUOUS ? (size_t)M * 4 : 0, c->id, err, errlen)) ||
        (rc = alloc_tensor(in, MOECTS_MG_MASKED_M, "masked_m", c->rows == MOECTS_ROWS_MASKED ? (size_t)E * 4 : 0,
                           c->id, err, errlen)) ||
        (rc = alloc_tensor(in, MOECTS_MG_EXPERT_OFFSETS, "expert_offsets",
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

/* A: codes (or E4M3, BF16) of valid rows from the data mode, poison in the others; its scales. */
static int moe_a(const moects_case *c, uint64_t seed, int64_t pool_min, moects_inputs *in, char *err, size_t errlen)
{
    const moects_moe_gemm_shape *s = &in->mg;
    const int64_t K = s->K, rows = in->rows;
    int fp4 = s->format == MOECTS_MOE_MXFP4 || s->format == MOECTS_MOE_NVFP4;
    int kind = fp4 ? 0 : s->format == MOECTS_MOE_W4A8 ? 1 : 2;
    int64_t row_bytes = fp4 ? (K + 1) / 2 : kind == 1 ? K : 2 * K;
    int rc = alloc_tensor(in, MOECTS_MG_A, "a", (size_t)rows * (size_t)row_bytes, c->id, err, errlen);
    if (rc) return rc;
    uint8_t *a = in->t[MOECTS_MG_A].host;
    moects_data d = c->data == MOECTS_DATA_NAN ? MOECTS_DATA_EXACT : c->data; /* NaN data: expert 0's B scales */
    row_gen g = {kind, d, row_bytes, moects_input_key(seed, c->id, "a"), moects_input_key(seed, c->id, "a.row_offset"),
                 NULL, 0};
    uint8_t *pool = gen_pool(&g, rows, pool_min, moects_input_key(seed, c->id, "a.pool"));
    uint64_t kpad = moects_input_key(seed, c->id, "a.padding");
    for (int64_t r = 0; r < rows; r++) {
        uint8_t *row = a + (size_t)r * (size_t)row_bytes;
        if (in->row_valid[r]) gen_row(&g, r, row);
        else poison_row(kind, kpad, r, row, row_bytes);
        if (fp4 && K % 2) row[row_bytes - 1] = (uint8_t)((row[row_bytes - 1] & 0x0f) | 0x70);
    }
    free(pool);
    if (kind == 2) return 0; /* W4A16: no A scale */

    /* scales: FP4 per block of its format, in scale_layout per expert block (masked) or for all rows
     * (contiguous; offsets: linear); W4A8 [rows][ceil(K/a_scale_block)] linear, UE8M0 or FP32 */
    int64_t blk = fp4 ? moects_fp4_block(s->b_format) : s->a_scale_block, nkb = (K + blk - 1) / blk;
    moects_scale_layout l = fp4 && s->rows != MOECTS_ROWS_OFFSETS ? s->scale_layout : MOECTS_SCALES_LINEAR;
    int64_t groups = s->rows == MOECTS_ROWS_MASKED ? s->E : 1, grows = rows / groups;
    size_t esz = kind == 1 && s->a_scale_f32 ? 4 : 1, gbytes = scale_bytes(grows, nkb, l) * esz;
    if ((rc = alloc_tensor(in, MOECTS_MG_SA, "sa", gbytes * (size_t)groups, c->id, err, errlen))) return rc;
    uint8_t *sa = in->t[MOECTS_MG_SA].host;
    if (sa) memset(sa, 0xff, gbytes * (size_t)groups); /* swizzle padding: NaN */
    uint64_t ks = moects_input_key(seed, c->id, "sa");
    moects_fp4_format sf = fp4 ? s->b_format : MOECTS_FP4_MXFP4;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t kb = 0; kb < nkb; kb++) {
            uint64_t u = draw(ks, (uint64_t)(r * nkb + kb));
            size_t o = (size_t)(r / grows) * gbytes + scale_offset(r % grows, kb, nkb, l) * esz;
            if (esz == 4) {
                float v = in->row_valid[r] ? f32_scale_value(d, u) : f32_from_bits(0x7fc00000u | (uint32_t)(u & 0xffff));
                memcpy(sa + o, &v, 4);
            } else {
                sa[o] = in->row_valid[r] ? scale_value(sf, d, u) : 0xff;
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
    if ((rc = alloc_tensor(in, MOECTS_MG_B, "b", (size_t)(E * N) * (size_t)kbytes, c->id, err, errlen)) ||
        (rc = alloc_tensor(in, MOECTS_MG_SB, "sb", ebytes * (size_t)E, c->id, err, errlen)) ||
        (rc = alloc_tensor(in, MOECTS_MG_ALPHA, "alpha", (size_t)E * 4, c->id, err, errlen)) ||
        (rc = alloc_tensor(in, MOECTS_MG_GS_A, "gs_a", nv ? (size_t)E * 4 : 0, c->id, err, errlen)) ||
        (rc = alloc_tensor(in, MOECTS_MG_GS_B, "gs_b", nv || w16nv ? (size_t)E * 4 : 0, c->id, err, errlen)))
        return rc;
    uint8_t *b = in->t[MOECTS_MG_B].host, *sb = in->t[MOECTS_MG_SB].host;
    row_gen g = {0, c->data, kbytes, moects_input_key(seed, c->id, "b"), moects_input_key(seed, c->id, "b.row_offset"),
                 NULL, 0};
    uint8_t *pool = gen_pool(&g, E * N, pool_min, moects_input_key(seed, c->id, "b.pool"));
    for (int64_t r = 0; r < E * N; r++) {
        uint8_t *row = b + (size_t)r * (size_t)kbytes;
        gen_row(&g, r, row);
        if (K % 2) row[kbytes - 1] = (uint8_t)((row[kbytes - 1] & 0x0f) | 0x70);
    }
    free(pool);
    if (sb) memset(sb, 0xff, ebytes * (size_t)E);
    uint64_t ks = moects_input_key(seed, c->id, "sb");
    /* NaN data (bug-reports.md row 22): only expert 0's scales hold NaNs, its first byte among them;
     * every other expert's output must stay what exact_v1 says */
    for (int64_t e = 0; e < E; e++) {
        moects_data d = c->data == MOECTS_DATA_NAN && e > 0 ? MOECTS_DATA_EXACT : c->data;
        for (int64_t n = 0; n < N; n++)
            for (int64_t kb = 0; kb < nkb; kb++)
                sb[(size_t)e * ebytes + scale_offset(n, kb, nkb, s->scale_layout)] =
                    scale_value(s->b_format, d, draw(ks, (uint64_t)((e * N + n) * nkb + kb)));
    }
    if (c->data == MOECTS_DATA_NAN && N && nkb) sb[0] = 0xff;
    /* alpha: 1, or from per-expert global scales 448*6/amax, amax in [1/16, 256] (FP32 ops) */
    float *alpha = in->t[MOECTS_MG_ALPHA].host, *gsa = in->t[MOECTS_MG_GS_A].host, *gsb = in->t[MOECTS_MG_GS_B].host;
    uint64_t kg = moects_input_key(seed, c->id, "global_scale");
    for (int64_t e = 0; e < E; e++) {
        float amax_a = (float)(1 + draw(kg, (uint64_t)(2 * e)) % 4096) / 16.0f;
        float amax_b = (float)(1 + draw(kg, (uint64_t)(2 * e + 1)) % 4096) / 16.0f;
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

static int build_moe_gemm(const moects_case *c, uint64_t seed, int64_t pool_min, moects_inputs *in, char *err,
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
            moects_moe_format_name(c->moe_format));
    if (c->data == MOECTS_DATA_NEGZERO) BAD("case %s: data: negzero is defined for fp4_gemm MXFP4 only", id);
    if (c->out_dtype != MOECTS_BF16 && c->out_dtype != MOECTS_F32) BAD("case %s: out_dtype: not bf16/f32", id);
#undef BAD
    in->op = MOECTS_OP_MOE_GEMM;
    moects_moe_case_shape(c, &in->mg); /* M set by moe_rows */
    int64_t *cnt = malloc((size_t)c->E * sizeof *cnt);
    if (!cnt) {
        snprintf(err, errlen, "case %s: " MOECTS_HOST_OOM, id);
        return -2;
    }
    int rc = moects_moe_counts(c, seed, cnt, err, errlen);
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

int moects_inputs_build_ex(const moects_case *c, uint64_t seed, int64_t pool_min_elems,
                           moects_inputs *in, char *err, size_t errlen)
{
    memset(in, 0, sizeof *in);
    int rc;
    if (c->op == MOECTS_OP_EP_GATHER) rc = build_ep_gather(c, seed, pool_min_elems, in, err, errlen);
    else if (c->op == MOECTS_OP_FP4_GEMM) rc = build_fp4_gemm(c, seed, pool_min_elems, in, err, errlen);
    else if (c->op == MOECTS_OP_MOE_GEMM) rc = build_moe_gemm(c, seed, pool_min_elems, in, err, errlen);
    else {
        snprintf(err, errlen, "case %s: op: unknown (%d)", c->id, (int)c->op);
        rc = -1;
    }
    if (rc) moects_inputs_free(in);
    return rc;
}

int moects_inputs_build(const moects_case *c, uint64_t seed, moects_inputs *in, char *err, size_t errlen)
{
    return moects_inputs_build_ex(c, seed, MOECTS_POOL_MIN_ELEMS, in, err, errlen);
}
