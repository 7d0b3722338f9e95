/* ep_gather_saxpy.c: "cpu.ep_gather.saxpy": the MoE combine built on OpenBLAS cblas_saxpy, one
 * call per valid slot (ascending j) into an FP32 row accumulator, then bf16_rne (or FP32 out).
 * Same slot-validity rules as DESIGN.md "ep_gather". BLAS may or may not fuse y += a*x (it
 * depends on the CPU kernel OpenBLAS picks at run time), so the kernel declares no exact recipe:
 * it is measured against ep_gather.exact_v1 with a tolerance.
 *
 * Bound. With k valid slots, FP32 accumulation, fused or not, errs by at most
 * gamma_2k * sum_j |x_j w_j| (Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed.,
 * sec. 3.1; 2k roundings, gamma_n = n u / (1 - n u), u = 2^-24): 2^-18 relative to
 * sum |x w| for k <= 32. Where a column does not cancel (|sum| >= 2^-8 sum |x w|) that is below a
 * quarter of a BF16 ulp, so the BF16 output is within 1 ulp of the correctly rounded value, and an
 * output that is everywhere within 1 BF16 ulp has calc_diff <= (2^-7)^2 / 2 = 3.05e-5.
 * max_calc_diff = 1e-4 gives 3x room for the few cancelling columns, which the global
 * normalisation of calc_diff keeps small. In a column that cancels, the elementwise error in
 * ULPs has no finite bound (an exact 0 against an FP32 residue is thousands of ULPs), so the ULP
 * limit is not a usable gate here: max_ulp = UINT32_MAX, calc_diff carries the bound. The bound
 * assumes no overflow: a NaN or an Inf against another value still fails (its distance is
 * unbounded), as where a slot product beyond FLT_MAX makes the row +-Inf, or NaN after the
 * opposite Inf, and exact_v1 is a number (cases/known-findings.txt: numeric-adversaries). */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "ep_gather_internal.h"
#include "moects_kernel.h"

static int run(const void *shape, const void *args, void *stream)
{
    const moects_ep_gather_shape *s = shape;
    const moects_ep_gather_args *a = args;
    (void)stream;
    if (!moects__epg_shape_ok(s)) return -1;
    if (s->T == 0 || s->H == 0) return 0;
    const int64_t H = s->H, k = s->k;
    float *acc = malloc((size_t)H * sizeof *acc), *xf = malloc((size_t)H * sizeof *xf);
    int rc = (acc && xf) ? 0 : -1;
    for (int64_t t = 0; t < s->T && rc == 0; t++) {
        memset(acc, 0, (size_t)H * sizeof *acc); /* all-zero bits: +0.0f */
        for (int64_t j = 0; j < k; j++) {
            int64_t slot = t * k + j;
            if (!moects__epg_slot_valid(s, a, slot)) continue;
            int64_t row = a->input_index[slot];
            if (row < 0 || row >= s->M_sum) {
                rc = -1;
                break;
            }
            const uint16_t *xr = a->x + row * H;
            for (int64_t d = 0; d < H; d++) xf[d] = moects__epg_bf16_f32(xr[d]);
            /* BLAS lengths are blasint (32-bit here): go in chunks */
            for (int64_t d0 = 0; d0 < H; d0 += 1 << 30) {
                int64_t n = H - d0 < (1 << 30) ? H - d0 : (1 << 30);
                cblas_saxpy((blasint)n, a->topk_weights[slot], xf + d0, 1, acc + d0, 1);
            }
        }
        if (rc) break;
        moects__epg_store_row(s, a, t, acc);
    }
    free(acc);
    free(xf);
    return rc;
}

const moects_kernel moects_cpu_ep_gather_saxpy = {
    .abi_version = MOECTS_KERNEL_ABI_VERSION,
    .name = "cpu.ep_gather.saxpy",
    .op = MOECTS_OP_EP_GATHER,
    .device = MOECTS_DEVICE_CPU,
    .recipe = NULL,
    .tol = {.max_calc_diff = 1e-4, .max_ulp = UINT32_MAX},
    .bug = NULL,
    .supports = moects__epg_supports_all,
    .run = run,
};
