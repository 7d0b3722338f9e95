/* sched.c: which case group a free worker starts next, and on how many of the run's --jobs slots
 * (moects_runner_opts.jobs), so that a huge case's reference gets several threads while the
 * threads of the whole run stay about one per core (DESIGN.md "Harness": scale-out).
 *
 * A group (one case's tasks) wants w slots: 1, or for an FP4 GEMM whose reference is big,
 * ceil(2MNK / big_case_flops) up to all slots (moects__case_weight). It holds them from its start
 * until its reference is done (its worker says so, moects__sched_shrink), then one slot until it
 * finishes (moects__sched_done). Groups start in the runner's order (op by op, costliest first within
 * an op: moects__sched_order); with f free slots and the head (the first group not started) wanting w:
 *   1. f >= w: the head starts with w;
 *   2. else, when the slots that running groups will give back at the end of their references
 *      ("pending", the slots they hold beyond one) make f + pending >= w: the head waits for them;
 *   3. else, f >= ceil(w/2): the head starts with f (its reference at worst twice as slow);
 *   4. else the head waits for ceil(w/2) free slots.
 * While the head waits, the free slots it will not need are not left idle: the costliest group
 * that wants one slot starts on one, as long as f - 1 + pending still covers what the head waits
 * for. Such a group never delays the head (the slots the head waits for come from pending ones);
 * once nothing is pending, nothing starts ahead of it, so it cannot starve. With no group running,
 * f = all slots >= w: the head always starts, so the run cannot stall. */
#include <stdlib.h>
#include <string.h>

#include "moects_runner.h"
#include "moects_op.h"

/* Desired slots of case c: 1, or for a GEMM ceil(2MNK / big_case_flops) clamped to [1, max_weight]
 * (its op's ref_flops; moe_gemm: M its expected valid rows). An op whose reference is single-threaded
 * (no ref_flops: ep_gather): always 1. */
int moects__case_weight(const moects_case *c, double big_case_flops, int max_weight)
{
    const moects__op_def *op = moects__op(c->op);
    if (!op || !op->ref_flops || !(big_case_flops > 0) || max_weight <= 1) return 1;
    double w = op->ref_flops(c) / big_case_flops;
    if (!(w > 1)) return 1;
    if (w >= (double)max_weight) return max_weight;
    int iw = (int)w;
    return (double)iw < w ? iw + 1 : iw;
}

/* Bytes of case c's main buffers, an upper bound (its op's bytes: ep_gather x [T*k, H] BF16 and out
 * [T, H]; fp4_gemm A and B codes and out [M, N]; moe_gemm A, B and out over its expected rows). */
double moects__case_bytes(const moects_case *c)
{
    const moects__op_def *op = moects__op(c->op);
    return op ? op->bytes(c) : 0;
}

int moects__sched_init(moects__sched *s, size_t ng, const size_t *order, const int *want, int slots)
{
    memset(s, 0, sizeof *s);
    s->ng = ng;
    s->slots = slots > 0 ? slots : 1;
    s->free_slots = s->slots;
    s->order = malloc((ng ? ng : 1) * sizeof *s->order);
    s->order1 = malloc((ng ? ng : 1) * sizeof *s->order1);
    s->want = malloc((ng ? ng : 1) * sizeof *s->want);
    s->held = calloc(ng ? ng : 1, sizeof *s->held);
    s->state = calloc(ng ? ng : 1, 1);
    if (!s->order || !s->order1 || !s->want || !s->held || !s->state) {
        moects__sched_free(s);
        return -1;
    }
    for (size_t i = 0; i < ng; i++) {
        size_t g = order[i];
        int w = want ? want[g] : 1;
        s->want[g] = w < 1 ? 1 : w > s->slots ? s->slots : w;
        s->order[i] = g;
    }
    for (size_t i = 0; i < ng; i++)
        if (s->want[s->order[i]] == 1) s->order1[s->n1++] = s->order[i];
    return 0;
}

void moects__sched_free(moects__sched *s)
{
    free(s->order);
    free(s->order1);
    free(s->want);
    free(s->held);
    free(s->state);
    memset(s, 0, sizeof *s);
}

static long start(moects__sched *s, size_t g, int n, int *slots)
{
    s->state[g] = 1;
    s->held[g] = n;
    s->free_slots -= n;
    s->pending += n - 1;
    s->started++;
    *slots = n;
    return (long)g;
}

long moects__sched_next(moects__sched *s, int *slots)
{
    *slots = 0;
    while (s->head < s->ng && s->state[s->order[s->head]]) s->head++;
    if (s->head >= s->ng || s->free_slots <= 0) return -1;
    size_t h = s->order[s->head];
    int w = s->want[h], f = s->free_slots, half = (w + 1) / 2, need;
    if (f >= w) return start(s, h, w, slots);
    if (f + s->pending >= w) need = w;
    else if (f >= half) return start(s, h, f, slots);
    else need = half;
    /* the head waits for `need` free slots: one-slot groups may use the ones it will not need */
    if (f - 1 + s->pending < need) return -1;
    while (s->bf < s->n1 && s->state[s->order1[s->bf]]) s->bf++;
    if (s->bf >= s->n1) return -1;
    return start(s, s->order1[s->bf], 1, slots);
}

void moects__sched_shrink(moects__sched *s, size_t g)
{
    if (g >= s->ng || s->state[g] != 1 || s->held[g] <= 1) return;
    s->free_slots += s->held[g] - 1;
    s->pending -= s->held[g] - 1;
    s->held[g] = 1;
}

void moects__sched_done(moects__sched *s, size_t g)
{
    if (g >= s->ng || s->state[g] != 1) return;
    s->free_slots += s->held[g];
    s->pending -= s->held[g] - 1;
    s->held[g] = 0;
    s->state[g] = 2;
}

size_t moects__sched_left(const moects__sched *s) { return s->ng - s->started; }

typedef struct {
    size_t rank;
    double cost;
    size_t g;
} group_key;

static int by_rank_cost(const void *x, const void *y)
{
    const group_key *a = x, *b = y;
    if (a->rank != b->rank) return a->rank < b->rank ? -1 : 1;
    if (a->cost != b->cost) return a->cost > b->cost ? -1 : 1;
    return a->g < b->g ? -1 : a->g > b->g;
}

void moects__sched_order(size_t *order, size_t ng, const double *cost, const size_t *rank)
{
    group_key *v = malloc((ng ? ng : 1) * sizeof *v);
    if (!v) return;
    for (size_t g = 0; g < ng; g++) v[g] = (group_key){rank[g], cost[g], g};
    qsort(v, ng, sizeof *v, by_rank_cost);
    for (size_t g = 0; g < ng; g++) order[g] = v[g].g;
    free(v);
}
