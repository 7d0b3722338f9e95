/* test_gpu_gentwin.c: the input generator's twin on the CUDA device (gpu/cuda/gen_twin.cu) gives the
 * host twin's bytes (gpu/gen_twin.c, itself checked against harness/ops/'s generator by
 * test_harness_gentwin) for every tensor kind under every data mode and both FP4 formats, over
 * streams long enough for many blocks of the grid (issue 31, item 2). Skipped, with the reason, where
 * no CUDA device is usable (CTest reports it as skipped: tests/CMakeLists.txt). */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpuref/gen_elem.h"
#include "moects_device.h"
#include "moects_gen.h"

#define N ((uint64_t)3 << 20) /* elements a stream: 12288 blocks of 256 */

Test(gpu_gentwin, device_bytes_are_the_hosts, .timeout = 300)
{
    char why[256] = "";
    if (moects__cuda_device_count(why, sizeof why) <= 0 || moects__cuda_set_device(0, why, sizeof why) != 0)
    {
        /* on stderr too: CTest's skip rule reads it whatever Criterion's verbosity */
        fprintf(stderr, "MOECTS_GPU_SKIP: no CUDA device (%s)\n", why[0] ? why : "none visible");
        cr_skip_test("MOECTS_GPU_SKIP: no CUDA device (%s)", why[0] ? why : "none visible");
    }
    unsigned char *host = malloc(N * 8), *back = malloc(N * 8);
    void *dev = moects__cuda_malloc(N * 8);
    cr_assert(host && back && dev, "out of memory");
    size_t streams = 0;
    for (int kind = 0; kind < GE_NKINDS; kind++)
        for (int d = GE_DATA_EXACT; d <= GE_DATA_NEGZERO; d++)
            for (int fmt = GE_MXFP4; fmt <= GE_NVFP4; fmt++) {
                const moects_gen_stream s = {kind, d, fmt, 7 + kind, ge_key(1, "gentwin/device", "t") + (uint64_t)(kind * 8 + d * 2 + fmt), N};
                const size_t bytes = N * moects__gen_elem_bytes(kind);
                cr_assert_eq(moects__gen_fill_host(&s, host), 0);
                cr_assert_eq(moects__gen_fill_cuda(&s, dev, why, sizeof why), 0, "%s", why);
                cr_assert_eq(moects__cuda_d2h(back, dev, bytes), 0, "copy back");
                for (size_t i = 0; i < bytes; i++)
                    cr_assert_eq(back[i], host[i], "kind %d data %d format %d: byte %zu: device 0x%02x, host 0x%02x", kind,
                                 d, fmt, i, back[i], host[i]);
                streams++;
            }
    cr_log_info("generator twin on the device: %zu streams of %llu elements identical to the host's", streams,
                (unsigned long long)N);
    moects__cuda_free(dev);
    free(host), free(back);
}
