/* task.c: one task in a worker process (harness/moects_task_internal.h): a (case, kernel) to its
 * moects_result. The case's inputs are built once and kept across its kernels, with its references
 * (every recipe its kernels want, on the threads the parent grants) and, for a bounded claim, its
 * bounds; the kernel runs twice under the memory contract (harness/run/guarded.c), and the judge
 * gives the verdict (harness/judge/judge.c). Python kernels ask for the task in flight
 * (moects_task_json, moects_task_tensor, moects_task_stream). */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "capi_internal.h"
#include "moects.h"
#include "moects_compare.h"
#include "moects_device.h"
#include "moects_gpuref.h"
#include "moects_judge.h"
#include "moects_op.h"
#include "moects_ref.h"
#include "moects_registry.h"
#include "moects_runner.h"
#include "moects_runner_internal.h"
#include "moects_task_internal.h"
#include "reports_internal.h"

void openblas_set_num_threads(int num_threads); /* OpenBLAS (linked by moects_ref) */
int openblas_get_num_threads(void);

#define NRECIPES MOECTS__NRECIPES

double moects__now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct moects__worker {
    long case_idx; /* cached case, -1 none */
    const moects_case *c;
    uint64_t seed; /* its inputs' seed */
    int build_rc;
    char build_err[256];
    moects_inputs in;
    void *ref[NRECIPES];
    int ref_state[NRECIPES]; /* 0 not computed, 1 ok, -1 failed */
    char ref_gpu[NRECIPES];   /* 1: ref[] came from the GPU reference (issue 31) */
    char ref_check[NRECIPES]; /* its CPU re-check: 0 not run, 1 identical, 2 differs (ref_diff says where) */
    char ref_diff[256];
    uint64_t in_hash[MOECTS_INPUTS_MAX], ref_hash[NRECIPES]; /* XXH64 of the inputs, of ref[] */
    long ntasks;   /* tasks this process ran before the one in flight: 0 in a fresh worker */
    int dev_alone; /* this worker has its device to itself: free device memory measures its kernels */
    int retire;    /* a kernel kept memory: this worker exits after the task (resource faults) */
    int cuda_checked, ndev;
    char nodev[256];
    moects_guarded dev[MOECTS_INPUTS_MAX]; /* guarded device copies of the inputs (harness/run/guard.c) */
    int dev_state; /* 0 not copied, 1 copied, -1 failed (reason in dev_err) */
    char dev_err[256];
    int dev_err_fatal;
    moects__bounds bounds; /* the cached case's bounds for bounds.cls (bounds.bound NULL: none) */
    int bound_rc;          /* 0 computed, -1 refused by the reference */
    const char *dump_dir; /* run --dump: a mismatching case's inputs, reference and output go here */
    /* batch invariance: the cached case's rows inside a larger batch (its op's batch), once per case */
    int big_state; /* 0 not built, 1 built, -1 the op cannot, -2 out of memory (big_err says why) */
    moects_inputs big;
    moects__batch bmap;
    char big_err[256];
};
typedef struct moects__worker worker_state;
#define now_s moects__now_s

typedef moects__task_ctl task_ctl;

static void announce(const task_ctl *tc, int phase, const moects_result *r)
{
    if (tc->notify) tc->notify(tc->ctx, phase, r);
}

static void drop_case(worker_state *ws)
{
    for (int i = 0; i < NRECIPES; i++) {
        free(ws->ref[i]);
        ws->ref[i] = NULL;
        ws->ref_state[i] = 0;
        ws->ref_gpu[i] = ws->ref_check[i] = 0;
    }
    for (int i = 0; i < MOECTS_INPUTS_MAX; i++) moects__guard_free(&ws->dev[i]);
    ws->dev_state = 0;
    moects__bounds_free(&ws->bounds);
    if (ws->big_state == 1) moects__inputs_free(&ws->big);
    free(ws->bmap.row_of);
    ws->bmap.row_of = NULL;
    ws->big_state = 0;
    if (ws->case_idx >= 0 && ws->build_rc == 0) moects__inputs_free(&ws->in);
    ws->case_idx = -1;
}

static void *xmalloc_ff(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (p) memset(p, 0xff, bytes); /* NaN pattern: outputs the kernel does not write are caught */
    return p;
}

/* Host pointers of the inputs; the references get a non-NULL dummy for empty tensors. */
static void set_reason(moects_result *r, const char *fmt, const char *a, const char *b)
{
    char buf[1024];
    snprintf(buf, sizeof buf, fmt, a, b);
    moects__copy_str(r->reason, sizeof r->reason, buf);
}

void moects__bound_name(const moects_kernel *k, char *buf, size_t len)
{
    if (k->split_k.max_splits)
        snprintf(buf, len, "bound(p=%u,%s,bf16-split-k<=%u)", k->acc.bits, k->acc.truncation ? "trunc" : "rne",
                 k->split_k.max_splits);
    else snprintf(buf, len, "bound(p=%u,%s)", k->acc.bits, k->acc.truncation ? "trunc" : "rne");
}

/* moects__result_identity: clears r and fills who ran what: kernel, case, model, layout, op, mutant
 * flag, seed, recipe (the kernel's, else "<op>.exact_v1+" moects__bound_name for an accumulation
 * class, else "<op>.exact_v1+tol"); first_index -1. */
void moects__result_identity(moects_result *r, const moects_case *c, const moects_kernel *k, uint64_t seed)
{
    memset(r, 0, sizeof *r);
    snprintf(r->kernel, sizeof r->kernel, "%s", k->name);
    snprintf(r->case_id, sizeof r->case_id, "%s", c->id);
    snprintf(r->model, sizeof r->model, "%s", c->model);
    snprintf(r->layout, sizeof r->layout, "%s", c->layout);
    r->op = c->op;
    r->is_mutant = k->bug != NULL;
    r->seed = seed;
    r->first_index = -1;
    const char *op = moects__op_name(c->op) ? moects__op_name(c->op) : "?";
    if (k->recipe) snprintf(r->recipe, sizeof r->recipe, "%s", k->recipe);
    else if (k->acc.bits) {
        char b[64], t[96];
        moects__bound_name(k, b, sizeof b);
        snprintf(t, sizeof t, "%s.exact_v1+%s", op, b);
        moects__copy_str(r->recipe, sizeof r->recipe, t);
    }
    else snprintf(r->recipe, sizeof r->recipe, "%s.exact_v1+tol", op);
}

/* The recipe kernel k is compared under: its declared one, else (tolerance) exact_v1. -1 unknown. */
int moects__kernel_recipe(const moects_kernel *k, moects_op op)
{
    moects_recipe rc = MOECTS_RECIPE_EXACT_V1;
    if (k->recipe && moects__recipe_parse(k->recipe, op, &rc) != 0) return -1;
    return (int)rc;
}

static int cuda_probe(worker_state *ws, moects_result *r);

/* The GPU reference of the cached case under recipe (issue 31, docs/gpu_reference.md), when the run asks
 * for it (tc->refmode) and the op has one: 1 when it stands (ws->ref[recipe] set, state 1, hashed), 0 when
 * the CPU path must compute it (no device, the op or case not exact on the GPU path, an error). Its time
 * goes to r->reference_s. */
static int gpu_reference(worker_state *ws, moects_recipe recipe, const task_ctl *tc, moects_result *r)
{
    moects_inputs *in = &ws->in;
    const moects__op_def *op = moects__op_of_inputs(in);
    if (tc->refmode < 0 || !op->reference_gpu) return 0;
    if (tc->refmode == MOECTS_GPUREF_CUDA && !cuda_probe(ws, r)) return 0;
    void *buf = xmalloc_ff(in->out_bytes);
    if (!buf) return 0;
    moects_op_args a;
    moects__host_args(in, buf, &a);
    char why[256] = "";
    announce(tc, PH_REFERENCE, r);
    const double t = now_s();
    const int rc = op->reference_gpu(in, &a, recipe, tc->refmode, why, sizeof why);
    if (rc == 0) {
        ws->ref[recipe] = buf, ws->ref_state[recipe] = 1, ws->ref_gpu[recipe] = 1;
        ws->ref_hash[recipe] = moects__xxh64(buf, in->out_bytes);
    } else free(buf);
    r->reference_s += now_s() - t;
    announce(tc, PH_OTHER, r);
    return rc == 0;
}

/* The CPU re-check of a GPU reference (issue 31): the CPU reference of recipe into a scratch buffer,
 * compared bit for bit with ws->ref[recipe], once per (case, recipe): ws->ref_check 1 identical, 2 differs
 * (ws->ref_diff names the first element that differs); left 0 when memory runs out. Time to reference_s. */
static void recheck(worker_state *ws, moects_recipe recipe, const task_ctl *tc, moects_result *r)
{
    moects_inputs *in = &ws->in;
    if (!ws->ref_gpu[recipe] || ws->ref_check[recipe]) return;
    const moects__op_def *op = moects__op_of_inputs(in);
    void *cpu = xmalloc_ff(in->out_bytes);
    if (!cpu) return;
    moects_op_args a;
    moects__host_args(in, cpu, &a);
    int before = openblas_get_num_threads(), th = op->ref_flops && tc->threads > 0 ? tc->threads : before;
    announce(tc, PH_REFERENCE, r);
    if (th != before) openblas_set_num_threads(th);
    const double t = now_s();
    const int rc = op->reference(in, &a, recipe);
    if (th != before) openblas_set_num_threads(before);
    const size_t es = in->out_elems > 0 ? in->out_bytes / (size_t)in->out_elems : 1;
    size_t i = 0;
    while (rc == 0 && i < in->out_bytes && ((unsigned char *)cpu)[i] == ((unsigned char *)ws->ref[recipe])[i]) i++;
    ws->ref_check[recipe] = rc == 0 && i == in->out_bytes ? 1 : 2;
    if (rc != 0) snprintf(ws->ref_diff, sizeof ws->ref_diff, "the CPU reference refused the case the GPU one computed");
    else if (i < in->out_bytes) {
        uint64_t g = 0, w = 0;
        memcpy(&g, (unsigned char *)ws->ref[recipe] + i / es * es, es < 8 ? es : 8);
        memcpy(&w, (unsigned char *)cpu + i / es * es, es < 8 ? es : 8);
        snprintf(ws->ref_diff, sizeof ws->ref_diff, "output element %zu: GPU reference 0x%" PRIx64 ", CPU 0x%" PRIx64,
                 i / es, g, w);
    }
    r->reference_s += now_s() - t;
    announce(tc, PH_OTHER, r);
    free(cpu);
}

/* FAIL_REFERENCE when the re-check found the references differ (a bug of the suite, not the kernel's):
 * 1 with r set, else 0. */
static int reference_differs(const worker_state *ws, moects_recipe recipe, moects_result *r)
{
    r->ref_check = ws->ref_check[recipe];
    if (ws->ref_check[recipe] != 2) return 0;
    r->verdict = MOECTS_FAIL_REFERENCE;
    set_reason(r, "GPU and CPU references differ (a bug of the suite, not of the kernel): %s%s", ws->ref_diff, "");
    return 1;
}

/* The cached case's reference under recipe from the run's share directory (harness/run/refshare.c), as
 * a worker that ran an earlier task of the case wrote it: 1 when it stands (ws->ref[recipe] set, state 1,
 * its hash, GPU flag and re-check state as written), else 0. Its time goes to r->reference_s. */
static int share_get(worker_state *ws, moects_recipe recipe, const task_ctl *tc, moects_result *r)
{
    if (!tc->share_dir) return 0;
    const double t = now_s();
    int gpu = 0, check = 0;
    uint64_t h = 0;
    void *buf = moects__refshare_get(tc->share_dir, ws->case_idx, ws->c->id, ws->seed, (int)recipe, ws->in.out_bytes, &h,
                                     &gpu, &check);
    if (!buf) return 0;
    ws->ref[recipe] = buf, ws->ref_state[recipe] = 1, ws->ref_hash[recipe] = h;
    ws->ref_gpu[recipe] = (char)gpu, ws->ref_check[recipe] = (char)(check == 1 ? 1 : 0);
    r->reference_s += now_s() - t;
    return 1;
}

/* References that took less than this to compute are computed again rather than shared: writing and
 * reading them back would cost about as much. */
#define SHARE_MIN_S 0.01
/* Nor are references of more than this: RAM (/dev/shm) is what large cases run short of, and their
 * mutants run in a child process per call (harness/run/guarded.c), so they seldom end the worker. */
#define SHARE_MAX_BYTES ((size_t)1 << 30)

/* Writes the cached case's computed references (state 1) of the recipes in mask, which took spent
 * seconds, to the share directory when the parent says a later task of the case may end this worker
 * (tc->share); time to reference_s. */
static void share_put(worker_state *ws, unsigned mask, double spent, const task_ctl *tc, moects_result *r)
{
    if (!tc->share_dir || !tc->share || spent < SHARE_MIN_S || ws->in.out_bytes > SHARE_MAX_BYTES) return;
    const double t = now_s();
    for (int i = 0; i < NRECIPES && i < 32; i++)
        if ((mask & (1u << i)) && ws->ref_state[i] == 1)
            moects__refshare_put(tc->share_dir, ws->case_idx, ws->c->id, ws->seed, i, ws->ref[i], ws->in.out_bytes,
                                 ws->ref_hash[i], ws->ref_gpu[i], ws->ref_check[i]);
    r->reference_s += now_s() - t;
}

/* The reference(s) of the cached case under recipe, once per (case, recipe), on tc->threads
 * OpenBLAS threads. A case whose op computes blockwise_v1 and exact_v1 in one pass (its entry's
 * reference_pair) and whose kernels want both gets both at once. Timing and threads go to r. */
static void compute_reference(worker_state *ws, const moects_case *c, moects_recipe recipe, const task_ctl *tc,
                              moects_result *r)
{
    moects_inputs *in = &ws->in;
    const moects__op_def *op = moects__op_of_inputs(in);
    const unsigned bw = 1u << MOECTS_RECIPE_FP4_BLOCKWISE_V1, ex = 1u << MOECTS_RECIPE_EXACT_V1;
    const char *names[4];
    int two = op->reference_pair && op->recipes(c, names) >= 2;
    if (share_get(ws, recipe, tc, r)) return;
    const double t0 = now_s();
    if (gpu_reference(ws, recipe, tc, r)) {
        share_put(ws, 1u << recipe, now_s() - t0, tc, r);
        return;
    }
    int both = two && (tc->recipes & bw) && (tc->recipes & ex) &&
               (recipe == MOECTS_RECIPE_FP4_BLOCKWISE_V1 || recipe == MOECTS_RECIPE_EXACT_V1) &&
               ws->ref_state[MOECTS_RECIPE_FP4_BLOCKWISE_V1] == 0 && ws->ref_state[MOECTS_RECIPE_EXACT_V1] == 0;
    ws->ref[recipe] = xmalloc_ff(in->out_bytes);
    if (!ws->ref[recipe]) return;
    moects_recipe other = recipe == MOECTS_RECIPE_EXACT_V1 ? MOECTS_RECIPE_FP4_BLOCKWISE_V1 : MOECTS_RECIPE_EXACT_V1;
    if (both && !(ws->ref[other] = xmalloc_ff(in->out_bytes))) both = 0; /* short of memory: one at a time */
    moects_op_args a;
    moects__host_args(in, ws->ref[recipe], &a);
    /* a GEMM's reference spreads its tiles over openblas_get_num_threads() threads; an op without
     * ref_flops runs its reference on one */
    int fp4 = op->ref_flops != NULL, before = openblas_get_num_threads();
    int th = !fp4 ? 1 : tc->threads > 0 ? tc->threads : before;
    announce(tc, PH_REFERENCE, r);
    if (fp4 && th != before) openblas_set_num_threads(th);
    double t = now_s();
    int rc;
    if (both) {
        rc = op->reference_pair(in, &a, ws->ref[MOECTS_RECIPE_FP4_BLOCKWISE_V1], ws->ref[MOECTS_RECIPE_EXACT_V1]);
        ws->ref_state[other] = rc == 0 ? 1 : -1;
    } else {
        rc = op->reference(in, &a, recipe);
    }
    r->reference_s += now_s() - t;
    if (fp4 && th != before) openblas_set_num_threads(before);
    r->ref_threads = th;
    ws->ref_state[recipe] = rc == 0 ? 1 : -1;
    t = now_s();
    for (int i = 0; i < NRECIPES; i++)
        if (ws->ref_state[i] == 1 && (i == (int)recipe || (both && i == (int)other)))
            ws->ref_hash[i] = moects__xxh64(ws->ref[i], in->out_bytes);
    r->reference_s += now_s() - t;
    share_put(ws, (1u << recipe) | (both ? 1u << other : 0), now_s() - t0, tc, r);
    announce(tc, PH_OTHER, r);
}

/* The per-element bounds of the cached case for accumulation class acc (DESIGN.md "Bounded
 * verdicts"), once per (case, class), on the reference's threads; timing to r->reference_s. With
 * them the accumulation check's inputs where it applies. 0, or -1 when the reference refuses (or
 * memory runs out: *oom set). */
static int compute_bound(worker_state *ws, const moects_case *c, const moects_acc_class *cls, moects_recipe recipe,
                         const task_ctl *tc, moects_result *r, int *oom)
{
    *oom = 0;
    if ((ws->bounds.bound || ws->bounds.lo) && !memcmp(&ws->bounds.cls, cls, sizeof *cls) &&
        (!ws->bounds.lo || ws->bounds.recipe == recipe))
        return ws->bound_rc;
    moects__bounds_free(&ws->bounds);
    int before = openblas_get_num_threads(), th = tc->threads > 0 ? tc->threads : before;
    announce(tc, PH_REFERENCE, r);
    if (th != before) openblas_set_num_threads(th);
    const double t = now_s();
    const int rc = moects__bounds_compute(c, &ws->in, cls, recipe, &ws->bounds);
    r->reference_s += now_s() - t;
    if (th != before) openblas_set_num_threads(before);
    announce(tc, PH_OTHER, r);
    *oom = rc == -2;
    return ws->bound_rc = rc == 0 ? 0 : -1;
}

/* The task in flight on this thread, for kernels that ask (moects_task_json, moects_task_tensor,
 * moects_task_stream: Python kernels under --kernel-py). */
static _Thread_local struct {
    int active;
    const moects_case *c;
    const moects_inputs *in;
    void *const *ptr; /* what run() gets: host or device pointers of the inputs; NULL in supports() */
    void *out, *stream;
    char *json;
    char json_id[sizeof ((moects_case *)0)->id]; /* the case json was made for (slots are reused) */
} cur;

static void task_view(const moects_case *c, const moects_inputs *in, void *const *ptr, void *out, void *stream)
{
    if (cur.json && (strcmp(cur.json_id, c->id) != 0 || cur.in != in)) free(cur.json), cur.json = NULL;
    cur.active = 1, cur.c = c, cur.in = in, cur.ptr = ptr, cur.out = out, cur.stream = stream;
}

const char *moects_task_json(void)
{
    if (!cur.active) return "";
    if (!cur.json) {
        cur.json = moects__case_json(cur.c, cur.in);
        moects__copy_str(cur.json_id, sizeof cur.json_id, cur.c->id);
    }
    return cur.json ? cur.json : "";
}

int moects_task_tensor(int j, moects_tensor_info *t)
{
    if (!cur.active || j < -1 || j >= cur.in->nt) return moects__set_error("task tensor %d: no task or out of range", j), -1;
    if (j < 0) moects__output_describe(cur.in, t), t->data = cur.out;
    else moects__tensor_describe(cur.in, j, t), t->data = cur.ptr && t->bytes ? cur.ptr[j] : NULL;
    return 0;
}

void *moects_task_stream(void) { return cur.active ? cur.stream : NULL; }

void moects__task_ptrs(void *const *ptr, void *out, void *stream)
{
    cur.ptr = ptr, cur.out = out, cur.stream = stream;
}

/* run --dump: the case as `moects export` writes it (only the reference compared against) and the
 * kernel's output beside it, in DUMP/<kernel>/; `moects verify DUMP/<kernel> --recipe R` judges it
 * again. A failure to write is noted in the reason. */
static void dump(const worker_state *ws, const moects_case *c, const moects_kernel *k, uint64_t seed,
                 moects_recipe recipe, const void *got, moects_result *r)
{
    char dir[4400], path[4800], err[4800];
    snprintf(dir, sizeof dir, "%s/%s", ws->dump_dir, k->name);
    const char *rn = r->recipe;
    char full[64];
    if (!k->recipe) snprintf(full, sizeof full, "%.40s", r->recipe), *strchr(full, '+') = '\0', rn = full;
    const void *ref = ws->ref[recipe];
    moects__case_file(path, sizeof path, dir, c->id, ".out.safetensors");
    if (moects__mkdirs(dir, err, sizeof err) || moects__export_case(dir, c, seed, &ws->in, &rn, &ref, 1, err, sizeof err) ||
        moects__write_out(path, &ws->in, got, err, sizeof err)) {
        size_t l = strlen(r->reason);
        snprintf(r->reason + l, sizeof r->reason - l, "%s--dump: %s", l ? "; " : "", err);
    }
}

/* The cached case's input hashes into r, and the reference's under recipe (-1: none) when computed:
 * before the kernel runs, so that the phase notices carry them to the parent (a crash keeps them). */
static void put_hashes(const worker_state *ws, int recipe, moects_result *r)
{
    _Static_assert(MOECTS_INPUTS_MAX <= MOECTS_RESULT_HASHES_MAX, "moects_result.hashes too small");
    r->n_hashes = 0;
    for (int i = 0; i < ws->in.nt; i++) {
        if (!ws->in.t[i].name) continue; /* a slot the case's format has no tensor for (W4A16's A scales) */
        snprintf(r->hashes[r->n_hashes].name, sizeof r->hashes[0].name, "%s", ws->in.t[i].name);
        r->hashes[r->n_hashes++].xxh64 = ws->in_hash[i];
    }
    r->has_ref_hash = recipe >= 0 && ws->ref_state[recipe] == 1;
    r->ref_xxh64 = r->has_ref_hash ? ws->ref_hash[recipe] : 0;
}

/* ---- resource faults: a kernel that leaks or exhausts memory costs only its own case (harness/run/guarded.c) ---- */

/* A task that found no memory (host or device) in a worker that ran tasks before: what an earlier
 * kernel kept may be the cause, so a fresh worker runs it again (there the SKIP stands). */
static int retry_fresh(const worker_state *ws, const moects_result *r)
{
    return ws->ntasks > 0 && r->verdict == MOECTS_SKIP &&
           (!strncmp(r->reason, MOECTS_HOST_OOM, strlen(MOECTS_HOST_OOM)) ||
            !strncmp(r->reason, "out of device memory", 20));
}

/* The bounds of a bounded claim (compute_bound, their time to reference_s): 0, or 1 with r's verdict
 * set (SKIP when they do not fit in memory, FAIL_CRASH when the reference refuses them). */
static int bounds_for(worker_state *ws, const moects_case *c, const moects_kernel *k, moects_recipe recipe,
                      const task_ctl *tc, moects_result *r)
{
    int oom = 0;
    const moects_acc_class cls = {k->acc.bits, k->acc.truncation, k->split_k.max_splits};
    const int brc = compute_bound(ws, c, &cls, recipe, tc, r, &oom);
    if (oom) {
        r->verdict = MOECTS_SKIP;
        snprintf(r->reason, sizeof r->reason, MOECTS_HOST_OOM " (%zu bytes for the bounds)",
                 (size_t)ws->in.out_elems * (moects__judge_acc_check_applies(c) ? 24 : 8));
        return 1;
    }
    if (brc) {
        r->verdict = MOECTS_FAIL_CRASH;
        set_reason(r, "the reference refused the bound of the case (harness or case bug), %s%s", r->recipe, "");
        return 1;
    }
    return 0;
}

/* The verdict of a task's runs by the judge (harness/judge/judge.c), against the reference of the
 * claim's recipe and, for a bounded claim, the case's bounds; its time to compare_s. --dump writes the
 * failing run's output. */
static void judge_task(worker_state *ws, const moects_case *c, const moects_kernel *k, uint64_t seed,
                       moects_recipe recipe, const task_ctl *tc, moects__twice *t, moects_result *r)
{
    const int bounded = moects__judge_claim_bounded(k);
    if (bounded && bounds_for(ws, c, k, recipe, tc, r)) return;
    const moects__bounds none = {0};
    const moects_judge_ref ref = moects__bounds_ref(&ws->in, ws->ref[recipe], bounded ? &ws->bounds : &none);
    const double t0 = now_s();
    const int run = moects__judge_runs(&ref, k, (void *const *)t->got, moects__runs_of(k), r);
    r->compare_s += now_s() - t0;
    if (r->verdict == MOECTS_FAIL_MISMATCH && ws->dump_dir) dump(ws, c, k, seed, recipe, t->got[run], r);
}

/* ---- exposed intermediates (docs/fused_moe.md "Exposed intermediates") ---- */

static void add_note(moects_result *r, const char *note);

/* Whether the task runs k once more with its intermediates asked for: a kernel with
 * MOECTS_KERNEL_INTERMEDIATES of an op with stages, and a bounded claim judged by its enclosure (every
 * case: the stages' enclosures, the accumulation check of the GEMM stages) or, with MOECTS_STAGES=1 in
 * the environment, an exact claim that failed (FAIL_MISMATCH; opt-in: a kernel run and a reference more
 * per failure doubled the fused smoke tier's time, its 344 caught mutant runs). */
static int stages_wanted(const moects__op_def *op, const moects_kernel *k, const moects_result *r)
{
    if (!op->stages || !(k->flags & MOECTS_KERNEL_INTERMEDIATES)) return 0;
    if (moects__judge_claim_bounded(k)) return r->verdict == MOECTS_PASS_BOUNDED || r->verdict == MOECTS_FAIL_MISMATCH;
    const char *on = getenv("MOECTS_STAGES");
    return on && !strcmp(on, "1") && r->verdict == MOECTS_FAIL_MISMATCH;
}

/* The stages of k on the case: their geometry, k's run with them (moects__kernel_stages, its time to
 * kernel_s), their reference under the claim and the judge (moects__judge_stages; to compare_s); what
 * could not be done is a note in the reason. Returns 1 when the worker must exit after the task. */
static int stage_task(worker_state *ws, const moects_kernel *k, moects_recipe recipe, const task_ctl *tc,
                      moects_result *r)
{
    const moects__op_def *op = moects__op_of_inputs(&ws->in);
    if (!stages_wanted(op, k, r)) return 0;
    const moects_acc_class cls = {k->acc.bits, k->acc.truncation, k->split_k.max_splits};
    const moects_acc_class *claim = moects__judge_claim_bounded(k) ? &cls : NULL;
    moects__stages sg;
    void *got[MOECTS_STAGES_MAX] = {0};
    char why[300] = "", msg[360];
    int exit_after = 0, rc = op->stages(&ws->in, recipe, NULL, NULL, &sg, why, sizeof why);
    for (int i = 0; rc == 0 && i < sg.n; i++)
        if (!(got[i] = malloc(moects__stage_bytes(&sg, i) + 1))) rc = -2, snprintf(why, sizeof why, MOECTS_HOST_OOM);
    announce(tc, PH_KERNEL, r);
    double t = now_s();
    if (rc == 0) rc = moects__kernel_stages(k, &ws->in, ws->dev, &sg, got, why, sizeof why, &exit_after);
    r->kernel_s += now_s() - t;
    announce(tc, PH_COMPARE, r);
    t = now_s();
    moects__stages_free(&sg);
    if (rc == 0) rc = op->stages(&ws->in, recipe, claim, (const void *const *)got, &sg, why, sizeof why);
    if (rc == 0) moects__judge_stages(&sg, (const void *const *)got, claim, r);
    else snprintf(msg, sizeof msg, "intermediates not compared: %s", why), add_note(r, msg);
    moects__stages_free(&sg);
    for (int i = 0; i < MOECTS_STAGES_MAX; i++) free(got[i]);
    r->compare_s += now_s() - t;
    return exit_after;
}

/* ---- batch invariance (DESIGN.md "Batch invariance") ---- */

/* The cached case's batch (its op's batch from the case's seed), once per case; its time to inputs_s. */
static void build_batch(worker_state *ws, const moects_case *c, uint64_t seed, const task_ctl *tc, moects_result *r)
{
    announce(tc, PH_INPUTS, r);
    const double t = now_s();
    memset(&ws->big, 0, sizeof ws->big);
    memset(&ws->bmap, 0, sizeof ws->bmap);
    const int rc = moects__op(c->op)->batch(c, seed, &ws->in, &ws->big, &ws->bmap, ws->big_err, sizeof ws->big_err);
    if (rc == 0) moects__inputs_readonly(&ws->big);
    else moects__inputs_free(&ws->big), free(ws->bmap.row_of), ws->bmap.row_of = NULL;
    ws->big_state = rc == 0 ? 1 : rc;
    r->inputs_s += now_s() - t;
    announce(tc, PH_OTHER, r);
}

/* reason += "; " note. */
static void add_note(moects_result *r, const char *note)
{
    size_t l = strlen(r->reason);
    snprintf(r->reason + l, sizeof r->reason - l, "%s%s", l ? "; " : "", note);
}

/* The batch is built and the kernel takes its shape: 1; else 0, with r FAIL_CRASH (the harness cannot
 * build it) or a note that the check did not run (no memory, supports() refuses the batch). */
static int batch_ready(worker_state *ws, const moects_case *c, const moects_kernel *k, uint64_t seed,
                       const task_ctl *tc, moects_result *r)
{
    char why[256] = "", note[600];
    if (ws->big_state == 0) build_batch(ws, c, seed, tc, r);
    if (ws->big_state == -1) {
        r->verdict = MOECTS_FAIL_CRASH;
        set_reason(r, "harness cannot build the batch-invariance batch: %s%s", ws->big_err, "");
        return 0;
    }
    if (ws->big_state == 1 && (!k->supports || k->supports(moects__inputs_shape(&ws->big), why, sizeof why))) return 1;
    snprintf(note, sizeof note, "batch invariance not checked: %s", ws->big_state < 0 ? ws->big_err : why);
    add_note(r, note);
    return 0;
}

/* A kernel that declares MOECTS_KERNEL_BATCH_INVARIANT and passed runs once more on the case's rows
 * inside the larger batch, under the same guards (CUDA: its own guarded device inputs), and the judge
 * compares the rows with got (run 1's judged output): FAIL_BATCH_VARIANT when a bit moved, or the
 * batch run's own crash, overrun or skip ("batch run: " before its reason). Returns 1 when the worker
 * must exit after the task (a sticky CUDA error). */
static int batch_task(worker_state *ws, const moects_case *c, const moects_kernel *k, uint64_t seed,
                      const task_ctl *tc, const void *got, moects_result *r)
{
    const moects__op_def *op = moects__op(c->op);
    if (!(k->flags & MOECTS_KERNEL_BATCH_INVARIANT) || !op->batch || !moects_verdict_is_pass(r->verdict) ||
        ws->in.out_bytes == 0 || !batch_ready(ws, c, k, seed, tc, r))
        return 0;
    void *mine = malloc(ws->in.out_bytes);
    moects_guarded dev[MOECTS_INPUTS_MAX] = {0};
    moects_result br = *r;
    char err[256] = "";
    int fatal = 0, exit_after = 0, bad;
    announce(tc, PH_KERNEL, r);
    double t = now_s();
    if (!mine) bad = 1, br.verdict = MOECTS_SKIP, snprintf(br.reason, sizeof br.reason, MOECTS_HOST_OOM);
    else if (k->device == MOECTS_DEVICE_CUDA && moects__dev_inputs(&ws->big, dev, err, sizeof err, &fatal))
        bad = 1, br.verdict = fatal ? MOECTS_FAIL_CRASH : MOECTS_SKIP, snprintf(br.reason, sizeof br.reason, "%s", err);
    else bad = 0;
    moects__twice tw = {0};
    moects__kernel_env env = {.dev_alone = ws->dev_alone, .runs = 1};
    task_view(c, &ws->big, NULL, NULL, NULL); /* a kernel that asks (Python) sees the batch's shape */
    if (!bad) memcpy(mine, got, ws->in.out_bytes), bad = moects__kernel_twice(k, &ws->big, dev, 0, &env, &tw, &br, &exit_after);
    r->kernel_s += now_s() - t;
    if (env.retire) ws->retire = 1;
    announce(tc, PH_COMPARE, r);
    t = now_s();
    if (bad) r->verdict = br.verdict, snprintf(r->reason, sizeof r->reason, "batch run: %.1000s", br.reason);
    else if (moects__judge_batch(&ws->in, mine, tw.got[0], &ws->bmap, r)) add_note(r, "batch invariance not checked: " MOECTS_HOST_OOM);
    r->compare_s += now_s() - t;
    moects__twice_free(&tw);
    for (int i = 0; i < MOECTS_INPUTS_MAX; i++) moects__guard_free(&dev[i]);
    free(mine);
    return exit_after;
}

/* The worker's one device probe, made at its first CUDA task: 1 when a CUDA device is usable, else 0
 * with r a SKIP "no CUDA device (<the probe's error>)" (MOECTS__NO_DEVICE): on a host without one a
 * CUDA kernel is skipped, never UNSUPPORTED, whatever its supports() would say. */
static int cuda_probe(worker_state *ws, moects_result *r)
{
    if (!ws->cuda_checked) {
        double t = now_s();
        char why[200] = "";
        ws->cuda_checked = 1;
        ws->ndev = moects__cuda_device_count(why, sizeof why);
        if (ws->ndev > 0 && moects__cuda_set_device(0, why, sizeof why) != 0) ws->ndev = 0;
        snprintf(ws->nodev, sizeof ws->nodev, MOECTS__NO_DEVICE " (%s)", why[0] ? why : "none visible");
        r->kernel_s += now_s() - t;
    }
    return ws->ndev > 0;
}

static int cuda_usable(worker_state *ws, moects_result *r)
{
    if (cuda_probe(ws, r)) return 1;
    r->verdict = MOECTS_SKIP;
    set_reason(r, "%s%s", ws->nodev, "");
    return 0;
}

static int task_body(worker_state *ws, long ci, const moects_case *c, const moects_kernel *k, uint64_t seed,
                     int perf, const task_ctl *tc, moects_result *r)
{
    const char *opname = moects__op_name(c->op) ? moects__op_name(c->op) : "?";
    int rcp = moects__kernel_recipe(k, c->op);
    if (rcp < 0) {
        r->verdict = MOECTS_FAIL_CRASH;
        set_reason(r, "kernel declares unknown recipe %s for op %s", k->recipe, opname);
        return 0;
    }
    moects_recipe recipe = (moects_recipe)rcp;

    /* inputs, once per case */
    if (ws->case_idx != ci) {
        drop_case(ws);
        ws->case_idx = ci;
        ws->c = c;
        ws->seed = seed;
        announce(tc, PH_INPUTS, r);
        double t = now_s();
        ws->build_rc = moects__inputs_build(c, seed, &ws->in, ws->build_err, sizeof ws->build_err);
        for (int i = 0; ws->build_rc == 0 && i < ws->in.nt; i++)
            ws->in_hash[i] = moects__guard_xxh64(ws->in.t[i].host, ws->in.t[i].bytes);
        if (ws->build_rc == 0) moects__inputs_readonly(&ws->in);
        r->inputs_s += now_s() - t;
        announce(tc, PH_OTHER, r);
    }
    if (ws->build_rc == -2) {
        r->verdict = MOECTS_SKIP;
        set_reason(r, "%s%s", ws->build_err, "");
        return 0;
    }
    if (ws->build_rc != 0) {
        r->verdict = MOECTS_FAIL_CRASH;
        set_reason(r, "harness cannot build the inputs: %s%s", ws->build_err, "");
        return 0;
    }
    moects_inputs *in = &ws->in;
    const void *shape = moects__inputs_shape(in);
    put_hashes(ws, -1, r);

    if (k->device == MOECTS_DEVICE_CUDA && !cuda_usable(ws, r)) return 0; /* before any format refusal */
    char why[256] = "";
    task_view(c, in, NULL, NULL, NULL);
    if (k->supports && !k->supports(shape, why, sizeof why)) {
        /* a CUDA kernel refusing because cuBLAS is missing lacks a resource: SKIP, not a gap */
        char cb[256] = "";
        int no_cublas = k->device == MOECTS_DEVICE_CUDA && !moects__cuda_cublas_available(cb, sizeof cb) &&
                        why[0] && strcmp(why, cb) == 0;
        r->verdict = no_cublas ? MOECTS_SKIP : MOECTS_UNSUPPORTED;
        set_reason(r, "%s%s", why[0] ? why : "refused by supports()", "");
        return 0;
    }
    if (!moects__judge_claim_ok(c, k, recipe, r)) return 0;

    if (ws->ref_state[recipe] == 0) {
        compute_reference(ws, c, recipe, tc, r);
        if (!ws->ref[recipe]) {
            r->verdict = MOECTS_SKIP;
            snprintf(r->reason, sizeof r->reason, MOECTS_HOST_OOM " (%zu bytes for the reference)", in->out_bytes);
            return 0;
        }
    }
    put_hashes(ws, (int)recipe, r);
    snprintf(r->reference, sizeof r->reference, "%s", ws->ref_gpu[recipe] ? "gpu" : "cpu");
    if (tc->check) recheck(ws, recipe, tc, r);
    if (reference_differs(ws, recipe, r)) return 0;
    if (ws->ref_state[recipe] < 0) {
        r->verdict = MOECTS_FAIL_CRASH;
        set_reason(r, "the reference refused the case (harness or case bug), recipe %s%s", r->recipe, "");
        return 0;
    }

    int exit_after = 0;
    double tk = now_s();
    if (k->device == MOECTS_DEVICE_CUDA && ws->dev_state == 0) /* guarded device copies of the inputs, once per case */
        ws->dev_state = moects__dev_inputs(in, ws->dev, ws->dev_err, sizeof ws->dev_err, &ws->dev_err_fatal) ? -1 : 1;
    if (k->device == MOECTS_DEVICE_CUDA && ws->dev_state < 0) {
        r->verdict = ws->dev_err_fatal ? MOECTS_FAIL_CRASH : MOECTS_SKIP;
        set_reason(r, "%s%s", ws->dev_err, "");
        r->kernel_s += now_s() - tk;
        return ws->dev_err_fatal;
    }
    r->kernel_s += now_s() - tk; /* the notice carries the set-up so far */
    announce(tc, PH_KERNEL, r);
    tk = now_s();
    moects__twice tw;
    moects__kernel_env env = {.dev_alone = ws->dev_alone};
    int bad = moects__kernel_twice(k, in, ws->dev, perf, &env, &tw, r, &exit_after);
    r->kernel_s += now_s() - tk;
    if (env.retire) ws->retire = 1;
    announce(tc, PH_COMPARE, r); /* the harness's own work: not under the kernel's limit */
    if (!bad) judge_task(ws, c, k, seed, recipe, tc, &tw, r);
    if (moects_verdict_is_fail(r->verdict)) { /* re-judged with the CPU reference: same bits, same verdict */
        recheck(ws, recipe, tc, r);
        if (reference_differs(ws, recipe, r)) bad = 1;
    }
    if (!bad) exit_after |= stage_task(ws, k, recipe, tc, r);
    if (!bad) exit_after |= batch_task(ws, c, k, seed, tc, tw.got[0], r);
    moects__twice_free(&tw);
    return exit_after;
}

/* Seconds to whole microseconds: phases down, wall up, so that their sum never exceeds wall. */
static double us_floor(double s) { return s > 0 ? floor(s * 1e6) / 1e6 : 0; }
static double us_ceil(double s) { return s > 0 ? ceil(s * 1e6) / 1e6 : 0; }

void moects__round_timing(moects_result *r)
{
    r->inputs_s = us_floor(r->inputs_s);
    r->reference_s = us_floor(r->reference_s);
    r->kernel_s = us_floor(r->kernel_s);
    r->compare_s = us_floor(r->compare_s);
    r->wall_s = us_ceil(r->wall_s);
}

/* A task: set_identity, the body, its wall time. Returns 0, 1 when the worker exits after it (a
 * sticky CUDA error, a kernel that kept memory), 2 when a fresh worker must run it again. */
int moects__worker_task(worker_state *ws, long ci, const moects_case *c, const moects_kernel *k, uint64_t seed,
                        int perf, const task_ctl *tc, moects_result *r)
{
    double t0 = now_s();
    moects__result_identity(r, c, k, seed);
    int ex = task_body(ws, ci, c, k, seed, perf, tc, r) || ws->retire;
    cur.active = 0;
    if (retry_fresh(ws, r)) ex = 2;
    ws->ntasks++;
    r->wall_s = now_s() - t0;
    moects__round_timing(r);
    return ex;
}

void moects__runner_task(const moects_case *c, const moects_kernel *k, uint64_t seed, int perf, moects_result *r)
{
    worker_state ws;
    memset(&ws, 0, sizeof ws);
    ws.case_idx = -1;
    int rcp = moects__kernel_recipe(k, c->op);
    task_ctl tc = {0, rcp >= 0 ? 1u << rcp : 0, NULL, NULL, -1, 0, NULL, 0};
    moects__worker_task(&ws, 0, c, k, seed, perf, &tc, r);
    drop_case(&ws);
}

moects__worker *moects__worker_new(const char *dump_dir, int dev_alone)
{
    worker_state *ws = calloc(1, sizeof *ws);
    if (!ws) return NULL;
    ws->case_idx = -1;
    ws->dump_dir = dump_dir;
    ws->dev_alone = dev_alone;
    return ws;
}

void moects__worker_free(moects__worker *ws)
{
    if (!ws) return;
    drop_case(ws);
    free(ws);
}
