/* plugin.c: out-of-tree kernels (`moects run --kernel-lib path.so`, DESIGN.md "GPU side"): a
 * shared library exporting MOECTS_PLUGIN_SYMBOL, which returns its kernel descriptors. */
#include <dlfcn.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "moects_ref.h"
#include "moects_runner.h"
#include "moects_op.h"

void moects__kernel_upgrade(const moects_kernel *k, moects_kernel *out)
{
    const size_t n = k->abi_version >= 4 ? sizeof *out
                   : k->abi_version == 3 ? offsetof(moects_kernel, flags)
                   : k->abi_version == 2 ? offsetof(moects_kernel, split_k)
                                         : offsetof(moects_kernel, acc);
    memset(out, 0, sizeof *out);
    memcpy(out, k, n);
}

static int check_kernel(const char *path, size_t i, const moects_kernel *k, char *err, size_t errlen)
{
    if (!k) {
        snprintf(err, errlen, "%s: kernel %zu: NULL descriptor", path, i);
        return -1;
    }
    const char *name = k->name && k->name[0] ? k->name : "?";
    if (k->abi_version < 1 || k->abi_version > MOECTS_KERNEL_ABI_VERSION) {
        snprintf(err, errlen, "%s: kernel %zu (%s): abi_version %u, this moects speaks 1 to %u", path, i, name,
                 k->abi_version, MOECTS_KERNEL_ABI_VERSION);
        return -1;
    }
    if (!k->name || !k->name[0]) {
        snprintf(err, errlen, "%s: kernel %zu: empty name", path, i);
        return -1;
    }
    if (!moects__op(k->op)) {
        snprintf(err, errlen, "%s: kernel %zu (%s): op: unknown (%d)", path, i, name, (int)k->op);
        return -1;
    }
    if (k->device != MOECTS_DEVICE_CPU && k->device != MOECTS_DEVICE_CUDA) {
        snprintf(err, errlen, "%s: kernel %zu (%s): device: unknown (%d)", path, i, name, (int)k->device);
        return -1;
    }
    if (!k->run) {
        snprintf(err, errlen, "%s: kernel %zu (%s): run: NULL", path, i, name);
        return -1;
    }
    moects_recipe rc;
    if (k->recipe && moects__recipe_parse(k->recipe, k->op, &rc) != 0) {
        snprintf(err, errlen, "%s: kernel %zu (%s): recipe: unknown \"%s\"", path, i, name, k->recipe);
        return -1;
    }
    const int bound = k->abi_version >= 2 && (k->acc.bits || k->acc.truncation);
    if (!k->recipe && bound &&
        (k->acc.bits < 2 || k->acc.bits > 64 || (k->acc.truncation != 0 && k->acc.truncation != 1))) {
        snprintf(err, errlen, "%s: kernel %zu (%s): acc: bits %u, truncation %d: bits 2..64 (the accumulator's "
                 "significand, 24 for FP32), truncation 0 (round to nearest) or 1", path, i, name, k->acc.bits,
                 k->acc.truncation);
        return -1;
    }
    const moects_split_k sk = k->abi_version >= 3 ? k->split_k : (moects_split_k){0, 0};
    if (sk.max_splits && (!bound || sk.max_splits < 2 || sk.max_splits > 256 || sk.dtype != MOECTS_BF16)) {
        snprintf(err, errlen, "%s: kernel %zu (%s): split_k: max_splits %u, dtype %d: a split-K reduction needs a "
                 "bound (acc.bits), max_splits 2..256 and dtype MOECTS_BF16", path, i, name, sk.max_splits, (int)sk.dtype);
        return -1;
    }
    const uint32_t flags = k->abi_version >= 4 ? k->flags : 0;
    if (flags & ~(MOECTS_KERNEL_BATCH_INVARIANT | MOECTS_KERNEL_INTERMEDIATES)) {
        snprintf(err, errlen, "%s: kernel %zu (%s): flags: 0x%x: the known bits are MOECTS_KERNEL_BATCH_INVARIANT "
                 "(0x%x) and MOECTS_KERNEL_INTERMEDIATES (0x%x)", path, i, name, flags, MOECTS_KERNEL_BATCH_INVARIANT,
                 MOECTS_KERNEL_INTERMEDIATES);
        return -1;
    }
    const int tol = k->tol.max_calc_diff > 0 || k->tol.max_ulp > 0;
    if (!k->recipe && !bound && (!tol || !(k->tol.max_calc_diff >= 0) || isinf(k->tol.max_calc_diff))) {
        snprintf(err, errlen, "%s: kernel %zu (%s): declare a recipe, a bound (acc.bits) or a tolerance "
                 "(tol.max_calc_diff finite >= 0, tol.max_ulp; not both 0)", path, i, name);
        return -1;
    }
    return 0;
}

int moects__plugin_load(const char *path, const moects_kernel ***v, size_t *n, char *err, size_t errlen)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        snprintf(err, errlen, "%s: no such file", path);
        return -1;
    }
    /* a bare file name means the file here, not a search of the library path */
    char local[4096];
    const char *open_path = path;
    if (!strchr(path, '/')) {
        snprintf(local, sizeof local, "./%s", path);
        open_path = local;
    }
    void *h = dlopen(open_path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(err, errlen, "%s: dlopen: %s", path, e ? e : "failed");
        return -1;
    }
    void *sym = dlsym(h, MOECTS_PLUGIN_SYMBOL);
    if (!sym) {
        snprintf(err, errlen, "%s: no symbol %s", path, MOECTS_PLUGIN_SYMBOL);
        dlclose(h);
        return -1;
    }
    moects_kernels_fn fn;
    memcpy(&fn, &sym, sizeof fn);
    size_t count = 0;
    const moects_kernel *const *ks = fn(&count);
    if (!ks && count) {
        snprintf(err, errlen, "%s: %s returned NULL", path, MOECTS_PLUGIN_SYMBOL);
        dlclose(h);
        return -1;
    }
    if (count == 0) {
        snprintf(err, errlen, "%s: %s returned no kernels", path, MOECTS_PLUGIN_SYMBOL);
        dlclose(h);
        return -1;
    }
    for (size_t i = 0; i < count; i++)
        if (check_kernel(path, i, ks[i], err, errlen) != 0) {
            dlclose(h);
            return -1;
        }
    const moects_kernel **nv = realloc(*v, (*n + count) * sizeof *nv);
    if (!nv) {
        snprintf(err, errlen, "%s: out of memory", path);
        return -1;
    }
    for (size_t i = 0; i < count; i++) {
        nv[*n + i] = ks[i];
        if (ks[i]->abi_version >= MOECTS_KERNEL_ABI_VERSION) continue;
        /* a version-1 descriptor ends at run, a version-2 one at last_error, a version-3 one at
         * split_k: a copy with the later fields zero */
        moects_kernel *k2 = malloc(sizeof *k2);
        if (!k2) {
            snprintf(err, errlen, "%s: out of memory", path);
            return -1;
        }
        moects__kernel_upgrade(ks[i], k2);
        nv[*n + i] = k2;
    }
    *v = nv;
    *n += count;
    return 0; /* the library stays loaded: its kernels are used until exit */
}
