/* ep_gather.c: "cpu.ep_gather", the CPU stand-in for the MoE combine, recipe ep_gather.fma_v1
 * (DESIGN.md "Numeric recipes"). Written apart from ref/ep_gather.c (same contract, own code).
 *
 * out[t][d] = bf16_rne(acc) (or acc for FP32 output), acc = 0, then for the valid slots j of
 * token t in ascending order acc = fmaf((float)x[input_index[t][j]][d], w[t][j], acc).
 * Valid slot: id >= 0, and with an expert map also id < E_global and expert_map[id] >= 0;
 * invalid slots read neither input_index nor the weight. Every shape is supported (any H, T = 0,
 * int32/int64 ids, bf16/fp32 output); all offsets are 64-bit. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ep_gather_internal.h"
#include "moects_kernel.h"

/* acc[d] = fmaf(x[d], w, acc[d]) for d < H. On x86-64 also built for AVX2 + FMA and picked at load
 * time (target_clones): fmaf is correctly rounded, so both give the same bits; the default build
 * calls libm's fmaf per element. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("arch=x86-64-v3", "default")))
#endif
static void fma_row(float *acc, const uint16_t *x, float w, int64_t H)
{
    for (int64_t d = 0; d < H; d++) acc[d] = fmaf(moects__epg_bf16_f32(x[d]), w, acc[d]);
}

/* Returns 0, or -1 for a bad shape, a valid slot whose input_index is outside [0, M_sum), or
 * out of memory. */
static int run(const void *shape, const void *args, void *stream)
{
    const moects_ep_gather_shape *s = shape;
    const moects_ep_gather_args *a = args;
    (void)stream;
    if (!moects__epg_shape_ok(s)) return -1;
    if (s->T == 0 || s->H == 0) return 0;
    const int64_t H = s->H, k = s->k;
    size_t nk = (size_t)(k > 0 ? k : 1);
    const uint16_t **src = malloc(nk * sizeof *src);
    float *wt = malloc(nk * sizeof *wt);
    float *acc = malloc((size_t)H * sizeof *acc);
    int rc = (src && wt && acc) ? 0 : -1;
    for (int64_t t = 0; t < s->T && rc == 0; t++) {
        int64_t nvalid = 0;
        for (int64_t j = 0; j < k; j++) {
            int64_t slot = t * k + j;
            if (!moects__epg_slot_valid(s, a, slot)) continue;
            int64_t row = a->input_index[slot];
            if (row < 0 || row >= s->M_sum) {
                rc = -1;
                break;
            }
            src[nvalid] = a->x + row * H;
            wt[nvalid++] = a->topk_weights[slot];
        }
        if (rc) break;
        for (int64_t d = 0; d < H; d++) acc[d] = 0.0f;
        for (int64_t i = 0; i < nvalid; i++) fma_row(acc, src[i], wt[i], H);
        moects__epg_store_row(s, a, t, acc);
    }
    free(src);
    free(wt);
    free(acc);
    return rc;
}

const moects_kernel moects_cpu_ep_gather = {
    .abi_version = MOECTS_KERNEL_ABI_VERSION,
    .name = "cpu.ep_gather",
    .op = MOECTS_OP_EP_GATHER,
    .device = MOECTS_DEVICE_CPU,
    .recipe = "ep_gather.fma_v1",
    .bug = NULL,
    .supports = moects__epg_supports_all,
    .run = run,
};
