/* test_cases_model.c: the model registry and the raw Hugging Face config reader (cases/model.c).
 * Expected values are read by hand from the config files (cases/sources/) or are the independent
 * second reading: the registry files were written by hand, the loader reads the raw configs. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "moects_cases.h"
#include "test_tmpdir.h"

#define SRC MOECTS_SOURCE_DIR "/cases/sources"
#define MODELS MOECTS_SOURCE_DIR "/cases/models"

static void mk_tmp(void) { mk_tmpdir("/tmp/moects-test-model-XXXXXX"); }

/* Write text to tmpdir/name; returns the path (static buffer). */
static const char *put(const char *name, const char *text)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
    return path;
}

static const moects_model *find_hf(const moects_model *v, int n, const char *hf_id)
{
    const moects_model *hit = NULL;
    for (int i = 0; i < n; i++)
        if (!strcmp(v[i].hf_id, hf_id)) {
            cr_assert_null(hit, "two registry files with hf_id %s", hf_id);
            hit = &v[i];
        }
    return hit;
}

static void same_dims(const moects_model *a, const moects_model *b, const char *what)
{
    cr_expect_eq(a->hidden_size, b->hidden_size, "%s: hidden_size", what);
    cr_expect_eq(a->moe_intermediate_size, b->moe_intermediate_size, "%s: moe_intermediate_size", what);
    cr_expect_eq(a->routed_experts, b->routed_experts, "%s: routed_experts", what);
    cr_expect_eq(a->experts_per_token, b->experts_per_token, "%s: experts_per_token", what);
    cr_expect_eq(a->shared_experts, b->shared_experts, "%s: shared_experts", what);
    cr_expect_eq(a->latent_size, b->latent_size, "%s: latent_size", what);
    cr_expect_eq(a->gated, b->gated, "%s: gated", what);
    cr_expect_eq(a->activation, b->activation, "%s: activation", what);
    cr_expect_eq(a->has_activation_limit, b->has_activation_limit, "%s: activation_limit present", what);
    cr_expect_eq(a->activation_limit, b->activation_limit, "%s: activation_limit", what);
    cr_expect_eq(a->has_activation_alpha, b->has_activation_alpha, "%s: activation_alpha present", what);
    cr_expect_eq(a->activation_alpha, b->activation_alpha, "%s: activation_alpha", what);
    cr_expect_eq(a->expert_bias, b->expert_bias, "%s: expert_bias", what);
    cr_expect_eq(a->router_weight_on_input, b->router_weight_on_input, "%s: router_weight_on_input", what);
}

Test(model, registry_has_23_lowercase_models_named_after_their_files)
{
    moects_model *v;
    char err[512] = "";
    int n = moects__models_load_dir(MODELS, &v, err, sizeof err);
    cr_assert_eq(n, 23, "%s", err);
    for (int i = 0; i < n; i++) {
        for (const char *p = v[i].name; *p; p++)
            cr_expect(!(*p >= 'A' && *p <= 'Z'), "%s: upper case in name", v[i].name);
        char path[512];
        snprintf(path, sizeof path, "%s/%s.json", MODELS, v[i].name);
        cr_expect_eq(access(path, R_OK), 0, "%s: no file named after the model", v[i].name);
        cr_expect(v[i].source[0] && v[i].release_quantization[0] && v[i].hf_id[0], "%s: empty text field", v[i].name);
        if (i) { /* sorted by file name */
            char a[80], b[80];
            snprintf(a, sizeof a, "%s.json", v[i - 1].name);
            snprintf(b, sizeof b, "%s.json", v[i].name);
            cr_expect_lt(strcmp(a, b), 0, "not sorted by file name: %s, %s", a, b);
        }
    }
    free(v);
}

/* Every raw config loads and agrees with the registry file that names its hf_id. */
Test(model, every_hf_config_agrees_with_its_registry_file)
{
    moects_model *reg;
    char err[512] = "";
    int nreg = moects__models_load_dir(MODELS, &reg, err, sizeof err);
    cr_assert_gt(nreg, 0, "%s", err);
    DIR *d = opendir(SRC "/hf-configs");
    cr_assert_not_null(d);
    struct dirent *e;
    int seen = 0;
    while ((e = readdir(d))) {
        const char *dot = strstr(e->d_name, ".config.json");
        if (!dot || dot[12]) continue;
        char path[512], hf_id[256];
        snprintf(path, sizeof path, "%s/hf-configs/%s", SRC, e->d_name);
        /* "org--Repo.config.json" -> "org/Repo" (SOURCES.md naming) */
        snprintf(hf_id, sizeof hf_id, "%.*s", (int)(dot - e->d_name), e->d_name);
        char *sep = strstr(hf_id, "--");
        cr_assert_not_null(sep, "%s", e->d_name);
        *sep = '/';
        memmove(sep + 1, sep + 2, strlen(sep + 2) + 1);
        moects_model m;
        cr_assert_eq(moects__model_load(path, &m, err, sizeof err), 0, "%s", err);
        cr_expect_str_eq(m.hf_id, hf_id);
        const moects_model *r = find_hf(reg, nreg, hf_id);
        cr_assert_not_null(r, "no registry file for %s", hf_id);
        same_dims(&m, r, hf_id);
        seen++;
    }
    closedir(d);
    cr_expect_eq(seen, 16);
    free(reg);
}

/* The 7 models without a raw config: registry against models-extra.json, read here with jansson. */
Test(model, extra_models_agree_with_models_extra_json)
{
    moects_model *reg;
    char err[512] = "";
    int nreg = moects__models_load_dir(MODELS, &reg, err, sizeof err);
    cr_assert_gt(nreg, 0, "%s", err);
    json_error_t je;
    json_t *a = json_load_file(SRC "/models-extra.json", 0, &je);
    cr_assert_not_null(a, "%s", je.text);
    cr_assert_eq(json_array_size(a), 7);
    for (size_t i = 0; i < json_array_size(a); i++) {
        json_t *o = json_array_get(a, i);
        const char *name = json_string_value(json_object_get(o, "model"));
        const moects_model *r = NULL;
        for (int j = 0; j < nreg; j++)
            if (!strcmp(reg[j].name, name)) r = &reg[j];
        cr_assert_not_null(r, "no registry file for %s", name);
        cr_expect_eq(r->hidden_size, json_integer_value(json_object_get(o, "hidden_size")), "%s", name);
        cr_expect_eq(r->moe_intermediate_size, json_integer_value(json_object_get(o, "moe_intermediate_size")), "%s",
                     name);
        cr_expect_eq(r->routed_experts, json_integer_value(json_object_get(o, "routed_experts")), "%s", name);
        cr_expect_eq(r->experts_per_token, json_integer_value(json_object_get(o, "experts_per_token")), "%s", name);
        cr_expect_eq(r->shared_experts, json_integer_value(json_object_get(o, "shared_experts")), "%s", name);
        cr_expect(json_is_null(json_object_get(o, "latent_size")) && r->latent_size == 0, "%s", name);
        const char *act = json_string_value(json_object_get(o, "expert_activation"));
        cr_expect_eq(r->gated, !strncmp(act, "gated", 5), "%s", name);
        if (!strncmp(act, "gated-silu", 10)) cr_expect_eq(r->activation, MOECTS_ACT_SILU, "%s", name);
        cr_expect_eq(r->expert_bias, 0, "%s", name);
    }
    json_decref(a);
    free(reg);
}

/* Values read by hand from the raw files: the family-specific field names. */
Test(model, family_field_names_read_by_hand)
{
    moects_model m;
    char err[512] = "";
    /* Kimi K3: all under text_config; latent = routed_expert_hidden_size; hidden_act situ (gated). */
    cr_assert_eq(moects__model_load(SRC "/hf-configs/moonshotai--Kimi-K3.config.json", &m, err, sizeof err), 0, "%s", err);
    cr_expect_eq(m.hidden_size, 7168);
    cr_expect_eq(m.latent_size, 3584);
    cr_expect_eq(m.moe_intermediate_size, 3072);
    cr_expect_eq(m.routed_experts, 896);
    cr_expect_eq(m.experts_per_token, 16);
    cr_expect_eq(m.shared_experts, 2);
    cr_expect_eq(m.gated, 1);
    cr_expect_str_eq(m.name, "kimi-k3");
    /* Nemotron-3 Ultra: moe_latent_size, mlp_hidden_act relu2 (not gated). */
    cr_assert_eq(moects__model_load(SRC "/hf-configs/nvidia--NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16.config.json", &m, err,
                                   sizeof err),
                 0, "%s", err);
    cr_expect_eq(m.latent_size, 2048);
    cr_expect_eq(m.gated, 0);
    cr_expect_eq(m.experts_per_token, 22);
    /* gpt-oss-120b: num_local_experts, intermediate_size, experts_per_token == num_experts_per_tok. */
    cr_assert_eq(moects__model_load(SRC "/hf-configs/openai--gpt-oss-120b.config.json", &m, err, sizeof err), 0, "%s", err);
    cr_expect_eq(m.routed_experts, 128);
    cr_expect_eq(m.moe_intermediate_size, 2880);
    cr_expect_eq(m.experts_per_token, 4);
    cr_expect_eq(m.latent_size, 0);
    /* Mixtral: intermediate_size is the expert width. */
    cr_assert_eq(moects__model_load(SRC "/hf-configs/mistralai--Mixtral-8x7B-v0.1.config.json", &m, err, sizeof err), 0,
                 "%s", err);
    cr_expect_eq(m.moe_intermediate_size, 14336);
    cr_expect_eq(m.routed_experts, 8);
    /* DeepSeek-V3: moe_intermediate_size (2048), not the dense intermediate_size (18432). */
    cr_assert_eq(moects__model_load(SRC "/hf-configs/deepseek-ai--DeepSeek-V3.config.json", &m, err, sizeof err), 0, "%s",
                 err);
    cr_expect_eq(m.moe_intermediate_size, 2048);
    cr_expect_eq(m.shared_experts, 1);
    /* Qwen3-Next: one shared expert, known only from shared_expert_intermediate_size = 512;
     * Qwen3-Coder: shared_expert_intermediate_size = 0 -> none. */
    cr_assert_eq(moects__model_load(SRC "/hf-configs/Qwen--Qwen3-Next-80B-A3B-Thinking.config.json", &m, err, sizeof err),
                 0, "%s", err);
    cr_expect_eq(m.shared_experts, 1);
    cr_expect_eq(m.experts_per_token, 10);
    cr_assert_eq(moects__model_load(SRC "/hf-configs/Qwen--Qwen3-Coder-480B-A35B-Instruct.config.json", &m, err,
                                   sizeof err),
                 0, "%s", err);
    cr_expect_eq(m.shared_experts, 0);
}

Test(model, registry_file_reads_back)
{
    moects_model m;
    char err[512] = "";
    cr_assert_eq(moects__model_load(MODELS "/nemotron-3-nano-30b-a3b.json", &m, err, sizeof err), 0, "%s", err);
    cr_expect_str_eq(m.name, "nemotron-3-nano-30b-a3b");
    cr_expect_str_eq(m.hf_id, "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16");
    cr_expect_eq(m.hidden_size, 2688);
    cr_expect_eq(m.moe_intermediate_size, 1856);
    cr_expect_eq(m.gated, 0);
    cr_expect_eq(m.latent_size, 0);
}

/* DBRX keeps its MoE fields in ffn_config and names the width d_model (numbers: models-extra.json). */
Test(model, dbrx_style_config, .init = mk_tmp, .fini = rm_tmp)
{
    const char *p = put("dbrx.json", "{\"d_model\": 6144, \"n_layers\": 40, \"ffn_config\": {\"ffn_hidden_size\": 10752,"
                                     " \"moe_num_experts\": 16, \"moe_top_k\": 4}}");
    moects_model m;
    char err[512] = "";
    cr_assert_eq(moects__model_load(p, &m, err, sizeof err), 0, "%s", err);
    cr_expect_eq(m.hidden_size, 6144);
    cr_expect_eq(m.moe_intermediate_size, 10752);
    cr_expect_eq(m.routed_experts, 16);
    cr_expect_eq(m.experts_per_token, 4);
    cr_expect_eq(m.gated, 1);
}

/* Python's json writes bare NaN / Infinity / -Infinity; the reader accepts them outside strings
 * and leaves strings alone. */
Test(model, nan_and_infinity_tokens_accepted, .init = mk_tmp, .fini = rm_tmp)
{
    const char *p = put("cfg.json", "{\n  \"rope_theta\": Infinity,\n  \"x\": -Infinity, \"y\": NaN,\n"
                                    "  \"z\": [NaN, Infinity,-Infinity],\n  \"hidden_act\": \"NaN Infinity\",\n"
                                    "  \"hidden_size\": 2048, \"moe_intermediate_size\": 768, \"num_experts\": 128,\n"
                                    "  \"num_experts_per_tok\": 8\n}\n");
    moects_model m;
    char err[512] = "";
    cr_assert_eq(moects__model_load(p, &m, err, sizeof err), 0, "%s", err);
    cr_expect_eq(m.hidden_size, 2048);
    cr_expect_eq(m.routed_experts, 128);
    cr_expect_eq(m.gated, 1);
    cr_expect(strstr(m.source, "hidden_act=NaN Infinity") != NULL, "string was rewritten: %s", m.source);
}

/* Expect load to fail with exactly "<path><suffix>" (one line). */
static void expect_err(const char *path, const char *suffix)
{
    moects_model m;
    char err[512] = "", want[1024];
    cr_assert_eq(moects__model_load(path, &m, err, sizeof err), -1, "loaded: %s", path);
    snprintf(want, sizeof want, "%s%s", path, suffix);
    cr_expect_str_eq(err, want);
    cr_expect_null(strchr(err, '\n'));
}

#define HF_OK "\"hidden_size\": 2048, \"moe_intermediate_size\": 768, \"num_experts_per_tok\": 8"

Test(model, malformed_files_give_one_line_errors, .init = mk_tmp, .fini = rm_tmp)
{
    char missing[600];
    snprintf(missing, sizeof missing, "%s/nope.json", tmpdir);
    expect_err(missing, ": unreadable file: No such file or directory");
    expect_err(put("a.json", "{\"moe_intermediate_size\": 768, \"num_experts\": 8, \"num_experts_per_tok\": 2}"),
               ": hidden_size: missing field");
    expect_err(put("b.json", "{\"hidden_size\": \"2048\", \"num_experts\": 8}"),
               ": hidden_size: wrong type (string, expected integer)");
    expect_err(put("c.json", "{\"hidden_size\": 2048, \"num_experts_per_tok\": 8, \"num_experts\": 128, "
                             "\"moe_intermediate_size\": 0}"),
               ": moe_intermediate_size: non-positive size (0)");
    expect_err(put("d.json", "{\"hidden_size\": 4096, \"intermediate_size\": 11008}"),
               ": n_routed_experts: not an MoE config (none of n_routed_experts, num_experts, num_local_experts, "
               "moe_num_experts)");
    expect_err(put("e.json", "{" HF_OK ", \"num_experts\": 1}"), ": num_experts: not an MoE config (1 routed experts)");
    expect_err(put("f.json", "[1, 2]"), ": (root): not a JSON object");
    expect_err(put("g.json", "{" HF_OK ", \"num_experts\": 128, \"experts_per_token\": 4}"),
               ": experts_per_token: disagrees with num_experts_per_tok (4 vs 8)");
    expect_err(put("h.json", "{\"text_config\": {\"hidden_size\": 7168.5, \"num_experts\": 896}}"),
               ": text_config.hidden_size: wrong type (real, expected integer)");
    expect_err(put("i.json", "{\"hidden_size\": 64, \"moe_intermediate_size\": 64, \"num_experts\": 4, "
                             "\"num_experts_per_tok\": 8}"),
               ": num_experts_per_tok: exceeds the routed expert count (8 > 4)");
    expect_err(put("j.json", "{\"hidden_size\": 64, \"moe_intermediate_size\": 64, \"num_experts\": 4}"),
               ": num_experts_per_tok: missing field (nor experts_per_token)");
    expect_err(put("k.json", "{" HF_OK ", \"num_experts\": 128, \"hidden_act\": 7}"),
               ": hidden_act: wrong type (integer, expected string)");
}

#define REG_HEAD "{\"name\": \"x\", \"hf_id\": \"o/x\", \"hidden_size\": 64, \"moe_intermediate_size\": 32, "
#define REG_ACT(act, lim, alpha, bias, rwoi)                                                   \
    "\"activation\": \"" act "\", \"activation_limit\": " lim ", \"activation_alpha\": " alpha \
    ", \"expert_bias\": " bias ", \"router_weight_on_input\": " rwoi ", "
/* the router's facts (softmax, renormalized, no groups, scale or bias) */
#define REG_ROUTER "\"scoring_func\": \"softmax\", \"topk_before_scoring\": false, \"n_group\": 1, \"topk_group\": 1, \"routed_scaling_factor\": 1.0, \"norm_topk_prob\": true, \"e_score_correction_bias\": false, "
#define REG_END REG_ROUTER "\"release_quantization\": \"bf16\", \"source\": \"hand\"}"
#define REG_TAIL REG_ACT("silu", "null", "null", "false", "false") REG_END

Test(model, registry_errors, .init = mk_tmp, .fini = rm_tmp)
{
    expect_err(put("r1.json", REG_HEAD "\"routed_experts\": 8, \"experts_per_token\": 2, \"shared_experts\": 0, "
                                       "\"latent_size\": null, \"gated\": true, \"colour\": 1, " REG_TAIL),
               ": colour: unknown field");
    expect_err(put("r2.json", REG_HEAD "\"routed_experts\": 8, \"experts_per_token\": 2, \"shared_experts\": 0, "
                                       "\"latent_size\": null, \"gated\": \"yes\", " REG_TAIL),
               ": gated: wrong type (string, expected boolean)");
    expect_err(put("r3.json", REG_HEAD "\"routed_experts\": 8, \"experts_per_token\": 2, \"shared_experts\": 0, "
                                       "\"latent_size\": 0, \"gated\": true, " REG_TAIL),
               ": latent_size: non-positive size (0)");
    expect_err(put("r4.json", REG_HEAD "\"routed_experts\": 8, \"experts_per_token\": 2, \"shared_experts\": 0, "
                                       "\"gated\": true, " REG_TAIL),
               ": latent_size: missing field");
    expect_err(put("r5.json", REG_HEAD "\"routed_experts\": 8, \"experts_per_token\": 2, \"shared_experts\": -1, "
                                       "\"latent_size\": null, \"gated\": true, " REG_TAIL),
               ": shared_experts: negative count (-1)");
    expect_err(put("r6.json", "{\"name\": \"X\", \"hf_id\": \"o/x\", \"routed_experts\": 8}"),
               ": name: not a registry name (lower-case a-z 0-9 . - _): \"X\"");
    /* registry files are strict: a repeated key is an error (line 1, jansson's column) */
    moects_model m;
    char err[512];
    const char *p = put("r7.json", REG_HEAD "\"routed_experts\": 8, \"routed_experts\": 9}");
    cr_assert_eq(moects__model_load(p, &m, err, sizeof err), -1);
    cr_expect(!strncmp(err, p, strlen(p)) && !strncmp(err + strlen(p), ":1:", 3), "%s", err);
    cr_expect(strstr(err, ": malformed JSON: duplicate object key") != NULL, "%s", err);
}

/* ---- the fused layer's facts (activation, its limit and alpha, expert biases, router weight) ---- */

static void load_ok(const char *path, moects_model *m)
{
    char err[512] = "";
    cr_assert_eq(moects__model_load(path, m, err, sizeof err), 0, "%s", err);
}

/* Registry values worked out by hand from each model's sources (the files the model's source names). */
Test(model, fused_layer_facts_read_by_hand)
{
    moects_model m;
    /* gpt-oss-120b: model_type gpt_oss, swiglu_limit 7.0; alpha 1.702 from the reference swiglu
     * (openai/gpt-oss gpt_oss/torch/model.py, not in the config); mlp1_bias and mlp2_bias. */
    load_ok(MODELS "/gpt-oss-120b.json", &m);
    cr_expect_eq(m.activation, MOECTS_ACT_GPT_OSS);
    cr_expect(m.has_activation_limit && m.activation_limit == 7.0f, "limit %g", (double)m.activation_limit);
    cr_expect(m.has_activation_alpha && m.activation_alpha == 1.702f, "alpha %g", (double)m.activation_alpha);
    cr_expect_eq(m.expert_bias, 1);
    cr_expect_eq(m.router_weight_on_input, 0);
    cr_expect_eq(m.gated, 1);
    /* Nemotron-3 Nano: mlp_hidden_act relu2, no gate, mlp_bias false. */
    load_ok(MODELS "/nemotron-3-nano-30b-a3b.json", &m);
    cr_expect_eq(m.activation, MOECTS_ACT_RELU2);
    cr_expect_eq(m.gated, 0);
    cr_expect(!m.has_activation_limit && !m.has_activation_alpha);
    cr_expect_eq(m.expert_bias, 0);
    /* Llama 4 Scout and Maverick: top-1, the router weight on the input; SiLU, no bias. */
    static const char *const llama[] = {MODELS "/llama-4-scout.json", MODELS "/llama-4-maverick.json"};
    for (int i = 0; i < 2; i++) {
        load_ok(llama[i], &m);
        cr_expect_eq(m.router_weight_on_input, 1, "%s", llama[i]);
        cr_expect_eq(m.experts_per_token, 1, "%s", llama[i]);
        cr_expect_eq(m.activation, MOECTS_ACT_SILU, "%s", llama[i]);
        cr_expect_eq(m.expert_bias, 0, "%s", llama[i]);
    }
    /* Qwen3-30B-A3B: hidden_act silu, no limit field, no bias. */
    load_ok(MODELS "/qwen3-30b-a3b.json", &m);
    cr_expect_eq(m.activation, MOECTS_ACT_SILU);
    cr_expect(!m.has_activation_limit && !m.has_activation_alpha);
    cr_expect_eq(m.expert_bias, 0);
    cr_expect_eq(m.router_weight_on_input, 0);
    /* DeepSeek-V4-Flash: hidden_act silu with swiglu_limit 10.0. */
    load_ok(MODELS "/deepseek-v4-flash.json", &m);
    cr_expect_eq(m.activation, MOECTS_ACT_SILU_CLAMP);
    cr_expect(m.has_activation_limit && m.activation_limit == 10.0f && !m.has_activation_alpha);
    /* Kimi K3: text_config.hidden_act situ, activation_situ_beta 4.0, activation_situ_linear_beta 25.0. */
    load_ok(MODELS "/kimi-k3.json", &m);
    cr_expect_eq(m.activation, MOECTS_ACT_SITU);
    cr_expect(m.has_activation_alpha && m.activation_alpha == 4.0f);
    cr_expect(m.has_activation_limit && m.activation_limit == 25.0f);
    /* Grok-1: jax.nn.gelu, whose default is the tanh approximation. */
    load_ok(MODELS "/grok-1.json", &m);
    cr_expect_eq(m.activation, MOECTS_ACT_GELU_TANH);
    cr_expect_str_eq(moects__activation_name(m.activation), "gelu_tanh");
    cr_expect_str_eq(moects__activation_name((moects_activation)0), "unknown");
}

/* A raw config's activation name as transformers' ACT2FN reads it; swiglu_limit, gpt_oss and llama4. */
Test(model, hf_activation_mapping, .init = mk_tmp, .fini = rm_tmp)
{
    static const struct {
        const char *act;
        moects_activation want;
    } names[] = {{"silu", MOECTS_ACT_SILU},
                 {"swish", MOECTS_ACT_SILU},
                 {"gelu", MOECTS_ACT_GELU_ERF},
                 {"gelu_new", MOECTS_ACT_GELU_TANH},
                 {"gelu_pytorch_tanh", MOECTS_ACT_GELU_TANH},
                 {"relu2", MOECTS_ACT_RELU2},
                 {"tanhexp", (moects_activation)0}}; /* not mapped: unknown */
    moects_model m;
    char text[512];
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        snprintf(text, sizeof text, "{" HF_OK ", \"num_experts\": 128, \"hidden_act\": \"%s\"}", names[i].act);
        load_ok(put("a.json", text), &m);
        cr_expect_eq(m.activation, names[i].want, "%s", names[i].act);
        cr_expect(!m.has_activation_limit && !m.has_activation_alpha && !m.expert_bias && !m.router_weight_on_input,
                  "%s", names[i].act);
    }
    cr_expect(strstr(m.source, "; activation unknown") != NULL, "%s", m.source);
    load_ok(put("b.json", "{" HF_OK ", \"num_experts\": 128}"), &m);
    cr_expect_eq(m.activation, 0);
    /* a limit clamps SiLU; NaN (read as null) is no limit */
    load_ok(put("c.json", "{" HF_OK ", \"num_experts\": 128, \"hidden_act\": \"silu\", \"swiglu_limit\": 10}"), &m);
    cr_expect(m.activation == MOECTS_ACT_SILU_CLAMP && m.has_activation_limit && m.activation_limit == 10.0f);
    load_ok(put("d.json", "{" HF_OK ", \"num_experts\": 128, \"hidden_act\": \"silu\", \"swiglu_limit\": NaN}"), &m);
    cr_expect(m.activation == MOECTS_ACT_SILU && !m.has_activation_limit);
    expect_err(put("e.json", "{" HF_OK ", \"num_experts\": 128, \"swiglu_limit\": \"7\"}"),
               ": swiglu_limit: wrong type (string, expected number)");
    /* Llama 4 Scout (numbers: models-extra.json): model_type llama4, top-1 */
    load_ok(put("scout.json", "{\"model_type\": \"llama4\", \"text_config\": {\"model_type\": \"llama4_text\", "
                              "\"hidden_act\": \"silu\", \"hidden_size\": 5120, \"intermediate_size\": 8192, "
                              "\"num_local_experts\": 16, \"num_experts_per_tok\": 1}}"),
            &m);
    cr_expect(m.activation == MOECTS_ACT_SILU && m.router_weight_on_input && !m.expert_bias);
}

#define REG_K(k) REG_HEAD "\"routed_experts\": 8, \"experts_per_token\": " k ", \"shared_experts\": 0, " \
    "\"latent_size\": null, "
#define REG_T REG_K("2") "\"gated\": true, "
#define REG_F REG_K("2") "\"gated\": false, "

Test(model, registry_fused_layer_errors, .init = mk_tmp, .fini = rm_tmp)
{
    expect_err(put("a1.json", REG_T REG_ACT("swish", "null", "null", "false", "false") REG_END),
               ": activation: unknown value \"swish\" (silu, gelu_tanh, gelu_erf, relu2, silu_clamp, gpt_oss, situ)");
    expect_err(put("a2.json", REG_K("2") "\"gated\": true, \"activation_limit\": null, \"activation_alpha\": null, "
                              "\"expert_bias\": false, \"router_weight_on_input\": false, " REG_END),
               ": activation: missing field");
    expect_err(put("a3.json", REG_K("2") "\"gated\": true, \"activation\": 1, \"activation_limit\": null, "
                              "\"activation_alpha\": null, \"expert_bias\": false, \"router_weight_on_input\": false, "
                              REG_END),
               ": activation: wrong type (integer, expected string)");
    expect_err(put("a4.json", REG_T REG_ACT("relu2", "null", "null", "false", "false") REG_END),
               ": gated: must be false with activation relu2");
    expect_err(put("a5.json", REG_F REG_ACT("silu", "null", "null", "false", "false") REG_END),
               ": gated: must be true with activation silu");
    expect_err(put("a6.json",
                   REG_T REG_ACT("silu_clamp", "null", "null", "false", "false") REG_END),
               ": activation_limit: null, but activation silu_clamp needs one");
    expect_err(put("a7.json", REG_T REG_ACT("silu", "7.0", "null", "false", "false") REG_END),
               ": activation_limit: activation silu has none (expected null)");
    expect_err(put("a8.json", REG_T REG_ACT("gpt_oss", "7.0", "null", "true", "false") REG_END),
               ": activation_alpha: null, but activation gpt_oss needs one");
    expect_err(put("a9.json", REG_T REG_ACT("gpt_oss", "-7", "1.702", "true", "false") REG_END),
               ": activation_limit: non-positive value (-7)");
    expect_err(put("b1.json",
                   REG_T REG_ACT("silu_clamp", "\"7\"", "null", "false", "false") REG_END),
               ": activation_limit: wrong type (string, expected number)");
    expect_err(put("b2.json", REG_T REG_ACT("situ", "25", "1e39", "false", "false") REG_END),
               ": activation_alpha: out of range (0..3.40282e+38, an FP32)");
    expect_err(put("b3.json", REG_K("2") "\"gated\": true, \"activation\": \"silu\", \"activation_limit\": null, "
                              "\"expert_bias\": false, \"router_weight_on_input\": false, " REG_END),
               ": activation_alpha: missing field");
    expect_err(put("b4.json", REG_T REG_ACT("silu", "null", "null", "1", "false") REG_END),
               ": expert_bias: wrong type (integer, expected boolean)");
    expect_err(put("b5.json", REG_K("2") "\"gated\": true, \"activation\": \"silu\", \"activation_limit\": null, "
                              "\"activation_alpha\": null, \"expert_bias\": false, " REG_END),
               ": router_weight_on_input: missing field");
    expect_err(put("b6.json", REG_T REG_ACT("silu", "null", "null", "false", "true") REG_END),
               ": router_weight_on_input: true needs experts_per_token 1 (got 2)");
    /* SiTU without linear_beta: the limit is optional; an integer reads as a number */
    moects_model m;
    load_ok(put("ok.json", REG_K("1") "\"gated\": true, " REG_ACT("situ", "null", "4", "false", "true") REG_END), &m);
    cr_expect(m.activation == MOECTS_ACT_SITU && !m.has_activation_limit && m.activation_alpha == 4.0f);
    cr_expect_eq(m.router_weight_on_input, 1);
}

/* A syntax error's line:col is the file's, also after a NaN on the same line: the column equals
 * the one reported for the same text with a 3-character number in place of NaN. */
Test(model, malformed_json_line_and_column, .init = mk_tmp, .fini = rm_tmp)
{
    moects_model m;
    char e1[512], e2[512];
    const char *p1 = put("m1.json", "{\n  \"a\": 1,\n  \"b\": NaN, \"c\": }\n");
    cr_assert_eq(moects__model_load(p1, &m, e1, sizeof e1), -1);
    const char *p2 = put("m2.json", "{\n  \"a\": 1,\n  \"b\": 1.0, \"c\": }\n");
    cr_assert_eq(moects__model_load(p2, &m, e2, sizeof e2), -1);
    const char *c1 = strstr(e1, "m1.json:"), *c2 = strstr(e2, "m2.json:");
    cr_assert(c1 && c2, "%s | %s", e1, e2);
    cr_expect_str_eq(c1 + 8, c2 + 8);
    cr_expect_eq(strncmp(c1 + 8, "3:", 2), 0, "line: %s", e1);
    cr_expect(strstr(e1, ": malformed JSON: ") != NULL, "%s", e1);
}

Test(model, load_dir_sorted_and_names_bad_file, .init = mk_tmp, .fini = rm_tmp)
{
    put("b.json", "{" HF_OK ", \"num_experts\": 128}");
    put("a.json", "{" HF_OK ", \"num_experts\": 64}");
    put("notes.txt", "ignored");
    moects_model *v;
    char err[512] = "";
    cr_assert_eq(moects__models_load_dir(tmpdir, &v, err, sizeof err), 2, "%s", err);
    cr_expect_eq(v[0].routed_experts, 64);
    cr_expect_eq(v[1].routed_experts, 128);
    free(v);
    const char *bad = put("c.json", "{\"hidden_size\": 1}");
    cr_assert_eq(moects__models_load_dir(tmpdir, &v, err, sizeof err), -1);
    cr_expect(strncmp(err, bad, strlen(bad)) == 0, "%s", err);
    cr_expect_eq(moects__models_load_dir("/nonexistent-moects", &v, err, sizeof err), -1);
    cr_expect_str_eq(err, "/nonexistent-moects: unreadable directory: No such file or directory");
}

/* Load-time bounds (cases_internal.h): widths <= 2^20 = 1048576, routed experts <= 2^16 = 65536,
 * experts per token <= 1024. The values are the ones a user tried: 2^62, 2^31, 2^33, 2^40, 2^31-1, 2^32. */
#define REG_DIMS(H, E, K)                                                                                       \
    "{\"name\": \"x\", \"hf_id\": \"o/x\", \"hidden_size\": " H ", \"moe_intermediate_size\": 32, "         \
    "\"routed_experts\": " E ", \"experts_per_token\": " K ", \"shared_experts\": 0, \"latent_size\": null, "  \
    "\"gated\": true, " REG_TAIL

Test(model, registry_sizes_out_of_range, .init = mk_tmp, .fini = rm_tmp)
{
    const char *big[] = {"4611686018427387904", "2147483648", "8589934592", "1099511627776", "1048577"};
    for (int i = 0; i < 5; i++) {
        char text[1024];
        snprintf(text, sizeof text, REG_DIMS("%s", "8", "2"), big[i]);
        expect_err(put("h.json", text), ": hidden_size: out of range (1..1048576)");
    }
    expect_err(put("e1.json", REG_DIMS("64", "2147483647", "2")), ": routed_experts: out of range (1..65536)");
    expect_err(put("e2.json", REG_DIMS("64", "4294967296", "2")), ": routed_experts: out of range (1..65536)");
    expect_err(put("k1.json", REG_DIMS("64", "4096", "1025")), ": experts_per_token: out of range (1..1024)");
    expect_err(put("k2.json", REG_DIMS("64", "8", "9223372036854775807")),
               ": experts_per_token: out of range (1..1024)");
    expect_err(put("w.json", REG_DIMS("1e15", "8", "2")), ": hidden_size: wrong type (real, expected integer)");
    expect_err(put("n.json", REG_DIMS("NaN", "8", "2")), ": hidden_size: wrong type (null, expected integer)");
    /* the bounds themselves load */
    moects_model m;
    char err[512] = "";
    cr_assert_eq(moects__model_load(put("ok.json", REG_DIMS("1048576", "65536", "1024")), &m, err, sizeof err), 0,
                 "%s", err);
    cr_expect_eq(m.hidden_size, 1048576);
    cr_expect_eq(m.routed_experts, 65536);
    cr_expect_eq(m.experts_per_token, 1024);
}

Test(model, hf_sizes_out_of_range, .init = mk_tmp, .fini = rm_tmp)
{
    expect_err(put("a.json", "{\"hidden_size\": 4611686018427387904, \"moe_intermediate_size\": 768, "
                             "\"num_experts\": 128, \"num_experts_per_tok\": 8}"),
               ": hidden_size: out of range (1..1048576)");
    expect_err(put("b.json", "{\"text_config\": {\"hidden_size\": 8589934592, \"moe_intermediate_size\": 768, "
                             "\"num_experts\": 128, \"num_experts_per_tok\": 8}}"),
               ": text_config.hidden_size: out of range (1..1048576)");
    expect_err(put("c.json", "{" HF_OK ", \"num_experts\": 2147483647}"), ": num_experts: out of range (0..65536)");
    expect_err(put("d.json", "{" HF_OK ", \"n_routed_experts\": 4294967296}"),
               ": n_routed_experts: out of range (0..65536)");
    expect_err(put("e.json", "{\"hidden_size\": 2048, \"moe_intermediate_size\": 768, \"num_experts\": 128, "
                             "\"num_experts_per_tok\": 100000}"),
               ": num_experts_per_tok: out of range (1..1024)");
    expect_err(put("f.json", "{\"hidden_size\": 2048, \"intermediate_size\": 1099511627776, "
                             "\"num_local_experts\": 8, \"num_experts_per_tok\": 2}"),
               ": intermediate_size: out of range (1..1048576)");
    expect_err(put("g.json", "{" HF_OK ", \"num_experts\": 128, \"moe_latent_size\": 2147483648}"),
               ": moe_latent_size: out of range (1..1048576)");
    expect_err(put("h.json", "{" HF_OK ", \"num_experts\": 128, \"n_shared_experts\": 70000}"),
               ": n_shared_experts: out of range (0..65536)");
}

/* Raw configs: a repeated key is an error (as in registry files); a required size that is null,
 * NaN or Infinity is a wrong type, not a missing field; NaN in an unrelated field still loads. */
Test(model, hf_duplicates_and_nonfinite_sizes, .init = mk_tmp, .fini = rm_tmp)
{
    moects_model m;
    char err[512] = "";
    const char *p = put("dup.json", "{" HF_OK ", \"num_experts\": 128, \"hidden_size\": 4096}");
    cr_assert_eq(moects__model_load(p, &m, err, sizeof err), -1);
    cr_expect(!strncmp(err, p, strlen(p)) && !strncmp(err + strlen(p), ":1:", 3), "%s", err);
    cr_expect(strstr(err, ": malformed JSON: duplicate object key") != NULL, "%s", err);
    cr_expect_null(strchr(err, '\n'));

    static const char *const bad[] = {"NaN", "Infinity", "-Infinity", "null"};
    for (int i = 0; i < 4; i++) {
        char text[512];
        snprintf(text, sizeof text,
                 "{\"hidden_size\": %s, \"moe_intermediate_size\": 768, \"num_experts\": 128, "
                 "\"num_experts_per_tok\": 8}",
                 bad[i]);
        expect_err(put("h.json", text), ": hidden_size: wrong type (null, expected integer)");
        snprintf(text, sizeof text, "{\"hidden_size\": 2048, \"moe_intermediate_size\": %s, \"num_experts\": 128, "
                 "\"num_experts_per_tok\": 8}", bad[i]);
        expect_err(put("i.json", text), ": moe_intermediate_size: wrong type (null, expected integer)");
        snprintf(text, sizeof text, "{\"hidden_size\": 2048, \"moe_intermediate_size\": 768, \"num_experts\": 128, "
                 "\"num_experts_per_tok\": %s}", bad[i]);
        expect_err(put("k.json", text), ": num_experts_per_tok: wrong type (null, expected integer)");
        snprintf(text, sizeof text, "{\"text_config\": {\"hidden_size\": %s, \"num_experts\": 128}}", bad[i]);
        expect_err(put("t.json", text), ": text_config.hidden_size: wrong type (null, expected integer)");
    }
    p = put("ok.json", "{" HF_OK ", \"num_experts\": 128, \"rope_theta\": NaN, \"max_x\": Infinity, "
                       "\"min_x\": -Infinity, \"sliding_window\": null, \"moe_latent_size\": null}");
    cr_assert_eq(moects__model_load(p, &m, err, sizeof err), 0, "%s", err);
    cr_expect_eq(m.hidden_size, 2048);
    cr_expect_eq(m.moe_intermediate_size, 768);
    cr_expect_eq(m.routed_experts, 128);
    cr_expect_eq(m.experts_per_token, 8);
    cr_expect_eq(m.latent_size, 0);
}

/* tmpdir/name: the raw config src with moe_intermediate_size removed (from text_config when nested). */
static const char *without_moe_i(const char *src, const char *name, const char *nest)
{
    json_error_t je;
    json_t *root = json_load_file(src, 0, &je);
    cr_assert_not_null(root, "%s: %s", src, je.text);
    json_t *sec = nest ? json_object_get(root, nest) : root;
    cr_assert_eq(json_object_del(sec, "moe_intermediate_size"), 0, "%s has no moe_intermediate_size", src);
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    cr_assert_eq(json_dump_file(root, path, 0), 0);
    json_decref(root);
    return path;
}

/* The routed experts' width comes from moe_intermediate_size in the families that count experts in
 * n_routed_experts (DeepSeek-V3, Kimi K2), num_experts (Qwen3-MoE, Kimi K3) or moe_num_experts
 * (Ernie 4.5): their intermediate_size is the dense MLP's (18432 for DeepSeek-V3, 6144 for
 * Qwen3-30B-A3B, against 2048 and 768), so its absence is an error, never a fallback. The families
 * whose experts are intermediate_size wide still read it: num_local_experts (Mixtral above; Llama 4
 * Scout, whose dense MLP is intermediate_size_mlp), OLMoE and Jamba (num_experts, model_type). */
Test(model, expert_width_field_follows_the_family, .init = mk_tmp, .fini = rm_tmp)
{
    static const char *const why = "moe_intermediate_size: missing field (the routed experts' width; with ";
    char want[512];
    /* each refusal ends with the family, the config's model_type (read by hand from each file) */
    snprintf(want, sizeof want, ": %sn_routed_experts, intermediate_size is the dense MLP's) (model_type deepseek_v3)",
             why);
    expect_err(without_moe_i(SRC "/hf-configs/deepseek-ai--DeepSeek-V3.config.json", "dsv3.json", NULL), want);
    snprintf(want, sizeof want, ": %sn_routed_experts, intermediate_size is the dense MLP's) (model_type kimi_k2)", why);
    expect_err(without_moe_i(SRC "/hf-configs/moonshotai--Kimi-K2-Instruct.config.json", "k2.json", NULL), want);
    snprintf(want, sizeof want, ": %snum_experts, intermediate_size is the dense MLP's) (model_type qwen3_moe)", why);
    expect_err(without_moe_i(SRC "/hf-configs/Qwen--Qwen3-30B-A3B.config.json", "q3.json", NULL), want);
    snprintf(want, sizeof want,
             ": text_config.%stext_config.num_experts, intermediate_size is the dense MLP's) (model_type kimi_k3)", why);
    expect_err(without_moe_i(SRC "/hf-configs/moonshotai--Kimi-K3.config.json", "k3.json", "text_config"), want);
    /* Ernie 4.5 300B (numbers: models-extra.json): without, then with moe_intermediate_size */
    snprintf(want, sizeof want, ": %smoe_num_experts, intermediate_size is the dense MLP's) (model_type ernie4_5_moe)",
             why);
    expect_err(put("ernie.json", "{\"model_type\": \"ernie4_5_moe\", \"hidden_size\": 8192, \"intermediate_size\": "
                                 "28672, \"moe_num_experts\": 64, \"moe_k\": 8}"),
               want);
    moects_model m;
    char err[512] = "";
    const char *p = put("ernie.json", "{\"model_type\": \"ernie4_5_moe\", \"hidden_size\": 8192, \"intermediate_size\": "
                                      "28672, \"moe_intermediate_size\": 3584, \"moe_num_experts\": 64, \"moe_k\": 8}");
    cr_assert_eq(moects__model_load(p, &m, err, sizeof err), 0, "%s", err);
    cr_expect_eq(m.moe_intermediate_size, 3584);
    cr_expect_eq(m.routed_experts, 64);
    cr_expect_eq(m.experts_per_token, 8);

    /* Llama 4 Scout (numbers: models-extra.json): experts 8192 wide, the dense MLP 16384 */
    p = put("scout.json", "{\"model_type\": \"llama4\", \"text_config\": {\"model_type\": \"llama4_text\", "
                          "\"hidden_size\": 5120, \"intermediate_size\": 8192, \"intermediate_size_mlp\": 16384, "
                          "\"num_local_experts\": 16, \"num_experts_per_tok\": 1}}");
    cr_assert_eq(moects__model_load(p, &m, err, sizeof err), 0, "%s", err);
    cr_expect_eq(m.moe_intermediate_size, 8192);
    cr_expect_eq(m.routed_experts, 16);
    /* OLMoE-1B-7B (64 experts of 1024, top 8) and Jamba v0.1 (16 of 14336, top 2) */
    p = put("olmoe.json", "{\"model_type\": \"olmoe\", \"hidden_size\": 2048, \"intermediate_size\": 1024, "
                          "\"num_experts\": 64, \"num_experts_per_tok\": 8}");
    cr_assert_eq(moects__model_load(p, &m, err, sizeof err), 0, "%s", err);
    cr_expect_eq(m.moe_intermediate_size, 1024);
    p = put("jamba.json", "{\"model_type\": \"jamba\", \"hidden_size\": 4096, \"intermediate_size\": 14336, "
                          "\"num_experts\": 16, \"num_experts_per_tok\": 2}");
    cr_assert_eq(moects__model_load(p, &m, err, sizeof err), 0, "%s", err);
    cr_expect_eq(m.moe_intermediate_size, 14336);
    /* neither width: the num_local_experts family names both fields; DBRX its ffn_config field */
    expect_err(put("mixtral.json", "{\"hidden_size\": 4096, \"num_local_experts\": 8, \"num_experts_per_tok\": 2}"),
               ": moe_intermediate_size: missing field (nor intermediate_size)");
    expect_err(put("dbrx.json", "{\"d_model\": 6144, \"ffn_config\": {\"moe_num_experts\": 16, \"moe_top_k\": 4}}"),
               ": ffn_config.ffn_hidden_size: missing field");
}

/* Per-layer list fields: dense layers hold 0 (or null), the MoE layers one value each. The values
 * below are planted by hand: layer 0 dense, layers 1..3 MoE with 1408-wide experts. */
Test(model, per_layer_list_fields, .init = mk_tmp, .fini = rm_tmp)
{
    const char *p = put("layers.json", "{\"model_type\": \"toy_moe\", \"hidden_size\": 2048,"
                                       " \"moe_intermediate_size\": [0, 1408, 1408, 1408],"
                                       " \"num_experts\": [null, 64, 64, 64], \"num_experts_per_tok\": 6}");
    moects_model m;
    char err[512] = "";
    cr_assert_eq(moects__model_load(p, &m, err, sizeof err), 0, "%s", err);
    cr_expect_eq(m.moe_intermediate_size, 1408);
    cr_expect_eq(m.routed_experts, 64);
    cr_expect_eq(m.experts_per_token, 6);
    /* MoE layers that differ: refused, naming the field, two layers and the family */
    p = put("differ.json", "{\"model_type\": \"toy_moe\", \"hidden_size\": 2048,"
                           " \"moe_intermediate_size\": [0, 1408, 2816], \"num_experts\": 64,"
                           " \"num_experts_per_tok\": 6}");
    cr_assert_eq(moects__model_load(p, &m, err, sizeof err), -1);
    char want[700];
    snprintf(want, sizeof want, "%s: moe_intermediate_size: per-layer values differ among the MoE layers (1408 at "
                                "layer 1, 2816 at layer 2) (model_type toy_moe)", p);
    cr_expect_str_eq(err, want);
    /* a list element of the wrong type */
    p = put("type.json", "{\"hidden_size\": 2048, \"moe_intermediate_size\": [0, \"x\"], \"num_experts\": 64,"
                         " \"num_experts_per_tok\": 6}");
    cr_assert_eq(moects__model_load(p, &m, err, sizeof err), -1);
    snprintf(want, sizeof want, "%s: moe_intermediate_size[1]: wrong type (string, expected integer)", p);
    cr_expect_str_eq(err, want);
    /* Hunyuan's names (moe_topk, num_shared_expert) as per-layer lists */
    p = put("hunyuan.json", "{\"model_type\": \"hunyuan_v1_moe\", \"hidden_size\": 4096, \"num_experts\": 64,"
                            " \"moe_topk\": [8, 8], \"moe_intermediate_size\": [3072, 3072], \"num_shared_expert\": [1, 1]}");
    cr_assert_eq(moects__model_load(p, &m, err, sizeof err), 0, "%s", err);
    cr_expect_eq(m.experts_per_token, 8);
    cr_expect_eq(m.moe_intermediate_size, 3072);
    cr_expect_eq(m.shared_experts, 1);
}
