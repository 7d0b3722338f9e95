/* ep_dispatch_judge.c: ep_dispatch_combine's verdict (moects__op_def.judge; docs/ep_dispatch_combine.md
 * "Verdict"): per rank, the count of received rows, the rows and their sources in the declared order
 * (order=expert) or as a set with the sources the kernel returned (order=any), then every combined output
 * bit for bit (NaN equal to any NaN). The output buffer's parts: harness/ops/ep_dispatch_combine.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moects_edc.h"
#include "moects_harness.h"
#include "moects_op.h"
#include "ops_internal.h"

typedef struct {
    const uint16_t *out, *recv_x;
    const int64_t *recv_src, *recv_count;
} parts;

typedef struct {
    int64_t bad;        /* mismatches: a wrong count, a received row, a combined element */
    int first;          /* 1 once the first is described */
    moects_result *r;
} tally;

static parts parts_of(const moects_inputs *in, const void *buf)
{
    const unsigned char *b = buf;
    return (parts){.out = buf, .recv_x = (const uint16_t *)(b + in->ed_off_recv_x),
                   .recv_src = (const int64_t *)(b + in->ed_off_recv_src),
                   .recv_count = (const int64_t *)(b + in->ed_off_recv_count)};
}

static int bf16_same(uint16_t a, uint16_t b)
{
    const int na = (a & 0x7f80) == 0x7f80 && (a & 0x7f), nb = (b & 0x7f80) == 0x7f80 && (b & 0x7f);
    return a == b || (na && nb);
}

/* One mismatch; the first one's words go into the result. */
static void miss(tally *t, int64_t index, const char *what, const char *got, const char *want)
{
    t->bad++;
    if (t->first) return;
    t->first = 1;
    t->r->first_index = index;
    snprintf(t->r->reason, sizeof t->r->reason, "%s", what);
    snprintf(t->r->got, sizeof t->r->got, "%s", got);
    snprintf(t->r->want, sizeof t->r->want, "%s", want);
}

/* Received row i of the got buffer against row j of want's, of rank r: the source and the bits. */
static void row_check(const moects_inputs *in, const parts *g, const parts *w, int64_t i, int64_t j, int64_t r,
                      tally *t)
{
    const int64_t H = in->ed.H;
    char what[200], gs[64], ws[64];
    if (g->recv_src[i] != w->recv_src[j]) {
        snprintf(what, sizeof what, "rank %lld, received row %lld: another slot than the declared order's",
                 (long long)r, (long long)(i - in->ed_recv_first[r]));
        snprintf(gs, sizeof gs, "slot %lld", (long long)g->recv_src[i]);
        snprintf(ws, sizeof ws, "slot %lld", (long long)w->recv_src[j]);
        return miss(t, i, what, gs, ws);
    }
    for (int64_t d = 0; d < H; d++)
        if (g->recv_x[i * H + d] != w->recv_x[j * H + d]) {
            snprintf(what, sizeof what, "rank %lld, received row %lld (slot %lld), column %lld: not the token's bits",
                     (long long)r, (long long)(i - in->ed_recv_first[r]), (long long)g->recv_src[i], (long long)d);
            snprintf(gs, sizeof gs, "0x%04x", g->recv_x[i * H + d]);
            snprintf(ws, sizeof ws, "0x%04x", w->recv_x[j * H + d]);
            return miss(t, i, what, gs, ws);
        }
}

typedef struct {
    int64_t src, i;
} keyed;

static int cmp_keyed(const void *a, const void *b)
{
    const keyed *x = a, *y = b;
    return x->src < y->src ? -1 : x->src > y->src;
}

/* order=any: got's rows of rank r matched to want's by their sources (sorted); a source the reference
 * has not, or lacks, is one mismatch. -1 out of memory. */
static int set_check(const moects_inputs *in, const parts *g, const parts *w, int64_t r, tally *t)
{
    const int64_t lo = in->ed_recv_first[r], n = in->ed_recv_first[r + 1] - lo;
    keyed *a = malloc((size_t)(n ? n : 1) * sizeof *a), *b = malloc((size_t)(n ? n : 1) * sizeof *b);
    if (!a || !b) return free(a), free(b), -1;
    for (int64_t i = 0; i < n; i++) a[i] = (keyed){g->recv_src[lo + i], lo + i}, b[i] = (keyed){w->recv_src[lo + i], lo + i};
    qsort(a, (size_t)n, sizeof *a, cmp_keyed);
    qsort(b, (size_t)n, sizeof *b, cmp_keyed);
    for (int64_t i = 0; i < n; i++) row_check(in, g, w, a[i].i, b[i].i, r, t);
    free(a);
    free(b);
    return 0;
}

/* Every rank's count and rows. -1 out of memory. */
static int recv_check(const moects_inputs *in, const parts *g, const parts *w, int any, tally *t)
{
    for (int64_t r = 0; r < in->ed.world; r++) {
        const int64_t lo = in->ed_recv_first[r], n = in->ed_recv_first[r + 1] - lo;
        if (g->recv_count[r] != n) {
            char what[160], gs[64], ws[64];
            snprintf(what, sizeof what, "rank %lld received another count of rows than the reference", (long long)r);
            snprintf(gs, sizeof gs, "%lld rows", (long long)g->recv_count[r]);
            snprintf(ws, sizeof ws, "%lld rows", (long long)n);
            miss(t, -1, what, gs, ws);
            continue;
        }
        if (any && set_check(in, g, w, r, t)) return -1;
        for (int64_t i = lo; !any && i < lo + n; i++) row_check(in, g, w, i, i, r, t);
    }
    return 0;
}

/* The combined outputs, element by element. */
static void out_check(const moects_inputs *in, const parts *g, const parts *w, tally *t)
{
    const int64_t H = in->ed.H, n = in->ed.T_total * H;
    for (int64_t i = 0; i < n; i++) {
        if (bf16_same(g->out[i], w->out[i])) continue;
        char what[200], gs[64], ws[64];
        snprintf(what, sizeof what, "combined token %lld (global), column %lld", (long long)(i / H), (long long)(i % H));
        snprintf(gs, sizeof gs, "0x%04x (%g)", g->out[i], (double)moects__bf16_to_f32(g->out[i]));
        snprintf(ws, sizeof ws, "0x%04x (%g)", w->out[i], (double)moects__bf16_to_f32(w->out[i]));
        miss(t, i, what, gs, ws);
    }
}

int moects__ed_judge(const moects_inputs *in, const char *recipe, const void *got, const void *want, moects_result *r)
{
    moects_recipe rc;
    int any = 0;
    if (moects__edc_recipe_parse(recipe, &rc, &any)) {
        r->verdict = MOECTS_FAIL_CRASH;
        return snprintf(r->reason, sizeof r->reason, "the kernel's recipe is not ep_dispatch_combine.fma_v1 or "
                        "muladd_v1 with (order=expert) or (order=any)"), 0;
    }
    const parts g = parts_of(in, got), w = parts_of(in, want);
    tally t = {0, 0, r};
    char first[400];
    r->first_index = -1;
    if (recv_check(in, &g, &w, any, &t)) {
        r->verdict = MOECTS_FAIL_CRASH;
        return snprintf(r->reason, sizeof r->reason, "out of memory"), any;
    }
    out_check(in, &g, &w, &t);
    r->mismatches = t.bad;
    r->verdict = t.bad ? MOECTS_FAIL_MISMATCH : MOECTS_PASS_EXACT;
    if (t.bad) {
        snprintf(first, sizeof first, "%.399s", r->reason);
        snprintf(r->reason, sizeof r->reason, "%lld mismatches (counts, received rows, combined elements); first: %.400s",
                 (long long)t.bad, first);
    } else if (any) {
        snprintf(r->reason, sizeof r->reason, "received rows compared as a set by their slots (order=any)");
    }
    return any;
}
