/* ep_rank_exec.c: one rank of an ep_dispatch_combine launch as a process of its own (docs/ep_dispatch_combine.md
 * "The GPU transport"): `moects __ep-rank FD RANK`, exec'd by the launcher (harness/ops/ep_ranks.c) with
 * the launch region's memfd, so that a CUDA kernel's rank makes its own CUDA context (a forked copy of a
 * worker that holds one cannot use CUDA). A CUDA rank takes GPU RANK when the process sees at least
 * `world` devices, else GPU 0 (a one-GPU host runs every rank there), copies its slice of the case's
 * inputs and its output windows (the case's poison) to guarded device buffers, runs the kernel with the
 * region's transport as its communicator, then copies its outputs back into its windows: a write past an
 * output's end or before its start is found in the device canaries and fails the rank. A CPU kernel's
 * rank (exec'd only under MOECTS_EP_EXEC=1, the test of this path without a GPU) runs on the region's
 * input copies and windows. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ep_ranks_internal.h"
#include "moects_device.h"
#include "moects_guard.h"
#include "moects_op.h"
#include "moects_registry.h"

static const char *const IN_NAMES[MOECTS_ED_NT] = {"x", "topk_ids", "topk_weights", "expert_first", "expert_scale",
                                                  "token_first"};

typedef struct {
    moects_guarded in[MOECTS_ED_NT], out[MOECTS__ED_W_N];
} rank_bufs;

/* Rank r's slice of input i: its bytes, from byte *from of the case's tensor. */
static size_t in_slice(const moects__ed_head *h, int r, int i, size_t *from)
{
    const size_t t0 = (size_t)h->token_first[r], T = (size_t)(h->token_first[r + 1] - h->token_first[r]);
    const size_t H = (size_t)h->s.H, k = (size_t)h->s.k;
    *from = i == MOECTS_ED_X ? t0 * H * 2 : i == MOECTS_ED_IDS || i == MOECTS_ED_W ? t0 * k * 4 : 0;
    switch (i) {
    case MOECTS_ED_X: return T * H * 2;
    case MOECTS_ED_IDS:
    case MOECTS_ED_W: return T * k * 4;
    case MOECTS_ED_SCALE: return (size_t)h->s.E * 4;
    default: return (size_t)(h->world + 1) * 8;
    }
}

/* One guarded device buffer holding bytes of src, its canaries armed. 0, or -1 with why. */
static int upload_one(moects_guarded *g, const char *name, const void *src, size_t bytes, size_t row, char *why,
                      size_t len)
{
    if (moects__guard_alloc(g, name, bytes, row, MOECTS_GUARD_DEVICE))
        return snprintf(why, len, "out of device memory (%zu bytes for %s)", bytes, name), -1;
    if ((bytes && moects__cuda_h2d(g->data, src, bytes)) || moects__guard_arm(g, MOECTS__ED_CANARY))
        return snprintf(why, len, "copying %s to the device failed", name), -1;
    return 0;
}

/* The rank's inputs and its output windows (the poison) on its device. */
static int upload(const moects__ed_region *m, int r, rank_bufs *b, char *why, size_t len)
{
    const size_t row = (size_t)m->h->s.H * 2;
    for (int i = 0; i < MOECTS_ED_NT; i++) {
        size_t from;
        const size_t n = in_slice(m->h, r, i, &from);
        if (upload_one(&b->in[i], IN_NAMES[i], m->base + m->h->in_off[i] + from, n, row, why, len)) return -1;
    }
    for (int w = 0; w < MOECTS__ED_W_N; w++)
        if (upload_one(&b->out[w], moects__ed_win_names[w], m->base + m->h->win_off[r][w],
                       moects__ed_win_bytes(m->h, r, w), row, why, len))
            return -1;
    return 0;
}

/* After run(): the stream drained, every buffer's canaries intact, the outputs into the windows. */
static int deliver(const moects__ed_region *m, int r, rank_bufs *b, char *why, size_t len)
{
    if (moects__cuda_sync(moects__cuda_stream(), why, len)) return -1;
    for (int i = 0; i < MOECTS_ED_NT; i++)
        if (moects__guard_check(&b->in[i], why, len)) return -1;
    for (int w = 0; w < MOECTS__ED_W_N; w++) {
        if (moects__guard_check(&b->out[w], why, len)) return -1;
        const size_t n = moects__ed_win_bytes(m->h, r, w);
        if (n && moects__cuda_d2h(m->base + m->h->win_off[r][w], b->out[w].data, n))
            return snprintf(why, len, "copying %s back failed", moects__ed_win_names[w]), -1;
    }
    return 0;
}

/* GPU r when the process sees world of them, else GPU 0. */
static int pick_device(const moects__ed_region *m, int r, int *dev, char *why, size_t len)
{
    char e[200] = "";
    const int n = moects__cuda_device_count(e, sizeof e);
    if (n <= 0) return snprintf(why, len, "no CUDA device (%s)", e), -1;
    *dev = n >= (int)m->h->world ? r : 0;
    if (moects__cuda_set_device(*dev, e, sizeof e)) return snprintf(why, len, "device %d: %s", *dev, e), -1;
    return 0;
}

/* The case's tensors as args (no outputs), from the inputs' pointers in slot order. */
static moects_ep_dispatch_combine_args inputs_as_args(void *const in[MOECTS_ED_NT])
{
    return (moects_ep_dispatch_combine_args){
        .x = in[MOECTS_ED_X], .topk_ids = in[MOECTS_ED_IDS], .topk_weights = in[MOECTS_ED_W],
        .expert_first = in[MOECTS_ED_EXPERT_FIRST], .expert_scale = in[MOECTS_ED_SCALE],
        .token_first = in[MOECTS_ED_TOKEN_FIRST]};
}

/* Rank r of CUDA kernel k: device, buffers, run(), outputs; its result into the region. */
static void cuda_rank(moects__ed_region *m, const moects_kernel *k, int r)
{
    char why[400] = "";
    int dev = -1;
    rank_bufs b;
    memset(&b, 0, sizeof b);
    int rc = pick_device(m, r, &dev, why, sizeof why) || upload(m, r, &b, why, sizeof why) ? -1 : 0;
    moects_ep_comm comm;
    moects__ed_comm_init(m, r, dev, &comm);
    void *in[MOECTS_ED_NT], *out[MOECTS__ED_W_N];
    for (int i = 0; i < MOECTS_ED_NT; i++) in[i] = b.in[i].data;
    for (int w = 0; w < MOECTS__ED_W_N; w++) out[w] = b.out[w].data;
    const moects_ep_dispatch_combine_args all = inputs_as_args(in);
    const moects_ep_dispatch_combine_shape s = moects__ed_rank_shape(m->h, r);
    const moects_ep_dispatch_combine_args a = moects__ed_rank_args(m->h, &all, 0, out, &comm);
    if (rc == 0) rc = k->run(&s, &a, moects__cuda_stream());
    moects__ed_rank_returned(m, r);
    if (rc == 0 && deliver(m, r, &b, why, sizeof why)) rc = -1;
    if (why[0]) fprintf(stderr, "ep_dispatch_combine: rank %d: %s\n", r, why);
    for (int i = 0; i < MOECTS_ED_NT; i++) moects__guard_free(&b.in[i]);
    for (int w = 0; w < MOECTS__ED_W_N; w++) moects__guard_free(&b.out[w]);
    moects__ed_rank_result(m, r, rc);
}

/* Rank r of CPU kernel k on the region's input copies and windows. */
static void cpu_rank(moects__ed_region *m, const moects_kernel *k, int r)
{
    moects_ep_comm comm;
    moects__ed_comm_init(m, r, -1, &comm);
    void *in[MOECTS_ED_NT], *out[MOECTS__ED_W_N];
    for (int i = 0; i < MOECTS_ED_NT; i++) in[i] = m->base + m->h->in_off[i];
    for (int w = 0; w < MOECTS__ED_W_N; w++) out[w] = m->base + m->h->win_off[r][w];
    const moects_ep_dispatch_combine_args all = inputs_as_args(in);
    const moects_ep_dispatch_combine_shape s = moects__ed_rank_shape(m->h, r);
    const moects_ep_dispatch_combine_args a = moects__ed_rank_args(m->h, &all, m->h->token_first[r], out, &comm);
    const int rc = k->run(&s, &a, NULL);
    moects__ed_rank_returned(m, r);
    moects__ed_rank_result(m, r, rc);
}

static const moects_kernel *builtin(const char *name)
{
    size_t n;
    const moects_kernel *const *all = moects__builtin_kernels(&n);
    for (size_t i = 0; i < n; i++)
        if (!strcmp(all[i]->name, name)) return all[i];
    return NULL;
}

int moects__ed_rank_main(int argc, char **argv)
{
    moects__ed_region m;
    const int r = argc == 3 ? atoi(argv[2]) : -1;
    if (argc != 3 || moects__ed_region_attach(atoi(argv[1]), &m) || r < 0 || r >= (int)m.h->world) {
        fprintf(stderr, "usage: moects __ep-rank FD RANK (started by an ep_dispatch_combine launch)\n");
        return 2;
    }
    m.h->kernel[sizeof m.h->kernel - 1] = '\0';
    const moects_kernel *k = builtin(m.h->kernel);
    if (k && k->op == MOECTS_OP_EP_DISPATCH_COMBINE) {
        if (k->device == MOECTS_DEVICE_CUDA) cuda_rank(&m, k, r);
        else cpu_rank(&m, k, r);
        fflush(NULL);
        return 0;
    }
    fprintf(stderr, "ep_dispatch_combine: rank %d: %s is not a built-in kernel of this op (a --kernel-lib or "
                    "Python kernel's ranks are forked, and CUDA ones are not supported yet)\n", r, m.h->kernel);
    moects__ed_rank_returned(&m, r);
    moects__ed_rank_result(&m, r, -1);
    return 0;
}
