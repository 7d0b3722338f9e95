/* ep_dispatch_combine.c: the ep_dispatch_combine op (expert-parallel dispatch, expert transform and
 * combine over R ranks; docs/ep_dispatch_combine.md) as the op table's entry: the case's shape, its
 * inputs (every rank's tokens, routing and the EP layout, stacked in rank order), the binding over all
 * ranks, the reference (ref/moects_edc.h), its own judge (received rows per rank in the declared order or
 * as a set, combined outputs bit for bit), and the launch of the kernel as one process a rank
 * (harness/ops/ep_ranks.c). The output buffer: out [T_total, H] bf16, then recv_x [N, H] bf16 (rank r's
 * rows at the reference's recv_first[r]), recv_src [N] int64, recv_count [R] int64 (8-byte aligned). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moects_edc.h"
#include "moects_harness.h"
#include "moects_op.h"
#include "ops_internal.h"

#define INVALID_WEIGHT_BITS 0x7fc00badu /* a NaN: an invalid slot's weight, never to be read */

/* Tokens of rank r: T each; with empty_ranks the odd ranks none and rank 0 one more. */
static int64_t rank_tokens(const moects_case *c, int64_t r)
{
    if (!c->empty_ranks) return c->T;
    return r % 2 ? 0 : c->T + (r == 0);
}

static int64_t total_tokens(const moects_case *c)
{
    int64_t n = 0;
    for (int64_t r = 0; r < c->ep_size; r++) n += rank_tokens(c, r);
    return n;
}

static void ed_case_shape(const moects_case *c, moects__kshape *s)
{
    const int64_t Tt = total_tokens(c);
    s->ed = (moects_ep_dispatch_combine_shape){.world = c->ep_size, .rank = -1, .T = rank_tokens(c, 0),
                                               .T_total = Tt, .H = c->H, .k = c->k, .E = c->E_global,
                                               .recv_cap = Tt * c->k};
}

static json_t *ed_shape_json(const moects_case *c, const moects_inputs *in)
{
    moects__kshape s;
    ed_case_shape(c, &s);
    return json_pack("{sI sI sI sI sI sI sI ss sb}", "world", (json_int_t)c->ep_size, "T", (json_int_t)c->T, "T_total",
                     (json_int_t)s.ed.T_total, "H", (json_int_t)c->H, "k", (json_int_t)c->k, "E", (json_int_t)c->E_global,
                     "recv_cap", (json_int_t)(in ? in->ed.recv_cap : -1), "routing", moects__routing_name(c->routing),
                     "empty_ranks", c->empty_ranks);
}

static int ed_recipes(const moects_case *c, const char **names)
{
    (void)c;
    names[0] = "ep_dispatch_combine.fma_v1(order=expert)";
    names[1] = "ep_dispatch_combine.muladd_v1(order=expert)";
    return 2;
}

/* Element operations, and a fixed part for the ranks' processes (a fork and a few barriers each). */
static double ed_cost(const moects_case *c)
{
    return (double)total_tokens(c) * (double)(c->k * 3 + 1) * (double)c->H + 2e5 * (double)c->ep_size;
}

static double ed_bytes(const moects_case *c)
{
    const double Tt = (double)total_tokens(c), H = (double)c->H, k = (double)c->k;
    return Tt * H * 2 * (2 + 3 * k) + Tt * k * 16;
}

static void ed_shape_key(const moects_case *c, char *dst, size_t cap)
{
    snprintf(dst, cap, "H=%" PRId64 " topk=%" PRId64 " E=%" PRId64 " ep=%d", c->H, c->k, c->E_global, c->ep_size);
}

static int ed_dims(const moects_case *c, const char *op, char out[3][96])
{
    snprintf(out[0], 96, "%s|H=%" PRId64, op, c->H);
    snprintf(out[1], 96, "%s|topk=%" PRId64, op, c->k);
    snprintf(out[2], 96, "%s|ep=%d", op, c->ep_size);
    return 3;
}

/* ---- its inputs ---- */

static int ed_check(const moects_case *c, char *err, size_t errlen)
{
#define BAD(...) return snprintf(err, errlen, __VA_ARGS__), -1
    if (c->ep_size < 1 || c->ep_size > MOECTS_ED_MAX_WORLD) BAD("case %s: ep_size: not in [1, %d]", c->id, MOECTS_ED_MAX_WORLD);
    if (c->T < 0 || c->H < 1 || c->k < 1 || c->E_global < c->ep_size || c->E_global > INT32_MAX / 2)
        BAD("case %s: T, H, k or E_global out of range", c->id);
    if (c->k > c->E_global) BAD("case %s: k: %lld distinct experts out of %lld", c->id, (long long)c->k, (long long)c->E_global);
    if (c->routing != MOECTS_ROUTE_UNIFORM && c->routing != MOECTS_ROUTE_ONE_EXPERT && c->routing != MOECTS_ROUTE_NEG_IDS)
        BAD("case %s: routing: %s is not uniform, hot-rank or neg-ids", c->id, moects__routing_name(c->routing));
#undef BAD
    return 0;
}

/* Slot j of global token g, its rank's local token t of T_r: a distinct uniform expert; hot-rank: the
 * last rank's experts in turn (slots past its count -1); neg-ids: a quarter of the slots and every slot
 * of a rank's last token (T_r >= 2) -1. prev: the token's earlier slots. */
static int64_t slot_expert(const moects_case *c, const moects_inputs *in, uint64_t kid, uint64_t kbad,
                           const int64_t *prev, int64_t g, int64_t t, int64_t T_r, int64_t j)
{
    const int64_t *ef = in->t[MOECTS_ED_EXPERT_FIRST].host;
    if (c->routing == MOECTS_ROUTE_ONE_EXPERT) {
        const int64_t first = ef[c->ep_size - 1], n = ef[c->ep_size] - first;
        return j < n ? first + (g + j) % n : -1;
    }
    const int64_t e = moects__pick_expert(c, kid, prev, g, j, 0, -1, 0, 0);
    if (c->routing == MOECTS_ROUTE_NEG_IDS) {
        const uint64_t u = moects__draw(kbad, (uint64_t)(g * c->k + j));
        if (u % 4 == 0 || (T_r >= 2 && t == T_r - 1)) return -1;
    }
    return e;
}

/* topk_ids and topk_weights of every token: weights (1..255)/256 (8 significant bits, so a weight
 * applied on the wrong side rounds differently), NaN on invalid slots. 0, or -2 out of memory. */
static int ed_routing(const moects_case *c, uint64_t seed, moects_inputs *in, char *err, size_t errlen)
{
    const int64_t k = c->k, *tf = in->t[MOECTS_ED_TOKEN_FIRST].host;
    int32_t *ids = in->t[MOECTS_ED_IDS].host;
    float *w = in->t[MOECTS_ED_W].host;
    const uint64_t kid = moects__input_key(seed, c->id, "topk_ids"), kbad = moects__input_key(seed, c->id, "topk_ids.invalid"),
                   kw = moects__input_key(seed, c->id, "topk_weights");
    int64_t *prev = malloc((size_t)k * sizeof *prev);
    if (!prev) return snprintf(err, errlen, "case %s: " MOECTS_HOST_OOM, c->id), -2;
    for (int64_t r = 0; r < c->ep_size; r++)
        for (int64_t g = tf[r]; g < tf[r + 1]; g++)
            for (int64_t j = 0; j < k; j++) {
                const int64_t e = slot_expert(c, in, kid, kbad, prev, g, g - tf[r], tf[r + 1] - tf[r], j);
                prev[j] = e;
                ids[g * k + j] = (int32_t)e;
                w[g * k + j] = e < 0 ? moects__f32_bits(INVALID_WEIGHT_BITS)
                                     : (float)(1 + (int)(moects__draw(kw, (uint64_t)(g * k + j)) % 255)) / 256.0f;
            }
    free(prev);
    return 0;
}

/* The EP layout (vLLM's linear split), the token offsets, the transform (+-2^-2 .. +-2^2) and x. */
static void ed_fill(const moects_case *c, uint64_t seed, moects_inputs *in)
{
    int64_t *ef = in->t[MOECTS_ED_EXPERT_FIRST].host, *tf = in->t[MOECTS_ED_TOKEN_FIRST].host;
    for (int r = 0; r <= c->ep_size; r++) {
        ef[r] = c->E_global;
        if (r < c->ep_size) moects__ep_local_experts(c->E_global, c->ep_size, r, &ef[r]);
        tf[r] = r ? tf[r - 1] + rank_tokens(c, r - 1) : 0;
    }
    float *sc = in->t[MOECTS_ED_SCALE].host;
    const uint64_t ks = moects__input_key(seed, c->id, "expert_scale"), kx = moects__input_key(seed, c->id, "x");
    for (int64_t e = 0; e < c->E_global; e++) {
        const uint64_t u = moects__draw(ks, (uint64_t)e);
        sc[e] = ldexpf((u >> 8) % 4 ? 1.0f : -1.0f, (int)(u % 5) - 2);
    }
    uint16_t *x = in->t[MOECTS_ED_X].host;
    for (int64_t i = 0; i < tf[c->ep_size] * c->H; i++)
        x[i] = moects__bf16_input(MOECTS_DATA_EXACT, moects__draw(kx, (uint64_t)i), i % c->H);
}

static void problem_of(const moects_inputs *in, const moects_ep_dispatch_combine_args *a, moects_edc_problem *p)
{
    const moects_ep_dispatch_combine_shape *s = &in->ed;
    *p = (moects_edc_problem){.world = s->world, .T_total = s->T_total, .H = s->H, .k = s->k, .E = s->E,
                              .token_first = a->token_first, .expert_first = a->expert_first, .x = a->x,
                              .topk_ids = a->topk_ids, .topk_weights = a->topk_weights, .expert_scale = a->expert_scale};
}

/* The received rows per rank (the reference's), the output buffer's parts and the shape's caps. */
static int ed_layout(const moects_case *c, moects_inputs *in, char *err, size_t errlen)
{
    moects_edc_problem p;
    moects_op_args a;
    moects__host_args(in, NULL, &a);
    problem_of(in, &a.ed.a, &p);
    if (moects__edc_recv_first(&p, in->ed_recv_first))
        return snprintf(err, errlen, "case %s: the EP layout or token offsets are out of their contract", c->id), -1;
    int64_t cap = 0, N = in->ed_recv_first[c->ep_size];
    for (int r = 0; r < c->ep_size; r++)
        if (in->ed_recv_first[r + 1] - in->ed_recv_first[r] > cap) cap = in->ed_recv_first[r + 1] - in->ed_recv_first[r];
    in->ed.recv_cap = cap;
    in->ed_off_recv_x = (size_t)(in->ed.T_total * c->H) * 2;
    in->ed_off_recv_src = (in->ed_off_recv_x + (size_t)(N * c->H) * 2 + 7) / 8 * 8;
    in->ed_off_recv_count = in->ed_off_recv_src + (size_t)N * 8;
    in->out_bytes = in->ed_off_recv_count + (size_t)c->ep_size * 8;
    in->out_dtype = MOECTS_BF16;
    in->out_elems = (int64_t)(in->out_bytes / 2);
    return 0;
}

static int ed_build(const moects_case *c, uint64_t seed, int64_t pool_min, moects_inputs *in, char *err, size_t errlen)
{
    (void)pool_min;
    int rc = ed_check(c, err, errlen);
    if (rc) return rc;
    moects__kshape ks;
    ed_case_shape(c, &ks);
    in->ed = ks.ed;
    in->op = MOECTS_OP_EP_DISPATCH_COMBINE;
    const size_t Tt = (size_t)in->ed.T_total, R1 = (size_t)c->ep_size + 1, TK = Tt * (size_t)c->k;
    if ((rc = moects__input_alloc(in, MOECTS_ED_X, "x", Tt * (size_t)c->H * 2, c->id, err, errlen)) ||
        (rc = moects__input_alloc(in, MOECTS_ED_IDS, "topk_ids", TK * 4, c->id, err, errlen)) ||
        (rc = moects__input_alloc(in, MOECTS_ED_W, "topk_weights", TK * 4, c->id, err, errlen)) ||
        (rc = moects__input_alloc(in, MOECTS_ED_EXPERT_FIRST, "expert_first", R1 * 8, c->id, err, errlen)) ||
        (rc = moects__input_alloc(in, MOECTS_ED_SCALE, "expert_scale", (size_t)c->E_global * 4, c->id, err, errlen)) ||
        (rc = moects__input_alloc(in, MOECTS_ED_TOKEN_FIRST, "token_first", R1 * 8, c->id, err, errlen)))
        return rc;
    ed_fill(c, seed, in);
    if ((rc = ed_routing(c, seed, in, err, errlen))) return rc;
    return ed_layout(c, in, err, errlen);
}

static const void *ed_shape(const moects_inputs *in) { return &in->ed; }

static void ed_bind(const moects_inputs *in, void *const ptr[MOECTS_INPUTS_MAX], void *out, moects_op_args *args)
{
    unsigned char *o = out;
    args->ed.a = (moects_ep_dispatch_combine_args){
        .comm = NULL, .x = ptr[MOECTS_ED_X], .topk_ids = ptr[MOECTS_ED_IDS], .topk_weights = ptr[MOECTS_ED_W],
        .expert_first = ptr[MOECTS_ED_EXPERT_FIRST], .expert_scale = ptr[MOECTS_ED_SCALE],
        .token_first = ptr[MOECTS_ED_TOKEN_FIRST], .out = out,
        .recv_x = o ? (uint16_t *)(o + in->ed_off_recv_x) : NULL,
        .recv_src = o ? (int64_t *)(o + in->ed_off_recv_src) : NULL,
        .recv_count = o ? (int64_t *)(o + in->ed_off_recv_count) : NULL};
    args->ed.recv_first = in->ed_recv_first;
}

static size_t ed_row_bytes(const moects_inputs *in, int i)
{
    if (i == -1 || i == MOECTS_ED_X) return (size_t)in->ed.H * 2;
    if (i == MOECTS_ED_IDS || i == MOECTS_ED_W) return (size_t)in->ed.k * 4;
    return 8;
}

static int ed_describe(const moects_inputs *in, int j, moects_tensor_info *t)
{
    const moects_ep_dispatch_combine_shape *s = &in->ed;
    switch (j) {
    case MOECTS_ED_X: moects__tinfo_2d(t, MOECTS_BF16, s->T_total, s->H); return 0;
    case MOECTS_ED_IDS: moects__tinfo_2d(t, MOECTS_I32, s->T_total, s->k); return 0;
    case MOECTS_ED_W: moects__tinfo_2d(t, MOECTS_F32, s->T_total, s->k); return 0;
    case MOECTS_ED_SCALE: moects__tinfo_2d(t, MOECTS_F32, s->E, 0); break;
    default: moects__tinfo_2d(t, MOECTS_I64, s->world + 1, 0);
    }
    t->ndim = 1;
    return 0;
}

/* The output as one BF16 buffer of out_elems (its parts: the header comment). */
static void ed_describe_out(const moects_inputs *in, moects_tensor_info *t)
{
    t->dims[0] = in->out_elems, t->dims[1] = 1;
}

/* ---- reference ---- */

/* The reference into a's outputs: the combined tokens, every rank's rows in the declared order, the
 * counts. */
static int ed_reference(const moects_inputs *in, const moects_op_args *a, moects_recipe r)
{
    const moects_ep_dispatch_combine_args *g = &a->ed.a;
    moects_edc_problem p;
    problem_of(in, g, &p);
    if (moects__ref_edc_combine(&p, r, g->out) || moects__edc_recv_order(&p, in->ed_recv_first, g->recv_src)) return -1;
    const int64_t H = p.H, N = in->ed_recv_first[p.world];
    for (int64_t i = 0; i < N; i++) memcpy(g->recv_x + i * H, p.x + g->recv_src[i] / p.k * H, (size_t)H * 2);
    for (int64_t r2 = 0; r2 < p.world; r2++) g->recv_count[r2] = in->ed_recv_first[r2 + 1] - in->ed_recv_first[r2];
    return 0;
}

static void ed_geometry(const moects_inputs *in, moects_out_geom *g)
{
    g->axis[0] = "elem";
    g->axis[1] = "-";
    g->row_word = "element (out, recv_x, recv_src, recv_count: docs/ep_dispatch_combine.md)";
    g->col_extent = "1";
    g->rows = in->out_elems;
    g->cols = 1;
}

static const char *ed_claim_refused(const moects_case *c, moects_recipe recipe, int bounded)
{
    (void)c;
    if (bounded) return "an accumulation class, which ep_dispatch_combine has not: its combine is an exact recipe";
    if (recipe != MOECTS_RECIPE_EPG_FMA_V1 && recipe != MOECTS_RECIPE_EPG_MULADD_V1)
        return "which ep_dispatch_combine has not: a kernel declares ep_dispatch_combine.fma_v1(order=expert|any) "
               "or muladd_v1";
    return NULL;
}

/* Bytes moved: every valid slot's row there and back, the tokens read and written. */
static double ed_perf_bytes(const moects_inputs *in, long mnk[3])
{
    (void)mnk;
    const double row = (double)in->ed.H * 2;
    return (double)in->ed_recv_first[in->ed.world] * row * 2 + (double)in->ed.T_total * row * 2;
}

const moects__op_def moects__op_ep_dispatch_combine = {
    .op = MOECTS_OP_EP_DISPATCH_COMBINE, .name = "ep_dispatch_combine",
    .case_shape = ed_case_shape, .shape_json = ed_shape_json, .shape_parse = NULL, .recipes = ed_recipes,
    .secs_per_cost = 4.5e-9, /* a first guess: ep_gather's, the fixed part for the processes in cost */
    .cost = ed_cost, .bytes = ed_bytes, .ref_flops = NULL, .shape_key = ed_shape_key, .dims = ed_dims,
    .build = ed_build, .shape = ed_shape, .bind = ed_bind, .row_bytes = ed_row_bytes,
    .describe = ed_describe, .describe_out = ed_describe_out, .scalars = NULL,
    .reference = ed_reference, .reference_pair = NULL, .bound = NULL, .reduction_k = NULL, .geometry = ed_geometry,
    .claim_refused = ed_claim_refused, .enclosure = NULL, .judge = moects__ed_judge, .launch = moects__ed_launch,
    .perf_unit = "GB/s", .perf_key = "gbps", .perf_bytes = ed_perf_bytes,
};
