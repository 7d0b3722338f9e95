/* test_cases_regressions.c: the regression files (cases/regressions/) and their loader. Each file
 * must name a row of cases/sources/bug-reports.md and cover its class; the class checks below are
 * the bug reports' shapes, read by hand. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "moects_cases.h"
#include "test_tmpdir.h"

#define REG MOECTS_SOURCE_DIR "/cases/regressions"

static moects_case_list all; /* every regression file's cases */
static int nfiles;

static void load_all(void)
{
    DIR *d = opendir(REG);
    cr_assert_not_null(d);
    struct dirent *e;
    char err[512] = "";
    while ((e = readdir(d))) {
        size_t L = strlen(e->d_name);
        if (L < 6 || strcmp(e->d_name + L - 5, ".json")) continue;
        char p[512];
        snprintf(p, sizeof p, "%s/%s", REG, e->d_name);
        cr_assert_eq(moects__regressions_load(p, &all, err, sizeof err), 0, "%s", err);
        nfiles++;
    }
    closedir(d);
}
static void free_all(void) { moects__case_list_free(&all); }

/* Cases of one class (third id segment). */
static size_t class_cases(const char *cls, const moects_case **out, size_t max)
{
    size_t n = 0;
    char pat[96];
    snprintf(pat, sizeof pat, "/regression/%s/", cls);
    for (size_t i = 0; i < all.n; i++)
        if (strstr(all.v[i].id, pat)) {
            if (n < max) out[n] = &all.v[i];
            n++;
        }
    return n;
}

#define MAXC 4096
static const moects_case *cs[MAXC];

/* The "source" column of every row of bug-reports.md is the "source" of exactly one file. */
Test(regressions, one_file_per_bug_report_row, .init = load_all, .fini = free_all)
{
    /* the 27 rows below + 21-signed-zero.json and 92-moe-layouts.json (reviews, not public reports) +
     * 90-past-the-registry.json and 91-numeric-adversaries.json (issue 13's adversaries) */
    cr_expect_eq(nfiles, 31);
    FILE *f = fopen(MOECTS_SOURCE_DIR "/cases/sources/bug-reports.md", "r");
    cr_assert_not_null(f);
    char line[1024];
    int rows = 0;
    while (fgets(line, sizeof line, f)) {
        int num;
        char src[256];
        if (sscanf(line, "| %d | %255[^|]|", &num, src) != 2) continue;
        size_t L = strlen(src);
        while (L && src[L - 1] == ' ') src[--L] = '\0';
        rows++;
        int files = 0;
        char seen[64][256];
        int ns = 0;
        for (size_t i = 0; i < all.n; i++) {
            if (strcmp(all.v[i].source, src)) continue;
            /* count distinct classes carrying this source */
            const char *c = strstr(all.v[i].id, "/regression/") + 12;
            char cls[256];
            snprintf(cls, sizeof cls, "%.*s", (int)(strchr(c, '/') - c), c);
            int dup = 0;
            for (int s = 0; s < ns; s++) dup |= !strcmp(seen[s], cls);
            if (!dup && ns < 64) strcpy(seen[ns++], cls), files++;
        }
        cr_expect_eq(files, 1, "row %d (%s): %d classes", num, src, files);
    }
    fclose(f);
    cr_expect_eq(rows, 27); /* rows 1-25, 29, 30 of the shared list (26-28 are no grouped-GEMM class) */
}

Test(regressions, ids_and_fields, .init = load_all, .fini = free_all)
{
    int adversarial = 0, nan = 0;
    for (size_t i = 0; i < all.n; i++) {
        const moects_case *c = &all.v[i];
        cr_expect_str_eq(c->model, "regression");
        cr_expect_str_eq(c->layout, "-");
        cr_expect(c->tiers != 0, "%s", c->id);
        if (c->tiers & MOECTS_TIER_SMOKE) cr_expect(c->tiers & MOECTS_TIER_FULL, "%s: smoke implies full", c->id);
        char moe[64];
        snprintf(moe, sizeof moe, "moe_gemm.%s/regression/", moects__moe_format_name(c->moe_format));
        const char *want = c->op == MOECTS_OP_EP_GATHER ? "ep_gather/regression/"
                           : c->op == MOECTS_OP_MOE_GEMM ? moe
                           : c->format == MOECTS_FP4_NVFP4 ? "fp4_gemm.nvfp4/regression/"
                                                           : "fp4_gemm.mxfp4/regression/";
        cr_expect_eq(strncmp(c->id, want, strlen(want)), 0, "%s", c->id);
        for (size_t j = 0; j < i; j++) cr_expect_str_neq(c->id, all.v[j].id);
        adversarial |= c->data == MOECTS_DATA_ADVERSARIAL;
        nan |= c->data == MOECTS_DATA_NAN;
        if (c->op == MOECTS_OP_EP_GATHER) {
            cr_expect(c->k <= c->E_global && c->ep_rank < c->ep_size, "%s", c->id);
            cr_expect(c->ep_size == 1 || c->has_map, "%s", c->id);
        }
    }
    cr_expect(adversarial && nan);
}

/* Rows 1-3: H values that 1024 does not divide, non-powers of two, odd widths, the latent widths. */
Test(regressions, block_divides_h_class, .init = load_all, .fini = free_all)
{
    size_t n = class_cases("block-divides-h", cs, MAXC);
    int h[8193] = {0};
    for (size_t i = 0; i < n && i < MAXC; i++)
        if (cs[i]->tiers & MOECTS_TIER_SMOKE && cs[i]->H <= 8192) h[cs[i]->H] = 1;
    static const int want[] = {3584, 896, 2880, 384, 7168, 5120, 1536, 1, 3, 100, 1000, 1025};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) cr_expect(h[want[i]], "smoke H=%d missing", want[i]);
    const moects_case *k3 = NULL;
    for (size_t i = 0; i < n && i < MAXC; i++)
        if (!strcmp(cs[i]->id, "ep_gather/regression/block-divides-h/kimi-k3-tp8/t128")) k3 = cs[i];
    cr_assert_not_null(k3);
    cr_expect_eq(k3->H, 3584);
    cr_expect_eq(k3->k, 16);
    cr_expect_eq(k3->E_global, 896);
    n = class_cases("latent-h-ep", cs, MAXC);
    int last = 0;
    for (size_t i = 0; i < n && i < MAXC; i++) {
        cr_expect(cs[i]->H == 896 || cs[i]->H == 3584, "%s", cs[i]->id);
        if (cs[i]->ep_size == 64 && cs[i]->ep_rank == 63) last = 1;
    }
    cr_expect(last, "no last-rank case at ep64");
    cr_expect_gt(class_cases("non-pow2-h", cs, MAXC), 10);
}

/* Rows 4-6: 64-bit addressing. LARGE cases whose buffers pass 2^31 elements (x: at least T*k rows
 * when all experts are local; out: T*H) or 2^31 bytes; cheap smoke stand-ins of the same class.
 * Exactly one large case is also in smoke (so the default run catches 32-bit offsets): the
 * cheapest of row 4's three, whose x all hold about 2.15e9 elements (52429*10*4096, 37500*8*7168,
 * 37500*16*3584): h3584/k16/t37500 has the fewest outputs (37500*3584 = 1.34e8 against 2.15e8
 * and 2.69e8). Smoke implies full, so its tiers are all three. */
Test(regressions, addr64_classes, .init = load_all, .fini = free_all)
{
    const char *classes[] = {"addr64-combine", "addr64-scatter", "addr64-skewed"};
    const char *smoke_large = "ep_gather/regression/addr64-combine/h3584/k16/t37500";
    const double two31 = 2147483648.0;
    int smoke_large_seen = 0;
    for (int k = 0; k < 3; k++) {
        size_t n = class_cases(classes[k], cs, MAXC);
        int large = 0, smoke = 0;
        for (size_t i = 0; i < n && i < MAXC; i++) {
            const moects_case *c = cs[i];
            if (c->tiers & MOECTS_TIER_SMOKE) smoke = 1;
            if (!(c->tiers & MOECTS_TIER_LARGE)) continue;
            if (!strcmp(c->id, smoke_large)) {
                cr_expect_eq(c->tiers, MOECTS_TIER_SMOKE | MOECTS_TIER_FULL | MOECTS_TIER_LARGE, "%s", c->id);
                cr_expect_eq(c->T * c->k * c->H, 2150400000);
                smoke_large_seen++;
            } else {
                cr_expect_eq(c->tiers, MOECTS_TIER_LARGE, "%s: large only", c->id);
            }
            cr_expect_eq(c->ep_size, 1, "%s", c->id);
            double x_elems = (double)c->T * c->k * c->H;
            double out_bytes = (double)c->T * c->H * (c->out_dtype == MOECTS_F32 ? 4 : 2);
            cr_expect(x_elems > two31 || out_bytes >= two31, "%s: under 2^31", c->id);
            cr_expect_leq(x_elems * 2, 5e9, "%s: x over 5 GB on a 24 GB CPU host", c->id);
            large = 1;
        }
        cr_expect(large && smoke, "%s: large %d smoke %d", classes[k], large, smoke);
    }
    cr_expect_eq(smoke_large_seen, 1);
    /* row 6's shape: 9 experts, skewed */
    size_t n = class_cases("addr64-skewed", cs, MAXC);
    for (size_t i = 0; i < n && i < MAXC; i++) cr_expect_eq(cs[i]->E_global, 9);
}

/* Rows 7-10: stale ids with a map, zero tokens (T = 0 and a rank with none), both id dtypes. */
Test(regressions, id_and_zero_token_classes, .init = load_all, .fini = free_all)
{
    size_t n = class_cases("stale-ids", cs, MAXC);
    int stale = 0, i64 = 0;
    for (size_t i = 0; i < n && i < MAXC; i++)
        if (cs[i]->routing == MOECTS_ROUTE_STALE_IDS) {
            cr_expect(cs[i]->has_map, "%s", cs[i]->id);
            stale++;
            i64 |= cs[i]->id_dtype == MOECTS_I64;
        }
    cr_expect_gt(stale, 10);
    cr_expect(i64);
    n = class_cases("zero-tokens", cs, MAXC);
    int t0 = 0, nolocal = 0, m0 = 0;
    for (size_t i = 0; i < n && i < MAXC; i++) {
        if (cs[i]->op == MOECTS_OP_EP_GATHER && cs[i]->T == 0) t0 = 1;
        if (cs[i]->routing == MOECTS_ROUTE_NO_LOCAL && cs[i]->T > 0 && cs[i]->ep_size > 1) nolocal = 1;
        if (cs[i]->op == MOECTS_OP_FP4_GEMM && cs[i]->M == 0) m0 = 1;
    }
    cr_expect(t0 && nolocal && m0);
    n = class_cases("zero-tokens-null", cs, MAXC);
    for (size_t i = 0; i < n && i < MAXC; i++) cr_expect(cs[i]->T == 0 && cs[i]->M == 0, "%s", cs[i]->id);
    n = class_cases("id-dtype", cs, MAXC);
    int d32 = 0, d64 = 0;
    for (size_t i = 0; i < n && i < MAXC; i++) {
        d32 |= cs[i]->id_dtype == MOECTS_I32;
        d64 |= cs[i]->id_dtype == MOECTS_I64;
    }
    cr_expect(d32 && d64);
}

/* Rows 11-20: the GEMM shape classes, both formats. */
Test(regressions, gemm_shape_classes, .init = load_all, .fini = free_all)
{
    int qwen192 = 0, n232 = 0, kodd = 0, kpart = 0, n10304 = 0, k3584[3] = {0}, n768 = 0, k1152 = 0, sw = 0;
    for (size_t i = 0; i < all.n; i++) {
        const moects_case *c = &all.v[i];
        if (c->op != MOECTS_OP_FP4_GEMM) continue;
        if (strstr(c->id, "/i-tp-not-128/") && c->K == 192 && c->N == 2048) qwen192 = 1;
        if (strstr(c->id, "/i-not-64/") && c->N == 232 && c->K == 2688 && !strcmp(c->gemm, "gemm1")) n232 = 1;
        if (strstr(c->id, "/k-tail/") && c->K % 2) kodd = 1;
        if (strstr(c->id, "/k-tail/") && c->K % 16 && c->K > 32) kpart = 1;
        if (strstr(c->id, "/n-not-128/") && c->N == 10304) n10304 = 1;
        if (strstr(c->id, "/scale-format/") && c->K == 3584) k3584[c->format] = 1;
        if (strstr(c->id, "/n768-grouped/") && c->M == 2048 && c->N == 768 && c->K == 4096) n768 = 1;
        if (strstr(c->id, "/k-scale-count/") && c->N == 7168 && c->K == 1152) k1152 = 1;
        sw |= c->scale_layout == MOECTS_SCALES_SWIZZLED_128X4;
    }
    cr_expect(qwen192 && n232 && kodd && kpart && n10304 && n768 && k1152 && sw);
    cr_expect(k3584[MOECTS_FP4_MXFP4] && k3584[MOECTS_FP4_NVFP4]);
    const moects_case *sp[64];
    size_t n = class_cases("sentinel-pad", sp, 64);
    int ep = 0, gm = 0;
    for (size_t i = 0; i < n && i < 64; i++) {
        ep |= sp[i]->op == MOECTS_OP_EP_GATHER && sp[i]->H == 2048 && sp[i]->k == 10 && sp[i]->E_global == 512;
        gm |= sp[i]->op == MOECTS_OP_FP4_GEMM && sp[i]->M % 128 && sp[i]->K == 64;
    }
    cr_expect(ep && gm);
}

/* ---- loader ------------------------------------------------------------------------------------ */

static void mk_tmp(void) { mk_tmpdir("/tmp/moects-test-reg-XXXXXX"); }
static const char *put(const char *text)
{
    static char path[512];
    static int k;
    snprintf(path, sizeof path, "%s/r%d.json", tmpdir, k++);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
    return path;
}

#define HEAD "{\"source\": \"x/y issue 1\", \"class\": \"cls\", \"cases\": ["
static void expect_err(const char *entry, const char *suffix)
{
    char text[2048], err[512] = "", want[1024];
    snprintf(text, sizeof text, HEAD "%s]}", entry);
    const char *p = put(text);
    moects_case_list l = {0};
    cr_expect_eq(moects__regressions_load(p, &l, err, sizeof err), -1, "loaded %s", entry);
    cr_expect_eq(l.n, 0, "partial load");
    snprintf(want, sizeof want, "%s%s", p, suffix);
    cr_expect_str_eq(err, want);
    moects__case_list_free(&l);
}

#define G "\"op\": \"ep_gather\", \"tiers\": [\"smoke\"], \"k\": 2, \"E\": 8, "
Test(regressions, loader_expands_lists, .init = mk_tmp, .fini = rm_tmp)
{
    const char *p = put(HEAD "{" G "\"name\": \"h{H}/t{T}/r{ep_rank}\", \"H\": [1, 2], \"T\": [3, 4], \"ep_size\": 4,"
                        " \"ep_rank\": \"last\"},"
                        "{\"op\": \"fp4_gemm\", \"tiers\": [\"large\"], \"name\": \"m{M}\", \"format\": [\"mxfp4\", "
                        "\"nvfp4\"], \"M\": 0, \"N\": 3, \"K\": 5, \"scale_layout\": \"swizzled\", \"gemm\": \"gemm2\"}]}");
    moects_case_list l = {0};
    char err[512] = "";
    cr_assert_eq(moects__regressions_load(p, &l, err, sizeof err), 0, "%s", err);
    cr_assert_eq(l.n, 6);
    const char *ids[] = {"ep_gather/regression/cls/h1/t3/r3", "ep_gather/regression/cls/h2/t3/r3",
                         "ep_gather/regression/cls/h1/t4/r3", "ep_gather/regression/cls/h2/t4/r3",
                         "fp4_gemm.mxfp4/regression/cls/m0", "fp4_gemm.nvfp4/regression/cls/m0"};
    for (int i = 0; i < 6; i++) {
        int found = 0;
        for (size_t j = 0; j < l.n; j++) found |= !strcmp(l.v[j].id, ids[i]);
        cr_expect(found, "missing %s", ids[i]);
    }
    for (size_t j = 0; j < 4; j++) {
        cr_expect_eq(l.v[j].ep_rank, 3);
        cr_expect_eq(l.v[j].has_map, 1);
        cr_expect_eq(l.v[j].tiers, MOECTS_TIER_SMOKE | MOECTS_TIER_FULL);
        cr_expect_str_eq(l.v[j].source, "x/y issue 1");
    }
    cr_expect_eq(l.v[4].tiers, MOECTS_TIER_LARGE);
    cr_expect_eq(l.v[4].scale_layout, MOECTS_SCALES_SWIZZLED_128X4);
    cr_expect_str_eq(l.v[4].gemm, "gemm2");
    cr_expect_eq(l.v[5].format, MOECTS_FP4_NVFP4);
    moects__case_list_free(&l);
}

Test(regressions, loader_errors, .init = mk_tmp, .fini = rm_tmp)
{
    expect_err("{" G "\"name\": \"h{H}\", \"H\": [1, 2], \"T\": [3, 4]}",
               ": cases[0].name: T has 2 values but {T} is not in \"h{H}\" (ids would repeat)");
    expect_err("{" G "\"name\": \"h{H}/{M}\", \"H\": 1, \"T\": 3}", ": cases[0].name: unknown placeholder {M}");
    expect_err("{" G "\"name\": \"a\", \"H\": 1, \"T\": 3, \"colour\": 2}", ": cases[0].colour: unknown field");
    expect_err("{" G "\"name\": \"a\", \"H\": 1}", ": cases[0].T: missing field");
    expect_err("{" G "\"name\": \"a\", \"H\": 0, \"T\": 1}", ": cases[0].H: non-positive size (0)");
    expect_err("{" G "\"name\": \"a\", \"H\": 1, \"T\": -1}", ": cases[0].T: negative (-1)");
    expect_err("{" G "\"name\": \"a\", \"H\": \"wide\", \"T\": 1}", ": cases[0].H: wrong type (expected integer)");
    expect_err("{" G "\"name\": \"a\", \"H\": 1, \"T\": 1, \"routing\": \"random\"}",
               ": cases[0].routing: unknown value \"random\" (uniform, skewed, zero-expert, hot-rank, stale-ids, "
               "neg-ids, no-local)");
    expect_err("{" G "\"name\": \"a\", \"H\": 1, \"T\": 1, \"routing\": \"stale-ids\"}",
               ": cases[0].routing: stale-ids needs an expert_map (map: true)");
    expect_err("{" G "\"name\": \"a\", \"H\": 1, \"T\": 1, \"ep_size\": 2, \"ep_rank\": 2}",
               ": cases[0].ep_rank: not below ep_size (2 >= 2)");
    expect_err("{" G "\"name\": \"a\", \"H\": 1, \"T\": 1, \"ep_size\": 16}", ": cases[0].ep_size: exceeds E (16 > 8)");
    expect_err("{\"op\": \"ep_gather\", \"tiers\": [\"smoke\"], \"k\": 9, \"E\": 8, \"name\": \"a\", \"H\": 1, \"T\": 1}",
               ": cases[0].k: exceeds E (9 > 8)");
    expect_err("{" G "\"name\": \"a\", \"H\": 1, \"T\": 1}, {" G "\"name\": \"a\", \"H\": 2, \"T\": 1}",
               ": cases[1]: duplicate id ep_gather/regression/cls/a");
    expect_err("{" G "\"name\": \"a\", \"H\": 1, \"T\": 1, \"M\": 4}", ": cases[0].M: not a field of ep_gather");
    expect_err("{\"op\": \"fp4_gemm\", \"tiers\": [\"weekly\"], \"name\": \"a\", \"M\": 1, \"N\": 1, \"K\": 1, "
               "\"format\": \"mxfp4\"}",
               ": cases[0].tiers[0]: not one of smoke, full, large");
    expect_err("{\"op\": \"fp4_gemm\", \"tiers\": [\"full\"], \"name\": \"a\", \"M\": 1, \"N\": 1, \"K\": 1, "
               "\"format\": \"fp8\"}",
               ": cases[0].format: unknown value \"fp8\" (mxfp4, nvfp4)");
    expect_err("{\"op\": \"gemm\"}", ": cases[0].op: unknown value \"gemm\" (ep_gather, fp4_gemm, moe_gemm)");

    char err[512] = "";
    moects_case_list l = {0};
    const char *p = put("{\"source\": \"x\", \"cases\": []}");
    cr_expect_eq(moects__regressions_load(p, &l, err, sizeof err), -1);
    cr_expect(strstr(err, ": class: missing field") != NULL, "%s", err);
    p = put("{\"source\": \"x\", \"class\": \"Bad Class\", \"cases\": [{}]}");
    cr_expect_eq(moects__regressions_load(p, &l, err, sizeof err), -1);
    cr_expect(strstr(err, ": class: not a short class name (a-z 0-9 -)") != NULL, "%s", err);
    p = put("{\"source\": \"x\", \"class\": \"c\",\n \"cases\": [}");
    cr_expect_eq(moects__regressions_load(p, &l, err, sizeof err), -1);
    cr_expect(strstr(err, ":2:") && strstr(err, ": malformed JSON: "), "%s", err);
    cr_expect_eq(l.n, 0);
}

/* Load-time bounds (cases_internal.h): T, M, N, K <= 2^24 = 16777216, H <= 2^20 = 1048576,
 * E <= 2^16 = 65536, k <= 1024. */
#define F "\"op\": \"fp4_gemm\", \"tiers\": [\"full\"], \"format\": \"mxfp4\", "
Test(regressions, sizes_out_of_range, .init = mk_tmp, .fini = rm_tmp)
{
    expect_err("{" G "\"name\": \"a\", \"H\": 1, \"T\": 16777217}", ": cases[0].T: out of range (0..16777216)");
    expect_err("{" G "\"name\": \"a\", \"H\": 4611686018427387904, \"T\": 1}",
               ": cases[0].H: out of range (1..1048576)");
    expect_err("{" G "\"name\": \"h{H}\", \"H\": [8, 1048577], \"T\": 1}", ": cases[0].H: out of range (1..1048576)");
    expect_err("{\"op\": \"ep_gather\", \"tiers\": [\"full\"], \"k\": 2, \"E\": 2147483647, \"name\": \"a\", "
               "\"H\": 1, \"T\": 1}",
               ": cases[0].E: out of range (1..65536)");
    expect_err("{\"op\": \"ep_gather\", \"tiers\": [\"full\"], \"k\": 2, \"E\": 4294967296, \"name\": \"a\", "
               "\"H\": 1, \"T\": 1}",
               ": cases[0].E: out of range (1..65536)");
    expect_err("{\"op\": \"ep_gather\", \"tiers\": [\"full\"], \"k\": 1025, \"E\": 4096, \"name\": \"a\", "
               "\"H\": 1, \"T\": 1}",
               ": cases[0].k: out of range (1..1024)");
    expect_err("{" F "\"name\": \"a\", \"M\": 16777217, \"N\": 1, \"K\": 32}", ": cases[0].M: out of range (0..16777216)");
    expect_err("{" F "\"name\": \"a\", \"M\": 1, \"N\": 2147483648, \"K\": 32}", ": cases[0].N: out of range (1..16777216)");
    expect_err("{" F "\"name\": \"a\", \"M\": 1, \"N\": 1, \"K\": 1099511627776}", ": cases[0].K: out of range (1..16777216)");

    /* the bounds themselves load */
    char text[1024], err[512] = "";
    snprintf(text, sizeof text, HEAD "{\"op\": \"ep_gather\", \"tiers\": [\"large\"], \"k\": 1024, \"E\": 65536, "
             "\"name\": \"a\", \"H\": 1048576, \"T\": 16777216}, {" F "\"name\": \"b\", \"M\": 16777216, "
             "\"N\": 16777216, \"K\": 16777216}]}");
    moects_case_list l = {0};
    cr_assert_eq(moects__regressions_load(put(text), &l, err, sizeof err), 0, "%s", err);
    cr_assert_eq(l.n, 2);
    cr_expect_eq(l.v[0].T, 16777216);
    cr_expect_eq(l.v[0].H, 1048576);
    cr_expect_eq(l.v[0].E_global, 65536);
    cr_expect_eq(l.v[0].k, 1024);
    cr_expect_eq(l.v[1].M, 16777216);
    cr_expect_eq(l.v[1].K, 16777216);
    moects__case_list_free(&l);
}

/* "{G name: a, T: [0..nt-1], H: [1..nh]}" as a whole file, in a malloc'd buffer. */
static char *grid(int nt, int nh, const char *extra)
{
    size_t cap = 64 + 16 * (size_t)(nt + nh) + strlen(extra) + 256;
    char *b = malloc(cap);
    cr_assert_not_null(b);
    size_t o = (size_t)snprintf(b, cap, HEAD "%s{" G "\"name\": \"h{H}/t{T}\", \"T\": [", extra);
    for (int i = 0; i < nt; i++) o += (size_t)snprintf(b + o, cap - o, "%s%d", i ? ", " : "", i);
    o += (size_t)snprintf(b + o, cap - o, "], \"H\": [");
    for (int i = 0; i < nh; i++) o += (size_t)snprintf(b + o, cap - o, "%s%d", i ? ", " : "", i + 1);
    snprintf(b + o, cap - o, "]}]}");
    return b;
}

/* One file expands to at most 10000 cases; the count is checked before expanding. */
Test(regressions, expansion_capped, .init = mk_tmp, .fini = rm_tmp)
{
    char err[512] = "", want[1024];
    moects_case_list l = {0};
    char *t = grid(2999, 2999, ""); /* the user's 39 KB file: 2999 * 2999 = 8994001 cases */
    const char *p = put(t);
    free(t);
    cr_expect_eq(moects__regressions_load(p, &l, err, sizeof err), -1);
    snprintf(want, sizeof want, "%s: cases: expands to 8994001 cases (max 10000)", p);
    cr_expect_str_eq(err, want);
    cr_expect_eq(l.n, 0);

    /* two entries: 1 + 100 * 100 = 10001 */
    t = grid(100, 100, "{" G "\"name\": \"one\", \"H\": 1, \"T\": 1}, ");
    p = put(t);
    free(t);
    cr_expect_eq(moects__regressions_load(p, &l, err, sizeof err), -1);
    snprintf(want, sizeof want, "%s: cases: expands to 10001 cases (max 10000)", p);
    cr_expect_str_eq(err, want);
    cr_expect_eq(l.n, 0);

    /* 1024^7 = 2^70 combinations saturate the count at SIZE_MAX = 2^64 - 1 */
    size_t cap = 1 << 17, o = 0;
    char *b = malloc(cap);
    cr_assert_not_null(b);
    o += (size_t)snprintf(b + o, cap - o, HEAD "{" G "\"name\": \"x\"");
    static const char *const keys[] = {"T", "H", "ep_size", "ep_rank", "M", "N", "K"};
    for (int f = 0; f < 7; f++) {
        o += (size_t)snprintf(b + o, cap - o, ", \"%s\": [", keys[f]);
        for (int i = 0; i < 1024; i++) o += (size_t)snprintf(b + o, cap - o, "%s%d", i ? ", " : "", i + 1);
        o += (size_t)snprintf(b + o, cap - o, "]");
    }
    snprintf(b + o, cap - o, "}]}");
    p = put(b);
    free(b);
    cr_expect_eq(moects__regressions_load(p, &l, err, sizeof err), -1);
    snprintf(want, sizeof want, "%s: cases: expands to more than 18446744073709551614 cases (max 10000)", p);
    cr_expect_str_eq(err, want);

    /* exactly 100 * 100 = 10000 loads */
    t = grid(100, 100, "");
    p = put(t);
    free(t);
    cr_assert_eq(moects__regressions_load(p, &l, err, sizeof err), 0, "%s", err);
    cr_expect_eq(l.n, 10000);
    moects__case_list_free(&l);
}
