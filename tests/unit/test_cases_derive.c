/* test_cases_derive.c: the TP/EP derivation (cases/derive.c, cases/ep_split.c). Expected shapes
 * are worked out by hand from DESIGN.md "Derivation" and the models' config values. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moects_cases.h"

#define MODELS MOECTS_SOURCE_DIR "/cases/models"

static moects_model load(const char *name)
{
    char path[512], err[512] = "";
    snprintf(path, sizeof path, "%s/%s.json", MODELS, name);
    moects_model m;
    cr_assert_eq(moects__model_load(path, &m, err, sizeof err), 0, "%s", err);
    return m;
}

static const moects_case *find(const moects_case_list *l, const char *id)
{
    for (size_t i = 0; i < l->n; i++)
        if (!strcmp(l->v[i].id, id)) return &l->v[i];
    cr_assert_fail("no case %s", id);
    return NULL;
}

static int has(const moects_case_list *l, const char *id)
{
    for (size_t i = 0; i < l->n; i++)
        if (!strcmp(l->v[i].id, id)) return 1;
    return 0;
}

static moects_case_list derive(const char *name)
{
    moects_model m = load(name);
    moects_case_list l = {0};
    cr_assert_eq(moects__derive_cases(&m, &l), 0);
    return l;
}

/* Kimi K3 at TP8: ep_gather over the latent width 3584 (not hidden 7168), every expert local;
 * gemm1 N = 2 * 3072 / 8 = 768, K = 3584; gemm2 N = 3584, K' = 3072 / 8 = 384. */
Test(derive, kimi_k3_tp8)
{
    moects_case_list l = derive("kimi-k3");
    const moects_case *c = find(&l, "ep_gather/kimi-k3/tp8/t128");
    cr_expect_eq(c->op, MOECTS_OP_EP_GATHER);
    cr_expect_eq(c->H, 3584);
    cr_expect_eq(c->T, 128);
    cr_expect_eq(c->k, 16);
    cr_expect_eq(c->E_global, 896);
    cr_expect_eq(c->ep_size, 1);
    cr_expect_eq(c->has_map, 0);
    cr_expect_str_eq(c->layout, "tp8");
    cr_expect_str_eq(c->model, "kimi-k3");
    c = find(&l, "fp4_gemm.mxfp4/kimi-k3/tp8/gemm1/m256");
    cr_expect_eq(c->M, 256);
    cr_expect_eq(c->N, 768);
    cr_expect_eq(c->K, 3584);
    cr_expect_eq(c->format, MOECTS_FP4_MXFP4);
    cr_expect_str_eq(c->gemm, "gemm1");
    c = find(&l, "fp4_gemm.nvfp4/kimi-k3/tp8/gemm2/m100");
    cr_expect_eq(c->N, 3584);
    cr_expect_eq(c->K, 384);
    cr_expect_eq(c->format, MOECTS_FP4_NVFP4);
    /* EP8: 896 / 8 = 112 experts a rank, I undivided: gemm2 K' = 3072. */
    c = find(&l, "fp4_gemm.nvfp4/kimi-k3/ep8/gemm2/m100");
    cr_expect_eq(c->N, 3584);
    cr_expect_eq(c->K, 3072);
    c = find(&l, "ep_gather/kimi-k3/ep8/t128");
    cr_expect_eq(c->ep_size, 8);
    cr_expect_eq(c->has_map, 1);
    cr_expect_eq(c->H, 3584);
    cr_expect_eq(moects__ep_local_experts(896, 8, 7, NULL), 112);
    moects__case_list_free(&l);
}

/* Qwen3-30B-A3B TP4: gemm2 K' = 768 / 4 = 192, N = hidden 2048; gemm1 N = 2 * 192 = 384. */
Test(derive, qwen3_30b_tp4)
{
    moects_case_list l = derive("qwen3-30b-a3b");
    const moects_case *c = find(&l, "fp4_gemm.mxfp4/qwen3-30b-a3b/tp4/gemm2/m128");
    cr_expect_eq(c->K, 192);
    cr_expect_eq(c->N, 2048);
    c = find(&l, "fp4_gemm.mxfp4/qwen3-30b-a3b/tp4/gemm1/m128");
    cr_expect_eq(c->N, 384);
    cr_expect_eq(c->K, 2048);
    c = find(&l, "ep_gather/qwen3-30b-a3b/tp4/t4096");
    cr_expect_eq(c->H, 2048);
    cr_expect_eq(c->k, 8);
    moects__case_list_free(&l);
}

/* DeepSeek-V3 EP64: 256 experts / 64 = 4 a rank; rank 5 holds 20..23. */
Test(derive, deepseek_v3_ep64)
{
    moects_case_list l = derive("deepseek-v3");
    const moects_case *c = find(&l, "ep_gather/deepseek-v3/ep64/t128");
    cr_expect_eq(c->ep_size, 64);
    cr_expect_eq(c->E_global, 256);
    cr_expect_eq(c->H, 7168);
    cr_expect_eq(c->has_map, 1);
    c = find(&l, "fp4_gemm.mxfp4/deepseek-v3/ep64/gemm1/m16");
    cr_expect_eq(c->N, 4096); /* 2 * 2048, I not divided by EP */
    cr_expect_eq(c->K, 7168);
    c = find(&l, "ep_gather/deepseek-v3/ep8/t4096");
    cr_expect_eq(c->ep_size, 8);
    cr_expect_eq(c->T, 4096);
    c = find(&l, "fp4_gemm.mxfp4/deepseek-v3/tp8/gemm1/m256");
    cr_expect_eq(c->N, 512); /* 2 * 2048 / 8 */
    cr_expect_eq(c->K, 7168);
    for (int r = 0; r < 64; r++) {
        int64_t first = -1;
        cr_expect_eq(moects__ep_local_experts(256, 64, r, &first), 4);
        cr_expect_eq(first, 4 * r);
    }
    int32_t map[256];
    cr_assert_eq(moects__expert_map(256, 64, 5, map), 4);
    for (int i = 0; i < 256; i++) cr_expect_eq(map[i], (i >= 20 && i < 24) ? i - 20 : -1, "map[%d]", i);
    moects__case_list_free(&l);
}

/* E % e != 0: 160 experts (GLM-4.5, Qwen3-Coder) over 64 ranks: 160 = 64 * 2 + 32, so ranks 0..31
 * hold 3 (0-2, 3-5, ... 93-95) and ranks 32..63 hold 2 (96-97, ..., 158-159). 9 over 2: 5 and 4. */
Test(derive, uneven_ep_split)
{
    int64_t first, total = 0;
    for (int r = 0; r < 64; r++) {
        int64_t n = moects__ep_local_experts(160, 64, r, &first);
        cr_expect_eq(n, r < 32 ? 3 : 2, "rank %d", r);
        cr_expect_eq(first, r < 32 ? 3 * r : 96 + 2 * (r - 32), "rank %d", r);
        total += n;
    }
    cr_expect_eq(total, 160);
    int32_t map[9];
    cr_assert_eq(moects__expert_map(9, 2, 1, map), 4);
    const int32_t want[9] = {-1, -1, -1, -1, -1, 0, 1, 2, 3};
    for (int i = 0; i < 9; i++) cr_expect_eq(map[i], want[i]);
    cr_assert_eq(moects__expert_map(9, 2, 0, map), 5);
    cr_expect_eq(map[4], 4);
    cr_expect_eq(map[5], -1);
    cr_expect_eq(moects__ep_local_experts(8, 2, 2, NULL), -1);
    cr_expect_eq(moects__ep_local_experts(8, 0, 0, NULL), -1);
    moects_case_list l = derive("glm-4.5");
    const moects_case *c = find(&l, "ep_gather/glm-4.5/ep64/t128/last-rank");
    cr_expect_eq(c->ep_rank, 63);
    cr_expect_eq(c->ep_size, 64);
    moects__case_list_free(&l);
}

/* Non-gated (relu2) Nemotron: gemm1 N = I/t, not 2I/t. Nano TP8: 1856 / 8 = 232, K = 2688.
 * Ultra is latent MoE too: K = 2048, gemm1 N = 5120 / 8 = 640, ep_gather H = 2048. */
Test(derive, nemotron_non_gated)
{
    moects_case_list l = derive("nemotron-3-nano-30b-a3b");
    const moects_case *c = find(&l, "fp4_gemm.mxfp4/nemotron-3-nano-30b-a3b/tp8/gemm1/m16");
    cr_expect_eq(c->N, 232);
    cr_expect_eq(c->K, 2688);
    c = find(&l, "fp4_gemm.nvfp4/nemotron-3-nano-30b-a3b/tp1/gemm1/m1");
    cr_expect_eq(c->N, 1856);
    c = find(&l, "fp4_gemm.nvfp4/nemotron-3-nano-30b-a3b/tp16/gemm2/m1");
    cr_expect_eq(c->N, 2688);
    cr_expect_eq(c->K, 116);
    moects__case_list_free(&l);
    l = derive("nemotron-3-ultra-550b-a55b");
    c = find(&l, "fp4_gemm.mxfp4/nemotron-3-ultra-550b-a55b/tp8/gemm1/m16");
    cr_expect_eq(c->N, 640);
    cr_expect_eq(c->K, 2048);
    c = find(&l, "ep_gather/nemotron-3-ultra-550b-a55b/tp2/t16");
    cr_expect_eq(c->H, 2048);
    cr_expect_eq(c->k, 22);
    moects__case_list_free(&l);
}

/* Layouts exist only where they divide: TP needs I % t == 0, EP needs e <= E. */
Test(derive, layouts_that_do_not_divide_are_skipped)
{
    moects_model m = {0};
    strcpy(m.name, "toy");
    m.hidden_size = 96;
    m.moe_intermediate_size = 100; /* 100 % 8 = 4: tp1, tp2, tp4 only */
    m.routed_experts = 6;          /* ep2, ep4 only */
    m.experts_per_token = 2;
    m.gated = 1;
    moects_case_list l = {0};
    cr_assert_eq(moects__derive_cases(&m, &l), 0);
    cr_expect(has(&l, "ep_gather/toy/tp4/t1"));
    cr_expect(!has(&l, "ep_gather/toy/tp8/t1"));
    cr_expect(!has(&l, "ep_gather/toy/tp16/t1"));
    cr_expect(has(&l, "ep_gather/toy/ep4/t1"));
    cr_expect(!has(&l, "ep_gather/toy/ep8/t1"));
    const moects_case *c = find(&l, "fp4_gemm.mxfp4/toy/tp4/gemm1/m1");
    cr_expect_eq(c->N, 50); /* 2 * 100 / 4 */
    cr_expect_eq(c->K, 96);
    /* no tp8: the smoke GEMMs use the largest TP there is (tp4) */
    cr_expect(find(&l, "fp4_gemm.mxfp4/toy/tp4/gemm2/m16")->tiers & MOECTS_TIER_SMOKE);
    /* EP4 of 6 experts: ranks hold 2, 2, 1, 1 */
    cr_expect_eq(moects__ep_local_experts(6, 4, 0, NULL), 2);
    cr_expect_eq(moects__ep_local_experts(6, 4, 3, NULL), 1);
    moects__case_list_free(&l);
    moects_case_list m8 = derive("mixtral-8x7b");
    cr_expect(has(&m8, "ep_gather/mixtral-8x7b/ep8/t16"));
    cr_expect(!has(&m8, "ep_gather/mixtral-8x7b/ep16/t16"));
    moects__case_list_free(&m8);
}

Test(derive, bad_models_refused)
{
    moects_model m = {0};
    moects_case_list l = {0};
    strcpy(m.name, "bad");
    m.hidden_size = 64;
    m.moe_intermediate_size = 64;
    m.routed_experts = 1;
    m.experts_per_token = 1;
    cr_expect_eq(moects__derive_cases(&m, &l), -1);
    m.routed_experts = 4;
    m.experts_per_token = 5;
    cr_expect_eq(moects__derive_cases(&m, &l), -1);
    m.experts_per_token = 2;
    m.hidden_size = 0;
    cr_expect_eq(moects__derive_cases(&m, &l), -1);
    cr_expect_eq(l.n, 0);
}

/* Smoke: every model x every layout has an ep_gather case, plus a skewed EP one; every model has
 * fp4_gemm smoke cases in both formats, gemm1 and gemm2, at tp8 and one more layout, M <= 64;
 * smoke is inside full. Routing variants and token counts from decode to prefill appear. */
Test(derive, smoke_and_full_tiers_cover_every_model_and_layout)
{
    moects_model *v;
    char err[512] = "";
    int n = moects__models_load_dir(MODELS, &v, err, sizeof err);
    cr_assert_eq(n, 23, "%s", err);
    for (int i = 0; i < n; i++) {
        moects_case_list l = {0};
        cr_assert_eq(moects__derive_cases(&v[i], &l), 0);
        const char *layouts[11];
        int nl = 0;
        static const int tps[] = {1, 2, 4, 8, 16}, eps[] = {2, 4, 8, 16, 32, 64};
        char names[11][8];
        for (int t = 0; t < 5; t++)
            if (v[i].moe_intermediate_size % tps[t] == 0) snprintf(names[nl], 8, "tp%d", tps[t]), layouts[nl] = names[nl], nl++;
        for (int e = 0; e < 6; e++)
            if (eps[e] <= v[i].routed_experts) snprintf(names[nl], 8, "ep%d", eps[e]), layouts[nl] = names[nl], nl++;
        for (int j = 0; j < nl; j++) {
            int smoke = 0, full_t = 0;
            for (size_t c = 0; c < l.n; c++) {
                const moects_case *x = &l.v[c];
                if (strcmp(x->layout, layouts[j])) continue;
                if (x->op == MOECTS_OP_EP_GATHER && (x->tiers & MOECTS_TIER_SMOKE)) smoke = 1;
                if (x->op == MOECTS_OP_EP_GATHER && x->routing == MOECTS_ROUTE_UNIFORM) full_t |= (x->T == 1) | (x->T == 2) << 1 | (x->T == 16) << 2 | (x->T == 64) << 3 | (x->T == 4096) << 4;
            }
            cr_expect(smoke, "%s/%s: no smoke ep_gather case", v[i].name, layouts[j]);
            cr_expect_eq(full_t, 31, "%s/%s: token counts 1, 2, 16, 64, 4096 missing", v[i].name, layouts[j]);
        }
        int skewed_smoke = 0, gemm_smoke[2][2] = {{0}}, tp8_smoke = 0, smoke_layouts = 0, moe_smoke = 0, fused_smoke = 0;
        char first_layout[16] = "";
        for (size_t c = 0; c < l.n; c++) {
            const moects_case *x = &l.v[c];
            /* a moe_gemm case whose local weights pass 2^31 codes is LARGE only (derive_moe.c) */
            int big = (x->op == MOECTS_OP_MOE_GEMM && (double)x->E * x->N * x->K > 2147483648.0) ||
                      (x->op == MOECTS_OP_FUSED_MOE && 3.0 * (double)x->E * x->inter * x->H > 2147483648.0);
            cr_expect(big ? x->tiers == MOECTS_TIER_LARGE : (x->tiers & MOECTS_TIER_FULL) != 0, "%s: tiers %u", x->id,
                      x->tiers);
            if (x->op == MOECTS_OP_FUSED_MOE) { /* the model's layer facts, whatever the layout */
                cr_expect_eq(x->activation, v[i].activation, "%s", x->id);
                cr_expect(x->act_limit == (v[i].has_activation_limit ? v[i].activation_limit : 0), "%s", x->id);
                cr_expect(x->act_alpha == (v[i].has_activation_alpha ? v[i].activation_alpha : 0), "%s", x->id);
                cr_expect_eq(x->has_bias, v[i].expert_bias, "%s", x->id);
                fused_smoke += (x->tiers & MOECTS_TIER_SMOKE) != 0;
                continue;
            }
            if (!(x->tiers & MOECTS_TIER_SMOKE)) continue;
            if (x->op == MOECTS_OP_MOE_GEMM) {
                moe_smoke++;
                cr_expect_eq(x->T, 16, "%s", x->id);
                continue;
            }
            if (x->op == MOECTS_OP_EP_GATHER) {
                if (x->routing == MOECTS_ROUTE_SKEWED && x->ep_size > 1) skewed_smoke = 1;
                cr_expect_leq(x->T, 64, "%s", x->id);
                continue;
            }
            cr_expect_leq(x->M, 64, "%s: smoke M", x->id);
            gemm_smoke[x->format == MOECTS_FP4_NVFP4][!strcmp(x->gemm, "gemm2")] = 1;
            if (!strcmp(x->layout, "tp8")) tp8_smoke = 1;
            if (strcmp(first_layout, x->layout)) smoke_layouts++, strcpy(first_layout, x->layout);
        }
        cr_expect(skewed_smoke, "%s: no smoke skewed EP case", v[i].name);
        cr_expect_eq(moe_smoke, 1, "%s: smoke moe_gemm cases", v[i].name);
        cr_expect_geq(fused_smoke, 2, "%s: smoke fused_moe cases", v[i].name);
        cr_expect(gemm_smoke[0][0] && gemm_smoke[0][1] && gemm_smoke[1][0] && gemm_smoke[1][1], "%s", v[i].name);
        cr_expect(tp8_smoke, "%s: no tp8 smoke GEMM", v[i].name);
        cr_expect_geq(smoke_layouts, 2, "%s: smoke GEMMs in one layout only", v[i].name);
        moects__case_list_free(&l);
    }
    free(v);
}

/* The same model derives the same ids in the same order; no id repeats. */
Test(derive, ids_stable_and_unique)
{
    moects_case_list a = derive("kimi-k3"), b = derive("kimi-k3");
    cr_assert_eq(a.n, b.n);
    for (size_t i = 0; i < a.n; i++) {
        cr_expect_str_eq(a.v[i].id, b.v[i].id);
        cr_expect_eq(memcmp(&a.v[i], &b.v[i], sizeof a.v[i]), 0, "%s", a.v[i].id);
        for (size_t j = 0; j < i; j++) cr_expect_str_neq(a.v[i].id, a.v[j].id);
    }
    moects__case_list_free(&a);
    moects__case_list_free(&b);
}

Test(shape, one_line_in_the_ops_terms)
{
    /* hand-built cases; the expected lines follow the field values set here */
    moects_case c;
    memset(&c, 0, sizeof c);
    c.op = MOECTS_OP_EP_GATHER;
    c.T = 128, c.H = 3584, c.k = 8, c.E_global = 384, c.ep_size = 8, c.ep_rank = 7;
    c.id_dtype = MOECTS_I64, c.out_dtype = MOECTS_BF16, c.routing = MOECTS_ROUTE_SKEWED;
    char buf[256];
    moects__case_shape(&c, buf, sizeof buf);
    cr_assert_str_eq(buf, "out [T 128, H 3584] bf16; topk 8 of E 384; EP rank 7 of 8; ids int64; routing skewed; "
                          "data exact");
    memset(&c, 0, sizeof c);
    c.op = MOECTS_OP_FP4_GEMM;
    c.M = 16, c.N = 4096, c.K = 7168, c.format = MOECTS_FP4_NVFP4, c.scale_layout = MOECTS_SCALES_SWIZZLED_128X4;
    c.out_dtype = MOECTS_F32, c.data = MOECTS_DATA_NAN;
    strcpy(c.gemm, "gemm2");
    moects__case_shape(&c, buf, sizeof buf);
    cr_assert_str_eq(buf, "D [M 16, N 4096] f32 = A [M, K 7168] x B [N, K]^T; NVFP4, 128x4 swizzled scales; gemm2; "
                          "data nan");
    memset(&c, 0, sizeof c);
    c.op = MOECTS_OP_MOE_GEMM;
    c.N = 720, c.K = 2880, c.E = 16, c.moe_format = MOECTS_MOE_W4A8, c.b_format = MOECTS_FP4_MXFP4;
    c.a_scale_block = 32, c.a_scale_f32 = 1, c.rows = MOECTS_ROWS_CONTIGUOUS, c.align = 128;
    c.T = 4096, c.k = 4, c.E_global = 128, c.out_dtype = MOECTS_BF16, c.data = MOECTS_DATA_EXACT;
    strcpy(c.gemm, "gemm1");
    moects__case_shape(&c, buf, sizeof buf);
    cr_assert_str_eq(buf, "D [rows, N 720] bf16 = A [rows, K 2880] x B [E 16, N, K]^T; w4a8 (B MXFP4), linear scales; "
                          "A scales per 1x32 FP32; contiguous rows, padded; rows from T 4096, topk 4 of E 128; gemm1; "
                          "data exact");
}

/* moe_gemm (derive_moe.c): every model has all four formats in all three row layouts, gemm1 and
 * gemm2, the tile windows on its grid layouts, and the token counts 1, 16, 128 and 4096. */
Test(derive, moe_gemm_covers_formats_row_layouts_and_windows)
{
    moects_model *v;
    char err[512] = "";
    int n = moects__models_load_dir(MODELS, &v, err, sizeof err);
    cr_assert_eq(n, 23, "%s", err);
    for (int i = 0; i < n; i++) {
        moects_case_list l = {0};
        cr_assert_eq(moects__derive_cases(&v[i], &l), 0);
        unsigned cells[5][4][2] = {{{0}}}, tokens = 0, windows = 0;
        for (size_t c = 0; c < l.n; c++) {
            const moects_case *x = &l.v[c];
            if (x->op != MOECTS_OP_MOE_GEMM) continue;
            cells[x->moe_format][x->rows][!strcmp(x->gemm, "gemm2")] = 1;
            tokens |= (x->T == 1) | (x->T == 16) << 1 | (x->T == 128) << 2 | (x->T == 4096) << 3;
            if (x->n_counts == 23) {
                windows = 1;
                cr_expect_eq(x->counts[1], 1);
                cr_expect_eq(x->counts[22], 257);
            }
            char want[256];
            snprintf(want, sizeof want, "moe_gemm.%s/%s/%s/%s/%s/", moects__moe_format_name(x->moe_format), v[i].name,
                     x->layout, moects__row_layout_name(x->rows), x->gemm);
            cr_expect_eq(strncmp(x->id, want, strlen(want)), 0, "%s: want %s...", x->id, want);
        }
        for (int f = 1; f <= 4; f++)
            for (int r = 1; r <= 3; r++)
                cr_expect(cells[f][r][0] && cells[f][r][1], "%s: format %d rows %d", v[i].name, f, r);
        cr_expect_eq(tokens, 15u, "%s", v[i].name);
        cr_expect(windows, "%s: no tile windows", v[i].name);
        moects__case_list_free(&l);
    }
    free(v);
}

/* The shapes follow vLLM's rules (derive.c): gpt-oss-120b (H 2880, I 2880, E 128, gated) at tp8 has
 * gemm1 N = 2 * 2880 / 8 = 720, K = 2880 over all 128 experts; at ep8 gemm2 N = 2880, K = 2880 over
 * 128 / 8 = 16 experts. */
Test(derive, moe_gemm_shapes_follow_the_layout)
{
    moects_case_list l = derive("gpt-oss-120b");
    const moects_case *a = NULL, *b = NULL;
    for (size_t i = 0; i < l.n; i++) {
        if (!strcmp(l.v[i].id, "moe_gemm.w4a16/gpt-oss-120b/tp8/contiguous/gemm1/t4096")) a = &l.v[i];
        if (!strcmp(l.v[i].id, "moe_gemm.w4a8/gpt-oss-120b/ep8/masked/gemm2/t16")) b = &l.v[i];
    }
    cr_assert(a && b);
    cr_expect(a->N == 720 && a->K == 2880 && a->E == 128 && a->align == 128 && a->rows == MOECTS_ROWS_CONTIGUOUS);
    cr_expect(a->T == 4096 && a->k == 4 && a->E_global == 128 && a->ep_size == 1 && a->n_counts == 0);
    cr_expect(b->N == 2880 && b->K == 2880 && b->E == 16 && b->ep_size == 8 && b->a_scale_block == 128);
    moects__case_list_free(&l);
}

/* fused_moe: gpt-oss-120b's layer as its config and the gpt-oss reference give it (hidden 2880, expert
 * width 2880, 128 experts, top-4, swiglu_limit 7, alpha 1.702, biases): at tp8 I = 2880 / 8 = 360; at
 * ep8 rank 0 holds 128 / 8 = 16 experts of the whole width, through an expert_map. */
Test(derive, fused_gpt_oss_layer)
{
    moects_case_list l = derive("gpt-oss-120b");
    const moects_case *c = find(&l, "fused_moe.bf16/gpt-oss-120b/tp8/t16");
    cr_assert_not_null(c);
    cr_expect_eq(c->op, MOECTS_OP_FUSED_MOE);
    cr_expect_eq(c->H, 2880);
    cr_expect_eq(c->inter, 360);
    cr_expect_eq(c->E, 128);
    cr_expect_eq(c->k, 4);
    cr_expect_eq(c->activation, MOECTS_ACT_GPT_OSS);
    cr_expect(c->act_limit == 7.0f && c->act_alpha == 1.702f);
    cr_expect_eq(c->has_bias, 1);
    cr_expect_eq(c->has_map, 0);
    c = find(&l, "fused_moe.mxfp4/gpt-oss-120b/ep8/t16");
    cr_assert_not_null(c);
    cr_expect_eq(c->inter, 2880);
    cr_expect_eq(c->E, 16);
    cr_expect_eq(c->has_map, 1);
    moects__case_list_free(&l);
}

/* fused_moe FP8 block-128 (W8A8): the models released so (DeepSeek-V3, V3.2, Kimi K2) get fp8_128
 * cases on their TP/EP grid (DeepSeek-V3 tp8: I = 2048 / 8 = 256, two blocks; H 7168, 56 blocks), a
 * BF16-released model none; and the three models' smoke cases hold every data mode (plain,
 * adversarial: a block scale of every FP32 class, nan: a NaN scale and code). */
Test(derive, fused_fp8_128_models)
{
    static const char *const FP8[] = {"deepseek-v3", "deepseek-v3.2", "kimi-k2"};
    int modes[3] = {0, 0, 0};
    for (int i = 0; i < 3; i++) {
        moects_case_list l = derive(FP8[i]);
        char id[128];
        snprintf(id, sizeof id, "fused_moe.fp8_128/%s/tp8/t16", FP8[i]);
        const moects_case *c = find(&l, id);
        cr_assert_not_null(c, "%s", id);
        cr_expect(c->layer_format == MOECTS_LAYER_FP8_128 && c->H == 7168 && c->inter == 256);
        for (size_t j = 0; j < l.n; j++) {
            const moects_case *x = &l.v[j];
            if (x->op == MOECTS_OP_FUSED_MOE && x->layer_format == MOECTS_LAYER_FP8_128 &&
                (x->tiers & MOECTS_TIER_SMOKE) && x->data <= MOECTS_DATA_NAN)
                modes[x->data]++;
        }
        moects__case_list_free(&l);
    }
    cr_expect(modes[MOECTS_DATA_EXACT] >= 1 && modes[MOECTS_DATA_ADVERSARIAL] >= 1 && modes[MOECTS_DATA_NAN] >= 1,
              "smoke fp8_128 data modes: %d %d %d", modes[0], modes[1], modes[2]);
    moects_case_list q = derive("qwen3-235b-a22b");
    for (size_t j = 0; j < q.n; j++) cr_expect(q.v[j].layer_format != MOECTS_LAYER_FP8_128, "%s", q.v[j].id);
    moects__case_list_free(&q);
}

/* NVFP4 for the models with a published NVFP4 checkpoint (Qwen3-235B tp8: H 4096, I = 1536 / 8 = 192,
 * a multiple of 16), W4A8 for the FP4-released ones (Kimi K3 tp8: latent H 3584, I = 3072 / 8 = 384; a
 * multiple of 32); none for a BF16-released model without one (Mixtral 8x7B); the smoke tier holds
 * every data mode of each format. */
Test(derive, fused_nvfp4_w4a8_models)
{
    static const char *const M[] = {"glm-4.5", "deepseek-v3", "qwen3-235b-a22b", "llama-4-scout",
                                    "deepseek-v4-flash", "deepseek-v4-pro", "kimi-k3"};
    int modes[2][3] = {{0}};
    for (size_t i = 0; i < sizeof M / sizeof *M; i++) {
        moects_case_list l = derive(M[i]);
        for (size_t j = 0; j < l.n; j++) {
            const moects_case *x = &l.v[j];
            const int f = x->layer_format == MOECTS_LAYER_NVFP4 ? 0 : x->layer_format == MOECTS_LAYER_W4A8 ? 1 : -1;
            if (x->op == MOECTS_OP_FUSED_MOE && f >= 0 && (x->tiers & MOECTS_TIER_SMOKE) && x->data <= MOECTS_DATA_NAN)
                modes[f][x->data]++;
        }
        moects__case_list_free(&l);
    }
    for (int f = 0; f < 2; f++)
        cr_expect(modes[f][0] >= 1 && modes[f][1] >= 1 && modes[f][2] >= 1, "format %d smoke modes %d %d %d", f,
                  modes[f][0], modes[f][1], modes[f][2]);
    moects_case_list q = derive("qwen3-235b-a22b");
    const moects_case *c = find(&q, "fused_moe.nvfp4/qwen3-235b-a22b/tp8/t16");
    cr_assert_not_null(c);
    cr_expect(c->H == 4096 && c->inter == 192);
    moects__case_list_free(&q);
    moects_case_list k = derive("kimi-k3");
    c = find(&k, "fused_moe.w4a8/kimi-k3/tp8/t16");
    cr_assert_not_null(c);
    cr_expect(c->H == 3584 && c->inter == 384);
    moects__case_list_free(&k);
    moects_case_list x = derive("mixtral-8x7b");
    for (size_t j = 0; j < x.n; j++)
        cr_expect(x.v[j].layer_format != MOECTS_LAYER_NVFP4 && x.v[j].layer_format != MOECTS_LAYER_W4A8, "%s", x.v[j].id);
    moects__case_list_free(&x);
}
