/* moects_runner_internal.h: the runner's kernel phase under the memory contract (harness/guarded.c),
 * shared with harness/runner.c. Internal. */
#ifndef MOECTS_RUNNER_INTERNAL_H
#define MOECTS_RUNNER_INTERNAL_H
#include "moects_guard.h"
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
} moects__twice;

/* Run kernel k twice (moects__runs_of) on the case's inputs, each time with fresh poison in the output and fresh
 * canaries; CPU kernels in a child process each. dev: the case's guarded device inputs (CUDA;
 * moects__dev_inputs). 0 when both runs completed (t->got set), else 1 with r->verdict and reason
 * (FAIL_OOB_WRITE naming buffer, side and offset; FAIL_CRASH: signal, kernel error return, CUDA
 * error; SKIP: out of memory); *exit_after 1 after a CUDA error that may be sticky. */
int moects__kernel_twice(const moects_kernel *k, const moects_inputs *in, moects_guarded dev[MOECTS_INPUTS_MAX],
                         int perf, moects__twice *t, moects_result *r, int *exit_after);
void moects__twice_free(moects__twice *t);
/* Guarded device copies of the case's inputs. 0, or -1 with err (*fatal: 1 a copy failed). */
int moects__dev_inputs(const moects_inputs *in, moects_guarded dev[MOECTS_INPUTS_MAX], char *err, size_t len,
                       int *fatal);
/* The verdict of the two runs against ref: each run judged (a run that fails is the verdict), then
 * a kernel declaring a recipe must give the same bits twice (FAIL_NONDETERMINISTIC). */
void moects__judge_twice(const moects_kernel *k, const moects_inputs *in, const void *ref, const moects__twice *t,
                         moects_result *r);
#endif
