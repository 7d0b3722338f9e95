/* bench_moe_gemm.c: time the grouped MoE GEMM reference (ref/moe_gemm.c, blockwise_v1, optionally
 * exact_v1) on prefill routing against one plain GEMM of the same total FLOPs (cblas_sgemm for the
 * FP4 x FP4 formats, whose partials come from sgemm; cblas_dgemm for W4A8 and W4A16, whose come
 * from dgemm), same process, OpenBLAS's threads. Prints the median of --reps times of each and the
 * median of the per-repetition ratios.
 *
 *   bench_moe_gemm [--reps R] [--tokens T] [--exact]
 * Cases: gemm1 (K = hidden or latent width, N = 2 * moe_intermediate_size / TP) of DeepSeek-V3
 * (cases/models/deepseek-v3.json: hidden 7168, moe_intermediate_size 2048, 256 experts, topk 8) and
 * Kimi K3 (kimi-k3.json: latent 3584, moe_intermediate_size 3072, 896 experts, topk 16) at TP8 (every
 * expert local, N / 8, T * topk rows) and EP8 (E / 8 local experts, full N, T * topk / 8 rows), in
 * MXFP4 and W4A8 (1x128 UE8M0 A scales), offsets layout (the contiguous layout's padding rows are
 * never computed, so it costs the same). Per-expert rows: a skewed split, weight of the i-th expert
 * 1 / (i + 1) in a shuffled order, one expert with 0 rows. The baseline is tiled in GEMMs of at most
 * 1024 x 1024 x K on one A and one B tile buffer (the same FLOPs as rows x N x K, in bounded memory).
 * Memory: every expert's B codes are the same physical pages mapped E times (memfd) when one
 * expert's codes are a whole number of pages, so the B of all experts (up to 1.2 GB) takes one
 * expert's memory; the reference still reads each expert's B at its own address. */
#include <cblas.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "moects_ref.h"

typedef struct {
    const char *name;
    int64_t E, N, K, rows; /* local experts, gemm1 N and K, valid rows over all experts */
} bcase;

/* E copies of `per` bytes of random codes at one address range: the same pages mapped E times when
 * per is a multiple of the page size, else a real allocation. *unmap: bytes to munmap (0: free). */
static uint8_t *expert_codes(int64_t E, size_t per, size_t *unmap)
{
    const size_t pg = (size_t)sysconf(_SC_PAGESIZE), total = per * (size_t)E;
    *unmap = 0;
    int fd = per % pg == 0 ? memfd_create("moects-bench-b", 0) : -1;
    if (fd >= 0 && ftruncate(fd, (off_t)per) == 0) {
        uint8_t *base = mmap(NULL, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        int ok = base != MAP_FAILED;
        for (int64_t e = 0; ok && e < E; e++)
            ok = mmap(base + (size_t)e * per, per, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) != MAP_FAILED;
        close(fd);
        if (ok) {
            for (size_t i = 0; i < per; i++) base[i] = (uint8_t)next();
            *unmap = total;
            return base;
        }
        if (base != MAP_FAILED) munmap(base, total);
    } else if (fd >= 0) {
        close(fd);
    }
    uint8_t *b = malloc(total);
    for (size_t i = 0; b && i < total; i++) b[i] = (uint8_t)next();
    return b;
}

/* Skewed rows per expert summing to `rows`: weight 1/(i+1) in a shuffled order, expert perm[0] empty. */
static void split_rows(int64_t E, int64_t rows, int64_t *cnt)
{
    int64_t *perm = malloc((size_t)E * sizeof *perm);
    double wsum = 0.0;
    for (int64_t e = 0; e < E; e++) perm[e] = e;
    for (int64_t e = E - 1; e > 0; e--) {
        int64_t j = next() % (uint64_t)(e + 1), t = perm[e];
        perm[e] = perm[j];
        perm[j] = t;
    }
    for (int64_t i = 1; i < E; i++) wsum += 1.0 / (double)i;
    int64_t left = rows;
    cnt[perm[0]] = 0;
    for (int64_t i = 1; i < E; i++) {
        cnt[perm[i]] = (int64_t)((double)rows / (double)i / wsum);
        left -= cnt[perm[i]];
    }
    cnt[perm[1 % E]] += left; /* rounding remainder to the largest */
    free(perm);
}

static int run(const bcase *c, moects_moe_format fmt, int reps, int exact)
{
    const int64_t E = c->E, N = c->N, K = c->K, rb = K / 2, nkb = K / 32, M = c->rows, BT = 1024;
    int64_t *cnt = malloc((size_t)E * sizeof *cnt), *off = malloc((size_t)(E + 1) * sizeof *off);
    split_rows(E, c->rows, cnt);
    off[0] = 0;
    for (int64_t e = 0; e < E; e++) off[e + 1] = off[e] + cnt[e];
    const int w4a8 = fmt == MOECTS_MOE_W4A8;
    const size_t abytes = (size_t)(M * (w4a8 ? K : rb)), sabytes = (size_t)(M * (w4a8 ? K / 128 : nkb));
    uint8_t *a = malloc(abytes), *sa = malloc(sabytes), *sb = malloc((size_t)(E * N * nkb));
    float *d = malloc((size_t)(M * N) * sizeof(float)), *alpha = malloc((size_t)E * sizeof(float));
    size_t unmap;
    uint8_t *b = expert_codes(E, (size_t)(N * rb), &unmap);
    /* the baseline's tile buffers, in the baseline's type */
    const size_t fl = w4a8 ? sizeof(double) : sizeof(float);
    void *fa = malloc((size_t)(BT * K) * fl), *fb = malloc((size_t)(BT * K) * fl), *fd = malloc((size_t)(BT * BT) * fl);
    if (!cnt || !off || !a || !sa || !sb || !d || !alpha || !b || !fa || !fb || !fd) {
        fprintf(stderr, "bench_moe_gemm: out of memory for %s\n", c->name);
        return -1;
    }
    for (size_t i = 0; i < abytes; i++) a[i] = w4a8 ? (uint8_t)(next() % 0x7E) | (uint8_t)(next() & 0x80) : (uint8_t)next();
    for (size_t i = 0; i < sabytes; i++) sa[i] = (uint8_t)(120 + next() % 16);
    for (int64_t i = 0; i < E * N * nkb; i++) sb[i] = (uint8_t)(120 + next() % 16);
    for (int64_t e = 0; e < E; e++) alpha[e] = 1.0f;
    for (int64_t i = 0; i < BT * K; i++) {
        double v = (double)(next() % 15) * 0.5 - 3.5, w = (double)(next() % 15) * 0.5 - 3.5;
        if (w4a8) ((double *)fa)[i] = v, ((double *)fb)[i] = w;
        else ((float *)fa)[i] = (float)v, ((float *)fb)[i] = (float)w;
    }
    moects_moe_gemm_shape s = {E, M, N, K, fmt, MOECTS_FP4_MXFP4, MOECTS_ROWS_OFFSETS, 1, 128, 0,
                               MOECTS_SCALES_LINEAR, MOECTS_F32};
    moects_moe_gemm_args args = {a, sa, b, sb, alpha, NULL, NULL, NULL, NULL, off, d};
    double *tp = calloc((size_t)reps, sizeof(double)), *tb = calloc((size_t)reps, sizeof(double));
    double *te = calloc((size_t)reps, sizeof(double)), *rbw = calloc((size_t)reps, sizeof(double));
    double *rex = calloc((size_t)reps, sizeof(double));
    for (int r = 0; r < reps; r++) { /* alternate, so drift hits both alike */
        settle();
        double t0 = now();
        for (int64_t m0 = 0; m0 < M; m0 += BT)
            for (int64_t n0 = 0; n0 < N; n0 += BT) {
                int mm = (int)(M - m0 < BT ? M - m0 : BT), nn = (int)(N - n0 < BT ? N - n0 : BT);
                if (w4a8)
                    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, mm, nn, (int)K, 1.0, fa, (int)K, fb, (int)K,
                                0.0, fd, nn);
                else
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, mm, nn, (int)K, 1.0f, fa, (int)K, fb, (int)K,
                                0.0f, fd, nn);
            }
        tp[r] = now() - t0;
        settle();
        t0 = now();
        if (moects__ref_moe_gemm(&s, &args, MOECTS_RECIPE_FP4_BLOCKWISE_V1) != 0) return -1;
        tb[r] = now() - t0;
        rbw[r] = tb[r] / tp[r];
        if (exact) {
            settle();
            t0 = now();
            if (moects__ref_moe_gemm(&s, &args, MOECTS_RECIPE_EXACT_V1) != 0) return -1;
            te[r] = now() - t0;
            rex[r] = te[r] / tp[r];
        }
    }
    int64_t maxc = 0;
    for (int64_t e = 0; e < E; e++) maxc = cnt[e] > maxc ? cnt[e] : maxc;
    printf("%-20s %-5s E=%-4lld rows=%-6lld (max/expert %-5lld) N=%-5lld K=%-5lld %s %8.1f ms  blockwise_v1 %8.1f ms  "
           "ratio %.2f",
           c->name, w4a8 ? "w4a8" : "mxfp4", (long long)E, (long long)c->rows, (long long)maxc, (long long)N,
           (long long)K, w4a8 ? "dgemm" : "sgemm", 1e3 * median(tp, reps), 1e3 * median(tb, reps), median(rbw, reps));
    if (exact) printf("  exact_v1 %8.1f ms  ratio %.2f", 1e3 * median(te, reps), median(rex, reps));
    printf("\n");
    fflush(stdout);
    if (unmap) munmap(b, unmap);
    else free(b);
    free(cnt); free(off); free(a); free(sa); free(sb); free(d); free(alpha); free(fa); free(fb); free(fd);
    free(tp); free(tb); free(te); free(rbw); free(rex);
    return 0;
}

int main(int argc, char **argv)
{
    int reps = 3, exact = 0;
    long long T = 512;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--tokens") && i + 1 < argc) T = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--exact")) exact = 1;
        else {
            fprintf(stderr, "usage: %s [--reps R] [--tokens T] [--exact]\n", argv[0]);
            return 2;
        }
    }
    if (reps < 1) reps = 1;
    if (T < 8) T = 8;
    const bcase cases[] = {
        {"deepseek-v3/tp8", 256, 2 * 2048 / 8, 7168, T * 8},
        {"deepseek-v3/ep8", 256 / 8, 2 * 2048, 7168, T * 8 / 8},
        {"kimi-k3/tp8", 896, 2 * 3072 / 8, 3584, T * 16},
        {"kimi-k3/ep8", 896 / 8, 2 * 3072, 3584, T * 16 / 8},
    };
    printf("# %s; OpenBLAS threads %d, core %s; T = %lld tokens; median of %d\n", openblas_get_config(),
           openblas_get_num_threads(), openblas_get_corename(), T, reps);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int f = 0; f < 2; f++)
            if (run(&cases[i], f ? MOECTS_MOE_W4A8 : MOECTS_MOE_MXFP4, reps, exact) != 0) return 1;
    return 0;
}
