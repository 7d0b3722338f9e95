/* ep_dispatch.c: the CPU ep_dispatch_combine kernels (docs/ep_dispatch_combine.md): one rank's loop, as a
 * DeepEP low-latency pair does it (deepseek-ai/DeepEP deep_ep/buffer.py: low_latency_dispatch packs the
 * rows each local expert receives, low_latency_combine reduces with the weights on the token's rank),
 * over moects' communicator: an all-to-all of the row counts, one of the rows (each with its slot, expert
 * and weight), the expert transform, the rows back to their tokens' ranks, the weighted FP32 sum in slot
 * order. cpu.ep_dispatch_combine.ll keeps the received rows by local expert (order=expert),
 * cpu.ep_dispatch_combine.arrival in arrival order (order=any). Built with -ffp-contract=off. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ep_dispatch_internal.h"
#include "moects_ref.h"

#define CHUNK 8 /* rows packed per chunk */

/* One record of the dispatch (and, with y in row, of the return): the slot, its expert, its weight. */
typedef struct {
    int64_t src; /* (global token) * k + slot */
    int32_t expert;
    float weight;
} head;

typedef struct {
    const moects_ep_dispatch_combine_shape *s;
    const moects_ep_dispatch_combine_args *a;
    const moects__ed_kernel *kk;
    int R, me;
    size_t rec;                       /* bytes of a record: head, H bf16, padded to 8 */
    int64_t *dst;                     /* [T k]: the rank of each slot's expert, -1 none */
    int64_t sent[64], got[64];        /* records sent to / received from each rank */
    unsigned char *out_buf, *in_buf;  /* the dispatch's records; then the return's */
    unsigned char *back_buf, *ret_buf;
    int64_t n_in;                     /* records received */
} rank_ctx;

static head *head_at(unsigned char *buf, size_t rec, int64_t i) { return (head *)(buf + (size_t)i * rec); }

static uint16_t *row_at(unsigned char *buf, size_t rec, int64_t i) { return (uint16_t *)(buf + (size_t)i * rec + sizeof(head)); }

static int64_t rank_of(const rank_ctx *c, int64_t e)
{
    if (e < 0 || e >= c->s->E) return -1;
    int64_t r = 0;
    while (r + 1 < c->R && c->a->expert_first[r + 1] <= e) r++;
    return r;
}

int moects__ed_supports(const void *shape, char *why, size_t len)
{
    const moects_ep_dispatch_combine_shape *s = shape;
    if (s->world > 64) return snprintf(why, len, "shape: more than 64 ranks"), 0;
    return 1;
}

/* The counts all-to-all: slots per destination rank (a mutant's counts), each rank's count to this one. */
static int exchange_counts(rank_ctx *c)
{
    const int64_t TK = c->s->T * c->s->k;
    memset(c->sent, 0, sizeof c->sent);
    for (int64_t i = 0; i < TK; i++)
        if ((c->dst[i] = rank_of(c, c->a->topk_ids[i])) >= 0) c->sent[c->dst[i]]++;
    for (int d = 0; d < c->R; d++) {
        if (c->kk->bug == MOECTS__ED_BUG_COUNT_PLUS_ONE && c->sent[d]) c->sent[d]++;
        if (c->kk->bug == MOECTS__ED_BUG_DROP_LAST_CHUNK) c->sent[d] -= c->sent[d] % CHUNK;
    }
    size_t b[64];
    for (int d = 0; d < c->R; d++) b[d] = sizeof(int64_t);
    return c->a->comm->alltoallv(c->a->comm, c->sent, b, c->got, b);
}

/* Rank d's records in slot order, CHUNK at a time, into buf from record at; returns the next free one. */
static int64_t pack_for(rank_ctx *c, int d, unsigned char *buf, int64_t at)
{
    const int64_t TK = c->s->T * c->s->k, H = c->s->H, base = c->a->token_first[c->me] * c->s->k;
    int64_t n = 0, first = at;
    for (int64_t i = 0; i < TK && n < c->sent[d]; i++) {
        if (c->dst[i] != d) continue;
        *head_at(buf, c->rec, at) = (head){base + i, c->a->topk_ids[i], c->a->topk_weights[i]};
        memcpy(row_at(buf, c->rec, at), c->a->x + i / c->s->k * H, (size_t)H * 2);
        at++, n++;
    }
    for (; n < c->sent[d]; n++, at++) memcpy(buf + (size_t)at * c->rec, buf + (size_t)(at - 1) * c->rec, c->rec); /* past the window */
    (void)first;
    return at;
}

/* The rows all-to-all. */
static int exchange_rows(rank_ctx *c)
{
    int64_t n_out = 0;
    c->n_in = 0;
    for (int d = 0; d < c->R; d++) n_out += c->sent[d], c->n_in += c->got[d];
    c->out_buf = malloc((size_t)(n_out + 1) * c->rec);
    c->in_buf = malloc((size_t)(c->n_in + 1) * c->rec);
    if (!c->out_buf || !c->in_buf) return -1;
    int64_t at = 0;
    for (int d = 0; d < c->R; d++) at = pack_for(c, d, c->out_buf, at);
    size_t sb[64], rb[64];
    for (int d = 0; d < c->R; d++) sb[d] = (size_t)c->sent[d] * c->rec, rb[d] = (size_t)c->got[d] * c->rec;
    return c->a->comm->alltoallv(c->a->comm, c->out_buf, sb, c->in_buf, rb);
}

/* recv_x, recv_src, recv_count: by local expert (a stable counting sort of the arrival order: source
 * rank, token, slot), or as they arrived. */
static int place_received(rank_ctx *c)
{
    const int64_t H = c->s->H, e0 = c->a->expert_first[c->me], ne = c->a->expert_first[c->me + 1] - e0;
    if (c->n_in > c->s->recv_cap) {
        fprintf(stderr, "cpu ep_dispatch_combine: rank %d received %lld rows, recv_cap %lld\n", c->me,
                (long long)c->n_in, (long long)c->s->recv_cap);
        return -1;
    }
    int64_t *next = calloc((size_t)ne + 1, sizeof *next);
    if (!next) return -1;
    for (int64_t i = 0; i < c->n_in; i++) {
        const int64_t le = head_at(c->in_buf, c->rec, i)->expert - e0;
        if (le < 0 || le >= ne) return free(next), -1;
        next[le + 1]++;
    }
    for (int64_t e = 0; e < ne; e++) next[e + 1] += next[e];
    for (int64_t i = 0; i < c->n_in; i++) {
        const head *h = head_at(c->in_buf, c->rec, i);
        const int64_t j = c->kk->any_order ? i : next[h->expert - e0]++;
        c->a->recv_src[j] = h->src;
        memcpy(c->a->recv_x + j * H, row_at(c->in_buf, c->rec, i), (size_t)H * 2);
    }
    *c->a->recv_count = c->n_in;
    free(next);
    return 0;
}

/* The experts' outputs, y = bf16(x * scale[e]) (a mutant: times the weight too), back to the tokens'
 * ranks in the order they came (grouped by source rank). */
static int send_back(rank_ctx *c)
{
    const int64_t H = c->s->H;
    const int weighted = c->kk->bug == MOECTS__ED_BUG_WEIGHTS_ON_SENDER || c->kk->bug == MOECTS__ED_BUG_WEIGHTS_TWICE;
    int64_t n_back = 0;
    for (int d = 0; d < c->R; d++) n_back += c->sent[d];
    c->back_buf = malloc((size_t)(c->n_in + 1) * c->rec);
    c->ret_buf = malloc((size_t)(n_back + 1) * c->rec);
    if (!c->back_buf || !c->ret_buf) return -1;
    for (int64_t i = 0; i < c->n_in; i++) {
        const head *h = head_at(c->in_buf, c->rec, i);
        const uint16_t *x = row_at(c->in_buf, c->rec, i);
        uint16_t *y = row_at(c->back_buf, c->rec, i);
        const float sc = c->a->expert_scale[h->expert];
        *head_at(c->back_buf, c->rec, i) = *h;
        for (int64_t d = 0; d < H; d++) {
            const float v = moects__bf16_to_f32(moects__bf16_from_f32(moects__bf16_to_f32(x[d]) * sc));
            y[d] = moects__bf16_from_f32(weighted ? v * h->weight : v);
        }
    }
    size_t sb[64], rb[64];
    for (int d = 0; d < c->R; d++) sb[d] = (size_t)c->got[d] * c->rec, rb[d] = (size_t)c->sent[d] * c->rec;
    return c->a->comm->alltoallv(c->a->comm, c->back_buf, sb, c->ret_buf, rb);
}

/* out[t] = bf16 of the fma sum over the token's returned slots in slot order, from +0. */
static int combine(rank_ctx *c)
{
    const int64_t T = c->s->T, k = c->s->k, H = c->s->H, base = c->a->token_first[c->me] * k;
    const uint16_t **y = calloc((size_t)(T * k + 1), sizeof *y);
    if (!y) return -1;
    int64_t n_back = 0;
    for (int d = 0; d < c->R; d++) n_back += c->sent[d];
    for (int64_t i = 0; i < n_back; i++) {
        const int64_t slot = head_at(c->ret_buf, c->rec, i)->src - base;
        if (slot >= 0 && slot < T * k) y[slot] = row_at(c->ret_buf, c->rec, i);
    }
    const int on_sender = c->kk->bug == MOECTS__ED_BUG_WEIGHTS_ON_SENDER;
    for (int64_t t = 0; t < T; t++)
        for (int64_t d = 0; d < H; d++) {
            float acc = 0.0f;
            for (int64_t j = 0; j < k; j++)
                if (y[t * k + j]) acc = fmaf(moects__bf16_to_f32(y[t * k + j][d]), on_sender ? 1.0f : c->a->topk_weights[t * k + j], acc);
            c->a->out[t * H + d] = moects__bf16_from_f32(acc);
        }
    free(y);
    return 0;
}

int moects__ed_run(const moects__ed_kernel *kk, const void *shape, const void *args)
{
    const moects_ep_dispatch_combine_shape *s = shape;
    const moects_ep_dispatch_combine_args *a = args;
    if (!a->comm || s->world > 64 || a->comm->world != s->world) return -1;
    rank_ctx c = {.s = s, .a = a, .kk = kk, .R = (int)s->world, .me = (int)s->rank,
                  .rec = (sizeof(head) + (size_t)s->H * 2 + 7) / 8 * 8};
    c.dst = malloc((size_t)(s->T * s->k + 1) * sizeof *c.dst);
    int rc = c.dst ? 0 : -1;
    if (!rc) rc = exchange_counts(&c);
    if (!rc) rc = exchange_rows(&c);
    if (!rc) rc = place_received(&c);
    if (!rc) rc = send_back(&c);
    if (!rc) rc = combine(&c);
    free(c.dst);
    free(c.out_buf);
    free(c.in_buf);
    free(c.back_buf);
    free(c.ret_buf);
    return rc;
}

MOECTS__ED_DESCRIPTOR(moects_cpu_ep_dispatch_combine_ll, "cpu.ep_dispatch_combine.ll",
                      "ep_dispatch_combine.fma_v1(order=expert)", 0, MOECTS__ED_BUG_NONE, NULL);
MOECTS__ED_DESCRIPTOR(moects_cpu_ep_dispatch_combine_arrival, "cpu.ep_dispatch_combine.arrival",
                      "ep_dispatch_combine.fma_v1(order=any)", 1, MOECTS__ED_BUG_NONE, NULL);
