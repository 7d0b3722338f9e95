/* layer_recipe.c: the fused MoE layer recipe's string form, its closed lists of values, and the
 * process-wide table that gives each recipe a moects_recipe value (ref/moects_layer.h). */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "moects_layer.h"

/* One key: its values in enum order (the first the default) and where it goes in the struct. */
typedef struct {
    const char *key;
    const char *values[8];
    size_t offset;
} layer_key;

#define KEY(k, field, ...) {k, {__VA_ARGS__, NULL}, offsetof(moects_layer_recipe, field)}
static const layer_key keys[] = {
    KEY("w13", w13, "gate_up", "up_gate", "interleave1", "interleave8"),
    KEY("g1", g1_bf16, "f32", "bf16"),
    KEY("act", act_bf16, "f32", "bf16"),
    KEY("sig", sig_rcp, "div", "rcp"),
    KEY("mid", mid, "bf16", "f32", "fp8_token", "fp8_128", "mxfp8", "nvfp4"),
    KEY("scale", scale_ue8m0, "div", "ue8m0"),
    KEY("weight", weight, "input", "act", "gemm2", "combine"),
    KEY("wdtype", w_bf16, "f32", "bf16"),
    KEY("slot", slot_bf16, "f32", "bf16"),
    KEY("combine", combine, "f32_slots", "bf16_chain", "f32_any"),
    KEY("fn", fn, "cr", "ulp1", "ulp2", "ulp4", "ulp8"),
    KEY("situ", situ_div, "rcp", "div"),
    KEY("bscale", bscale, "ab_fma", "a_b_fma", "a_b_add"),
};
#define NKEYS (sizeof keys / sizeof keys[0])

/* The default: vLLM's BF16 fused_experts (Triton GEMMs writing BF16, silu_and_mul in BF16, the
 * weight in GEMM2's epilogue, moe_sum in FP32). Enum fields are ints of the same size. */
static void set_default(moects_layer_recipe *r)
{
    memset(r, 0, sizeof *r);
    r->g1_bf16 = r->act_bf16 = r->slot_bf16 = 1;
    r->weight = MOECTS_WEIGHT_GEMM2;
}

static int *field(moects_layer_recipe *r, const layer_key *k) { return (int *)((char *)r + k->offset); }

static int list_values(const layer_key *k, char *buf, size_t len)
{
    int n = 0;
    for (int i = 0; k->values[i] && n < (int)len; i++)
        n += snprintf(buf + n, len - (size_t)n, "%s%s", i ? "|" : "", k->values[i]);
    return n;
}

/* One "key=value" of length n into r; seen marks keys already given. 0, or -1 with err. */
static int parse_pair(const char *p, size_t n, moects_layer_recipe *r, unsigned *seen, char *err, size_t errlen)
{
    const char *eq = memchr(p, '=', n);
    size_t kl = eq ? (size_t)(eq - p) : n;
    for (size_t i = 0; i < NKEYS; i++) {
        if (strlen(keys[i].key) != kl || strncmp(keys[i].key, p, kl) != 0) continue;
        if (*seen & (1u << i)) return snprintf(err, errlen, "%s: given twice", keys[i].key), -1;
        *seen |= 1u << i;
        size_t vl = eq ? n - kl - 1 : 0;
        for (int v = 0; eq && keys[i].values[v]; v++)
            if (strlen(keys[i].values[v]) == vl && strncmp(keys[i].values[v], eq + 1, vl) == 0) {
                *field(r, &keys[i]) = v;
                return 0;
            }
        char vals[128];
        list_values(&keys[i], vals, sizeof vals);
        snprintf(err, errlen, "%s: \"%.*s\" is not one of %s", keys[i].key, (int)vl, eq ? eq + 1 : "", vals);
        return -1;
    }
    snprintf(err, errlen, "\"%.*s\" is not a layer recipe key (w13, g1, act, sig, mid, scale, weight, wdtype, "
             "slot, combine, fn, situ, bscale)", (int)kl, p);
    return -1;
}

int moects__layer_recipe_parse(const char *s, moects_layer_recipe *r, char *err, size_t errlen)
{
    const size_t pl = strlen(MOECTS_LAYER_RECIPE_V1);
    set_default(r);
    if (!s || strncmp(s, MOECTS_LAYER_RECIPE_V1, pl) != 0 || (s[pl] && s[pl] != '('))
        return snprintf(err, errlen, "\"%s\" is not " MOECTS_LAYER_RECIPE_V1 "[(key=value,...)]", s ? s : "(null)"), -1;
    if (!s[pl]) return 0;
    const char *p = s + pl + 1, *end = strchr(p, ')');
    if (!end || end[1]) return snprintf(err, errlen, "\"%s\": the list must end with ')'", s), -1;
    unsigned seen = 0;
    while (p < end) {
        const char *c = memchr(p, ',', (size_t)(end - p));
        size_t n = c ? (size_t)(c - p) : (size_t)(end - p);
        if (parse_pair(p, n, r, &seen, err, errlen)) return -1;
        p += n + (c != NULL);
    }
    if (r->mid == MOECTS_MID_MXFP8) r->scale_ue8m0 = 1;
    return 0;
}

int moects__layer_recipe_format(const moects_layer_recipe *r, char *buf, size_t len)
{
    int n = snprintf(buf, len, "%s(", MOECTS_LAYER_RECIPE_V1);
    for (size_t i = 0; i < NKEYS && n < (int)len; i++) {
        int v = *field((moects_layer_recipe *)r, &keys[i]);
        n += snprintf(buf + n, len - (size_t)n, "%s%s=%s", i ? "," : "", keys[i].key,
                      v >= 0 && v < 8 && keys[i].values[v] ? keys[i].values[v] : "?");
    }
    if (n < (int)len) n += snprintf(buf + n, len - (size_t)n, ")");
    return n;
}

static struct {
    pthread_mutex_t mu;
    int n;
    moects_layer_recipe r[MOECTS_LAYER_RECIPES_MAX];
} table = {PTHREAD_MUTEX_INITIALIZER, 0, {{0}}};

int moects__layer_recipe_intern(const moects_layer_recipe *r, moects_recipe *out)
{
    int rc = -1;
    pthread_mutex_lock(&table.mu);
    for (int i = 0; i < table.n; i++)
        if (!memcmp(&table.r[i], r, sizeof *r)) {
            *out = (moects_recipe)(MOECTS_RECIPE_LAYER_BASE + i), rc = 0;
            break;
        }
    if (rc && table.n < MOECTS_LAYER_RECIPES_MAX) {
        table.r[table.n] = *r;
        *out = (moects_recipe)(MOECTS_RECIPE_LAYER_BASE + table.n++), rc = 0;
    }
    pthread_mutex_unlock(&table.mu);
    return rc;
}

const moects_layer_recipe *moects__layer_recipe_of(moects_recipe v)
{
    int i = (int)v - MOECTS_RECIPE_LAYER_BASE;
    pthread_mutex_lock(&table.mu);
    const moects_layer_recipe *r = i >= 0 && i < table.n ? &table.r[i] : NULL;
    pthread_mutex_unlock(&table.mu);
    return r;
}

const char *moects__layer_recipe_inexact(const moects_layer_recipe *r, const moects_fused_moe_shape *s)
{
    if (r->combine == MOECTS_COMBINE_F32_ANY) return "a combine in any order has no exact result";
    if (r->weight == MOECTS_WEIGHT_INPUT && s->k != 1) return "the router weight on the input needs top-1";
    if (s->activation == MOECTS_ACT_RELU2 && r->w13 != MOECTS_W13_GATE_UP)
        return "relu2 has no gate: W13 holds I rows, no gate/up order";
    if (r->mid == MOECTS_MID_MXFP8 && s->inter % 32) return "mxfp8 needs I a multiple of 32";
    if (r->mid == MOECTS_MID_FP8_128 && s->inter % 128) return "fp8_128 needs I a multiple of 128";
    if (s->format == MOECTS_LAYER_FP8_128 && r->mid != MOECTS_MID_FP8_128)
        return "FP8 block-128 weights (W8A8) need mid=fp8_128: GEMM2 reads FP8 per 128 columns";
    if (s->format == MOECTS_LAYER_W4A8 && r->mid != MOECTS_MID_FP8_128 && r->mid != MOECTS_MID_MXFP8)
        return "W4A8 needs mid=fp8_128 or mxfp8: both GEMMs read FP8 inputs in that grouping";
    if (r->mid == MOECTS_MID_NVFP4 && s->inter % 16) return "nvfp4 needs I a multiple of 16";
    if (s->format == MOECTS_LAYER_W4A8 && r->mid == MOECTS_MID_FP8_128 && s->H % 128)
        return "W4A8 with mid=fp8_128 quantizes x per 128: H a multiple of 128";
    if (r->w13 == MOECTS_W13_INTERLEAVE8 && s->inter % 8) return "interleave8 needs I a multiple of 8";
    return NULL;
}
