/* test_harness_coverage.c: `moects coverage` (harness/coverage.c): the models x layouts x kernels
 * table of a hand-built run (tests/data/coverage/run.json, against an empty registry so that every
 * cell comes from the fixture; expected.md worked out by hand from it), the HTML page's structure,
 * and the pre-launch check of Kimi K3 at TP8 against a registry copy without kimi-k3. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "moects_commands.h"

#define DATA MOECTS_SOURCE_DIR "/tests/data/coverage/"
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
    int rc = moects_cmd_coverage(argc, (char **)argv);
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

/* text with @RUN@ and @REG@ replaced */
static char *expand(const char *t)
{
    char *o = calloc(1, strlen(t) + 1024);
    for (const char *p = t; *p;) {
        if (!strncmp(p, "@RUN@", 5)) strcat(o, DATA "run.json"), p += 5;
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
    /* the hover title of alpha x ep8 on k.eg names the failing case first */
    cr_assert_not_null(strstr(h, "<title>alpha x ep8 on k.eg: FAIL\nnot in the registry; run: 1 FAIL_MISMATCH, "
                                 "1 UNSUPPORTED\nfirst: ep_gather/alpha/ep8/t1: FAIL_MISMATCH (2 mismatches)</title>"),
                      "%s", h);
    /* self-contained: no script, no fetched resource */
    cr_assert_null(strstr(h, "<script"));
    cr_assert_null(strstr(h, "src="));
    cr_assert_null(strstr(h, "href="));
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
    const char *row = strstr(md, "\n| ep_gather | H=3584 topk=16 E=896 | H=3584");
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
