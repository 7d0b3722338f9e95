/* fused_stages.c: the fused_moe op's exposed intermediates (moects__op_def.stages; docs/fused_moe.md
 * "Exposed intermediates"): a layer kernel with MOECTS_KERNEL_INTERMEDIATES that failed an exact claim
 * runs once more with g1_out, act_out and mid_out asked for, the exact reference (ref/fused_moe.c)
 * fills the same, and the first stage, in the layer's order, whose values differ is named. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moects_harness.h"
#include "moects_layer.h"
#include "moects_op.h"
#include "ops_internal.h"

/* One side's intermediates ([T * k] rows of N1, I, I) and output. */
typedef struct {
    float *g1, *act;
    double *mid;
    void *out;
} stage_bufs;

static void bufs_free(stage_bufs *b) { free(b->g1), free(b->act), free(b->mid), free(b->out); }

static int bufs_alloc(const moects_inputs *in, int64_t n1, stage_bufs *b)
{
    const size_t slots = (size_t)(in->fm.T * in->fm.k), I = (size_t)in->fm.inter;
    b->g1 = calloc(slots * (size_t)n1 + 1, sizeof *b->g1);
    b->act = calloc(slots * I + 1, sizeof *b->act);
    b->mid = calloc(slots * I + 1, sizeof *b->mid);
    b->out = calloc(in->out_bytes + 1, 1);
    return b->g1 && b->act && b->mid && b->out ? 0 : -2;
}

static void ask(moects_op_args *a, const stage_bufs *b)
{
    a->fm.g1_out = b->g1, a->fm.act_out = b->act, a->fm.mid_out = b->mid;
}

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

/* The first element (slot row, column) of a [T * k, n] stage whose values differ (bits; NaN equals
 * NaN), valid slots only, into *sl, *col: 1, or 0 none. */
static int first_off(const moects_inputs *in, const float *gf, const float *wf, const double *gd, const double *wd,
                     int64_t n, int64_t *sl, int64_t *col)
{
    for (int64_t r = 0; r < in->fm.T * in->fm.k; r++) {
        if (!slot_valid(in, r)) continue;
        for (int64_t i = 0; i < n; i++) {
            const double g = gf ? gf[r * n + i] : gd[r * n + i], w = wf ? wf[r * n + i] : wd[r * n + i];
            if ((g == w && signbit(g) == signbit(w)) || (g != g && w != w)) continue;
            *sl = r, *col = i;
            return 1;
        }
    }
    return 0;
}

/* msg: the first of gemm1, act, mid that differs between kernel kb and reference rb. */
static void name_stage(const moects_inputs *in, int64_t n1, const stage_bufs *kb, const stage_bufs *rb, char *msg,
                       size_t cap)
{
    const int64_t I = in->fm.inter, k = in->fm.k;
    static const char *const names[3] = {"gemm1", "act", "mid"};
    for (int st = 0; st < 3; st++) {
        int64_t sl, col, n = st == 0 ? n1 : I;
        const int off = st == 0   ? first_off(in, kb->g1, rb->g1, NULL, NULL, n, &sl, &col)
                        : st == 1 ? first_off(in, kb->act, rb->act, NULL, NULL, n, &sl, &col)
                                  : first_off(in, NULL, NULL, kb->mid, rb->mid, n, &sl, &col);
        if (!off) continue;
        const double g = st == 0 ? kb->g1[sl * n + col] : st == 1 ? kb->act[sl * n + col] : kb->mid[sl * n + col];
        const double w = st == 0 ? rb->g1[sl * n + col] : st == 1 ? rb->act[sl * n + col] : rb->mid[sl * n + col];
        snprintf(msg, cap, "first stage off: %s, slot (t %" PRId64 ", j %" PRId64 "), column %" PRId64 ": got %.9g, exact %.9g",
                 names[st], sl / k, sl % k, col, g, w);
        return;
    }
    snprintf(msg, cap, "first stage off: after the intermediate (gemm1, act and mid exact: GEMM2, its epilogue or the combine)");
}

int moects__fused_stages(const moects_inputs *in, moects_recipe r, int (*run)(void *ctx, const void *shape, const void *args),
                         void *ctx, char *msg, size_t cap)
{
    const moects_layer_recipe *lr = moects__layer_recipe_of(r);
    if (!lr) return snprintf(msg, cap, "intermediates not compared: not a layer recipe"), -1;
    moects_layer_recipe point = *lr;
    if (point.combine == MOECTS_COMBINE_F32_ANY) point.combine = MOECTS_COMBINE_F32_SLOTS;
    point.fn = 0;
    const int64_t n1 = in->fm.activation == MOECTS_ACT_RELU2 ? in->fm.inter : 2 * in->fm.inter;
    stage_bufs kb = {0}, rb = {0};
    int rc = bufs_alloc(in, n1, &kb);
    if (!rc) rc = bufs_alloc(in, n1, &rb);
    if (rc) return bufs_free(&kb), bufs_free(&rb), snprintf(msg, cap, "intermediates not compared: " MOECTS_HOST_OOM), -2;
    void *ptr[MOECTS_INPUTS_MAX] = {0};
    for (int i = 0; i < in->nt; i++) ptr[i] = in->t[i].host;
    moects_op_args ka, ra;
    moects__inputs_bind(in, ptr, kb.out, &ka);
    moects__host_args(in, rb.out, &ra);
    ask(&ka, &kb), ask(&ra, &rb);
    if (run(ctx, &in->fm, &ka)) rc = -1, snprintf(msg, cap, "intermediates not compared: the kernel's run with them failed");
    else if (moects__ref_fused_moe(&in->fm, &ra.fm, &point))
        rc = -1, snprintf(msg, cap, "intermediates not compared: the reference refused them");
    else name_stage(in, n1, &kb, &rb, msg, cap);
    bufs_free(&kb), bufs_free(&rb);
    return rc;
}
