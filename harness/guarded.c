/* guarded.c: a task's kernel phase under the memory contract (DESIGN.md "Harness", issue 13): every
 * buffer the kernel sees between guards (harness/guard.c), the output poisoned afresh before each
 * of two runs, CPU kernels in a child process per call. The runner (harness/runner.c) calls
 * moects__kernel_twice and judges the two outputs with moects__judge_twice. */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moects_compare.h"
#include "moects_device.h"
#include "moects_guard.h"
#include "moects_runner_internal.h"

static const unsigned char CANARY[MOECTS_RUNS] = {0xA5, 0x5A};

/* r's verdict and a reason (truncated to fit). */
__attribute__((format(printf, 3, 4))) static void fail(moects_result *r, moects_verdict v, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->reason, sizeof r->reason, fmt, ap);
    va_end(ap);
    r->verdict = v;
}

/* The worker's CPU output buffers, one per run, kept across tasks while the size fits: a fresh
 * shared mapping per task costs a page fault per page (measured: seconds per task on a large case
 * on a host short of memory). */
static moects_guarded cpu_out[MOECTS_RUNS];

static moects_guarded *cpu_output(int run, size_t bytes, size_t row)
{
    moects_guarded *o = &cpu_out[run];
    size_t min = row > 4096 ? row : 4096;
    if (o->base && o->data && o->bytes == bytes && o->lo >= min) return o;
    moects_guard_free(o);
    return moects_guard_alloc(o, "out", bytes, row, MOECTS_GUARD_SHARED) ? NULL : o;
}

int moects__runs_of(const moects_kernel *k) { return k->bug ? 1 : MOECTS_RUNS; }

void moects__twice_free(moects__twice *t)
{
    for (int i = 0; i < MOECTS_RUNS; i++) {
        moects_guard_free(&t->out[i]);
        free(t->host_out[i]);
        t->host_out[i] = NULL;
        t->got[i] = NULL;
    }
}

/* The first damaged canary of the guarded buffers g[0..n), then (CUDA: n = inputs + output) the
 * first device input whose bytes changed: 1 with the reason in r (FAIL_OOB_WRITE), 0 when all
 * intact, -1 a device error (reason set). */
static int damaged(moects_guarded *g, size_t n, const moects_inputs *in, moects_result *r)
{
    char why[200];
    for (size_t i = 0; i < n; i++) {
        int c = moects_guard_check(&g[i], why, sizeof why);
        if (c) {
            fail(r, c > 0 ? MOECTS_FAIL_OOB_WRITE : MOECTS_FAIL_CRASH, "%s", why);
            return c;
        }
    }
    for (int i = 0; i < in->nt && n > 1; i++) { /* device inputs: their bytes read back */
        const moects_guarded *gi = &g[i];
        if (!gi->data || !gi->device) continue;
        const unsigned char *now = gi->data, *was = in->t[i].host;
        unsigned char *tmp = NULL;
        if (gi->device) {
            if (!(tmp = malloc(gi->bytes)) || moects_cuda_d2h(tmp, gi->data, gi->bytes)) {
                free(tmp);
                continue; /* cannot read it back: canaries only */
            }
            now = tmp;
        }
        size_t off = 0;
        while (off < gi->bytes && now[off] == was[off]) off++;
        free(tmp);
        if (off < gi->bytes) {
            fail(r, MOECTS_FAIL_OOB_WRITE, "%s: an input changed (first changed byte at offset %zu)",
                     gi->name, off);
            return 1;
        }
    }
    return 0;
}

/* How the child of a CPU call ended, as a verdict: 0 when run() returned 0. */
static int call_verdict(const moects_cpu_call *c, const moects_inputs *in, const moects_guarded *out,
                        moects_result *r)
{
    char where[200];
    if (c->signo) {
        moects_guarded all[MOECTS_INPUTS_MAX + 1];
        for (int i = 0; i < MOECTS_INPUTS_MAX; i++) all[i] = in->t[i].g;
        all[MOECTS_INPUTS_MAX] = *out;
        int in_guard = (c->signo == SIGSEGV || c->signo == SIGBUS) &&
                       moects_guard_locate(all, MOECTS_INPUTS_MAX + 1, c->fault_addr, where, sizeof where);
        if (in_guard && c->fault_write != 0)
            fail(r, MOECTS_FAIL_OOB_WRITE, "%s: write, faulted at the write (guard page or read-only input)", where);
        else if (in_guard)
            fail(r, MOECTS_FAIL_CRASH, "%s: read outside the buffer (guard page)", where);
        else
            fail(r, MOECTS_FAIL_CRASH, "kernel process killed by signal %d (%s) while the kernel ran", c->signo,
                 strsignal(c->signo));
        return 1;
    }
    if (!c->returned) {
        fail(r, MOECTS_FAIL_CRASH, "the kernel exited the process (status %d) in run()", c->exit_status);
        return 1;
    }
    if (c->rc != 0) {
        fail(r, MOECTS_FAIL_CRASH, "kernel error: run() returned %d (its own error return, not a signal)%s%s", c->rc,
             c->error[0] ? ": " : "", c->error);
        return 1;
    }
    return 0;
}

/* CPU kernel: the inputs (guarded since they were built, read-only in the child), two guarded
 * shared outputs, one child per run. */
static int cpu_twice(const moects_kernel *k, const moects_inputs *in, moects__twice *t, moects_result *r)
{
    const int runs = moects__runs_of(k);
    void *ptr[MOECTS_INPUTS_MAX] = {0};
    moects_guarded ro[MOECTS_INPUTS_MAX];
    for (int i = 0; i < MOECTS_INPUTS_MAX; i++) {
        ptr[i] = i < in->nt ? in->t[i].host : NULL;
        ro[i] = in->t[i].g;
    }
    for (int run = 0; run < runs; run++) {
        moects_guarded *o = cpu_output(run, in->out_bytes, moects_guard_row_bytes(in, -1));
        if (!o) {
            fail(r, MOECTS_SKIP, MOECTS_HOST_OOM " (%zu bytes for the output)", in->out_bytes);
            return 1;
        }
        moects_guard_arm(o, CANARY[run]);
        if (o->data) moects_poison_fill(o->data, in->out_bytes, in->out_dtype, run);
        moects_op_args a;
        moects_inputs_bind(in, ptr, o->data, &a);
        moects_cpu_call c;
        if (moects_guard_cpu_call(k, moects_inputs_shape(in), &a, ro, (size_t)in->nt, &c)) {
            fail(r, MOECTS_SKIP, "the harness could not fork the kernel's process");
            return 1;
        }
        if (call_verdict(&c, in, o, r) || damaged(o, 1, in, r)) {
            /* in the kernel log, after what the kernel printed (as the runner does for a lost worker) */
            fprintf(stderr, "moects: %s on %s: %s: %s\n", r->kernel, r->case_id, moects_verdict_name(r->verdict),
                    r->reason);
            return 1;
        }
        t->got[run] = o->data;
    }
    return 0;
}

int moects__dev_inputs(const moects_inputs *in, moects_guarded dev[MOECTS_INPUTS_MAX], char *err, size_t len,
                       int *fatal)
{
    for (int i = 0; i < in->nt; i++) {
        if (!in->t[i].bytes) continue;
        if (moects_guard_alloc(&dev[i], in->t[i].name, in->t[i].bytes, moects_guard_row_bytes(in, i),
                               MOECTS_GUARD_DEVICE)) {
            *fatal = 0;
            snprintf(err, len, "out of device memory (%zu bytes for %s)", in->t[i].bytes, in->t[i].name);
            return -1;
        }
        if (moects_cuda_h2d(dev[i].data, in->t[i].host, in->t[i].bytes) != 0) {
            *fatal = 1;
            snprintf(err, len, "copying %s to the device failed", in->t[i].name);
            return -1;
        }
    }
    return 0;
}

/* CUDA kernel: the case's guarded device inputs, one guarded device output poisoned per run. */
static int cuda_twice(const moects_kernel *k, const moects_inputs *in, moects_guarded dev[MOECTS_INPUTS_MAX],
                      int perf, moects__twice *t, moects_result *r, int *exit_after)
{
    moects_guarded *o = &t->out[0];
    if (moects_guard_alloc(o, "out", in->out_bytes, moects_guard_row_bytes(in, -1), MOECTS_GUARD_DEVICE)) {
        fail(r, MOECTS_SKIP, "out of device memory (%zu bytes for the output)", in->out_bytes);
        return 1;
    }
    void *ptr[MOECTS_INPUTS_MAX];
    for (int i = 0; i < MOECTS_INPUTS_MAX; i++) ptr[i] = dev[i].data;
    moects_op_args a;
    moects_inputs_bind(in, ptr, o->data, &a);
    for (int run = 0; run < moects__runs_of(k); run++) {
        if (!(t->host_out[run] = malloc(in->out_bytes ? in->out_bytes : 1))) {
            fail(r, MOECTS_SKIP, MOECTS_HOST_OOM " (%zu bytes for the output)", in->out_bytes);
            return 1;
        }
        moects_poison_fill(t->host_out[run], in->out_bytes, in->out_dtype, run);
        int rc = 0;
        for (int i = 0; i < in->nt && rc == 0; i++) rc = moects_guard_arm(&dev[i], CANARY[run]);
        if (rc == 0) rc = moects_guard_arm(o, CANARY[run]);
        if (rc == 0 && o->data) rc = moects_cuda_h2d(o->data, t->host_out[run], in->out_bytes);
        char cerr[200] = "", serr[200] = "";
        if (rc == 0) {
            rc = k->run(moects_inputs_shape(in), &a, moects_cuda_stream());
            if (rc != 0) snprintf(cerr, sizeof cerr, "kernel error: run() returned %d", rc);
        }
        int src = moects_cuda_sync(moects_cuda_stream(), serr, sizeof serr);
        if (rc == 0 && src == 0 && o->data) src = moects_cuda_d2h(t->host_out[run], o->data, in->out_bytes);
        if (rc != 0 || src != 0) {
            fail(r, MOECTS_FAIL_CRASH, "%s%s%s", cerr, cerr[0] && serr[0] ? "; " : "",
                     serr[0] ? serr : (cerr[0] ? "" : "device error"));
            *exit_after = src != 0; /* CUDA errors can be sticky: a fresh worker takes the next task */
            return 1;
        }
        moects_guarded chk[MOECTS_INPUTS_MAX + 1];
        memcpy(chk, dev, sizeof chk[0] * MOECTS_INPUTS_MAX);
        chk[MOECTS_INPUTS_MAX] = *o;
        if (damaged(chk, MOECTS_INPUTS_MAX + 1, in, r)) return 1;
        t->got[run] = t->host_out[run];
    }
    if (perf) moects_perf_measure(k, in, &a, r);
    return 0;
}

int moects__kernel_twice(const moects_kernel *k, const moects_inputs *in, moects_guarded dev[MOECTS_INPUTS_MAX],
                         int perf, moects__twice *t, moects_result *r, int *exit_after)
{
    memset(t, 0, sizeof *t);
    *exit_after = 0;
    if (k->device == MOECTS_DEVICE_CPU) return cpu_twice(k, in, t, r);
    return cuda_twice(k, in, dev, perf, t, r, exit_after);
}

void moects__judge_twice(const moects_kernel *k, const moects_inputs *in, const void *ref, const moects__twice *t,
                         moects_result *r)
{
    moects_compare_result cr;
    const int runs = moects__runs_of(k);
    for (int run = 0; run < runs; run++) {
        moects_compare(in->out_dtype, t->got[run], ref, in->out_elems, &cr);
        r->mismatches = cr.mismatches;
        r->max_ulp = cr.max_ulp;
        r->calc_diff = cr.calc_diff;
        r->first_index = cr.first_index;
        snprintf(r->got, sizeof r->got, "%s", cr.got);
        snprintf(r->want, sizeof r->want, "%s", cr.want);
        if (k->recipe)
            r->verdict = cr.mismatches == 0 ? MOECTS_PASS_EXACT : MOECTS_FAIL_MISMATCH;
        else
            r->verdict = moects_within_tolerance(&cr, k->tol.max_calc_diff, k->tol.max_ulp, r->reason, sizeof r->reason)
                             ? MOECTS_PASS_TOLERANCE : MOECTS_FAIL_MISMATCH;
        if (r->verdict == MOECTS_FAIL_MISMATCH && run > 0)
            fail(r, MOECTS_FAIL_MISMATCH, "run %d (fresh poison) failed where run 1 passed", run + 1);
        if (!moects_verdict_is_pass(r->verdict)) return;
    }
    /* a kernel that declares a recipe is deterministic: both runs' bits must agree */
    if (!k->recipe || runs < 2) return;
    moects_compare(in->out_dtype, t->got[1], t->got[0], in->out_elems, &cr);
    if (cr.mismatches) {
        fail(r, MOECTS_FAIL_NONDETERMINISTIC, "run 2 differs from run 1 in %lld elements, first at %lld: %s vs %s",
                 (long long)cr.mismatches, (long long)cr.first_index, cr.got, cr.want);
    }
}
