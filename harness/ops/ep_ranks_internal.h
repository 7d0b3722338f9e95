/* ep_ranks_internal.h: the shared region of an ep_dispatch_combine launch (docs/ep_dispatch_combine.md
 * "Ranks and the transport"), between the launcher and its ranks: forked (a CPU kernel's,
 * harness/ops/ep_ranks.c) or exec'd (a CUDA kernel's, or any under MOECTS_EP_EXEC=1: `moects __ep-rank FD
 * RANK`, harness/ops/ep_rank_exec.c). One memfd holds the head below, the transport's control block and
 * staging slots, every rank's output windows and, for exec'd ranks, the host copies of the case's
 * inputs; offsets in the head, so that a process that maps it anywhere finds its parts. */
#ifndef MOECTS_EP_RANKS_INTERNAL_H
#define MOECTS_EP_RANKS_INTERNAL_H
#include <stddef.h>
#include <stdint.h>

#include "moects_inputs.h"
#include "moects_kernel.h"

#define MOECTS__ED_REGION_MAGIC 0x65707231u /* "epr1": the head's layout version too */
#define MOECTS__ED_CANARY 0xa5
#define MOECTS__ED_MAX_W MOECTS_ED_MAX_WORLD

/* A rank's output windows, in the case's output buffer order of parts. */
enum { MOECTS__ED_W_RECV_X, MOECTS__ED_W_RECV_SRC, MOECTS__ED_W_RECV_COUNT, MOECTS__ED_W_OUT, MOECTS__ED_W_N };
extern const char *const moects__ed_win_names[MOECTS__ED_W_N];

/* The transport's control block. */
typedef struct {
    int arrived, gen; /* the barrier: ranks arrived in this generation, the generation */
    int failed;       /* a rank died or failed a collective: every wait returns -1 */
    int done;         /* ranks whose run() returned */
    size_t sent[MOECTS__ED_MAX_W][MOECTS__ED_MAX_W]; /* alltoallv: bytes rank s sends rank d in this call */
    int rc[MOECTS__ED_MAX_W], returned[MOECTS__ED_MAX_W];
} moects__ed_ctl;

/* The region's first bytes. Offsets and sizes in bytes from the region's start. */
typedef struct {
    uint32_t magic, world;
    size_t total;                          /* the region's bytes */
    size_t ctl_off, stage_off, max_bytes;  /* the control block; world staging slots of max_bytes */
    moects_ep_dispatch_combine_shape s;    /* the case's (rank -1) */
    int64_t token_first[MOECTS__ED_MAX_W + 1], expert_first[MOECTS__ED_MAX_W + 1];
    int64_t recv_first[MOECTS__ED_MAX_W + 1]; /* the reference's received rows per rank */
    int exec;                              /* the ranks are exec'd: the inputs are here too */
    size_t in_off[MOECTS_ED_NT];           /* exec'd ranks: the case's inputs (all ranks) */
    size_t win_off[MOECTS__ED_MAX_W][MOECTS__ED_W_N]; /* each window's data */
    char kernel[96];                       /* the kernel's name (an exec'd rank looks it up) */
} moects__ed_head;

/* A process's mapping of the region. */
typedef struct {
    unsigned char *base;
    moects__ed_head *h;
    moects__ed_ctl *c;
    unsigned char *stage;
} moects__ed_region;

/* Bytes of window w of rank r (recv_x: its rows of H bf16; recv_src: int64 each; recv_count: 8; out:
 * its tokens of H bf16). */
size_t moects__ed_win_bytes(const moects__ed_head *h, int r, int w);

/* Rank r's shape: the case's with rank r, its tokens and its received rows as recv_cap. */
moects_ep_dispatch_combine_shape moects__ed_rank_shape(const moects__ed_head *h, int r);

/* Rank r's args: x, topk_ids and topk_weights from token t0 of a's (t0: the rank's first token in tensors
 * stacked over all ranks, 0 in tensors of its own), the layout and the scales a's, the outputs out[w]. */
moects_ep_dispatch_combine_args moects__ed_rank_args(const moects__ed_head *h, const moects_ep_dispatch_combine_args *a,
                                                     int64_t t0, void *const out[MOECTS__ED_W_N], moects_ep_comm *comm);

/* comm over the region's transport for rank r (device: the CUDA device it runs on, -1 CPU). */
void moects__ed_comm_init(moects__ed_region *m, int r, int device, moects_ep_comm *comm);

/* Rank r's run() returned: peers waiting in a collective stop waiting for it (-1). */
void moects__ed_rank_returned(moects__ed_region *m, int r);

/* Rank r's result (run()'s return, or -1 when its outputs could not be delivered), for the launcher. */
void moects__ed_rank_result(moects__ed_region *m, int r, int rc);

/* An exec'd rank's mapping of the region behind fd (the head checked). 0, or -1 with the reason on stderr. */
int moects__ed_region_attach(int fd, moects__ed_region *m);

#endif
