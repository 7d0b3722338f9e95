/* bench_fp4_gemm.c: time the FP4 GEMM reference (ref/fp4_gemm.c, blockwise_v1 and optionally
 * exact_v1) against one plain cblas_sgemm of the same M, N, K (fp32 inputs, NT, OpenBLAS's own
 * threads), in the same process. Prints the median of --reps runs of each and the ratio.
 * --fused: a second line per shape, both recipes from one moects__ref_fp4_gemm_recipes call against
 * the two separate moects__ref_fp4_gemm calls back to back (the runner's case needing both), with
 * the median of the per-repetition ratios fused / separate; the outputs are compared too.
 *
 *   bench_fp4_gemm [--reps R] [--exact] [--fused] [--shape NAME:M:N:K] ...
 * Default shapes: DeepSeek-V3 gemm1 at TP8 (N = 2*2048/8 = 512, K = 7168) and Kimi K3 gemm2 at TP8
 * (N = routed_expert_hidden_size = 3584, K = moe_intermediate_size/8 = 3072/8 = 384, from
 * hf-configs/moonshotai--Kimi-K3.config.json), M = 4096, MXFP4 and NVFP4, fp32 output.
 * Each repetition runs sgemm then the reference (300 ms apart, see settle()); the ratio printed is
 * the median of the per-repetition ratios. */
#include <cblas.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "moects_quant.h"
#include "bench_util.h"
#include "moects_ref.h"

typedef struct {
    const char *name;
    int64_t M, N, K;
} shape;

/* Both recipes: two separate calls back to back vs one fused call, reps times each, alternating. */
static int run_fused(const shape *sh, moects_fp4_format fmt, int reps, const moects_fp4_gemm_shape *s,
                     moects_fp4_gemm_args *args)
{
    const size_t bytes = (size_t)(s->M * s->N) * sizeof(float);
    float *sb = malloc(bytes), *se = malloc(bytes), *fb = malloc(bytes), *fe = malloc(bytes);
    double *ts = calloc((size_t)reps, sizeof(double)), *tf = calloc((size_t)reps, sizeof(double));
    double *rr = calloc((size_t)reps, sizeof(double));
    int rc = -1;
    if (!sb || !se || !fb || !fe || !ts || !tf || !rr) {
        fprintf(stderr, "bench_fp4_gemm: out of memory for %s (fused)\n", sh->name);
        goto out;
    }
    for (int r = 0; r < reps; r++) {
        settle();
        double t0 = now();
        args->d = sb;
        if (moects__ref_fp4_gemm(s, args, MOECTS_RECIPE_FP4_BLOCKWISE_V1) != 0) goto out;
        args->d = se;
        if (moects__ref_fp4_gemm(s, args, MOECTS_RECIPE_EXACT_V1) != 0) goto out;
        ts[r] = now() - t0;
        settle();
        t0 = now();
        if (moects__ref_fp4_gemm_recipes(s, args, fb, fe) != 0) goto out;
        tf[r] = now() - t0;
        rr[r] = tf[r] / ts[r];
    }
    if (memcmp(sb, fb, bytes) || memcmp(se, fe, bytes)) {
        fprintf(stderr, "bench_fp4_gemm: %s: fused output differs from the separate calls\n", sh->name);
        goto out;
    }
    double ms = median(ts, reps), mf = median(tf, reps);
    printf("%-24s %-5s M=%-5lld N=%-5lld K=%-5lld separate bw+ex %8.2f ms  fused %8.2f ms  ratio %.2f\n",
           sh->name, fmt == MOECTS_FP4_NVFP4 ? "nvfp4" : "mxfp4", (long long)s->M, (long long)s->N,
           (long long)s->K, 1e3 * ms, 1e3 * mf, median(rr, reps));
    fflush(stdout);
    rc = 0;
out:
    free(sb); free(se); free(fb); free(fe); free(ts); free(tf); free(rr);
    return rc;
}

static int run(const shape *sh, moects_fp4_format fmt, int reps, int exact, int fused)
{
    const int64_t M = sh->M, N = sh->N, K = sh->K, g = moects_fp4_block(fmt), nkb = (K + g - 1) / g;
    const int64_t rb = (K + 1) / 2;
    uint8_t *a = malloc((size_t)(M * rb)), *b = malloc((size_t)(N * rb));
    uint8_t *sa = malloc((size_t)(M * nkb)), *sb = malloc((size_t)(N * nkb));
    float *d = malloc((size_t)(M * N) * sizeof(float));
    float *fa = malloc((size_t)(M * K) * sizeof(float)), *fb = malloc((size_t)(N * K) * sizeof(float));
    if (!a || !b || !sa || !sb || !d || !fa || !fb) {
        fprintf(stderr, "bench_fp4_gemm: out of memory for %s\n", sh->name);
        return -1;
    }
    for (int64_t i = 0; i < M * rb; i++) a[i] = (uint8_t)next();
    for (int64_t i = 0; i < N * rb; i++) b[i] = (uint8_t)next();
    for (int64_t i = 0; i < M * nkb; i++) sa[i] = fmt == MOECTS_FP4_NVFP4 ? (uint8_t)(0x20 + next() % 0x40) : (uint8_t)(120 + next() % 16);
    for (int64_t i = 0; i < N * nkb; i++) sb[i] = fmt == MOECTS_FP4_NVFP4 ? (uint8_t)(0x20 + next() % 0x40) : (uint8_t)(120 + next() % 16);
    for (int64_t i = 0; i < M * K; i++) fa[i] = (float)(next() % 15) * 0.5f - 3.5f;
    for (int64_t i = 0; i < N * K; i++) fb[i] = (float)(next() % 15) * 0.5f - 3.5f;
    moects_fp4_gemm_shape s = {M, N, K, fmt, MOECTS_SCALES_LINEAR, MOECTS_F32};
    moects_fp4_gemm_args args = {a, b, sa, sb, 1.0f, d};

    double *tp = calloc((size_t)reps, sizeof(double)), *tb = calloc((size_t)reps, sizeof(double));
    double *te = calloc((size_t)reps, sizeof(double));
    for (int r = 0; r < reps; r++) { /* alternate, so drift hits both alike */
        settle();
        double t0 = now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)M, (int)N, (int)K, 1.0f, fa, (int)K, fb,
                    (int)K, 0.0f, d, (int)N);
        tp[r] = now() - t0;
        settle();
        t0 = now();
        if (moects__ref_fp4_gemm(&s, &args, MOECTS_RECIPE_FP4_BLOCKWISE_V1) != 0) return -1;
        tb[r] = now() - t0;
        if (exact) {
            settle();
            t0 = now();
            if (moects__ref_fp4_gemm(&s, &args, MOECTS_RECIPE_EXACT_V1) != 0) return -1;
            te[r] = now() - t0;
        }
    }
    /* ratio: the median of the per-repetition ratios (each pair ran back to back, so a drift in
     * machine speed hits both), next to the medians of the times */
    double *rbw = calloc((size_t)reps, sizeof(double)), *re = calloc((size_t)reps, sizeof(double));
    for (int r = 0; r < reps; r++) {
        rbw[r] = tb[r] / tp[r];
        re[r] = te[r] / tp[r];
    }
    double mp = median(tp, reps), mb = median(tb, reps);
    printf("%-24s %-5s M=%-5lld N=%-5lld K=%-5lld sgemm %8.2f ms  blockwise_v1 %8.2f ms  ratio %.2f",
           sh->name, fmt == MOECTS_FP4_NVFP4 ? "nvfp4" : "mxfp4", (long long)M, (long long)N, (long long)K,
           1e3 * mp, 1e3 * mb, median(rbw, reps));
    if (exact) {
        double me = median(te, reps);
        printf("  exact_v1 %8.2f ms  ratio %.2f", 1e3 * me, median(re, reps));
    }
    free(rbw);
    free(re);
    printf("\n");
    fflush(stdout);
    int rc = fused ? run_fused(sh, fmt, reps, &s, &args) : 0;
    free(a); free(b); free(sa); free(sb); free(d); free(fa); free(fb); free(tp); free(tb); free(te);
    return rc;
}

int main(int argc, char **argv)
{
    int reps = 5, exact = 0, fused = 0, nsh = 0;
    shape shapes[16];
    static char names[16][64];
    for (int i = 1; i < argc; i++) {
        long long M, N, K;
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--exact")) exact = 1;
        else if (!strcmp(argv[i], "--fused")) fused = 1;
        else if (!strcmp(argv[i], "--shape") && i + 1 < argc && nsh < 16 &&
                 sscanf(argv[i + 1], "%63[^:]:%lld:%lld:%lld", names[nsh], &M, &N, &K) == 4 && M > 0 &&
                 N > 0 && K > 0) {
            shapes[nsh] = (shape){names[nsh], M, N, K};
            nsh++;
            i++;
        } else {
            fprintf(stderr, "usage: %s [--reps R] [--exact] [--fused] [--shape NAME:M:N:K]...\n", argv[0]);
            return 2;
        }
    }
    if (reps < 1) reps = 1;
    if (nsh == 0) {
        shapes[nsh++] = (shape){"deepseek-v3/tp8/gemm1", 4096, 512, 7168};
        shapes[nsh++] = (shape){"kimi-k3/tp8/gemm2", 4096, 3584, 384};
    }
    printf("# %s; OpenBLAS threads %d, core %s; median of %d\n", openblas_get_config(),
           openblas_get_num_threads(), openblas_get_corename(), reps);
    for (int i = 0; i < nsh; i++)
        for (int f = 0; f < 2; f++)
            if (run(&shapes[i], f ? MOECTS_FP4_NVFP4 : MOECTS_FP4_MXFP4, reps, exact, fused) != 0) return 1;
    return 0;
}
