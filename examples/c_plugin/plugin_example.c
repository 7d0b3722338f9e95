/* plugin_example.c: an out-of-tree kernel library for `moects run --kernel-lib` (DESIGN.md "GPU
 * side"): built as a shared object, it exports MOECTS_PLUGIN_SYMBOL and needs nothing from moects
 * but the ABI headers: include/moects/moects_kernel.h and the include/moects/moects_types.h it includes. Out of tree, against
 * an installed moects: `cc -shared -fPIC -ffp-contract=off $(pkg-config --cflags moects)
 * plugin_example.c -o plugin.so -lm` (or CMake: find_package(moects), the include directories of
 * moects::moects; tests/cli/install_test.sh does both); in this tree the build puts it at
 * build/lib/libmoects_plugin_example.so. It holds one honest CPU ep_gather (recipe ep_gather.fma_v1, its own code)
 * and two mutants that show the runner's isolation: one dies of SIGSEGV, one never returns (both
 * only on tokens counts T >= 2, so T = 1 cases pass). Build flags: -ffp-contract=off.
 * MOECTS_PLUGIN_EXAMPLE_BUG=block_min1024 in the environment turns plugin.ep_gather into the
 * kernel of a bad pull request (BLOCK_D = min(H, 1024), abort unless it divides H: vLLM PR 50458),
 * under the same name, so that `moects gate` can be shown catching it against a baseline;
 * MOECTS_PLUGIN_EXAMPLE_BUG=refuse_all makes every kernel refuse every shape (supports() = 0);
 * MOECTS_PLUGIN_EXAMPLE_BUG=oob_tile makes plugin.ep_gather write its last token's tail tile whole:
 * when H % 64 != 0, 64 - H % 64 elements past the end of out (a heap overrun without guards);
 * MOECTS_PLUGIN_EXAMPLE_BUG=second_run makes plugin.ep_gather leave the last output element unwritten
 * when out[0] does not hold the first run's poison (all ones) on entry: a bug that only the second
 * run, with its different poison, shows. For the tests: MOECTS_PLUGIN_EXAMPLE_CALLS=FILE appends one
 * byte to FILE at each call of any kernel here, and with MOECTS_PLUGIN_EXAMPLE_KILL_AT=N the call that
 * makes it N bytes kills its process group with SIGKILL (a run killed after its first results). */
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "moects_kernel.h"

static float bf16_to_f32(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint16_t f32_to_bf16(float f) /* round to nearest even, NaN stays NaN */
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static int supports(const void *shape, char *why, size_t why_len)
{
    (void)shape;
    const char *bug = getenv("MOECTS_PLUGIN_EXAMPLE_BUG");
    if (bug && strcmp(bug, "refuse_all") == 0) { /* a kernel that supports nothing */
        snprintf(why, why_len, "shape: refuses every shape (MOECTS_PLUGIN_EXAMPLE_BUG=refuse_all)");
        return 0;
    }
    return 1;
}

/* MOECTS_PLUGIN_EXAMPLE_CALLS / _KILL_AT (above): one byte more in the file, and the kill at the Nth. */
static void count_call(void)
{
    const char *file = getenv("MOECTS_PLUGIN_EXAMPLE_CALLS"), *at = getenv("MOECTS_PLUGIN_EXAMPLE_KILL_AT");
    int fd = file && *file ? open(file, O_WRONLY | O_CREAT | O_APPEND, 0666) : -1;
    struct stat st;
    if (fd < 0) return;
    if (write(fd, "c", 1) == 1 && at && fstat(fd, &st) == 0 && st.st_size == atol(at)) kill(0, SIGKILL);
    close(fd);
}

/* out[t][d] = rne(sum over valid slots, ascending, of fmaf(x[row][d], w, acc)). */
static int gather(const void *shape, const void *args, void *stream)
{
    const moects_ep_gather_shape *s = shape;
    const moects_ep_gather_args *a = args;
    (void)stream;
    const char *bug = getenv("MOECTS_PLUGIN_EXAMPLE_BUG");
    if (bug && strcmp(bug, "block_min1024") == 0 && s->H % (s->H < 1024 ? s->H : 1024) != 0) abort();
    int64_t skip = -1; /* second_run: the element left unwritten */
    if (bug && strcmp(bug, "second_run") == 0 && s->T > 0 && s->H > 0 && ((const uint8_t *)a->out)[0] != 0xFF)
        skip = s->T * s->H - 1;
    for (int64_t t = 0; t < s->T; t++)
        for (int64_t d = 0; d < s->H; d++) {
            float acc = 0.0f;
            for (int64_t j = 0; j < s->k; j++) {
                int64_t i = t * s->k + j;
                int64_t id = s->id_dtype == MOECTS_I64 ? ((const int64_t *)a->topk_ids)[i]
                                                       : ((const int32_t *)a->topk_ids)[i];
                if (id < 0) continue;
                if (s->has_expert_map && (id >= s->E_global || a->expert_map[id] < 0)) continue;
                int64_t row = a->input_index[i];
                if (row < 0 || row >= s->M_sum) return -1;
                acc = fmaf(bf16_to_f32(a->x[row * s->H + d]), a->topk_weights[i], acc);
            }
            if (t * s->H + d == skip) continue;
            if (s->out_dtype == MOECTS_F32) ((float *)a->out)[t * s->H + d] = acc;
            else ((uint16_t *)a->out)[t * s->H + d] = f32_to_bf16(acc);
        }
    if (bug && strcmp(bug, "oob_tile") == 0 && s->T > 0 && s->H % 64) /* the tail tile, written whole */
        for (int64_t d = s->H; d < (s->H + 63) / 64 * 64; d++) {
            if (s->out_dtype == MOECTS_F32) ((float *)a->out)[(s->T - 1) * s->H + d] = 0.0f;
            else ((uint16_t *)a->out)[(s->T - 1) * s->H + d] = 0;
        }
    return 0;
}

static int run(const void *shape, const void *args, void *stream)
{
    count_call();
    return gather(shape, args, stream);
}

static int run_segv(const void *shape, const void *args, void *stream)
{
    const moects_ep_gather_shape *s = shape;
    count_call();
    if (s->T >= 2) raise(SIGSEGV);
    return gather(shape, args, stream);
}

static int run_hang(const void *shape, const void *args, void *stream)
{
    const moects_ep_gather_shape *s = shape;
    count_call();
    if (s->T >= 2)
        for (;;) pause();
    return gather(shape, args, stream);
}

static const moects_kernel honest = {
    .abi_version = MOECTS_KERNEL_ABI_VERSION, .name = "plugin.ep_gather", .op = MOECTS_OP_EP_GATHER,
    .device = MOECTS_DEVICE_CPU, .recipe = "ep_gather.fma_v1", .supports = supports, .run = run};
static const moects_kernel segv = {
    .abi_version = MOECTS_KERNEL_ABI_VERSION, .name = "plugin.mutant.segv", .op = MOECTS_OP_EP_GATHER,
    .device = MOECTS_DEVICE_CPU, .recipe = "ep_gather.fma_v1", .bug = "dies of SIGSEGV when T >= 2",
    .supports = supports, .run = run_segv};
static const moects_kernel hang = {
    .abi_version = MOECTS_KERNEL_ABI_VERSION, .name = "plugin.mutant.hang", .op = MOECTS_OP_EP_GATHER,
    .device = MOECTS_DEVICE_CPU, .recipe = "ep_gather.fma_v1", .bug = "never returns when T >= 2",
    .supports = supports, .run = run_hang};

static const moects_kernel *const kernels[] = {&honest, &segv, &hang};

/* A descriptor of a future ABI, to test that moects refuses it (MOECTS_PLUGIN_EXAMPLE_BAD_ABI=1). */
static const moects_kernel future = {
    .abi_version = MOECTS_KERNEL_ABI_VERSION + 1, .name = "plugin.future", .op = MOECTS_OP_EP_GATHER,
    .device = MOECTS_DEVICE_CPU, .recipe = "ep_gather.fma_v1", .supports = supports, .run = run};
static const moects_kernel *const future_kernels[] = {&honest, &future};

__attribute__((visibility("default"))) const moects_kernel *const *moects_plugin_kernels(size_t *count)
{
    const char *bad = getenv("MOECTS_PLUGIN_EXAMPLE_BAD_ABI");
    if (bad && *bad == '1') {
        *count = 2;
        return future_kernels;
    }
    *count = sizeof kernels / sizeof kernels[0];
    return kernels;
}
