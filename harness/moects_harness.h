/* moects_harness.h: the runner's results, their JSON file, and the harness's shared helpers.
 * DESIGN.md "Harness". */
#ifndef MOECTS_HARNESS_H
#define MOECTS_HARNESS_H
#include <stdint.h>
#include <stdio.h>

#include "moects_cases.h"
#include "moects_diag.h"
#include "moects_kernel.h"

/* Verdict words are the report's vocabulary (DESIGN.md "Verdicts"). */
typedef enum {
    MOECTS_PASS_EXACT = 0,
    MOECTS_PASS_BOUNDED,   /* every element within its own proven bound (DESIGN.md "Bounded verdicts") */
    MOECTS_PASS_TOLERANCE,
    MOECTS_PASS_TIE,       /* moe_route: some rows chose other ids tied with the reference's, as the
                              kernel's declared tie rule allows (DESIGN.md "Routing") */
    MOECTS_FAIL_MISMATCH,
    MOECTS_FAIL_CRASH,
    MOECTS_FAIL_TIMEOUT,
    MOECTS_FAIL_OOB_WRITE,        /* a write outside an output, or into an input (harness/run/guard.c) */
    MOECTS_FAIL_NONDETERMINISTIC, /* two runs of a kernel that declares a recipe differ */
    MOECTS_FAIL_BATCH_VARIANT,    /* a batch-invariant kernel's rows differ inside a larger batch */
    MOECTS_UNSUPPORTED,
    MOECTS_SKIP,
    MOECTS_FAIL_REFERENCE, /* the GPU and CPU references of the case differ: a bug of the suite, never
                              charged to the kernel; it fails the run (issue 31, docs/gpu_reference.md) */
    MOECTS_VERDICT_COUNT
} moects_verdict;

/* In the reason of a SKIP whose case did not fit this host's memory (inputs, reference or output):
 * `moects run` then exits non-zero (a resource limit of the runner, not a judgement). */
#define MOECTS_HOST_OOM "out of host memory"

/* The reason of a CUDA kernel's SKIP on a host with no usable CUDA device starts with this prefix,
 * then " (" the probe's words ")": "no CUDA device (cudaGetDeviceCount: CUDA driver version is
 * insufficient for CUDA runtime version)". The worker's one device probe decides it
 * (harness/run/task.c), before the kernel's supports(): on such a host no CUDA case is UNSUPPORTED. */
#define MOECTS__NO_DEVICE "no CUDA device"
/* 1 when reason (NULL: 0) is such a SKIP's reason (MOECTS__NO_DEVICE, then the end or " ("), else 0:
 * what reports count as "no device" apart from other skips. harness/model/results.c. */
int moects__reason_is_no_device(const char *reason);

/* How results.json spells an unbounded ULP distance (UINT64_MAX: a NaN or an Inf against another
 * value, moects_compare.h); its reader also takes the older "18446744073709551615". */
#define MOECTS__ULP_UNBOUNDED "unbounded"

/* The accumulation check of bounded verdicts (DESIGN.md "Bounded verdicts"): a case of at least
 * MOECTS_ACC_CHECK_MIN compared elements fails when moects_result.acc_rms exceeds the limit. */
#define MOECTS_ACC_CHECK_LIMIT 2.0
#define MOECTS_ACC_CHECK_MIN 64

const char *moects__verdict_name(moects_verdict v);            /* "PASS_EXACT" ... */
int moects__verdict_parse(const char *s, moects_verdict *out); /* 0 or -1 */
/* The class of a refusal's reason: its opening word before ": " when that is one of the class words
 * ("format", "shape", ...; moects_refusal in moects_kernel.h), else MOECTS_REFUSE_UNSPECIFIED. */
moects_refusal moects__refusal_of(const char *reason);
const char *moects__refusal_name(moects_refusal c); /* "format" ... "unspecified"; "?" outside */
int moects__refusal_parse(const char *s, moects_refusal *out); /* a class word: 0, else -1 */
static inline int moects_verdict_is_pass(moects_verdict v) { return v <= MOECTS_PASS_TIE; }
static inline int moects_verdict_is_fail(moects_verdict v)
{
    return v >= MOECTS_FAIL_MISMATCH && v <= MOECTS_FAIL_BATCH_VARIANT;
}
/* The failures among per-verdict counts n[MOECTS_VERDICT_COUNT] (a kernel's, a coverage cell's). */
static inline size_t moects__fail_count(const size_t *n)
{
    size_t f = 0;
    for (int v = MOECTS_FAIL_MISMATCH; v <= MOECTS_FAIL_BATCH_VARIANT; v++) f += n[v];
    return f;
}
/* The passes among per-verdict counts n[MOECTS_VERDICT_COUNT]. */
static inline size_t moects__pass_count(const size_t *n)
{
    size_t p = 0;
    for (int v = MOECTS_PASS_EXACT; v <= MOECTS_PASS_TIE; v++) p += n[v];
    return p;
}

/* A tensor's name ("x", "topk_ids", "a", ...) and the XXH64 of its bytes. */
#define MOECTS_RESULT_HASHES_MAX 16
typedef struct {
    char name[24];
    uint64_t xxh64;
} moects_tensor_hash;

/* XXH64 with seed 0 of len bytes at p (p may be NULL when len is 0): xxHash 0.8 (Yann Collet,
 * BSD-2; Debian libxxhash-dev, compiled in from xxhash.h), about 10 GB/s on one core, so a 4 GiB
 * tensor costs under half a second. harness/report/hashes.c. */
uint64_t moects__xxh64(const void *p, size_t len);

/* One (kernel, case) outcome. */
typedef struct {
    char kernel[96];
    char case_id[192];
    char model[64];
    char layout[16];
    moects_op op;
    int is_mutant;          /* kernel->bug != NULL */
    moects_verdict verdict;
    char recipe[64];        /* recipe compared under, "exact_v1+tol" for tolerance kernels */
    int64_t mismatches;     /* elements whose bits differ (NaN == NaN); bounded: outside their bounds */
    uint64_t max_ulp;       /* ordered-integer distance; UINT64_MAX: moects_compare_result.max_ulp,
                               "unbounded" in results.json (MOECTS__ULP_UNBOUNDED) */
    double calc_diff;       /* sum (x-y)^2 / sum (x^2+y^2), double; 0 when both all zero */
    /* Bounded verdicts' accumulation check (DESIGN.md "Bounded verdicts"): the RMS, in units of
     * sigma, of the accumulation error the output implies, over acc_n elements; acc_n 0: not run
     * (no bound, negzero data, an element outside its bound, older results.json). */
    double acc_rms;
    int64_t acc_n;
    int64_t first_index;    /* -1 when none */
    char got[64], want[64]; /* "0x3f80 (1)" */
    moects_diag diag;       /* where the output differs, in the op's coordinates (ndims 0: none) */
    char reason[1024];      /* crash/skip/unsupported reason, error text (a crash: with the tail of the kernel output) */
    char known[256];        /* reason of the known finding (moects_known.h) matching this honest
                               FAIL_* / PASS_* result, "" when none: a known FAIL_* does not fail the run */
    uint64_t seed;
    double kernel_ms;       /* --perf: median time per launch, 0 otherwise */
    double perf_value;      /* --perf: achieved GB/s (ep_gather) or TFLOP/s (fp4_gemm) */
    double perf_fraction;   /* --perf: fraction of the measured ceiling */
    /* Where the task's time went, seconds (CLOCK_MONOTONIC), all 0 when unknown (older files).
     * A case's inputs and reference are counted in the task that built them (the first of the
     * case's tasks to need them); wall >= inputs + reference + kernel + compare, the rest being
     * supports(), allocation and messaging. harness/run/runner.c. */
    double wall_s;          /* the task, as its worker saw it (crash/timeout: as the parent saw it) */
    double inputs_s;        /* generating the case's inputs (moects__inputs_build) */
    double reference_s;     /* the CPU reference(s) */
    double kernel_s;        /* device set-up and input copies, launch to sync, copy back, --perf */
    double compare_s;       /* moects__compare and the verdict */
    char reference[4];      /* where the reference compared against came from: "gpu", "cpu", "" none */
    int ref_check;          /* the CPU re-check of a GPU reference: 0 not run, 1 identical, 2 differs */
    int ref_threads;        /* threads given to the reference this task computed; 0: none */
    /* The GPU whose worker set ran the task (issue 33): the CUDA_VISIBLE_DEVICES its worker was
     * started with ("0", "GPU-<uuid>", ...; --gpus, harness/run/runner.c); "" none (no GPU list:
     * a host without one, a task fail-fast left unrun, older results.json). */
    char gpu[64];
    /* Determinism evidence (DESIGN.md "Determinism"): XXH64 (seed 0; xxHash 0.8 by Y. Collet, its
     * spec xxhash_spec.md) of each input tensor's bytes, and of the reference output under `recipe`,
     * computed by the worker that holds them (harness/report/hashes.c). n_hashes 0 / has_ref_hash 0: not
     * computed (inputs not built, reference not run, older results.json). */
    int n_hashes;
    moects_tensor_hash hashes[MOECTS_RESULT_HASHES_MAX];
    int has_ref_hash;
    uint64_t ref_xxh64;
} moects_result;

#define MOECTS_RUN_LIBS 8 /* kernel libraries recorded in results.json */
typedef struct {
    char moects_version[16];
    char commit[48];   /* git commit the run was made at, "-dirty" appended when tracked files differ
                          from it ("unknown" outside a checkout) */
    char date[32];     /* ISO 8601 UTC */
    char machine[128]; /* host name and device name */
    char filter[2048];  /* the selection as options; --kernel-lib paths included */
    char shard[32];    /* "i/n" or "" */
    uint64_t seed;
    /* the --kernel-lib libraries the run loaded: absolute path, SHA-256 of the file ("" unknown) */
    struct {
        char path[1024];
        char sha256[65];
    } libs[MOECTS_RUN_LIBS];
    size_t nlibs;
    /* --reference (issue 31): "gpu" or "cpu" ("gpu-standin", "gpu-broken": the tests' host stand-ins);
     * under a GPU reference the seed of the 1% re-check sample and the sampled case ids (malloc'd) */
    char reference[16];
    uint64_t ref_sample_seed;
    char **ref_sampled;
    size_t nref_sampled;
    moects_result *v;
    size_t n, cap;
} moects_run;

/* results.json: write atomically (temp file + rename). Returns 0 or -1 with err. */
int moects__results_write(const char *path, const moects_run *run, char *err, size_t errlen);
/* Read a results.json. Returns 0 or -1 with a one-line "path: field: problem" in err. */
int moects__results_read(const char *path, moects_run *run, char *err, size_t errlen);
int moects__run_push(moects_run *run, const moects_result *r);
void moects__run_free(moects_run *run);

/* Write data to path through path.tmp.<pid> and rename: no half-written reports. */
int moects__write_file_atomic(const char *path, const void *data, size_t len, char *err, size_t errlen);

/* Reports that belong together (a run's results.json, run.tap, summary.md, kernels.log): each is
 * staged at its temporary name (moects__report_tmp: path.tmp.<pid>), by moects__report_stage or by the
 * caller writing there and calling moects__report_adopt; moects__report_commit renames them all into
 * place. On a failed write, moects__report_abort removes what was staged and the previous set stays
 * whole (never new results.json beside an old run.tap). Errors: -1 with "path: problem" in err. */
#define MOECTS_REPORT_MAX 8
typedef struct {
    size_t n;
    char path[MOECTS_REPORT_MAX][4096];
} moects_report_set;
int moects__report_tmp(const char *path, char *tmp, size_t tmplen, char *err, size_t errlen);
/* Remove dir's temporaries (NAME.tmp.PID, moects__report_tmp's names) of processes that are gone: what a
 * run killed by SIGKILL left (no handler ran). Best effort, no errors. */
void moects__report_remove_dead_tmps(const char *dir);
int moects__report_stage(moects_report_set *s, const char *path, const void *data, size_t len, char *err,
                        size_t errlen);
int moects__report_adopt(moects_report_set *s, const char *path, char *err, size_t errlen);
int moects__report_commit(moects_report_set *s, char *err, size_t errlen);
void moects__report_abort(moects_report_set *s);
/* results.json staged in a report set (moects__results_write's file, renamed by the commit; set
 * NULL: written now). */
int moects__results_stage(moects_report_set *set, const char *path, const moects_run *run, char *err,
                         size_t errlen);
/* How a report names a file the user gave (--kernel-lib, --kernel-py, --config) or the program: its
 * path relative to the current directory when the file lies inside it (no "..": shorter than the
 * absolute path, and correct where the report is printed; "./" prepended when it has no '/', so
 * that neither dlopen nor the shell searches a path for it), else its absolute path (correct from
 * any folder). path as given when it cannot be resolved. malloc'ed; NULL out of memory.
 * DESIGN.md "Verdicts" (repro lines). */
char *moects__path_here(const char *path);
/* The program a repro line calls: "moects" when the first `moects` on PATH is this very binary
 * (/proc/self/exe), else this binary as moects__path_here names it (shell-quoted when it needs it);
 * "moects" when /proc/self/exe cannot be read. Computed once. */
const char *moects__self_program(void);
/* The folder a repro line writes to, relative to where it is pasted: "reports/repro/" and the case id
 * with each character outside [A-Za-z0-9._-] (the '/' included) as '_'. Never reports/latest. */
void moects__repro_dir(const char *case_id, char *buf, size_t len);

/* mkdir -p. Returns 0 or -1 with err. */
int moects__mkdirs(const char *path, char *err, size_t errlen);
/* mkdir -p dir, then create and remove a file in it: a report directory proved writable before any
 * work. 0, or -1 with err: moects__mkdirs's (naming the directory it could not make), "DIR: not
 * writable: reason" or "DIR...: path too long". */
int moects__dir_writable(const char *dir, char *err, size_t errlen);

#endif
