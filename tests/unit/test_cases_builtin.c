/* test_cases_builtin.c: the built-in registry (models x layouts + regressions), its id rules and
 * the must-pass lists. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "moects_cases.h"

static moects_case_list all;
static void load_all(void)
{
    char err[512] = "";
    cr_assert_eq(moects__cases_builtin(MOECTS_SOURCE_DIR, &all, err, sizeof err), 0, "%s", err);
}
static void free_all(void) { moects__case_list_free(&all); }

static const moects_case *find(const char *id)
{
    for (size_t i = 0; i < all.n; i++)
        if (!strcmp(all.v[i].id, id)) return &all.v[i];
    return NULL;
}

static int cmp_id(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

Test(builtin, ids_unique_well_formed_and_matching_the_op, .init = load_all, .fini = free_all)
{
    cr_assert_gt(all.n, 1000);
    const char **ids = malloc(all.n * sizeof *ids);
    for (size_t i = 0; i < all.n; i++) {
        const moects_case *c = &all.v[i];
        ids[i] = c->id;
        cr_expect_null(strpbrk(c->id, " \t\n*?[]"), "%s", c->id);
        cr_expect(c->tiers, "%s: no tier", c->id);
        char want[96];
        if (c->op == MOECTS_OP_EP_GATHER)
            snprintf(want, sizeof want, "ep_gather/%s/", c->model);
        else if (c->op == MOECTS_OP_MOE_GEMM)
            snprintf(want, sizeof want, "moe_gemm.%s/%s/", moects__moe_format_name(c->moe_format), c->model);
        else if (c->op == MOECTS_OP_FUSED_MOE)
            snprintf(want, sizeof want, "fused_moe.%s/%s/", moects__layer_format_name(c->layer_format), c->model);
        else if (c->op == MOECTS_OP_MOE_ROUTE)
            snprintf(want, sizeof want, "moe_route/%s/t", c->model); /* no layout: the router is replicated */
        else if (c->op == MOECTS_OP_EP_DISPATCH_COMBINE)
            snprintf(want, sizeof want, "ep_dispatch_combine/%s/", c->model);
        else
            snprintf(want, sizeof want, "fp4_gemm.%s/%s/", c->format == MOECTS_FP4_NVFP4 ? "nvfp4" : "mxfp4", c->model);
        cr_expect_eq(strncmp(c->id, want, strlen(want)), 0, "%s does not start with %s", c->id, want);
        if (strcmp(c->model, "regression") && c->op != MOECTS_OP_MOE_ROUTE) {
            size_t L = strlen(want);
            cr_expect_eq(strncmp(c->id + L, c->layout, strlen(c->layout)), 0, "%s: layout %s", c->id, c->layout);
        }
    }
    qsort(ids, all.n, sizeof *ids, cmp_id);
    for (size_t i = 1; i < all.n; i++) cr_expect_str_neq(ids[i - 1], ids[i]);
    free(ids);
}

/* Ids are the keys of gates and must-pass lists: these, written by hand, must keep existing. */
Test(builtin, stable_ids, .init = load_all, .fini = free_all)
{
    static const char *const ids[] = {
        "ep_gather/kimi-k3/tp8/t128",
        "ep_gather/deepseek-v3/ep8/t4096",
        "fp4_gemm.mxfp4/deepseek-v3/tp8/gemm1/m256",
        "fp4_gemm.nvfp4/kimi-k3/ep8/gemm2/m100",
        "fp4_gemm.mxfp4/deepseek-v4-flash/ep8/gemm1/m256",
        "ep_gather/gpt-oss-120b/tp1/t1",
        "ep_gather/nemotron-3-nano-30b-a3b/ep64/t16",
        "ep_gather/qwen3-30b-a3b/tp4/t2",
        "ep_gather/regression/block-divides-h/h3584/t64",
        "ep_gather/regression/block-divides-h/kimi-k3-tp8/t128",
        "ep_gather/regression/addr64-combine/h4096/k10/t52429",
        "ep_gather/regression/zero-tokens/t0/h7168/ep8",
        "fp4_gemm.mxfp4/regression/k-scale-count/n7168/k1152/m16",
        "fp4_gemm.nvfp4/regression/n-not-128/n10304/k2688/m5",
        "moe_gemm.w4a16/gpt-oss-120b/tp8/contiguous/gemm1/t4096",
        "moe_gemm.nvfp4/deepseek-v3/ep8/masked/gemm2/windows",
        "moe_gemm.nvfp4/regression/moe-scale-stride/e32/n2880/k1600/contiguous/swizzled",
    };
    for (size_t i = 0; i < sizeof ids / sizeof *ids; i++) cr_expect_not_null(find(ids[i]), "missing %s", ids[i]);
    const moects_case *c = find("ep_gather/regression/addr64-combine/h4096/k10/t52429");
    cr_assert_not_null(c);
    cr_expect_eq(c->tiers, MOECTS_TIER_LARGE);
}

/* Cost guards of the tiers (derive.c's budget comment): smoke GEMMs small; the full tier's FP4
 * GEMM FLOPs under 5e14. */
Test(builtin, tier_budgets, .init = load_all, .fini = free_all)
{
    double full = 0, smoke = 0;
    size_t ns = 0;
    for (size_t i = 0; i < all.n; i++) {
        const moects_case *c = &all.v[i];
        if (c->op != MOECTS_OP_FP4_GEMM) continue;
        double f = 2.0 * c->M * c->N * c->K;
        if (c->tiers & MOECTS_TIER_FULL) full += f;
        if (c->tiers & MOECTS_TIER_SMOKE) {
            smoke += f;
            ns++;
            /* M past 129 only in the narrow past-the-registry cases (M 65600, N 16, K 32) */
            cr_expect(c->M <= 129 || (double)c->M * c->N * c->K <= 4e7, "%s", c->id);
            cr_expect_leq((double)c->M * c->N * c->K, 1e9, "%s: smoke case too big", c->id);
        }
    }
    cr_expect_lt(full, 5e14, "full-tier FP4 GEMM FLOPs %.3g", full);
    cr_expect_lt(smoke, 5e10, "smoke-tier FP4 GEMM FLOPs %.3g", smoke);
    cr_expect_gt(ns, 0);
}

/* moe_gemm cost guards (derive_moe.c's budget comment): a smoke case's local weights at most 2^28
 * codes and its expected valid rows x N x K at most 5e8 multiply-adds (the scalar CPU kernels run
 * every smoke case); FULL cases at most 2^31 weight codes (above: LARGE). */
Test(builtin, moe_tier_budgets, .init = load_all, .fini = free_all)
{
    size_t ns = 0;
    for (size_t i = 0; i < all.n; i++) {
        const moects_case *c = &all.v[i];
        if (c->op != MOECTS_OP_MOE_GEMM) continue;
        double w = (double)c->E * c->N * c->K, macs = moects__moe_expected_rows(c) * c->N * c->K;
        if (c->tiers & MOECTS_TIER_FULL) cr_expect_leq(w, 2147483648.0, "%s: %.3g weight codes", c->id, w);
        if (!(c->tiers & MOECTS_TIER_SMOKE)) continue;
        ns++;
        cr_expect_leq(w, 268435456.0, "%s: %.3g weight codes", c->id, w);
        cr_expect_leq(macs, 5e8, "%s: %.3g multiply-adds", c->id, macs);
    }
    cr_expect_geq(ns, 23);
}

Test(builtin, mustpass_lists_name_existing_cases, .init = load_all, .fini = free_all)
{
    DIR *d = opendir(MOECTS_SOURCE_DIR "/cases/mustpass");
    cr_assert_not_null(d);
    struct dirent *e;
    int files = 0;
    while ((e = readdir(d))) {
        size_t L = strlen(e->d_name);
        if (L < 5 || strcmp(e->d_name + L - 4, ".txt")) continue;
        char path[512], err[512] = "";
        snprintf(path, sizeof path, "%s/cases/mustpass/%s", MOECTS_SOURCE_DIR, e->d_name);
        char **ids;
        int n = moects__idlist_load(path, &ids, err, sizeof err);
        cr_assert_gt(n, 0, "%s %s", path, err);
        for (int i = 0; i < n; i++) {
            const moects_case *c = find(ids[i]);
            cr_expect_not_null(c, "%s: unknown id %s", e->d_name, ids[i]);
            if (c && !strcmp(e->d_name, "smoke-core.txt"))
                cr_expect(c->tiers & MOECTS_TIER_SMOKE, "smoke-core: %s not smoke", ids[i]);
        }
        if (!strcmp(e->d_name, "smoke-core.txt")) cr_expect(n >= 24 && n <= 100, "smoke-core: %d ids", n);
        moects__idlist_free(ids, (size_t)n);
        files++;
    }
    closedir(d);
    cr_expect_geq(files, 2);
}

/* ---- temp registries ---------------------------------------------------------------------------- */

static char root[256];
static void mk_root(void)
{
    snprintf(root, sizeof root, "/tmp/moects-test-builtin-XXXXXX");
    cr_assert_not_null(mkdtemp(root));
    char p[512];
    snprintf(p, sizeof p, "%s/cases", root);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/cases/models", root);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/cases/regressions", root);
    mkdir(p, 0755);
}
static void rm_root(void)
{
    const char *sub[] = {"cases/models", "cases/regressions", "cases", ""};
    for (int s = 0; s < 4; s++) {
        char dir[512];
        snprintf(dir, sizeof dir, "%s/%s", root, sub[s]);
        DIR *d = opendir(dir);
        struct dirent *e;
        while (d && (e = readdir(d))) {
            if (e->d_name[0] == '.') continue;
            char p[1024];
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            unlink(p);
        }
        if (d) closedir(d);
        rmdir(dir);
    }
}
static void put(const char *rel, const char *text)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", root, rel);
    FILE *f = fopen(p, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
}
#define TOY(name)                                                                                              \
    "{\"name\": \"" name "\", \"hf_id\": \"o/t\", \"hidden_size\": 64, \"moe_intermediate_size\": 32, "       \
    "\"routed_experts\": 4, \"experts_per_token\": 2, \"shared_experts\": 0, \"latent_size\": null, \"gated\": " \
    "true, \"activation\": \"silu\", \"activation_limit\": null, \"activation_alpha\": null, "                 \
    "\"expert_bias\": false, \"router_weight_on_input\": false, "                                         \
    "\"scoring_func\": \"softmax\", \"topk_before_scoring\": false, \"n_group\": 1, \"topk_group\": 1, \"routed_scaling_factor\": 1.0, \"norm_topk_prob\": true, \"e_score_correction_bias\": false, "        \
    "\"release_quantization\": \"bf16\", "          \
    "\"source\": \"hand\"}"
#define REGF "{\"source\": \"x/y PR 1\", \"class\": \"c\", \"cases\": [{\"op\": \"ep_gather\", \"name\": \"a\", " \
             "\"tiers\": [\"smoke\"], \"T\": 1, \"k\": 1, \"H\": 8, \"E\": 2}]}"

Test(builtin, duplicate_ids_across_files_are_an_error, .init = mk_root, .fini = rm_root)
{
    put("cases/models/toy.json", TOY("toy"));
    put("cases/regressions/a.json", REGF);
    moects_case_list l = {0};
    char err[512] = "";
    cr_assert_eq(moects__cases_builtin(root, &l, err, sizeof err), 0, "%s", err);
    cr_expect_not_null(strstr(l.v[0].id, "/toy/"));
    cr_expect_str_eq(l.v[l.n - 1].id, "ep_gather/regression/c/a");
    moects__case_list_free(&l);
    put("cases/regressions/b.json", REGF);
    cr_expect_eq(moects__cases_builtin(root, &l, err, sizeof err), -1);
    cr_expect_str_eq(err, "case id ep_gather/regression/c/a: duplicate (from x/y PR 1 and from x/y PR 1)");
    cr_expect_eq(l.n, 0);
    moects__case_list_free(&l);
}

Test(builtin, model_files_named_after_their_model, .init = mk_root, .fini = rm_root)
{
    put("cases/models/toy.json", TOY("other"));
    moects_case_list l = {0};
    char err[512] = "", want[600];
    cr_expect_eq(moects__cases_builtin(root, &l, err, sizeof err), -1);
    snprintf(want, sizeof want, "%s/cases/models/toy.json: name: model \"other\" must be in a file named other.json",
             root);
    cr_expect_str_eq(err, want);
    put("cases/models/toy.json", TOY("regression"));
    put("cases/models/regression.json", TOY("regression"));
    cr_expect_eq(moects__cases_builtin(root, &l, err, sizeof err), -1);
    cr_expect(strstr(err, "\"regression\" is reserved") != NULL, "%s", err);
    unlink(strcat(strcpy(want, root), "/cases/models/regression.json"));
}

Test(builtin, idlist_format, .init = mk_root, .fini = rm_root)
{
    put("cases/l.txt", "# header\n\n  ep_gather/a/tp1/t1  \nfp4_gemm.mxfp4/b/tp8/gemm1/m16 # trailing\n\t\n");
    char p[512], err[512] = "";
    snprintf(p, sizeof p, "%s/cases/l.txt", root);
    char **ids;
    cr_assert_eq(moects__idlist_load(p, &ids, err, sizeof err), 2, "%s", err);
    cr_expect_str_eq(ids[0], "ep_gather/a/tp1/t1");
    cr_expect_str_eq(ids[1], "fp4_gemm.mxfp4/b/tp8/gemm1/m16");
    moects__idlist_free(ids, 2);
    put("cases/l.txt", "ok/1\nbad id\n");
    cr_expect_eq(moects__idlist_load(p, &ids, err, sizeof err), -1);
    char want[700];
    snprintf(want, sizeof want, "%s:2: blank inside a case id: \"bad id\"", p);
    cr_expect_str_eq(err, want);
    /* a UTF-8 byte order mark before the first id (EF BB BF) is not part of it */
    put("cases/l.txt", "\xEF\xBB\xBF" "ep_gather/a/tp1/t1\r\n");
    cr_assert_eq(moects__idlist_load(p, &ids, err, sizeof err), 1, "%s", err);
    cr_expect_str_eq(ids[0], "ep_gather/a/tp1/t1");
    moects__idlist_free(ids, 1);
}
