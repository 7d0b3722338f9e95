/* ep_gather.c: the ep_gather op (the MoE combine; DESIGN.md "ep_gather"): its inputs from (seed, case id),
 * its binding, reference, geometry, costs and tensor descriptions, as the op table's entry. */
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

#define ROWS_ALIGN 128              /* rows per expert padded to 128 in x */
#define STALE_ID_EXAMPLE 2071690107 /* vllm issue 41834 */
#define INVALID_WEIGHT_BITS 0x7fc00badu

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
    return moects__f32_bits(bits);
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

/* The case's fields in range, and the EP split (n_local, first_local) into in: 0, or -1 with err. */
static int eg_check(const moects_case *c, moects_inputs *in, char *err, size_t errlen)
{
    const char *id = c->id;
    int64_t T = c->T, k = c->k, H = c->H, E = c->E_global, es = c->ep_size, er = c->ep_rank;
#define BAD(...) return snprintf(err, errlen, __VA_ARGS__), -1
    if (T < 0) BAD("case %s: T: negative (%lld)", id, (long long)T);
    if (k < 1) BAD("case %s: k: must be >= 1 (%lld)", id, (long long)k);
    if (H < 1) BAD("case %s: H: must be >= 1 (%lld)", id, (long long)H);
    if (E < 1 || E > INT32_MAX / 2) BAD("case %s: E_global: out of range (%lld)", id, (long long)E);
    if (es < 1 || er < 0 || er >= es)
        BAD("case %s: ep_rank/ep_size: rank %lld of %lld", id, (long long)er, (long long)es);
    if (es > 1 && !c->has_map) BAD("case %s: has_map: ep_size %lld needs an expert_map", id, (long long)es);
    if (c->id_dtype != MOECTS_I32 && c->id_dtype != MOECTS_I64) BAD("case %s: id_dtype: not int32/int64", id);
    if (c->out_dtype != MOECTS_BF16 && c->out_dtype != MOECTS_F32) BAD("case %s: out_dtype: not bf16/f32", id);
    in->n_local = moects__ep_local_experts(E, c->ep_size, c->ep_rank, &in->first_local);
    int64_t nl = in->n_local;
    int rt = c->routing;
    if (rt < MOECTS_ROUTE_UNIFORM || rt > MOECTS_ROUTE_NO_LOCAL) BAD("case %s: routing: unknown (%d)", id, rt);
    if ((rt == MOECTS_ROUTE_ZERO_EXPERT || rt == MOECTS_ROUTE_ONE_EXPERT) && nl == 0)
        BAD("case %s: routing: rank %lld holds no expert", id, (long long)er);
    if (k > E - (rt == MOECTS_ROUTE_ZERO_EXPERT) - (rt == MOECTS_ROUTE_NO_LOCAL ? nl : 0))
        BAD("case %s: k: %lld distinct experts out of %lld%s", id, (long long)k, (long long)E,
            rt == MOECTS_ROUTE_NO_LOCAL ? " non-local ones" : "");
    if (rt == MOECTS_ROUTE_NO_LOCAL && !c->has_map) BAD("case %s: routing: no-local needs an expert_map", id);
#undef BAD
    return 0;
}

/* topk_ids by the routing rule: distinct experts per token; stale-ids and neg-ids spoil a quarter of
 * the slots and every slot of the last token. 0, or -2 out of memory. */
static int eg_routing(const moects_case *c, uint64_t seed, moects_inputs *in, char *err, size_t errlen)
{
    const int64_t T = c->T, k = c->k, E = c->E_global, nl = in->n_local, fl = in->first_local;
    const int rt = c->routing;
    uint64_t kid = moects__input_key(seed, c->id, "topk_ids");
    uint64_t kbad = moects__input_key(seed, c->id, "topk_ids.invalid");
    uint64_t kch = moects__input_key(seed, c->id, "routing");
    int64_t zero_e = nl ? fl + (int64_t)(moects__draw(kch, 0) % (uint64_t)nl) : -1;
    int64_t hot_e = nl ? fl + (int64_t)(moects__draw(kch, 1) % (uint64_t)nl) : -1;
    int64_t *prev = malloc((size_t)k * sizeof *prev);
    if (!prev) return snprintf(err, errlen, "case %s: " MOECTS_HOST_OOM, c->id), -2;
    int64_t nstale = 0;
    for (int64_t t = 0; t < T; t++) {
        for (int64_t j = 0; j < k; j++) {
            int64_t e;
            if (rt == MOECTS_ROUTE_ONE_EXPERT && j == 0) e = hot_e;
            else
                e = moects__pick_expert(c, kid, prev, t, j, fl,
                                        rt == MOECTS_ROUTE_ZERO_EXPERT ? zero_e
                                        : rt == MOECTS_ROUTE_ONE_EXPERT ? hot_e : -1,
                                        rt == MOECTS_ROUTE_NO_LOCAL ? fl : 0, rt == MOECTS_ROUTE_NO_LOCAL ? fl + nl : 0);
            prev[j] = e;
            uint64_t u = moects__draw(kbad, (uint64_t)t * (uint64_t)k + (uint64_t)j);
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
    return 0;
}

/* The rows of x per bucket: local experts (index = expert_map value / expert id), plus one bucket for
 * valid ids >= E_global without a map (stale ids are valid there: the contract checks i >= 0); each
 * bucket's rows padded to ROWS_ALIGN. cnt[b] valid rows of bucket b at rows [off[b], off[b+1]) of x.
 * input_index and topk_weights of every slot (invalid slots: INT32_MAX and a NaN weight), M_sum and
 * valid_slots into in. 0, or -1 with err. */
static int eg_slots(const moects_case *c, uint64_t seed, int64_t nb, int64_t *cnt, int64_t *off, moects_inputs *in,
                    char *err, size_t errlen)
{
    const int64_t E = c->E_global, k = c->k;
    const size_t TK = (size_t)c->T * (size_t)k;
    const int32_t *map = in->t[MOECTS_EG_MAP].host;
    int32_t *idx = in->t[MOECTS_EG_IDX].host;
    float *w = in->t[MOECTS_EG_W].host;
    for (size_t s = 0; s < TK; s++) {
        int64_t e = get_id(in, (int64_t)s), b = -1;
        if (c->has_map) {
            if (e >= 0 && e < E && map[e] >= 0) b = map[e];
        } else if (e >= 0) {
            b = e < E ? e : E;
        }
        idx[s] = (int32_t)b; /* bucket for now */
        if (b >= 0) cnt[b]++;
    }
    for (int64_t b = 0; b < nb; b++) off[b + 1] = off[b] + (cnt[b] + ROWS_ALIGN - 1) / ROWS_ALIGN * ROWS_ALIGN;
    int64_t M_sum = off[nb];
    if (M_sum > INT32_MAX)
        return snprintf(err, errlen, "case %s: M_sum: %lld rows do not fit input_index (int32)", c->id,
                        (long long)M_sum), -1;
    in->eg.M_sum = M_sum;
    uint64_t kw = moects__input_key(seed, c->id, "topk_weights");
    int64_t valid = 0;
    memset(cnt, 0, (size_t)nb * sizeof *cnt);
    for (size_t s = 0; s < TK; s++) {
        int64_t b = idx[s];
        if (b < 0) {
            idx[s] = INT32_MAX;
            w[s] = moects__f32_bits(INVALID_WEIGHT_BITS);
        } else {
            idx[s] = (int32_t)(off[b] + cnt[b]++);
            w[s] = weight_value(c->data, moects__draw(kw, s), (int64_t)s / k);
            valid++;
        }
    }
    in->valid_slots = valid;
    return 0;
}

/* x: row r is valid iff r - off[b] < cnt[b] for its bucket b; padding rows hold garbage (pooled:
 * all ones). 0, or -2 out of memory. */
static int eg_x(const moects_case *c, uint64_t seed, int64_t pool_min, int64_t nb, const int64_t *cnt,
                const int64_t *off, moects_inputs *in, char *err, size_t errlen)
{
    const int64_t H = c->H, M_sum = in->eg.M_sum;
    int rc = moects__input_alloc(in, MOECTS_EG_X, "x", (size_t)M_sum * (size_t)H * 2, c->id, err, errlen);
    if (rc) return rc;
    uint16_t *x = in->t[MOECTS_EG_X].host;
    uint64_t kx = moects__input_key(seed, c->id, "x"), kpad = moects__input_key(seed, c->id, "x.padding");
    in->pooled = M_sum * H > pool_min;
    uint16_t *pool = NULL;
    int64_t P = 0;
    if (in->pooled) {
        P = POOL_ELEMS > 2 * H ? POOL_ELEMS : 2 * H;
        if (!(pool = malloc((size_t)P * 2))) return snprintf(err, errlen, "case %s: " MOECTS_HOST_OOM " (pool)", c->id), -2;
        uint64_t kp = moects__input_key(seed, c->id, "x.pool");
        for (int64_t i = 0; i < P; i++) pool[i] = moects__bf16_input(c->data, moects__draw(kp, (uint64_t)i), i);
    }
    uint64_t koff = moects__input_key(seed, c->id, "x.row_offset");
    for (int64_t b = 0; b < nb; b++) {
        for (int64_t r = off[b]; r < off[b + 1]; r++) {
            uint16_t *row = x + (size_t)r * (size_t)H;
            int is_pad = r - off[b] >= cnt[b];
            if (in->pooled) {
                if (is_pad) memset(row, 0xff, (size_t)H * 2);
                else memcpy(row, pool + moects__draw(koff, (uint64_t)r) % (uint64_t)(P - H + 1), (size_t)H * 2);
            } else {
                for (int64_t d = 0; d < H; d++) {
                    uint64_t i = (uint64_t)r * (uint64_t)H + (uint64_t)d;
                    row[d] = is_pad ? pad_value(moects__draw(kpad, i))
                                    : moects__bf16_input(c->data, moects__draw(kx, i), d);
                }
            }
        }
    }
    free(pool);
    return 0;
}

/* adversarial data, cancellation: the second valid slot of some tokens reads the negated row of the
 * first with the same weight, so the sum keeps only rounding residues (fma vs mul-add differ) */
static void eg_cancel(const moects_case *c, uint64_t seed, moects_inputs *in)
{
    const int64_t k = c->k, H = c->H;
    const int32_t *idx = in->t[MOECTS_EG_IDX].host;
    uint16_t *x = in->t[MOECTS_EG_X].host;
    float *w = in->t[MOECTS_EG_W].host;
    uint64_t kc = moects__input_key(seed, c->id, "cancel");
    for (int64_t t = 0; t < c->T; t++) {
        if (moects__draw(kc, (uint64_t)t) % 2) continue;
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

/* The inputs of an ep_gather case (moects__op_def.build): expert_map, topk_ids, slots, x. */
static int eg_build(const moects_case *c, uint64_t seed, int64_t pool_min, moects_inputs *in, char *err,
                    size_t errlen)
{
    int rc = eg_check(c, in, err, errlen);
    if (rc) return rc;
    const int64_t E = c->E_global, nl = in->n_local, fl = in->first_local;
    const size_t TK = (size_t)c->T * (size_t)c->k, idsz = c->id_dtype == MOECTS_I64 ? 8 : 4;
    in->eg = (moects_ep_gather_shape){.T = c->T, .k = c->k, .M_sum = 0, .H = c->H, .E_global = E,
                                      .id_dtype = c->id_dtype, .out_dtype = c->out_dtype, .has_expert_map = c->has_map};
    if ((rc = moects__input_alloc(in, MOECTS_EG_IDS, "topk_ids", TK * idsz, c->id, err, errlen)) ||
        (rc = moects__input_alloc(in, MOECTS_EG_W, "topk_weights", TK * 4, c->id, err, errlen)) ||
        (rc = moects__input_alloc(in, MOECTS_EG_IDX, "input_index", TK * 4, c->id, err, errlen)) ||
        (rc = moects__input_alloc(in, MOECTS_EG_MAP, "expert_map", c->has_map ? (size_t)E * 4 : 0, c->id, err, errlen)))
        return rc;
    int32_t *map = in->t[MOECTS_EG_MAP].host;
    if (c->has_map)
        for (int64_t g = 0; g < E; g++) map[g] = (g >= fl && g < fl + nl) ? (int32_t)(g - fl) : -1;
    if ((rc = eg_routing(c, seed, in, err, errlen))) return rc;
    int64_t nb = c->has_map ? nl : E + 1;
    int64_t *cnt = calloc((size_t)nb + 1, sizeof *cnt), *off = calloc((size_t)nb + 1, sizeof *off);
    if (!cnt || !off) rc = (snprintf(err, errlen, "case %s: " MOECTS_HOST_OOM, c->id), -2);
    if (!rc) rc = eg_slots(c, seed, nb, cnt, off, in, err, errlen);
    if (!rc) rc = eg_x(c, seed, pool_min, nb, cnt, off, in, err, errlen);
    free(cnt);
    free(off);
    if (rc) return rc;
    if (c->data == MOECTS_DATA_ADVERSARIAL && !in->pooled) eg_cancel(c, seed, in);
    in->out_dtype = c->out_dtype;
    in->out_elems = c->T * c->H;
    in->out_bytes = (size_t)in->out_elems * (c->out_dtype == MOECTS_F32 ? 4 : 2);
    return 0;
}

/* ---- the case ---- */

static void eg_case_shape(const moects_case *c, moects__kshape *s)
{
    int64_t slots = c->T * c->k, local = moects__ep_local_experts(c->E_global, c->ep_size, c->ep_rank, NULL);
    if (local < 0) local = c->E_global;
    s->eg = (moects_ep_gather_shape){.T = c->T, .k = c->k, .M_sum = slots + 127 * (slots < local ? slots : local),
                                     .H = c->H, .E_global = c->E_global,
                                     .id_dtype = c->id_dtype ? c->id_dtype : MOECTS_I32,
                                     .out_dtype = c->out_dtype ? c->out_dtype : MOECTS_BF16,
                                     .has_expert_map = c->has_map};
}

static json_t *eg_shape_json(const moects_case *c, const moects_inputs *in)
{
    return json_pack("{sI sI sI sI sI ss ss sb si si ss}", "T", (json_int_t)c->T, "k", (json_int_t)c->k, "M_sum",
                     (json_int_t)(in ? in->eg.M_sum : -1), "H", (json_int_t)c->H, "E_global", (json_int_t)c->E_global,
                     "id_dtype", moects__abi_dtype(c->id_dtype), "out_dtype", moects__abi_dtype(c->out_dtype),
                     "has_expert_map", c->has_map, "ep_size", c->ep_size, "ep_rank", c->ep_rank, "routing",
                     moects__routing_name(c->routing));
}

static int eg_shape_parse(const char *path, json_t *sh, moects_case *c, char *err, size_t errlen)
{
    moects_routing r;
    int64_t sz, rk;
    if (moects__json_int(path, sh, "T", &c->T, err, errlen) || moects__json_int(path, sh, "k", &c->k, err, errlen) ||
        moects__json_int(path, sh, "H", &c->H, err, errlen) ||
        moects__json_int(path, sh, "E_global", &c->E_global, err, errlen) ||
        moects__json_int(path, sh, "ep_size", &sz, err, errlen) || moects__json_int(path, sh, "ep_rank", &rk, err, errlen) ||
        moects__json_dtype(path, "id_dtype", sh, &c->id_dtype, err, errlen) ||
        moects__json_dtype(path, "out_dtype", sh, &c->out_dtype, err, errlen))
        return -1;
    const char *rs = json_string_value(json_object_get(sh, "routing"));
    if (moects__routing_parse(rs ? rs : "", &r)) return snprintf(err, errlen, "%s: moects.case: shape.routing: unknown", path), -1;
    c->ep_size = (int)sz, c->ep_rank = (int)rk, c->has_map = json_is_true(json_object_get(sh, "has_expert_map")),
    c->routing = r;
    return 0;
}

static int eg_recipes(const moects_case *c, const char **names)
{
    (void)c;
    names[0] = "ep_gather.fma_v1", names[1] = "ep_gather.muladd_v1", names[2] = "ep_gather.exact_v1";
    return 3;
}

/* T*k*H + T*H element operations; x [T*k, H] BF16 and out [T, H] bytes. */
static double eg_cost(const moects_case *c) { return (double)c->T * (double)(c->k + 1) * (double)c->H; }

static double eg_bytes(const moects_case *c)
{
    return (double)c->T * (double)c->H * ((double)c->k * 2 + (c->out_dtype == MOECTS_F32 ? 4 : 2));
}

static void eg_shape_key(const moects_case *c, char *dst, size_t cap)
{
    snprintf(dst, cap, "H=%" PRId64 " topk=%" PRId64 " E=%" PRId64 " ep=%d%s", c->H, c->k, c->E_global, c->ep_size,
             c->has_map ? " map" : "");
}

static int eg_dims(const moects_case *c, const char *op, char out[3][96])
{
    snprintf(out[0], 96, "%s|H=%" PRId64, op, c->H);
    snprintf(out[1], 96, "%s|topk=%" PRId64, op, c->k);
    snprintf(out[2], 96, "%s|E=%" PRId64, op, c->E_global);
    return 3;
}

/* ---- its inputs ---- */

static const void *eg_shape(const moects_inputs *in) { return &in->eg; }

static void eg_bind(const moects_inputs *in, void *const ptr[MOECTS_INPUTS_MAX], void *out, moects_op_args *args)
{
    args->eg.x = ptr[MOECTS_EG_X];
    args->eg.topk_ids = ptr[MOECTS_EG_IDS];
    args->eg.topk_weights = ptr[MOECTS_EG_W];
    args->eg.input_index = ptr[MOECTS_EG_IDX];
    args->eg.expert_map = in->eg.has_expert_map ? ptr[MOECTS_EG_MAP] : NULL;
    args->eg.out = out;
}

static size_t eg_row_bytes(const moects_inputs *in, int i)
{
    const moects_ep_gather_shape *s = &in->eg;
    if (i < 0) return (size_t)s->H * (s->out_dtype == MOECTS_F32 ? 4 : 2);
    if (i == MOECTS_EG_X) return (size_t)s->H * 2;
    if (i == MOECTS_EG_IDS) return (size_t)s->k * (s->id_dtype == MOECTS_I64 ? 8 : 4);
    if (i == MOECTS_EG_MAP) return 4;
    return (size_t)s->k * 4;
}

static int eg_describe(const moects_inputs *in, int j, moects_tensor_info *t)
{
    const moects_ep_gather_shape *s = &in->eg;
    switch (j) {
    case MOECTS_EG_X: moects__tinfo_2d(t, MOECTS_BF16, s->M_sum, s->H); break;
    case MOECTS_EG_IDS: moects__tinfo_2d(t, s->id_dtype, s->T, s->k); break;
    case MOECTS_EG_W: moects__tinfo_2d(t, MOECTS_F32, s->T, s->k); break;
    case MOECTS_EG_IDX: moects__tinfo_2d(t, MOECTS_I32, s->T, s->k); break;
    default: moects__tinfo_2d(t, MOECTS_I32, s->has_expert_map ? s->E_global : 0, 0), t->ndim = 1;
    }
    return 0;
}

static void eg_describe_out(const moects_inputs *in, moects_tensor_info *t) { t->dims[0] = in->eg.T, t->dims[1] = in->eg.H; }

/* ---- reference, verdict, perf ---- */

static int eg_reference(const moects_inputs *in, const moects_op_args *a, moects_recipe r)
{
    return moects__ref_ep_gather(&in->eg, &a->eg, r);
}

static void eg_geometry(const moects_inputs *in, moects_out_geom *g)
{
    g->axis[0] = "t";
    g->axis[1] = "d";
    g->row_word = "token";
    g->col_extent = "H";
    g->rows = in->eg.T;
    g->cols = in->eg.H;
}

/* GB moved: the valid rows of x read, the output written. */
static double eg_perf_bytes(const moects_inputs *in, long mnk[3])
{
    (void)mnk;
    double out = in->eg.out_dtype == MOECTS_F32 ? 4 : 2;
    return (double)in->valid_slots * (double)in->eg.H * 2 + (double)in->eg.T * (double)in->eg.H * out;
}

/* The contract on outside inputs (moects__op_def.check): topk_ids in [0, E_global) unless the case's
 * routing declares stale or negative ids; expert_map values in [-1, local experts); the input_index of
 * every slot that reads x (its id maps to a local expert) in [0, M_sum). */
static int eg_contract(const moects_case *c, const moects_inputs *in, const char *where, char *err, size_t errlen)
{
    const int64_t E = c->E_global, TK = c->T * c->k, nl = in->n_local, M = in->eg.M_sum;
    const int32_t *map = c->has_map ? in->t[MOECTS_EG_MAP].host : NULL, *idx = in->t[MOECTS_EG_IDX].host;
    const int odd = c->routing == MOECTS_ROUTE_STALE_IDS || c->routing == MOECTS_ROUTE_NEG_IDS;
    for (int64_t e = 0; map && e < E; e++)
        if (map[e] < -1 || map[e] >= nl)
            return snprintf(err, errlen, "%s: expert_map[%lld] = %d: not in [-1, %lld) (the rank's local experts)", where,
                            (long long)e, map[e], (long long)nl), -1;
    for (int64_t s = 0; s < TK; s++) {
        const int64_t e = get_id(in, s);
        if ((e < 0 || e >= E) && !odd)
            return snprintf(err, errlen, "%s: topk_ids[%lld] = %lld: not in [0, E_global %lld) (routing %s declares no "
                            "stale or negative ids)", where, (long long)s, (long long)e, (long long)E,
                            moects__routing_name(c->routing)), -1;
        const int reads = map ? e >= 0 && e < E && map[e] >= 0 : e >= 0;
        if (reads && (idx[s] < 0 || idx[s] >= M))
            return snprintf(err, errlen, "%s: input_index[%lld] = %d: not a row of x [0, M_sum %lld)", where, (long long)s,
                            idx[s], (long long)M), -1;
    }
    return 0;
}

/* A local case's x keeps its own rows (moects__op_def.local_shape): an engine pads each expert's rows
 * its own way, so M_sum is what the captured x holds (input_index is then checked against it). Only a
 * 2-D x of the case's H and at most INT32_MAX rows is taken; any other stays for the shape check. */
static int eg_local_shape(const moects_case *c, moects_inputs *in, const moects__src_tensor *src, size_t n, char *err,
                          size_t errlen)
{
    for (size_t i = 0; i < n; i++) {
        const moects__src_tensor *s = &src[i];
        if (strcmp(s->name, "x") || s->ndim != 2 || s->dims[1] != c->H || s->dims[0] < 0 || s->dims[0] > INT32_MAX ||
            s->dims[0] == in->eg.M_sum)
            continue;
        moects__guard_free(&in->t[MOECTS_EG_X].g);
        in->eg.M_sum = s->dims[0];
        in->pooled = 0;
        return moects__input_alloc(in, MOECTS_EG_X, "x", (size_t)s->dims[0] * (size_t)c->H * 2, c->id, err, errlen);
    }
    return 0;
}

/* moects__op_def.reference_gpu: gpu/moects_gpuref.h, every recipe of the op. */
static int eg_reference_gpu(const moects_inputs *in, const moects_op_args *a, moects_recipe r, int mode, char *why,
                            size_t whylen)
{
    return moects__gpuref_ep_gather((moects_gpuref_mode)mode, &in->eg, &a->eg, r, why, whylen);
}

const moects__op_def moects__op_ep_gather = {
    .op = MOECTS_OP_EP_GATHER, .name = "ep_gather",
    .case_shape = eg_case_shape, .shape_json = eg_shape_json, .shape_parse = eg_shape_parse, .recipes = eg_recipes,
    /* secs_per_cost: 340.5 s over 3248 runs of summed cost 1.89e10 of a smoke run fitted on a loaded machine,
     * times 0.25: on 2 quiet cores the smoke run took 134 s where the fit said 600 s (run/progress.c) */
    .secs_per_cost = 4.5e-9,
    .cost = eg_cost, .bytes = eg_bytes, .ref_flops = NULL, .shape_key = eg_shape_key, .dims = eg_dims,
    .build = eg_build, .shape = eg_shape, .bind = eg_bind, .row_bytes = eg_row_bytes, .describe = eg_describe,
    .describe_out = eg_describe_out, .scalars = NULL, .check = eg_contract, .local_shape = eg_local_shape,
    .reference = eg_reference, .reference_pair = NULL, .reference_gpu = eg_reference_gpu, .bound = NULL, .reduction_k = NULL, .geometry = eg_geometry,
    .claim_refused = NULL,
    .perf_unit = "GB/s", .perf_key = "gbps", .perf_bytes = eg_perf_bytes,
};
