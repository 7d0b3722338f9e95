/* derive_fused.c: fused MoE layer (fused_moe) cases of one model under one TP/EP layout (DESIGN.md
 * "The fused MoE layer", "Cases"). A case is the routed layer of the model on rank 0 of the layout:
 * T tokens with the model's topk over its E routed experts, the rank's E local experts (all under
 * TP, vLLM's linear EP split under EP, with an expert_map), I = moe_intermediate_size / TP, H the
 * experts' input width (the latent width for latent MoE), and the model's activation, limit, alpha
 * and expert biases (cases/models/NAME.json).
 *
 * A raw config whose activation moects does not map (activation 0) derives none.
 *
 * Ids: fused_moe.<bf16|mxfp4|fp8_128|nvfp4|w4a8>/<model>/<layout>/t<T>[/<variant>]
 * Which cases: on the grid layouts (tp8, or the largest TP, and ep8) both weight formats at T in
 * {1, 16, 128}, and the variants below; on every other layout both formats at T = 16. MXFP4 needs
 * H and I multiples of 32 (else only BF16). Models released in W8A8 block FP8 (DeepSeek-V3, V3.2,
 * Kimi K2: release_quantization "fp8 e4m3, 128x128 ...") add FP8_128 where H and I are multiples of
 * 128, and one smoke case on the largest TP (plain, adversarial or nan: smoke_fp8). Models with a
 * published NVFP4 checkpoint (NVFP4_CHECKPOINTS) add NVFP4 (H and I multiples of 16), models whose
 * routed experts are released in FP4 (release_quantization naming mxfp4 or fp4 experts: gpt-oss,
 * Kimi K3, DeepSeek-V4) add W4A8 (their MXFP4 experts with FP8 activations, H and I multiples of 32),
 * each with one smoke case on the largest TP as FP8's.
 * Tiers: E*3*I*H weights above 2^31 (DeepSeek-V3 tp1) LARGE, else FULL. Smoke (the CPU kernels'
 * loops: about SMOKE_PRODUCTS products a case): per model, on its largest TP, T in 1..4 in the format
 * picked by the model name's hash, the same case with adversarial data (GEMM1 outputs past the
 * activation's limit on both halves, FP4 scale bytes of every value class), and one variant picked
 * by the hash (so the registry samples them all); on ep8 (or the largest EP) of the models whose
 * expert holds at most 2^24 weights, the last rank's dispatched tokens, adversarial and no-local. */
#include <stdio.h>
#include <string.h>

#include "cases_internal.h"
#include "moects_cases.h"

#define FUSED_BIG_WEIGHTS ((int64_t)1 << 31)
#define SMOKE_PRODUCTS ((int64_t)24 << 20) /* per smoke case: slots x 3 I H */
#define SMOKE_BYTES ((int64_t)256 << 20)    /* a smoke case's BF16 weights above this: MXFP4 */
static const int64_t T_GRID[] = {1, 16, 128};

typedef struct {
    const char *name;
    int64_t T;
    int ep_only, tp_only;
    moects_routing routing;
    moects_dtype out_dtype;
    moects_data data;
} fused_variant;

static const fused_variant VARIANTS[] = {
    {"skewed", 128, .routing = MOECTS_ROUTE_SKEWED},
    {"zero-expert", 64, .routing = MOECTS_ROUTE_ZERO_EXPERT},
    {"hot-expert", 64, .routing = MOECTS_ROUTE_ONE_EXPERT},
    {"t0", 0, .data = MOECTS_DATA_EXACT},
    {"f32-out", 16, .out_dtype = MOECTS_F32},
    {"adversarial", 16, .data = MOECTS_DATA_ADVERSARIAL},
    {"nan", 16, .data = MOECTS_DATA_NAN},
    {"no-local", 16, .ep_only = 1, .routing = MOECTS_ROUTE_NO_LOCAL},
};
#define NVARIANTS (sizeof VARIANTS / sizeof *VARIANTS)

static const char *const FORMAT_NAMES[] = {"?", "bf16", "mxfp4", "fp8_128", "nvfp4", "w4a8"};

const char *moects__layer_format_name(moects_layer_format f)
{
    return f >= MOECTS_LAYER_BF16 && f <= MOECTS_LAYER_W4A8 ? FORMAT_NAMES[f] : "?";
}

int moects__layer_format_parse(const char *s, moects_layer_format *out)
{
    for (int f = MOECTS_LAYER_BF16; f <= MOECTS_LAYER_W4A8; f++)
        if (!strcmp(s, FORMAT_NAMES[f])) return *out = (moects_layer_format)f, 0;
    return -1;
}

static uint32_t name_hash(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

static int push_id(moects_case_list *out, moects_case *c, const char *variant)
{
    int n = snprintf(c->id, sizeof c->id, "fused_moe.%s/%s/%s/t%lld%s%s", moects__layer_format_name(c->layer_format),
                     c->model, c->layout, (long long)c->T, variant ? "/" : "", variant ? variant : "");
    if (n < 0 || (size_t)n >= sizeof c->id) return -1;
    return moects__case_list_push(out, c);
}

/* The layout's plain case: the model's layer facts, format f, T tokens. */
static moects_case layer_case(const moects_model *m, const moects_case *base, int ep, int rank, int64_t I_rank,
                              moects_layer_format f, int64_t T)
{
    moects_case c = *base;
    const int64_t H = m->latent_size > 0 ? m->latent_size : m->hidden_size;
    c.op = MOECTS_OP_FUSED_MOE;
    c.T = T;
    c.k = m->experts_per_token;
    c.H = H;
    c.inter = I_rank;
    c.E_global = m->routed_experts;
    c.E = ep ? moects__ep_local_experts(m->routed_experts, ep, rank, NULL) : m->routed_experts;
    c.ep_size = ep ? ep : 1;
    c.ep_rank = rank;
    c.has_map = ep > 1;
    c.routing = MOECTS_ROUTE_UNIFORM;
    c.layer_format = f;
    c.activation = m->activation;
    c.act_limit = m->has_activation_limit ? m->activation_limit : 0;
    c.act_alpha = m->has_activation_alpha ? m->activation_alpha : 0;
    c.has_bias = m->expert_bias;
    c.out_dtype = MOECTS_BF16;
    c.tiers = c.E * 3 * I_rank * H > FUSED_BIG_WEIGHTS ? MOECTS_TIER_LARGE : MOECTS_TIER_FULL;
    return c;
}

static void apply(moects_case *c, const fused_variant *v)
{
    c->T = v->T;
    if (v->routing) c->routing = v->routing;
    if (v->out_dtype) c->out_dtype = v->out_dtype;
    if (v->data) c->data = v->data;
}

/* T of a smoke case: the most tokens (1..4) whose slots cost at most SMOKE_PRODUCTS products (under
 * EP: slot 0 local, the others local with probability E / E_global), at least 1. */
static int64_t smoke_t(const moects_case *c)
{
    double slots = c->ep_size > 1 ? 1 + (double)(c->k - 1) * (double)c->E / (double)c->E_global : (double)c->k;
    double T = (double)SMOKE_PRODUCTS / (slots * 3.0 * (double)c->inter * (double)c->H);
    return T < 1 ? 1 : T > 4 ? 4 : (int64_t)T;
}

static int push_smoke(moects_case_list *out, moects_case *c, const char *name)
{
    c->tiers |= MOECTS_TIER_SMOKE | MOECTS_TIER_FULL;
    return push_id(out, c, name);
}

/* The model's smoke cases on its largest TP (plain, adversarial, and the variant the model name's hash
 * picks) or on ep8 (the last rank, where local index and global id differ, with the tokens a dispatch
 * sends it; plain, adversarial, no-local). The format: the hash's, MXFP4 when BF16 weights would pass
 * SMOKE_BYTES (the weights of experts no slot routes to are not generated, but they are allocated). */
static int smoke_cases(const moects_model *m, const moects_case *base, int ep, int64_t I_rank, int nf,
                       moects_case_list *out)
{
    uint32_t h = name_hash(m->name);
    moects_layer_format f = (moects_layer_format)(MOECTS_LAYER_BF16 + (int)(h % (uint32_t)nf));
    moects_case c = layer_case(m, base, ep, ep ? ep - 1 : 0, I_rank, f, 1);
    if (nf == 2 && c.E * 3 * c.inter * c.H * 2 > SMOKE_BYTES) c.layer_format = f = MOECTS_LAYER_MXFP4;
    if (ep) c.routing = MOECTS_ROUTE_DISPATCHED;
    c.T = smoke_t(&c);
    const moects_case plain = c;
    if (push_smoke(out, &c, "smoke")) return -1;
    c.data = MOECTS_DATA_ADVERSARIAL;
    if (push_smoke(out, &c, "smoke-adversarial")) return -1;
    if (ep) {
        c = plain, c.routing = MOECTS_ROUTE_NO_LOCAL, c.T = 4;
        if (push_smoke(out, &c, "smoke-no-local")) return -1;
    }
    const fused_variant *v = &VARIANTS[(h >> 8) % NVARIANTS];
    if (v->ep_only || v->data == MOECTS_DATA_ADVERSARIAL || (ep && v->routing) ||
        (double)c.T * (double)c.k * 3.0 * (double)c.inter * (double)c.H > (double)SMOKE_PRODUCTS)
        return 0; /* the variant only where the case is cheap */
    c = plain;
    apply(&c, v);
    c.T = v->T ? plain.T : 0;
    char name[48];
    snprintf(name, sizeof name, "smoke-%s", v->name);
    return push_smoke(out, &c, name);
}

/* 1 when the model's release is W8A8 block FP8 (E4M3 with 128 x 128 weight blocks: DeepSeek-V3,
 * V3.2, Kimi K2) and the layout's H and I take whole blocks. */
static int fp8_128_release(const moects_model *m, int64_t H, int64_t I_rank)
{
    return !strncmp(m->release_quantization, "fp8 e4m3, 128x128", 17) && H % 128 == 0 && I_rank % 128 == 0;
}

/* Registry models with a published NVFP4 checkpoint of their MoE (ModelOpt's NVFP4: E2M1, E4M3 scales
 * per 16, FP32 global scales), the checkpoint named: GLM-4.6's is the one the registry's glm-4.5 entry
 * cites; the others are NVIDIA's ModelOpt releases as named on Hugging Face (not stored here). */
static const char *const NVFP4_CHECKPOINTS[][2] = {
    {"glm-4.5", "RedHatAI/GLM-4.6-NVFP4"},
    {"deepseek-v3", "nvidia/DeepSeek-V3-0324-FP4"},
    {"qwen3-235b-a22b", "nvidia/Qwen3-235B-A22B-FP4"},
    {"llama-4-scout", "nvidia/Llama-4-Scout-17B-16E-Instruct-FP4"},
};

static int nvfp4_release(const moects_model *m, int64_t H, int64_t I_rank)
{
    for (size_t i = 0; i < sizeof NVFP4_CHECKPOINTS / sizeof *NVFP4_CHECKPOINTS; i++)
        if (!strcmp(m->name, NVFP4_CHECKPOINTS[i][0])) return H % 16 == 0 && I_rank % 16 == 0;
    return 0;
}

/* 1 when the model's routed experts are released in FP4 (MXFP4: gpt-oss, Kimi K3; DeepSeek-V4's FP4
 * experts), served W4A8 (FP8 activations) by trtllm-gen / FlashInfer, and H and I take whole blocks. */
static int w4a8_release(const moects_model *m, int64_t H, int64_t I_rank)
{
    const char *q = m->release_quantization;
    return (strstr(q, "mxfp4") || strstr(q, "experts fp4")) && H % 32 == 0 && I_rank % 32 == 0;
}

/* The FP8 block-128 (NVFP4, W4A8) smoke case of such a model on its largest TP, one a model (an FP8
 * case allocates 1.4 GB of weights at DeepSeek's size): plain, adversarial (a block scale of every
 * class) or nan (a NaN scale, a NaN code) as the name's hash picks; DeepSeek-V3, V3.2 and Kimi K2
 * take the three FP8 ones (test_cases_derive checks that the smoke tier holds each). */
static int smoke_fmt(const moects_model *m, const moects_case *base, int64_t I_rank, moects_layer_format f,
                     moects_case_list *out)
{
    static const moects_data DATA[] = {MOECTS_DATA_EXACT, MOECTS_DATA_ADVERSARIAL, MOECTS_DATA_NAN};
    static const char *const NAMES[] = {"smoke", "smoke-adversarial", "smoke-nan"};
    /* the hash's bits per format chosen so that the registry's models of each take all three */
    const uint32_t i = (name_hash(m->name) >> (f == MOECTS_LAYER_FP8_128 ? 11 : f == MOECTS_LAYER_NVFP4 ? 12 : 9)) % 3;
    moects_case c = layer_case(m, base, 0, 0, I_rank, f, 1);
    c.T = smoke_t(&c);
    c.data = DATA[i];
    return push_smoke(out, &c, NAMES[i]);
}

int moects__derive_fused_cases(const moects_model *m, const moects_case *base, int tp, int ep, int64_t I_rank,
                               int grid, int smoke, moects_case_list *out)
{
    const int64_t H = m->latent_size > 0 ? m->latent_size : m->hidden_size;
    const int nf = H % 32 == 0 && I_rank % 32 == 0 ? 2 : 1; /* MXFP4: whole scale blocks along K */
    moects_layer_format fmts[5] = {MOECTS_LAYER_BF16, MOECTS_LAYER_MXFP4};
    int nfmt = nf;
    if (fp8_128_release(m, H, I_rank)) fmts[nfmt++] = MOECTS_LAYER_FP8_128;
    if (nvfp4_release(m, H, I_rank)) fmts[nfmt++] = MOECTS_LAYER_NVFP4;
    if (w4a8_release(m, H, I_rank)) fmts[nfmt++] = MOECTS_LAYER_W4A8;
    if (!m->activation) return 0; /* a raw config whose activation moects does not know: no layer to derive */
    if (smoke && smoke_cases(m, base, ep, I_rank, nf, out)) return -1;
    for (int fi = nf; smoke && !ep && fi < nfmt; fi++)
        if (smoke_fmt(m, base, I_rank, fmts[fi], out)) return -1;
    for (int fi = 0; fi < nfmt; fi++) {
        moects_layer_format f = fmts[fi];
        for (size_t i = 0; i < (grid ? sizeof T_GRID / sizeof *T_GRID : 1); i++) {
            moects_case c = layer_case(m, base, ep, 0, I_rank, f, grid ? T_GRID[i] : 16);
            if (push_id(out, &c, NULL)) return -1;
        }
        for (size_t vi = 0; grid && vi < NVARIANTS; vi++) {
            if ((VARIANTS[vi].ep_only && !ep) || (VARIANTS[vi].tp_only && !tp)) continue;
            moects_case c = layer_case(m, base, ep, 0, I_rank, f, 0);
            apply(&c, &VARIANTS[vi]);
            if (push_id(out, &c, VARIANTS[vi].name)) return -1;
        }
    }
    return 0;
}
