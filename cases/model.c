/* model.c: load one model's MoE dims from a registry file (cases/models/NAME.json) or from a raw
 * Hugging Face config.json of any MoE family. DESIGN.md "Cases". */
#include <ctype.h>
#include <float.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cases_internal.h"
#include "moects_cases.h"

typedef struct {
    const char *path;
    char *err;
    size_t errlen;
    char family[80]; /* " (model_type qwen3_moe)" for a raw config's refusals, "" when unknown */
} ctx;

static const char *type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "object";
    case JSON_ARRAY: return "array";
    case JSON_STRING: return "string";
    case JSON_INTEGER: return "integer";
    case JSON_REAL: return "real";
    case JSON_TRUE:
    case JSON_FALSE: return "boolean";
    default: return "null";
    }
}

/* Read obj[key] as an integer in [min, max] (max: a MOECTS__MAX_* bound). Returns 1 if absent (or
 * null when null_ok), 0 when read, -1 on error. pre is the path of obj inside the file ("" or
 * "text_config."). */
/* A per-layer list field (a config giving one value per decoder layer, 0 or null on dense layers): the
 * MoE layers' value, when they all agree. 0 and *v set; 1 when no layer has one (absent); -1 with err
 * naming the field, the layers that differ and the family (model_type) otherwise. */
static int per_layer(const ctx *c, const json_t *list, const char *pre, const char *key, int64_t *v)
{
    size_t i, first = 0;
    int found = 0;
    const json_t *e;
    json_array_foreach(list, i, e)
    {
        if (json_is_null(e) || (json_is_integer(e) && json_integer_value(e) == 0)) continue;
        if (!json_is_integer(e))
            return moects__fail(c->err, c->errlen, "%s: %s%s[%zu]: wrong type (%s, expected integer)%s", c->path, pre,
                                key, i, type_name(e), c->family);
        if (found && json_integer_value(e) != *v)
            return moects__fail(c->err, c->errlen,
                                "%s: %s%s: per-layer values differ among the MoE layers (%lld at layer %zu, %lld at "
                                "layer %zu)%s",
                                c->path, pre, key, (long long)*v, first, (long long)json_integer_value(e), i, c->family);
        if (!found) *v = json_integer_value(e), first = i, found = 1;
    }
    return found ? 0 : 1;
}

static int get_int(const ctx *c, const json_t *obj, const char *pre, const char *key, int null_ok,
                   int64_t min, int64_t max, int64_t *out)
{
    const json_t *v = json_object_get(obj, key);
    if (!v || (null_ok && json_is_null(v))) return 1;
    if (json_is_array(v)) {
        int64_t x = 0;
        int r = per_layer(c, v, pre, key, &x);
        if (r) return r;
        if (x < min)
            return moects__fail(c->err, c->errlen, "%s: %s%s: %s (%lld)", c->path, pre, key,
                                min > 0 ? "non-positive size" : "negative count", (long long)x);
        if (moects__check_max(c->path, pre, key, x, min > 0 ? min : 0, max, c->err, c->errlen)) return -1;
        *out = x;
        return 0;
    }
    if (!json_is_integer(v))
        return moects__fail(c->err, c->errlen, "%s: %s%s: wrong type (%s, expected integer)", c->path, pre,
                            key, type_name(v));
    int64_t x = (int64_t)json_integer_value(v);
    if (x < min)
        return moects__fail(c->err, c->errlen, "%s: %s%s: %s (%lld)", c->path, pre, key,
                            min > 0 ? "non-positive size" : "negative count", (long long)x);
    if (moects__check_max(c->path, pre, key, x, min > 0 ? min : 0, max, c->err, c->errlen)) return -1;
    *out = x;
    return 0;
}

static int get_str(const ctx *c, const json_t *obj, const char *pre, const char *key, char *dst, size_t n)
{
    const json_t *v = json_object_get(obj, key);
    if (!v) return moects__fail(c->err, c->errlen, "%s: %s%s: missing field", c->path, pre, key);
    if (!json_is_string(v))
        return moects__fail(c->err, c->errlen, "%s: %s%s: wrong type (%s, expected string)", c->path, pre, key,
                            type_name(v));
    if (moects__copy(dst, n, json_string_value(v)))
        return moects__fail(c->err, c->errlen, "%s: %s%s: too long (max %zu bytes)", c->path, pre, key, n - 1);
    return 0;
}

static int need_int(const ctx *c, const json_t *obj, const char *key, int64_t min, int64_t max, int64_t *out)
{
    int r = get_int(c, obj, "", key, 0, min, max, out);
    if (r == 1) return moects__fail(c->err, c->errlen, "%s: %s: missing field", c->path, key);
    return r;
}

/* ---- the fused layer's facts: activation, its limit and alpha, biases, router weight ----------- */

/* Each activation's name in registry files, whether its experts are gated, and whether it takes a
 * limit L and an alpha a (moects_types.h gives the formulas): 'r' required, 'n' none (null),
 * 'o' optional (SiTU's linear_beta: absent, the up half is not squashed). */
static const struct {
    const char *name;
    moects_activation act;
    int gated;
    char limit, alpha;
} ACTS[] = {
    {"silu", MOECTS_ACT_SILU, 1, 'n', 'n'},
    {"gelu_tanh", MOECTS_ACT_GELU_TANH, 1, 'n', 'n'},
    {"gelu_erf", MOECTS_ACT_GELU_ERF, 1, 'n', 'n'},
    {"relu2", MOECTS_ACT_RELU2, 0, 'n', 'n'},
    {"silu_clamp", MOECTS_ACT_SILU_CLAMP, 1, 'r', 'n'},
    {"gpt_oss", MOECTS_ACT_GPT_OSS, 1, 'r', 'r'},
    {"situ", MOECTS_ACT_SITU, 1, 'o', 'r'},
};
#define NACTS (sizeof ACTS / sizeof *ACTS)

const char *moects__activation_name(moects_activation a)
{
    for (size_t i = 0; i < NACTS; i++)
        if (ACTS[i].act == a) return ACTS[i].name;
    return "unknown";
}

static int need_bool(const ctx *c, const json_t *obj, const char *key, int *out)
{
    const json_t *v = json_object_get(obj, key);
    if (!v) return moects__fail(c->err, c->errlen, "%s: %s: missing field", c->path, key);
    if (!json_is_boolean(v))
        return moects__fail(c->err, c->errlen, "%s: %s: wrong type (%s, expected boolean)", c->path, key,
                            type_name(v));
    *out = json_is_true(v);
    return 0;
}

/* obj[key]: a positive finite number that an FP32 holds (*out, *has = 1), or null (*has = 0; so are
 * NaN and Infinity, which the reader turns into null). 1 when absent, 0 when read, -1 on error. */
static int get_real(const ctx *c, const json_t *obj, const char *pre, const char *key, float *out, int *has)
{
    const json_t *v = json_object_get(obj, key);
    *has = 0;
    if (!v) return 1;
    if (json_is_null(v)) return 0;
    if (!json_is_number(v))
        return moects__fail(c->err, c->errlen, "%s: %s%s: wrong type (%s, expected number)", c->path, pre, key,
                            type_name(v));
    double x = json_number_value(v);
    if (!(x > 0)) return moects__fail(c->err, c->errlen, "%s: %s%s: non-positive value (%g)", c->path, pre, key, x);
    if (!(x <= FLT_MAX))
        return moects__fail(c->err, c->errlen, "%s: %s%s: out of range (0..%g, an FP32)", c->path, pre, key,
                            (double)FLT_MAX);
    *out = (float)x;
    *has = 1;
    return 0;
}

/* A registry file's activation, activation_limit, activation_alpha, expert_bias and
 * router_weight_on_input (all required), each consistent with the activation, gated and top-k. */
static int load_act(const ctx *c, const json_t *root, moects_model *m)
{
    char name[32];
    if (get_str(c, root, "", "activation", name, sizeof name)) return -1;
    size_t i = 0;
    while (i < NACTS && strcmp(name, ACTS[i].name)) i++;
    if (i == NACTS)
        return moects__fail(c->err, c->errlen,
                            "%s: activation: unknown value \"%s\" (silu, gelu_tanh, gelu_erf, relu2, silu_clamp, "
                            "gpt_oss, situ)",
                            c->path, name);
    m->activation = ACTS[i].act;
    if (m->gated != ACTS[i].gated)
        return moects__fail(c->err, c->errlen, "%s: gated: must be %s with activation %s", c->path,
                            ACTS[i].gated ? "true" : "false", name);
    static const char *const keys[2] = {"activation_limit", "activation_alpha"};
    float *val[2] = {&m->activation_limit, &m->activation_alpha};
    int *has[2] = {&m->has_activation_limit, &m->has_activation_alpha};
    const char rule[2] = {ACTS[i].limit, ACTS[i].alpha};
    for (int k = 0; k < 2; k++) {
        int r = get_real(c, root, "", keys[k], val[k], has[k]);
        if (r < 0) return -1;
        if (r == 1) return moects__fail(c->err, c->errlen, "%s: %s: missing field", c->path, keys[k]);
        if (rule[k] == 'r' && !*has[k])
            return moects__fail(c->err, c->errlen, "%s: %s: null, but activation %s needs one", c->path, keys[k],
                                name);
        if (rule[k] == 'n' && *has[k])
            return moects__fail(c->err, c->errlen, "%s: %s: activation %s has none (expected null)", c->path,
                                keys[k], name);
    }
    if (need_bool(c, root, "expert_bias", &m->expert_bias) ||
        need_bool(c, root, "router_weight_on_input", &m->router_weight_on_input))
        return -1;
    if (m->router_weight_on_input && m->experts_per_token != 1) /* vLLM: top-1 only; nonlinear experts */
        return moects__fail(c->err, c->errlen, "%s: router_weight_on_input: true needs experts_per_token 1 (got %lld)",
                            c->path, (long long)m->experts_per_token);
    return 0;
}

/* ---- the router's facts (DESIGN.md "Routing") ------------------------------------------------- */

/* A registry file's scoring_func, topk_before_scoring, n_group, topk_group, routed_scaling_factor,
 * norm_topk_prob and e_score_correction_bias (all required), consistent with each other and top-k. */
static int load_router(const ctx *c, const json_t *root, moects_model *m)
{
    static const char *const names[] = {"softmax", "sigmoid", "sqrtsoftplus"};
    char name[32];
    if (get_str(c, root, "", "scoring_func", name, sizeof name)) return -1;
    int i = 0;
    while (i < 3 && strcmp(name, names[i])) i++;
    if (i == 3)
        return moects__fail(c->err, c->errlen, "%s: scoring_func: unknown value \"%s\" (softmax, sigmoid, sqrtsoftplus)",
                            c->path, name);
    m->scoring = (moects_scoring)(MOECTS_SCORING_SOFTMAX + i);
    int has = 0;
    if (need_bool(c, root, "topk_before_scoring", &m->topk_before_scoring) ||
        need_int(c, root, "n_group", 1, MOECTS__MAX_EXPERTS, &m->n_group) ||
        need_int(c, root, "topk_group", 1, MOECTS__MAX_EXPERTS, &m->topk_group) ||
        need_bool(c, root, "norm_topk_prob", &m->norm_topk_prob) ||
        need_bool(c, root, "e_score_correction_bias", &m->e_score_correction_bias))
        return -1;
    int r = get_real(c, root, "", "routed_scaling_factor", &m->routed_scaling_factor, &has);
    if (r || !has)
        return r < 0 ? -1 : moects__fail(c->err, c->errlen, "%s: routed_scaling_factor: missing field", c->path);
    if (m->routed_experts % m->n_group || m->topk_group > m->n_group)
        return moects__fail(c->err, c->errlen, "%s: n_group/topk_group: %lld groups of %lld experts, %lld kept", c->path,
                            (long long)m->n_group, (long long)m->routed_experts, (long long)m->topk_group);
    if (m->topk_before_scoring && (m->n_group > 1 || m->e_score_correction_bias))
        return moects__fail(c->err, c->errlen, "%s: topk_before_scoring: true takes no groups and no bias", c->path);
    return 0;
}

/* ---- registry file ---------------------------------------------------------------------------- */

static int valid_name(const char *s)
{
    if (!*s) return 0;
    for (; *s; s++)
        if (!(islower((unsigned char)*s) || isdigit((unsigned char)*s) || *s == '-' || *s == '.' || *s == '_'))
            return 0;
    return 1;
}

static int load_registry(const ctx *c, const json_t *root, moects_model *m)
{
    static const char *const known[] = {"name", "hf_id", "hidden_size", "moe_intermediate_size",
                                        "routed_experts", "experts_per_token", "shared_experts", "latent_size",
                                        "gated", "activation", "activation_limit", "activation_alpha",
                                        "expert_bias", "router_weight_on_input", "scoring_func",
                                        "topk_before_scoring", "n_group", "topk_group", "routed_scaling_factor",
                                        "norm_topk_prob", "e_score_correction_bias", "release_quantization",
                                        "source", "notes"};
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)root, key, val)
    {
        size_t i = 0;
        while (i < sizeof known / sizeof *known && strcmp(key, known[i])) i++;
        if (i == sizeof known / sizeof *known)
            return moects__fail(c->err, c->errlen, "%s: %s: unknown field", c->path, key);
    }
    if (get_str(c, root, "", "name", m->name, sizeof m->name)) return -1;
    if (!valid_name(m->name))
        return moects__fail(c->err, c->errlen, "%s: name: not a registry name (lower-case a-z 0-9 . - _): \"%s\"",
                            c->path, m->name);
    if (get_str(c, root, "", "hf_id", m->hf_id, sizeof m->hf_id)) return -1;
    if (need_int(c, root, "hidden_size", 1, MOECTS__MAX_WIDTH, &m->hidden_size)) return -1;
    if (need_int(c, root, "moe_intermediate_size", 1, MOECTS__MAX_WIDTH, &m->moe_intermediate_size)) return -1;
    if (need_int(c, root, "routed_experts", 1, MOECTS__MAX_EXPERTS, &m->routed_experts)) return -1;
    if (need_int(c, root, "experts_per_token", 1, MOECTS__MAX_TOPK, &m->experts_per_token)) return -1;
    if (need_int(c, root, "shared_experts", 0, MOECTS__MAX_EXPERTS, &m->shared_experts)) return -1;
    const json_t *lat = json_object_get(root, "latent_size");
    if (!lat) return moects__fail(c->err, c->errlen, "%s: latent_size: missing field", c->path);
    m->latent_size = 0;
    if (get_int(c, root, "", "latent_size", 1, 1, MOECTS__MAX_WIDTH, &m->latent_size) < 0) return -1;
    if (need_bool(c, root, "gated", &m->gated)) return -1;
    if (get_str(c, root, "", "release_quantization", m->release_quantization, sizeof m->release_quantization))
        return -1;
    if (get_str(c, root, "", "source", m->source, sizeof m->source)) return -1;
    if (m->routed_experts < 2)
        return moects__fail(c->err, c->errlen, "%s: routed_experts: not MoE (%lld routed expert)", c->path,
                            (long long)m->routed_experts);
    if (m->experts_per_token > m->routed_experts)
        return moects__fail(c->err, c->errlen, "%s: experts_per_token: exceeds routed_experts (%lld > %lld)",
                            c->path, (long long)m->experts_per_token, (long long)m->routed_experts);
    return load_act(c, root, m) || load_router(c, root, m) ? -1 : 0;
}

/* ---- raw Hugging Face config.json ------------------------------------------------------------- */

/* Look up the first present synonym of a field; all present synonyms must agree; each in [min, max].
 * Null synonyms count as absent. Returns 1 absent, 0 found (*used = the key), -1 error. */
static int get_synonym(const ctx *c, const json_t *obj, const char *pre, const char *const *keys, int64_t min,
                       int64_t max, int64_t *out, const char **used)
{
    int found = 0;
    for (const char *const *k = keys; *k; k++) {
        int64_t v = 0;
        int r = get_int(c, obj, pre, *k, 1, min, max, &v);
        if (r < 0) return -1;
        if (r == 1) continue;
        if (found && v != *out)
            return moects__fail(c->err, c->errlen, "%s: %s%s: disagrees with %s%s (%lld vs %lld)", c->path, pre,
                                *k, pre, *used, (long long)v, (long long)*out);
        if (!found) {
            *out = v;
            *used = *k;
            found = 1;
        }
    }
    return found ? 0 : 1;
}

/* A required field none of whose synonyms holds a number but one is null (written so, or NaN /
 * Infinity, which the reader turns into null): returns 1 with "wrong type (null, expected integer)"
 * in err; else 0. */
static int null_field(const ctx *c, const json_t *obj, const char *pre, const char *const *keys)
{
    for (; *keys; keys++)
        if (json_is_null(json_object_get(obj, *keys))) {
            moects__fail(c->err, c->errlen, "%s: %s%s: wrong type (null, expected integer)", c->path, pre, *keys);
            return 1;
        }
    return 0;
}

static const char *const EXPERT_KEYS[] = {"n_routed_experts", "num_experts", "num_local_experts",
                                          "moe_num_experts", "num_routed_experts", NULL};
/* The families' names of each field (raw config.json), first present wins, all present must agree.
 * Experts: n_routed_experts (DeepSeek V2/V3, Kimi, GLM-4.5, dots.llm, Nemotron-H), num_experts
 * (Qwen2/3-MoE, Qwen3-Next, OLMoE, Jamba, Grok, Hunyuan), num_local_experts (Mixtral, gpt-oss, Llama 4,
 * MiniMax, Granite-MoE, Phi-MoE, Arctic, JetMoE), moe_num_experts (Ernie 4.5, Step, Aria; DBRX in
 * ffn_config). Top-k: num_experts_per_tok, experts_per_token (gpt-oss), moe_top_k (Step, DBRX), moe_k
 * (Ernie 4.5), moe_topk (Hunyuan, Aria). Shared experts: n_shared_experts, num_shared_experts,
 * moe_num_shared_experts, num_shared_expert (Hunyuan), or a shared expert width (Qwen2-MoE). Any of
 * them may be a per-layer list (per_layer). */
static const char *const TOPK_KEYS[] = {"num_experts_per_tok", "num_experts_per_token", "experts_per_token",
                                        "moe_top_k", "moe_k", "moe_topk", NULL};
static const char *const SHARED_KEYS[] = {"n_shared_experts", "num_shared_experts", "moe_num_shared_experts",
                                          "num_shared_expert", NULL};
static const char *const SHARED_WIDTH_KEYS[] = {"shared_expert_intermediate_size",
                                                "moe_shared_expert_intermediate_size", NULL};
static const char *const LATENT_KEYS[] = {"moe_latent_size", "routed_expert_hidden_size", "latent_size", NULL};
static const char *const ACT_KEYS[] = {"mlp_hidden_act", "moe_hidden_act", "hidden_act", "hidden_activation",
                                       "activation_function", NULL};

/* Activations whose expert MLP has no gate/up pair (gemm1 N = I). */
static int act_is_gated(const char *a)
{
    static const char *const plain[] = {"relu2", "relu_squared", "squared_relu", "relu2_no_glu", NULL};
    for (const char *const *p = plain; *p; p++)
        if (!strcmp(a, *p)) return 0;
    return 1;
}

static int has_any(const json_t *obj, const char *const *keys)
{
    for (; *keys; keys++)
        if (json_object_get(obj, *keys)) return 1;
    return 0;
}

/* Registry-style name from the file name: "org--Repo-Name.config.json" -> "repo-name". */
static void name_from_path(const char *path, char *name, size_t n, char *hf_id, size_t hn)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    char tmp[256];
    moects__copy(tmp, sizeof tmp, base);
    char *dot = strstr(tmp, ".json");
    if (dot && !dot[5]) *dot = '\0';
    size_t L = strlen(tmp);
    static const char *const suf[] = {".config", "_config", "-config"};
    for (int i = 0; i < 3; i++) {
        size_t s = strlen(suf[i]);
        if (L > s && !strcmp(tmp + L - s, suf[i])) tmp[L -= s] = '\0';
    }
    if (!strcmp(tmp, "config")) { /* .../<dir>/config.json: use the directory name */
        const char *end = base > path ? base - 1 : path;
        const char *beg = end;
        while (beg > path && beg[-1] != '/') beg--;
        size_t d = (size_t)(end - beg);
        if (d > 0 && d < sizeof tmp) {
            memcpy(tmp, beg, d);
            tmp[d] = '\0';
        }
    }
    char *sep = strstr(tmp, "--");
    hf_id[0] = '\0';
    if (sep && strlen(tmp) < hn) {
        moects__copy(hf_id, hn, tmp);
        hf_id[sep - tmp] = '/';
        memmove(hf_id + (sep - tmp) + 1, hf_id + (sep - tmp) + 2, strlen(sep + 2) + 1);
    }
    const char *src = sep ? sep + 2 : tmp;
    size_t o = 0;
    for (; *src && o + 1 < n; src++) {
        unsigned char ch = (unsigned char)tolower((unsigned char)*src);
        name[o++] = (isalnum(ch) || ch == '.' || ch == '-' || ch == '_') ? (char)ch : '-';
    }
    name[o] = '\0';
    if (!o) moects__copy(name, n, "unnamed");
}

static void describe_quant(const json_t *root, const json_t *sec, char *dst, size_t n)
{
    char buf[256] = "";
    size_t o = 0;
    const json_t *ed = json_object_get(sec, "expert_dtype");
    if (!ed) ed = json_object_get(root, "expert_dtype");
    if (json_is_string(ed)) o += (size_t)snprintf(buf + o, sizeof buf - o, "routed experts %s; ", json_string_value(ed));
    const json_t *q = json_object_get(sec, "quantization_config");
    if (!q) q = json_object_get(root, "quantization_config");
    if (json_is_object(q)) {
        static const char *const keys[] = {"quant_method", "format", "fmt", "scale_fmt", NULL};
        for (const char *const *k = keys; *k && o < sizeof buf; k++) {
            const json_t *v = json_object_get(q, *k);
            if (json_is_string(v)) o += (size_t)snprintf(buf + o, sizeof buf - o, "%s ", json_string_value(v));
        }
        const json_t *wb = json_object_get(q, "weight_block_size");
        if (json_is_array(wb) && json_array_size(wb) == 2 && o < sizeof buf)
            o += (size_t)snprintf(buf + o, sizeof buf - o, "block %lldx%lld ",
                                  (long long)json_integer_value(json_array_get(wb, 0)),
                                  (long long)json_integer_value(json_array_get(wb, 1)));
    } else {
        const json_t *dt = json_object_get(sec, "torch_dtype");
        if (!json_is_string(dt)) dt = json_object_get(root, "torch_dtype");
        if (!json_is_string(dt)) dt = json_object_get(sec, "dtype");
        if (!json_is_string(dt)) dt = json_object_get(root, "dtype");
        if (json_is_string(dt)) {
            const char *s = json_string_value(dt);
            o += (size_t)snprintf(buf + o, sizeof buf - o, "%s", !strcmp(s, "bfloat16") ? "bf16" : s);
        }
    }
    if (o >= sizeof buf) o = sizeof buf - 1;
    while (o > 0 && (buf[o - 1] == ' ' || buf[o - 1] == ';')) buf[--o] = '\0';
    moects__copy(dst, n, o ? buf : "unknown");
}

/* A HF config being read: its language model's section (pre: its key path, "text_config."), DBRX's
 * ffn_config (fpre), and the source line of the fields read so far. */
typedef struct {
    ctx *c;
    const json_t *root, *sec, *ffn;
    char pre[40], fpre[56];
    int dbrx;
    char src[1024];
    size_t so;
} hf_read;

__attribute__((format(printf, 2, 3))) static void src_add(hf_read *h, const char *fmt, ...)
{
    if (h->so >= sizeof h->src) return;
    va_list ap;
    va_start(ap, fmt);
    h->so += (size_t)vsnprintf(h->src + h->so, sizeof h->src - h->so, fmt, ap);
    va_end(ap);
}

/* Multimodal configs nest the language model (Kimi K3: text_config); DBRX keeps its MoE fields in
 * ffn_config and names the width d_model. */
static void hf_section(hf_read *h)
{
    static const char *const nests[] = {"text_config", "language_config", "llm_config", "thinker_config", NULL};
    h->sec = h->root;
    if (!has_any(h->root, EXPERT_KEYS)) {
        for (const char *const *k = nests; *k; k++) {
            const json_t *t = json_object_get(h->root, *k);
            if (json_is_object(t) && (has_any(t, EXPERT_KEYS) || json_object_get(t, "hidden_size"))) {
                h->sec = t;
                snprintf(h->pre, sizeof h->pre, "%s.", *k);
                break;
            }
        }
    }
    h->ffn = json_object_get(h->sec, "ffn_config");
    h->dbrx = json_is_object(h->ffn) && json_object_get(h->ffn, "moe_num_experts");
    snprintf(h->fpre, sizeof h->fpre, "%sffn_config.", h->pre);
}

/* hidden_size and the routed expert count; *expert_key: the field the count came from. 0 or -1. */
static int hf_experts(hf_read *h, moects_model *m, const char **expert_key)
{
    ctx *c = h->c;
    const char *used = NULL, *pre = h->pre;
    static const char *const HID[] = {"hidden_size", "d_model", NULL};
    int r = get_synonym(c, h->sec, pre, HID, 1, MOECTS__MAX_WIDTH, &m->hidden_size, &used);
    if (r < 0 || (r == 1 && null_field(c, h->sec, pre, HID))) return -1;
    if (r == 1) return moects__fail(c->err, c->errlen, "%s: %shidden_size: missing field", c->path, pre);
    src_add(h, " %s%s", pre, used);
    r = h->dbrx ? get_synonym(c, h->ffn, h->fpre, (const char *const[]){"moe_num_experts", NULL}, 0,
                              MOECTS__MAX_EXPERTS, &m->routed_experts, &used)
                : get_synonym(c, h->sec, pre, EXPERT_KEYS, 0, MOECTS__MAX_EXPERTS, &m->routed_experts, &used);
    if (r < 0 || (r == 1 && !h->dbrx && null_field(c, h->sec, pre, EXPERT_KEYS))) return -1;
    if (r == 1)
        return moects__fail(c->err, c->errlen,
                            "%s: %sn_routed_experts: not an MoE config (none of n_routed_experts, num_experts, "
                            "num_local_experts, moe_num_experts)",
                            c->path, pre);
    if (m->routed_experts < 2)
        return moects__fail(c->err, c->errlen, "%s: %s%s: not an MoE config (%lld routed experts)", c->path,
                            h->dbrx ? h->fpre : pre, used, (long long)m->routed_experts);
    src_add(h, ", %s%s", h->dbrx ? h->fpre : pre, used);
    *expert_key = used;
    return 0;
}

/* The routed expert's width. Families counting experts in num_local_experts (Mixtral, gpt-oss,
 * Llama 4) size them with intermediate_size, and so do a few counting in num_experts (model_type
 * olmoe, jamba, grok-1); DBRX with ffn_config.ffn_hidden_size. The others (n_routed_experts:
 * DeepSeek-V3, Kimi, GLM-4.5; num_experts: Qwen3-MoE; moe_num_experts: Ernie 4.5) have dense MLP
 * layers too, of width intermediate_size: theirs is moe_intermediate_size alone (the families'
 * modeling code in vLLM and transformers reads it so). 0 or -1. */
static int hf_width(hf_read *h, moects_model *m, const char *expert_key)
{
    ctx *c = h->c;
    const char *used = NULL, *pre = h->pre;
    static const char *const MOEI[] = {"moe_intermediate_size", NULL};
    static const char *const DENSEI[] = {"intermediate_size", NULL};
    static const char *const DENSE_EXPERT_TYPES[] = {"olmoe", "jamba", "grok-1", NULL};
    const json_t *mt = json_object_get(h->sec, "model_type");
    if (!json_is_string(mt)) mt = json_object_get(h->root, "model_type");
    int dbrx = h->dbrx, dense_ok = !dbrx && !strcmp(expert_key, "num_local_experts");
    for (const char *const *t = DENSE_EXPERT_TYPES; *t && !dbrx && json_is_string(mt); t++)
        dense_ok |= !strcmp(json_string_value(mt), *t);
    int r = dbrx ? get_synonym(c, h->ffn, h->fpre, (const char *const[]){"ffn_hidden_size", NULL}, 1, MOECTS__MAX_WIDTH,
                               &m->moe_intermediate_size, &used)
                 : get_synonym(c, h->sec, pre, MOEI, 1, MOECTS__MAX_WIDTH, &m->moe_intermediate_size, &used);
    if (r == 1 && dense_ok) r = get_synonym(c, h->sec, pre, DENSEI, 1, MOECTS__MAX_WIDTH, &m->moe_intermediate_size, &used);
    if (r < 0 ||
        (r == 1 && !dbrx && (null_field(c, h->sec, pre, MOEI) || (dense_ok && null_field(c, h->sec, pre, DENSEI)))))
        return -1;
    if (r == 1 && dbrx) return moects__fail(c->err, c->errlen, "%s: %sffn_hidden_size: missing field", c->path, h->fpre);
    if (r == 1 && dense_ok)
        return moects__fail(c->err, c->errlen, "%s: %smoe_intermediate_size: missing field (nor intermediate_size)",
                            c->path, pre);
    if (r == 1)
        return moects__fail(c->err, c->errlen,
                            "%s: %smoe_intermediate_size: missing field (the routed experts' width; with %s%s, "
                            "intermediate_size is the dense MLP's)",
                            c->path, pre, pre, expert_key);
    src_add(h, ", %s%s", dbrx ? h->fpre : pre, used);
    return 0;
}

/* Experts per token. 0 or -1. */
static int hf_topk(hf_read *h, moects_model *m)
{
    ctx *c = h->c;
    const char *used = NULL, *pre = h->pre;
    int r = h->dbrx ? get_synonym(c, h->ffn, h->fpre, (const char *const[]){"moe_top_k", NULL}, 1, MOECTS__MAX_TOPK,
                                  &m->experts_per_token, &used)
                    : get_synonym(c, h->sec, pre, TOPK_KEYS, 1, MOECTS__MAX_TOPK, &m->experts_per_token, &used);
    if (r < 0 || (r == 1 && !h->dbrx && null_field(c, h->sec, pre, TOPK_KEYS))) return -1;
    if (r == 1)
        return moects__fail(c->err, c->errlen, "%s: %snum_experts_per_tok: missing field (nor experts_per_token)",
                            c->path, pre);
    if (m->experts_per_token > m->routed_experts)
        return moects__fail(c->err, c->errlen, "%s: %s%s: exceeds the routed expert count (%lld > %lld)", c->path,
                            h->dbrx ? h->fpre : pre, used, (long long)m->experts_per_token, (long long)m->routed_experts);
    src_add(h, ", %s%s", h->dbrx ? h->fpre : pre, used);
    return 0;
}

/* The fused layer's facts from a raw config (act: its activation name, NULL if none). The name means
 * what Hugging Face transformers' ACT2FN says ("gelu" the exact erf GELU, "gelu_new" and
 * "gelu_pytorch_tanh" the tanh one); a swiglu_limit makes SiLU the clamped one; Kimi's "situ" takes
 * activation_situ_beta (alpha) and activation_situ_linear_beta (limit). Two families are known by
 * model_type, their config not saying it: gpt_oss (its swiglu, whatever hidden_act says: limit
 * swiglu_limit, alpha 1.702 and biases on both GEMMs, openai/gpt-oss gpt_oss/torch/model.py) and
 * llama4 (top-1, the router weight on the input: transformers Llama4TextMoe). A name not mapped
 * leaves activation 0, unknown. 0 or -1. */
static int hf_act(hf_read *h, moects_model *m, const char *act)
{
    static const struct {
        const char *name;
        moects_activation act;
    } MAP[] = {{"silu", MOECTS_ACT_SILU},         {"swish", MOECTS_ACT_SILU},
               {"gelu", MOECTS_ACT_GELU_ERF},     {"gelu_new", MOECTS_ACT_GELU_TANH},
               {"gelu_pytorch_tanh", MOECTS_ACT_GELU_TANH},
               {"situ", MOECTS_ACT_SITU}};
    ctx *c = h->c;
    const char *pre = h->pre;
    const json_t *mt = json_object_get(h->sec, "model_type");
    if (!json_is_string(mt)) mt = json_object_get(h->root, "model_type");
    const char *type = json_is_string(mt) ? json_string_value(mt) : "";
    float lim = 0, beta = 0, lbeta = 0;
    int has_lim, has_beta, has_lbeta;
    if (get_real(c, h->sec, pre, "swiglu_limit", &lim, &has_lim) < 0 ||
        get_real(c, h->sec, pre, "activation_situ_beta", &beta, &has_beta) < 0 ||
        get_real(c, h->sec, pre, "activation_situ_linear_beta", &lbeta, &has_lbeta) < 0)
        return -1;
    m->activation = 0;
    for (size_t i = 0; act && i < sizeof MAP / sizeof *MAP; i++)
        if (!strcmp(act, MAP[i].name)) m->activation = MAP[i].act;
    if (act && !m->gated) m->activation = MOECTS_ACT_RELU2;
    int gpt_oss = !strcmp(type, "gpt_oss");
    if (gpt_oss) m->activation = MOECTS_ACT_GPT_OSS, m->activation_alpha = 1.702f, m->has_activation_alpha = 1;
    else if (m->activation == MOECTS_ACT_SILU && has_lim) m->activation = MOECTS_ACT_SILU_CLAMP;
    if (m->activation == MOECTS_ACT_GPT_OSS || m->activation == MOECTS_ACT_SILU_CLAMP)
        m->activation_limit = lim, m->has_activation_limit = has_lim;
    if (m->activation == MOECTS_ACT_SITU) {
        m->activation_limit = lbeta, m->has_activation_limit = has_lbeta;
        m->activation_alpha = beta, m->has_activation_alpha = has_beta;
    }
    m->expert_bias = gpt_oss;
    m->router_weight_on_input = !strcmp(type, "llama4") || !strcmp(type, "llama4_text");
    src_add(h, "; activation %s", moects__activation_name(m->activation));
    if (m->activation == MOECTS_ACT_SITU)
        src_add(h, " (%sactivation_situ_beta, %sactivation_situ_linear_beta)", pre, pre);
    else if (m->has_activation_limit) src_add(h, " (%sswiglu_limit)", pre);
    if (gpt_oss) src_add(h, ", alpha 1.702, expert biases (model_type gpt_oss)");
    if (m->router_weight_on_input) src_add(h, "; router weight on the input (model_type %s)", type);
    return 0;
}

/* Shared experts (a count, or one when a shared width is set), the latent width, the activation
 * (gated unless it says otherwise). 0 or -1. */
static int hf_rest(hf_read *h, moects_model *m)
{
    ctx *c = h->c;
    const char *used = NULL, *pre = h->pre;
    int r = get_synonym(c, h->sec, pre, SHARED_KEYS, 0, MOECTS__MAX_EXPERTS, &m->shared_experts, &used);
    if (r < 0) return -1;
    if (r == 0) {
        src_add(h, ", %s%s", pre, used);
    } else {
        int64_t w = 0;
        r = get_synonym(c, h->sec, pre, SHARED_WIDTH_KEYS, 0, MOECTS__MAX_WIDTH, &w, &used);
        if (r < 0) return -1;
        m->shared_experts = (r == 0 && w > 0) ? 1 : 0;
        if (r == 0) src_add(h, ", shared from %s%s=%lld", pre, used, (long long)w);
        else src_add(h, ", shared 0 (no field)");
    }
    m->latent_size = 0;
    r = get_synonym(c, h->sec, pre, LATENT_KEYS, 1, MOECTS__MAX_WIDTH, &m->latent_size, &used);
    if (r < 0) return -1;
    if (r == 0) src_add(h, ", latent %s%s", pre, used);
    m->gated = 1;
    const char *act = NULL;
    for (const char *const *k = ACT_KEYS; *k && !act; k++) {
        const json_t *v = json_object_get(h->sec, *k);
        if (!v) continue;
        if (!json_is_string(v))
            return moects__fail(c->err, c->errlen, "%s: %s%s: wrong type (%s, expected string)", c->path, pre, *k,
                                type_name(v));
        act = json_string_value(v);
        m->gated = act_is_gated(act);
        src_add(h, "; %s: %s%s=%s", m->gated ? "gated" : "not gated", pre, *k, act);
    }
    if (!act) src_add(h, "; gated: default (no activation field)");
    return hf_act(h, m, act);
}

static int load_hf(ctx *c, const json_t *root, moects_model *m)
{
    const json_t *family = json_object_get(root, "model_type");
    if (json_is_string(family)) { /* the file's bytes: made one line, as every error is */
        snprintf(c->family, sizeof c->family, " (model_type %.60s)", json_string_value(family));
        moects__oneline(c->family);
    }
    hf_read h = {.c = c, .root = root};
    hf_section(&h);
    src_add(&h, "%s:", c->path);
    const char *expert_key = NULL;
    if (hf_experts(&h, m, &expert_key) || hf_width(&h, m, expert_key) || hf_topk(&h, m) || hf_rest(&h, m)) return -1;
    if (h.so >= sizeof h.src) memcpy(h.src + sizeof h.src - 4, "...", 4);
    moects__copy(m->source, sizeof m->source, h.src);
    describe_quant(root, h.sec, m->release_quantization, sizeof m->release_quantization);
    name_from_path(c->path, m->name, sizeof m->name, m->hf_id, sizeof m->hf_id);
    const json_t *np = json_object_get(h.sec, "_name_or_path");
    if (!m->hf_id[0] && json_is_string(np)) moects__copy(m->hf_id, sizeof m->hf_id, json_string_value(np));
    return 0;
}

int moects__model_load(const char *path, moects_model *m, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    ctx c = {path, err, errlen, ""};
    /* Strict (duplicate keys rejected) for both: Python's json.dump never writes a key twice, so a
     * repeated key in a config.json is hand editing whose meaning (first or last wins) is unclear. */
    json_t *root = moects__json_load_file(path, 1, err, errlen);
    if (!root) return -1;
    int rc = json_object_get(root, "routed_experts") ? load_registry(&c, root, m) : load_hf(&c, root, m);
    json_decref(root);
    /* a raw config's refusal names its family (model_type) too, once */
    size_t el = strlen(err);
    if (rc && c.family[0] && !strstr(err, c.family) && el + strlen(c.family) < errlen)
        memcpy(err + el, c.family, strlen(c.family) + 1);
    if (rc) memset(m, 0, sizeof *m);
    return rc;
}

int moects__models_load_dir(const char *dir, moects_model **out, char *err, size_t errlen)
{
    *out = NULL;
    char **names;
    size_t n;
    if (moects__json_names(dir, &names, &n, err, errlen)) return -1;
    moects_model *v = calloc(n ? n : 1, sizeof *v);
    int rc = (int)n;
    if (!v) rc = moects__fail(err, errlen, "%s: out of memory", dir);
    for (size_t i = 0; rc >= 0 && i < n; i++) {
        char path[4096];
        if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, names[i]) >= sizeof path)
            rc = moects__fail(err, errlen, "%s/%s: path too long", dir, names[i]);
        else if (moects__model_load(path, &v[i], err, errlen))
            rc = -1;
        else
            moects__copy(v[i].file, sizeof v[i].file, names[i]);
    }
    moects__names_free(names, n);
    if (rc < 0) {
        free(v);
        return -1;
    }
    *out = v;
    return rc;
}
