/* ep_ranks.c: ep_dispatch_combine's kernels run as R processes, one a rank (moects__op_def.launch;
 * docs/ep_dispatch_combine.md "Ranks and the transport"). The launcher forks R ranks from the calling
 * process, each with its own shape and args cut from the case's (every rank's tensors stacked in rank
 * order) and a moects_ep_comm over the CPU transport: shared anonymous memory mapped before the fork
 * (POSIX shared memory without a name), a barrier of atomic counters, a broadcast and an alltoallv
 * through one staging slot a rank. Each rank's outputs sit in their own windows between PROT_NONE
 * pages (a write past a window faults in that rank), filled with the case's output poison and copied
 * into the case's output buffer once every rank returned 0. A rank that dies, or returns while others
 * wait in a collective, fails every wait (-1), so no rank hangs on a dead peer. */
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "moects_op.h"
#include "ops_internal.h"

#define CANARY 0xa5
#define MAX_W MOECTS_ED_MAX_WORLD

/* The shared control block. */
typedef struct {
    int arrived, gen; /* the barrier: ranks arrived in this generation, the generation */
    int failed;       /* a rank died or failed a collective: every wait returns -1 */
    int done;         /* ranks whose run() returned */
    size_t sent[MAX_W][MAX_W]; /* alltoallv: bytes rank s sends rank d in this call */
    int rc[MAX_W], returned[MAX_W];
} ctl;

typedef struct {
    ctl *c;
    unsigned char *stage; /* world slots of max_bytes */
} transport;

/* ---- the transport ---- */

static ctl *ctl_of(moects_ep_comm *c) { return ((transport *)c->impl)->c; }

static void pause_a_little(unsigned spin)
{
    if (spin < 64) {
        sched_yield();
        return;
    }
    struct timespec ts = {0, 20000};
    nanosleep(&ts, NULL);
}

static int tr_barrier(moects_ep_comm *cm)
{
    ctl *c = ctl_of(cm);
    const int g = __atomic_load_n(&c->gen, __ATOMIC_ACQUIRE);
    if (__atomic_add_fetch(&c->arrived, 1, __ATOMIC_ACQ_REL) == cm->world) {
        __atomic_store_n(&c->arrived, 0, __ATOMIC_RELAXED);
        __atomic_add_fetch(&c->gen, 1, __ATOMIC_RELEASE);
        return __atomic_load_n(&c->failed, __ATOMIC_ACQUIRE) ? -1 : 0;
    }
    for (unsigned spin = 0; __atomic_load_n(&c->gen, __ATOMIC_ACQUIRE) == g; spin++) {
        if (__atomic_load_n(&c->failed, __ATOMIC_ACQUIRE) || __atomic_load_n(&c->done, __ATOMIC_ACQUIRE))
            return __atomic_load_n(&c->gen, __ATOMIC_ACQUIRE) == g ? (__atomic_store_n(&c->failed, 1, __ATOMIC_RELEASE), -1) : 0;
        pause_a_little(spin);
    }
    return 0;
}

/* A failed rank fails the others at their next wait. */
static int fail_all(moects_ep_comm *cm)
{
    __atomic_store_n(&ctl_of(cm)->failed, 1, __ATOMIC_RELEASE);
    return -1;
}

static int tr_broadcast(moects_ep_comm *cm, int root, void *buf, size_t bytes)
{
    unsigned char *slot = ((transport *)cm->impl)->stage;
    if (root < 0 || root >= cm->world || bytes > cm->max_bytes) return fail_all(cm);
    if (cm->rank == root && bytes) memcpy(slot, buf, bytes);
    if (tr_barrier(cm)) return -1;
    if (cm->rank != root && bytes) memcpy(buf, slot, bytes);
    return tr_barrier(cm);
}

static int tr_alltoallv(moects_ep_comm *cm, const void *send, const size_t *send_bytes, void *recv,
                        const size_t *recv_bytes)
{
    transport *t = cm->impl;
    const int me = cm->rank, R = cm->world;
    size_t total = 0;
    for (int d = 0; d < R; d++) total += send_bytes[d];
    if (total > cm->max_bytes) return fail_all(cm);
    if (total) memcpy(t->stage + (size_t)me * cm->max_bytes, send, total);
    for (int d = 0; d < R; d++) t->c->sent[me][d] = send_bytes[d];
    if (tr_barrier(cm)) return -1;
    int bad = 0;
    size_t at = 0;
    for (int s = 0; s < R; s++) {
        size_t off = 0;
        for (int d = 0; d < me; d++) off += t->c->sent[s][d];
        if (t->c->sent[s][me] != recv_bytes[s]) bad = 1;
        else if (recv_bytes[s]) memcpy((unsigned char *)recv + at, t->stage + (size_t)s * cm->max_bytes + off, recv_bytes[s]);
        at += recv_bytes[s];
    }
    if (bad) fail_all(cm);
    return tr_barrier(cm) || bad ? -1 : 0;
}

/* ---- a rank's output windows ---- */

typedef struct {
    unsigned char *base, *data;
    size_t len, bytes, page;
} window;

/* bytes between PROT_NONE pages, the data 8-byte aligned and ending at most 7 bytes below the upper
 * one, the rest of the page canary. 0, or -1. */
static int win_alloc(window *w, size_t bytes)
{
    const size_t page = (size_t)sysconf(_SC_PAGESIZE), a8 = (bytes + 7) / 8 * 8, span = (a8 + page - 1) / page * page;
    w->page = page, w->bytes = bytes, w->len = span + 2 * page;
    w->base = mmap(NULL, w->len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (w->base == MAP_FAILED) return w->base = NULL, -1;
    memset(w->base + page, CANARY, span);
    w->data = w->base + page + span - a8;
    if (mprotect(w->base, page, PROT_NONE) || mprotect(w->base + page + span, page, PROT_NONE)) return -1;
    return 0;
}

/* 1 when the canary around the data holds. */
static int win_intact(const window *w)
{
    for (const unsigned char *p = w->base + w->page; p < w->data; p++)
        if (*p != CANARY) return 0;
    for (const unsigned char *p = w->data + w->bytes; p < w->base + w->len - w->page; p++)
        if (*p != CANARY) return 0;
    return 1;
}

static void win_free(window *w)
{
    if (w->base) munmap(w->base, w->len);
    w->base = NULL;
}

/* ---- the launch ---- */

enum { W_RECV_X, W_RECV_SRC, W_RECV_COUNT, W_OUT, W_N };
static const char *const WIN_NAMES[W_N] = {"recv_x", "recv_src", "recv_count", "out"};

typedef struct {
    const moects_ep_dispatch_combine_shape *s; /* the case's, rank -1 */
    const moects__ed_args *g;
    window win[MAX_W][W_N];
    transport tr;
    ctl *c;
    size_t ctl_len, stage_len, max_bytes;
} launch;

/* The global part (bytes) behind window w of rank r. */
static unsigned char *global_part(const launch *L, int r, int w)
{
    const moects_ep_dispatch_combine_args *a = &L->g->a;
    const int64_t H = L->s->H, rf = L->g->recv_first[r], tf = a->token_first[r];
    switch (w) {
    case W_RECV_X: return (unsigned char *)(a->recv_x + rf * H);
    case W_RECV_SRC: return (unsigned char *)(a->recv_src + rf);
    case W_RECV_COUNT: return (unsigned char *)(a->recv_count + r);
    default: return (unsigned char *)(a->out + tf * H);
    }
}

static size_t part_bytes(const launch *L, int r, int w)
{
    const int64_t H = L->s->H, n = L->g->recv_first[r + 1] - L->g->recv_first[r];
    const int64_t T = L->g->a.token_first[r + 1] - L->g->a.token_first[r];
    return w == W_RECV_X ? (size_t)(n * H) * 2 : w == W_RECV_SRC ? (size_t)n * 8 : w == W_RECV_COUNT ? 8 : (size_t)(T * H) * 2;
}

/* The control block, the staging slots and every rank's windows (the case's poison copied in). */
static int launch_map(launch *L)
{
    const int R = (int)L->s->world;
    int64_t rows = 0;
    for (int r = 0; r < R; r++) {
        const int64_t n = L->g->recv_first[r + 1] - L->g->recv_first[r];
        const int64_t tk = (L->g->a.token_first[r + 1] - L->g->a.token_first[r]) * L->s->k;
        rows = n > rows ? n : rows;
        rows = tk > rows ? tk : rows;
    }
    L->max_bytes = (size_t)(rows + R) * (size_t)(L->s->H * 2 + 64) + 65536;
    L->ctl_len = sizeof(ctl), L->stage_len = (size_t)R * L->max_bytes;
    L->c = mmap(NULL, L->ctl_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    L->tr.stage = mmap(NULL, L->stage_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (L->c == MAP_FAILED || L->tr.stage == MAP_FAILED) return -1;
    memset(L->c, 0, sizeof *L->c);
    L->tr.c = L->c;
    for (int r = 0; r < R; r++)
        for (int w = 0; w < W_N; w++) {
            if (win_alloc(&L->win[r][w], part_bytes(L, r, w))) return -1;
            if (part_bytes(L, r, w)) memcpy(L->win[r][w].data, global_part(L, r, w), part_bytes(L, r, w));
        }
    return 0;
}

static void launch_unmap(launch *L)
{
    for (int r = 0; r < (int)L->s->world; r++)
        for (int w = 0; w < W_N; w++) win_free(&L->win[r][w]);
    if (L->c && L->c != MAP_FAILED) munmap(L->c, L->ctl_len);
    if (L->tr.stage && L->tr.stage != MAP_FAILED) munmap(L->tr.stage, L->stage_len);
}

/* Rank r's process: its shape, args and communicator, run(), its result in the control block. */
static void rank_main(const moects_kernel *k, launch *L, int r, pid_t parent)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    const moects_ep_dispatch_combine_args *a = &L->g->a;
    const int64_t tf = a->token_first[r], H = L->s->H, kk = L->s->k;
    moects_ep_comm comm = {.rank = r, .world = (int)L->s->world, .device = -1, .barrier = tr_barrier,
                           .broadcast = tr_broadcast, .alltoallv = tr_alltoallv, .max_bytes = L->max_bytes,
                           .impl = &L->tr};
    moects_ep_dispatch_combine_shape s = *L->s;
    s.rank = r, s.T = a->token_first[r + 1] - tf, s.recv_cap = L->g->recv_first[r + 1] - L->g->recv_first[r];
    moects_ep_dispatch_combine_args ra = {
        .comm = &comm, .x = a->x + tf * H, .topk_ids = a->topk_ids + tf * kk, .topk_weights = a->topk_weights + tf * kk,
        .expert_first = a->expert_first, .expert_scale = a->expert_scale, .token_first = a->token_first,
        .recv_x = (uint16_t *)L->win[r][W_RECV_X].data, .recv_src = (int64_t *)L->win[r][W_RECV_SRC].data,
        .recv_count = (int64_t *)L->win[r][W_RECV_COUNT].data, .out = (uint16_t *)L->win[r][W_OUT].data};
    const int rc = k->run(&s, &ra, NULL);
    L->c->rc[r] = rc;
    __atomic_store_n(&L->c->returned[r], 1, __ATOMIC_RELEASE);
    __atomic_add_fetch(&L->c->done, 1, __ATOMIC_RELEASE);
    fflush(NULL);
    _exit(0);
}

/* Wait for every rank; a death fails the others' waits. The first failure's words to stderr (the
 * kernel log) and its code: the rank's non-zero return, or 128 + its signal. */
static int reap(launch *L, pid_t *pid, int R)
{
    int rc = 0;
    for (int left = R; left > 0; left--) {
        int st;
        const pid_t p = wait(&st);
        int r = 0;
        while (r < R && pid[r] != p) r++;
        if (p < 0 || r == R) return rc ? rc : -1;
        if (!__atomic_load_n(&L->c->returned[r], __ATOMIC_ACQUIRE)) {
            __atomic_store_n(&L->c->failed, 1, __ATOMIC_RELEASE);
            if (!rc) {
                rc = WIFSIGNALED(st) ? 128 + WTERMSIG(st) : -1;
                fprintf(stderr, "ep_dispatch_combine: rank %d of %d %s %d\n", r, R,
                        WIFSIGNALED(st) ? "killed by signal" : "exited in run() with status", WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
            }
        } else if (L->c->rc[r] && !rc) {
            rc = L->c->rc[r];
            fprintf(stderr, "ep_dispatch_combine: rank %d of %d: run() returned %d\n", r, R, rc);
        }
    }
    return rc;
}

/* Every rank's windows intact, then copied into the case's output. 0, or -1 naming the window. */
static int collect(launch *L)
{
    for (int r = 0; r < (int)L->s->world; r++)
        for (int w = 0; w < W_N; w++) {
            if (!win_intact(&L->win[r][w])) {
                fprintf(stderr, "ep_dispatch_combine: rank %d wrote outside its %s window\n", r, WIN_NAMES[w]);
                return -1;
            }
            if (part_bytes(L, r, w)) memcpy(global_part(L, r, w), L->win[r][w].data, part_bytes(L, r, w));
        }
    return 0;
}

int moects__ed_launch(const moects_kernel *k, const void *shape, const void *args, void *stream)
{
    (void)stream;
    launch *L = calloc(1, sizeof *L);
    if (!L) return -1;
    L->s = shape, L->g = args;
    const int R = (int)L->s->world;
    if (k->device != MOECTS_DEVICE_CPU || R < 1 || R > MAX_W) {
        fprintf(stderr, "ep_dispatch_combine: %s\n", R < 1 || R > MAX_W ? "world out of range"
                : "a CUDA kernel needs the multi-GPU launcher (one process a GPU), not built yet (issue 33)");
        return free(L), -1;
    }
    pid_t pid[MAX_W];
    int rc = launch_map(L) ? -1 : 0, started = 0;
    fflush(NULL);
    const pid_t parent = getpid();
    for (; rc == 0 && started < R; started++) {
        pid[started] = fork();
        if (pid[started] == 0) rank_main(k, L, started, parent);
        if (pid[started] < 0) rc = -1;
    }
    if (rc) { /* a mapping or a fork failed: the ranks already started fail their first wait */
        if (L->c && L->c != MAP_FAILED) __atomic_store_n(&L->c->failed, 1, __ATOMIC_RELEASE);
        for (int r = 0; r < started - 1; r++) waitpid(pid[r], NULL, 0);
    } else {
        rc = reap(L, pid, R);
    }
    if (rc == 0) rc = collect(L);
    launch_unmap(L);
    free(L);
    return rc;
}
