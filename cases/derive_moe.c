/* derive_moe.c: grouped MoE GEMM (moe_gemm) cases of one model under one TP/EP layout (DESIGN.md
 * "Grouped MoE GEMM", "Cases"). Shapes as for fp4_gemm (cases/derive.c): gemm1 [rows, N = 2I/t
 * (I/t non-gated), K], gemm2 [rows, N = K, K' = I/t]; the E local experts of the layout (all E
 * under TP, vLLM's linear EP split under EP, rank 0). Rows per expert: the slots that the ep_gather
 * routing rule (uniform unless the variant says) puts on each local expert for T tokens with the
 * model's topk, or the tile windows (moects_tile_windows, cycled over the experts).
 *
 * Ids: moe_gemm.<format>/<model>/<layout>/<rows>/<gemm>/t<T>[/<variant>] and
 *      moe_gemm.<format>/<model>/<layout>/<rows>/<gemm>/windows[/<variant>].
 * Which cases: on the grid layouts (tp8, or the largest TP, and ep8) every format x row layout at
 * T in {1, 16, 128} and the tile windows, T = 4096 (prefill) contiguous; on the TP grid layout also
 * the variants below (skewed and zero-expert routing, swizzled scales, align 64, per-32 and FP32
 * W4A8 activation scales, W4A16 with NVFP4 weights, adversarial and NaN data); on every other
 * layout each format contiguous at T = 128, and masked (MXFP4, W4A8) and offsets (NVFP4, W4A16) at
 * T = 16.
 * Tiers: the weights of one case are E*N*K codes; above 2^31 (DeepSeek-V3 tp1: 7.5e9) the case is
 * LARGE (64-bit addressing, the GPU host), else FULL. Smoke: per model one case on the layout with
 * the fewest weights (gemm2, T = 16, the format x row layout picked by the model name's hash so the
 * registry samples all twelve), plus cases/regressions/ (the mutants' triggers, small shapes). */
#include <stdio.h>
#include <string.h>

#include "cases_internal.h"
#include "moects_cases.h"

#define MOE_BIG_WEIGHTS ((int64_t)1 << 31)
static const int64_t T_GRID[] = {1, 16, 128, 4096};

/* One variant of a grid-layout case; a zero field keeps the plain case's value. */
typedef struct {
    const char *name;
    unsigned formats;  /* bit f: the moe format f takes the variant */
    unsigned rows;     /* bit r: the row layout r takes it */
    int64_t T;         /* 0: tile windows */
    moects_routing routing;
    moects_scale_layout scale_layout;
    int64_t align, a_scale_block;
    int a_scale_f32;
    moects_fp4_format b_format;
    moects_data data;
} moe_variant;

#define F_ALL 0x1eu
#define F_FP4 ((1u << MOECTS_MOE_MXFP4) | (1u << MOECTS_MOE_NVFP4))
#define F_W4A8 (1u << MOECTS_MOE_W4A8)
#define F_W4A16 (1u << MOECTS_MOE_W4A16)
#define R_ALL 0xeu
#define R_CONT (1u << MOECTS_ROWS_CONTIGUOUS)
#define R_MASK (1u << MOECTS_ROWS_MASKED)

static const moe_variant GRID_VARIANTS[] = {
    {"skewed", F_ALL, R_CONT | R_MASK, 128, .routing = MOECTS_ROUTE_SKEWED},
    {"zero-expert", F_ALL, R_ALL, 128, .routing = MOECTS_ROUTE_ZERO_EXPERT},
    {"swizzled", F_FP4 | F_W4A16, R_CONT | R_MASK, 128, .scale_layout = MOECTS_SCALES_SWIZZLED_128X4},
    {"align64", F_ALL, R_CONT, 128, .align = 64},
    {"a32", F_W4A8, R_ALL, 128, .a_scale_block = 32},
    {"a-f32", F_W4A8, R_ALL, 128, .a_scale_f32 = 1},
    {"b-nvfp4", F_W4A16, R_ALL, 128, .b_format = MOECTS_FP4_NVFP4},
    {"adversarial", F_ALL, R_CONT, 16, .data = MOECTS_DATA_ADVERSARIAL},
    {"nan", F_ALL, R_CONT, 16, .data = MOECTS_DATA_NAN},
};

/* The plain case: format f, row layout r, T tokens (0: tile windows). */
static moects_case moe_case(const moects_case *base, moects_moe_format f, moects_row_layout r, int64_t T)
{
    moects_case c = *base;
    c.moe_format = f;
    c.b_format = f == MOECTS_MOE_NVFP4 ? MOECTS_FP4_NVFP4 : MOECTS_FP4_MXFP4;
    c.rows = r;
    c.align = r == MOECTS_ROWS_CONTIGUOUS ? 128 : 1;
    c.a_scale_block = f == MOECTS_MOE_W4A8 ? 128 : 0;
    c.T = T;
    if (!T) {
        c.n_counts = (int)(sizeof moects_tile_windows / sizeof *moects_tile_windows);
        memcpy(c.counts, moects_tile_windows, sizeof moects_tile_windows);
    }
    return c;
}

static int push_id(moects_case_list *out, moects_case *c, const char *variant)
{
    char t[32];
    if (c->T) snprintf(t, sizeof t, "t%lld", (long long)c->T);
    else snprintf(t, sizeof t, "windows");
    int n = snprintf(c->id, sizeof c->id, "moe_gemm.%s/%s/%s/%s/%s/%s%s%s", moects__moe_format_name(c->moe_format),
                     c->model, c->layout, moects__row_layout_name(c->rows), c->gemm, t, variant ? "/" : "",
                     variant ? variant : "");
    if (n < 0 || (size_t)n >= sizeof c->id) return -1;
    return moects__case_list_push(out, c);
}

static void apply_variant(moects_case *c, const moe_variant *v)
{
    if (v->routing) c->routing = v->routing;
    if (v->scale_layout) c->scale_layout = v->scale_layout;
    if (v->align) c->align = v->align;
    if (v->a_scale_block) c->a_scale_block = v->a_scale_block;
    if (v->a_scale_f32) c->a_scale_f32 = 1;
    if (v->b_format) c->b_format = v->b_format;
    if (v->data) c->data = v->data;
}

static uint32_t name_hash(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

int moects__derive_moe_cases(const moects_model *m, const moects_case *base_in, int tp, int ep, int64_t I_rank,
                             int grid, int smoke, moects_case_list *out)
{
    const int64_t K_in = m->latent_size > 0 ? m->latent_size : m->hidden_size;
    const int64_t E_local = ep ? moects__ep_local_experts(m->routed_experts, ep, 0, NULL) : m->routed_experts;
    const int nf = 4, nr = 3;
    int smoke_combo = (int)(name_hash(m->name) % (uint32_t)(nf * nr));
    for (int g2 = 0; g2 < 2; g2++) {
        moects_case base = *base_in;
        base.op = MOECTS_OP_MOE_GEMM;
        base.N = g2 ? K_in : (m->gated ? 2 : 1) * I_rank;
        base.K = g2 ? I_rank : K_in;
        moects__copy(base.gemm, sizeof base.gemm, g2 ? "gemm2" : "gemm1");
        base.E = E_local;
        base.k = m->experts_per_token;
        base.E_global = m->routed_experts;
        base.ep_size = ep ? ep : 1;
        base.ep_rank = 0;
        base.routing = MOECTS_ROUTE_UNIFORM;
        base.scale_layout = MOECTS_SCALES_LINEAR;
        base.tiers = E_local * base.N * base.K > MOE_BIG_WEIGHTS ? MOECTS_TIER_LARGE : MOECTS_TIER_FULL;
        for (int fi = 0; fi < nf; fi++)
            for (int ri = 0; ri < nr; ri++) {
                moects_moe_format f = (moects_moe_format)(MOECTS_MOE_MXFP4 + fi);
                moects_row_layout r = (moects_row_layout)(MOECTS_ROWS_CONTIGUOUS + ri);
                if (grid) {
                    for (size_t ti = 0; ti <= sizeof T_GRID / sizeof *T_GRID; ti++) {
                        int64_t T = ti < sizeof T_GRID / sizeof *T_GRID ? T_GRID[ti] : 0;
                        if (T == 4096 && r != MOECTS_ROWS_CONTIGUOUS) continue; /* prefill: contiguous */
                        moects_case c = moe_case(&base, f, r, T);
                        if (smoke && g2 && fi * nr + ri == smoke_combo && T == 16)
                            c.tiers |= MOECTS_TIER_SMOKE | MOECTS_TIER_FULL;
                        if (push_id(out, &c, NULL)) return -1;
                    }
                    for (size_t vi = 0; tp && vi < sizeof GRID_VARIANTS / sizeof *GRID_VARIANTS; vi++) {
                        const moe_variant *v = &GRID_VARIANTS[vi];
                        if (!(v->formats >> f & 1) || !(v->rows >> r & 1)) continue;
                        moects_case c = moe_case(&base, f, r, v->T);
                        apply_variant(&c, v);
                        if (push_id(out, &c, v->name)) return -1;
                    }
                } else {
                    /* every format contiguous, masked and offsets in two formats each */
                    int is_smoke = smoke && g2 && fi * nr + ri == smoke_combo;
                    if (!is_smoke && r == MOECTS_ROWS_MASKED && fi % 2) continue;
                    if (!is_smoke && r == MOECTS_ROWS_OFFSETS && fi % 2 == 0) continue;
                    moects_case c = moe_case(&base, f, r, r == MOECTS_ROWS_CONTIGUOUS && !is_smoke ? 128 : 16);
                    if (is_smoke) c.tiers |= MOECTS_TIER_SMOKE | MOECTS_TIER_FULL;
                    if (push_id(out, &c, NULL)) return -1;
                }
            }
    }
    return 0;
}

double moects__moe_expected_rows(const moects_case *c)
{
    if (c->n_counts > 0) {
        double rows = 0;
        for (int64_t e = 0; e < c->E; e++) rows += (double)c->counts[e % c->n_counts];
        return rows;
    }
    return c->E_global > 0 ? (double)c->T * (double)c->k * (double)c->E / (double)c->E_global : 0;
}
