/* test_harness_coverage.c: `moects coverage` (harness/report/coverage.c): the models x layouts x kernels
 * table of a hand-built run (tests/fixtures/data/coverage/run.json, against an empty registry so that every
 * cell comes from the fixture; expected.md worked out by hand from it), the HTML page's structure,
 * and the pre-launch check of Kimi K3 at TP8 against a registry copy without kimi-k3. Bad input
 * (a layout the model cannot be split into, an unwritable --out, a registry without model files) is
 * checked for its exit status, its one stderr line, an empty stdout and no report directory. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "moects_cases.h"
#include "moects_commands.h"
#include "moects_harness.h"

#define DATA MOECTS_SOURCE_DIR "/tests/fixtures/data/coverage/"
#define KIMI_K3 MOECTS_SOURCE_DIR "/../shared/data/hf-configs/moonshotai--Kimi-K3.config.json"
#define DSV32 MOECTS_SOURCE_DIR "/../shared/data/hf-configs/deepseek-ai--DeepSeek-V3.2.config.json"

static char tmpdir[64], reg[128], out[128], errfile[160];

static void setup(void)
{
    strcpy(tmpdir, "/tmp/moects_cov_XXXXXX");
    cr_assert_not_null(mkdtemp(tmpdir));
    snprintf(reg, sizeof reg, "%s/registry", tmpdir);
    snprintf(out, sizeof out, "%s/out", tmpdir);
    snprintf(errfile, sizeof errfile, "%s/stderr.txt", tmpdir);
    cr_assert_eq(mkdir(reg, 0777), 0);
    cr_assert_not_null(freopen(errfile, "w", stderr));
    cr_assert_not_null(freopen("/dev/null", "w", stdout));
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    cr_assert_eq(system(cmd), 0);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "%s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *buf = calloc(1, (size_t)n + 1);
    cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    return buf;
}

static int coverage(int argc, const char **argv)
{
    int rc = moects__cmd_coverage(argc, (char **)argv);
    fflush(stdout);
    fflush(stderr);
    return rc;
}

static size_t count(const char *hay, const char *needle)
{
    size_t n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
}

/* text with @RUN@, @REG@ and @PROG@ (the program repro lines call: this binary) replaced */
static char *expand(const char *t)
{
    char *o = calloc(1, strlen(t) + 16384);
    for (const char *p = t; *p;) {
        if (!strncmp(p, "@RUN@", 5)) strcat(o, DATA "run.json"), p += 5;
        else if (!strncmp(p, "@PROG@", 6)) strcat(o, moects__self_program()), p += 6;
        else if (!strncmp(p, "@REG@", 5)) strcat(o, reg), p += 5;
        else strncat(o, p++, 1);
    }
    return o;
}

Test(coverage, markdown_table_of_a_hand_built_run, .init = setup, .fini = teardown)
{
    const char *argv[] = {"coverage", DATA "run.json", "--registry", reg, "--out", out};
    cr_assert_eq(coverage(6, argv), 0, "%s", slurp(errfile));
    char path[192];
    snprintf(path, sizeof path, "%s/coverage.md", out);
    char *got = slurp(path), *t = slurp(DATA "expected.md"), *want = expand(t);
    cr_assert_str_eq(got, want);
    free(got);
    free(t);
    free(want);
    /* written atomically: the two reports and nothing else */
    char cmd[256];
    snprintf(cmd, sizeof cmd, "test \"$(ls %s | tr '\\n' ' ')\" = 'coverage.html coverage.md '", out);
    cr_assert_eq(system(cmd), 0);
}

Test(coverage, html_page_is_self_contained_with_one_svg_per_kernel, .init = setup, .fini = teardown)
{
    const char *argv[] = {"coverage", DATA "run.json", "--registry", reg, "--out", out};
    cr_assert_eq(coverage(6, argv), 0);
    char path[192];
    snprintf(path, sizeof path, "%s/coverage.html", out);
    char *h = slurp(path);
    cr_assert_eq(strncmp(h, "<!DOCTYPE html>\n", 16), 0);
    cr_assert_eq(count(h, "<svg "), 2);    /* k.eg, k.fg; the mutant m.eg is not a row */
    cr_assert_eq(count(h, "<g class=\"cell "), 12); /* 2 kernels x 2 models x 3 layouts */
    /* states by hand (expected.md): PASS 2, FAIL 1, UNSUPPORTED 1, NOT_REGISTERED 7, NOT_RUN 1 */
    cr_assert_eq(count(h, "<g class=\"cell s0\">"), 2);
    cr_assert_eq(count(h, "<g class=\"cell s1\">"), 1);
    cr_assert_eq(count(h, "<g class=\"cell s2\">"), 1);
    cr_assert_eq(count(h, "<g class=\"cell s3\">"), 7);
    cr_assert_eq(count(h, "<g class=\"cell s4\">"), 1);
    /* the failing and the refused cell link to their rows (ids by hand: kernel, model, layout with
     * '.' as '-'), and a row carries its first bad case's repro line */
    cr_assert_not_null(strstr(h, "<a href=\"#cell-k-eg-alpha-ep8\"><g class=\"cell s1\">"));
    cr_assert_not_null(strstr(h, "<a href=\"#cell-k-eg-alpha-tp8\"><g class=\"cell s2\">"));
    cr_assert_eq(count(h, "<a href=\"#cell-"), 2);
    cr_assert_not_null(strstr(h, "<tr id=\"cell-k-eg-alpha-ep8\">"));
    cr_assert_not_null(strstr(h, " run --kernel k.eg --seed 0 --out reports/repro/ep_gather_alpha_ep8_t1 "
                                 "ep_gather/alpha/ep8/t1</code>"));
    /* the hover title of alpha x ep8 on k.eg names the failing case first */
    cr_assert_not_null(strstr(h, "<title>alpha x ep8 on k.eg: FAIL\nnot in the registry; run: 1 FAIL_MISMATCH, "
                                 "1 UNSUPPORTED\nfirst: ep_gather/alpha/ep8/t1: FAIL_MISMATCH (2 mismatches)</title>"),
                      "%s", h);
    /* self-contained: no script, no fetched resource (links go to rows of the page itself) */
    cr_assert_null(strstr(h, "<script"));
    cr_assert_null(strstr(h, "src="));
    cr_assert_eq(count(h, "href="), count(h, "href=\"#")); /* in-page links only */
    cr_assert_null(strstr(h, "@import"));
    cr_assert_null(strstr(h, "url("));
    cr_assert_eq(count(h, "http"), 2); /* the SVG namespace, twice */
    cr_assert_eq(count(h, "xmlns=\"http://www.w3.org/2000/svg\""), 2);
    free(h);
}

Test(coverage, bad_input_exits_2, .init = setup, .fini = teardown)
{
    const char *a1[] = {"coverage", DATA "no_such.json", "--registry", reg, "--out", out};
    cr_assert_eq(coverage(6, a1), 2);
    const char *a2[] = {"coverage", "--tp", "8"};
    cr_assert_eq(coverage(3, a2), 2);
    const char *a3[] = {"coverage", "--config", DATA "no_such.json", "--tp", "8"};
    cr_assert_eq(coverage(5, a3), 2);
    const char *a4[] = {"coverage", "--config", DATA "run.json", "--tp", "0"};
    cr_assert_eq(coverage(5, a4), 2);
    const char *a5[] = {"coverage", DATA "run.json", "--registry", DATA "no_such_dir"};
    cr_assert_eq(coverage(4, a5), 2);
    char *e = slurp(errfile);
    cr_assert_not_null(strstr(e, "--tp: \"0\" is not a parallel size (1..1024)\n"), "%s", e);
    cr_assert_not_null(strstr(e, DATA "no_such_dir: --registry: not a directory\n"), "%s", e);
    free(e);
}

/* Kimi K3 (hf-configs, text_config): hidden 7168, routed_expert_hidden_size (latent) 3584,
 * moe_intermediate_size 3072, num_experts 896, num_experts_per_token 16, gated. At TP8 (DESIGN.md
 * derivation): ep_gather H = 3584, topk 16, E 896; gemm1 N = 2*3072/8 = 768, K = 3584; gemm2
 * N = 3584, K = 3072/8 = 384. No other registered model has an ep_gather width of 3584, and no
 * other has a (768, 3584) or (3584, 384) GEMM, so all three are uncovered without kimi-k3. */
Test(coverage, prelaunch_flags_kimi_k3_latent_width, .init = setup, .fini = teardown)
{
    if (access(KIMI_K3, R_OK)) cr_skip_test("%s not present", KIMI_K3);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "cp %s/cases/models/*.json %s/ && rm %s/kimi-k3.json", MOECTS_SOURCE_DIR, reg, reg);
    cr_assert_eq(system(cmd), 0);
    const char *argv[] = {"coverage", "--config", KIMI_K3, "--tp", "8", "--registry", reg, "--out", out};
    cr_assert_eq(coverage(9, argv), 1, "%s", slurp(errfile));
    char path[192];
    snprintf(path, sizeof path, "%s/prelaunch.md", out);
    char *md = slurp(path);
    /* the model's facts: text_config.hidden_act situ, activation_situ_linear_beta 25 (limit),
     * activation_situ_beta 4 (alpha) */
    cr_assert_not_null(strstr(md, ", topk 16, gated experts, activation situ (limit 25, alpha 4).\n"), "%s", md);
    const char *row = strstr(md, "\n| ep_gather | H=3584 topk=16 E=896 ep=1 | H=3584");
    cr_assert_not_null(row, "%s", md);
    cr_assert_not_null(strstr(row, " | tp8 | `ep_gather/kimi-k3/tp8/"), "%s", md);
    cr_assert_not_null(strstr(md, "\n| fp4_gemm.mxfp4 | N=768 K=3584 | "), "%s", md);
    cr_assert_not_null(strstr(md, "\n| fp4_gemm.mxfp4 | N=3584 K=384 | "), "%s", md);
    cr_assert_not_null(strstr(md, "\n**FAIL**: "), "%s", md);
    /* the copy lacks kimi-k3: nothing excluded */
    cr_assert_null(strstr(md, "the model itself"), "%s", md);
    free(md);
}

/* DeepSeek-V3.2 has DeepSeek-V3's MoE dims (hidden 7168, I 2048, E 256, topk 8): every shape it
 * needs is covered by deepseek-v3's cases, even with deepseek-v3.2 itself left out. */
Test(coverage, prelaunch_same_dims_as_a_registered_model_is_covered, .init = setup, .fini = teardown)
{
    if (access(DSV32, R_OK)) cr_skip_test("%s not present", DSV32);
    const char *argv[] = {"coverage", "--config", DSV32, "--tp", "8", "--ep", "16", "--out", out};
    int rc = coverage(9, argv);
    cr_assert(rc == 0 || rc == 1, "%s", slurp(errfile));
    char path[192];
    snprintf(path, sizeof path, "%s/prelaunch.md", out);
    char *md = slurp(path);
    cr_assert_not_null(strstr(md, "\n## Shapes no registered case covers (0)\n\nnone\n"), "%s", md);
    cr_assert_not_null(strstr(md, " (without deepseek-v3.2, the model itself)"), "%s", md);
    cr_assert_not_null(strstr(md, "Layouts: tp8 ("), "%s", md);
    cr_assert_not_null(strstr(md, "), ep16 ("), "%s", md);
    free(md);
}

/* A Mixtral-8x7B-like raw HF config: hidden 4096, moe_intermediate (intermediate_size) 14336,
 * 8 experts, top-2. By the derivation's rule (TP t in {1,2,4,8,16} dividing I, EP e in
 * {2,...,64} with e <= E): tp3 (14336 = 3 * 4778 + 2), ep16 (> 8 experts), ep3 (no such EP size)
 * and tp32 (no such TP size, though 14336 = 32 * 448) do not exist. */
static char mixtral[160], outtxt[160];

static void setup_mixtral(void)
{
    setup();
    snprintf(mixtral, sizeof mixtral, "%s/mixtral.json", tmpdir);
    snprintf(outtxt, sizeof outtxt, "%s/stdout.txt", tmpdir);
    FILE *f = fopen(mixtral, "w");
    cr_assert_not_null(f);
    fputs("{\"architectures\": [\"MixtralForCausalLM\"], \"model_type\": \"mixtral\", \"hidden_size\": 4096, "
          "\"intermediate_size\": 14336, \"num_local_experts\": 8, \"num_experts_per_tok\": 2}\n",
          f);
    fclose(f);
    cr_assert_not_null(freopen(outtxt, "w", stdout));
}

/* one registry model, kimi-k3, in reg */
static void kimi_registry(void)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "cp %s/cases/models/kimi-k3.json %s/", MOECTS_SOURCE_DIR, reg);
    cr_assert_eq(system(cmd), 0);
}

static void assert_nothing_out(void)
{
    struct stat st;
    cr_assert_neq(stat(out, &st), 0, "%s was created", out);
    char *o = slurp(outtxt);
    cr_assert_str_eq(o, "", "stdout: %s", o);
    free(o);
}

Test(coverage, prelaunch_layout_the_model_cannot_have_is_usage_error, .init = setup_mixtral, .fini = teardown)
{
    kimi_registry();
    const char *lay[][2] = {{"--tp", "3"}, {"--ep", "16"}, {"--ep", "3"}, {"--tp", "32"}, {"--ep", "1"}};
    for (size_t i = 0; i < sizeof lay / sizeof *lay; i++) {
        const char *argv[] = {"coverage", "--config", mixtral, "--tp", "8", lay[i][0], lay[i][1],
                              "--registry", reg, "--out", out};
        cr_assert_eq(coverage(11, argv), 2, "%s %s", lay[i][0], lay[i][1]);
    }
    char *e = slurp(errfile), want[2048];
    snprintf(want, sizeof want,
             "%s: --tp 3: the expert width 14336 (moe_intermediate_size, or intermediate_size where a config has "
             "none) is not divisible by 3\n"
             "%s: --ep 16: more EP ranks than the 8 routed experts\n"
             "%s: --ep 3: the derivation's EP sizes are 2, 4, 8, 16, 32, 64\n"
             "%s: --tp 32: the derivation's TP sizes are 1, 2, 4, 8, 16\n"
             "%s: --ep 1: the derivation's EP sizes are 2, 4, 8, 16, 32, 64 (EP 1 is tp1)\n",
             mixtral, mixtral, mixtral, mixtral, mixtral);
    cr_assert_str_eq(e, want);
    free(e);
    assert_nothing_out();
}

Test(coverage, prelaunch_unwritable_out_is_refused_before_the_report, .init = setup_mixtral, .fini = teardown)
{
    kimi_registry();
    const char *a1[] = {"coverage", "--config", mixtral, "--tp", "8", "--registry", reg, "--out", "/proc/forbidden"};
    cr_assert_eq(coverage(9, a1), 2);
    /* under a regular file */
    char file_sub[192];
    snprintf(file_sub, sizeof file_sub, "%s/sub", mixtral);
    const char *a2[] = {"coverage", "--config", mixtral, "--tp", "8", "--registry", reg, "--out", file_sub};
    cr_assert_eq(coverage(9, a2), 2);
    /* the coverage table checks its directory too */
    const char *a3[] = {"coverage", DATA "run.json", "--registry", reg, "--out", "/proc/forbidden"};
    cr_assert_eq(coverage(6, a3), 2);
    char *e = slurp(errfile), want[1024];
    snprintf(want, sizeof want,
             "moects coverage: --out: /proc/forbidden: cannot create directory: No such file or directory\n"
             "moects coverage: --out: %s: cannot create directory: Not a directory\n"
             "moects coverage: --out: /proc/forbidden: cannot create directory: No such file or directory\n",
             file_sub);
    cr_assert_str_eq(e, want);
    free(e);
    assert_nothing_out();
}

Test(coverage, registry_without_model_files_is_an_error, .init = setup_mixtral, .fini = teardown)
{
    /* reg is an empty directory */
    const char *a1[] = {"coverage", "--config", mixtral, "--tp", "8", "--registry", reg, "--out", out};
    cr_assert_eq(coverage(9, a1), 2);
    /* the table without a run has nothing to show either */
    const char *a2[] = {"coverage", "--registry", reg, "--out", out};
    cr_assert_eq(coverage(5, a2), 2);
    char *e = slurp(errfile), want[512];
    snprintf(want, sizeof want, "%s: --registry: no model files (*.json)\n%s: --registry: no model files (*.json)\n",
             reg, reg);
    cr_assert_str_eq(e, want);
    free(e);
    assert_nothing_out();
}

/* Mixtral at tp8 against kimi-k3 alone (cases/models/kimi-k3.json: K 3584, I 3072, E 896, topk 16):
 * Mixtral needs ep_gather H=4096 topk=2 E=8, and per format gemm1 (N 2*14336/8 = 3584, K 4096) and
 * gemm2 (N 4096, K 1792); kimi-k3's GEMMs all have K 3584 (gemm1) or N 3584 with K 3072/t
 * (gemm2), its ep_gather topk 16: all 5 shapes uncovered. Cases at tp8 (derive.c tables): ep_gather
 * 7 T + 8192 + skewed = 9; per format gemm1 7 M + 4096 + 2 variants = 10, gemm2 8 + 5 = 13:
 * 9 + 2 * 23 = 55; moe_gemm (derive_moe.c, tp8 is mixtral's grid layout): per gemm 12 formats x
 * row layouts x (T 1, 16, 128 + windows) + 4 contiguous T 4096 = 52 and 47 variants: 2 * 99 = 198;
 * 55 + 198 = 253 (--tp 8 given twice counts once). Uncovered: the 5 above and the moe_gemm shapes of
 * 4 formats x 2 gemms: 13. The verdict line is one sentence. */
Test(coverage, prelaunch_fail_sentence, .init = setup_mixtral, .fini = teardown)
{
    kimi_registry();
    const char *argv[] = {"coverage", "--config", mixtral, "--tp", "8", "--tp", "8", "--registry", reg, "--out", out};
    cr_assert_eq(coverage(11, argv), 1, "%s", slurp(errfile));
    char path[192];
    snprintf(path, sizeof path, "%s/prelaunch.md", out);
    char *md = slurp(path), *printed = slurp(outtxt);
    cr_assert_str_eq(printed, md);
    cr_assert_not_null(strstr(md, "\nLayouts: tp8 (253 cases); 253 cases of the model checked."), "%s", md);
    cr_assert_not_null(strstr(md, "\n## Shapes no registered case covers (13)\n"), "%s", md);
    cr_assert_null(strstr(md, "derive no case"), "%s", md);
    /* refusals depend on the kernels built in: the sentence has the uncovered count, then the
     * refused count when there is one, and no zero count */
    const char *h = strstr(md, "\n## Shapes a built-in kernel refuses (");
    cr_assert_not_null(h, "%s", md);
    int nref = atoi(h + strlen("\n## Shapes a built-in kernel refuses ("));
    char want[160];
    if (nref)
        snprintf(want, sizeof want, "\n**FAIL**: 13 shapes uncovered and %d shape%s refused by a built-in kernel.\n",
                 nref, nref == 1 ? "" : "s");
    else
        snprintf(want, sizeof want, "\n**FAIL**: 13 shapes uncovered.\n");
    const char *line = strstr(md, "\n**FAIL**: ");
    cr_assert_not_null(line, "%s", md);
    cr_assert_str_eq(line, want);
    free(md);
    free(printed);
}

/* DeepSeek-V3's config.json without moe_intermediate_size: its intermediate_size (18432) is the dense
 * MLP's, not the experts' (2048), so the pre-launch check refuses the file (exit 2, one line naming
 * the file and the field, nothing on stdout, no report) instead of checking 18432-wide experts. */
Test(coverage, prelaunch_config_without_the_expert_width_is_refused, .init = setup_mixtral, .fini = teardown)
{
    char cfg[192], cmd[512];
    snprintf(cfg, sizeof cfg, "%s/missing_I.json", tmpdir);
    snprintf(cmd, sizeof cmd, "grep -v '\"moe_intermediate_size\": 2048,' %s > %s",
             MOECTS_SOURCE_DIR "/cases/sources/hf-configs/deepseek-ai--DeepSeek-V3.config.json", cfg);
    cr_assert_eq(system(cmd), 0);
    const char *argv[] = {"coverage", "--config", cfg, "--tp", "8", "--ep", "16", "--out", out};
    cr_assert_eq(coverage(9, argv), 2);
    char *e = slurp(errfile), want[512];
    snprintf(want, sizeof want,
             "%s: moe_intermediate_size: missing field (the routed experts' width; with n_routed_experts, "
             "intermediate_size is the dense MLP's) (model_type deepseek_v3)\n",
             cfg);
    cr_assert_str_eq(e, want);
    free(e);
    assert_nothing_out();
}

/* moects__layout_exists agrees with the layouts moects__derive_cases derives, for every registered
 * model and every size 1..128 (a second method: the layout names of the derived cases). */
Test(coverage, layout_rule_matches_the_derivation)
{
    moects_model *models = NULL;
    char err[512];
    int n = moects__models_load_dir(MOECTS_SOURCE_DIR "/cases/models", &models, err, sizeof err);
    cr_assert_gt(n, 0, "%s", err);
    for (int i = 0; i < n; i++) {
        moects_case_list l = {0};
        cr_assert_eq(moects__derive_cases(&models[i], &l), 0);
        for (int size = 1; size <= 128; size++)
            for (int ep = 0; ep < 2; ep++) {
                char name[16], why[200];
                snprintf(name, sizeof name, "%s%d", ep ? "ep" : "tp", size);
                int derived = 0;
                for (size_t c = 0; c < l.n && !derived; c++) derived = !strcmp(l.v[c].layout, name);
                int exists = moects__layout_exists(&models[i], ep ? 0 : size, ep ? size : 0, why, sizeof why);
                cr_assert_eq(exists, derived, "%s %s: %s", models[i].name, name, why);
                cr_assert(exists || why[0], "%s %s: no reason", models[i].name, name);
            }
        moects__case_list_free(&l);
    }
    free(models);
}
