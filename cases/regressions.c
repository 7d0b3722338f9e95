/* regressions.c: cases from public bug reports (cases/regressions/NAME.json). DESIGN.md "Cases".
 *
 * File: {"source": "<project> <issue|PR> <number>", "class": "<short-class>", "summary": "...",
 *        "trigger": "...", "cases": [ENTRY, ...]}
 * ENTRY: {"op": "ep_gather" | "fp4_gemm" | "moe_gemm", "name": "h{H}/t{T}", "tiers": ["smoke", "full", "large"],
 *         ep_gather: "T" (>= 0), "k", "H", "E" (E_global), "ep_size" (1), "ep_rank" (0, or "last"),
 *                    "map" (true iff ep_size > 1), "id_dtype" ("int32" | "int64"),
 *                    "routing" ("uniform", "skewed", "zero-expert", "hot-rank", "stale-ids",
 *                    "neg-ids", "no-local"),
 *         fp4_gemm:  "M" (>= 0), "N", "K", "format" ("mxfp4" | "nvfp4"),
 *                    "scale_layout" ("linear" | "swizzled"), "gemm" ("gemm1" | "gemm2" | ""),
 *         moe_gemm:  "E" (local experts), "N", "K", "format" ("mxfp4" | "nvfp4" | "w4a8" | "w4a16"),
 *                    "counts" ("1,2,0,130": rows of expert e = counts[e % n]), "rows" ("contiguous" |
 *                    "masked" | "offsets"), "align" (contiguous: 128), "b_format" ("mxfp4"; "nvfp4"
 *                    for nvfp4, or w4a16 given), "a_scale_block" (w4a8: 128 | 32), "a_scale" ("ue8m0"
 *                    | "f32"), "scale_layout", "gemm",
 *         all:       "out_dtype" ("bf16" | "f32"), "data" ("exact", "adversarial", "nan",
 *                    "negzero": ep_gather, or fp4_gemm MXFP4; moe_gemm nan: NaN scales in expert 0 only)}
 *        (defaults in parentheses). Every field but op, name, tiers, map and gemm may be a list:
 * the entry stands for the cartesian product, and each listed field with more than one value must
 * appear as {field} in name so that ids stay distinct. "smoke" implies "full".
 * Case id: <op>/regression/<class>/<name>, op being "ep_gather", "fp4_gemm.<format>" or
 * "moe_gemm.<format>". */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cases_internal.h"
#include "moects_cases.h"

enum {
    F_T, F_K, F_H, F_E, F_EPS, F_EPR, F_IDT, F_ROUTE, F_M, F_N, F_KK, F_FMT, F_SCL, F_OUT, F_DATA,
    F_COUNTS, F_BFMT, F_ROWS, F_ALIGN, F_ASB, F_ASCALE, NF
};
static const struct {
    const char *key;
    int op;      /* bits: 1 ep_gather, 2 fp4_gemm, 4 moe_gemm */
    int is_int;  /* 1 integer, 0 string */
    int64_t min; /* least integer value */
    int64_t max; /* greatest integer value (cases_internal.h MOECTS__MAX_*); 0: checked elsewhere */
} FIELDS[NF] = {
    [F_T] = {"T", 1, 1, 0, MOECTS__MAX_ROWS},    [F_K] = {"k", 1, 1, 1, MOECTS__MAX_TOPK},
    [F_H] = {"H", 1, 1, 1, MOECTS__MAX_WIDTH},   [F_E] = {"E", 5, 1, 1, MOECTS__MAX_EXPERTS},
    [F_EPS] = {"ep_size", 1, 1, 1, 0},           [F_EPR] = {"ep_rank", 1, 1, 0, 0},
    [F_IDT] = {"id_dtype", 1, 0, 0, 0},          [F_ROUTE] = {"routing", 1, 0, 0, 0},
    [F_M] = {"M", 2, 1, 0, MOECTS__MAX_ROWS},    [F_N] = {"N", 6, 1, 1, MOECTS__MAX_ROWS},
    [F_KK] = {"K", 6, 1, 1, MOECTS__MAX_ROWS},   [F_FMT] = {"format", 6, 0, 0, 0},
    [F_SCL] = {"scale_layout", 6, 0, 0, 0}, [F_OUT] = {"out_dtype", 7, 0, 0, 0}, [F_DATA] = {"data", 7, 0, 0, 0},
    [F_COUNTS] = {"counts", 4, 0, 0, 0},         [F_BFMT] = {"b_format", 4, 0, 0, 0},
    [F_ROWS] = {"rows", 4, 0, 0, 0},             [F_ALIGN] = {"align", 4, 1, 1, 4096},
    [F_ASB] = {"a_scale_block", 4, 1, 32, 128},  [F_ASCALE] = {"a_scale", 4, 0, 0, 0},
};

typedef struct {
    const char *path;
    char *err;
    size_t errlen;
    size_t ci; /* entry index, for messages */
} rctx;

#define FAIL(r, ...) moects__fail((r)->err, (r)->errlen, __VA_ARGS__)

static int str_enum(const rctx *r, const char *key, const char *s, const char *const *names, int *out)
{
    for (int i = 0; names[i]; i++)
        if (!strcmp(s, names[i])) {
            *out = i;
            return 0;
        }
    char opts[160] = "";
    for (int i = 0; names[i]; i++)
        snprintf(opts + strlen(opts), sizeof opts - strlen(opts), "%s%s", i ? ", " : "", names[i]);
    return FAIL(r, "%s: cases[%zu].%s: unknown value \"%s\" (%s)", r->path, r->ci, key, s, opts);
}

/* "0,1,2,130": the rows of the local experts, cycled (moects_case.counts). */
static int parse_counts(const rctx *r, const char *s, moects_case *c)
{
    c->n_counts = 0;
    for (const char *p = s; *p;) {
        char *end;
        long long v = strtoll(p, &end, 10);
        if (end == p || v < 0 || v > MOECTS__MAX_ROWS || (*end && *end != ',') || c->n_counts == MOECTS_MOE_COUNTS_MAX)
            return FAIL(r, "%s: cases[%zu].counts: not a list of 1 to %d row counts 0..%lld (\"%s\")", r->path, r->ci,
                        MOECTS_MOE_COUNTS_MAX, (long long)MOECTS__MAX_ROWS, s);
        c->counts[c->n_counts++] = v;
        p = *end ? end + 1 : end;
    }
    if (!c->n_counts) return FAIL(r, "%s: cases[%zu].counts: empty", r->path, r->ci);
    return 0;
}

/* Value v of field f into case c. */
static int apply(const rctx *r, int f, const json_t *v, moects_case *c, int *rank_last)
{
    static const char *const IDT[] = {"int32", "int64", NULL}, *const OUT[] = {"bf16", "f32", NULL},
                              *const FMT[] = {"mxfp4", "nvfp4", NULL}, *const SCL[] = {"linear", "swizzled", NULL};
    const char *key = FIELDS[f].key;
    if (f == F_EPR && json_is_string(v)) {
        if (strcmp(json_string_value(v), "last"))
            return FAIL(r, "%s: cases[%zu].ep_rank: unknown value \"%s\" (an integer or \"last\")", r->path, r->ci,
                        json_string_value(v));
        *rank_last = 1;
        return 0;
    }
    if (FIELDS[f].is_int) {
        if (!json_is_integer(v))
            return FAIL(r, "%s: cases[%zu].%s: wrong type (expected integer)", r->path, r->ci, key);
        int64_t x = (int64_t)json_integer_value(v);
        if (x < FIELDS[f].min)
            return FAIL(r, "%s: cases[%zu].%s: %s (%lld)", r->path, r->ci, key,
                        FIELDS[f].min ? "non-positive size" : "negative", (long long)x);
        if (FIELDS[f].max) {
            char pre[40];
            snprintf(pre, sizeof pre, "cases[%zu].", r->ci);
            if (moects__check_max(r->path, pre, key, x, FIELDS[f].min, FIELDS[f].max, r->err, r->errlen)) return -1;
        }
        if ((f == F_EPS || f == F_EPR) && x > 1 << 20)
            return FAIL(r, "%s: cases[%zu].%s: too large (%lld)", r->path, r->ci, key, (long long)x);
        switch (f) {
        case F_T: c->T = x; break;
        case F_K: c->k = x; break;
        case F_H: c->H = x; break;
        case F_E: c->E_global = x, c->E = x; break;
        case F_ALIGN: c->align = x; break;
        case F_ASB: c->a_scale_block = x; break;
        case F_EPS: c->ep_size = (int)x; break;
        case F_EPR: c->ep_rank = (int)x; break;
        case F_M: c->M = x; break;
        case F_N: c->N = x; break;
        default: c->K = x; break;
        }
        return 0;
    }
    if (!json_is_string(v)) return FAIL(r, "%s: cases[%zu].%s: wrong type (expected string)", r->path, r->ci, key);
    const char *s = json_string_value(v);
    int i;
    switch (f) {
    case F_IDT:
        if (str_enum(r, key, s, IDT, &i)) return -1;
        c->id_dtype = i ? MOECTS_I64 : MOECTS_I32;
        return 0;
    case F_OUT:
        if (str_enum(r, key, s, OUT, &i)) return -1;
        c->out_dtype = i ? MOECTS_F32 : MOECTS_BF16;
        return 0;
    case F_FMT:
        if (c->op == MOECTS_OP_MOE_GEMM) {
            if (str_enum(r, key, s, (const char *const[]){"mxfp4", "nvfp4", "w4a8", "w4a16", NULL}, &i)) return -1;
            c->moe_format = (moects_moe_format)(MOECTS_MOE_MXFP4 + i);
            return 0;
        }
        if (str_enum(r, key, s, FMT, &i)) return -1;
        c->format = i ? MOECTS_FP4_NVFP4 : MOECTS_FP4_MXFP4;
        return 0;
    case F_BFMT:
        if (str_enum(r, key, s, FMT, &i)) return -1;
        c->b_format = i ? MOECTS_FP4_NVFP4 : MOECTS_FP4_MXFP4;
        return 0;
    case F_ROWS:
        if (str_enum(r, key, s, (const char *const[]){"contiguous", "masked", "offsets", NULL}, &i)) return -1;
        c->rows = (moects_row_layout)(MOECTS_ROWS_CONTIGUOUS + i);
        return 0;
    case F_ASCALE:
        if (str_enum(r, key, s, (const char *const[]){"ue8m0", "f32", NULL}, &i)) return -1;
        c->a_scale_f32 = i;
        return 0;
    case F_COUNTS:
        return parse_counts(r, s, c);
    case F_SCL:
        if (str_enum(r, key, s, SCL, &i)) return -1;
        c->scale_layout = i ? MOECTS_SCALES_SWIZZLED_128X4 : MOECTS_SCALES_LINEAR;
        return 0;
    case F_ROUTE:
        if (moects__routing_parse(s, &c->routing))
            return str_enum(r, key, s,
                            (const char *const[]){"uniform", "skewed", "zero-expert", "hot-rank", "stale-ids",
                                                  "neg-ids", "no-local", NULL},
                            &i);
        return 0;
    default:
        if (moects__data_parse(s, &c->data))
            return str_enum(r, key, s, (const char *const[]){"exact", "adversarial", "nan", "negzero", NULL}, &i);
        return 0;
    }
}

/* Render name, replacing {field} with the field's value in this combination. */
static int render(const rctx *r, const char *tmpl, const json_t *const *val, const moects_case *c, char *dst,
                  size_t n, int op)
{
    size_t o = 0;
    for (const char *p = tmpl; *p;) {
        if (*p != '{') {
            if (o + 1 >= n) return FAIL(r, "%s: cases[%zu].name: id too long", r->path, r->ci);
            dst[o++] = *p++;
            continue;
        }
        const char *e = strchr(p, '}');
        if (!e) return FAIL(r, "%s: cases[%zu].name: unclosed '{' in \"%s\"", r->path, r->ci, tmpl);
        int f = 0;
        while (f < NF && (strlen(FIELDS[f].key) != (size_t)(e - p - 1) || strncmp(FIELDS[f].key, p + 1, e - p - 1)))
            f++;
        if (f == NF || !(FIELDS[f].op & op))
            return FAIL(r, "%s: cases[%zu].name: unknown placeholder %.*s", r->path, r->ci, (int)(e - p + 1), p);
        char tmp[64];
        if (f == F_EPR) snprintf(tmp, sizeof tmp, "%d", c->ep_rank);
        else if (!val[f]) return FAIL(r, "%s: cases[%zu].name: placeholder {%s} but no such field", r->path, r->ci,
                                      FIELDS[f].key);
        else if (json_is_integer(val[f])) snprintf(tmp, sizeof tmp, "%lld", (long long)json_integer_value(val[f]));
        else snprintf(tmp, sizeof tmp, "%s", json_string_value(val[f]));
        size_t L = strlen(tmp);
        if (o + L >= n) return FAIL(r, "%s: cases[%zu].name: id too long", r->path, r->ci);
        memcpy(dst + o, tmp, L);
        o += L;
        p = e + 1;
    }
    dst[o] = '\0';
    return 0;
}

static int check_case(const rctx *r, const moects_case *c)
{
    if (c->op == MOECTS_OP_EP_GATHER) {
        if (c->k > c->E_global)
            return FAIL(r, "%s: cases[%zu].k: exceeds E (%lld > %lld)", r->path, r->ci, (long long)c->k,
                        (long long)c->E_global);
        if (c->ep_size > c->E_global)
            return FAIL(r, "%s: cases[%zu].ep_size: exceeds E (%d > %lld)", r->path, r->ci, c->ep_size,
                        (long long)c->E_global);
        if (c->ep_rank >= c->ep_size)
            return FAIL(r, "%s: cases[%zu].ep_rank: not below ep_size (%d >= %d)", r->path, r->ci, c->ep_rank,
                        c->ep_size);
        if (c->ep_size > 1 && !c->has_map)
            return FAIL(r, "%s: cases[%zu].map: must be true when ep_size > 1", r->path, r->ci);
        if (c->routing == MOECTS_ROUTE_STALE_IDS && !c->has_map)
            return FAIL(r, "%s: cases[%zu].routing: stale-ids needs an expert_map (map: true)", r->path, r->ci);
        if (c->routing == MOECTS_ROUTE_NO_LOCAL && c->ep_size < 2)
            return FAIL(r, "%s: cases[%zu].routing: no-local needs ep_size > 1", r->path, r->ci);
        if (c->routing == MOECTS_ROUTE_NO_LOCAL &&
            c->k > c->E_global - moects__ep_local_experts(c->E_global, c->ep_size, c->ep_rank, NULL))
            return FAIL(r, "%s: cases[%zu].routing: no-local needs k <= the experts of other ranks", r->path, r->ci);
        if ((c->routing == MOECTS_ROUTE_ZERO_EXPERT && c->k >= c->E_global))
            return FAIL(r, "%s: cases[%zu].routing: zero-expert needs k < E", r->path, r->ci);
    }
    if (c->op == MOECTS_OP_MOE_GEMM) {
        if (c->rows != MOECTS_ROWS_CONTIGUOUS && c->align != 1)
            return FAIL(r, "%s: cases[%zu].align: only the contiguous layout pads groups", r->path, r->ci);
        if (c->moe_format == MOECTS_MOE_W4A8 ? (c->a_scale_block != 32 && c->a_scale_block != 128)
                                             : (c->a_scale_block || c->a_scale_f32))
            return FAIL(r, "%s: cases[%zu].a_scale_block: W4A8 only, 32 or 128", r->path, r->ci);
        if ((c->moe_format == MOECTS_MOE_NVFP4) != (c->b_format == MOECTS_FP4_NVFP4) && c->moe_format != MOECTS_MOE_W4A16)
            return FAIL(r, "%s: cases[%zu].b_format: nvfp4 with format nvfp4 (or w4a16) only", r->path, r->ci);
    }
    if (c->data == MOECTS_DATA_NEGZERO && (c->op == MOECTS_OP_MOE_GEMM || (c->op == MOECTS_OP_FP4_GEMM && c->format != MOECTS_FP4_MXFP4)))
        return FAIL(r, "%s: cases[%zu].data: negzero needs format mxfp4 (fp4_gemm) or op ep_gather", r->path, r->ci);
    return 0;
}

/* One entry of a regression file as read so far: its op (1 ep_gather, 2 fp4_gemm, 4 moe_gemm), id
 * template, tiers, map and gemm, and each field's value list. */
typedef struct {
    int op;
    const char *tmpl;
    unsigned tiers;
    int has_map; /* -1: from ep_size */
    char gemm[8];
    const json_t *lists[NF];
    size_t count[NF], idx[NF];
} entry;

/* op, name and tiers. 0, or -1 (FAIL). */
static int entry_head(rctx *r, const json_t *ent, entry *e)
{
    if (!json_is_object(ent)) return FAIL(r, "%s: cases[%zu]: not a JSON object", r->path, r->ci);
    const json_t *opv = json_object_get(ent, "op");
    if (!opv) return FAIL(r, "%s: cases[%zu].op: missing field", r->path, r->ci);
    if (!json_is_string(opv)) return FAIL(r, "%s: cases[%zu].op: wrong type (expected string)", r->path, r->ci);
    if (str_enum(r, "op", json_string_value(opv), (const char *const[]){"ep_gather", "fp4_gemm", "moe_gemm", NULL},
                 &e->op))
        return -1;
    e->op = 1 << e->op; /* 1 ep_gather, 2 fp4_gemm, 4 moe_gemm */
    const json_t *namev = json_object_get(ent, "name");
    if (!namev) return FAIL(r, "%s: cases[%zu].name: missing field", r->path, r->ci);
    if (!json_is_string(namev) || !*json_string_value(namev))
        return FAIL(r, "%s: cases[%zu].name: wrong type (expected non-empty string)", r->path, r->ci);
    e->tmpl = json_string_value(namev);
    const json_t *tv = json_object_get(ent, "tiers");
    if (!tv) return FAIL(r, "%s: cases[%zu].tiers: missing field", r->path, r->ci);
    if (!json_is_array(tv) || !json_array_size(tv))
        return FAIL(r, "%s: cases[%zu].tiers: wrong type (expected non-empty list of strings)", r->path, r->ci);
    for (size_t i = 0; i < json_array_size(tv); i++) {
        const json_t *t = json_array_get(tv, i);
        moects_tier tier;
        if (!json_is_string(t) || moects__tier_parse(json_string_value(t), &tier) || tier == MOECTS_TIER_LOCAL)
            return FAIL(r, "%s: cases[%zu].tiers[%zu]: not one of smoke, full, large", r->path, r->ci, i);
        e->tiers |= tier;
    }
    if (e->tiers & MOECTS_TIER_SMOKE) e->tiers |= MOECTS_TIER_FULL;
    return 0;
}

/* map and gemm; every key known and of this op; the op's required fields present. 0, or -1 (FAIL). */
static int entry_keys(rctx *r, const json_t *ent, entry *e)
{
    const int op = e->op;
    e->has_map = -1;
    const json_t *mv = json_object_get(ent, "map");
    if (mv) {
        if (op != 1) return FAIL(r, "%s: cases[%zu].map: not a field of fp4_gemm", r->path, r->ci);
        if (!json_is_boolean(mv)) return FAIL(r, "%s: cases[%zu].map: wrong type (expected boolean)", r->path, r->ci);
        e->has_map = json_is_true(mv);
    }
    const json_t *gv = json_object_get(ent, "gemm");
    if (gv) {
        if (op == 1) return FAIL(r, "%s: cases[%zu].gemm: not a field of ep_gather", r->path, r->ci);
        int gi;
        if (!json_is_string(gv)) return FAIL(r, "%s: cases[%zu].gemm: wrong type (expected string)", r->path, r->ci);
        if (str_enum(r, "gemm", json_string_value(gv), (const char *const[]){"gemm1", "gemm2", "", NULL}, &gi))
            return -1;
        moects__copy(e->gemm, sizeof e->gemm, json_string_value(gv));
    }
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)ent, key, val)
    {
        if (!strcmp(key, "op") || !strcmp(key, "name") || !strcmp(key, "tiers") || !strcmp(key, "map") ||
            !strcmp(key, "gemm") || !strcmp(key, "notes"))
            continue;
        int f = 0;
        while (f < NF && strcmp(FIELDS[f].key, key)) f++;
        if (f == NF) return FAIL(r, "%s: cases[%zu].%s: unknown field", r->path, r->ci, key);
        if (!(FIELDS[f].op & op))
            return FAIL(r, "%s: cases[%zu].%s: not a field of %s", r->path, r->ci, key,
                        op == 1 ? "ep_gather" : op == 2 ? "fp4_gemm" : "moe_gemm");
    }
    static const int REQ_G[] = {F_T, F_K, F_H, F_E, -1}, REQ_F[] = {F_M, F_N, F_KK, F_FMT, -1},
                     REQ_MOE[] = {F_E, F_N, F_KK, F_FMT, F_COUNTS};
    for (int i = 0; i < 5; i++) {
        int f = op == 1 ? REQ_G[i] : op == 2 ? REQ_F[i] : REQ_MOE[i];
        if (f >= 0 && !json_object_get(ent, FIELDS[f].key))
            return FAIL(r, "%s: cases[%zu].%s: missing field", r->path, r->ci, FIELDS[f].key);
    }
    return 0;
}

/* The value lists; a field with several values must be named in the template. 0, or -1 (FAIL). */
static int entry_lists(rctx *r, const json_t *ent, entry *e)
{
    for (int f = 0; f < NF; f++) {
        e->count[f] = 1;
        e->idx[f] = 0;
        const json_t *v = json_object_get(ent, FIELDS[f].key);
        if (!v) continue;
        e->lists[f] = v;
        if (!json_is_array(v)) continue;
        e->count[f] = json_array_size(v);
        if (!e->count[f]) return FAIL(r, "%s: cases[%zu].%s: empty list", r->path, r->ci, FIELDS[f].key);
        char ph[24];
        snprintf(ph, sizeof ph, "{%s}", FIELDS[f].key);
        if (e->count[f] > 1 && !(e->op != 1 && f == F_FMT) && !strstr(e->tmpl, ph))
            return FAIL(r, "%s: cases[%zu].name: %s has %zu values but %s is not in \"%s\" (ids would repeat)", r->path,
                        r->ci, FIELDS[f].key, e->count[f], ph, e->tmpl);
    }
    return 0;
}

/* The case of the entry's current combination of values (e->idx) into c, cur its values. 0 or -1. */
static int entry_case(rctx *r, const entry *e, const char *source, moects_case *c, const json_t *cur[NF])
{
    const int op = e->op;
    memset(c, 0, sizeof *c);
    moects__copy(c->model, sizeof c->model, "regression");
    moects__copy(c->layout, sizeof c->layout, "-");
    if (moects__copy(c->source, sizeof c->source, source))
        return FAIL(r, "%s: source: too long (max %zu bytes)", r->path, sizeof c->source - 1);
    c->op = op == 1 ? MOECTS_OP_EP_GATHER : op == 2 ? MOECTS_OP_FP4_GEMM : MOECTS_OP_MOE_GEMM;
    c->tiers = e->tiers;
    c->out_dtype = MOECTS_BF16;
    if (op == 1) c->ep_size = 1, c->id_dtype = MOECTS_I32;
    else moects__copy(c->gemm, sizeof c->gemm, e->gemm);
    if (op == 4) {
        c->rows = MOECTS_ROWS_CONTIGUOUS;
        c->b_format = (moects_fp4_format)0; /* from the format unless given */
        c->align = 0;
        c->ep_size = 1;
    }
    int rank_last = 0;
    for (int f = 0; f < NF; f++) {
        cur[f] = NULL;
        if (!e->lists[f]) continue;
        cur[f] = json_is_array(e->lists[f]) ? json_array_get(e->lists[f], e->idx[f]) : e->lists[f];
        if (apply(r, f, cur[f], c, &rank_last)) return -1;
    }
    if (op == 1) {
        if (rank_last) c->ep_rank = c->ep_size - 1;
        c->has_map = e->has_map >= 0 ? e->has_map : c->ep_size > 1;
    }
    if (op == 4) {
        c->E_global = c->E;
        if (!c->b_format) c->b_format = c->moe_format == MOECTS_MOE_NVFP4 ? MOECTS_FP4_NVFP4 : MOECTS_FP4_MXFP4;
        if (!c->align) c->align = c->rows == MOECTS_ROWS_CONTIGUOUS ? 128 : 1;
        if (c->moe_format == MOECTS_MOE_W4A8 && !c->a_scale_block) c->a_scale_block = 128;
    }
    return check_case(r, c);
}

static int load_entry(rctx *r, const json_t *ent, const char *cls, const char *source, moects_case_list *out,
                      size_t first)
{
    entry e;
    memset(&e, 0, sizeof e);
    if (entry_head(r, ent, &e) || entry_keys(r, ent, &e) || entry_lists(r, ent, &e)) return -1;
    const int op = e.op;
    for (;;) {
        moects_case c;
        const json_t *cur[NF];
        if (entry_case(r, &e, source, &c, cur)) return -1;
        char name[192];
        if (render(r, e.tmpl, cur, &c, name, sizeof name, op)) return -1;
        int n = snprintf(c.id, sizeof c.id, "%s%s/regression/%s/%s",
                         op == 1 ? "ep_gather" : op == 2 ? "fp4_gemm." : "moe_gemm.",
                         op == 1 ? "" : op == 2 ? (c.format == MOECTS_FP4_NVFP4 ? "nvfp4" : "mxfp4")
                                                : moects__moe_format_name(c.moe_format), cls, name);
        if (n < 0 || (size_t)n >= sizeof c.id) return FAIL(r, "%s: cases[%zu].name: id too long", r->path, r->ci);
        for (size_t j = first; j < out->n; j++)
            if (!strcmp(out->v[j].id, c.id)) return FAIL(r, "%s: cases[%zu]: duplicate id %s", r->path, r->ci, c.id);
        if (moects__case_list_push(out, &c)) return FAIL(r, "%s: out of memory", r->path);
        /* next combination: odometer over the fields in table order, last field fastest */
        int f = NF - 1;
        while (f >= 0 && ++e.idx[f] == e.count[f]) e.idx[f--] = 0;
        if (f < 0) break;
    }
    return 0;
}

/* The number of cases the entries expand to (product of the list lengths of each entry), counted
 * before expanding; saturates at SIZE_MAX. Malformed entries count 1: load_entry reports them. */
static size_t expansion(const json_t *cases)
{
    size_t total = 0;
    for (size_t i = 0; i < json_array_size(cases); i++) {
        const json_t *ent = json_array_get(cases, i);
        size_t n = 1;
        for (int f = 0; f < NF; f++) {
            const json_t *v = json_object_get(ent, FIELDS[f].key); /* NULL if ent is not an object */
            size_t m = json_is_array(v) && json_array_size(v) ? json_array_size(v) : 1;
            n = n > SIZE_MAX / m ? SIZE_MAX : n * m;
        }
        total = total > SIZE_MAX - n ? SIZE_MAX : total + n;
    }
    return total;
}

static int valid_class(const char *s)
{
    if (!*s) return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '-')) return 0;
    return 1;
}

int moects__regressions_load(const char *path, moects_case_list *out, char *err, size_t errlen)
{
    json_t *root = moects__json_load_file(path, 1, err, errlen);
    if (!root) return -1;
    rctx r = {path, err, errlen, 0};
    size_t first = out->n;
    int rc = 0;
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val)
    {
        if (strcmp(key, "source") && strcmp(key, "class") && strcmp(key, "summary") && strcmp(key, "trigger") &&
            strcmp(key, "notes") && strcmp(key, "cases")) {
            rc = FAIL(&r, "%s: %s: unknown field", path, key);
            break;
        }
    }
    const json_t *src = json_object_get(root, "source"), *cls = json_object_get(root, "class"),
                 *cases = json_object_get(root, "cases");
    if (rc) {
    } else if (!src) rc = FAIL(&r, "%s: source: missing field", path);
    else if (!json_is_string(src) || !*json_string_value(src))
        rc = FAIL(&r, "%s: source: wrong type (expected non-empty string)", path);
    else if (!cls) rc = FAIL(&r, "%s: class: missing field", path);
    else if (!json_is_string(cls) || !valid_class(json_string_value(cls)))
        rc = FAIL(&r, "%s: class: not a short class name (a-z 0-9 -)", path);
    else if (!cases) rc = FAIL(&r, "%s: cases: missing field", path);
    else if (!json_is_array(cases) || !json_array_size(cases))
        rc = FAIL(&r, "%s: cases: wrong type (expected non-empty list)", path);
    else {
        size_t n = expansion(cases);
        if (n > MOECTS__MAX_FILE_CASES)
            rc = n == SIZE_MAX ? FAIL(&r, "%s: cases: expands to more than %zu cases (max %d)", path, n - 1,
                                      MOECTS__MAX_FILE_CASES)
                               : FAIL(&r, "%s: cases: expands to %zu cases (max %d)", path, n, MOECTS__MAX_FILE_CASES);
    }
    for (size_t i = 0; !rc && i < json_array_size(cases); i++) {
        r.ci = i;
        rc = load_entry(&r, json_array_get(cases, i), json_string_value(cls), json_string_value(src), out, first);
    }
    json_decref(root);
    if (rc) out->n = first; /* all of the file or nothing */
    return rc ? -1 : 0;
}
