/* perf.c: --perf for CUDA kernels (DESIGN.md "Harness"): median kernel time with CUDA events,
 * achieved bandwidth or FLOP rate, and the fraction of ceilings measured in the same run on the
 * same device (device-to-device copy; cuBLAS BF16 GEMM at the same M, N, K). Not a test: no
 * verdict depends on it. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moects_device.h"
#include "moects_op.h"
#include "moects_runner.h"

#define WARMUP 3
#define ITERS 20
#define COPY_CEILING_BYTES ((size_t)1 << 30) /* copy ceiling over 1 GiB (read + write) */

typedef struct {
    const moects_kernel *k;
    const void *shape;
    const void *args;
} launch_ctx;

static int launch(void *p)
{
    launch_ctx *c = p;
    return moects__kernel_call(c->k, c->shape, c->args, moects__cuda_stream());
}

/* Ceilings are cached per worker process: the copy rate once, the GEMM rate per (M, N, K). */
static double copy_gbps_cached = -1;
static struct {
    long M, N, K;
    double tflops;
} gemm_cache[16];
static int gemm_cache_n;

static void note(moects_result *r, const char *msg)
{
    size_t l = strlen(r->reason);
    snprintf(r->reason + l, sizeof r->reason - l, "%sperf: %s", l ? "; " : "", msg);
}

/* An op that moves bytes: GB/s against a device-to-device copy measured once per worker. */
static void copy_rate(double bytes, double ms, moects_result *r)
{
    char e[200] = "";
    r->perf_value = bytes / (ms * 1e-3) / 1e9;
    if (copy_gbps_cached < 0) {
        double g = 0;
        size_t b = COPY_CEILING_BYTES;
        while (moects__cuda_copy_gbps(b, &g, e, sizeof e) != 0 && b > ((size_t)1 << 24)) b /= 4;
        copy_gbps_cached = g > 0 ? g : 0;
    }
    if (copy_gbps_cached > 0) r->perf_fraction = r->perf_value / copy_gbps_cached;
    else note(r, e[0] ? e : "copy ceiling unavailable");
}

/* A GEMM of M, N, K (moe_gemm: its valid rows as one GEMM of the same flops): TFLOP/s against cuBLAS
 * BF16 at the same M, N, K, cached per worker. */
static void gemm_rate(const long mnk[3], double ms, moects_result *r)
{
    char e[200] = "";
    long M = mnk[0], N = mnk[1], K = mnk[2];
    r->perf_value = 2.0 * (double)M * (double)N * (double)K / (ms * 1e-3) / 1e12;
    double ceil = -1;
    for (int i = 0; i < gemm_cache_n; i++)
        if (gemm_cache[i].M == M && gemm_cache[i].N == N && gemm_cache[i].K == K) ceil = gemm_cache[i].tflops;
    if (ceil < 0) {
        double t = 0;
        ceil = moects__cuda_cublas_bf16_tflops(M, N, K, &t, e, sizeof e) == 0 ? t : 0;
        int slot = gemm_cache_n < 16 ? gemm_cache_n++ : (int)((unsigned)M % 16);
        gemm_cache[slot].M = M, gemm_cache[slot].N = N, gemm_cache[slot].K = K, gemm_cache[slot].tflops = ceil;
    }
    if (ceil > 0) r->perf_fraction = r->perf_value / ceil;
    else note(r, e[0] ? e : "cuBLAS ceiling unavailable");
}

void moects__perf_measure(const moects_kernel *k, const moects_inputs *in, const moects_op_args *dargs,
                         moects_result *r)
{
    if (k->device != MOECTS_DEVICE_CUDA) return;
    launch_ctx c = {k, moects__inputs_shape(in), dargs};
    double ms = 0;
    if (moects__cuda_time(launch, &c, WARMUP, ITERS, &ms) != 0 || !(ms > 0)) {
        note(r, "timing failed");
        return;
    }
    r->kernel_ms = ms;
    long mnk[3] = {0, 0, 0};
    double bytes = moects__op_of_inputs(in)->perf_bytes(in, mnk);
    if (bytes < 0) gemm_rate(mnk, ms, r);
    else copy_rate(bytes, ms, r);
}

char *moects__perf_render(const moects_run *run, size_t *len)
{
    char *buf = NULL;
    size_t blen = 0;
    FILE *f = open_memstream(&buf, &blen);
    if (!f) return NULL;
    fprintf(f, "# moects --perf\n\n- commit `%s`, %s\n- machine: %s\n\n", run->commit[0] ? run->commit : "unknown",
            run->date, run->machine);
    fputs("Median of 20 launches after 3 warm-up launches (CUDA events). ep_gather: GB/s of valid x rows read "
          "plus output written, against a device-to-device copy measured in the same run. fp4_gemm: TFLOP/s "
          "(2MNK) against cuBLAS BF16 GEMM at the same M, N, K.\n\n",
          f);
    fputs("| kernel | case | verdict | ms | achieved | ceiling | fraction |\n|---|---|---|---:|---:|---:|---:|\n", f);
    size_t rows = 0;
    for (size_t i = 0; i < run->n; i++) {
        const moects_result *r = &run->v[i];
        if (!(r->kernel_ms > 0)) continue;
        const moects__op_def *op = moects__op(r->op);
        const char *unit = op ? op->perf_unit : "?";
        fprintf(f, "| `%s` | `%s` | %s | %.4f | %.1f %s |", r->kernel, r->case_id, moects__verdict_name(r->verdict),
                r->kernel_ms, r->perf_value, unit);
        if (r->perf_fraction > 0)
            fprintf(f, " %.1f %s | %.0f%% |\n", r->perf_value / r->perf_fraction, unit, 100 * r->perf_fraction);
        else
            fputs(" n/a | n/a |\n", f);
        rows++;
    }
    if (!rows) fputs("| (no CUDA kernel was timed) | | | | | | |\n", f);
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    if (len) *len = blen;
    return buf;
}
