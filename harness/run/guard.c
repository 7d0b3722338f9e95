/* guard.c: poison, memory probes and the per-call child process of CPU kernels (moects_guard.h,
 * DESIGN.md "Harness": memory is part of the contract; issue 13). The guarded buffers themselves
 * are harness/model/buffer.c's. */
#include "moects_guard.h"

#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

#include "moects_device.h"
#include "moects_op.h"

void moects__poison_fill(void *p, size_t bytes, moects_dtype dt, int run)
{
    const uint32_t v = moects__poison_value(dt, run);
    if (dt == MOECTS_F32)
        for (size_t i = 0; i < bytes / 4; i++) ((uint32_t *)p)[i] = v;
    else
        for (size_t i = 0; i < bytes / 2; i++) ((uint16_t *)p)[i] = (uint16_t)v;
}

moects_mem_probe moects__mem_now(int dev)
{
    struct mallinfo2 mi = mallinfo2();
    moects_mem_probe m = {mi.uordblks + mi.hblkhd, 0, 0, 0};
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long pages = 0;
    if (f && fscanf(f, "%lu", &pages) == 1) m.vm = pages * (size_t)sysconf(_SC_PAGESIZE);
    if (f) fclose(f);
    m.has_dev = dev && moects__cuda_mem_free(&m.dev_free) == 0;
    return m;
}

/* ---- one CPU kernel call in a child process ---- */

static moects_cpu_call *child_result; /* shared page of the call in flight (child side) */

static void on_fault(int sig, siginfo_t *si, void *uc)
{
    child_result->signo = sig;
    child_result->fault_addr = si->si_addr;
    child_result->fault_write = -1;
#if defined(__x86_64__) && defined(REG_ERR)
    child_result->fault_write = (((ucontext_t *)uc)->uc_mcontext.gregs[REG_ERR] & 2) != 0;
#else
    (void)uc;
#endif
    signal(sig, SIG_DFL);
    raise(sig);
}

static void child(const moects_kernel *k, const void *shape, const void *args, const moects_guarded *ro, size_t nro,
                  moects_cpu_call *res, pid_t parent)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    for (size_t i = 0; i < nro; i++) moects__guard_readonly(&ro[i]);
    static char altstack[64 * 1024];
    stack_t ss = {.ss_sp = altstack, .ss_size = sizeof altstack};
    sigaltstack(&ss, NULL);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, NULL);
    sigaction(SIGBUS, &sa, NULL);
    child_result = res;
    moects_mem_probe m0 = moects__mem_now(0);
    int rc = moects__kernel_call(k, shape, args, NULL);
    moects_mem_probe m1 = moects__mem_now(0);
    res->kept_heap = m1.heap > m0.heap ? m1.heap - m0.heap : 0;
    res->kept_vm = m1.vm > m0.vm ? m1.vm - m0.vm : 0;
    res->rc = rc;
    if (rc != 0 && k->abi_version >= 2 && k->last_error) {
        const char *e = k->last_error();
        if (e) snprintf(res->error, sizeof res->error, "%s", e);
    }
    res->returned = 1;
    fflush(NULL);
    _exit(0);
}

int moects__guard_cpu_call(const moects_kernel *k, const void *shape, const void *args, const moects_guarded *ro,
                          size_t nro, moects_cpu_call *out)
{
    moects_cpu_call *res = mmap(NULL, sizeof *res, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (res == MAP_FAILED) return -1;
    memset(res, 0, sizeof *res);
    fflush(NULL);
    pid_t parent = getpid(), pid = fork();
    if (pid < 0) {
        munmap(res, sizeof *res);
        return -1;
    }
    if (pid == 0) child(k, shape, args, ro, nro, res, parent);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    *out = *res;
    out->error[sizeof out->error - 1] = '\0';
    if (WIFSIGNALED(st)) {
        out->signo = WTERMSIG(st);
        out->returned = 0;
    } else {
        out->exit_status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    }
    munmap(res, sizeof *res);
    return 0;
}
