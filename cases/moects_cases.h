/* moects_cases.h: the model registry, the TP/EP derivation and the case list.
 * DESIGN.md "Cases". Depends on include/moects/moects_types.h and jansson. */
#ifndef MOECTS_CASES_H
#define MOECTS_CASES_H
#include "moects_types.h"

/* A router's score function (cases/models/NAME.json "scoring_func"). */
typedef enum {
    MOECTS_SCORING_SOFTMAX = 1,
    MOECTS_SCORING_SIGMOID = 2,
    MOECTS_SCORING_SQRTSOFTPLUS = 3 /* DeepSeek-V4: sqrt(softplus(x)); no moe_route method yet */
} moects_scoring;

/* One MoE model's dims that matter for its kernels (cases/models/<name>.json). */
typedef struct {
    char name[64];             /* registry name, lower-case: "kimi-k3", "deepseek-v3" */
    char source[1024];         /* where the values were read */
    int64_t hidden_size;
    int64_t moe_intermediate_size; /* I: one routed expert's intermediate width */
    int64_t routed_experts;        /* E */
    int64_t experts_per_token;     /* topk */
    int64_t shared_experts;
    int64_t latent_size;           /* 0 if not latent MoE; else routed experts' input width */
    int gated;                     /* 1: gemm1 N = 2I (SwiGLU-like); 0: N = I (relu2, ...) */
    /* The fused layer's facts (DESIGN.md "The fused MoE layer"). A registry file gives each; a raw
     * config may leave activation 0 (unknown: an activation name moects does not map). */
    moects_activation activation;
    float activation_limit;        /* L, FP32 as engines pass it; valid when has_activation_limit */
    float activation_alpha;        /* a (gpt-oss 1.702, SiTU beta); valid when has_activation_alpha */
    int has_activation_limit, has_activation_alpha;
    int expert_bias;               /* 1: GEMM1 and GEMM2 of the experts add a bias (gpt-oss) */
    int router_weight_on_input;    /* 1: the router weight scales the expert's input (Llama 4, top-1) */
    /* The router's facts (DESIGN.md "Routing"; all required in a registry file; a raw config leaves
     * scoring 0: unknown, no moe_route cases). */
    moects_scoring scoring;        /* the router's score function (config scoring_func) */
    int topk_before_scoring;       /* 1: top-k on the logits, then the score (gpt-oss softmax, Llama 4 sigmoid) */
    int64_t n_group, topk_group;   /* expert groups and groups kept (1 and 1: none) */
    float routed_scaling_factor;   /* the weights' factor (1: none) */
    int norm_topk_prob;            /* 1: the k weights are divided by their sum */
    int e_score_correction_bias;   /* 1: a per-expert bias added to the scores for the selection only */
    char release_quantization[128];
    char hf_id[128];               /* Hugging Face repository id, "" if unknown */
    char file[256];                /* file name it was read from by moects__models_load_dir, else "" */
} moects_model;

typedef enum {
    MOECTS_TIER_SMOKE = 1u, /* seconds: CI */
    MOECTS_TIER_FULL = 2u,  /* every model x layout: minutes on a GPU host */
    MOECTS_TIER_LARGE = 4u, /* > 2^31 elements in one buffer */
    MOECTS_TIER_LOCAL = 8u  /* a case made from captured tensors (`moects case add`, cases/local/) */
} moects_tier;

/* How topk_ids are drawn for an ep_gather case (harness/run/inputs.c builds the tensors). */
typedef enum {
    MOECTS_ROUTE_UNIFORM = 0,     /* distinct experts per token, uniform */
    MOECTS_ROUTE_SKEWED = 1,      /* Zipf-like: few hot experts */
    MOECTS_ROUTE_ZERO_EXPERT = 2, /* like UNIFORM but one local expert gets no token */
    MOECTS_ROUTE_ONE_EXPERT = 3,  /* every token's slot 0 on one local expert (hot rank) */
    MOECTS_ROUTE_STALE_IDS = 4,   /* some slots hold huge stale positive ids (>= E_global) */
    MOECTS_ROUTE_NEG_IDS = 5,     /* some slots hold -1 (dropped / padding) */
    MOECTS_ROUTE_NO_LOCAL = 6,    /* T > 0 but every slot on another rank: M_sum = 0, out all +0 */
    MOECTS_ROUTE_DISPATCHED = 7   /* fused_moe under EP: the tokens an all-to-all dispatch sends this rank,
                                     each with slot 0 on a random local expert, the others uniform */
} moects_routing;

/* What the element/scale data of a case favours (harness/run/inputs.c). */
typedef enum {
    MOECTS_DATA_EXACT = 0,       /* exactness-preserving values (default) */
    MOECTS_DATA_ADVERSARIAL = 1, /* extreme exponents, subnormal scales, cancellation */
    MOECTS_DATA_NAN = 2,         /* NaN scale 0xFF (MX) / 0x7F (E4M3), NaN inputs */
    MOECTS_DATA_NEGZERO = 3      /* fp4_gemm (MXFP4 only): exact data, plus rows whose later K-blocks'
                                    products are all -0 after a block-0 partial that underflows acc
                                    to -0 (the signed zero of a block partial); ep_gather: -0 and
                                    subnormal x columns, tiny and subnormal weights (harness/run/inputs.c) */
} moects_data;

/* Tile windows (DESIGN.md "Grouped MoE GEMM"): rows per expert where tile-size and M-bucket bugs
 * live, after one expert with none. */
#define MOECTS_MOE_COUNTS_MAX 24
extern const int64_t moects_tile_windows[23];

typedef struct {
    char id[192];      /* stable hierarchical id: "ep_gather/kimi-k3/tp8/t128" */
    char model[64];    /* registry name, or "regression" */
    char layout[16];   /* "tp8", "ep16", "-" for regressions */
    char source[256];  /* model file or bug report ("vllm-project/vllm PR 50458") */
    moects_op op;
    unsigned tiers;    /* moects_tier bits */
    moects_data data;
    /* ep_gather */
    int64_t T, k, H, E_global;
    int ep_size, ep_rank;   /* ep_size 1: all experts local, no expert_map */
    int has_map;            /* pass an expert_map (always with ep_size > 1) */
    moects_dtype id_dtype, out_dtype;
    moects_routing routing;
    /* fp4_gemm */
    int64_t M, N, K;
    moects_fp4_format format;
    moects_scale_layout scale_layout;
    char gemm[8];           /* "gemm1", "gemm2", "" */
    /* moe_gemm (also N, K, scale_layout, gemm, out_dtype, data; and, when n_counts == 0, T, k,
     * E_global, ep_size, ep_rank, routing: the rows per local expert are the slots that the
     * ep_gather routing rule puts on this rank's experts, harness/run/inputs.c) */
    moects_moe_format moe_format;
    moects_fp4_format b_format;  /* MXFP4, or NVFP4 for moe nvfp4 and W4A16-NVFP4 */
    moects_row_layout rows;
    int64_t align;               /* contiguous: rows per group padded to a multiple (128); else 1 */
    int64_t a_scale_block;       /* W4A8: 128 or 32 */
    int a_scale_f32;             /* W4A8: FP32 A scales (1) or UE8M0 (0) */
    int64_t E;                   /* local experts (groups) */
    int n_counts;                /* > 0: expert e has counts[e % n_counts] rows (tile windows, regressions) */
    int64_t counts[MOECTS_MOE_COUNTS_MAX];
    /* fused_moe (also T, k, H (the expert's input width), E, E_global, ep_size, ep_rank, has_map,
     * routing, out_dtype, data): the model's layer facts (moects_model) and this layout's I */
    int64_t inter;               /* I of one expert on this rank (moe_intermediate_size / TP) */
    moects_layer_format layer_format;
    moects_activation activation;
    float act_limit, act_alpha;  /* 0 when the activation has none */
    int has_bias;
    /* moe_route (also T, k, E, data): the model's router (moects_moe_route_shape's fields) */
    moects_route_method route_method;
    int64_t n_group, topk_group;
    int renormalize, route_bias;
    float route_scale;
    moects_dtype logits_dtype;
    /* ep_dispatch_combine (also T: tokens of a rank, k, H, E_global, ep_size: the ranks, routing:
     * uniform, hot-rank (every slot on the last rank's experts) or neg-ids (-1 slots)): 1 when the odd
     * ranks hold no token and rank 0 one more (cases/derive_dispatch.c) */
    int empty_ranks;
    /* a local case (tier local): its manifest (harness/run/localcase.c), whose tensors replace the
     * generator's; "" for a registry case */
    char file[512];
} moects_case;

typedef struct {
    moects_case *v;
    size_t n, cap;
} moects_case_list;

/* Load one registry file (cases/models/NAME.json) or a raw Hugging Face config.json (any family).
 * Returns 0, or -1 with a one-line "file: field: problem" message in err. */
int moects__model_load(const char *path, moects_model *m, char *err, size_t errlen);

/* A registry file's name of an activation ("silu", "gelu_tanh", "gelu_erf", "relu2", "silu_clamp",
 * "gpt_oss", "situ"); "unknown" for 0 or any other value. */
const char *moects__activation_name(moects_activation a);

/* Load every .json file in dir, sorted by name. Returns the count, or -1 with err set. */
int moects__models_load_dir(const char *dir, moects_model **out, char *err, size_t errlen);

/* Append the derived cases of one model (all TP/EP layouts x token counts x ops). */
int moects__derive_cases(const moects_model *m, moects_case_list *out);

/* Whether moects__derive_cases derives layout tp<tp> (ep 0) or ep<ep> (tp 0) for model m (its rule
 * above: TP t in {1,2,4,8,16} dividing moe_intermediate_size; EP e in {2,4,...,64}, e <= E).
 * 1, else 0 with the reason, without the layout's name, in why (may be NULL): "moe_intermediate_size
 * 14336 is not divisible by 3", "more EP ranks than the 8 routed experts", "the derivation's TP
 * sizes are 1, 2, 4, 8, 16". */
int moects__layout_exists(const moects_model *m, int tp, int ep, char *why, size_t whylen);

/* Append the cases of one regression file (cases/regressions/NAME.json). -1 with err on bad input. */
int moects__regressions_load(const char *path, moects_case_list *out, char *err, size_t errlen);

/* The built-in registry: models under <root>/cases/models plus <root>/cases/regressions. */
int moects__cases_builtin(const char *root, moects_case_list *out, char *err, size_t errlen);

void moects__case_list_free(moects_case_list *l);
int moects__case_list_push(moects_case_list *l, const moects_case *c);

/* vLLM's linear EP split (FusedMoE determine_expert_map): rank r of e holds E/e experts, the
 * first E%e ranks one more, contiguous from r*(E/e) + min(r, E%e). Returns the local count and
 * sets *first (if not NULL) to the first global expert; -1 on bad arguments (E < 1, e < 1,
 * r outside [0, e)). */
int64_t moects__ep_local_experts(int64_t E, int ep_size, int ep_rank, int64_t *first);
/* Fill map[E] with the local index of each global expert on rank ep_rank, -1 elsewhere.
 * Returns the local count, or -1 on bad arguments. */
int64_t moects__expert_map(int64_t E, int ep_size, int ep_rank, int32_t *map);

/* "bf16", "mxfp4" (ids and files); parse: 0, or -1 for an unknown name. */
const char *moects__layer_format_name(moects_layer_format f);
int moects__layer_format_parse(const char *s, moects_layer_format *out);

/* Expected valid rows of a moe_gemm case (all its local experts): the sum of its counts, or
 * T * k * E / E_global for routed ones (scheduling weights, harness/run/sched.c). */
double moects__moe_expected_rows(const moects_case *c);

/* moe_gemm names used in ids and files: "mxfp4", "nvfp4", "w4a8", "w4a16"; "contiguous", "masked",
 * "offsets". The parse functions return 0, or -1 for an unknown name. */
const char *moects__moe_format_name(moects_moe_format f);
int moects__moe_format_parse(const char *s, moects_moe_format *out);
const char *moects__row_layout_name(moects_row_layout r);
int moects__row_layout_parse(const char *s, moects_row_layout *out);

/* Names used in ids and files: "uniform", "skewed", "zero-expert", "hot-rank", "stale-ids",
 * "neg-ids", "no-local", "dispatched"; "exact", "adversarial", "nan", "negzero"; "smoke", "full", "large",
 * "local".
 * The parse functions return 0, or -1 for an unknown name. */
const char *moects__routing_name(moects_routing r);
int moects__routing_parse(const char *s, moects_routing *out);
const char *moects__data_name(moects_data d);
int moects__data_parse(const char *s, moects_data *out);
int moects__tier_parse(const char *s, moects_tier *out);
/* Tier words as `moects run --tier` and libmoects take them: comma-separated smoke, full, large and
 * all, into moects_tier bits. 0, or -1 for an unknown or empty word (cases/select.c). */
int moects__tiers_parse(const char *s, unsigned *out);
/* The tier words of bits t, comma-separated in the order smoke, full, large, local ("smoke,full"). */
void moects__tiers_text(unsigned t, char *buf, size_t len);

/* A case's shape in one line, in the op's terms (`moects list -v`): "out [T 128, H 3584] bf16; topk 8 of
 * E 384; EP rank 0 of 8; ids int32; routing skewed; data exact", "D [M 16, N 4096] bf16 = A [M, K 7168] x
 * B [N, K]^T; MXFP4, linear scales; gemm1; data exact". A new op adds its branch (cases/shape.c). */
void moects__case_shape(const moects_case *c, char *buf, size_t len);

/* What selects cases: positional globs (fnmatch on ids), tiers, must-pass lists (cases/select.c). */
typedef struct {
    const char *const *globs;
    size_t nglobs;
    unsigned tiers;                /* moects_tier bits; used when tier_given, else smoke */
    int tier_given;
    const char *const *case_files; /* must-pass lists (moects__idlist_load; "-": standard input) */
    size_t ncase_files;
} moects_selection;

/* The one selection rule (moects list, moects run, libmoects' moects_cases_select, so the Python
 * package): sel[all->n] gets 1 for each selected case. Without lists: every glob must match some id;
 * a case is selected when a glob matches it (or there is none) and it is in the tiers, or a glob
 * names it exactly and no tier was given. With lists: their exact ids whatever the tier, their globs
 * within the tiers when given, narrowed by the positional globs; list entries that select nothing
 * are appended to *missing (malloc'd strings; the caller frees them and the array). Returns 0; -2
 * when a glob matches no id, -3 when no case is selected, -1 for the other errors (a list unreadable
 * or empty, out of memory), each with one line in err. */
int moects__cases_pick(const moects_case_list *all, const moects_selection *s, char *sel, char ***missing,
                      size_t *nmissing, char *err, size_t errlen);

/* A case-id list file (cases/mustpass/ *.txt; path "-": standard input, read once, named "standard
 * input" in errors): one id per line; '#' starts a comment; blank lines and surrounding blanks
 * ignored. Returns the number of ids (*ids: malloc'd array of malloc'd strings, free with
 * moects__idlist_free), or -1 with "path:line: problem" in err. */
int moects__idlist_load(const char *path, char ***ids, char *err, size_t errlen);
void moects__idlist_free(char **ids, size_t n);

#endif
