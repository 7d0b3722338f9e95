/* buffer.c: guarded buffers (moects_guard.h; DESIGN.md "Harness": memory is part of the contract,
 * issue 13): every input and output a kernel gets lies between guard pages or canaries, so a stray
 * access faults at the access or is found after the call. The memory every op's tensors live in. */
#include "moects_guard.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "moects_device.h"

static size_t round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

int moects__guard_alloc(moects_guarded *g, const char *name, size_t bytes, size_t row, int where)
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
        if (!(g->base = moects__cuda_malloc(g->map_len))) return -1;
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

int moects__guard_readonly(const moects_guarded *g)
{
    if (!g->data || g->device) return 0;
    return mprotect(g->base + g->guard, g->map_len - 2 * g->guard, PROT_READ);
}

void moects__guard_free(moects_guarded *g)
{
    if (g->base) {
        if (g->device) moects__cuda_free(g->base);
        else munmap(g->base, g->map_len);
    }
    g->base = g->data = NULL;
}

int moects__guard_arm(moects_guarded *g, unsigned char c)
{
    g->canary = c;
    if (!g->data) return 0;
    if (g->device)
        return moects__cuda_memset(g->base, c, g->lo) || moects__cuda_memset(g->data + g->bytes, c, g->hi) ? -1 : 0;
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

int moects__guard_check(const moects_guarded *g, char *why, size_t len)
{
    if (!g->data) return 0;
    const unsigned char *lo = g->data - g->lo, *hi = g->data + g->bytes;
    unsigned char *tmp = NULL;
    if (g->device) {
        if (!(tmp = malloc(g->lo + g->hi + 1))) {
            snprintf(why, len, "%s: out of host memory reading the canaries back", g->name);
            return -1;
        }
        if (moects__cuda_d2h(tmp, g->base, g->lo) || moects__cuda_d2h(tmp + g->lo, g->data + g->bytes, g->hi)) {
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

int moects__guard_locate(const moects_guarded *g, size_t n, const void *addr, char *why, size_t len)
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

/* The XXH64 (seed 0) of len bytes at p, equal to moects__xxh64(p, len), without faulting in the pages
 * of p's mapping that were never touched: mincore() says which are not resident, and those read as
 * zeros (anonymous memory), so a static zero page stands in for them. The inputs of a fused_moe case
 * allocate every expert's weights but write only the routed experts' (harness/ops/fused_inputs.c);
 * hashing the rest through the mapping would allocate and clear them (measured: a third of a smoke
 * case's time). Falls back to reading every byte where mincore() fails. */
uint64_t moects__guard_xxh64(const void *p, size_t len)
{
    static const unsigned char zeros[1 << 16];
    static const char empty[1];
    const size_t page = (size_t)sysconf(_SC_PAGESIZE), chunk = 256 * page;
    if (!len || page > sizeof zeros) return XXH64(len ? p : empty, len, 0);
    XXH64_state_t st;
    XXH64_reset(&st, 0);
    const unsigned char *b = p, *end = b + len;
    unsigned char vec[256];
    while (b < end) {
        const unsigned char *pg = (const unsigned char *)((uintptr_t)b / page * page);
        size_t span = (size_t)(end - pg) < chunk ? (size_t)(end - pg) : chunk, npg = (span + page - 1) / page;
        int known = mincore((void *)pg, span, vec) == 0;
        for (size_t i = 0; i < npg && b < end; i++) {
            const unsigned char *next = pg + (i + 1) * page < end ? pg + (i + 1) * page : end;
            XXH64_update(&st, known && !(vec[i] & 1) ? zeros : b, (size_t)(next - b));
            b = next;
        }
    }
    return XXH64_digest(&st);
}
