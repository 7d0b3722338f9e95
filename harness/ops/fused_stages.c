/* fused_stages.c: the fused_moe op's exposed intermediates (moects__op_def.stages; docs/fused_moe.md
 * "Exposed intermediates"): the four stages a layer kernel with MOECTS_KERNEL_INTERMEDIATES may write
 * (moects_fused_moe_args g1_out, act_out, mid_out, y_out; one row per slot, valid slots compared) and
 * their reference: the exact reference's values (ref/fused_moe.c) for an exact claim, or for a bounded
 * one the enclosure's per-stage intervals with the accumulation check's inputs of GEMM1's and GEMM2's
 * stages (ref/fused_enclosure.c, moects__ref_fused_moe_enclosure_stages). The judge
 * (harness/judge/stages.c) compares. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moects_harness.h"
#include "moects_layer.h"
#include "moects_op.h"
#include "ops_internal.h"

/* 1 when slot sl (t * k + j) has an expert here (moects_fused_moe_args: the map's rule). */
static int slot_valid(const moects_inputs *in, int64_t sl)
{
    const moects_fused_moe_shape *s = &in->fm;
    const int32_t id = ((const int32_t *)in->t[MOECTS_FM_IDS].host)[sl];
    const int32_t *map = in->t[MOECTS_FM_MAP].host;
    if (id < 0) return 0;
    if (!s->has_expert_map) return id < s->E;
    return id < s->E_global && map[id] >= 0 && map[id] < s->E;
}

/* The four stages' geometry under recipe lr, and the valid rows. 0, or -2 out of memory. */
static int geometry(const moects_inputs *in, const moects_layer_recipe *lr, moects__stages *st)
{
    const moects_fused_moe_shape *s = &in->fm;
    const int64_t I = s->inter, N1 = s->activation == MOECTS_ACT_RELU2 ? I : 2 * I;
    const moects_dtype g1r = lr->g1_bf16 ? MOECTS_BF16 : MOECTS_F32, yr = lr->slot_bf16 ? MOECTS_BF16 : MOECTS_F32;
    memset(st, 0, sizeof *st);
    st->n = 4, st->rows = s->T * s->k, st->group = s->k;
#define STAGE(nm, ar, field, n, f8, rnd, k) \
    (moects__stage) { .name = nm, .arg = ar, .arg_off = offsetof(moects_op_args, fm.field), .cols = n, .f64 = f8, .round = rnd, .K = k }
    st->s[0] = STAGE("gemm1", "g1_out", g1_out, N1, 0, g1r, s->H);
    st->s[1] = STAGE("act", "act_out", act_out, I, 0, 0, 0);
    st->s[2] = STAGE("mid", "mid_out", mid_out, I, 1, 0, 0);
    st->s[3] = STAGE("gemm2", "y_out", y_out, s->H, 0, yr, I);
#undef STAGE
    if (!(st->valid = malloc((size_t)st->rows + 1))) return -2;
    for (int64_t r = 0; r < st->rows; r++) st->valid[r] = (uint8_t)slot_valid(in, r);
    return 0;
}

/* a's stage pointers at bufs[0..4). */
static void bind_stages(moects_op_args *a, const moects__stages *st, void *const *bufs)
{
    for (int i = 0; i < st->n; i++) memcpy((char *)a + st->s[i].arg_off, &bufs[i], sizeof(void *));
}

/* The exact reference's stages (the exact point of recipe lr) into want. 0, -1, -2. */
static int exact(const moects_inputs *in, const moects_layer_recipe *lr, moects__stages *st, char *why, size_t cap)
{
    moects_layer_recipe point = *lr;
    if (point.combine == MOECTS_COMBINE_F32_ANY) point.combine = MOECTS_COMBINE_F32_SLOTS;
    point.fn = 0;
    void *out = calloc(in->out_bytes + 1, 1), *bufs[MOECTS_STAGES_MAX];
    int rc = out ? 0 : -2;
    for (int i = 0; i < st->n && rc == 0; i++) rc = (bufs[i] = st->s[i].want = calloc(moects__stage_bytes(st, i) + 1, 1)) ? 0 : -2;
    moects_op_args a;
    moects__host_args(in, out, &a);
    if (rc == 0) bind_stages(&a, st, bufs);
    if (rc == 0 && moects__ref_fused_moe(&in->fm, &a.fm, &point))
        rc = -1, snprintf(why, cap, "the exact reference refused the stages");
    free(out);
    return rc;
}

/* Stats arrays [n] into *b: 0, or -2. */
static int stats_alloc(moects_bound_stats *b, size_t n)
{
    *b = (moects_bound_stats){malloc(n * 8 + 8), malloc(n * 4 + 4), malloc(n * 4 + 4)};
    return b->x && b->det && b->sigma ? 0 : -2;
}

/* The enclosure's stages of recipe lr under class cls into lo, hi; the GEMM stages' accumulation
 * check inputs (GEMM2's from the kernel's intermediate mid, when given). 0, -1, -2. */
static int enclosure(const moects_inputs *in, const moects_layer_recipe *lr, const moects_acc_class *cls,
                     const double *mid, moects__stages *st, char *why, size_t cap)
{
    const moects_layer_claim cl = {cls->bits, cls->truncation, moects__layer_fn_ulp(lr)};
    void *lo = malloc(in->out_bytes + 1), *hi = malloc(in->out_bytes + 1);
    int rc = lo && hi ? 0 : -2;
    for (int i = 0; i < st->n && rc == 0; i++) {
        const size_t b = moects__stage_bytes(st, i);
        rc = (st->s[i].lo = malloc(b + 1)) && (st->s[i].hi = malloc(b + 1)) ? 0 : -2;
    }
    const size_t n1 = (size_t)(st->rows * st->s[0].cols), n2 = (size_t)(st->rows * st->s[3].cols);
    if (rc == 0) rc = stats_alloc(&st->s[0].st, n1);
    if (rc == 0 && mid) rc = stats_alloc(&st->s[3].st, n2);
    moects_op_args a;
    moects__host_args(in, lo, &a);
    const moects_layer_stages ls = {st->s[0].lo, st->s[0].hi, st->s[1].lo, st->s[1].hi, st->s[2].lo, st->s[2].hi,
                                    st->s[3].lo, st->s[3].hi, st->s[0].st, st->s[3].st, mid};
    if (rc == 0 && cls->bf16_splits > 1) rc = -1, snprintf(why, cap, "a layer claim has no split-K class");
    else if (rc == 0 && moects__ref_fused_moe_enclosure_stages(&in->fm, &a.fm, lr, &cl, lo, hi, NULL, &ls))
        rc = -1, snprintf(why, cap, "the enclosure refused the stages");
    free(lo), free(hi);
    return rc;
}

int moects__fused_stages(const moects_inputs *in, moects_recipe r, const moects_acc_class *cls, const void *const *got,
                         moects__stages *st, char *why, size_t cap)
{
    const moects_layer_recipe *lr = moects__layer_recipe_of(r);
    memset(st, 0, sizeof *st);
    if (!lr) return snprintf(why, cap, "not a layer recipe"), -1;
    int rc = geometry(in, lr, st);
    if (rc == 0 && got) rc = cls ? enclosure(in, lr, cls, got[2], st, why, cap) : exact(in, lr, st, why, cap);
    if (rc == -2) snprintf(why, cap, MOECTS_HOST_OOM " (the stages' reference)");
    if (rc) moects__stages_free(st);
    return rc;
}
