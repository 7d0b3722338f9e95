#!/bin/sh
# plugins.sh: end-to-end CLI checks: kernels from --kernel-lib libraries (ABI versions, refusals).
# Usage: plugins.sh NAME MOECTS_BIN PLUGIN_SO SOURCE_ROOT WORK_DIR (NAME: plugin)
. "$(dirname "$0")/lib.sh"

case $name in
plugin)
    pick 'ep_gather/regression/block-divides-h/*' 8 > ids
    "$moects" list --kernels --kernel-lib "$plugin" | grep -q "^plugin.ep_gather	ep_gather	cpu	ep_gather.fma_v1" ||
        fail "plugin kernel not listed"
    # shellcheck disable=SC2046
    "$moects" run --out out --kernel-lib "$plugin" --kernel plugin.ep_gather $(cat ids) > run.tap ||
        { cat run.tap; fail "honest plugin kernel did not pass"; }
    grep -q "^ok 1 - plugin.ep_gather: 8 of 8 cases pass" run.tap || fail "plugin top-level point"
    grep -q -- "--kernel-lib '" out/run.tap || true
    # without --kernel, --kernel-lib selects its own kernels alone (list --kernels selects as run does):
    # the example library's three, no built-in one
    "$moects" list --kernels --kernel-lib "$plugin" | cut -f1 > ks
    printf 'plugin.ep_gather\nplugin.mutant.segv\nplugin.mutant.hang\n' > want
    cmp -s ks want || { diff want ks; fail "--kernel-lib without --kernel: not its kernels alone"; }
    # --kernel picks from all loaded: a built-in kernel beside the library's
    "$moects" run --out both --kernel-lib "$plugin" --kernel plugin.ep_gather,cpu.ep_gather "$(head -n 1 ids)" > both.tap ||
        { cat both.tap; fail "--kernel plugin.ep_gather,cpu.ep_gather"; }
    [ "$(grep -c '^ok [12] - ' both.tap)" = 2 ] && grep -q '^ok 1 - cpu.ep_gather: ' both.tap &&
        grep -q '^ok 2 - plugin.ep_gather: ' both.tap || { cat both.tap; fail "--kernel: both kernels"; }
    # errors name the file
    "$moects" run --kernel-lib ./nope.so > /dev/null 2> err.txt
    [ $? -eq 2 ] || fail "missing library: exit status not 2"
    grep -q "nope.so" err.txt || fail "missing library: file not named"
    MOECTS_PLUGIN_EXAMPLE_BAD_ABI=1 "$moects" run --kernel-lib "$plugin" > /dev/null 2> err.txt
    [ $? -eq 2 ] || fail "wrong ABI: exit status not 2"
    grep -q "abi_version" err.txt && grep -q "$(basename "$plugin")" err.txt || { cat err.txt; fail "wrong ABI message"; }
    [ "$(wc -l < err.txt)" -eq 1 ] || fail "more than one error line"
    # a descriptor that declares no recipe, bound or tolerance, or a bound of 99 bits, is refused at load
    for decl in '.recipe = 0' '.acc = {99, 0}' '.acc = {24, 1}, .split_k = {300, MOECTS_BF16}'; do
        cat > undeclared.c <<EOF
#include "moects_kernel.h"
static int ok(const void *s, char *w, size_t n) { (void)s, (void)w, (void)n; return 1; }
static int run(const void *s, const void *a, void *st) { (void)s, (void)a, (void)st; return 0; }
static const moects_kernel k = {.abi_version = MOECTS_KERNEL_ABI_VERSION, .name = "u.k", .op = MOECTS_OP_MOE_GEMM,
    .device = MOECTS_DEVICE_CPU, .supports = ok, .run = run, $decl};
static const moects_kernel *const v[] = {&k};
const moects_kernel *const *moects_plugin_kernels(size_t *n) { *n = 1; return v; }
EOF
        ${CC:-cc} -shared -fPIC -I"$root/include/moects" -o undeclared.so undeclared.c || fail "cannot build undeclared.so"
        "$moects" run --kernel-lib ./undeclared.so --out u > /dev/null 2> err.txt
        [ $? -eq 2 ] && [ "$(wc -l < err.txt)" -eq 1 ] && [ ! -e u ] || { cat err.txt; fail "$decl: not refused at load"; }
        case $decl in
        .recipe*) grep -q "undeclared.so: kernel 0 (u.k): declare a recipe, a bound (acc.bits) or a tolerance" err.txt ;;
        *split_k*) grep -q "undeclared.so: kernel 0 (u.k): split_k: max_splits 300, dtype 1: a split-K reduction needs" err.txt ;;
        *) grep -q "undeclared.so: kernel 0 (u.k): acc: bits 99, truncation 0: bits 2..64" err.txt ;;
        esac || { cat err.txt; fail "$decl: message"; }
    done
    # a kernel built against ABI 2 (no split_k: its descriptor ends at last_error) still loads and passes
    cat > abi2.c <<EOF
#include <dlfcn.h>
#include "moects_kernel.h"
typedef struct { /* moects_kernel as ABI version 2 laid it out */
    uint32_t abi_version; const char *name; moects_op op; moects_device device; const char *recipe;
    moects_tolerance tol; const char *bug; int (*supports)(const void *, char *, size_t);
    int (*run)(const void *, const void *, void *); moects_accumulation acc; const char *(*last_error)(void);
} kernel_v2;
static const moects_kernel *real;
static int ok(const void *s, char *w, size_t n) { return real->supports(s, w, n); }
static int run(const void *s, const void *a, void *st) { return real->run(s, a, st); }
static const kernel_v2 k = {2, "v2.ep_gather", MOECTS_OP_EP_GATHER, MOECTS_DEVICE_CPU, "ep_gather.fma_v1", {0, 0}, 0,
                            ok, run, {0, 0}, 0};
static const kernel_v2 *const v[] = {&k};
const void *const *moects_plugin_kernels(size_t *n)
{
    void *h = dlopen("$plugin", RTLD_NOW);
    size_t m;
    real = h ? ((moects_kernels_fn)dlsym(h, MOECTS_PLUGIN_SYMBOL))(&m)[0] : 0;
    *n = real ? 1 : 0;
    return (const void *const *)v;
}
EOF
    ${CC:-cc} -shared -fPIC -I"$root/include/moects" -o abi2.so abi2.c -ldl || fail "cannot build abi2.so"
    # shellcheck disable=SC2046
    "$moects" run --out v2 --kernel-lib ./abi2.so --kernel v2.ep_gather $(cat ids) > v2.tap ||
        { cat v2.tap; fail "an ABI-2 kernel did not load or pass"; }
    grep -q "^ok 1 - v2.ep_gather: 8 of 8 cases pass" v2.tap || fail "ABI-2 kernel's top-level point"
    # a kernel that refuses every case it is given fails (UNSUPPORTED is a gap, never a pass)
    # shellcheck disable=SC2046
    MOECTS_PLUGIN_EXAMPLE_BUG=refuse_all "$moects" run --out out --kernel-lib "$plugin" --kernel plugin.ep_gather \
        $(cat ids) > refused.tap
    [ $? -eq 1 ] || fail "a kernel refusing every case: exit status not 1"
    grep -q "^not ok 1 - plugin.ep_gather: refused all 8 cases it was given (UNSUPPORTED): shape: refuses every shape" \
        refused.tap || { cat refused.tap; fail "refused kernel's point"; }
    MOECTS_PLUGIN_EXAMPLE_BUG=refuse_all prove --exec "$moects run --out $work/out --kernel-lib $plugin --kernel \
        plugin.ep_gather --cases" ids > prove.log 2>&1 && { cat prove.log; fail "prove passed a kernel that refused all"; }
    ;;
*)
    fail "unknown test"
    ;;
esac
echo "ok [$name]"
