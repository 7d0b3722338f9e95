/* runner.c: kernels under test run in forked worker processes (DESIGN.md "Harness": isolation); each
 * task itself is harness/run/task.c.
 * Parent -> worker: a task (case index, kernel index, the threads for a reference it computes,
 * the recipes the case's kernels want), case-major, one at a time; a worker keeps one case's
 * inputs, references and device copies across that case's kernels (a group). Worker -> parent:
 * fixed-size messages, phase notices (inputs, reference, kernel, with the timing so far) and the
 * moects_result. Groups start op by op (the kernels' order), costliest first, on weighted slots
 * (harness/run/sched.c): a huge FP4 case holds several of the --jobs slots, and its reference runs on as many times the threads,
 * until its worker announces the reference done. A worker that dies costs only its task
 * (FAIL_CRASH); a fresh worker resumes with the next one. Worker w belongs to the set of GPU
 * w % ndevices (--gpus): started with that CUDA_VISIBLE_DEVICES, replaced in the same set, its results
 * stamped with it; the groups go to whichever worker is free, so every GPU works until the last
 * group has started (issue 33). The parent never touches CUDA. */
#include "moects_runner.h"

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "capi_internal.h"
#include "moects.h"
#include "moects_compare.h"
#include "moects_device.h"
#include "moects_judge.h"
#include "moects_ref.h"
#include "moects_runner_internal.h"
#include "moects_task_internal.h"
#include "reports_internal.h"
#include "moects_registry.h"
#include "moects_op.h"
#include "moects_progress.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#define MOECTS_WORKER_LEAK_CHECK() __lsan_do_leak_check() /* -DMOECTS_SANITIZE=ON: workers _exit */
#else
#define MOECTS_WORKER_LEAK_CHECK() ((void)0)
#endif

void openblas_set_num_threads(int num_threads); /* OpenBLAS (linked by moects_ref) */
int openblas_get_num_threads(void);

#define now_s moects__now_s
typedef moects__task_ctl task_ctl;

/* ------------------------------------------------------------------ protocol ---- */

typedef struct {
    uint32_t magic;
    uint32_t task, case_idx, kernel_idx;
    uint32_t threads; /* OpenBLAS threads for a reference this task computes */
    uint32_t recipes; /* bit r: a kernel of the case compares under recipe r */
    int32_t refmode;  /* moects__task_ctl.refmode, check */
    int32_t check;
    int32_t share;    /* moects__task_ctl.share: a later task of the case may end this worker */
    moects_case c;    /* the case itself: an exec'd worker (--kernel-py) has no copy of the run's cases */
} task_msg;

/* MSG_PHASE: arg = the phase the task enters (PH_*), r its timing so far.
 * MSG_RESULT: arg = 1 when the worker exits after it, 2 when it exits and a fresh worker must run
 * the task again (do_task), r the result. */
enum { MSG_PHASE = 1, MSG_RESULT = 2 };
typedef struct {
    uint32_t magic, type, task, arg;
    moects_result r;
} result_msg;

#define MAGIC 0x6d6f6563u /* "moec" */

int moects__write_full(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

int moects__read_full(int fd, void *p, size_t n)
{
    char *c = p;
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, c + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return -1;
        if (r == 0) return got ? -1 : 0;
        got += (size_t)r;
    }
    return 1;
}

typedef struct {
    int fd;
    uint32_t task;
} notify_ctx;

static void notify_phase(void *p, int phase, const moects_result *r)
{
    notify_ctx *n = p;
    result_msg m;
    memset(&m, 0, sizeof m);
    m.magic = MAGIC;
    m.type = MSG_PHASE;
    m.task = n->task;
    m.arg = (uint32_t)phase;
    m.r = *r;
    if (moects__write_full(n->fd, &m, sizeof m) != 0) _exit(3);
}

/* The kernels a worker runs (kernel_idx of a task indexes kernels) and how. */
typedef struct {
    const moects_kernel *const *kernels;
    size_t nkernels;
    const unsigned char *is_py; /* per kernel: a Python kernel (--perf notes its call overhead); may be NULL */
    uint64_t seed;
    int perf;
    const char *dump_dir;
    int dev_alone; /* the worker has its device to itself (resource-fault probes of device memory) */
    const char *share_dir; /* the run's shared references (harness/run/refshare.c), NULL none */
} worker_cfg;

/* The run's share directory ("" none): made by the parent before it forks its workers, which read it. */
static char share_dir[512];

/* The worker loop of every worker, forked or exec'd: a task at a time until the parent closes rfd. */
static void worker_loop(const worker_cfg *w, int rfd, int wfd)
{
    moects__worker *ws = moects__worker_new(w->dump_dir, w->dev_alone);
    if (!ws) _exit(4);
    static task_msg t; /* the case stays here while the worker holds its inputs */
    for (;;) {
        int rc = moects__read_full(rfd, &t, sizeof t);
        if (rc == 0) break;
        if (rc < 0 || t.magic != MAGIC || t.kernel_idx >= w->nkernels || t.threads > 4096) _exit(4);
        t.c.id[sizeof t.c.id - 1] = '\0';
        result_msg m;
        memset(&m, 0, sizeof m);
        notify_ctx nc = {wfd, t.task};
        task_ctl tc = {(int)t.threads, t.recipes, notify_phase, &nc, t.refmode, t.check, w->share_dir, t.share};
        int ex = moects__worker_task(ws, (long)t.case_idx, &t.c, w->kernels[t.kernel_idx], w->seed, w->perf, &tc, &m.r);
        if (w->perf && w->is_py && w->is_py[t.kernel_idx] && m.r.kernel_ms > 0) {
            size_t l = strlen(m.r.reason);
            snprintf(m.r.reason + l, sizeof m.r.reason - l, "%sthe time includes the Python call overhead",
                     l ? "; " : "");
        }
        m.magic = MAGIC;
        m.type = MSG_RESULT;
        m.task = t.task;
        m.arg = (uint32_t)ex;
        if (moects__write_full(wfd, &m, sizeof m) != 0) _exit(3);
        if (ex) _exit(0);
    }
    moects__worker_free(ws);
}

static void exec_python(const moects_runner_opts *o, int rfd, int wfd);

/* The CUDA_VISIBLE_DEVICES of worker w's set (moects_runner_opts.devices), NULL when the run has no GPU list. */
static const char *worker_gpu(const moects_runner_opts *o, int w)
{
    return o->devices && o->ndevices ? o->devices[(size_t)w % o->ndevices] : NULL;
}

/* Whether a CUDA device is behind the run's GPU list (a CUDA kernel runs, rather than SKIP at once). */
static int has_device(const moects_runner_opts *o) { return o->ndevices && !o->fake_devices; }

static void worker_main(const moects_runner_opts *o, int rfd, int wfd, int widx, int base_threads, int log_fd)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* no orphaned workers holding a GPU */
    signal(SIGPIPE, SIG_DFL);
    /* whatever a kernel prints must not mix with the TAP on stdout nor with the run's progress on
     * stderr: both go to the parent through a pipe (kernels.log, and the case's reason on a crash);
     * unbuffered, so that a crash loses none */
    if (log_fd >= 0) {
        dup2(log_fd, 2);
        close(log_fd);
    }
    dup2(2, 1);
    setvbuf(stdout, NULL, _IONBF, 0);
    if (worker_gpu(o, widx)) setenv("CUDA_VISIBLE_DEVICES", worker_gpu(o, widx), 1); /* before any CUDA call */
    if (o->nkernel_py) exec_python(o, rfd, wfd); /* does not return */
    openblas_set_num_threads(base_threads);
    worker_cfg w = {o->kernels, o->nkernels, NULL, o->seed, o->perf, o->dump_dir,
                    has_device(o) ? o->jobs <= (int)o->ndevices : o->jobs == 1, share_dir[0] ? share_dir : NULL};
    worker_loop(&w, rfd, wfd);
    MOECTS_WORKER_LEAK_CHECK(); /* a report goes to the kernel log, as the worker's stderr */
    _exit(0);
}

/* ---- exec'd workers (--kernel-py): the setup message, the exec, moects_worker_serve ---- */

#define SETUP_MAGIC 0x6d6f6573u /* "moes" */
typedef struct {
    uint32_t magic, api;
    uint32_t case_size, result_size, task_size; /* the same build on both sides */
    uint32_t nkernels, nlibs;
    int32_t perf, threads;
    uint64_t seed;
    char dump_dir[4096];
} setup_msg;
typedef char name_slot[96];
typedef char path_slot[4096];

/* The Python worker: $MOECTS_PYTHON (default python3) -m moects._worker --rfd R --wfd W --kernel-py
 * SPEC ... with MOECTS_LIB naming this build's libmoects. Exits 127 when the exec fails. */
static void exec_python(const moects_runner_opts *o, int rfd, int wfd)
{
    const char *py = getenv("MOECTS_PYTHON");
    char r[16], w[16];
    snprintf(r, sizeof r, "%d", rfd);
    snprintf(w, sizeof w, "%d", wfd);
    size_t n = 0;
    const char **argv = calloc(8 + 2 * o->nkernel_py, sizeof *argv);
    if (!argv) _exit(127);
    argv[n++] = py && *py ? py : "python3";
    argv[n++] = "-m", argv[n++] = "moects._worker";
    argv[n++] = "--rfd", argv[n++] = r, argv[n++] = "--wfd", argv[n++] = w;
    for (size_t i = 0; i < o->nkernel_py; i++) argv[n++] = "--kernel-py", argv[n++] = o->kernel_py[i];
    if (o->libmoects) setenv("MOECTS_LIB", o->libmoects, 1);
    setenv("PYTHONUNBUFFERED", "1", 1);
    execvp(argv[0], (char *const *)argv);
    fprintf(stderr, "moects: --kernel-py: cannot start %s: %s\n", argv[0], strerror(errno));
    _exit(127);
}

/* The setup an exec'd worker needs (it shares no memory with the parent): the run's kernel names in
 * task order, the --kernel-lib paths to load again, seed, flags. 0, or -1 when the pipe broke. */
static int send_setup(const moects_runner_opts *o, int fd, int threads)
{
    setup_msg s;
    memset(&s, 0, sizeof s);
    s.magic = SETUP_MAGIC;
    s.api = MOECTS_API_VERSION;
    s.case_size = sizeof(moects_case), s.result_size = sizeof(moects_result), s.task_size = sizeof(task_msg);
    s.nkernels = (uint32_t)o->nkernels, s.nlibs = (uint32_t)o->nlibs;
    s.perf = o->perf, s.threads = threads, s.seed = o->seed;
    snprintf(s.dump_dir, sizeof s.dump_dir, "%s", o->dump_dir ? o->dump_dir : "");
    if (moects__write_full(fd, &s, sizeof s)) return -1;
    for (size_t i = 0; i < o->nkernels; i++) {
        name_slot nm = {0};
        snprintf(nm, sizeof nm, "%s", o->kernels[i]->name);
        if (moects__write_full(fd, nm, sizeof nm)) return -1;
    }
    for (size_t i = 0; i < o->nlibs; i++) {
        path_slot pa = {0};
        snprintf(pa, sizeof pa, "%s", o->libs[i]);
        if (moects__write_full(fd, pa, sizeof pa)) return -1;
    }
    return 0;
}

/* The kernel of that name: one of the caller's (Python) kernels, a built-in, or a library's. */
static const moects_kernel *find_kernel(const char *name, const moects_kernel *const *py, size_t npy,
                                        const moects_kernel **libk, size_t nlibk, int *is_py)
{
    *is_py = 0;
    for (size_t i = 0; i < npy; i++)
        if (py[i] && py[i]->name && !strcmp(py[i]->name, name)) return *is_py = 1, py[i];
    size_t nb;
    const moects_kernel *const *b = moects__builtin_kernels(&nb);
    for (size_t i = 0; i < nb; i++)
        if (!strcmp(b[i]->name, name)) return b[i];
    for (size_t i = 0; i < nlibk; i++)
        if (!strcmp(libk[i]->name, name)) return libk[i];
    return NULL;
}

/* The kernel table of the setup, in the parent's order. 0, or -1 with the reason on stderr. */
static int setup_table(int rfd, const setup_msg *s, const moects_kernel *const *py, size_t npy,
                       const moects_kernel **table, unsigned char *is_py)
{
    name_slot *names = calloc(s->nkernels + 1, sizeof *names);
    const moects_kernel **libk = NULL;
    size_t nlibk = 0;
    char err[4400];
    int rc = names && moects__read_full(rfd, names, s->nkernels * sizeof *names) == (s->nkernels ? 1 : 0) ? 0 : -1;
    for (uint32_t i = 0; rc == 0 && i < s->nlibs; i++) {
        path_slot pa;
        if (moects__read_full(rfd, pa, sizeof pa) != 1) rc = -1;
        pa[sizeof pa - 1] = '\0';
        if (rc == 0 && moects__plugin_load(pa, &libk, &nlibk, err, sizeof err) != 0)
            rc = -1, fprintf(stderr, "moects worker: --kernel-lib %s\n", err);
    }
    for (uint32_t i = 0; rc == 0 && i < s->nkernels; i++) {
        int p;
        names[i][sizeof names[i] - 1] = '\0';
        if (!(table[i] = find_kernel(names[i], py, npy, libk, nlibk, &p)))
            rc = -1, fprintf(stderr, "moects worker: kernel %s: not in this process (built-in, --kernel-lib or "
                                     "--kernel-py)\n", names[i]);
        is_py[i] = (unsigned char)p;
    }
    free(names);
    return rc;
}

int moects_worker_serve(int rfd, int wfd, const moects_kernel *const *kernels, size_t n)
{
    setup_msg s;
    if (moects__read_full(rfd, &s, sizeof s) != 1 || s.magic != SETUP_MAGIC) {
        fprintf(stderr, "moects worker: no setup from the runner on fd %d\n", rfd);
        return 2;
    }
    if (s.api != MOECTS_API_VERSION || s.case_size != sizeof(moects_case) || s.result_size != sizeof(moects_result) ||
        s.task_size != sizeof(task_msg) || s.nkernels > 100000 || s.nlibs > 1000) {
        fprintf(stderr, "moects worker: the runner is another moects build than this libmoects (%s): use the "
                        "MOECTS_LIB the runner sets\n", MOECTS_VERSION);
        return 2;
    }
    const moects_kernel **table = calloc(s.nkernels + 1, sizeof *table);
    unsigned char *is_py = calloc(s.nkernels + 1, 1);
    if (!table || !is_py || setup_table(rfd, &s, kernels, n, table, is_py) != 0) {
        free(table), free(is_py);
        return 2;
    }
    signal(SIGPIPE, SIG_DFL);
    setvbuf(stdout, NULL, _IONBF, 0);
    openblas_set_num_threads(s.threads > 0 ? s.threads : 1);
    s.dump_dir[sizeof s.dump_dir - 1] = '\0';
    worker_cfg w = {table, s.nkernels, is_py, s.seed, s.perf, s.dump_dir[0] ? s.dump_dir : NULL, 0, NULL};
    worker_loop(&w, rfd, wfd);
    free(table), free(is_py);
    return 0;
}

/* ------------------------------------------------------------------ parent side ---- */

typedef struct {
    pid_t pid;   /* 0: not running */
    int to, from;
    int busy;
    uint32_t task;
    int phase;             /* PH_* of the task in flight, from the worker's notices */
    double t_task, t_phase; /* when the task was sent, when its phase began */
    moects_result part;    /* the task's timing so far, from the last notice */
    double deadline;
    long group;            /* the case group the worker runs, -1 none */
    size_t g_next, g_end;  /* the rest of that group's tasks: positions in parent.torder */
    int out;               /* read end of the worker's stdout/stderr, -1 none */
    char tail[512];        /* the last bytes it printed during the task in flight */
    size_t ntail;
} worker;

static int spawn(const moects_runner_opts *o, worker *ws, int nw, int w, int base_threads, char *err,
                 size_t errlen)
{
    int tp[2], rp[2], op[2];
    if (pipe(tp) != 0) {
        snprintf(err, errlen, "pipe: %s", strerror(errno));
        return -1;
    }
    if (pipe(rp) != 0) {
        snprintf(err, errlen, "pipe: %s", strerror(errno));
        close(tp[0]);
        close(tp[1]);
        return -1;
    }
    if (pipe(op) != 0) { /* the worker's stdout and stderr */
        snprintf(err, errlen, "pipe: %s", strerror(errno));
        close(tp[0]), close(tp[1]), close(rp[0]), close(rp[1]);
        return -1;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(err, errlen, "fork: %s", strerror(errno));
        close(tp[0]), close(tp[1]), close(rp[0]), close(rp[1]), close(op[0]), close(op[1]);
        return -1;
    }
    if (pid == 0) {
        for (int i = 0; i < nw; i++)
            if (i != w && ws[i].pid) close(ws[i].to), close(ws[i].from), close(ws[i].out);
        close(tp[1]);
        close(rp[0]);
        close(op[0]);
        worker_main(o, tp[0], rp[1], w, base_threads, op[1]);
    }
    close(tp[0]);
    close(rp[1]);
    close(op[1]);
    fcntl(op[0], F_SETFL, fcntl(op[0], F_GETFL) | O_NONBLOCK);
    ws[w].out = op[0];
    ws[w].ntail = 0;
    if (o->nkernel_py) send_setup(o, tp[1], base_threads); /* a worker that cannot take it dies: its task crashes */
    ws[w].pid = pid;
    ws[w].to = tp[1];
    ws[w].from = rp[0];
    ws[w].busy = 0;
    return 0;
}

/* What worker w printed so far: to the kernel log (log_fd, else our stderr) and its task's tail. */
static void drain(worker *w, int log_fd)
{
    char buf[65536];
    ssize_t n;
    while (w->out >= 0 && ((n = read(w->out, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))) {
        if (n <= 0) continue;
        for (ssize_t off = 0, k; off < n; off += k > 0 ? k : n) /* a log that cannot be written loses it */
            k = write(log_fd >= 0 ? log_fd : 2, buf + off, (size_t)(n - off));
        size_t keep = sizeof w->tail - 1, add = (size_t)n > keep ? keep : (size_t)n;
        if (w->ntail + add > keep) {
            size_t drop = w->ntail + add - keep;
            memmove(w->tail, w->tail + drop, w->ntail - drop);
            w->ntail -= drop;
        }
        memcpy(w->tail + w->ntail, buf + n - add, add);
        w->ntail += add;
    }
}

/* ", kernel output: ..." with the last bytes worker w printed during its task appended to reason
 * (lines joined by " / "), when it printed anything. */
static void add_output(moects_result *r, const worker *w)
{
    char t[sizeof w->tail];
    size_t n = 0;
    for (size_t i = 0; i < w->ntail; i++) {
        unsigned char c = (unsigned char)w->tail[i];
        if (c == '\n' && n && t[n - 1] != ' ') memcpy(t + n, " / ", 3), n += 3;
        else if (c >= 0x20 && c != 0x7f && n + 1 < sizeof t - 3) t[n++] = (char)c;
        if (n + 4 >= sizeof t) break;
    }
    while (n && (t[n - 1] == ' ' || t[n - 1] == '/')) n--;
    t[n] = '\0';
    size_t l = strlen(r->reason);
    if (n && l + 20 < sizeof r->reason) {
        const char *from = t + (n > sizeof r->reason - l - 20 ? n - (sizeof r->reason - l - 20) : 0);
        snprintf(r->reason + l, sizeof r->reason - l, "; kernel output: %s", from);
    }
}

static void reap(worker *w, int *status, int log_fd)
{
    drain(w, log_fd);
    close(w->to);
    close(w->from);
    if (w->out >= 0) close(w->out);
    w->out = -1;
    int st = 0;
    while (waitpid(w->pid, &st, 0) < 0 && errno == EINTR) {}
    if (status) *status = st;
    w->pid = 0;
    w->busy = 0;
}

static void death_reason(char *buf, size_t len, int st, int kernel_phase)
{
    const char *phase = kernel_phase ? "while the kernel ran" : "while building inputs/reference";
    if (WIFSIGNALED(st))
        snprintf(buf, len, "worker killed by signal %d (SIG%s: %s) %s", WTERMSIG(st),
                 sigabbrev_np(WTERMSIG(st)) ? sigabbrev_np(WTERMSIG(st)) : "?", strsignal(WTERMSIG(st)), phase);
    else if (WIFEXITED(st))
        snprintf(buf, len, "worker exited with status %d %s", WEXITSTATUS(st), phase);
    else
        snprintf(buf, len, "worker died %s", phase);
}

typedef struct {
    uint32_t case_idx, kernel_idx;
} task;

/* When a task of case c that entered `phase` at t0 is killed (0: never): the kernel gets
 * --timeout, inputs + reference (PH_OTHER: from the task's start) and the comparison 10x that;
 * each also 30 s per GiB of the case's buffers (moects__case_bytes): the copies, poison and guard
 * checks of a multi-GB case under 8 workers took over 2 minutes on the H200 (large tier). */
static double phase_deadline(const moects_runner_opts *o, const moects_case *c, int phase, double t0)
{
    if (!(o->timeout_s > 0)) return 0;
    return t0 + (phase == PH_KERNEL ? 1 : 10) * o->timeout_s + 30.0 * moects__case_bytes(c) / 1073741824.0;
}

/* The identity of task t and the timing of a task the parent ends (crash, timeout): what the
 * worker announced, plus the phase in flight up to now, and the wall time since it was sent. */
static void fill_lost(const moects_runner_opts *o, const task *t, const worker *W, moects_result *r)
{
    const moects_case *c = &o->cases[t->case_idx];
    const moects_kernel *k = o->kernels[t->kernel_idx];
    moects__result_identity(r, c, k, o->seed);
    double now = now_s(), in_phase = now - W->t_phase;
    r->wall_s = now - W->t_task;
    r->inputs_s = W->part.inputs_s + (W->phase == PH_INPUTS ? in_phase : 0);
    r->reference_s = W->part.reference_s + (W->phase == PH_REFERENCE ? in_phase : 0);
    r->kernel_s = W->part.kernel_s + (W->phase == PH_KERNEL ? in_phase : 0);
    r->compare_s = W->part.compare_s + (W->phase == PH_COMPARE ? in_phase : 0);
    r->ref_threads = W->part.ref_threads;
    r->n_hashes = W->part.n_hashes;
    memcpy(r->hashes, W->part.hashes, sizeof r->hashes);
    r->has_ref_hash = W->part.has_ref_hash;
    r->ref_xxh64 = W->part.ref_xxh64;
    moects__round_timing(r);
}

/* The run's parent: tasks, case groups, the scheduler, the workers. */
typedef struct {
    const moects_runner_opts *o;
    task *tasks;
    size_t nt, ng, nprior, nk_used; /* tasks to run, case groups, results kept (o->prior), kernels with a case */
    size_t *gstart, *gord;
    uint32_t *torder; /* the order tasks are sent in: group g's at [gstart[g], gstart[g+1]) */
    int *want;
    unsigned *recipes; /* per group: the recipes its kernels compare under (task_msg.recipes) */
    moects_result *res;
    char *done;
    size_t ndone;
    worker *ws;
    int nw, base_threads;
    int log_fd; /* the kernel log, -1 none */
    moects__sched sched;
    /* fail fast: per kernel, FAIL_* so far, tasks over, whether all of them crashed or timed out,
     * and the reason it was stopped ("" while it runs); the run's honest FAIL_* and its stop reason */
    size_t *kfails, *kover;
    char *kalive_dead, (*kstop)[512];
    size_t fails;
    char stop[200];
    moects__progress prog; /* the stderr lines (harness/run/progress.c) */
} parent;

/* p->torder: each group's tasks with its mutants last, each part in kernel order. A mutant that
 * crashes its worker makes the group's next task build the case's inputs and reference again in a
 * fresh worker (seconds on a large case); after the honest and CUDA kernels that cost is paid
 * less often. Results keep task order. */
static void order_groups_tasks(parent *p)
{
    for (size_t g = 0; g < p->ng; g++) {
        size_t n = p->gstart[g];
        for (int mutants = 0; mutants < 2; mutants++)
            for (size_t ti = p->gstart[g]; ti < p->gstart[g + 1]; ti++)
                if ((p->o->kernels[p->tasks[ti].kernel_idx]->bug != NULL) == mutants) p->torder[n++] = (uint32_t)ti;
    }
}

/* Task ti's worker died or was killed (p->res[ti] filled): say so in the kernel log, after what
 * the worker printed, so that its messages can be told apart. */
static void log_lost(const parent *p, uint32_t ti)
{
    if (p->log_fd < 0) return;
    const moects_result *r = &p->res[ti];
    dprintf(p->log_fd, "moects: %s on %s: %s: %s\n", r->kernel, r->case_id, moects__verdict_name(r->verdict),
            r->reason);
}

/* Fail-fast bookkeeping of result r of kernel k, finished (moects_runner_opts.max_failures ...): counts
 * its failure, and stops its kernel or the run when a limit is reached. Mutants are never counted or
 * stopped. */
static void fail_fast_note(parent *p, size_t k, const moects_result *r)
{
    const moects_runner_opts *o = p->o;
    if (o->kernels[k]->bug || !strncmp(r->reason, MOECTS_NOT_RUN, strlen(MOECTS_NOT_RUN))) return;
    int fail = moects_verdict_is_fail(r->verdict), dead = r->verdict == MOECTS_FAIL_CRASH || r->verdict == MOECTS_FAIL_TIMEOUT;
    if (!dead) p->kalive_dead[k] = 0;
    p->kover[k]++;
    p->kfails[k] += fail;
    p->fails += fail;
    if (!p->kstop[k][0] && o->dead_after > 0 && p->kalive_dead[k] && p->kover[k] >= (size_t)o->dead_after)
        snprintf(p->kstop[k], sizeof p->kstop[k], "its first %zu cases crashed or timed out (the last: %.120s: %.300s)",
                 p->kover[k], r->case_id, r->reason);
    if (!p->kstop[k][0] && o->max_kernel_failures > 0 && p->kfails[k] >= (size_t)o->max_kernel_failures)
        snprintf(p->kstop[k], sizeof p->kstop[k], "--max-kernel-failures %d reached", o->max_kernel_failures);
    if (!p->stop[0] && o->max_failures > 0 && p->fails >= (size_t)o->max_failures)
        snprintf(p->stop, sizeof p->stop, "--max-failures %d reached (failures of honest kernels)", o->max_failures);
}

/* Whether task ti is left unrun by fail-fast: then p->res[ti] is its SKIP with the reason. */
static int fail_fast_skip(parent *p, uint32_t ti)
{
    const moects_runner_opts *o = p->o;
    uint32_t k = p->tasks[ti].kernel_idx;
    if (o->kernels[k]->bug && !p->stop[0]) return 0;
    if (!p->stop[0] && !p->kstop[k][0]) return 0;
    moects_result *r = &p->res[ti];
    moects__result_identity(r, &o->cases[p->tasks[ti].case_idx], o->kernels[k], o->seed);
    r->verdict = MOECTS_SKIP;
    if (p->stop[0]) snprintf(r->reason, sizeof r->reason, MOECTS_NOT_RUN "the run stopped: %s", p->stop);
    else snprintf(r->reason, sizeof r->reason, MOECTS_NOT_RUN "%s stopped: %s", o->kernels[k]->name, p->kstop[k]);
    return 1;
}

/* Task ti's estimated seconds (moects__progress_run_s): none for a CUDA kernel without a device (SKIP). */
static double task_est(const parent *p, uint32_t ti)
{
    const moects_runner_opts *o = p->o;
    if (o->kernels[p->tasks[ti].kernel_idx]->device == MOECTS_DEVICE_CUDA && !has_device(o)) return 0;
    return moects__progress_run_s(&o->cases[p->tasks[ti].case_idx]);
}

/* Task ti of worker W is over (result in p->res[ti], given W's GPU when it ran); the group ends with its
 * last task. */
static void task_over(parent *p, worker *W, uint32_t ti)
{
    moects_result *r = &p->res[ti];
    const char *gpu = worker_gpu(p->o, (int)(W - p->ws));
    if (gpu && strncmp(r->reason, MOECTS_NOT_RUN, strlen(MOECTS_NOT_RUN))) snprintf(r->gpu, sizeof r->gpu, "%s", gpu);
    fail_fast_note(p, p->tasks[ti].kernel_idx, r);
    if (p->o->on_result && strncmp(r->reason, MOECTS_NOT_RUN, strlen(MOECTS_NOT_RUN)))
        p->o->on_result(p->o->on_result_ctx, r);
    if (p->o->on_task) p->o->on_task(p->o->on_task_ctx, p->tasks[ti].case_idx, p->tasks[ti].kernel_idx, r);
    p->done[ti] = 1;
    p->ndone++;
    moects__progress_done(&p->prog, task_est(p, ti), p->o->kernels[p->tasks[ti].kernel_idx]->name,
                          p->o->cases[p->tasks[ti].case_idx].id);
    W->busy = 0;
    if (W->group >= 0 && W->g_next >= W->g_end) {
        if (share_dir[0]) moects__refshare_drop(share_dir, (long)p->tasks[p->gstart[W->group]].case_idx, p->recipes[W->group]);
        moects__sched_done(&p->sched, (size_t)W->group);
        W->group = -1;
    }
}

/* Whether a task of W's group after the one just sent may end its worker, so that the reference the
 * worker computes now is worth sharing (harness/run/refshare.c): a mutant (it runs in the worker unless
 * its case is huge) or a CUDA kernel on a host with a device (a sticky CUDA error ends its worker). */
static int may_end_worker(const parent *p, const worker *W)
{
    if (!share_dir[0]) return 0;
    for (size_t i = W->g_next; i < W->g_end; i++) {
        const moects_kernel *k = p->o->kernels[p->tasks[p->torder[i]].kernel_idx];
        if (k->bug || (k->device == MOECTS_DEVICE_CUDA && has_device(p->o))) return 1;
    }
    return 0;
}

/* Start groups on idle workers, send each worker without a task in flight its group's next task,
 * end workers that will get no more work. 0, or -1 with err (fork/pipe failure). */
static int hand_out(parent *p, char *err, size_t errlen)
{
    const moects_runner_opts *o = p->o;
    for (int w = 0; w < p->nw; w++) {
        worker *W = &p->ws[w];
        if (W->busy) continue;
        if (W->group < 0) {
            int n;
            long g = moects__sched_next(&p->sched, &n);
            if (g < 0) {
                if (W->pid && !moects__sched_left(&p->sched)) reap(W, NULL, p->log_fd); /* nothing left for it */
                continue;
            }
            W->group = g;
            W->g_next = p->gstart[g];
            W->g_end = p->gstart[g + 1];
        }
        if (fail_fast_skip(p, p->torder[W->g_next])) { /* left unrun: its SKIP is already in p->res */
            uint32_t ti = p->torder[W->g_next++];
            W->busy = 1;
            task_over(p, W, ti);
            w--;
            continue;
        }
        if (!W->pid && spawn(o, p->ws, p->nw, w, p->base_threads, err, errlen) != 0) return -1;
        uint32_t ti = p->torder[W->g_next++];
        int held = p->sched.held[W->group], share = may_end_worker(p, W);
        static task_msg m; /* a case is large: not on the stack */
        const uint32_t ci = p->tasks[ti].case_idx;
        m = (task_msg){MAGIC, ti, ci, p->tasks[ti].kernel_idx, (uint32_t)(held * p->base_threads), p->recipes[W->group],
                       o->reference_gpu - 1, o->refcheck && o->refcheck[ci], share, o->cases[ci]};
        drain(W, p->log_fd); /* what it printed before this task is not this task's */
        W->ntail = 0;
        W->busy = 1;
        W->task = ti;
        W->phase = PH_OTHER;
        W->t_task = W->t_phase = now_s();
        memset(&W->part, 0, sizeof W->part);
        W->deadline = phase_deadline(o, &o->cases[p->tasks[ti].case_idx], PH_OTHER, W->t_task);
        if (moects__write_full(W->to, &m, sizeof m) != 0) {
            /* died while idle: count the task as crashed rather than loop */
            int st;
            reap(W, &st, p->log_fd);
            fill_lost(o, &p->tasks[ti], W, &p->res[ti]);
            p->res[ti].verdict = MOECTS_FAIL_CRASH;
            death_reason(p->res[ti].reason, sizeof p->res[ti].reason, st, 0);
            log_lost(p, ti); /* the output is in the log already */
            add_output(&p->res[ti], W);
            task_over(p, W, ti);
            w--; /* the same worker (a fresh process) goes on with its group */
        }
    }
    return 0;
}

/* A message from worker W (readable): a phase notice or its result, else its death. */
static void on_message(parent *p, worker *W)
{
    const moects_runner_opts *o = p->o;
    result_msg m;
    int r = moects__read_full(W->from, &m, sizeof m);
    uint32_t ti = W->task;
    if (r == 1 && m.magic == MAGIC && m.task == ti && m.type == MSG_PHASE && m.arg <= PH_COMPARE) {
        if (W->phase == PH_REFERENCE && W->group >= 0) /* its reference is done: keep one slot */
            moects__sched_shrink(&p->sched, (size_t)W->group);
        W->phase = (int)m.arg;
        W->t_phase = now_s();
        W->part = m.r;
        if (m.arg >= PH_KERNEL) W->deadline = phase_deadline(o, &o->cases[p->tasks[ti].case_idx], (int)m.arg, W->t_phase);
        return;
    }
    if (r == 1 && m.magic == MAGIC && m.task == ti && m.type == MSG_RESULT && m.arg == 2) {
        reap(W, NULL, p->log_fd); /* out of memory after other tasks: the same task again, in a fresh worker */
        W->g_next--; /* ti, the task it was last sent */
        return;
    }
    if (r == 1 && m.magic == MAGIC && m.task == ti && m.type == MSG_RESULT) {
        p->res[ti] = m.r;
        if (m.arg) reap(W, NULL, p->log_fd);
        else drain(W, p->log_fd); /* printed before the result was sent: all in the pipe now */
        /* a CPU kernel's call process killed, or an overrun: in the kernel log as a lost worker is */
        if (m.r.verdict == MOECTS_FAIL_OOB_WRITE ||
            (m.r.verdict == MOECTS_FAIL_CRASH && !strncmp(m.r.reason, MOECTS_KERNEL_KILLED, strlen(MOECTS_KERNEL_KILLED))))
            log_lost(p, ti);
        if (m.r.verdict == MOECTS_FAIL_CRASH) add_output(&p->res[ti], W);
    } else {
        int st;
        kill(W->pid, SIGKILL); /* a garbled message: do not trust it */
        reap(W, &st, p->log_fd);
        fill_lost(o, &p->tasks[ti], W, &p->res[ti]);
        p->res[ti].verdict = MOECTS_FAIL_CRASH;
        death_reason(p->res[ti].reason, sizeof p->res[ti].reason, st, W->phase == PH_KERNEL);
        log_lost(p, ti); /* the output is in the log already */
        add_output(&p->res[ti], W);
    }
    task_over(p, W, ti);
}

static void parent_free(parent *p)
{
    if (p->log_fd >= 0) close(p->log_fd);
    free(p->tasks), free(p->torder), free(p->gstart), free(p->gord), free(p->want), free(p->recipes);
    free(p->res), free(p->done), free(p->ws);
    free(p->kfails), free(p->kover), free(p->kalive_dead), free(p->kstop);
    moects__sched_free(&p->sched);
}

/* The results into run, case-major in kernel order: each task's, or its prior result (o->prior) in its
 * place. 0, or -1 out of memory. */
static int push_results(const parent *p, moects_run *run)
{
    const moects_runner_opts *o = p->o;
    size_t ti = 0;
    for (size_t c = 0; c < o->ncases; c++)
        for (size_t k = 0; k < o->nkernels; k++) {
            if (o->kernels[k]->op != o->cases[c].op) continue;
            const moects_result *old = o->prior ? o->prior[c * o->nkernels + k] : NULL;
            if (moects__run_push(run, old ? old : &p->res[ti++]) != 0) return -1;
        }
    return 0;
}

/* The parent's arrays for cap tasks, o->ncases groups and o->jobs workers: 0, or -1 out of memory. */
static int parent_alloc(parent *p, size_t cap, int slots)
{
    const moects_runner_opts *o = p->o;
    p->tasks = malloc((cap ? cap : 1) * sizeof *p->tasks);
    p->torder = malloc((cap ? cap : 1) * sizeof *p->torder);
    p->gstart = malloc((o->ncases + 1) * sizeof *p->gstart);
    p->gord = malloc((o->ncases + 1) * sizeof *p->gord);
    p->want = malloc((o->ncases + 1) * sizeof *p->want);
    p->recipes = calloc(o->ncases + 1, sizeof *p->recipes);
    p->res = calloc(cap ? cap : 1, sizeof *p->res);
    p->done = calloc(cap ? cap : 1, 1);
    p->ws = calloc((size_t)slots, sizeof *p->ws);
    size_t nk1 = o->nkernels + 1;
    p->kfails = calloc(nk1, sizeof *p->kfails);
    p->kover = calloc(nk1, sizeof *p->kover);
    p->kalive_dead = malloc(nk1);
    p->kstop = calloc(nk1, sizeof *p->kstop);
    if (p->kalive_dead) memset(p->kalive_dead, 1, nk1);
    return !p->tasks || !p->torder || !p->gstart || !p->gord || !p->want || !p->recipes || !p->res || !p->done ||
                   !p->ws || !p->kfails || !p->kover || !p->kalive_dead || !p->kstop
               ? -1
               : 0;
}

/* The tasks, case-major (results from an earlier run are counted, not run again), grouped by case
 * with the recipes each group's kernels want. */
static void plan_tasks(parent *p)
{
    const moects_runner_opts *o = p->o;
    for (size_t c = 0; c < o->ncases; c++) {
        size_t before = p->nt;
        for (size_t k = 0; k < o->nkernels; k++)
            if (o->kernels[k]->op == o->cases[c].op) {
                const moects_result *old = o->prior ? o->prior[c * o->nkernels + k] : NULL;
                if (old) { /* from an earlier run: not run again, counted for fail fast */
                    fail_fast_note(p, k, old);
                    p->nprior++;
                    continue;
                }
                p->tasks[p->nt++] = (task){(uint32_t)c, (uint32_t)k};
                int rcp = moects__kernel_recipe(o->kernels[k], o->cases[c].op);
                if (rcp >= 0) p->recipes[p->ng] |= 1u << rcp;
            }
        if (p->nt > before) p->gstart[p->ng++] = before;
    }
    p->gstart[p->ng] = p->nt;
    order_groups_tasks(p);
}

/* The few huge cases, those that want several slots (a huge FP4 case takes several slots and as many
 * times the threads for its reference, harness/run/sched.c), start first, costliest first, on an idle
 * machine and not as the run's tail. Then the other groups op by op, in the order the kernels' ops
 * first appear (the TAP's order: a kernel's subtest can be written once its op's cases are done,
 * harness/report/tap_stream.c), each op's costliest first. Results keep case order. Then the first
 * progress line and the kernel log. 0, or -1 with err. */
static int plan_schedule(parent *p, int slots, char *err, size_t errlen)
{
    const moects_runner_opts *o = p->o;
    long ncpu = o->ncpu > 0 ? o->ncpu : sysconf(_SC_NPROCESSORS_ONLN);
    p->base_threads = (int)(ncpu > 0 ? ncpu : 1) / slots;
    if (p->base_threads < 1) p->base_threads = 1;
    double big = o->big_case_flops > 0 ? o->big_case_flops : MOECTS_BIG_CASE_FLOPS_DEFAULT;
    double *cost = malloc((p->ng + 1) * sizeof *cost), est = 0;
    size_t *rank = malloc((p->ng + 1) * sizeof *rank);
    for (size_t g = 0; g < p->ng; g++) {
        const moects_case *c = &o->cases[p->tasks[p->gstart[g]].case_idx];
        p->gord[g] = g;
        p->want[g] = moects__case_weight(c, big, slots);
        size_t k = 0;
        while (k < o->nkernels && o->kernels[k]->op != c->op) k++;
        if (cost && rank)
            cost[g] = moects__op(c->op) ? moects__op(c->op)->cost(c) : 0, rank[g] = p->want[g] > 1 ? 0 : k + 1;
        for (size_t ti = p->gstart[g]; ti < p->gstart[g + 1]; ti++) est += task_est(p, (uint32_t)ti);
    }
    if (cost && rank) moects__sched_order(p->gord, p->ng, cost, rank); /* else case order */
    free(cost), free(rank);
    p->nw = (size_t)slots > p->ng ? (p->ng ? (int)p->ng : 1) : slots;
    if (o->progress) /* the GPUs that get a worker: worker w is in GPU w % ndevices's set */
        moects__progress_start(&p->prog, o->progress, o->ncases, p->nk_used, p->nt + p->nprior, p->nprior, est, slots,
                               (size_t)p->nw < o->ndevices ? (size_t)p->nw : o->ndevices);
    if (moects__sched_init(&p->sched, p->ng, p->gord, p->want, slots) != 0)
        return snprintf(err, errlen, "out of memory for %zu tasks", p->nt), -1;
    if (o->kernel_log) {
        p->log_fd = open(o->kernel_log, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0666);
        if (p->log_fd < 0) return snprintf(err, errlen, "%s: cannot open: %s", o->kernel_log, strerror(errno)), -1;
    }
    for (int w = 0; w < p->nw; w++) p->ws[w].group = -1, p->ws[w].out = -1;
    return 0;
}

/* One wait for a worker's message, its printed output or the nearest deadline, and what arrived
 * handled. 0, or -1 with err (poll failed). */
static int wait_round(parent *p, char *err, size_t errlen)
{
    struct pollfd pf[2 * p->nw];
    int map[2 * p->nw], np = 0, nmsg;
    double nearest = 0;
    for (int w = 0; w < p->nw; w++)
        if (p->ws[w].busy) {
            pf[np] = (struct pollfd){.fd = p->ws[w].from, .events = POLLIN};
            map[np++] = w;
            if (p->ws[w].deadline > 0 && (nearest == 0 || p->ws[w].deadline < nearest)) nearest = p->ws[w].deadline;
        }
    if (!(nmsg = np)) return 0;
    for (int w = 0; w < p->nw; w++) /* what workers print, so that a full pipe never blocks one */
        if (p->ws[w].pid && p->ws[w].out >= 0) {
            pf[np] = (struct pollfd){.fd = p->ws[w].out, .events = POLLIN};
            map[np++] = w;
        }
    int ms = -1;
    if (p->prog.mode && (nearest == 0 || p->prog.next < nearest)) nearest = p->prog.next; /* a progress line due */
    if (nearest > 0) {
        double d = (nearest - now_s()) * 1000.0;
        ms = d < 0 ? 0 : d > 1e9 ? 1000000000 : (int)d + 1;
    }
    int pr = poll(pf, (nfds_t)np, ms);
    if (pr < 0 && errno != EINTR) return snprintf(err, errlen, "poll: %s", strerror(errno)), -1;
    for (int i = nmsg; i < np && pr > 0; i++)
        if (pf[i].revents & POLLIN) {
            drain(&p->ws[map[i]], p->log_fd);
        } else if (pf[i].revents & (POLLHUP | POLLERR)) { /* closed: nothing more to read */
            close(p->ws[map[i]].out);
            p->ws[map[i]].out = -1;
        }
    for (int i = 0; i < nmsg && pr > 0; i++)
        if (pf[i].revents & (POLLIN | POLLHUP | POLLERR)) on_message(p, &p->ws[map[i]]);
    return 0;
}

/* Workers past their phase's deadline: killed, their task FAIL_TIMEOUT. */
static void kill_timed_out(parent *p)
{
    const moects_runner_opts *o = p->o;
    double t = now_s();
    for (int w = 0; w < p->nw; w++) {
        worker *W = &p->ws[w];
        if (!W->busy || W->deadline <= 0 || t < W->deadline) continue;
        uint32_t ti = W->task;
        const moects_case *c = &o->cases[p->tasks[ti].case_idx];
        static const char *const where[] = {"building inputs/reference", "in the kernel", "comparing"};
        int ph = W->phase == PH_KERNEL ? 1 : W->phase == PH_COMPARE ? 2 : 0;
        double lim = phase_deadline(o, c, W->phase, 0);
        kill(W->pid, SIGKILL);
        reap(W, NULL, p->log_fd);
        fill_lost(o, &p->tasks[ti], W, &p->res[ti]);
        p->res[ti].verdict = MOECTS_FAIL_TIMEOUT;
        snprintf(p->res[ti].reason, sizeof p->res[ti].reason, "killed after %.0f s %s", lim, where[ph]);
        log_lost(p, ti); /* the output is in the log already */
        add_output(&p->res[ti], W);
        task_over(p, W, ti);
    }
}

int moects__runner_run(const moects_runner_opts *o, moects_run *run, char *err, size_t errlen)
{
    parent P, *p = &P;
    memset(p, 0, sizeof *p);
    p->o = o;
    p->log_fd = -1;
    size_t cap = 0;
    for (size_t c = 0; c < o->ncases; c++)
        for (size_t k = 0; k < o->nkernels; k++) cap += o->kernels[k]->op == o->cases[c].op;
    for (size_t k = 0; k < o->nkernels; k++) /* the kernels that take a case, for the first line */
        for (size_t c = 0; c < o->ncases; c++)
            if (o->kernels[k]->op == o->cases[c].op) {
                p->nk_used++;
                break;
            }
    int slots = o->jobs > 0 ? o->jobs : 1;
    if (parent_alloc(p, cap, slots) != 0) {
        snprintf(err, errlen, "out of memory for %zu tasks", cap);
        parent_free(p);
        return -1;
    }
    plan_tasks(p);
    if (p->nt && !o->nkernel_py) moects__refshare_mkdir(share_dir, sizeof share_dir); /* else "": no sharing */
    if (plan_schedule(p, slots, err, errlen) != 0) {
        if (share_dir[0]) moects__refshare_rmdir(share_dir), share_dir[0] = '\0';
        parent_free(p);
        return -1;
    }
    void (*old_pipe)(int) = signal(SIGPIPE, SIG_IGN);
    int rc = 0;
    while (p->ndone < p->nt && rc == 0) {
        if ((rc = hand_out(p, err, errlen)) != 0) break;
        if ((rc = wait_round(p, err, errlen)) != 0) break;
        kill_timed_out(p);
        moects__progress_tick(&p->prog, NULL, NULL);
    }
    for (int w = 0; w < p->nw; w++)
        if (p->ws[w].pid) {
            if (rc) kill(p->ws[w].pid, SIGKILL);
            reap(&p->ws[w], NULL, p->log_fd);
        }
    signal(SIGPIPE, old_pipe);
    if (share_dir[0]) moects__refshare_rmdir(share_dir), share_dir[0] = '\0';
    moects__progress_end(&p->prog);
    if (rc == 0 && push_results(p, run) != 0) {
        snprintf(err, errlen, "out of memory for results");
        rc = -1;
    }
    parent_free(p);
    return rc;
}
