/* moe_route.c: the router's exact reference and the per-row check of a kernel's ids and weights
 * (ref/moects_route.h gives every method's arithmetic; DESIGN.md "Routing"). Sources of the methods:
 * vLLM fused_topk (softmax, top-k, renormalize) and grouped_topk (sigmoid, correction bias, groups by
 * the sum of their top 2, masked groups, unbiased weights, renormalize, routed scaling factor),
 * the + 1e-20 of the denominator from transformers' DeepseekV3 router, HF's MoEGate and vLLM's CUDA
 * noaux_tc kernel (vLLM's Python grouped_topk and DeepSeek's inference Gate have none), gpt-oss's router (top-k on the logits,
 * softmax over the k), Llama 4's router (top-1 on the logits, sigmoid of the logit). The declared keys
 * norm=recip and renorm=recip: vLLM csrc/libtorch_stable/moe/topk_softmax_kernels.cu (topkGating,
 * moeSoftmax: p = e * (1.f / row_sum); the epilogue: scale = routed_scaling_factor, scale /= denom,
 * output *= scale). */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moects_crmath.h"
#include "moects_route.h"

/* ---- the recipe ---- */

/* One key's values, the first the default, and where it goes. */
typedef struct {
    const char *key;
    const char *values[6];
    size_t offset;
} route_key;

static const route_key KEYS[] = {
    {"ties", {"low", "any", NULL}, offsetof(moects_route_recipe, ties_any)},
    {"slots", {"sorted", "any", NULL}, offsetof(moects_route_recipe, slots_any)},
    {"fn", {"cr", "ulp1", "ulp2", "ulp4", "ulp8", NULL}, offsetof(moects_route_recipe, fn)},
    {"sum", {"ordered", "any", NULL}, offsetof(moects_route_recipe, sum_any)},
    {"norm", {"div", "recip", NULL}, offsetof(moects_route_recipe, norm_recip)},
    {"renorm", {"div", "recip", NULL}, offsetof(moects_route_recipe, renorm_recip)},
};
#define NKEYS (sizeof KEYS / sizeof KEYS[0])

/* One "key=value" of length n into r: 0, or -1 with err. */
static int parse_pair(const char *p, size_t n, moects_route_recipe *r, char *err, size_t errlen)
{
    const char *eq = memchr(p, '=', n);
    const size_t kl = eq ? (size_t)(eq - p) : n, vl = eq ? n - kl - 1 : 0;
    for (size_t i = 0; i < NKEYS; i++) {
        if (strlen(KEYS[i].key) != kl || strncmp(KEYS[i].key, p, kl) != 0) continue;
        for (int v = 0; eq && KEYS[i].values[v]; v++)
            if (strlen(KEYS[i].values[v]) == vl && !strncmp(KEYS[i].values[v], eq + 1, vl))
                return *(int *)((char *)r + KEYS[i].offset) = v, 0;
        return snprintf(err, errlen, "\"%.*s\": ties is one of low|any, slots sorted|any, fn cr|ulp1|ulp2|ulp4|ulp8, "
                        "sum ordered|any, norm div|recip, renorm div|recip", (int)n, p), -1;
    }
    return snprintf(err, errlen, "\"%.*s\" is not a route recipe key (ties, slots, fn, sum, norm, renorm)", (int)n,
                    p), -1;
}

int moects__route_recipe_parse(const char *s, moects_route_recipe *r, char *err, size_t errlen)
{
    const size_t pl = strlen(MOECTS_ROUTE_RECIPE_V1);
    memset(r, 0, sizeof *r);
    if (!s || strncmp(s, MOECTS_ROUTE_RECIPE_V1, pl) != 0 || (s[pl] && s[pl] != '('))
        return snprintf(err, errlen, "\"%s\" is not " MOECTS_ROUTE_RECIPE_V1
                        "[(ties=..,slots=..,fn=..,sum=..,norm=..,renorm=..)]", s ? s : "(null)"), -1;
    if (!s[pl]) return 0;
    const char *p = s + pl + 1, *end = strchr(p, ')');
    if (!end || end[1]) return snprintf(err, errlen, "\"%s\": the list must end with ')'", s), -1;
    while (p < end) {
        const char *c = memchr(p, ',', (size_t)(end - p));
        size_t n = c ? (size_t)(c - p) : (size_t)(end - p);
        if (parse_pair(p, n, r, err, errlen)) return -1;
        p += n + (c != NULL);
    }
    return 0;
}

moects_recipe moects__route_recipe_value(const moects_route_recipe *r)
{
    return (moects_recipe)(MOECTS_RECIPE_ROUTE_BASE + (r->ties_any != 0) + 2 * (r->slots_any != 0));
}

int moects__route_recipe_of(moects_recipe v, moects_route_recipe *r)
{
    const int i = (int)v - MOECTS_RECIPE_ROUTE_BASE;
    if (i < 0 || i > 3) return -1;
    r->ties_any = i & 1, r->slots_any = i >> 1;
    return 0;
}

const char *moects__route_shape_invalid(const moects_moe_route_shape *s)
{
    if (s->T < 0 || s->E < 2 || s->k < 1 || s->k > s->E) return "shape: needs T >= 0, E >= 2 and 1 <= k <= E";
    if (s->logits_dtype != MOECTS_F32 && s->logits_dtype != MOECTS_BF16) return "format: logits are FP32 or BF16";
    if (s->method < MOECTS_ROUTE_SOFTMAX || s->method > MOECTS_ROUTE_LLAMA4) return "routing: unknown method";
    if (s->method == MOECTS_ROUTE_LLAMA4 && s->k != 1) return "routing: Llama 4's router is top-1";
    if ((s->method == MOECTS_ROUTE_TOPK_SOFTMAX || s->method == MOECTS_ROUTE_LLAMA4) && (s->n_group != 1 || s->has_bias))
        return "routing: groups and a correction bias belong to the softmax and sigmoid methods";
    if (s->n_group < 1 || s->E % s->n_group || s->E / s->n_group < 2 || s->topk_group < 1 ||
        s->topk_group > s->n_group)
        return "routing: n_group divides E into groups of 2 or more, 1 <= topk_group <= n_group";
    if (s->k > s->topk_group * (s->E / s->n_group)) return "routing: k exceeds the experts of the kept groups";
    if (!(s->scale > 0) || isinf(s->scale)) return "routing: the scaling factor is positive and finite";
    return NULL;
}

/* ---- one row ---- */

/* What a row needs: its logits, scores and the reference's selection. */
typedef struct {
    float *x;            /* [E] the logits in FP32 */
    float *score;        /* [E] SOFTMAX p, SIGMOID s, LLAMA4 sigmoid(x); TOPK_SOFTMAX unused */
    float *sel;          /* [E] the selection score */
    unsigned char *kept; /* [E] 1: the expert's group is kept, and not yet picked */
    float *gs;           /* [n_group] group scores */
    unsigned char *gin;  /* [n_group] scratch: a group a kernel's ids keep */
    int32_t *ids;        /* [k] the reference's ids, slot order */
    float *w;            /* [k] its weights */
    int32_t *tmp;        /* [k] a kernel's ids in slot order */
    float *wt;           /* [k] the weights of those */
} row_ws;

static void ws_free(row_ws *ws)
{
    free(ws->x), free(ws->score), free(ws->sel), free(ws->kept), free(ws->gs), free(ws->gin), free(ws->ids), free(ws->w);
    free(ws->tmp), free(ws->wt);
}

static int ws_alloc(const moects_moe_route_shape *s, row_ws *ws)
{
    const size_t E = (size_t)s->E, k = (size_t)s->k;
    *ws = (row_ws){malloc(E * 4), malloc(E * 4), malloc(E * 4), malloc(E), malloc((size_t)s->n_group * 4),
                   malloc((size_t)s->n_group), malloc(k * 4), malloc(k * 4), malloc(k * 4), malloc(k * 4)};
    if (ws->x && ws->score && ws->sel && ws->kept && ws->gs && ws->gin && ws->ids && ws->w && ws->tmp && ws->wt) return 0;
    ws_free(ws);
    return -1;
}

static float sigmoid_cr(float x)
{
    const float t = moects_cr_expf(-x), d = 1.0f + t;
    return 1.0f / d;
}

int moects__route_load_row(const moects_moe_route_shape *s, const moects_moe_route_args *a, int64_t t, float *x)
{
    int finite = 0;
    for (int64_t e = 0; e < s->E; e++) {
        const int64_t i = t * s->E + e;
        const float v = s->logits_dtype == MOECTS_BF16 ? moects__bf16_to_f32(((const uint16_t *)a->logits)[i])
                                                       : ((const float *)a->logits)[i];
        const float b = s->has_bias ? a->bias[e] : 0.0f;
        if (isnan(v) || v == INFINITY || isnan(b) || isinf(b)) return 1;
        finite |= v != -INFINITY;
        x[e] = v;
    }
    return !finite;
}

/* ws->score and ws->sel of the loaded row, per the method and r's norm. */
static void row_scores(const moects_moe_route_shape *s, const moects_moe_route_args *a, const moects_route_recipe *r,
                       row_ws *ws)
{
    const int64_t E = s->E;
    if (s->method == MOECTS_ROUTE_SOFTMAX) {
        float m = ws->x[0], sum = 0.0f;
        for (int64_t e = 1; e < E; e++) m = ws->x[e] > m ? ws->x[e] : m;
        for (int64_t e = 0; e < E; e++) ws->score[e] = moects_cr_expf(ws->x[e] - m), sum += ws->score[e];
        const float rs = 1.0f / sum; /* norm=recip: vLLM's reciprocal_row_sum */
        for (int64_t e = 0; e < E; e++) ws->score[e] = r->norm_recip ? ws->score[e] * rs : ws->score[e] / sum;
        for (int64_t e = 0; e < E; e++) ws->sel[e] = s->has_bias ? ws->score[e] + a->bias[e] : ws->score[e];
        return;
    }
    for (int64_t e = 0; e < E; e++) {
        const int sig = s->method == MOECTS_ROUTE_SIGMOID;
        ws->score[e] = s->method == MOECTS_ROUTE_TOPK_SOFTMAX ? 0.0f : sigmoid_cr(ws->x[e]);
        ws->sel[e] = !sig ? ws->x[e] : s->has_bias ? ws->score[e] + a->bias[e] : ws->score[e];
    }
}

/* Whether expert i goes before expert j: a higher selection score, or an equal one and a lower id. */
static int before(const float *sel, int32_t i, int32_t j) { return sel[i] > sel[j] || (sel[i] == sel[j] && i < j); }

/* The score of group g: the sum of its two best selection scores with a bias, else its best. */
static float group_score(const moects_moe_route_shape *s, const float *sel, int64_t g)
{
    const int64_t n = s->E / s->n_group;
    float b1 = -INFINITY, b2 = -INFINITY;
    for (int64_t e = g * n; e < (g + 1) * n; e++)
        if (sel[e] > b1) b2 = b1, b1 = sel[e];
        else if (sel[e] > b2) b2 = sel[e];
    return s->has_bias ? b1 + b2 : b1;
}

/* ws->kept: the experts of the topk_group best groups (equal scores: the lower group), all without
 * groups. */
static void keep_groups(const moects_moe_route_shape *s, row_ws *ws)
{
    const int64_t G = s->n_group, n = s->E / G;
    memset(ws->kept, G > 1 ? 0 : 1, (size_t)s->E);
    if (G == 1) return;
    for (int64_t g = 0; g < G; g++) ws->gs[g] = group_score(s, ws->sel, g);
    for (int64_t r = 0; r < s->topk_group; r++) {
        int64_t best = -1;
        for (int64_t g = 0; g < G; g++)
            if (!ws->kept[g * n] && (best < 0 || ws->gs[g] > ws->gs[best])) best = g;
        memset(ws->kept + best * n, 1, (size_t)n);
    }
}

/* The reference's k ids (slot order) among the kept experts into ws->ids. */
static void select_topk(const moects_moe_route_shape *s, row_ws *ws)
{
    for (int64_t j = 0; j < s->k; j++) {
        int32_t best = -1;
        for (int32_t e = 0; e < (int32_t)s->E; e++)
            if (ws->kept[e] && (best < 0 || before(ws->sel, e, best))) best = e;
        ws->ids[j] = best;
        ws->kept[best] = 0;
    }
}

/* The weights w [k] of the ids [k] in selection order, per the method and r's renorm. */
static void route_weights(const moects_moe_route_shape *s, const moects_route_recipe *r, const row_ws *ws,
                          const int32_t *ids, float *w)
{
    const int64_t k = s->k;
    float sum = 0.0f;
    for (int64_t j = 0; j < k; j++) {
        w[j] = s->method == MOECTS_ROUTE_TOPK_SOFTMAX ? moects_cr_expf(ws->x[ids[j]] - ws->x[ids[0]]) : ws->score[ids[j]];
        sum += w[j];
    }
    if (s->method == MOECTS_ROUTE_SIGMOID && s->renormalize) sum = sum + 1e-20f;
    const int div = s->method == MOECTS_ROUTE_TOPK_SOFTMAX || (s->renormalize && s->method != MOECTS_ROUTE_LLAMA4);
    const int scaled = s->method == MOECTS_ROUTE_SIGMOID || s->method == MOECTS_ROUTE_SOFTMAX;
    if (div && r->renorm_recip) { /* renorm=recip: v * (scale / sum), vLLM's scale /= denom; output *= scale */
        const float c = (scaled ? s->scale : 1.0f) / sum;
        for (int64_t j = 0; j < k; j++) w[j] = w[j] * c;
        return;
    }
    for (int64_t j = 0; j < k; j++) {
        if (div) w[j] = w[j] / sum;
        if (scaled) w[j] = w[j] * s->scale;
    }
}

/* Row t's reference under r (norm, renorm) into ws->ids and ws->w: 0, or 1 for a row without a
 * defined result. */
static int route_row(const moects_moe_route_shape *s, const moects_moe_route_args *a, const moects_route_recipe *r,
                     int64_t t, row_ws *ws)
{
    if (moects__route_load_row(s, a, t, ws->x)) return 1;
    row_scores(s, a, r, ws);
    keep_groups(s, ws);
    select_topk(s, ws);
    route_weights(s, r, ws, ws->ids, ws->w);
    return 0;
}

int moects__route_ref_row(const moects_moe_route_shape *s, const moects_moe_route_args *a,
                          const moects_route_recipe *r, int64_t t, int32_t *ids, float *w)
{
    row_ws ws;
    if (moects__route_shape_invalid(s) || ws_alloc(s, &ws)) return -1;
    const int undefined = route_row(s, a, r, t, &ws);
    if (!undefined) memcpy(ids, ws.ids, (size_t)s->k * 4), memcpy(w, ws.w, (size_t)s->k * 4);
    ws_free(&ws);
    return undefined;
}

int moects__ref_moe_route_rows(const moects_moe_route_shape *s, const moects_moe_route_args *a, int64_t *undefined)
{
    static const moects_route_recipe exact = {0};
    row_ws ws;
    *undefined = 0;
    if (moects__route_shape_invalid(s) || ws_alloc(s, &ws)) return -1;
    for (int64_t t = 0; t < s->T; t++) {
        if (route_row(s, a, &exact, t, &ws)) {
            ++*undefined;
            for (int64_t j = 0; j < s->k; j++) ws.ids[j] = -1, ws.w[j] = NAN;
        }
        memcpy(a->topk_ids + t * s->k, ws.ids, (size_t)s->k * 4);
        memcpy(a->topk_weights + t * s->k, ws.w, (size_t)s->k * 4);
    }
    ws_free(&ws);
    return 0;
}

int moects__ref_moe_route(const moects_moe_route_shape *s, const moects_moe_route_args *a)
{
    int64_t undefined;
    return moects__ref_moe_route_rows(s, a, &undefined) || undefined ? -1 : 0;
}

/* ---- a kernel's row ---- */

/* The first slot of ids [k] outside [0, E) or repeating an earlier one, or -1 (marks: [E] scratch). */
static int bad_slot(const moects_moe_route_shape *s, const int32_t *ids, unsigned char *marks)
{
    memset(marks, 0, (size_t)s->E);
    for (int64_t j = 0; j < s->k; j++) {
        if (ids[j] < 0 || ids[j] >= s->E || marks[ids[j]]) return (int)j;
        marks[ids[j]] = 1;
    }
    return -1;
}

/* ids [k] into selection order (insertion sort: k is small). */
static void sort_selection(const float *sel, int32_t *ids, int64_t k)
{
    for (int64_t j = 1; j < k; j++)
        for (int64_t i = j; i > 0 && before(sel, ids[i], ids[i - 1]); i--) {
            const int32_t t = ids[i];
            ids[i] = ids[i - 1], ids[i - 1] = t;
        }
}

/* Whether groups gin (those holding one of the ids) can be the kept ones when equal group scores may
 * go either way: at most topk_group of them, and, filled up with the best others, none left out scores
 * above one kept. gin gains the fill. */
static int groups_admissible(const moects_moe_route_shape *s, row_ws *ws)
{
    const int64_t G = s->n_group;
    int64_t n = 0;
    for (int64_t g = 0; g < G; g++) n += ws->gin[g];
    if (n > s->topk_group) return 0;
    for (; n < s->topk_group; n++) {
        int64_t best = -1;
        for (int64_t g = 0; g < G; g++)
            if (!ws->gin[g] && (best < 0 || ws->gs[g] > ws->gs[best])) best = g;
        ws->gin[best] = 1;
    }
    float lo = INFINITY, hi = -INFINITY;
    for (int64_t g = 0; g < G; g++)
        if (ws->gin[g]) lo = ws->gs[g] < lo ? ws->gs[g] : lo;
        else hi = ws->gs[g] > hi ? ws->gs[g] : hi;
    return lo >= hi;
}

/* Whether the set ids [k] is a top-k of the row's selection scores when equal scores may go either
 * way (ties=any): its groups admissible (SIGMOID with groups; keep_groups' scores in ws->gs), and no
 * expert of the kept groups left out scoring above one taken. */
static int tie_admissible(const moects_moe_route_shape *s, row_ws *ws, const int32_t *ids)
{
    const int64_t n = s->E / s->n_group;
    memset(ws->gin, s->n_group > 1 ? 0 : 1, (size_t)s->n_group);
    memset(ws->kept, 0, (size_t)s->E);
    for (int64_t j = 0; j < s->k; j++) ws->gin[ids[j] / n] = 1, ws->kept[ids[j]] = 1;
    if (s->n_group > 1 && !groups_admissible(s, ws)) return 0;
    float lo = INFINITY, hi = -INFINITY;
    for (int64_t e = 0; e < s->E; e++)
        if (ws->kept[e]) lo = ws->sel[e] < lo ? ws->sel[e] : lo;
        else if (ws->gin[e / n]) hi = ws->sel[e] > hi ? ws->sel[e] : hi;
    return lo >= hi;
}

/* The first slot j of ids [k] that should not follow slot j - 1 in selection order (ties=any: only a
 * higher score), or -1. */
static int out_of_order(const float *sel, const int32_t *ids, int64_t k, int ties_any)
{
    for (int64_t j = 1; j < k; j++)
        if (ties_any ? sel[ids[j]] > sel[ids[j - 1]] : before(sel, ids[j], ids[j - 1])) return (int)j;
    return -1;
}

/* The first slot of ids [k] whose id is not in want [k] (at least one is, for different sets). */
static int first_outside(const int32_t *ids, const int32_t *want, int64_t k)
{
    for (int64_t j = 0; j < k; j++) {
        int64_t i = 0;
        while (i < k && want[i] != ids[j]) i++;
        if (i == k) return (int)j;
    }
    return 0;
}

static int check_row(const moects_moe_route_shape *s, const moects_moe_route_args *a, const moects_route_recipe *r,
                     int64_t t, const int32_t *ids, const float *w, row_ws *ws, int *slot)
{
    const int64_t k = s->k;
    *slot = -1;
    const int undefined = route_row(s, a, r, t, ws);
    /* ids of a row without a defined result are still ids: the combine after the router indexes with them */
    if ((*slot = bad_slot(s, ids, ws->kept)) >= 0) return MOECTS_ROUTE_ROW_BAD_ID;
    if (undefined) return *slot = -1, MOECTS_ROUTE_ROW_NAN;
    if (moects__route_bounded(r)) return moects__route_encl_check(s, a, r, ws->x, ws->ids, ids, w, slot);
    memcpy(ws->tmp, ids, (size_t)k * 4);
    sort_selection(ws->sel, ws->tmp, k);
    const int same = !memcmp(ws->tmp, ws->ids, (size_t)k * 4);
    if (!same && (!r->ties_any || !tie_admissible(s, ws, ws->tmp)))
        return *slot = first_outside(ids, ws->ids, k), MOECTS_ROUTE_ROW_IDS;
    if (!r->slots_any && (*slot = out_of_order(ws->sel, ids, k, r->ties_any)) >= 0) return MOECTS_ROUTE_ROW_ORDER;
    route_weights(s, r, ws, ws->tmp, ws->wt);
    for (int64_t j = 0; j < k; j++) {
        int64_t p = 0;
        while (ws->tmp[p] != ids[j]) p++;
        if (memcmp(&w[j], &ws->wt[p], 4)) return *slot = (int)j, MOECTS_ROUTE_ROW_WEIGHT;
    }
    *slot = -1;
    return same ? MOECTS_ROUTE_ROW_SAME : MOECTS_ROUTE_ROW_TIE;
}

int moects__route_check_row(const moects_moe_route_shape *s, const moects_moe_route_args *a,
                            const moects_route_recipe *r, int64_t t, const int32_t *ids, const float *w, int *slot)
{
    row_ws ws;
    if (moects__route_shape_invalid(s) || ws_alloc(s, &ws)) return -1;
    const int rc = check_row(s, a, r, t, ids, w, &ws, slot);
    ws_free(&ws);
    return rc;
}
