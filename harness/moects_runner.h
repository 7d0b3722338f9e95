/* moects_runner.h: running kernels under test in worker processes (harness/runner.c), device
 * probing, out-of-tree kernel libraries (harness/plugin.c) and --perf (harness/perf.c).
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
    double timeout_s; /* per task, kernel phase; inputs + reference get 10x; <= 0: no limit */
    int jobs;         /* worker processes, >= 1 */
    int perf;         /* time CUDA kernels (moects_perf_measure) */
    int progress;     /* stderr: 1 one updating line (a terminal), 2 a line a minute (a log) */
    char **devices;   /* CUDA_VISIBLE_DEVICES of worker w: devices[w % ndevices]; NULL: inherit */
    size_t ndevices;
} moects_runner_opts;

/* Run every (case, kernel) pair whose ops agree, case-major, in o->jobs forked workers; append
 * one moects_result per pair to run in that order whatever the number of jobs. A worker that
 * dies makes its task FAIL_CRASH (signal or exit status in reason) and a fresh worker goes on;
 * a task past its time is killed: FAIL_TIMEOUT. Returns 0, or -1 with err when the run itself
 * cannot go on (fork/pipe failure, out of memory). The parent never initialises CUDA. */
int moects_runner_run(const moects_runner_opts *o, moects_run *run, char *err, size_t errlen);

/* Run one task in the calling process, as a worker does (tests, debugging). */
void moects_runner_task(const moects_case *c, const moects_kernel *k, uint64_t seed, int perf,
                        moects_result *r);

/* Visible CUDA devices, asked of a throwaway child process so that the caller never initialises
 * CUDA. count 0 with why set when there is none (or no CUDA build). name: device 0's name. */
typedef struct {
    int count;
    char why[256];
    char name[128];
} moects_device_info;
void moects_probe_devices(moects_device_info *d);

/* dlopen a kernel library, call its MOECTS_PLUGIN_SYMBOL and append its kernels to *v (*n
 * entries, realloc'ed). Checks abi_version, op, device, run, recipe name. Returns 0, or -1 with
 * "PATH: problem" in err. The library stays loaded. */
int moects_plugin_load(const char *path, const moects_kernel ***v, size_t *n, char *err, size_t errlen);

/* --perf, in a worker, for a CUDA kernel whose args hold device pointers: median time per launch
 * (moects_cuda_time), achieved GB/s (ep_gather: bytes of valid rows read + bytes written) or
 * TFLOP/s (fp4_gemm: 2MNK), and the fraction of the ceiling measured on this device
 * (moects_cuda_copy_gbps, moects_cuda_cublas_bf16_tflops at the same M, N, K). Fills
 * r->kernel_ms, perf_value, perf_fraction; a failure is noted in r->reason. */
void moects_perf_measure(const moects_kernel *k, const moects_inputs *in, const moects_op_args *dargs,
                         moects_result *r);
/* perf.md of a run: one row per timed (kernel, case). NULL when out of memory. */
char *moects_perf_render(const moects_run *run, size_t *len);

#endif
