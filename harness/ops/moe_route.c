/* moe_route.c: the moe_route op (the router: logits -> topk ids and weights; DESIGN.md "Routing",
 * docs/moe_route.md) as the op table's entry: the kernel shape of a case, its inputs (logits, the
 * correction bias), binding, the reference, and its own judge: ids compared under the kernel's tie
 * rule and slot order, ties accepted as PASS_TIE, weights bit for bit (ref/moects_route.h).
 * The output buffer is ids [T, k] int32 then weights [T, k] FP32 (out_elems 2 T k, 4 bytes each). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "moects_harness.h"
#include "moects_op.h"
#include "moects_route.h"
#include "ops_internal.h"

static void mr_case_shape_of(const moects_case *c, moects_moe_route_shape *s)
{
    *s = (moects_moe_route_shape){.T = c->T, .E = c->E, .k = c->k, .method = c->route_method, .n_group = c->n_group,
                                  .topk_group = c->topk_group, .renormalize = c->renormalize,
                                  .scale = c->route_scale, .has_bias = c->route_bias, .logits_dtype = c->logits_dtype};
}

static const char *const METHOD_NAMES[] = {"?", "softmax", "topk_softmax", "sigmoid", "llama4"};

static const char *method_name(moects_route_method m) { return m >= 1 && m <= 4 ? METHOD_NAMES[m] : "?"; }

/* ---- the case ---- */

static void mr_case_shape(const moects_case *c, moects__kshape *s) { mr_case_shape_of(c, &s->mr); }

static json_t *mr_shape_json(const moects_case *c, const moects_inputs *in)
{
    (void)in;
    return json_pack("{sI sI sI ss sI sI sb sf sb ss}", "T", (json_int_t)c->T, "E", (json_int_t)c->E, "k",
                     (json_int_t)c->k, "method", method_name(c->route_method), "n_group", (json_int_t)c->n_group,
                     "topk_group", (json_int_t)c->topk_group, "renormalize", c->renormalize, "scale",
                     (double)c->route_scale, "has_bias", c->route_bias, "logits_dtype",
                     moects__abi_dtype(c->logits_dtype));
}

/* The reverse of mr_shape_json, for a case file (a local case, issue 32): every field there, method by
 * name, scale a number (FP32). The build then refuses a shape the router cannot have
 * (moects__route_shape_invalid). */
static int mr_shape_parse(const char *path, json_t *sh, moects_case *c, char *err, size_t errlen)
{
    const char *m = json_string_value(json_object_get(sh, "method"));
    int method = 0;
    for (int i = 1; m && i <= 4; i++)
        if (!strcmp(m, METHOD_NAMES[i])) method = i;
    if (moects__json_int(path, sh, "T", &c->T, err, errlen) || moects__json_int(path, sh, "E", &c->E, err, errlen) ||
        moects__json_int(path, sh, "k", &c->k, err, errlen) ||
        moects__json_int(path, sh, "n_group", &c->n_group, err, errlen) ||
        moects__json_int(path, sh, "topk_group", &c->topk_group, err, errlen) ||
        moects__json_dtype(path, "logits_dtype", sh, &c->logits_dtype, err, errlen))
        return -1;
    if (!method)
        return snprintf(err, errlen, "%s: moects.case: shape.method: not softmax, topk_softmax, sigmoid or llama4", path), -1;
    if (!json_is_number(json_object_get(sh, "scale")))
        return snprintf(err, errlen, "%s: moects.case: shape.scale: not a number", path), -1;
    c->route_method = (moects_route_method)method;
    c->route_scale = (float)json_number_value(json_object_get(sh, "scale"));
    c->renormalize = json_is_true(json_object_get(sh, "renormalize"));
    c->route_bias = json_is_true(json_object_get(sh, "has_bias"));
    return 0;
}

static int mr_recipes(const moects_case *c, const char **names)
{
    (void)c;
    names[0] = MOECTS_ROUTE_RECIPE_V1;
    return 1;
}

static double mr_cost(const moects_case *c) { return (double)c->T * (double)c->E * (double)(c->k + 8); }

static double mr_bytes(const moects_case *c) { return (double)c->T * (double)(c->E * 4 + c->k * 8) + (double)c->E * 4; }

static void mr_shape_key(const moects_case *c, char *dst, size_t cap)
{
    snprintf(dst, cap, "E=%" PRId64 " topk=%" PRId64 " %s groups=%" PRId64 "/%" PRId64, c->E, c->k,
             method_name(c->route_method), c->topk_group, c->n_group);
}

static int mr_dims(const moects_case *c, const char *op, char out[3][96])
{
    snprintf(out[0], 96, "%s|E=%" PRId64, op, c->E);
    snprintf(out[1], 96, "%s|topk=%" PRId64, op, c->k);
    snprintf(out[2], 96, "%s|method=%s", op, method_name(c->route_method));
    return 3;
}

/* ---- its inputs ---- */

/* Logit e of token t. Exact data: uniform in [-4, 4) with every significand bit. Adversarial data, by
 * row (t % 5): as exact; exact ties (values from {-1, -1/2, 0, 1/2, 1}); near ties (one value and its
 * neighbours one FP32 ulp apart); a row of one value; some -Inf among exact values, and in every
 * 8th such row (t % 40 == 39) one NaN: no defined result, only its ids judged (docs/moe_route.md). */
static float logit(const moects_case *c, uint64_t key, int64_t t, int64_t e)
{
    const uint64_t u = moects__draw(key, (uint64_t)(t * c->E + e));
    const float x = (float)((double)(u >> 11) * 0x1p-50 - 4.0);
    if (c->data != MOECTS_DATA_ADVERSARIAL) return x;
    switch (t % 5) {
    case 1: return (float)((int)(u % 5) - 2) * 0.5f;
    case 2: return nextafterf(nextafterf(0.75f, 0.0f), (u & 4) ? 2.0f : 0.0f) + (float)(u & 1) * 0x1p-24f;
    case 3: return 0.25f;
    case 4: return t % 40 == 39 && e == c->E / 2 ? NAN : u % 7 == 0 ? -INFINITY : x;
    default: return x;
    }
}

/* The correction bias: uniform in [-1/4, 1/4) (exact data), multiples of 1/16 (adversarial: ties of
 * s + b where s ties). */
static float bias(const moects_case *c, uint64_t key, int64_t e)
{
    const uint64_t u = moects__draw(key, (uint64_t)e);
    if (c->data == MOECTS_DATA_ADVERSARIAL) return (float)((int)(u % 9) - 4) * 0.0625f;
    return (float)((double)(u >> 11) * 0x1p-55 - 0.25);
}

static int mr_build(const moects_case *c, uint64_t seed, int64_t pool_min, moects_inputs *in, char *err, size_t errlen)
{
    (void)pool_min;
    moects_moe_route_shape *s = &in->mr;
    mr_case_shape_of(c, s);
    const char *why = moects__route_shape_invalid(s);
    if (why) return snprintf(err, errlen, "case %s: shape: %s", c->id, why), -1;
    const int bf = s->logits_dtype == MOECTS_BF16;
    const int64_t T = s->T, E = s->E, k = s->k;
    int rc;
    in->op = MOECTS_OP_MOE_ROUTE;
    if ((rc = moects__input_alloc(in, MOECTS_MR_LOGITS, "logits", (size_t)(T * E) * (bf ? 2 : 4), c->id, err, errlen)) ||
        (rc = moects__input_alloc(in, MOECTS_MR_BIAS, "bias", s->has_bias ? (size_t)E * 4 : 0, c->id, err, errlen)))
        return rc;
    const uint64_t kl = moects__input_key(seed, c->id, "logits"), kb = moects__input_key(seed, c->id, "bias");
    for (int64_t t = 0; t < T; t++)
        for (int64_t e = 0; e < E; e++) {
            const float x = logit(c, kl, t, e);
            if (bf) ((uint16_t *)in->t[MOECTS_MR_LOGITS].host)[t * E + e] = moects__bf16_from_f32(x);
            else ((float *)in->t[MOECTS_MR_LOGITS].host)[t * E + e] = x;
        }
    for (int64_t e = 0; s->has_bias && e < E; e++) ((float *)in->t[MOECTS_MR_BIAS].host)[e] = bias(c, kb, e);
    in->out_dtype = MOECTS_F32;
    in->out_elems = 2 * T * k;
    in->out_bytes = (size_t)in->out_elems * 4;
    return 0;
}

static const void *mr_shape(const moects_inputs *in) { return &in->mr; }

static void mr_bind(const moects_inputs *in, void *const ptr[MOECTS_INPUTS_MAX], void *out, moects_op_args *args)
{
    args->mr = (moects_moe_route_args){.logits = ptr[MOECTS_MR_LOGITS],
                                       .bias = in->mr.has_bias ? ptr[MOECTS_MR_BIAS] : NULL,
                                       .topk_ids = out,
                                       .topk_weights = out ? (float *)out + in->mr.T * in->mr.k : NULL};
}

static size_t mr_row_bytes(const moects_inputs *in, int i)
{
    if (i == -1) return (size_t)in->mr.k * 4;
    return (size_t)in->mr.E * (i == MOECTS_MR_LOGITS && in->mr.logits_dtype == MOECTS_BF16 ? 2 : 4);
}

static int mr_describe(const moects_inputs *in, int j, moects_tensor_info *t)
{
    const moects_moe_route_shape *s = &in->mr;
    t->name = j == MOECTS_MR_LOGITS ? "logits" : "bias";
    if (j == MOECTS_MR_LOGITS) return moects__tinfo_2d(t, s->logits_dtype, s->T, s->E), 0;
    return s->has_bias ? (moects__tinfo_2d(t, MOECTS_F32, s->E, 0), t->ndim = 1, 0) : 1;
}

/* The output as one [2T, k] buffer: the ids' rows, then the weights'. */
static void mr_describe_out(const moects_inputs *in, moects_tensor_info *t)
{
    t->dims[0] = 2 * in->mr.T, t->dims[1] = in->mr.k;
}

/* ---- reference, verdict ---- */

static int mr_reference(const moects_inputs *in, const moects_op_args *a, moects_recipe r)
{
    moects_route_recipe rr;
    int64_t undefined; /* rows holding a NaN: ids -1, weights NaN, not judged (mr_judge) */
    return moects__route_recipe_of(r, &rr) ? -1 : moects__ref_moe_route_rows(&in->mr, &a->mr, &undefined);
}

static void mr_geometry(const moects_inputs *in, moects_out_geom *g)
{
    g->axis[0] = "row";
    g->axis[1] = "slot";
    g->row_word = "row (ids: t, weights: T + t)";
    g->col_extent = "k";
    g->rows = 2 * in->mr.T;
    g->cols = in->mr.k;
}

static const char *mr_claim_refused(const moects_case *c, moects_recipe recipe, int bounded)
{
    (void)c;
    moects_route_recipe rr;
    if (moects__route_recipe_of(recipe, &rr)) return "which moe_route has not: a router declares " MOECTS_ROUTE_RECIPE_V1 "(...)";
    return bounded ? "an accumulation class, which a router has not: its bounded claim is the recipe's fn= and sum= keys"
                   : NULL;
}

static const char *const ROW_WORDS[] = {"", "tie", "an id outside [0, E) or repeated", "ids not a top-k of the scores",
                                        "slots not in selection order", "a weight not the recipe's bits", "NaN"};
static const char *const ROW_WORDS_BOUNDED[] = {"", "tie", "an id outside [0, E) or repeated",
                                                "ids no scores in their enclosure select",
                                                "slots no scores in their enclosure sort so",
                                                "a weight outside its enclosure", "NaN"};

/* The failing row's want: the reference's id and weight at that slot (under a declared norm=recip or
 * renorm=recip, that recipe's reference row, moects__route_ref_row), or, for a weight outside its
 * enclosure under a bounded claim, that enclosure ("slot 0: [lo, hi]"). */
static void fail_want(const moects_inputs *in, const moects_route_recipe *rr, const int32_t *ids, const int32_t *wid,
                      const float *ww, int64_t t, int slot, int kind, moects_result *r)
{
    const moects_moe_route_shape *s = &in->mr;
    const int64_t i = t * s->k + slot;
    float lo[64], hi[64];
    int32_t rid[64];
    moects_op_args a;
    moects__host_args(in, NULL, &a);
    if (moects__route_bounded(rr) && kind == MOECTS_ROUTE_ROW_WEIGHT && s->k <= 64 &&
        moects__route_encl_weights(s, &a.mr, rr, t, ids + t * s->k, lo, hi) == 0)
        snprintf(r->want, sizeof r->want, "slot %d: [%a, %a]", slot, (double)lo[slot], (double)hi[slot]);
    else if ((rr->norm_recip || rr->renorm_recip) && s->k <= 64 && moects__route_ref_row(s, &a.mr, rr, t, rid, lo) == 0)
        snprintf(r->want, sizeof r->want, "slot %d: id %d w %a", slot, (int)rid[slot], (double)lo[slot]);
    else
        snprintf(r->want, sizeof r->want, "slot %d: id %d w %a", slot, (int)wid[i], (double)ww[i]);
}

/* Each row checked against the recipe (moects__route_check_row): PASS_EXACT (a bounded claim:
 * PASS_BOUNDED, every weight in its enclosure), PASS_TIE with the tied rows counted, or FAIL_MISMATCH
 * naming the first failing row and slot (a bounded claim: the weight's interval). Rows without a
 * defined result (a NaN) are counted, not judged. */
static int mr_judge(const moects_inputs *in, const char *recipe, const void *got, const void *want, moects_result *r)
{
    const moects_moe_route_shape *s = &in->mr;
    moects_route_recipe rr;
    char err[200];
    if (moects__route_recipe_parse(recipe, &rr, err, sizeof err)) {
        r->verdict = MOECTS_FAIL_CRASH;
        return snprintf(r->reason, sizeof r->reason, "the kernel's recipe: %s", err), 0;
    }
    moects_op_args a;
    moects__host_args(in, NULL, &a);
    const int32_t *ids = got, *wid = want;
    const float *w = (const float *)got + s->T * s->k, *ww = (const float *)want + s->T * s->k;
    int64_t n[7] = {0}, first = -1;
    int first_kind = 0, first_slot = -1;
    for (int64_t t = 0; t < s->T; t++) {
        int slot;
        const int kind = moects__route_check_row(s, &a.mr, &rr, t, ids + t * s->k, w + t * s->k, &slot);
        if (kind < 0) return r->verdict = MOECTS_FAIL_CRASH, snprintf(r->reason, sizeof r->reason, "out of memory"), 0;
        n[kind]++;
        if (kind >= MOECTS_ROUTE_ROW_BAD_ID && kind != MOECTS_ROUTE_ROW_NAN && first < 0)
            first = t, first_kind = kind, first_slot = slot;
    }
    const int64_t bad = n[2] + n[3] + n[4] + n[5];
    const int bounded = moects__route_bounded(&rr);
    r->mismatches = bad, r->first_index = -1;
    if (bad) {
        const int64_t i = (first_kind == MOECTS_ROUTE_ROW_WEIGHT ? s->T * s->k : 0) + first * s->k + first_slot;
        r->verdict = MOECTS_FAIL_MISMATCH, r->first_index = i;
        snprintf(r->got, sizeof r->got, "id %d w %a", (int)ids[first * s->k + first_slot], (double)w[first * s->k + first_slot]);
        fail_want(in, &rr, ids, wid, ww, first, first_slot, first_kind, r);
        snprintf(r->reason, sizeof r->reason, "%lld of %lld rows fail; first: token %lld slot %d, %s", (long long)bad,
                 (long long)s->T, (long long)first, first_slot, (bounded ? ROW_WORDS_BOUNDED : ROW_WORDS)[first_kind]);
    } else {
        r->verdict = n[1] ? MOECTS_PASS_TIE : bounded ? MOECTS_PASS_BOUNDED : MOECTS_PASS_EXACT;
        if (n[1] && bounded)
            snprintf(r->reason, sizeof r->reason, "%lld of %lld rows chose other ids, tied with the reference's within "
                     "the scores' enclosure (exp within %u ulps); every weight within its enclosure", (long long)n[1],
                     (long long)s->T, moects__route_fn_ulp(&rr));
        else if (n[1])
            snprintf(r->reason, sizeof r->reason, "%lld of %lld rows chose other ids tied with the reference's "
                     "(ties=any), their weights the recipe's", (long long)n[1], (long long)s->T);
        else if (bounded)
            snprintf(r->reason, sizeof r->reason, "every weight within its enclosure (exp within %u ulps, sums in "
                     "any order)", moects__route_fn_ulp(&rr));
    }
    if (n[6]) {
        const size_t l = strlen(r->reason);
        snprintf(r->reason + l, sizeof r->reason - l, "%s%lld rows hold a NaN: not judged (no defined result)",
                 l ? "; " : "", (long long)n[6]);
    }
    return rr.ties_any || rr.slots_any || bounded;
}

/* Bytes moved: the logits and bias read, the ids and weights written. */
static double mr_perf_bytes(const moects_inputs *in, long mnk[3])
{
    (void)mnk;
    return (double)in->t[MOECTS_MR_LOGITS].bytes + (double)in->t[MOECTS_MR_BIAS].bytes + (double)in->out_bytes;
}

const moects__op_def moects__op_moe_route = {
    .op = MOECTS_OP_MOE_ROUTE, .name = "moe_route",
    .case_shape = mr_case_shape, .shape_json = mr_shape_json, .shape_parse = mr_shape_parse, .recipes = mr_recipes,
    .secs_per_cost = 2e-8, /* a first guess: E exps and k passes over E per token */
    .cost = mr_cost, .bytes = mr_bytes, .ref_flops = NULL, .shape_key = mr_shape_key, .dims = mr_dims,
    .build = mr_build, .shape = mr_shape, .bind = mr_bind, .row_bytes = mr_row_bytes,
    .describe = mr_describe, .describe_out = mr_describe_out, .scalars = NULL,
    .reference = mr_reference, .reference_pair = NULL, .bound = NULL, .reduction_k = NULL, .geometry = mr_geometry,
    .claim_refused = mr_claim_refused, .enclosure = NULL, .judge = mr_judge,
    .perf_unit = "GB/s", .perf_key = "gbps", .perf_bytes = mr_perf_bytes,
};
