/* crmath_scan.c: generator and exhaustive checker of ref/crmath_table.c, the hard cases of the
 * correctly rounded binary32 exp, tanh and erf of ref/crmath.c (moects_crmath.h).
 *
 *   moects_crmath_scan gen FILE [-j N] [--ld-stride S]   scan, write the table to FILE
 *   moects_crmath_scan verify [-j N] [--ld-stride S]     scan, check the table and ref/crmath.c
 *   moects_crmath_scan list FN [-j N] [--ld-stride S]    (for gen) one function's near inputs
 *
 * Scan (per function, N threads, default all CPUs): every binary32 input, none skipped. For a NaN
 * x, moects__cr_round must give a quiet NaN. For every other x, y = moects__cr_libm(fn, x); x is
 * near when moects__cr_boundary_ulps(y) <= 2M (M = MOECTS_CR_MARGIN). Every S-th input (default
 * 16; 1: all, about 4 times slower; 0: none) also measures the C library's error |y - yl| in
 * double ulps of yl, yl = expl/tanhl/erfl(x) (x87 long double, a 64-bit significand: its own few
 * long double ulps are 2^-11 of a double ulp), where |yl| lies in [2^-151, 2^129) and |y| in
 * [2^-152, 2^130): the extreme boundaries are 2^-150 and 2^128 - 2^103, so a result outside
 * these ranges is a factor of two (2^52 double ulps) or more away from every boundary, decided
 * whatever the error (the ranges also skip the slow expl of saturated inputs). ref/crmath.c's
 * proof needs the error <= M / 2.
 *
 * gen: the near inputs of this process's C library and of a child run (`list`) under
 * GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX2,-FMA,-FMA4 (glibc picks its SSE2 exp and expm1 then),
 * their union with MPFR's correctly rounded results: mpfr_exp/tanh/erf straight to 24 bits, RNDN,
 * in the exponent range of binary32 (emin -148, emax 128, mpfr_subnormalize: the MPFR manual's
 * recipe), so no double rounding. No table when either run measures an error over M / 2.
 * verify (exit 1 on any failure): every near input of this machine is in the table, and
 * moects__cr_round gives MPFR's value for it; every entry of the table is MPFR's value, entries
 * sorted, each within 3M of a boundary here (none is spurious); the measured error <= M / 2. */
#include <gnu/libc-version.h>
#include <inttypes.h>
#include <math.h>
#include <mpfr.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "moects_crmath.h"

#define CHUNK_BITS 20 /* inputs per work item: 2^20, 4096 items */
#define SSE2_TUNABLES "GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX2,-FMA,-FMA4"

static const char *const fn_name[MOECTS_CR_NFN] = {"exp", "tanh", "erf"};

typedef struct {
    uint32_t *v;
    size_t n, cap;
} u32vec;

static void push(u32vec *a, uint32_t x)
{
    if (a->n == a->cap) {
        a->cap = a->cap ? 2 * a->cap : 256;
        a->v = realloc(a->v, a->cap * sizeof *a->v);
        if (!a->v) {
            perror("crmath_scan");
            exit(2);
        }
    }
    a->v[a->n++] = x;
}

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
static uint32_t to_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}
static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ---- the scan ---- */
typedef struct {
    moects_cr_fn fn;
    unsigned stride; /* error measure every stride-th input; 0: none */
    atomic_uint next; /* next work item */
} scan_job;

typedef struct {
    scan_job *job;
    u32vec near;
    double max_err;
    uint32_t max_err_x;
    uint64_t bad_nan, measured;
} scan_part;

typedef struct {
    u32vec near;
    double max_err, seconds;
    uint32_t max_err_x;
    uint64_t bad_nan, measured;
} scan_result;

static void measure(scan_part *w, float x, double y)
{
    moects_cr_fn fn = w->job->fn;
    long double yl = fn == MOECTS_CR_EXP ? expl(x) : fn == MOECTS_CR_TANH ? tanhl(x) : erfl(x);
    long double a = fabsl(yl);
    if (!(a >= 0x1p-151L && a < 0x1p129L)) return;
    int e;
    frexpl(a, &e); /* a in [2^(e-1), 2^e): double ulp 2^(e-53) */
    double err = (double)(fabsl((long double)y - yl) / ldexpl(1.0L, e - 53));
    w->measured++;
    if (err > w->max_err) {
        w->max_err = err;
        w->max_err_x = to_bits(x);
    }
}

static void scan_one(scan_part *w, uint32_t u)
{
    moects_cr_fn fn = w->job->fn;
    float x = from_bits(u);
    double y = moects__cr_libm(fn, x);
    if (isnan(x)) {
        float r = moects__cr_round(fn, x, y);
        if (!isnan(r) || !(to_bits(r) & 0x00400000u)) w->bad_nan++;
        return;
    }
    if (moects__cr_boundary_ulps(y) <= 2 * MOECTS_CR_MARGIN) push(&w->near, u);
    /* results beyond [2^-152, 2^130) are decided by far more than any error (see the top) */
    if (w->job->stride && u % w->job->stride == 0 && fabs(y) >= 0x1p-152 && fabs(y) < 0x1p130)
        measure(w, x, y);
}

static void *scan_worker(void *arg)
{
    scan_part *w = arg;
    for (;;) {
        unsigned item = atomic_fetch_add(&w->job->next, 1u);
        if (item >= 1u << (32 - CHUNK_BITS)) return NULL;
        uint32_t lo = (uint32_t)item << CHUNK_BITS;
        for (uint32_t i = 0; i < 1u << CHUNK_BITS; i++) scan_one(w, lo + i);
    }
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* Scans every binary32 input of fn on `threads` threads; near inputs sorted. */
static scan_result scan(moects_cr_fn fn, unsigned stride, int threads)
{
    scan_job job = {.fn = fn, .stride = stride};
    atomic_init(&job.next, 0u);
    scan_part *parts = calloc((size_t)threads, sizeof *parts);
    pthread_t *tid = calloc((size_t)threads, sizeof *tid);
    scan_result r = {0};
    double t0 = now();
    for (int i = 0; i < threads; i++) {
        parts[i].job = &job;
        if (pthread_create(&tid[i], NULL, scan_worker, &parts[i])) exit(2);
    }
    for (int i = 0; i < threads; i++) {
        pthread_join(tid[i], NULL);
        for (size_t k = 0; k < parts[i].near.n; k++) push(&r.near, parts[i].near.v[k]);
        free(parts[i].near.v);
        if (parts[i].max_err >= r.max_err) {
            r.max_err = parts[i].max_err;
            r.max_err_x = parts[i].max_err_x;
        }
        r.bad_nan += parts[i].bad_nan;
        r.measured += parts[i].measured;
    }
    r.seconds = now() - t0;
    if (r.near.n) qsort(r.near.v, r.near.n, sizeof *r.near.v, cmp_u32);
    free(parts);
    free(tid);
    return r;
}

/* ---- MPFR ---- */
/* MPFR's binary32 value nearest to fn(x): 24 bits, RNDN, in binary32's exponent range. */
static uint32_t mpfr_value(moects_cr_fn fn, uint32_t xb)
{
    mpfr_exp_t emin = mpfr_get_emin(), emax = mpfr_get_emax();
    mpfr_t a, r;
    mpfr_init2(a, 24);
    mpfr_init2(r, 24);
    mpfr_set_flt(a, from_bits(xb), MPFR_RNDN); /* exact */
    mpfr_set_emin(-148);
    mpfr_set_emax(128);
    int t = fn == MOECTS_CR_EXP    ? mpfr_exp(r, a, MPFR_RNDN)
            : fn == MOECTS_CR_TANH ? mpfr_tanh(r, a, MPFR_RNDN)
                                   : mpfr_erf(r, a, MPFR_RNDN);
    t = mpfr_check_range(r, t, MPFR_RNDN);
    mpfr_subnormalize(r, t, MPFR_RNDN);
    float f = mpfr_get_flt(r, MPFR_RNDN); /* exact: r has 24 bits in binary32's range */
    mpfr_set_emin(emin);
    mpfr_set_emax(emax);
    mpfr_clear(a);
    mpfr_clear(r);
    return to_bits(f);
}

/* ---- gen ---- */
/* The SSE2 variant's scan of fn: this program's `list` run under SSE2_TUNABLES. */
static scan_result scan_sse2(moects_cr_fn fn, unsigned stride, int threads)
{
    char self[4096], cmd[4400], line[128];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) exit(2);
    self[n] = 0;
    snprintf(cmd, sizeof cmd, SSE2_TUNABLES " '%s' list %s -j %d --ld-stride %u", self, fn_name[fn],
             threads, stride);
    FILE *p = popen(cmd, "r");
    scan_result r = {0};
    unsigned x;
    unsigned long long measured;
    while (p && fgets(line, sizeof line, p)) {
        if (sscanf(line, "x %x", &x) == 1) push(&r.near, (uint32_t)x);
        else if (sscanf(line, "err %lg %x %lg %llu", &r.max_err, &x, &r.seconds, &measured) == 4) {
            r.max_err_x = (uint32_t)x;
            r.measured = measured;
        }
    }
    if (!p || pclose(p) != 0 || r.seconds <= 0) {
        fprintf(stderr, "crmath_scan: the SSE2 run failed: %s\n", cmd);
        exit(2);
    }
    return r;
}

/* The union of a and b, both sorted. */
static u32vec merge(const u32vec *a, const u32vec *b)
{
    u32vec m = {0};
    size_t i = 0, j = 0;
    while (i < a->n || j < b->n) {
        uint32_t v = j == b->n || (i < a->n && a->v[i] <= b->v[j]) ? a->v[i] : b->v[j];
        push(&m, v);
        while (i < a->n && a->v[i] == v) i++;
        while (j < b->n && b->v[j] == v) j++;
    }
    return m;
}

static void report(const char *fn, const char *variant, const scan_result *r)
{
    fprintf(stderr, "%s (%s): %.1f s, %zu near (<= %g ulps), max error %.3f ulps at 0x%08" PRIx32
            " (%" PRIu64 " inputs measured)\n", fn, variant, r->seconds, r->near.n,
            2 * MOECTS_CR_MARGIN, r->max_err, r->max_err_x, r->measured);
}

static void write_table(FILE *f, u32vec near[MOECTS_CR_NFN])
{
    fprintf(f, "/* crmath_table.c: GENERATED by tools/crmath_scan.c, do not edit. The hard cases of "
               "moects_cr_expf,\n * moects_cr_tanhf and moects_cr_erff (moects_crmath.h, "
               "ref/crmath.c): every binary32 input whose\n * double exp/tanh/erf of glibc %s "
               "(x86-64; its FMA and SSE2 variants) lies within %g double ulps\n * of a binary32 "
               "rounding boundary, with MPFR %s's correctly rounded result; sorted by input.\n",
            gnu_get_libc_version(), 2 * MOECTS_CR_MARGIN, mpfr_get_version());
    fprintf(f, " * Entries: exp %zu, tanh %zu, erf %zu.\n * Regenerate: cmake --build build --target "
               "moects_crmath_scan &&\n *   build/bin/moects_crmath_scan gen ref/crmath_table.c */\n"
               "#include \"moects_crmath.h\"\n", near[0].n, near[1].n, near[2].n);
    for (int fn = 0; fn < MOECTS_CR_NFN; fn++) {
        fprintf(f, "\nstatic const moects_cr_entry %s_table[] = {", fn_name[fn]);
        for (size_t i = 0; i < near[fn].n; i++) {
            uint32_t x = near[fn].v[i];
            fprintf(f, "%s{0x%08" PRIx32 "u, 0x%08" PRIx32 "u},", i % 3 ? " " : "\n    ", x,
                    mpfr_value((moects_cr_fn)fn, x));
        }
        fprintf(f, "%s\n};\n", near[fn].n ? "" : "\n    {0, 0} /* none (the count is 0) */");
    }
    fprintf(f, "\nconst moects_cr_entry *const moects__cr_table[MOECTS_CR_NFN] = {exp_table, "
               "tanh_table, erf_table};\nconst size_t moects__cr_count[MOECTS_CR_NFN] = {%zu, %zu, "
               "%zu};\n", near[0].n, near[1].n, near[2].n);
}

static int cmd_gen(const char *path, unsigned stride, int threads)
{
    u32vec all[MOECTS_CR_NFN];
    for (int fn = 0; fn < MOECTS_CR_NFN; fn++) {
        scan_result a = scan((moects_cr_fn)fn, stride, threads);
        report(fn_name[fn], "this process", &a);
        scan_result b = scan_sse2((moects_cr_fn)fn, stride, threads);
        report(fn_name[fn], "SSE2", &b);
        if (a.max_err > MOECTS_CR_MARGIN / 2 || b.max_err > MOECTS_CR_MARGIN / 2) {
            fprintf(stderr, "crmath_scan: %s: the C library errs more than M / 2 = %g ulps: no "
                            "table (ref/crmath.c)\n", fn_name[fn], MOECTS_CR_MARGIN / 2);
            return 1;
        }
        all[fn] = merge(&a.near, &b.near);
        fprintf(stderr, "%s: %zu entries\n", fn_name[fn], all[fn].n);
        free(a.near.v);
        free(b.near.v);
    }
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        return 2;
    }
    write_table(f, all);
    return fclose(f) ? 2 : 0;
}

static int cmd_list(moects_cr_fn fn, unsigned stride, int threads)
{
    scan_result r = scan(fn, stride, threads);
    for (size_t i = 0; i < r.near.n; i++) printf("x %08" PRIx32 "\n", r.near.v[i]);
    printf("err %.17g %08" PRIx32 " %.17g %" PRIu64 "\n", r.max_err, r.max_err_x, r.seconds,
           r.measured);
    return r.bad_nan ? 1 : 0;
}

/* ---- verify ---- */
/* A near input x of this machine: in the table, and moects__cr_round gives MPFR's value. */
static int check_near(moects_cr_fn fn, uint32_t x, size_t *within_m)
{
    double y = moects__cr_libm(fn, from_bits(x)), d = moects__cr_boundary_ulps(y);
    uint32_t r, want = mpfr_value(fn, x);
    if (d <= MOECTS_CR_MARGIN) ++*within_m;
    if (!moects__cr_lookup(fn, x, &r)) {
        printf("FAIL %s 0x%08" PRIx32 ": libm %a is %.2f ulps from a boundary, not in the table%s\n",
               fn_name[fn], x, y, d, d <= MOECTS_CR_MARGIN ? " (moects_cr_* would abort)" : "");
        return 1;
    }
    uint32_t got = to_bits(moects__cr_round(fn, from_bits(x), y));
    if (got != want) {
        printf("FAIL %s 0x%08" PRIx32 ": got 0x%08" PRIx32 ", MPFR 0x%08" PRIx32 "\n", fn_name[fn],
               x, got, want);
        return 1;
    }
    return 0;
}

/* Every entry: sorted, MPFR's value, within 3M of a boundary on this machine. */
static int check_table(moects_cr_fn fn)
{
    const moects_cr_entry *t = moects__cr_table[fn];
    int bad = 0;
    for (size_t i = 0; i < moects__cr_count[fn]; i++) {
        uint32_t want = mpfr_value(fn, t[i].x);
        double d = moects__cr_boundary_ulps(moects__cr_libm(fn, from_bits(t[i].x)));
        const char *why = i && t[i].x <= t[i - 1].x ? "not sorted"
                          : t[i].r != want          ? "not MPFR's value"
                          : !(d <= 3 * MOECTS_CR_MARGIN) ? "far from every boundary"
                                                         : NULL;
        if (why) {
            printf("FAIL %s table entry {0x%08" PRIx32 ", 0x%08" PRIx32 "}: %s (MPFR 0x%08" PRIx32
                   ", %.2f ulps)\n", fn_name[fn], t[i].x, t[i].r, why, want, d);
            bad++;
        }
    }
    return bad;
}

static int verify_fn(moects_cr_fn fn, unsigned stride, int threads)
{
    scan_result s = scan(fn, stride, threads);
    size_t within_m = 0;
    int bad = 0;
    for (size_t i = 0; i < s.near.n; i++) bad += check_near(fn, s.near.v[i], &within_m);
    bad += check_table(fn);
    if (s.bad_nan) printf("FAIL %s: %" PRIu64 " NaN inputs without a quiet NaN\n", fn_name[fn], s.bad_nan);
    if (s.max_err > MOECTS_CR_MARGIN / 2) {
        printf("FAIL %s: the C library errs %.3f double ulps at 0x%08" PRIx32 " (at most %g allowed)\n",
               fn_name[fn], s.max_err, s.max_err_x, MOECTS_CR_MARGIN / 2);
        bad++;
    }
    printf("%s: %s, scan %.1f s on %d threads: %zu near inputs (%zu within M = %g ulps), table %zu "
           "entries; max libm error %.3f ulps at 0x%08" PRIx32 " over %" PRIu64 " inputs\n",
           fn_name[fn], bad || s.bad_nan ? "FAIL" : "ok", s.seconds, threads, s.near.n, within_m,
           MOECTS_CR_MARGIN, moects__cr_count[fn], s.max_err, s.max_err_x, s.measured);
    free(s.near.v);
    return bad || s.bad_nan;
}

static int usage(void)
{
    fprintf(stderr, "usage: moects_crmath_scan gen FILE | verify [FN...] | list FN"
                    "   [-j THREADS] [--ld-stride S]\n");
    return 2;
}

static int parse_fn(const char *s)
{
    for (int fn = 0; fn < MOECTS_CR_NFN; fn++)
        if (!strcmp(s, fn_name[fn])) return fn;
    return -1;
}

int main(int argc, char **argv)
{
    int threads = (int)sysconf(_SC_NPROCESSORS_ONLN), want[MOECTS_CR_NFN] = {0}, nwant = 0;
    unsigned stride = 16;
    const char *cmd = argc > 1 ? argv[1] : "", *path = NULL;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "-j") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--ld-stride") && i + 1 < argc) stride = (unsigned)atoi(argv[++i]);
        else if (parse_fn(argv[i]) >= 0) want[parse_fn(argv[i])] = ++nwant;
        else if (!path && !strcmp(cmd, "gen")) path = argv[i];
        else return usage();
    }
    if (threads < 1) threads = 1;
    if (!strcmp(cmd, "gen") && path && !nwant) return cmd_gen(path, stride, threads);
    if (!strcmp(cmd, "list") && nwant == 1)
        for (int fn = 0; fn < MOECTS_CR_NFN; fn++)
            if (want[fn]) return cmd_list((moects_cr_fn)fn, stride, threads);
    if (strcmp(cmd, "verify")) return usage();
    int bad = 0;
    for (int fn = 0; fn < MOECTS_CR_NFN; fn++)
        if (!nwant || want[fn]) bad |= verify_fn((moects_cr_fn)fn, stride, threads);
    return bad;
}
