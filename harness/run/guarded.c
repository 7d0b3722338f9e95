/* guarded.c: a task's kernel phase under the memory contract (DESIGN.md "Harness", issue 13): every
 * buffer the kernel sees between guards (harness/run/guard.c), the output poisoned afresh before each
 * of two runs, CPU kernels in a child process per call. The runner (harness/run/runner.c) calls
 * moects__kernel_twice and judges the outputs. */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "moects_compare.h"
#include "moects_device.h"
#include "moects_guard.h"
#include "moects_op.h"
#include "moects_registry.h"
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

/* "run() returned RC", and the kernel's own text (ABI 2 last_error()) when it gives one (le: that
 * text, fetched in the process that ran the kernel). */
static void kernel_error(int rc, const char *le, char *buf, size_t len)
{
    snprintf(buf, len, "run() returned %d%s%s", rc, le && *le ? ": " : "", le && *le ? le : "");
}

static const char *last_error(const moects_kernel *k)
{
    return k->abi_version >= 2 && k->last_error ? k->last_error() : NULL;
}

/* After the case's last k->run() returned having kept host heap, address space or device memory
 * (bytes): name what it kept (in r->reason and the kernel log) and retire the worker. */
static void kept_memory(const moects_kernel *k, size_t host, size_t vm, size_t dev, moects__kernel_env *env,
                        moects_result *r)
{
    const char *what = host >= MOECTS_LEAK_BYTES ? "of host memory allocated"
                       : vm >= MOECTS_LEAK_VM_BYTES ? "of host address space mapped"
                       : dev >= MOECTS_LEAK_BYTES   ? "of device memory allocated" : NULL;
    if (!what) return;
    char note[160];
    snprintf(note, sizeof note, "run() kept %zu MiB %s; its worker was replaced",
             (host >= MOECTS_LEAK_BYTES ? host : vm >= MOECTS_LEAK_VM_BYTES ? vm : dev) >> 20, what);
    size_t l = strlen(r->reason);
    snprintf(r->reason + l, sizeof r->reason - l, "%s%s", l ? "; " : "", note);
    fprintf(stderr, "moects: %s on %s: %s\n", k->name, r->case_id, note);
    env->retire = 1;
}

/* What a run() kept (bytes): the last run's figures are judged once the case's runs end. */
static void measured(moects__twice *t, size_t host, size_t vm, size_t dev)
{
    t->kept_host = host;
    t->kept_vm = vm;
    t->kept_dev = dev;
    t->measured = 1;
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
    moects__guard_free(o);
    return moects__guard_alloc(o, "out", bytes, row, MOECTS_GUARD_SHARED) ? NULL : o;
}

int moects__runs_of(const moects_kernel *k) { return k->bug ? 1 : MOECTS_RUNS; }

void moects__twice_free(moects__twice *t)
{
    for (int i = 0; i < MOECTS_RUNS; i++) {
        moects__guard_free(&t->out[i]);
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
        int c = moects__guard_check(&g[i], why, sizeof why);
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
            if (!(tmp = malloc(gi->bytes)) || moects__cuda_d2h(tmp, gi->data, gi->bytes)) {
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
                       moects__guard_locate(all, MOECTS_INPUTS_MAX + 1, c->fault_addr, where, sizeof where);
        if (in_guard && c->fault_write != 0)
            fail(r, MOECTS_FAIL_OOB_WRITE, "%s: write, faulted at the write (guard page or read-only input)", where);
        else if (in_guard)
            fail(r, MOECTS_FAIL_CRASH, "%s: read outside the buffer (guard page)", where);
        else
            fail(r, MOECTS_FAIL_CRASH, MOECTS_KERNEL_KILLED " %d (SIG%s: %s) while the kernel ran", c->signo,
                 sigabbrev_np(c->signo) ? sigabbrev_np(c->signo) : "?", strsignal(c->signo));
        return 1;
    }
    if (!c->returned) {
        fail(r, MOECTS_FAIL_CRASH, "the kernel exited the process (status %d) in run()", c->exit_status);
        return 1;
    }
    if (c->rc != 0) { /* the kernel's own error return, told apart from a signal */
        r->verdict = MOECTS_FAIL_CRASH;
        kernel_error(c->rc, c->error, r->reason, sizeof r->reason);
        return 1;
    }
    return 0;
}

/* A CPU kernel of this tree (gpu/cpu/: the honest built-ins, their mutants and the pool, all tested
 * by this suite, their bugs declared) runs in the worker itself, between the same guards and poison,
 * its inputs read-only (moects__inputs_readonly, from the case's build on: an mprotect per call cost
 * milliseconds per task on cases with 200 MB inputs): an overrun or a write into an input faults and
 * costs its worker, and that task alone (FAIL_CRASH). Every other CPU kernel (--kernel-lib plugins,
 * Python kernels) gets a child process per call: a fork costs about 0.3 us per resident 4 KiB page
 * of the worker, which at every task more than doubled the smoke tier's time. So does a mutant on a
 * case with MUTANT_CHILD_BYTES of inputs or more: a crash then costs its call, not the worker that
 * holds the case's inputs and references (a fresh worker built them again for the next mutant:
 * 25 to 37 s on ep_gather/regression/addr64-combine/h3584/k16/t37500, 5.5 GB). */
#define MUTANT_CHILD_BYTES ((size_t)1 << 30)

static int trusted(const moects_kernel *k, const moects_inputs *in)
{
    size_t bytes = 0;
    for (int i = 0; i < in->nt; i++) bytes += in->t[i].bytes;
    if (k->bug && bytes >= MUTANT_CHILD_BYTES) return 0;
    size_t n, np;
    const moects_kernel *const *b = moects__builtin_kernels(&n), *const *pool = moects__pool_kernels(&np);
    for (size_t i = 0; i < n; i++)
        if (b[i] == k) return 1;
    for (size_t i = 0; i < np; i++)
        if (pool[i] == k) return 1;
    return 0;
}

void moects__inputs_readonly(const moects_inputs *in)
{
    for (int i = 0; i < in->nt; i++) moects__guard_readonly(&in->t[i].g);
}

/* k->run in this process, as moects__guard_cpu_call reports a child's call. */
static void call_here(const moects_kernel *k, const void *shape, const void *args, moects_cpu_call *c)
{
    memset(c, 0, sizeof *c);
    moects_mem_probe m0 = moects__mem_now(0);
    c->rc = moects__kernel_call(k, shape, args, NULL);
    moects_mem_probe m1 = moects__mem_now(0);
    c->kept_heap = m1.heap > m0.heap ? m1.heap - m0.heap : 0;
    c->kept_vm = m1.vm > m0.vm ? m1.vm - m0.vm : 0;
    const char *le = c->rc ? last_error(k) : NULL;
    if (le) snprintf(c->error, sizeof c->error, "%s", le);
    c->returned = 1;
}

/* CPU kernel: the inputs (guarded since they were built, read-only in the child), two guarded
 * shared outputs, one child per run. */
static int cpu_twice(const moects_kernel *k, const moects_inputs *in, int runs, moects__twice *t, moects_result *r)
{
    const int trust = trusted(k, in);
    void *ptr[MOECTS_INPUTS_MAX] = {0};
    moects_guarded ro[MOECTS_INPUTS_MAX];
    for (int i = 0; i < MOECTS_INPUTS_MAX; i++) {
        ptr[i] = i < in->nt ? in->t[i].host : NULL;
        ro[i] = in->t[i].g;
    }
    for (int run = 0; run < runs; run++) {
        moects_guarded *o = cpu_output(run, in->out_bytes, moects__guard_row_bytes(in, -1));
        if (!o) {
            fail(r, MOECTS_SKIP, MOECTS_HOST_OOM " (%zu bytes for the output)", in->out_bytes);
            return 1;
        }
        moects__guard_arm(o, CANARY[run]);
        if (o->data) moects__poison_fill(o->data, in->out_bytes, in->out_dtype, run);
        moects_op_args a;
        moects__inputs_bind(in, ptr, o->data, &a);
        moects__task_ptrs(ptr, o->data, NULL);
        moects_cpu_call c;
        if (trust) {
            call_here(k, moects__inputs_shape(in), &a, &c); /* inputs read-only since their build */
        }
        else if (moects__guard_cpu_call(k, moects__inputs_shape(in), &a, ro, (size_t)in->nt, &c)) {
            fail(r, MOECTS_SKIP, "the harness could not fork the kernel's process");
            return 1;
        }
        /* the parent names a crash or an overrun in the kernel log, after what the kernel printed */
        int bad = call_verdict(&c, in, o, r) || damaged(o, 1, in, r);
        if (c.returned) measured(t, c.kept_heap, c.kept_vm, 0);
        if (bad) return 1;
        t->got[run] = o->data;
    }
    return 0;
}

int moects__dev_inputs(const moects_inputs *in, moects_guarded dev[MOECTS_INPUTS_MAX], char *err, size_t len,
                       int *fatal)
{
    for (int i = 0; i < in->nt; i++) {
        if (!in->t[i].bytes) continue;
        if (moects__guard_alloc(&dev[i], in->t[i].name, in->t[i].bytes, moects__guard_row_bytes(in, i),
                               MOECTS_GUARD_DEVICE)) {
            *fatal = 0;
            snprintf(err, len, "out of device memory (%zu bytes for %s)", in->t[i].bytes, in->t[i].name);
            return -1;
        }
        if (moects__cuda_h2d(dev[i].data, in->t[i].host, in->t[i].bytes) != 0) {
            *fatal = 1;
            snprintf(err, len, "copying %s to the device failed", in->t[i].name);
            return -1;
        }
    }
    return 0;
}

/* CUDA kernel: the case's guarded device inputs, one guarded device output poisoned per run. */
static int cuda_twice(const moects_kernel *k, const moects_inputs *in, moects_guarded dev[MOECTS_INPUTS_MAX],
                      int runs, int perf, moects__kernel_env *env, moects__twice *t, moects_result *r, int *exit_after)
{
    moects_guarded *o = &t->out[0];
    if (moects__guard_alloc(o, "out", in->out_bytes, moects__guard_row_bytes(in, -1), MOECTS_GUARD_DEVICE)) {
        fail(r, MOECTS_SKIP, "out of device memory (%zu bytes for the output)", in->out_bytes);
        return 1;
    }
    void *ptr[MOECTS_INPUTS_MAX];
    for (int i = 0; i < MOECTS_INPUTS_MAX; i++) ptr[i] = dev[i].data;
    moects_op_args a;
    moects__inputs_bind(in, ptr, o->data, &a);
    moects__task_ptrs(ptr, o->data, moects__cuda_stream());
    for (int run = 0; run < runs; run++) {
        if (!(t->host_out[run] = malloc(in->out_bytes ? in->out_bytes : 1))) {
            fail(r, MOECTS_SKIP, MOECTS_HOST_OOM " (%zu bytes for the output)", in->out_bytes);
            return 1;
        }
        moects__poison_fill(t->host_out[run], in->out_bytes, in->out_dtype, run);
        int rc = 0;
        for (int i = 0; i < in->nt && rc == 0; i++) rc = moects__guard_arm(&dev[i], CANARY[run]);
        if (rc == 0) rc = moects__guard_arm(o, CANARY[run]);
        if (rc == 0 && o->data) rc = moects__cuda_h2d(o->data, t->host_out[run], in->out_bytes);
        char cerr[600] = "", serr[200] = "";
        if (rc == 0) {
            moects_mem_probe m0 = moects__mem_now(env->dev_alone);
            rc = moects__kernel_call(k, moects__inputs_shape(in), &a, moects__cuda_stream());
            if (rc != 0) kernel_error(rc, last_error(k), cerr, sizeof cerr);
            moects_mem_probe m1 = moects__mem_now(m0.has_dev);
            measured(t, m1.heap > m0.heap ? m1.heap - m0.heap : 0, m1.vm > m0.vm ? m1.vm - m0.vm : 0,
                     m0.has_dev && m1.has_dev && m0.dev_free > m1.dev_free ? m0.dev_free - m1.dev_free : 0);
        }
        int src = moects__cuda_sync(moects__cuda_stream(), serr, sizeof serr);
        if (rc == 0 && src == 0 && o->data) src = moects__cuda_d2h(t->host_out[run], o->data, in->out_bytes);
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
    if (perf) moects__perf_measure(k, in, &a, r);
    return 0;
}

int moects__kernel_twice(const moects_kernel *k, const moects_inputs *in, moects_guarded dev[MOECTS_INPUTS_MAX],
                         int perf, moects__kernel_env *env, moects__twice *t, moects_result *r, int *exit_after)
{
    memset(t, 0, sizeof *t);
    *exit_after = 0;
    const int runs = env->runs > 0 && env->runs < moects__runs_of(k) ? env->runs : moects__runs_of(k);
    int rc = k->device == MOECTS_DEVICE_CPU ? cpu_twice(k, in, runs, t, r)
                                            : cuda_twice(k, in, dev, runs, perf, env, t, r, exit_after);
    if (t->measured) kept_memory(k, t->kept_host, t->kept_vm, t->kept_dev, env, r);
    return rc;
}

/* ---- a run with the intermediates asked for (moects__kernel_stages) ---- */

/* The output g[0] and the stage buffers g[1..n] (device or shared), stage i poisoned in host[i] and
 * there. 0, or -1 (why). */
static int stage_bufs(const moects_kernel *k, const moects_inputs *in, const moects__stages *sg, void *const *host,
                      moects_guarded *g, char *why, size_t cap)
{
    const int cuda = k->device == MOECTS_DEVICE_CUDA, where = cuda ? MOECTS_GUARD_DEVICE : MOECTS_GUARD_SHARED;
    if (moects__guard_alloc(&g[0], "out", in->out_bytes, moects__guard_row_bytes(in, -1), where))
        return snprintf(why, cap, "no memory for the output"), -1;
    for (int i = 0; i < sg->n; i++) {
        const size_t b = moects__stage_bytes(sg, i), row = (size_t)sg->s[i].cols * (sg->s[i].f64 ? 8 : 4);
        memset(host[i], MOECTS__STAGE_POISON, b);
        if (moects__guard_alloc(&g[i + 1], sg->s[i].arg, b, row, where))
            return snprintf(why, cap, "no memory for %s (%zu bytes)", sg->s[i].arg, b), -1;
        if (g[i + 1].data && (cuda ? moects__cuda_h2d(g[i + 1].data, host[i], b) : (memcpy(g[i + 1].data, host[i], b), 0)))
            return snprintf(why, cap, "copying %s's poison to the device failed", sg->s[i].arg), -1;
    }
    for (int i = 0; i <= sg->n; i++)
        if (moects__guard_arm(&g[i], CANARY[0])) return snprintf(why, cap, "arming the guards failed"), -1;
    return 0;
}

/* k's call with args a: CPU in this process (trusted) or a child, CUDA on the task's stream and
 * synchronized. 0, or -1 (why; *exit_after after a device error). */
static int stage_call(const moects_kernel *k, const moects_inputs *in, const moects_op_args *a, const moects_guarded *out,
                      char *why, size_t cap, int *exit_after)
{
    const void *shape = moects__inputs_shape(in);
    moects_result r = {0};
    if (k->device == MOECTS_DEVICE_CUDA) {
        char serr[200] = "";
        const int rc = moects__kernel_call(k, shape, a, moects__cuda_stream());
        const int src = moects__cuda_sync(moects__cuda_stream(), serr, sizeof serr);
        *exit_after = src != 0;
        if (rc) kernel_error(rc, last_error(k), why, cap);
        else if (src) snprintf(why, cap, "%s", serr);
        return rc || src ? -1 : 0;
    }
    moects_guarded ro[MOECTS_INPUTS_MAX];
    for (int i = 0; i < MOECTS_INPUTS_MAX; i++) ro[i] = in->t[i].g;
    moects_cpu_call c;
    if (trusted(k, in)) call_here(k, shape, a, &c);
    else if (moects__guard_cpu_call(k, shape, a, ro, (size_t)in->nt, &c)) return snprintf(why, cap, "no process for the call"), -1;
    return call_verdict(&c, in, out, &r) ? (snprintf(why, cap, "%s", r.reason), -1) : 0;
}

int moects__kernel_stages(const moects_kernel *k, const moects_inputs *in, moects_guarded dev[MOECTS_INPUTS_MAX],
                          const moects__stages *sg, void *const *host, char *why, size_t cap, int *exit_after)
{
    moects_guarded g[MOECTS_STAGES_MAX + 1];
    memset(g, 0, sizeof g);
    *exit_after = 0;
    int rc = stage_bufs(k, in, sg, host, g, why, cap);
    void *ptr[MOECTS_INPUTS_MAX] = {0};
    for (int i = 0; i < in->nt; i++) ptr[i] = k->device == MOECTS_DEVICE_CUDA ? dev[i].data : in->t[i].host;
    moects_op_args a;
    moects__inputs_bind(in, ptr, g[0].data, &a);
    for (int i = 0; i < sg->n; i++) memcpy((char *)&a + sg->s[i].arg_off, &g[i + 1].data, sizeof(void *));
    moects__task_ptrs(ptr, g[0].data, k->device == MOECTS_DEVICE_CUDA ? moects__cuda_stream() : NULL);
    if (rc == 0) rc = stage_call(k, in, &a, &g[0], why, cap, exit_after);
    for (int i = 0; rc == 0 && i <= sg->n; i++) rc = moects__guard_check(&g[i], why, cap) ? -1 : 0;
    for (int i = 0; rc == 0 && i < sg->n; i++) {
        const size_t b = moects__stage_bytes(sg, i);
        if (k->device == MOECTS_DEVICE_CUDA) rc = g[i + 1].data && moects__cuda_d2h(host[i], g[i + 1].data, b) ? -1 : 0;
        else if (g[i + 1].data) memcpy(host[i], g[i + 1].data, b);
        if (rc) snprintf(why, cap, "copying %s back failed", sg->s[i].arg);
    }
    for (int i = 0; i <= sg->n; i++) moects__guard_free(&g[i]);
    return rc;
}
