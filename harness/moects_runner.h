/* moects_runner.h: running kernels under test in worker processes (harness/run/runner.c), device
 * probing, out-of-tree kernel libraries (harness/run/plugin.c) and --perf (harness/run/perf.c).
 * DESIGN.md "Harness": isolation, determinism, scale-out. */
#ifndef MOECTS_RUNNER_H
#define MOECTS_RUNNER_H
#include <stddef.h>
#include <stdint.h>

#include "moects_harness.h"
#include "moects_inputs.h"
#include "moects_kernel.h"

typedef struct {
    const moects_case *cases; /* the selected cases, in run order */
    size_t ncases;
    const moects_kernel *const *kernels; /* the selected kernels; a task per (case, kernel of its op) */
    size_t nkernels;
    uint64_t seed;
    double timeout_s; /* per task, kernel phase; inputs + reference and compare 10x; each + 30 s/GiB; <= 0: none */
    int jobs;         /* worker processes, >= 1 */
    int perf;         /* time CUDA kernels (moects__perf_measure) */
    /* --reference (issue 31): 0 the CPU reference alone; else the GPU reference where an op has one, in
     * mode reference_gpu - 1 (moects_gpuref_mode: 1 the device, 2 and 3 the tests' host stand-ins), and
     * refcheck[c] (NULL: none) set for the cases whose GPU references the CPU re-checks whatever the
     * verdicts (smoke, the 1% sample); a FAIL is re-checked always. */
    int reference_gpu;
    const unsigned char *refcheck;
    int progress;     /* stderr: 1 one updating line (a terminal), 2 a line a minute (a log) */
    /* The GPUs (issue 33): worker w is in the set of GPU w % ndevices, started with CUDA_VISIBLE_DEVICES
     * = devices[w % ndevices] (a worker that dies is replaced in its set), and each result it gives
     * records that value (moects_result.gpu). NULL: the workers inherit the variable, no result
     * records one. fake_devices: the list stands in for GPUs on a host without any (MOECTS_FAKE_GPUS,
     * the tests): no CUDA device behind it. */
    char **devices;
    size_t ndevices;
    int fake_devices;
    /* Weighted scheduling (harness/run/sched.c): an FP4 GEMM case of F = 2MNK flops takes
     * w = ceil(F / big_case_flops) of the jobs slots (1..jobs) until its reference is done, and
     * its reference runs on w * (ncpu / jobs) OpenBLAS threads. <= 0: MOECTS_BIG_CASE_FLOPS_DEFAULT. */
    double big_case_flops;
    int ncpu;         /* cores for the whole run; <= 0: the online processors */
    /* What kernels print: the workers' stdout and stderr go to this file (created or truncated
     * when the run starts, appended to by every worker), each task whose worker dies or is killed
     * followed by a line "moects: KERNEL on CASE: REASON". NULL: the caller's stderr. */
    const char *kernel_log;
    /* Fail fast (honest kernels only: a mutant's failures are the point). A task left unrun is SKIP
     * with "not run: " and the one reason, in its place in the results. 0: no limit. */
    int max_failures;        /* after this many FAIL_* of honest kernels, run nothing more */
    int max_kernel_failures; /* after this many FAIL_* of one honest kernel, run it no more */
    int dead_after;          /* a kernel whose first dead_after tasks all crashed or timed out is
                                stopped for the rest of the run */
    /* --kernel-py MODULE:NAME specs: when any, every worker is started by fork and exec of
     * $MOECTS_PYTHON (python3) -m moects._worker (before any CUDA initialisation), which loads
     * libmoects (libmoects: its path, passed as MOECTS_LIB) and serves tasks through
     * moects_worker_serve; the kernels are found there by name (built-ins, the Python kernels, and
     * libs: the --kernel-lib paths, loaded again). */
    const char *const *kernel_py;
    size_t nkernel_py;
    const char *libmoects;
    const char *const *libs;
    size_t nlibs;
    /* --dump DIR: a FAIL_MISMATCH task writes DIR/<kernel>/<case>.safetensors (export format, the
     * reference compared against) and <case>.out.safetensors (the kernel's output). NULL: none. */
    const char *dump_dir;
    /* --resume: prior[c * nkernels + k], when not NULL, is the result of case c under kernel k from
     * an earlier run (harness/report/journal.c): that task is not run, its result takes its place
     * in the run, and it counts for fail fast as if it had just finished. NULL: run every task. */
    const moects_result *const *prior;
    /* Called in the parent with each task's result as it finishes (not prior ones, not those fail
     * fast leaves unrun), before the next task is handed out (the journal). NULL: none. */
    void (*on_result)(void *ctx, const moects_result *r);
    void *on_result_ctx;
    /* Called in the parent with every task's result as it finishes, those fail fast leaves unrun
     * included (not prior ones): case c of cases, kernel k of kernels; r stays valid until the run
     * returns (the streamed TAP). NULL: none. */
    void (*on_task)(void *ctx, size_t c, size_t k, const moects_result *r);
    void *on_task_ctx;
} moects_runner_opts;

/* The prefix of the reason of a task that fail-fast left unrun (its verdict is SKIP). */
#define MOECTS_NOT_RUN "not run: "

/* About a second of one core's FP4 reference (blockwise_v1 runs at ~75 GFLOP/s on one Haswell
 * core, bench/bench_fp4_gemm.c). `moects run` takes MOECTS_BIG_CASE_FLOPS from the environment. */
#define MOECTS_BIG_CASE_FLOPS_DEFAULT 64e9

/* Run every (case, kernel) pair whose ops agree, case-major, in o->jobs forked workers (but those
 * o->prior holds); append one moects_result per pair to run in that order whatever the number of
 * jobs, prior results in their places (and the results'
 * verdicts and comparisons do not depend on it: the references are thread-count invariant).
 * A case's tasks (a group) run in one worker; groups start op by op in the kernels' order,
 * costliest first within an op, weighted (above), each on the next free worker whatever its GPU
 * (devices): every GPU's workers stay busy until the last group starts, so with groups of one slot
 * the GPUs' busy times differ by at most (workers per GPU) x (the longest group), docs/scale-out.md.
 * Each result carries its timing (moects_result.wall_s ...). A worker that
 * dies makes its task FAIL_CRASH (signal or exit status in reason) and a fresh worker goes on;
 * a task past its time is killed: FAIL_TIMEOUT. Returns 0, or -1 with err when the run itself
 * cannot go on (fork/pipe failure, out of memory, o->kernel_log cannot be opened: "PATH: why").
 * The parent never initialises CUDA; its progress lines go to its stderr. */
int moects__runner_run(const moects_runner_opts *o, moects_run *run, char *err, size_t errlen);

/* Run one task in the calling process, as a worker does (tests, debugging), with the calling
 * thread's OpenBLAS thread count for the reference. */
void moects__runner_task(const moects_case *c, const moects_kernel *k, uint64_t seed, int perf,
                        moects_result *r);

/* Clears r and fills who ran what (kernel, case, model, layout, op, mutant, seed, recipe); internal,
 * shared with libmoects' judge (harness/api/capi.c). */
void moects__result_identity(moects_result *r, const moects_case *c, const moects_kernel *k, uint64_t seed);
/* A bounded kernel's accumulation class as text: "bound(p=BITS,rne|trunc)", with
 * ",bf16-split-k<=N" inside for a split-K BF16 reduction (harness/run/runner.c). */
void moects__bound_name(const moects_kernel *k, char *buf, size_t len);

/* Visible CUDA devices, asked of a throwaway child process so that the caller never initialises
 * CUDA. count 0 with why set when there is none (or no CUDA build). name: device 0's name. */
typedef struct {
    int count;
    char why[256];
    char name[128];
} moects_device_info;
void moects__probe_devices(moects_device_info *d);

/* dlopen a kernel library, call its MOECTS_PLUGIN_SYMBOL and append its kernels to *v (*n
 * entries, realloc'ed). Checks abi_version, op, device, run, recipe name. Returns 0, or -1 with
 * "PATH: problem" in err. The library stays loaded. */
int moects__plugin_load(const char *path, const moects_kernel ***v, size_t *n, char *err, size_t errlen);

/* *out = k as this ABI version's descriptor: the fields k's abi_version (1 to MOECTS_KERNEL_ABI_VERSION)
 * has, the later ones zero; no byte past k's own version is read (harness/run/plugin.c). */
void moects__kernel_upgrade(const moects_kernel *k, moects_kernel *out);

/* --perf, in a worker, for a CUDA kernel whose args hold device pointers: median time per launch
 * (moects__cuda_time), achieved GB/s (ep_gather: bytes of valid rows read + bytes written) or
 * TFLOP/s (fp4_gemm: 2MNK), and the fraction of the ceiling measured on this device
 * (moects__cuda_copy_gbps, moects__cuda_cublas_bf16_tflops at the same M, N, K). Fills
 * r->kernel_ms, perf_value, perf_fraction; a failure is noted in r->reason. */
void moects__perf_measure(const moects_kernel *k, const moects_inputs *in, const moects_op_args *dargs,
                         moects_result *r);
/* perf.md of a run: one row per timed (kernel, case). NULL when out of memory. */
char *moects__perf_render(const moects_run *run, size_t *len);

/* ---- weighted scheduling (harness/run/sched.c); internal, declared here for the tests ---- */
typedef struct {
    size_t ng;
    int slots, free_slots, pending; /* pending: slots running groups hold beyond one each */
    size_t *order, *order1;         /* groups in start order; those wanting one slot, same order */
    size_t n1, head, bf, started;   /* head: cursor in order, bf: in order1 */
    int *want, *held;               /* per group: slots wanted (1..slots), held now */
    char *state;                    /* per group: 0 not started, 1 running, 2 done */
} moects__sched;

/* Slots case c wants: see moects_runner_opts.big_case_flops; ep_gather (single-threaded
 * reference) always 1. */
int moects__case_weight(const moects_case *c, double big_case_flops, int max_weight);
/* Bytes of case c's inputs and output (an upper bound, for time limits that scale with size). */
double moects__case_bytes(const moects_case *c);
/* ng groups, order[] their indices in start order (moects__sched_order), want[g] the slots each wants
 * (clamped to 1..slots; NULL: all 1). 0, or -1 out of memory. */
int moects__sched_init(moects__sched *s, size_t ng, const size_t *order, const int *want, int slots);
void moects__sched_free(moects__sched *s);
/* A group to start now and, in *slots, how many slots it gets; -1 when none may start now. */
long moects__sched_next(moects__sched *s, int *slots);
/* Running group g keeps one slot and gives back the others (its reference is done). */
void moects__sched_shrink(moects__sched *s, size_t g);
/* Running group g has finished: its slots are free. */
void moects__sched_done(moects__sched *s, size_t g);
/* Groups not started yet. */
size_t moects__sched_left(const moects__sched *s);
/* order[0..ng): the groups by ascending rank[g] (the runner: the first kernel of the group's op, so
 * that ops finish in the kernels' order), then by descending cost[g], ties by group index. Left as it
 * is when out of memory. */
void moects__sched_order(size_t *order, size_t ng, const double *cost, const size_t *rank);

/* ---- run/localcase.c: local cases (issue 32), tier local ---- */
/* The user case folder: $MOECTS_CASES_DIR, else ROOT/cases/local. */
void moects__local_dir(const char *root, char *buf, size_t len);
/* The built-in registry of root (moects__cases_builtin) with the local cases of the user case folder
 * appended (each manifest there, tier local). 0, or -1 with "FILE: problem" in err. */
int moects__cases_registry(const char *root, moects_case_list *out, char *err, size_t errlen);

#endif
