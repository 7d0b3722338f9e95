/* fused_moe.c: the fused MoE layer's exact reference, moects__ref_fused_moe (ref/moects_layer.h;
 * DESIGN.md "The fused MoE layer"). For token t and each valid slot j (in slot order), local expert
 * e, router weight w = topk_weights[t][j] (bf16(w) under wdtype=bf16, wherever it is used):
 *   h    = x[t]; weight=input: h_k = bf16(x[t][k] * w) (FP32 multiply)
 *   g1_n = fp32_rne(exact h . W13[e][n]) (+ b13[e][n], FP32 add); g1=bf16: bf16 of that
 *   a_i  = act(gate i, up i) (ref/fused_moe_act.c); weight=act: a_i * w
 *   m_i  = the intermediate of a (BF16, FP32, or FP8 e4m3 * scale exactly)
 *   y_h  = fp32_rne(exact m . W2[e][h]) (+ b2[e][h]); weight=gemm2: y * w; slot=bf16: bf16(y)
 *   out[t][h] = the combine over the valid slots in slot order (f32_slots: acc = acc + y, or
 *          fmaf(y, w, acc) under weight=combine, from acc = 0; bf16_chain: each step rounded to
 *          BF16), then to out_dtype; a token without a valid slot gets +0.
 * FP8_128 (W8A8 block FP8) and W4A8 (MXFP4 weights, E4M3 inputs): h is quantized per group along H
 * (128, or 32 under W4A8 with mid=mxfp8; moects__fused_fp8_groups, the recipe's scale), the
 * intermediate is the mid's codes and scales, and each GEMM element is the recipe's block chain
 * (moects__fused_block_chain, blocks of 128 or 32) over exact block dots (ref/fused_moe_gemm.c).
 * NVFP4 weights: each GEMM's exact rounding times the expert's alpha (w13_alpha, w2_alpha), one FP32
 * multiply, before the bias; mid=nvfp4: GEMM2's times fl(1 / gs) (or fl(fl(1 / gs) * w2_alpha)).
 * Slot validity: without expert_map, 0 <= id < E (an id >= E names no local expert: no
 * contribution); with it, 0 <= id < E_global and expert_map[id] >= 0 (an entry >= E is bad input).
 *
 * Work order, so that memory stays a few GB for T = 8192, H = 7168, I = 2048: tokens in chunks
 * whose per-slot outputs y ([slots][H] FP32) fit Y_BUDGET; in a chunk the valid slots grouped by
 * expert (ascending slot), one expert's weights decoded once (doubles, ref/fused_moe_gemm.c), its
 * slots in row chunks: gather h, dgemm, per row GEMM1's exact rounding, activation and
 * intermediate, dgemm, GEMM2's exact rounding and epilogue; then the combine of the chunk's tokens.
 * Rows, tokens, weight rows and the dgemms' column slabs are split over moects__parallel's threads
 * (OpenBLAS on one thread inside each); every element is exactly rounded, so no result depends on
 * the split, the chunk sizes or the dgemm. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moects_fused_internal.h"
#include "moects_gemm_internal.h"

#define Y_BUDGET ((int64_t)1 << 30)  /* bytes of per-slot outputs held at once */
#define ROW_BUDGET ((int64_t)96 << 20) /* bytes of one row chunk's buffers */
#define ROWS_MAX 512

typedef struct {
    const moects_fused_moe_shape *s;
    const moects_fused_moe_args *a;
    const moects_layer_recipe *r;
    int64_t N1, H, I, k;
    int32_t *slot_e;                 /* [T*k] local expert of each slot, -1: not valid */
    double *b1, *b2, *nb1, *nb2;     /* expert e's W13 [N1][H] and W2 [H][I] decoded; row norms */
    int *lb1, *lb2, *la, *lm;        /* lowest bits of those rows, of A's and M's rows */
    int64_t e, t0, t1;               /* the expert being run; the chunk's tokens */
    const int64_t *rows;             /* the row chunk's slots (global slot index) */
    int64_t nr, rc;                  /* rows in the row chunk; its capacity */
    double *A, *D1, *M, *na, *nm;    /* [rc][H], [rc][N1], [rc][I]; norms of A's, M's rows [rc] */
    double *D2;                      /* GEMM2's d [rc][H]: A's room (A is done with by then) */
    float *g1, *act;                 /* [rc][N1], [rc][I] */
    float *y;                        /* [(t1 - t0) * k][H] per-slot GEMM2 outputs */
    /* FP8_128 only: D1 [rc][N1][H/128], D2 [rc][H][I/128] block dots; A's and M's block scales and
     * NaN flags; W13's and W2's NaN flags; xf [rc][H] the rows of h in FP32 before quantization */
    int fp8;                         /* a block-scaled format (FP8_128, W4A8) */
    int64_t kb1, kb2, blk, G;        /* blocks of K, the block, the inputs' quantization group */
    float *sa1, *sa2, *xf, *sb1, *sb2; /* sb1 [N1][kb1], sb2 [H][kb2]: expert e's weight block scales */
    uint8_t *an1, *an2, *bn1, *bn2;
    int mul1, mul2;                  /* GEMM1's, GEMM2's result multiplied by alpha1, alpha2 (expert e's) */
    float alpha1, alpha2;
} lctx;

static float bf(float v) { return moects__bf16_to_f32(moects__bf16_from_f32(v)); }

static float slot_weight(const lctx *c, int64_t slot)
{
    const float w = c->a->topk_weights[slot];
    return c->r->w_bf16 ? bf(w) : w;
}

/* Rows [id * n / nth, (id + 1) * n / nth) of n. */
static void share(int64_t n, int64_t id, int64_t nth, int64_t *r0, int64_t *r1)
{
    *r0 = id * n / nth;
    *r1 = (id + 1) * n / nth;
}

int moects__fused_bad_recipe(const moects_layer_recipe *r)
{
    return (unsigned)r->w13 > MOECTS_W13_INTERLEAVE8 || (unsigned)r->mid > MOECTS_MID_NVFP4 ||
           (unsigned)r->situ_div > 1 || (unsigned)r->bscale > MOECTS_BSCALE_A_B_ADD ||
           (unsigned)r->weight > MOECTS_WEIGHT_COMBINE || (unsigned)r->combine > MOECTS_COMBINE_F32_ANY ||
           (unsigned)r->g1_bf16 > 1 || (unsigned)r->act_bf16 > 1 || (unsigned)r->sig_rcp > 1 ||
           (unsigned)r->scale_ue8m0 > 1 || (unsigned)r->w_bf16 > 1 || (unsigned)r->slot_bf16 > 1 ||
           (unsigned)r->fn > 4;
}

int moects__fused_bad_shape(const moects_fused_moe_shape *s, const moects_fused_moe_args *a, int need_out)
{
    const int64_t big = (int64_t)1 << 30;
    if (s->T < 0 || s->k < 0 || s->H < 1 || s->inter < 1 || s->E < 1) return 1;
    if (s->T > big || s->k > 4096 || s->H > big || s->inter > big || s->E > big || s->E_global > big) return 1;
    if ((double)s->E * 2.0 * (double)s->inter * (double)s->H > 0x1p60) return 1;
    if (s->has_expert_map && (s->E_global < 1 || !a->expert_map)) return 1;
    if (s->format < MOECTS_LAYER_BF16 || s->format > MOECTS_LAYER_W4A8) return 1;
    if (s->activation < MOECTS_ACT_SILU || s->activation > MOECTS_ACT_SITU) return 1;
    if (s->activation == MOECTS_ACT_SITU && !(s->act_alpha > 0.0f && isfinite(s->act_alpha) && s->act_limit >= 0.0f &&
                                              isfinite(s->act_limit)))
        return 1; /* situ: 0 < a < Inf; L = 0 (none) or finite */
    if (s->out_dtype != MOECTS_BF16 && s->out_dtype != MOECTS_F32) return 1;
    if (s->has_bias && (!a->b13 || !a->b2)) return 1;
    if ((s->format == MOECTS_LAYER_MXFP4 || s->format == MOECTS_LAYER_W4A8) &&
        (s->H % 32 || s->inter % 32 || !a->w13_scale || !a->w2_scale))
        return 1;
    if (s->format == MOECTS_LAYER_NVFP4 &&
        (s->H % 16 || s->inter % 16 || !a->w13_scale || !a->w2_scale || !a->w13_alpha || !a->w2_alpha))
        return 1;
    if (s->format == MOECTS_LAYER_FP8_128 &&
        (s->H % 128 || s->inter % 128 || !a->w13_block_scale || !a->w2_block_scale))
        return 1;
    if (s->T > 0 && (!a->x || (need_out && !a->out))) return 1;
    if (s->T > 0 && s->k > 0 && (!a->topk_ids || !a->topk_weights || !a->w13 || !a->w2)) return 1;
    return 0;
}

void moects__fused_group(const int32_t *slot_e, int64_t sl0, int64_t sl1, int64_t E, int64_t *order, int64_t *cnt)
{
    memset(cnt, 0, (size_t)(E + 1) * sizeof *cnt);
    for (int64_t sl = sl0; sl < sl1; sl++)
        if (slot_e[sl] >= 0) cnt[slot_e[sl] + 1]++;
    for (int64_t e = 0; e < E; e++) cnt[e + 1] += cnt[e]; /* cnt[e]: expert e's first row */
    for (int64_t sl = sl0; sl < sl1; sl++)
        if (slot_e[sl] >= 0) order[cnt[slot_e[sl]]++] = sl; /* cnt[e] -> expert e's end */
}

int moects__fused_route(const moects_fused_moe_shape *s, const moects_fused_moe_args *a, int32_t *slot_e)
{
    for (int64_t slot = 0; slot < s->T * s->k; slot++) {
        const int64_t id = a->topk_ids[slot];
        int64_t e = -1;
        if (!s->has_expert_map) e = id >= 0 && id < s->E ? id : -1;
        else if (id >= 0 && id < s->E_global) e = a->expert_map[id] >= 0 ? a->expert_map[id] : -1;
        if (e >= s->E) return -1;
        slot_e[slot] = (int32_t)e;
    }
    return 0;
}

/* GEMM1's A: h of each row of the row chunk, and |h|. */
static void fill_a(void *p, int64_t id, int64_t nth)
{
    lctx *c = p;
    const int64_t H = c->H;
    int64_t r0, r1;
    share(c->nr, id, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        const uint16_t *x = c->a->x + (c->rows[r] / c->k) * H;
        const float w = slot_weight(c, c->rows[r]);
        double *A = c->A + r * H;
        float *xf = c->fp8 ? c->xf + r * H : NULL;
        for (int64_t h = 0; h < H; h++) {
            float v = moects__bf16_to_f32(x[h]);
            A[h] = c->r->weight == MOECTS_WEIGHT_INPUT ? bf(v * w) : v;
            if (xf) xf[h] = (float)A[h];
        }
        if (c->fp8) { /* W8A8, W4A8: x quantized per group along H, the recipe's FP8 scale */
            moects__fused_block_quant(xf, H, c->G, c->blk, c->r->scale_ue8m0, A, c->sa1 + r * c->kb1);
            moects__fused_fp8_nans(A, 1, H, c->blk, c->an1 + r * c->kb1);
        }
        c->na[r] = moects__fused_norm(A, H, &c->la[r]);
    }
}

/* Block-scaled formats: GEMM1's (row q, column n) and GEMM2's (row q, column h) block chains. */
static float gemm1_fp8(const lctx *c, int64_t q, int64_t n)
{
    return moects__fused_block_chain(c->D1 + (q * c->N1 + n) * c->kb1, c->kb1, c->sa1 + q * c->kb1,
                                     c->an1 + q * c->kb1, c->bn1 + n * c->kb1, c->sb1 + n * c->kb1, c->r->bscale);
}

static float gemm2_fp8(const lctx *c, int64_t q, int64_t h)
{
    return moects__fused_block_chain(c->D2 + (q * c->H + h) * c->kb2, c->kb2, c->sa2 + q * c->kb2,
                                     c->an2 + q * c->kb2, c->bn2 + h * c->kb2, c->sb2 + h * c->kb2, c->r->bscale);
}

/* Row q's intermediates where the args ask for them (moects_fused_moe_args g1_out, act_out, mid_out),
 * at its slot's row: g1, act, and the intermediate's value (block-scaled formats: codes times their
 * block's scale); y_out: stage2. */
static void expose(const lctx *c, int64_t q)
{
    const moects_fused_moe_args *a = c->a;
    const int64_t I = c->I, N1 = c->N1, sl = c->rows[q];
    if (a->g1_out) memcpy(a->g1_out + sl * N1, c->g1 + q * N1, (size_t)N1 * sizeof *c->g1);
    if (a->act_out) memcpy(a->act_out + sl * I, c->act + q * I, (size_t)I * sizeof *c->act);
    for (int64_t i = 0; a->mid_out && i < I; i++)
        a->mid_out[sl * I + i] = c->M[q * I + i] * (c->fp8 ? (double)c->sa2[q * c->kb2 + i / c->blk] : 1.0);
}

/* Per row: GEMM1's outputs (exact rounding, bias, g1 rounding), the activation, the weight where
 * the recipe puts it there, the intermediate. */
static void stage1(void *p, int64_t id, int64_t nth)
{
    lctx *c = p;
    const moects_layer_recipe *r = c->r;
    const int64_t H = c->H, I = c->I, N1 = c->N1;
    int64_t r0, r1;
    share(c->nr, id, nth, &r0, &r1);
    for (int64_t q = r0; q < r1; q++) {
        float *g1 = c->g1 + q * N1, *act = c->act + q * I;
        for (int64_t n = 0; n < N1; n++) {
            float v = c->fp8 ? gemm1_fp8(c, q, n)
                             : moects__fused_dot(c->D1[q * N1 + n], c->na[q] * c->nb1[n], c->la[q] + c->lb1[n],
                                                 c->A + q * H, c->b1 + n * H, H);
            if (c->mul1) v = v * c->alpha1;
            if (c->s->has_bias) v = v + c->a->b13[c->e * N1 + n];
            g1[n] = r->g1_bf16 ? bf(v) : v;
        }
        const float w = slot_weight(c, c->rows[q]);
        for (int64_t i = 0; i < I; i++) {
            int64_t gi = i, ui = i;
            if (c->s->activation != MOECTS_ACT_RELU2) moects__fused_gate_up(r->w13, I, i, &gi, &ui);
            act[i] = moects__fused_act(c->s, r, g1[gi], g1[ui]);
            if (r->weight == MOECTS_WEIGHT_ACT) act[i] = act[i] * w;
        }
        if (c->fp8) { /* GEMM2's A: the FP8 intermediate's codes, its scales apart */
            moects__fused_block_quant(act, I, c->G, c->blk, r->scale_ue8m0, c->M + q * I, c->sa2 + q * c->kb2);
            moects__fused_fp8_nans(c->M + q * I, 1, I, c->blk, c->an2 + q * c->kb2);
        } else if (r->mid == MOECTS_MID_NVFP4) { /* dec(q) * dec(b); 1 / gs is GEMM2's alpha */
            moects__fused_nvfp4_groups(act, I, c->a->mid_global_scale[c->e], c->M + q * I);
        } else {
            moects__fused_mid(r, I, act, c->M + q * I);
        }
        c->nm[q] = moects__fused_norm(c->M + q * I, I, &c->lm[q]);
        expose(c, q);
    }
}

/* Per row: GEMM2's outputs (exact rounding, bias, the weight in the epilogue, slot rounding) into
 * the chunk's y, and y_out where the args ask for it. */
static void stage2(void *p, int64_t id, int64_t nth)
{
    lctx *c = p;
    const moects_layer_recipe *r = c->r;
    const int64_t H = c->H, I = c->I;
    int64_t r0, r1;
    share(c->nr, id, nth, &r0, &r1);
    for (int64_t q = r0; q < r1; q++) {
        float *y = c->y + (c->rows[q] - c->t0 * c->k) * H;
        const float w = slot_weight(c, c->rows[q]);
        for (int64_t h = 0; h < H; h++) {
            float v = c->fp8 ? gemm2_fp8(c, q, h)
                             : moects__fused_dot(c->D2[q * H + h], c->nm[q] * c->nb2[h], c->lm[q] + c->lb2[h],
                                                 c->M + q * I, c->b2 + h * I, I);
            if (c->mul2) v = v * c->alpha2;
            if (c->s->has_bias) v = v + c->a->b2[c->e * H + h];
            if (r->weight == MOECTS_WEIGHT_GEMM2) v = v * w;
            y[h] = r->slot_bf16 ? bf(v) : v;
        }
        if (c->a->y_out) memcpy(c->a->y_out + c->rows[q] * H, y, (size_t)H * sizeof *y);
    }
}

/* d = a b^T: per block (block-scaled formats) or whole. */
static int gemm(const lctx *c, int64_t M, int64_t N, int64_t K, const double *a, const double *b, double *d)
{
    return c->fp8 ? moects__fused_dgemm_blocks(M, N, K, c->blk, a, b, d) : moects__fused_dgemm(M, N, K, a, b, d);
}

/* One row chunk of expert c->e: c->nr slots at c->rows. 0, or -1 out of memory. */
static int run_rows(lctx *c)
{
    moects__parallel(c->nr, fill_a, c);
    if (gemm(c, c->nr, c->N1, c->H, c->A, c->b1, c->D1)) return -1;
    moects__parallel(c->nr, stage1, c);
    if (gemm(c, c->nr, c->H, c->I, c->M, c->b2, c->D2)) return -1;
    moects__parallel(c->nr, stage2, c);
    return 0;
}

/* Expert e's GEMM result factors: NVFP4 weights' alphas; mid=nvfp4's fl(1 / gs), times W2's alpha. */
static void expert_alphas(lctx *c, int64_t e)
{
    const int nv = c->s->format == MOECTS_LAYER_NVFP4, nvm = c->r->mid == MOECTS_MID_NVFP4;
    c->mul1 = nv, c->mul2 = nv || nvm;
    c->alpha1 = nv ? c->a->w13_alpha[e] : 1.0f;
    const float rg = nvm ? 1.0f / c->a->mid_global_scale[e] : 1.0f;
    c->alpha2 = nv && nvm ? rg * c->a->w2_alpha[e] : nv ? c->a->w2_alpha[e] : rg;
}

/* out[t] for the chunk's tokens from their slots' y. */
static void combine(void *p, int64_t id, int64_t nth)
{
    lctx *c = p;
    const int64_t H = c->H, k = c->k;
    const int fma_w = c->r->weight == MOECTS_WEIGHT_COMBINE, chain = c->r->combine == MOECTS_COMBINE_BF16_CHAIN;
    int64_t r0, r1;
    share(c->t1 - c->t0, id, nth, &r0, &r1);
    for (int64_t t = c->t0 + r0; t < c->t0 + r1; t++) {
        const float *y = c->y + (t - c->t0) * k * H;
        for (int64_t h = 0; h < H; h++) {
            float acc = 0.0f;
            for (int64_t j = 0; j < k; j++) {
                if (c->slot_e[t * k + j] < 0) continue;
                const float v = fma_w ? fmaf(y[j * H + h], slot_weight(c, t * k + j), acc) : acc + y[j * H + h];
                acc = chain ? bf(v) : v;
            }
            if (c->s->out_dtype == MOECTS_BF16) ((uint16_t *)c->a->out)[t * H + h] = moects__bf16_from_f32(acc);
            else ((float *)c->a->out)[t * H + h] = acc;
        }
    }
}

/* Tokens [c->t0, c->t1): the slots by expert (order: [nslots], cnt: [E + 1]), each expert's rows in
 * row chunks, then the combine. 0, or -1 out of memory. */
static int run_chunk(lctx *c, int64_t *order, int64_t *cnt)
{
    const moects_fused_moe_shape *s = c->s;
    const int64_t sl0 = c->t0 * c->k, sl1 = c->t1 * c->k;
    moects__fused_group(c->slot_e, sl0, sl1, s->E, order, cnt);
    for (int64_t e = 0, first = 0; e < s->E; first = cnt[e++]) {
        if (cnt[e] == first) continue;
        c->e = e;
        moects__fused_decode(c->a->w13, c->a->w13_scale, s->format, e, c->N1, c->H, c->b1, c->nb1, c->lb1);
        moects__fused_decode(c->a->w2, c->a->w2_scale, s->format, e, c->H, c->I, c->b2, c->nb2, c->lb2);
        if (c->fp8) {
            moects__fused_fp8_nans(c->b1, c->N1, c->H, c->blk, c->bn1), moects__fused_fp8_nans(c->b2, c->H, c->I, c->blk, c->bn2);
            moects__fused_block_scales(s, c->a, 0, e, c->sb1), moects__fused_block_scales(s, c->a, 1, e, c->sb2);
        }
        expert_alphas(c, e);
        for (int64_t r0 = first; r0 < cnt[e]; r0 += c->rc) {
            c->rows = order + r0;
            c->nr = cnt[e] - r0 < c->rc ? cnt[e] - r0 : c->rc;
            if (run_rows(c)) return -1;
        }
    }
    moects__parallel(c->t1 - c->t0, combine, c);
    return 0;
}

/* n elements of sz bytes at *base + *used (base NULL: counting only); *used grows by their size
 * rounded up to 8 bytes. */
static void *carve(char **base, size_t *used, int64_t n, size_t sz)
{
    void *r = *base ? *base + *used : NULL;
    *used += ((size_t)n * sz + 7) & ~(size_t)7;
    return r;
}

/* Every buffer of the run in one block at base (NULL: just its size, returned). */
static size_t layout(lctx *c, char *base, int64_t tc, int64_t **order, int64_t **cnt)
{
    const int64_t T = c->s->T, k = c->k, H = c->H, I = c->I, N1 = c->N1, rc = c->rc;
    size_t u = 0;
    c->b1 = carve(&base, &u, N1 * H, 8), c->b2 = carve(&base, &u, H * I, 8);
    c->nb1 = carve(&base, &u, N1, 8), c->nb2 = carve(&base, &u, H, 8);
    c->lb1 = carve(&base, &u, N1, sizeof(int)), c->lb2 = carve(&base, &u, H, sizeof(int));
    const int64_t kb1 = c->kb1, kb2 = c->kb2;
    c->A = c->D2 = carve(&base, &u, rc * H, 8); /* GEMM2's d: A is done with by then */
    if (c->fp8) c->D2 = carve(&base, &u, rc * H * kb2, 8);
    c->D1 = carve(&base, &u, rc * N1 * kb1, 8), c->M = carve(&base, &u, rc * I, 8);
    c->sa1 = carve(&base, &u, rc * kb1, 4), c->sa2 = carve(&base, &u, rc * kb2, 4);
    c->an1 = carve(&base, &u, rc * kb1, 1), c->an2 = carve(&base, &u, rc * kb2, 1);
    c->bn1 = carve(&base, &u, N1 * kb1, 1), c->bn2 = carve(&base, &u, H * kb2, 1);
    c->sb1 = carve(&base, &u, c->fp8 ? N1 * kb1 : 0, 4), c->sb2 = carve(&base, &u, c->fp8 ? H * kb2 : 0, 4);
    c->xf = carve(&base, &u, c->fp8 ? rc * H : 0, 4);
    c->na = carve(&base, &u, rc, 8), c->nm = carve(&base, &u, rc, 8);
    c->la = carve(&base, &u, rc, sizeof(int)), c->lm = carve(&base, &u, rc, sizeof(int));
    c->g1 = carve(&base, &u, rc * N1, 4), c->act = carve(&base, &u, rc * I, 4);
    c->y = carve(&base, &u, tc * k * H, 4);
    c->slot_e = carve(&base, &u, T * k, 4);
    *order = carve(&base, &u, tc * k, 8), *cnt = carve(&base, &u, c->s->E + 1, 8);
    return u;
}

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Row and token chunk sizes (MOECTS_FUSED_REF_CHUNK="tokens,rows", for tests, caps them) and every
 * buffer: the block to free, or NULL. */
static void *alloc_all(lctx *c, int64_t *tc, int64_t **order, int64_t **cnt)
{
    const int64_t T = c->s->T, H = c->H, per_row = (H + c->N1 * c->kb1 + c->I + 2) * 8 + (c->N1 + c->I) * 4 +
                                                   (c->fp8 ? (H * c->kb2 * 8 + H * 4 + 10) : 0);
    long long cap_t = T, cap_r = ROWS_MAX;
    const char *cap = getenv("MOECTS_FUSED_REF_CHUNK");
    if (cap && sscanf(cap, "%lld,%lld", &cap_t, &cap_r) != 2) cap_t = T, cap_r = ROWS_MAX;
    c->rc = clamp64(ROW_BUDGET / per_row, 1, clamp64(cap_r, 1, ROWS_MAX));
    *tc = clamp64(Y_BUDGET / (c->k * H * 4), 1, clamp64(cap_t, 1, T));
    char *block = malloc(layout(c, NULL, *tc, order, cnt));
    if (block) layout(c, block, *tc, order, cnt);
    return block;
}

int moects__ref_fused_moe(const moects_fused_moe_shape *s, const moects_fused_moe_args *a,
                          const moects_layer_recipe *r)
{
    if (!s || !a || !r || moects__fused_bad_recipe(r) || moects__fused_bad_shape(s, a, 1) || moects__layer_recipe_inexact(r, s)) return -1;
    if (r->mid == MOECTS_MID_NVFP4 && s->T > 0 && s->k > 0 && !a->mid_global_scale) return -1;
    lctx c = {.s = s, .a = a, .r = r, .H = s->H, .I = s->inter, .k = s->k};
    c.N1 = s->activation == MOECTS_ACT_RELU2 ? s->inter : 2 * s->inter;
    c.blk = moects__fused_blk(s->format), c.fp8 = c.blk != 0, c.G = moects__fused_in_group(s->format, r);
    c.kb1 = c.fp8 ? s->H / c.blk : 1, c.kb2 = c.fp8 ? s->inter / c.blk : 1;
    if (s->T == 0) return 0;
    if (s->k == 0) { /* no slot: every output +0 */
        memset(a->out, 0, (size_t)(s->T * s->H) * (s->out_dtype == MOECTS_BF16 ? 2 : 4));
        return 0;
    }
    int64_t tc, *order, *cnt;
    void *block = alloc_all(&c, &tc, &order, &cnt);
    if (!block) return -1;
    int rc = moects__fused_route(s, a, c.slot_e);
    for (int64_t t0 = 0; rc == 0 && t0 < s->T; t0 += tc) {
        c.t0 = t0;
        c.t1 = s->T - t0 < tc ? s->T : t0 + tc;
        rc = run_chunk(&c, order, cnt);
    }
    free(block);
    return rc;
}
