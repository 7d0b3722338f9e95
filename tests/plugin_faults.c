/* plugin_faults.c: kernels with resource faults for `moects run --kernel-lib` (tests/resource_faults.sh,
 * issue 15): each computes ep_gather as plugin_example.c's honest kernel does (included below, its
 * exported symbol renamed), and on cases with T >= 2 also
 *   plugin.fault.leak     mallocs 256 MiB, touches a page of it and loses the pointer (a leak);
 *   plugin.fault.exhaust  mallocs blocks (64 MiB, then smaller) until malloc fails, keeps them,
 *                         returns -1
 *                         (a mutant: the failure is its verdict, FAIL_CRASH);
 *   plugin.fault.mmap     maps 64 MiB regions until mmap fails and keeps them (out of malloc's
 *                         sight: the next allocation of the worker fails).
 * Run under `ulimit -v` so that "until it fails" stops at the address-space limit, not at the
 * machine's memory (nothing but a page per block is touched). */
#include <sys/mman.h>

#define moects_plugin_kernels moects__plugin_example_kernels
#include "plugin_example.c"
#undef moects_plugin_kernels

static int run_leak(const void *shape, const void *args, void *stream)
{
    const moects_ep_gather_shape *s = shape;
    if (s->T >= 2) {
        volatile char *p = malloc((size_t)256 << 20);
        if (p) p[0] = 1;
    }
    return run(shape, args, stream);
}

static int run_exhaust(const void *shape, const void *args, void *stream)
{
    const moects_ep_gather_shape *s = shape;
    if (s->T < 2) return run(shape, args, stream);
    for (size_t block = (size_t)64 << 20; block >= 4096; block /= 16) /* all of it, in ever smaller blocks */
        for (volatile char *p; (p = malloc(block));) p[0] = 1;
    return -1;
}

static int run_mmap(const void *shape, const void *args, void *stream)
{
    const moects_ep_gather_shape *s = shape;
    for (int i = 0; s->T >= 2 && i < (1 << 20); i++)
        if (mmap(NULL, (size_t)64 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) == MAP_FAILED)
            break;
    return run(shape, args, stream);
}

#define FAULT(var, nm, fn, bg)                                                                                   \
    static const moects_kernel var = {.abi_version = MOECTS_KERNEL_ABI_VERSION, .name = nm,                     \
                                      .op = MOECTS_OP_EP_GATHER, .device = MOECTS_DEVICE_CPU,                   \
                                      .recipe = "ep_gather.fma_v1", .bug = bg, .supports = supports, .run = fn}
FAULT(leak, "plugin.fault.leak", run_leak, NULL);
FAULT(exhaust, "plugin.fault.exhaust", run_exhaust, "takes host memory until malloc fails and returns -1 (T >= 2)");
FAULT(mmapper, "plugin.fault.mmap", run_mmap, NULL);

/* The faulty kernels first, so that a case's later tasks (plugin.ep_gather) run after them. */
static const moects_kernel *const fault_kernels[] = {&exhaust, &leak, &mmapper, &honest};

__attribute__((visibility("default"))) const moects_kernel *const *moects_plugin_kernels(size_t *count)
{
    *count = sizeof fault_kernels / sizeof fault_kernels[0];
    return fault_kernels;
}
