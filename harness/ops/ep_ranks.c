/* ep_ranks.c: ep_dispatch_combine's kernels run as R processes, one a rank (moects__op_def.launch;
 * docs/ep_dispatch_combine.md "Ranks and the transport"). The launcher maps one region (a memfd: shared
 * memory without a name; its layout in ep_ranks_internal.h) and starts R ranks, each with its own shape
 * and args cut from the case's (every rank's tensors stacked in rank order) and a moects_ep_comm over the
 * transport in the region: a barrier of atomic counters, a broadcast and an alltoallv through one
 * staging slot a rank. A CPU kernel's ranks are forked and run in the region's windows; a CUDA kernel's
 * are exec'd (`moects __ep-rank FD RANK`, harness/ops/ep_rank_exec.c: a process that never saw the
 * worker's CUDA context makes its own), the case's inputs copied into the region for them; with
 * MOECTS_EP_EXEC=1 a CPU kernel's are exec'd too (the tests of that path on a host without a GPU). Each rank's
 * outputs sit in their own windows between PROT_NONE pages (a CPU rank's write past a window faults in
 * that rank), filled with the case's output poison and copied into the case's output buffer once every
 * rank returned 0. A rank that dies, or returns while others wait in a collective, fails every wait
 * (-1), so no rank hangs on a dead peer. */
#include <fcntl.h>
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

#include "ep_ranks_internal.h"
#include "moects_device.h"
#include "moects_op.h"
#include "ops_internal.h"

#define MAX_W MOECTS__ED_MAX_W

const char *const moects__ed_win_names[MOECTS__ED_W_N] = {"recv_x", "recv_src", "recv_count", "out"};

/* ---- the transport ---- */

static moects__ed_ctl *ctl_of(moects_ep_comm *c) { return ((moects__ed_region *)c->impl)->c; }

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
    moects__ed_ctl *c = ctl_of(cm);
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
    unsigned char *slot = ((moects__ed_region *)cm->impl)->stage;
    if (root < 0 || root >= cm->world || bytes > cm->max_bytes) return fail_all(cm);
    if (cm->rank == root && bytes) memcpy(slot, buf, bytes);
    if (tr_barrier(cm)) return -1;
    if (cm->rank != root && bytes) memcpy(buf, slot, bytes);
    return tr_barrier(cm);
}

static int tr_alltoallv(moects_ep_comm *cm, const void *send, const size_t *send_bytes, void *recv,
                        const size_t *recv_bytes)
{
    moects__ed_region *t = cm->impl;
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

void moects__ed_comm_init(moects__ed_region *m, int r, int device, moects_ep_comm *comm)
{
    *comm = (moects_ep_comm){.rank = r, .world = (int)m->h->world, .device = device, .barrier = tr_barrier,
                             .broadcast = tr_broadcast, .alltoallv = tr_alltoallv, .max_bytes = m->h->max_bytes,
                             .impl = m};
}

void moects__ed_rank_returned(moects__ed_region *m, int r)
{
    (void)r;
    __atomic_add_fetch(&m->c->done, 1, __ATOMIC_RELEASE);
}

void moects__ed_rank_result(moects__ed_region *m, int r, int rc)
{
    m->c->rc[r] = rc;
    __atomic_store_n(&m->c->returned[r], 1, __ATOMIC_RELEASE);
}

/* ---- the region ---- */

static size_t round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

size_t moects__ed_win_bytes(const moects__ed_head *h, int r, int w)
{
    const int64_t H = h->s.H, n = h->recv_first[r + 1] - h->recv_first[r];
    const int64_t T = h->token_first[r + 1] - h->token_first[r];
    switch (w) {
    case MOECTS__ED_W_RECV_X: return (size_t)(n * H) * 2;
    case MOECTS__ED_W_RECV_SRC: return (size_t)n * 8;
    case MOECTS__ED_W_RECV_COUNT: return 8;
    default: return (size_t)(T * H) * 2;
    }
}

moects_ep_dispatch_combine_shape moects__ed_rank_shape(const moects__ed_head *h, int r)
{
    moects_ep_dispatch_combine_shape s = h->s;
    s.rank = r, s.T = h->token_first[r + 1] - h->token_first[r], s.recv_cap = h->recv_first[r + 1] - h->recv_first[r];
    return s;
}

moects_ep_dispatch_combine_args moects__ed_rank_args(const moects__ed_head *h, const moects_ep_dispatch_combine_args *a,
                                                     int64_t t0, void *const out[MOECTS__ED_W_N], moects_ep_comm *comm)
{
    const int64_t H = h->s.H, k = h->s.k;
    return (moects_ep_dispatch_combine_args){
        .comm = comm, .x = a->x ? a->x + t0 * H : NULL, .topk_ids = a->topk_ids ? a->topk_ids + t0 * k : NULL,
        .topk_weights = a->topk_weights ? a->topk_weights + t0 * k : NULL, .expert_first = a->expert_first,
        .expert_scale = a->expert_scale, .token_first = a->token_first, .recv_x = out[MOECTS__ED_W_RECV_X],
        .recv_src = out[MOECTS__ED_W_RECV_SRC], .recv_count = out[MOECTS__ED_W_RECV_COUNT], .out = out[MOECTS__ED_W_OUT]};
}

/* Bytes of input i over all ranks (the case's tensor). */
static size_t input_bytes(const moects__ed_head *h, int i)
{
    const size_t Tt = (size_t)h->s.T_total, k = (size_t)h->s.k;
    switch (i) {
    case MOECTS_ED_X: return Tt * (size_t)h->s.H * 2;
    case MOECTS_ED_IDS:
    case MOECTS_ED_W: return Tt * k * 4;
    case MOECTS_ED_SCALE: return (size_t)h->s.E * 4;
    default: return (size_t)(h->world + 1) * 8;
    }
}

static const void *input_of(const moects_ep_dispatch_combine_args *a, int i)
{
    const void *const in[MOECTS_ED_NT] = {a->x, a->topk_ids, a->topk_weights, a->expert_first, a->expert_scale, a->token_first};
    return in[i];
}

/* The case's part (bytes; a device pointer for a CUDA kernel) behind window w of rank r. */
static unsigned char *global_part(const moects__ed_args *g, const moects__ed_head *h, int r, int w)
{
    const moects_ep_dispatch_combine_args *a = &g->a;
    const int64_t H = h->s.H, rf = h->recv_first[r], tf = h->token_first[r];
    switch (w) {
    case MOECTS__ED_W_RECV_X: return (unsigned char *)(a->recv_x + rf * H);
    case MOECTS__ED_W_RECV_SRC: return (unsigned char *)(a->recv_src + rf);
    case MOECTS__ED_W_RECV_COUNT: return (unsigned char *)(a->recv_count + r);
    default: return (unsigned char *)(a->out + tf * H);
    }
}

/* Copies from the case's args into the region, and back: host memory for a CPU kernel, the worker's
 * device for a CUDA kernel. 0, or -1. */
static int fetch(const moects_kernel *k, void *dst, const void *src, size_t n)
{
    if (n && k->device == MOECTS_DEVICE_CUDA) return moects__cuda_d2h(dst, src, n);
    if (n) memcpy(dst, src, n);
    return 0;
}

static int store(const moects_kernel *k, void *dst, const void *src, size_t n)
{
    if (n && k->device == MOECTS_DEVICE_CUDA) return moects__cuda_h2d(dst, src, n);
    if (n) memcpy(dst, src, n);
    return 0;
}

/* Window w of rank r: its data, and the span of pages around it (canary but for the data), between
 * the guard pages [lo - page, lo) and [hi, hi + page). */
static unsigned char *win_data(const moects__ed_region *m, int r, int w) { return m->base + m->h->win_off[r][w]; }

static void win_span(const moects__ed_region *m, int r, int w, unsigned char **lo, unsigned char **hi)
{
    const size_t page = (size_t)sysconf(_SC_PAGESIZE), a8 = round_up(moects__ed_win_bytes(m->h, r, w), 8);
    *hi = win_data(m, r, w) + a8;
    *lo = *hi - round_up(a8, page);
}

/* The head of k's launch on the case: the layout's offsets (page-aligned parts; each window's data
 * ending at most 7 bytes below its upper guard page). 0, or -1 when the layout cannot be read. */
static int plan(const moects_kernel *k, int exec, const moects_ep_dispatch_combine_shape *s, const moects__ed_args *g,
                moects__ed_head *h)
{
    const int R = (int)s->world;
    const size_t page = (size_t)sysconf(_SC_PAGESIZE), R1 = (size_t)(R + 1) * 8;
    memset(h, 0, sizeof *h);
    h->magic = MOECTS__ED_REGION_MAGIC, h->world = (uint32_t)R, h->s = *s, h->exec = exec;
    snprintf(h->kernel, sizeof h->kernel, "%s", k->name);
    memcpy(h->recv_first, g->recv_first, R1);
    if (fetch(k, h->token_first, g->a.token_first, R1) || fetch(k, h->expert_first, g->a.expert_first, R1)) return -1;
    int64_t rows = 0;
    for (int r = 0; r < R; r++) {
        const int64_t n = h->recv_first[r + 1] - h->recv_first[r], tk = (h->token_first[r + 1] - h->token_first[r]) * s->k;
        rows = n > rows ? n : rows;
        rows = tk > rows ? tk : rows;
    }
    h->max_bytes = (size_t)(rows + R) * (size_t)(s->H * 2 + 64) + 65536;
    size_t at = round_up(sizeof *h, page);
    h->ctl_off = at, at += round_up(sizeof(moects__ed_ctl), page);
    h->stage_off = at, at += round_up((size_t)R * h->max_bytes, page);
    for (int i = 0; exec && i < MOECTS_ED_NT; i++)
        h->in_off[i] = at, at = round_up(at + input_bytes(h, i), page);
    for (int r = 0; r < R; r++)
        for (int w = 0; w < MOECTS__ED_W_N; w++) {
            const size_t a8 = round_up(moects__ed_win_bytes(h, r, w), 8), span = round_up(a8, page);
            h->win_off[r][w] = at + page + span - a8;
            at += span + 2 * page;
        }
    h->total = at;
    return 0;
}

static void region_at(moects__ed_region *m, unsigned char *base)
{
    m->base = base, m->h = (moects__ed_head *)base;
    m->c = (moects__ed_ctl *)(base + m->h->ctl_off), m->stage = base + m->h->stage_off;
}

/* The windows (the case's poison in, canary around, guard pages beside) and exec'd ranks' inputs. */
static int region_fill(const moects_kernel *k, moects__ed_region *m, const moects__ed_args *g)
{
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    for (int i = 0; m->h->exec && i < MOECTS_ED_NT; i++)
        if (fetch(k, m->base + m->h->in_off[i], input_of(&g->a, i), input_bytes(m->h, i))) return -1;
    for (int r = 0; r < (int)m->h->world; r++)
        for (int w = 0; w < MOECTS__ED_W_N; w++) {
            unsigned char *lo, *hi;
            win_span(m, r, w, &lo, &hi);
            memset(lo, MOECTS__ED_CANARY, (size_t)(hi - lo));
            if (fetch(k, win_data(m, r, w), global_part(g, m->h, r, w), moects__ed_win_bytes(m->h, r, w))) return -1;
            if (mprotect(lo - page, page, PROT_NONE) || mprotect(hi, page, PROT_NONE)) return -1;
        }
    return 0;
}

/* The region of k's launch, behind *fd (a memfd). 0, or -1 (its parts mapped so far in m). */
static int region_open(const moects_kernel *k, int exec, const moects_ep_dispatch_combine_shape *s,
                       const moects__ed_args *g, moects__ed_region *m, int *fd)
{
    moects__ed_head h;
    memset(m, 0, sizeof *m);
    if (plan(k, exec, s, g, &h)) return -1;
    if ((*fd = memfd_create("moects-ep-ranks", MFD_CLOEXEC)) < 0 || ftruncate(*fd, (off_t)h.total)) return -1;
    void *b = mmap(NULL, h.total, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
    if (b == MAP_FAILED) return -1;
    memcpy(b, &h, sizeof h);
    region_at(m, b);
    return region_fill(k, m, g);
}

static void region_close(moects__ed_region *m, int fd)
{
    if (m->base) munmap(m->base, m->h->total);
    if (fd >= 0) close(fd);
}

int moects__ed_region_attach(int fd, moects__ed_region *m)
{
    memset(m, 0, sizeof *m);
    moects__ed_head h;
    if (pread(fd, &h, sizeof h, 0) != (ssize_t)sizeof h || h.magic != MOECTS__ED_REGION_MAGIC || h.world < 1 ||
        h.world > MAX_W) {
        fprintf(stderr, "ep_dispatch_combine: fd %d holds no launch region of this moects build\n", fd);
        return -1;
    }
    void *b = mmap(NULL, h.total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (b == MAP_FAILED) {
        perror("ep_dispatch_combine: mapping the launch region");
        return -1;
    }
    region_at(m, b);
    return 0;
}

/* ---- the ranks ---- */

/* A CPU kernel's rank r, forked: its shape, args and communicator over the region, run(), its result. */
static void rank_main(const moects_kernel *k, moects__ed_region *m, const moects__ed_args *g, int r, pid_t parent)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    moects_ep_comm comm;
    moects__ed_comm_init(m, r, -1, &comm);
    void *out[MOECTS__ED_W_N];
    for (int w = 0; w < MOECTS__ED_W_N; w++) out[w] = win_data(m, r, w);
    const moects_ep_dispatch_combine_shape s = moects__ed_rank_shape(m->h, r);
    const moects_ep_dispatch_combine_args ra = moects__ed_rank_args(m->h, &g->a, m->h->token_first[r], out, &comm);
    const int rc = k->run(&s, &ra, NULL);
    moects__ed_rank_returned(m, r);
    moects__ed_rank_result(m, r, rc);
    fflush(NULL);
    _exit(0);
}

/* A CUDA kernel's rank r: `exe __ep-rank FD r`, the region's fd kept open across the exec. */
static void rank_exec(const char *exe, int fd, int r, pid_t parent)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    char fds[16], rs[16];
    snprintf(fds, sizeof fds, "%d", fd);
    snprintf(rs, sizeof rs, "%d", r);
    if (fcntl(fd, F_SETFD, 0) == 0) execl(exe, exe, "__ep-rank", fds, rs, (char *)NULL);
    fprintf(stderr, "ep_dispatch_combine: rank %d: cannot start %s __ep-rank\n", r, exe);
    _exit(127);
}

/* Wait for every rank; a death fails the others' waits. The first failure's words to stderr (the
 * kernel log) and its code: the rank's non-zero return, or 128 + its signal. */
static int reap(moects__ed_region *m, pid_t *pid, int R)
{
    int rc = 0;
    for (int left = R; left > 0; left--) {
        int st;
        const pid_t p = wait(&st);
        int r = 0;
        while (r < R && pid[r] != p) r++;
        if (p < 0 || r == R) return rc ? rc : -1;
        if (!__atomic_load_n(&m->c->returned[r], __ATOMIC_ACQUIRE)) {
            __atomic_store_n(&m->c->failed, 1, __ATOMIC_RELEASE);
            if (!rc) {
                rc = WIFSIGNALED(st) ? 128 + WTERMSIG(st) : -1;
                fprintf(stderr, "ep_dispatch_combine: rank %d of %d %s %d\n", r, R,
                        WIFSIGNALED(st) ? "killed by signal" : "exited in run() with status", WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
            }
        } else if (m->c->rc[r] && !rc) {
            rc = m->c->rc[r];
            fprintf(stderr, "ep_dispatch_combine: rank %d of %d: run() returned %d\n", r, R, rc);
        }
    }
    return rc;
}

/* 1 when the canary around window w of rank r holds. */
static int win_intact(const moects__ed_region *m, int r, int w)
{
    unsigned char *lo, *hi;
    const unsigned char *d = win_data(m, r, w), *e = d + moects__ed_win_bytes(m->h, r, w);
    win_span(m, r, w, &lo, &hi);
    for (const unsigned char *p = lo; p < d; p++)
        if (*p != MOECTS__ED_CANARY) return 0;
    for (const unsigned char *p = e; p < hi; p++)
        if (*p != MOECTS__ED_CANARY) return 0;
    return 1;
}

/* Every rank's windows intact, then copied into the case's output. 0, or -1 naming the window. */
static int collect(const moects_kernel *k, moects__ed_region *m, const moects__ed_args *g)
{
    for (int r = 0; r < (int)m->h->world; r++)
        for (int w = 0; w < MOECTS__ED_W_N; w++) {
            if (!win_intact(m, r, w)) {
                fprintf(stderr, "ep_dispatch_combine: rank %d wrote outside its %s window\n", r, moects__ed_win_names[w]);
                return -1;
            }
            if (store(k, global_part(g, m->h, r, w), win_data(m, r, w), moects__ed_win_bytes(m->h, r, w))) return -1;
        }
    return 0;
}

/* The program exec'd ranks run (a CUDA kernel's; any under MOECTS_EP_EXEC=1): the moects binary, which
 * names itself in MOECTS_EXE. NULL for forked ranks, or with the reason on stderr when none is named. */
static const char *rank_exe(const moects_kernel *k, int *bad)
{
    const char *x = getenv("MOECTS_EP_EXEC"), *e = getenv("MOECTS_EXE");
    *bad = 0;
    if (k->device != MOECTS_DEVICE_CUDA && !(x && !strcmp(x, "1"))) return NULL;
    if (e && *e) return e;
    fprintf(stderr, "ep_dispatch_combine: %s's ranks are `moects __ep-rank` processes: set MOECTS_EXE to the moects "
                    "binary (the moects command sets it)\n", k->name);
    *bad = 1;
    return NULL;
}

int moects__ed_launch(const moects_kernel *k, const void *shape, const void *args, void *stream)
{
    (void)stream;
    const moects_ep_dispatch_combine_shape *s = shape;
    const int R = (int)s->world;
    if (R < 1 || R > MAX_W) {
        fprintf(stderr, "ep_dispatch_combine: world out of range\n");
        return -1;
    }
    int bad;
    const char *exe = rank_exe(k, &bad);
    if (bad) return -1;
    moects__ed_region m;
    int fd = -1, started = 0;
    int rc = region_open(k, exe != NULL, s, args, &m, &fd) ? -1 : 0;
    if (rc) fprintf(stderr, "ep_dispatch_combine: the launch region could not be made\n");
    pid_t pid[MAX_W];
    fflush(NULL);
    const pid_t parent = getpid();
    for (; rc == 0 && started < R; started++) {
        pid[started] = fork();
        if (pid[started] == 0) exe ? rank_exec(exe, fd, started, parent) : rank_main(k, &m, args, started, parent);
        if (pid[started] < 0) rc = -1;
    }
    if (rc) { /* a mapping or a fork failed: the ranks already started fail their first wait */
        if (m.c) __atomic_store_n(&m.c->failed, 1, __ATOMIC_RELEASE);
        for (int r = 0; r < started - 1; r++) waitpid(pid[r], NULL, 0);
    } else {
        rc = reap(&m, pid, R);
    }
    if (rc == 0) rc = collect(k, &m, args);
    region_close(&m, fd);
    return rc;
}
