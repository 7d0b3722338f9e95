/* guard.c: guarded buffers, poison and the per-call child process of CPU kernels (moects_guard.h,
 * DESIGN.md "Harness": memory is part of the contract; issue 13). */
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

static size_t round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

int moects_guard_alloc(moects_guarded *g, const char *name, size_t bytes, size_t row, int where)
{
    memset(g, 0, sizeof *g);
    g->name = name;
    int device = g->device = where == MOECTS_GUARD_DEVICE;
    g->bytes = bytes;
    if (!bytes) return 0;
    size_t min = row > 4096 ? row : 4096;
    if (device) {
        g->lo = g->hi = round_up(min, 256);
        g->map_len = g->lo + round_up(bytes, 256) + g->hi;
        g->hi = g->map_len - g->lo - bytes;
        if (!(g->base = moects_cuda_malloc(g->map_len))) return -1;
        g->data = g->base + g->lo;
        return 0;
    }
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    g->guard = round_up(min, page);
    size_t body = round_up(round_up(bytes, 64) + min, page); /* canary lo + data + tail, page aligned */
    g->map_len = g->guard + body + g->guard;
    int share = where == MOECTS_GUARD_SHARED ? MAP_SHARED : MAP_PRIVATE;
    void *m = mmap(NULL, g->map_len, PROT_READ | PROT_WRITE, share | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return -1;
    g->base = m;
    if (mprotect(g->base, g->guard, PROT_NONE) || mprotect(g->base + g->guard + body, g->guard, PROT_NONE)) {
        munmap(m, g->map_len);
        g->base = NULL;
        return -1;
    }
    g->hi = round_up(bytes, 64) - bytes;
    g->data = g->base + g->guard + body - g->hi - bytes;
    g->lo = (size_t)(g->data - (g->base + g->guard));
    return 0;
}

int moects_guard_readonly(const moects_guarded *g)
{
    if (!g->data || g->device) return 0;
    return mprotect(g->base + g->guard, g->map_len - 2 * g->guard, PROT_READ);
}

void moects_guard_free(moects_guarded *g)
{
    if (g->base) {
        if (g->device) moects_cuda_free(g->base);
        else munmap(g->base, g->map_len);
    }
    g->base = g->data = NULL;
}

int moects_guard_arm(moects_guarded *g, unsigned char c)
{
    g->canary = c;
    if (!g->data) return 0;
    if (g->device)
        return moects_cuda_memset(g->base, c, g->lo) || moects_cuda_memset(g->data + g->bytes, c, g->hi) ? -1 : 0;
    memset(g->data - g->lo, c, g->lo);
    memset(g->data + g->bytes, c, g->hi);
    return 0;
}

/* First byte of p[0..n) that is not c, or n. */
static size_t first_not(const unsigned char *p, size_t n, unsigned char c)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != c) return i;
    return n;
}

/* Last byte of p[0..n) that is not c, or n when none. */
static size_t last_not(const unsigned char *p, size_t n, unsigned char c)
{
    for (size_t i = n; i-- > 0;)
        if (p[i] != c) return i;
    return n;
}

int moects_guard_check(const moects_guarded *g, char *why, size_t len)
{
    if (!g->data) return 0;
    const unsigned char *lo = g->data - g->lo, *hi = g->data + g->bytes;
    unsigned char *tmp = NULL;
    if (g->device) {
        if (!(tmp = malloc(g->lo + g->hi + 1))) {
            snprintf(why, len, "%s: out of host memory reading the canaries back", g->name);
            return -1;
        }
        if (moects_cuda_d2h(tmp, g->base, g->lo) || moects_cuda_d2h(tmp + g->lo, g->data + g->bytes, g->hi)) {
            snprintf(why, len, "%s: reading the canaries back failed", g->name);
            free(tmp);
            return -1;
        }
        lo = tmp;
        hi = tmp + g->lo;
    }
    int bad = 1;
    size_t i = last_not(lo, g->lo, g->canary);
    if (i < g->lo) {
        /* the damaged byte nearest to the data: the likeliest the first one written */
        snprintf(why, len, "%s: write before the start (byte offset -%zu)", g->name, g->lo - i);
    } else if ((i = first_not(hi, g->hi, g->canary)) < g->hi) {
        snprintf(why, len, "%s: write after the end (byte offset +%zu)", g->name, i);
    } else {
        bad = 0;
    }
    free(tmp);
    return bad;
}

int moects_guard_locate(const moects_guarded *g, size_t n, const void *addr, char *why, size_t len)
{
    const unsigned char *a = addr;
    for (size_t i = 0; i < n; i++) {
        if (!g[i].data || g[i].device) continue;
        const unsigned char *start = g[i].data, *end = g[i].data + g[i].bytes;
        if (a >= g[i].base && a < start) {
            snprintf(why, len, "%s: before the start (byte offset -%zu)", g[i].name, (size_t)(start - a));
            return 1;
        }
        if (a >= start && a < end) {
            snprintf(why, len, "%s: inside, at byte offset %zu", g[i].name, (size_t)(a - start));
            return 1;
        }
        if (a >= end && a < g[i].base + g[i].map_len) {
            snprintf(why, len, "%s: after the end (byte offset +%zu)", g[i].name, (size_t)(a - end));
            return 1;
        }
    }
    return 0;
}

size_t moects_guard_row_bytes(const moects_inputs *in, int i)
{
    if (in->op == MOECTS_OP_FP4_GEMM) {
        const moects_fp4_gemm_shape *s = &in->fg;
        int64_t nkb = (s->K + moects_fp4_block(s->format) - 1) / moects_fp4_block(s->format);
        if (i < 0) return (size_t)s->N * (s->out_dtype == MOECTS_F32 ? 4 : 2);
        if (i == MOECTS_FG_A || i == MOECTS_FG_B) return (size_t)(s->K + 1) / 2;
        return s->scale_layout == MOECTS_SCALES_LINEAR ? (size_t)nkb : 512;
    }
    if (in->op == MOECTS_OP_MOE_GEMM) { /* a row of A (BF16 at most 2 bytes an element), of B, of a scale */
        const moects_moe_gemm_shape *s = &in->mg;
        if (i < 0) return (size_t)s->N * (s->out_dtype == MOECTS_F32 ? 4 : 2);
        if (i == MOECTS_MG_A) return (size_t)s->K * 2;
        if (i == MOECTS_MG_B) return (size_t)(s->K + 1) / 2;
        return i == MOECTS_MG_SA || i == MOECTS_MG_SB ? 512 : 4;
    }
    const moects_ep_gather_shape *s = &in->eg;
    if (i < 0) return (size_t)s->H * (s->out_dtype == MOECTS_F32 ? 4 : 2);
    if (i == MOECTS_EG_X) return (size_t)s->H * 2;
    if (i == MOECTS_EG_IDS) return (size_t)s->k * (s->id_dtype == MOECTS_I64 ? 8 : 4);
    if (i == MOECTS_EG_MAP) return 4;
    return (size_t)s->k * 4;
}

void moects_poison_fill(void *p, size_t bytes, moects_dtype dt, int run)
{
    const uint32_t v = moects_poison_value(dt, run);
    if (dt == MOECTS_F32)
        for (size_t i = 0; i < bytes / 4; i++) ((uint32_t *)p)[i] = v;
    else
        for (size_t i = 0; i < bytes / 2; i++) ((uint16_t *)p)[i] = (uint16_t)v;
}

moects_mem_probe moects_mem_now(int dev)
{
    struct mallinfo2 mi = mallinfo2();
    moects_mem_probe m = {mi.uordblks + mi.hblkhd, 0, 0, 0};
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long pages = 0;
    if (f && fscanf(f, "%lu", &pages) == 1) m.vm = pages * (size_t)sysconf(_SC_PAGESIZE);
    if (f) fclose(f);
    m.has_dev = dev && moects_cuda_mem_free(&m.dev_free) == 0;
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
    for (size_t i = 0; i < nro; i++) moects_guard_readonly(&ro[i]);
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
    moects_mem_probe m0 = moects_mem_now(0);
    int rc = k->run(shape, args, NULL);
    moects_mem_probe m1 = moects_mem_now(0);
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

int moects_guard_cpu_call(const moects_kernel *k, const void *shape, const void *args, const moects_guarded *ro,
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
