/* moects_runner_internal.h: the runner's kernel phase under the memory contract (harness/run/guarded.c),
 * shared with harness/run/runner.c. Internal. */
#ifndef MOECTS_RUNNER_INTERNAL_H
#define MOECTS_RUNNER_INTERNAL_H
#include "moects_guard.h"
#include "moects_judge.h"
#include "moects_layer.h"
#include "moects_ref.h"
#include "moects_runner.h"

/* Each case runs the kernel this many times, with different poison (DESIGN.md "Harness"). */
#define MOECTS_RUNS 2

/* Runs of kernel k per case: MOECTS_RUNS, or 1 for a mutant (its bug is caught or not; two runs
 * judge a kernel under test, whose determinism is part of its verdict). */
int moects__runs_of(const moects_kernel *k);

/* The buffers of a task's runs: guarded outputs, the outputs to judge. */
typedef struct {
    moects_guarded out[MOECTS_RUNS];
    void *host_out[MOECTS_RUNS]; /* CUDA: the outputs copied back */
    const void *got[MOECTS_RUNS];
    size_t kept_host, kept_vm, kept_dev; /* what the last run() called kept (bytes; see MOECTS_LEAK_BYTES) */
    int measured;                        /* set once a run() returned and was measured */
} moects__twice;

/* What the runner tells the kernel phase (dev_alone) and learns from it (retire). */
typedef struct {
    int dev_alone; /* this worker has its device to itself: free device memory measures its kernels */
    int runs;      /* > 0: at most this many runs (the batch-invariance run: 1); 0: moects__runs_of */
    int retire;    /* set: a kernel kept memory (named in the reason and the kernel log): the worker exits */
} moects__kernel_env;

/* A kernel whose last run() of a case leaves this much more host heap (malloc) or device memory in
 * use than before, or maps MOECTS_LEAK_VM_BYTES more address space (mmap behind malloc's back), is
 * named in its result's reason and in the kernel log, and its worker is replaced (a CPU kernel's
 * call ran in a child that is gone, but the fault is reported the same). The last run, not the
 * first: a first call may initialize for good (cuBLAS loading its kernels kept 112 MiB of host heap
 * on the H200, torch 290-380 MiB, a Triton JIT compile 65 MiB), a leak keeps memory every call. */
#define MOECTS_LEAK_BYTES ((size_t)64 << 20)
#define MOECTS_LEAK_VM_BYTES ((size_t)2 << 30)

/* The prefix of a CPU kernel's crash reason when a signal ended its call's process: the parent logs
 * such a task in the kernel log as it logs a lost worker's. */
#define MOECTS_KERNEL_KILLED "kernel process killed by signal"

/* The host inputs read-only in this process (PROT_READ), for the rest of the case: a kernel's write
 * into one faults at the write. Called once the inputs are built and hashed. */
void moects__inputs_readonly(const moects_inputs *in);

/* Run kernel k twice (moects__runs_of, or env->runs) on the case's inputs, each time with fresh
 * poison in the output and fresh canaries; CPU kernels in a child process each. dev: the case's guarded device inputs (CUDA;
 * moects__dev_inputs). 0 when both runs completed (t->got set), else 1 with r->verdict and reason
 * (FAIL_OOB_WRITE naming buffer, side and offset; FAIL_CRASH: signal, kernel error return "run()
 * returned N: last_error()", CUDA error; SKIP: out of memory); *exit_after 1 after a CUDA error that
 * may be sticky. Kernels that ask (Python kernels: moects_task_tensor) see each run's pointers. */
int moects__kernel_twice(const moects_kernel *k, const moects_inputs *in, moects_guarded dev[MOECTS_INPUTS_MAX],
                         int perf, moects__kernel_env *env, moects__twice *t, moects_result *r, int *exit_after);
void moects__twice_free(moects__twice *t);
/* One more run of k on the case with its op's intermediates asked for (geometry sg, harness/moects_op.h;
 * docs/fused_moe.md "Exposed intermediates"): the output and every stage buffer guarded (CPU: shared,
 * so a child's writes come back; CUDA: on the device, from its device inputs dev), each stage filled
 * with MOECTS__STAGE_POISON before the run, stage i's bytes then copied into host[i]
 * (moects__stage_bytes). 0; -1 with why (the run failed, wrote past a stage, no memory): the judged
 * runs' verdict stands. *exit_after 1 after a CUDA error that may be sticky. */
int moects__kernel_stages(const moects_kernel *k, const moects_inputs *in, moects_guarded dev[MOECTS_INPUTS_MAX],
                          const moects__stages *sg, void *const *host, char *why, size_t cap, int *exit_after);
/* Guarded device copies of the case's inputs. 0, or -1 with err (*fatal: 1 a copy failed). */
int moects__dev_inputs(const moects_inputs *in, moects_guarded dev[MOECTS_INPUTS_MAX], char *err, size_t len,
                       int *fatal);
/* harness/run/runner.c: the pointers a kernel's run() gets for the task in flight (moects_task_tensor). */
void moects__task_ptrs(void *const *ptr, void *out, void *stream);
/* A case's per-element bounds for class cls and, where the accumulation check applies
 * (moects__judge_acc_check_applies), its inputs (st.x NULL otherwise): harness/run/bounds.c. */
typedef struct {
    double *bound;           /* [out_elems] */
    moects_bound_stats st;   /* [out_elems] each, or all NULL */
    moects_acc_class cls;
    /* an op with an enclosure (fused_moe): the enclosure of recipe under cls instead (bound NULL) */
    void *lo, *hi;           /* [out_bytes] each */
    moects_layer_tightness tight;
    moects_recipe recipe;
} moects__bounds;
/* Computed from in's host tensors (OpenBLAS's threads as set), for a bounded claim of class cls
 * under recipe (moects__judge_claim_bounded). 0; -1 when the reference refuses (harness or case
 * bug); -2 out of memory (b left empty). */
int moects__bounds_compute(const moects_case *c, const moects_inputs *in, const moects_acc_class *cls,
                           moects_recipe recipe, moects__bounds *b);
/* The judge's view of b: bounds and check inputs, or the enclosure (any_order from the recipe). */
moects_judge_ref moects__bounds_ref(const moects_inputs *in, const void *want, const moects__bounds *b);
void moects__bounds_free(moects__bounds *b);

#endif
