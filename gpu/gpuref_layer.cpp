/* gpuref_layer.cpp: the fused MoE layer's GPU reference run on the host (gpu/moects_gpuref.h
 * moects__gpuref_host_fm): gpu/gpuref/gpuref_layer.cuh's element code under the host shims of
 * gpu/cuda/fmcu_host.h, every stage's elements in order on one thread, so that CTest, without a GPU,
 * compares the arithmetic gpu/cuda/gpuref.cu runs with ref/fused_moe.c (docs/gpu_reference.md). Built
 * with -ffp-contract=off (gpu/CMakeLists.txt): the shims' FP32 operations are the device's __f*_rn. */
#include <stdio.h>
#include <stdlib.h>

#include "cuda/fmcu_host.h"
#include "gpuref/gpuref_layer.cuh"
#include "moects_gpuref.h"
extern "C" {
#include "moects_crmath.h"
}

/* The stages' buffers, zeroed: one block, its address in *block. 0, or -1 out of memory. */
static int workspace(const grl::Lp &p, grl::Ws *w, void **block)
{
    const size_t P = (size_t)(p.T * p.k);
    const size_t n[9] = {P * 4, p.fp8 ? P * (size_t)p.H * 4 : 0, P * (size_t)p.kb1 * 4, P * (size_t)p.N1 * 4,
                         P * (size_t)p.I * 4, P * (size_t)p.I * 8, P * (size_t)p.ng * 4, P * (size_t)p.H * 4, 4};
    size_t off[9], total = 0;
    for (int i = 0; i < 9; i++) off[i] = total, total += (n[i] + 15) & ~(size_t)15;
    char *b = static_cast<char *>(calloc(total, 1));
    if (!b) return -1;
    *w = grl::Ws{(int *)(b + off[0]), (float *)(b + off[1]), (float *)(b + off[2]), (float *)(b + off[3]),
                 (float *)(b + off[4]), (double *)(b + off[5]), (float *)(b + off[6]), (float *)(b + off[7]),
                 (int *)(b + off[8])};
    *block = b;
    return 0;
}

extern "C" int moects__gpuref_host_fm(const moects_fused_moe_shape *s, const moects_fused_moe_args *a,
                                      const moects_layer_recipe *r, unsigned *flags, char *why, size_t whylen)
{
    const grl::Lp p = grl::params(s, r);
    fmcu::CrTab tb;
    for (int fn = 0; fn < 3; fn++)
        tb.e[fn] = reinterpret_cast<const uint2 *>(moects__cr_table[fn]), tb.n[fn] = (int)moects__cr_count[fn];
    grl::Ws w;
    void *block = NULL;
    if (workspace(p, &w, &block)) return snprintf(why, whylen, "GPU reference stand-in: out of memory"), -1;
    unsigned f = 0;
    for (int st = 0; st < grl::ST_N; st++)
        for (int64_t i = 0, n = grl::stage_count(p, st); i < n; i++) f |= grl::elem(st, p, *a, w, tb, i);
    if (*w.err) f |= GR_CRMISS;
    free(block);
    *flags = f;
    return 0;
}
