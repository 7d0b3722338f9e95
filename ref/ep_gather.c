/* ep_gather.c: the ep_gather (MoE combine) reference, DESIGN.md "Numeric recipes":
 * ep_gather.fma_v1, ep_gather.muladd_v1 and ep_gather.exact_v1. Plain C, explicit fmaf, no BLAS
 * (ref/ is built with -ffp-contract=off, so a*b+c below is two roundings). */
#include <math.h>
#include <stdlib.h>

#include "moects_exact.h"
#include "moects_ref.h"

/* Slot (t, j) validity (DESIGN.md): without a map, id >= 0; with a map, 0 <= id < E_global and
 * expert_map[id] >= 0. Reads only topk_ids and expert_map. */
static int slot_valid(const moects_ep_gather_shape *s, const moects_ep_gather_args *a, int64_t slot)
{
    int64_t id = s->id_dtype == MOECTS_I64 ? ((const int64_t *)a->topk_ids)[slot]
                                           : (int64_t)((const int32_t *)a->topk_ids)[slot];
    if (!s->has_expert_map) return id >= 0;
    return id >= 0 && id < s->E_global && a->expert_map[id] >= 0;
}

static int shape_ok(const moects_ep_gather_shape *s, const moects_ep_gather_args *a)
{
    if (!s || !a) return 0;
    if (s->T < 0 || s->k < 0 || s->M_sum < 0 || s->H < 0 || s->E_global < 0) return 0;
    if (s->id_dtype != MOECTS_I32 && s->id_dtype != MOECTS_I64) return 0;
    if (s->out_dtype != MOECTS_BF16 && s->out_dtype != MOECTS_F32) return 0;
    /* element counts must fit in int64 */
    if (s->k && s->T > INT64_MAX / s->k) return 0;
    if (s->H && (s->T > INT64_MAX / s->H || s->M_sum > INT64_MAX / s->H)) return 0;
    if (s->T == 0) return 1;
    if (s->k && (!a->topk_ids || !a->topk_weights || !a->input_index)) return 0;
    if (s->has_expert_map && s->k && s->E_global && !a->expert_map) return 0;
    if (s->H && (!a->out || (s->M_sum && !a->x))) return 0;
    return 1;
}

int moects__ref_ep_gather(const moects_ep_gather_shape *s, const moects_ep_gather_args *a,
                         moects_recipe recipe)
{
    if (recipe != MOECTS_RECIPE_EXACT_V1 && recipe != MOECTS_RECIPE_EPG_FMA_V1 &&
        recipe != MOECTS_RECIPE_EPG_MULADD_V1)
        return -1;
    if (!shape_ok(s, a)) return -1;
    const int64_t T = s->T, k = s->k, H = s->H;
    if (T == 0 || H == 0) return 0;
    /* Every valid slot's row must lie in [0, M_sum): checked before anything is written. */
    for (int64_t slot = 0; slot < T * k; slot++)
        if (slot_valid(s, a, slot) && (a->input_index[slot] < 0 || a->input_index[slot] >= s->M_sum))
            return -1;

    int64_t *rows = malloc((size_t)(k ? k : 1) * sizeof *rows);
    float *w = malloc((size_t)(k ? k : 1) * sizeof *w);
    float *acc = recipe == MOECTS_RECIPE_EXACT_V1 ? NULL : malloc((size_t)H * sizeof *acc);
    if (!rows || !w || (recipe != MOECTS_RECIPE_EXACT_V1 && !acc)) {
        free(rows);
        free(w);
        free(acc);
        return -1;
    }
    for (int64_t t = 0; t < T; t++) {
        int64_t nv = 0; /* valid slots of token t, ascending j */
        for (int64_t j = 0; j < k; j++)
            if (slot_valid(s, a, t * k + j)) {
                rows[nv] = a->input_index[t * k + j];
                w[nv++] = a->topk_weights[t * k + j];
            }
        uint16_t *ob = (uint16_t *)a->out + t * H;
        float *of = (float *)a->out + t * H;
        if (recipe == MOECTS_RECIPE_EXACT_V1) {
            for (int64_t d = 0; d < H; d++) {
                moects_xsum xs;
                moects__xsum_init(&xs);
                for (int64_t i = 0; i < nv; i++) /* bf16 * fp32: 8 + 24 bits, exact in double */
                    moects__xsum_add(&xs, (double)moects__bf16_to_f32(a->x[rows[i] * H + d]) * (double)w[i]);
                if (s->out_dtype == MOECTS_F32) of[d] = moects__xsum_round_f32(&xs);
                else ob[d] = moects__xsum_round_bf16(&xs);
            }
            continue;
        }
        for (int64_t d = 0; d < H; d++) acc[d] = 0.0f;
        for (int64_t i = 0; i < nv; i++) {
            const uint16_t *xr = a->x + rows[i] * H; /* 64-bit offset */
            if (recipe == MOECTS_RECIPE_EPG_FMA_V1)
                for (int64_t d = 0; d < H; d++) acc[d] = fmaf(moects__bf16_to_f32(xr[d]), w[i], acc[d]);
            else
                for (int64_t d = 0; d < H; d++) {
                    float p = moects__bf16_to_f32(xr[d]) * w[i]; /* rounded to FP32 */
                    acc[d] = acc[d] + p;                        /* rounded again */
                }
        }
        for (int64_t d = 0; d < H; d++) {
            if (s->out_dtype == MOECTS_F32) of[d] = acc[d];
            else ob[d] = moects__bf16_from_f32(acc[d]);
        }
    }
    free(rows);
    free(w);
    free(acc);
    return 0;
}
