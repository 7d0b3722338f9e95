/* bench_bound_ratio.c: how much tighter the per-element bounds (DESIGN.md "Bounded verdicts") are
 * than the global tolerance they replaced, on a tier's FP4 GEMM and grouped MoE GEMM cases.
 *
 * The old tolerance of cpu.fp4_gemm.dequant_sgemm / cuda.fp4_gemm.dequant_cublas was calc_diff =
 * sum (x-y)^2 / sum (x^2+y^2) <= 1e-5 with ULPs unbounded. Its allowance for one element is the
 * largest error that element alone may carry with every other element exact: e with
 * e^2 / (2 * sum y^2) <= 1e-5 to first order (y = exact_v1), so allowance = sqrt(2e-5 * sum y^2),
 * one number per case. For every compared element (finite exact value; moe_gemm: valid rows) the
 * ratio bound[i] / allowance is taken, bound from moects_ref_*_bound for FP32 accumulation (p 24,
 * RNE: the dequant_sgemm kernels' class); the median over all elements of all cases is printed, per
 * op, with the quartiles and the count.
 *
 *   bench_bound_ratio [--root DIR] [--tier smoke|full] [--seed N] [GLOB]   (default smoke, seed 1, "*") */
#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moects_inputs.h"
#include "moects_ref.h"

typedef struct {
    double *v;
    size_t n, cap;
} vec;

static int push(vec *x, double d)
{
    if (x->n == x->cap) {
        size_t cap = x->cap ? 2 * x->cap : 1 << 16;
        double *v = realloc(x->v, cap * sizeof *v);
        if (!v) return -1;
        x->v = v, x->cap = cap;
    }
    x->v[x->n++] = d;
    return 0;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double out_at(const moects_inputs *in, const void *d, int64_t i)
{
    return in->out_dtype == MOECTS_F32 ? ((const float *)d)[i] : moects__bf16_to_f32(((const uint16_t *)d)[i]);
}

/* The ratios of one case into r; 0, 1 when skipped (reference refused), -1 out of memory. */
static int one_case(const moects_case *c, uint64_t seed, vec *r)
{
    moects_inputs in;
    char err[256];
    if (moects__inputs_build(c, seed, &in, err, sizeof err)) return 1;
    void *ptr[MOECTS_INPUTS_MAX];
    static uint64_t dummy[8];
    for (int i = 0; i < MOECTS_INPUTS_MAX; i++) ptr[i] = i < in.nt && in.t[i].host ? in.t[i].host : dummy;
    void *want = malloc(in.out_bytes + 1);
    double *bound = malloc((size_t)(in.out_elems + 1) * sizeof *bound);
    moects_op_args a;
    moects__inputs_bind(&in, ptr, want, &a);
    int rc = -1;
    if (!want || !bound) goto out;
    rc = 1;
    if (c->op == MOECTS_OP_FP4_GEMM ? moects__ref_fp4_gemm(&in.fg, &a.fg, MOECTS_RECIPE_EXACT_V1) ||
                                          moects__ref_fp4_gemm_bound(&in.fg, &a.fg, 24, 0, bound)
                                    : moects__ref_moe_gemm(&in.mg, &a.mg, MOECTS_RECIPE_EXACT_V1) ||
                                          moects__ref_moe_gemm_bound(&in.mg, &a.mg, 24, 0, bound))
        goto out;
    int64_t N = c->op == MOECTS_OP_MOE_GEMM ? in.mg.N : 1;
    double sum2 = 0;
    for (int64_t i = 0; i < in.out_elems; i++) {
        double y = out_at(&in, want, i);
        if ((c->op != MOECTS_OP_MOE_GEMM || in.row_valid[i / N]) && isfinite(y)) sum2 += y * y;
    }
    double allowance = sqrt(2e-5 * sum2);
    rc = 0;
    for (int64_t i = 0; i < in.out_elems && allowance > 0 && !rc; i++) {
        double y = out_at(&in, want, i);
        if ((c->op != MOECTS_OP_MOE_GEMM || in.row_valid[i / N]) && isfinite(y) && isfinite(bound[i]))
            rc = push(r, bound[i] / allowance);
    }
out:
    free(want);
    free(bound);
    moects__inputs_free(&in);
    return rc;
}

int main(int argc, char **argv)
{
    const char *root = MOECTS_SOURCE_DIR, *glob = "*";
    unsigned tier = MOECTS_TIER_SMOKE;
    uint64_t seed = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--root") && i + 1 < argc) root = argv[++i];
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--tier") && i + 1 < argc) tier = !strcmp(argv[++i], "full") ? MOECTS_TIER_FULL : MOECTS_TIER_SMOKE;
        else glob = argv[i];
    }
    moects_case_list l = {0};
    char err[512];
    if (moects__cases_builtin(root, &l, err, sizeof err)) {
        fprintf(stderr, "bench_bound_ratio: %s\n", err);
        return 2;
    }
    printf("op\tcases\telements\tq1\tmedian\tq3\t(bound / old calc_diff allowance, p=24 RNE, seed %llu)\n",
           (unsigned long long)seed);
    for (int op = MOECTS_OP_FP4_GEMM; op <= MOECTS_OP_MOE_GEMM; op++) {
        vec r = {0};
        size_t ncases = 0;
        for (size_t i = 0; i < l.n; i++) {
            const moects_case *c = &l.v[i];
            if ((int)c->op != op || !(c->tiers & tier) || fnmatch(glob, c->id, 0)) continue;
            int rc = one_case(c, seed, &r);
            if (rc < 0) return 2;
            ncases += rc == 0;
        }
        if (!r.n) continue;
        qsort(r.v, r.n, sizeof *r.v, cmp_d);
        printf("%s\t%zu\t%zu\t%.3g\t%.3g\t%.3g\n", op == MOECTS_OP_FP4_GEMM ? "fp4_gemm" : "moe_gemm", ncases, r.n,
               r.v[r.n / 4], r.v[r.n / 2], r.v[3 * r.n / 4]);
        free(r.v);
    }
    moects__case_list_free(&l);
    return 0;
}
