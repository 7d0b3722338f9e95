/* moe_route.c: CPU router kernels (DESIGN.md "Routing"): the router written as the engines write it,
 * with a full sort of each token's candidates (torch.topk's way, not the reference's k passes), one
 * generic loop with a switch per known bug (the mutants of moe_route_mutants.c). Honest kernels:
 * cpu.moe_route.vllm (ties to the lower id, slots sorted by score, and vLLM's reciprocals: softmax
 * e * (1 / S) and the renormalization v * (scale / sum), as topkGating in vLLM
 * csrc/libtorch_stable/moe/topk_softmax_kernels.cu: moe_route.v1(norm=recip,renorm=recip)) and cpu.moe_route.torch
 * (ties to the higher id and slots in ascending id order, as torch.topk(sorted=False) may: it declares
 * moe_route.v1(ties=any,slots=any), judged PASS_TIE where it chose other tied ids): exp correctly
 * rounded (ref/crmath.c), every FP32 operation in the order ref/moects_route.h gives. cpu.moe_route.fast:
 * libm's expf (glibc: within 1 ulp) and every sum in reverse order, declaring the bounded claim
 * moe_route.v1(fn=ulp2,sum=any) (judged by the enclosure of ref/moe_route_encl.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "moe_route_internal.h"
#include "moects_crmath.h"

/* The candidates' sort: the selection score descending, equal scores by the id (ascending, or
 * descending for a kernel breaking ties high). qsort has no context: a thread's own. */
static _Thread_local const float *cmp_sel;
static _Thread_local int cmp_high;

static int by_score(const void *pa, const void *pb)
{
    const int32_t a = *(const int32_t *)pa, b = *(const int32_t *)pb;
    if (cmp_sel[a] != cmp_sel[b]) return cmp_sel[a] > cmp_sel[b] ? -1 : 1;
    return cmp_high ? (a < b) - (a > b) : (a > b) - (a < b);
}

static void sort_ids(const float *sel, int high, int32_t *ids, int64_t n)
{
    cmp_sel = sel, cmp_high = high;
    qsort(ids, (size_t)n, sizeof *ids, by_score);
}

/* The kernel's exp: libm's for a fast kernel, else correctly rounded. */
static float kexp(const moects__mr_kernel *k, float x) { return k->fast ? expf(x) : moects_cr_expf(x); }

static float sigmoid(const moects__mr_kernel *k, float x)
{
    const float t = kexp(k, -x), d = 1.0f + t;
    return 1.0f / d;
}

static float bf16(float v) { return moects__bf16_to_f32(moects__bf16_from_f32(v)); }

/* The sum of v [n]: index order, or reversed for a fast kernel; each partial sum rounded to BF16 when
 * bf (the sum_bf16 mutant). */
static float ksum(const moects__mr_kernel *k, const float *v, int64_t n, int bf)
{
    float sum = 0.0f;
    for (int64_t j = 0; j < n; j++) {
        sum += v[k->fast ? n - 1 - j : j];
        if (bf) sum = bf16(sum);
    }
    return sum;
}

/* score (the weights' basis) and sel (what selects) of one row x [E]. */
static void scores(const moects__mr_kernel *k, const moects_moe_route_shape *s, const float *x, const float *b,
                   float *score, float *sel)
{
    if (s->method == MOECTS_ROUTE_SOFTMAX) {
        float m = x[0];
        for (int64_t e = 1; e < s->E; e++) m = x[e] > m ? x[e] : m;
        for (int64_t e = 0; e < s->E; e++) score[e] = kexp(k, x[e] - m);
        const float sum = ksum(k, score, s->E, 0), rs = 1.0f / sum;
        for (int64_t e = 0; e < s->E; e++) score[e] = k->recip ? score[e] * rs : score[e] / sum;
    }
    for (int64_t e = 0; e < s->E; e++) {
        if (s->method == MOECTS_ROUTE_SIGMOID || s->method == MOECTS_ROUTE_LLAMA4) score[e] = sigmoid(k, x[e]);
        const int scored = s->method == MOECTS_ROUTE_SOFTMAX || s->method == MOECTS_ROUTE_SIGMOID;
        const int late = s->method == MOECTS_ROUTE_SOFTMAX && k->bug == MOECTS__MR_BUG_SOFTMAX_AFTER_TOPK;
        sel[e] = !scored || late ? x[e] : b ? score[e] + b[e] : score[e];
    }
}

/* The candidates of a row into cand (the experts of the kept groups); returns their count. gsel:
 * [n_group] scratch, gid: [n_group] ids. */
static int64_t candidates(const moects__mr_kernel *k, const moects_moe_route_shape *s, const float *sel, float *gsel,
                          int32_t *gid, int32_t *cand)
{
    const int64_t G = s->n_group, n = s->E / G;
    if (G == 1) {
        for (int64_t e = 0; e < s->E; e++) cand[e] = (int32_t)e;
        return s->E;
    }
    for (int64_t g = 0; g < G; g++) {
        for (int64_t i = 0; i < n; i++) cand[i] = (int32_t)(g * n + i);
        sort_ids(sel, 0, cand, n);
        const int two = s->has_bias && k->bug != MOECTS__MR_BUG_GROUP_MAX;
        gsel[g] = two ? sel[cand[0]] + sel[cand[1]] : sel[cand[0]];
        gid[g] = (int32_t)g;
    }
    sort_ids(gsel, k->ties_high, gid, G);
    for (int64_t j = 0; j < s->topk_group; j++)
        for (int64_t i = 0; i < n; i++) cand[j * n + i] = (int32_t)(gid[j] * n + i);
    return s->topk_group * n;
}

/* The weights w [k] of ids [k] (selection order), per the method. */
static void weights(const moects__mr_kernel *k, const moects_moe_route_shape *s, const float *x, const float *score,
                    const float *sel, const int32_t *ids, float *w)
{
    const int softmax_k = s->method == MOECTS_ROUTE_TOPK_SOFTMAX ||
                          (s->method == MOECTS_ROUTE_SOFTMAX && k->bug == MOECTS__MR_BUG_SOFTMAX_AFTER_TOPK);
    const int renorm = softmax_k || (s->renormalize && s->method != MOECTS_ROUTE_LLAMA4);
    const int scaled = s->method == MOECTS_ROUTE_SOFTMAX || s->method == MOECTS_ROUTE_SIGMOID;
    for (int64_t j = 0; j < s->k; j++) {
        const float *basis = k->bug == MOECTS__MR_BUG_BIAS_IN_WEIGHTS ? sel : score;
        w[j] = softmax_k ? kexp(k, x[ids[j]] - x[ids[0]]) : basis[ids[j]];
    }
    float sum = ksum(k, w, s->k, k->bug == MOECTS__MR_BUG_SUM_BF16);
    if (s->method == MOECTS_ROUTE_SIGMOID && s->renormalize) sum = sum + 1e-20f;
    const float c = (scaled ? s->scale : 1.0f) / sum; /* vLLM: scale /= denom; output *= scale */
    for (int64_t j = 0; j < s->k; j++) {
        if (renorm && k->recip) {
            w[j] = w[j] * c;
            continue;
        }
        if (renorm) w[j] = w[j] / sum;
        if (scaled) w[j] = w[j] * s->scale;
        if (scaled && k->bug == MOECTS__MR_BUG_SCALE_TWICE) w[j] = w[j] * s->scale;
        if (k->bug == MOECTS__MR_BUG_WEIGHTS_BF16) w[j] = bf16(w[j]);
    }
}

/* Slots in ascending id order (a kernel declaring slots=any), weights with them. */
static void ascending(int64_t n, int32_t *ids, float *w)
{
    for (int64_t j = 1; j < n; j++)
        for (int64_t i = j; i > 0 && ids[i] < ids[i - 1]; i--) {
            const int32_t t = ids[i];
            const float v = w[i];
            ids[i] = ids[i - 1], w[i] = w[i - 1], ids[i - 1] = t, w[i - 1] = v;
        }
}

/* One token: x [E] -> ids [k], w [k]. ws: 3E floats and E + 2 n_group ints of scratch. */
static void route_token(const moects__mr_kernel *k, const moects_moe_route_shape *s, const float *x, const float *b,
                        float *ws, int32_t *iws, int32_t *ids, float *w)
{
    float *score = ws, *sel = ws + s->E, *gsel = ws + 2 * s->E;
    int32_t *cand = iws, *gid = iws + s->E;
    scores(k, s, x, b, score, sel);
    const int64_t n = candidates(k, s, sel, gsel, gid, cand);
    sort_ids(sel, k->ties_high, cand, n);
    memcpy(ids, cand, (size_t)s->k * sizeof *ids);
    if (k->ties_high) sort_ids(sel, 0, ids, s->k); /* the recipe's sums run in selection order */
    weights(k, s, x, score, sel, ids, w);
    if (k->unsorted) ascending(s->k, ids, w);
}

int moects__mr_supports(const moects__mr_kernel *k, const void *shape, char *why, size_t why_len)
{
    (void)k;
    const char *bad = moects__route_shape_invalid(shape);
    if (bad) snprintf(why, why_len, "%s", bad);
    return bad == NULL;
}

int moects__mr_run(const moects__mr_kernel *k, const void *shape, const void *args)
{
    const moects_moe_route_shape *s = shape;
    const moects_moe_route_args *a = args;
    if (moects__route_shape_invalid(s)) return -1;
    float *ws = malloc((size_t)(3 * s->E + s->n_group) * sizeof *ws), *x = malloc((size_t)s->E * sizeof *x);
    int32_t *iws = malloc((size_t)(s->E + s->n_group) * sizeof *iws);
    const int ok = ws && x && iws;
    for (int64_t t = 0; ok && t < s->T; t++) {
        for (int64_t e = 0; e < s->E; e++)
            x[e] = s->logits_dtype == MOECTS_BF16 ? moects__bf16_to_f32(((const uint16_t *)a->logits)[t * s->E + e])
                                                  : ((const float *)a->logits)[t * s->E + e];
        route_token(k, s, x, a->bias, ws, iws, a->topk_ids + t * s->k, a->topk_weights + t * s->k);
    }
    free(ws), free(x), free(iws);
    return ok ? 0 : -1;
}

MOECTS__MR_DESCRIPTOR(moects_cpu_moe_route_vllm, "cpu.moe_route.vllm", MOECTS_ROUTE_RECIPE_V1 "(norm=recip,renorm=recip)",
                      0, 0, 0, 1, MOECTS__MR_BUG_NONE, NULL);
MOECTS__MR_DESCRIPTOR(moects_cpu_moe_route_torch, "cpu.moe_route.torch", MOECTS_ROUTE_RECIPE_V1 "(ties=any,slots=any)",
                      1, 1, 0, 0, MOECTS__MR_BUG_NONE, NULL);
MOECTS__MR_DESCRIPTOR(moects_cpu_moe_route_fast, "cpu.moe_route.fast", MOECTS_ROUTE_RECIPE_V1 "(fn=ulp2,sum=any)",
                      0, 0, 1, 0, MOECTS__MR_BUG_NONE, NULL);
