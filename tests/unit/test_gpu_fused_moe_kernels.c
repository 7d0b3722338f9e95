/* test_gpu_fused_moe_kernels.c: the CPU fused MoE layer kernels under test (gpu/cpu/fused_moe*.c),
 * found through the registry and run directly on small layers worked out by hand (values in the
 * comments): each honest kernel gives them, each mutant differs where its bug says, supports()
 * refuses what a recipe cannot do. A few recipes no registered kernel declares (weight=input, ...)
 * run through the generic kernel itself (gpu/cpu/fused_moe_internal.h).
 * Hand-friendly activations: for g > 16.7, exp(-g) < 2^-24, so 1 + exp(-g) rounds to 1 in FP32
 * and silu(g) = g exactly (gpt_oss: alpha * g' past that); silu(0) = 0. Weights are BF16 values
 * (exact), x is [1, 1] unless said otherwise, so a W13 row [p, q] gives g1 = p + q. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/fused_moe_internal.h"
#include "moects_exact.h"
#include "moects_registry.h"

static const moects_kernel *find(const char *name)
{
    size_t n;
    const moects_kernel *const *all = moects__builtin_kernels(&n);
    for (size_t i = 0; i < n; i++)
        if (strcmp(all[i]->name, name) == 0) return all[i];
    cr_assert_fail("kernel %s not registered", name);
    return NULL;
}

static uint16_t bf(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    cr_assert((u & 0xFFFFu) == 0, "%g is not a BF16 value", f);
    return (uint16_t)(u >> 16);
}

/* A small BF16 layer: at most 2 tokens, 2 slots, E 2, W13 [E][N1][H] and W2 [E][H][I] up to 1024
 * elements each. Starts with every weight 0, x = 1, out FP32. */
typedef struct {
    moects_fused_moe_shape s;
    moects_fused_moe_args a;
    uint16_t x[64], w13[1024], w2[1024];
    int32_t ids[4], map[8];
    float tw[4], b13[512], b2[64], gs[2], out[64];
} layer_case;

static void init(layer_case *c, int64_t T, int64_t k, int64_t H, int64_t I, int64_t E, moects_activation act)
{
    memset(c, 0, sizeof *c);
    c->s = (moects_fused_moe_shape){.T = T, .k = k, .H = H, .inter = I, .E = E, .E_global = E,
                                    .format = MOECTS_LAYER_BF16, .activation = act, .out_dtype = MOECTS_F32};
    for (int i = 0; i < 64; i++) c->x[i] = bf(1.0f);
    c->gs[0] = c->gs[1] = 1.0f;
    c->a = (moects_fused_moe_args){.x = c->x, .topk_ids = c->ids, .topk_weights = c->tw, .w13 = c->w13,
                                   .w2 = c->w2, .mid_global_scale = c->gs, .out = c->out};
}

/* W13 row n of expert e := [p, q] (H = 2); W2 element [e][h][i] := v. */
static void w13(layer_case *c, int e, int n, float p, float q)
{
    int64_t N1 = c->s.activation == MOECTS_ACT_RELU2 ? c->s.inter : 2 * c->s.inter;
    c->w13[(e * N1 + n) * 2] = bf(p), c->w13[(e * N1 + n) * 2 + 1] = bf(q);
}
static void w2(layer_case *c, int e, int h, int i, float v) { c->w2[(e * c->s.H + h) * c->s.inter + i] = bf(v); }

/* Runs the named kernel (out prefilled with NaN); asserts supports() and run(). */
static void run(const char *name, layer_case *c)
{
    for (int i = 0; i < 64; i++) c->out[i] = NAN;
    const moects_kernel *k = find(name);
    char why[200] = "";
    cr_assert_eq(k->op, MOECTS_OP_FUSED_MOE);
    cr_assert(k->supports(&c->s, why, sizeof why), "%s: %s", name, why);
    cr_assert_eq(k->run(&c->s, &c->a, NULL), 0, "%s", name);
}

/* The same through a kernel of any recipe (not registered). */
static void run_recipe(const char *recipe, layer_case *c)
{
    moects__fml_kernel k = MOECTS__FML_KERNEL_INIT(recipe, MOECTS__FML_BUG_NONE, 0);
    for (int i = 0; i < 64; i++) c->out[i] = NAN;
    char why[200] = "";
    cr_assert(moects__fml_supports(&k, &c->s, why, sizeof why), "%s: %s", recipe, why);
    cr_assert_eq(moects__fml_run(&k, &c->s, &c->a), 0, "%s", recipe);
}

static int refuses(const char *name, const moects_fused_moe_shape *s, const char *part)
{
    char why[200] = "";
    int ok = find(name)->supports(s, why, sizeof why);
    cr_expect(strstr(why, part), "%s: reason \"%s\" lacks \"%s\"", name, why, part);
    return !ok;
}

/* vLLM layout (gate rows [0, I), up [I, 2I)), T 1, k 2, H 2, I 1, E 2, SILU, w {0.5, 0.25}:
 * expert 0: g = 10 + 10 = 20, u = 1 + 1 = 2, silu(20) = 20: a = 40; W2 [[1], [0.5]]: y = [40, 20];
 * expert 1: g = 0 + 25 = 25, u = 3 + 0 = 3, a = 75; W2 [[2], [-1]]: y = [150, -75]. */
static void make_vllm(layer_case *c)
{
    init(c, 1, 2, 2, 1, 2, MOECTS_ACT_SILU);
    w13(c, 0, 0, 10, 10), w13(c, 0, 1, 1, 1);
    w13(c, 1, 0, 0, 25), w13(c, 1, 1, 3, 0);
    w2(c, 0, 0, 0, 1), w2(c, 0, 1, 0, 0.5f);
    w2(c, 1, 0, 0, 2), w2(c, 1, 1, 0, -1);
    c->ids[0] = 0, c->ids[1] = 1;
    c->tw[0] = 0.5f, c->tw[1] = 0.25f;
}

/* vllm: the weight in GEMM2's epilogue, BF16 per slot: [20, 10] + [37.5, -18.75] = [57.5, -8.75]. */
Test(fused_moe_kernels, vllm_two_experts)
{
    layer_case c;
    make_vllm(&c);
    run("cpu.fused_moe.vllm", &c);
    cr_expect(c.out[0] == 57.5f && c.out[1] == -8.75f, "%g %g", c.out[0], c.out[1]);
    cr_expect_str_eq(find("cpu.fused_moe.vllm")->recipe, "fused_moe.layer_v1");
    cr_expect_null(find("cpu.fused_moe.vllm")->bug);
}

/* Mutants on the vllm layer, each off the honest [57.5, -8.75]:
 * gate_up_swapped: expert 0's gate is the up row (g = 2): silu(2) = 1.76..., not 20;
 * act_on_up: act(u = 2) * g, the same silu(2) times 20;
 * weight_twice: slot 0 adds 20 * 0.5 = 10, slot 1 37.5 * 0.25 = 9.375: out[0] = 19.375. */
Test(fused_moe_kernels, mutants_on_the_vllm_layer)
{
    static const char *const names[] = {"cpu.mutant.fused_moe.gate_up_swapped", "cpu.mutant.fused_moe.act_on_up",
                                        "cpu.mutant.fused_moe.weight_twice"};
    for (int i = 0; i < 3; i++) {
        layer_case c;
        make_vllm(&c);
        run(names[i], &c);
        cr_expect(c.out[0] != 57.5f, "%s: %g", names[i], c.out[0]);
        cr_expect_str_eq(find(names[i])->recipe, "fused_moe.layer_v1");
        cr_expect(find(names[i])->bug && strlen(find(names[i])->bug) > 10);
    }
    layer_case c;
    make_vllm(&c);
    run("cpu.mutant.fused_moe.weight_twice", &c);
    cr_expect(c.out[0] == 19.375f, "%g", c.out[0]);
}

/* act_on_up and gate_up_swapped differ where a clamp bites: silu_clamp L 20, vllm, k 1, w 1, gate
 * row [-20, -20] -> g = -40, up row [15, 15] -> u = 30; W2 [[1], [0.5]].
 * honest: g' = -40, u' = 20: silu(-40) * 20 = -40 / (1 + e^40) * 20, about -3.4e-15 (negative, tiny);
 * gate_up_swapped (gate := 30 -> 20, up := -40 -> -20): silu(20) * -20 = -400: out [-400, -200];
 * act_on_up (g' = -40, u' = 20, then swapped): silu(20) * -40 = -800: out [-800, -400]. */
Test(fused_moe_kernels, act_on_up_is_not_gate_up_swapped_under_a_clamp)
{
    layer_case c;
    init(&c, 1, 1, 2, 1, 1, MOECTS_ACT_SILU_CLAMP);
    c.s.act_limit = 20.0f;
    w13(&c, 0, 0, -20, -20), w13(&c, 0, 1, 15, 15);
    w2(&c, 0, 0, 0, 1), w2(&c, 0, 1, 0, 0.5f);
    c.tw[0] = 1.0f;
    run("cpu.fused_moe.vllm", &c);
    cr_expect(c.out[0] < 0.0f && c.out[0] > -1e-12f, "%g", c.out[0]);
    run("cpu.mutant.fused_moe.gate_up_swapped", &c);
    cr_expect(c.out[0] == -400.0f && c.out[1] == -200.0f, "%g %g", c.out[0], c.out[1]);
    run("cpu.mutant.fused_moe.act_on_up", &c);
    cr_expect(c.out[0] == -800.0f && c.out[1] == -400.0f, "%g %g", c.out[0], c.out[1]);
}

/* EP: E_global 4, this rank holds global experts 2, 3 as local 0, 1 (map [-1, -1, 0, 1]); ids [2, 0]:
 * slot 0 is local expert 0 with w 0.5 ([40, 20] * 0.5 = [20, 10]), slot 1 (global 0) is elsewhere.
 * The mutant skips id 2 (>= E) and takes id 0 as local 0 with slot 1's w 0.25: [10, 5]. */
Test(fused_moe_kernels, expert_map)
{
    layer_case c;
    make_vllm(&c);
    c.s.has_expert_map = 1, c.s.E_global = 4;
    c.map[0] = c.map[1] = -1, c.map[2] = 0, c.map[3] = 1;
    c.a.expert_map = c.map;
    c.ids[0] = 2, c.ids[1] = 0;
    run("cpu.fused_moe.vllm", &c);
    cr_expect(c.out[0] == 20.0f && c.out[1] == 10.0f, "%g %g", c.out[0], c.out[1]);
    run("cpu.mutant.fused_moe.expert_map_ignored", &c);
    cr_expect(c.out[0] == 10.0f && c.out[1] == 5.0f, "%g %g", c.out[0], c.out[1]);
    /* no valid slot (ids -1 and global 1, not here): +0 */
    c.ids[0] = -1, c.ids[1] = 1;
    run("cpu.fused_moe.vllm", &c);
    cr_expect(c.out[0] == 0.0f && !signbit(c.out[0]) && c.out[1] == 0.0f && !signbit(c.out[1]));
    /* a map entry past E is a runtime error */
    c.map[1] = 2;
    cr_expect_neq(find("cpu.fused_moe.vllm")->run(&c.s, &c.a, NULL), 0);
}

/* cutlass: W13 [up, gate] (up rows 0-1, gate rows 2-3), g1 and act FP32, FP8 per token (scale
 * amax / 448), the weight in the combine (fmaf), w {0.5, 0.25}. T 1, k 2, H 2, I 2.
 * expert 0: u = [1 + 1, 0.5 + 0.5] = [2, 1], g = [14 + 14, 13.5 + 13.5] = [28, 27]: a = [56, 27];
 *   amax 56, s = 56 / 448 = 0.125: 56 / s = 448, 27 / s = 216 -> E4M3 (quantum 16 in [128, 256))
 *   a tie between 208 and 224: 224, so m = [56, 28]; W2 [[1, 1], [0.5, 1]]: y = [84, 56].
 * expert 1: u = [1, 0], g = [42, 0] (silu(0) = 0): a = [42, 0], s = 42 / 448 = 0.09375: m = [42, 0];
 *   W2 [[2, 0], [-1, 0]]: y = [84, -42].
 * out = [84 * 0.5 + 84 * 0.25, 56 * 0.5 - 42 * 0.25] = [63, 17.5] (27 unquantized: 17). */
Test(fused_moe_kernels, cutlass_up_gate_fp8_token)
{
    layer_case c;
    init(&c, 1, 2, 2, 2, 2, MOECTS_ACT_SILU);
    w13(&c, 0, 0, 1, 1), w13(&c, 0, 1, 0.5f, 0.5f), w13(&c, 0, 2, 14, 14), w13(&c, 0, 3, 13.5f, 13.5f);
    w13(&c, 1, 0, 1, 0), w13(&c, 1, 2, 21, 21);
    w2(&c, 0, 0, 0, 1), w2(&c, 0, 0, 1, 1), w2(&c, 0, 1, 0, 0.5f), w2(&c, 0, 1, 1, 1);
    w2(&c, 1, 0, 0, 2), w2(&c, 1, 1, 0, -1);
    c.ids[0] = 0, c.ids[1] = 1;
    c.tw[0] = 0.5f, c.tw[1] = 0.25f;
    run("cpu.fused_moe.cutlass", &c);
    cr_expect(c.out[0] == 63.0f && c.out[1] == 17.5f, "%g %g", c.out[0], c.out[1]);
}

/* gpt_oss: W13 interleaved (row 2i gate, 2i+1 up), L 20, alpha 1.702, the weight rounded to BF16
 * first: 0.3f -> 0.30078125 (77 / 256). T 1, k 1, H 2, I 2, E 1.
 * column 0: g = 40 -> g' = 20, u = 25 -> u' = 20: glu = 20 (alpha g' = 34), a = 21 * 20 = 420;
 * column 1: g = 16 (alpha g' = 27.2), u = -3: a = -2 * 16 = -32.
 * W2 [[1, 1], [0.5, 2]]: [388, 146]; times w: [116.703125, 43.9140625]; BF16: [116.5, 44]
 * (with w = 0.3f itself: 43.8 -> 43.75). The mutant without + 1: a = [400, -48]: [352, 104] -> w ->
 * [105.875, 31.28125] -> BF16 [106, 31.25]. */
Test(fused_moe_kernels, gpt_oss_interleave1_and_its_mutant)
{
    layer_case c;
    init(&c, 1, 1, 2, 2, 1, MOECTS_ACT_GPT_OSS);
    c.s.act_limit = 20.0f, c.s.act_alpha = 1.702f;
    w13(&c, 0, 0, 20, 20), w13(&c, 0, 1, 12.5f, 12.5f), w13(&c, 0, 2, 8, 8), w13(&c, 0, 3, -1.5f, -1.5f);
    w2(&c, 0, 0, 0, 1), w2(&c, 0, 0, 1, 1), w2(&c, 0, 1, 0, 0.5f), w2(&c, 0, 1, 1, 2);
    c.tw[0] = 0.3f;
    run("cpu.fused_moe.gpt_oss", &c);
    cr_expect(c.out[0] == 116.5f && c.out[1] == 44.0f, "%g %g", c.out[0], c.out[1]);
    run("cpu.mutant.fused_moe.gpt_oss_no_plus1", &c);
    cr_expect(c.out[0] == 106.0f && c.out[1] == 31.25f, "%g %g", c.out[0], c.out[1]);
}

/* deepgemm: W13 in granules of 8 rows (column i: gate 16 (i/8) + i%8, up that + 8), g1 BF16, the
 * weight after the activation, FP8 per 128 columns, FP32 slots. T 1, k 2, H 2, I 128, E 2.
 * expert 0 (w 0.5): column 0 gate row 0 = 28, up row 8 = 2: a = 56 * 0.5 = 28; column 9 gate row 17
 *   = 27, up row 25 = 1: a = 27 * 0.5 = 13.5; every other column 0. s = 28 / 448 = 1 / 16:
 *   m0 = 28, 13.5 * 16 = 216 -> 224 (tie, even): m9 = 14. W2 row 0 (col 0: 1, col 9: 1) = 42,
 *   row 1 (col 0: -0.5, col 9: 2) = 14.
 * expert 1 (w 0.25): column 8 gate row 16 = 42, up row 24 = 4: a = 168 * 0.25 = 42, s = 0.09375,
 *   m8 = 42; W2 row 0 col 8: 1 -> 42, row 1 col 8: 0.5 -> 21.
 * out = [42 + 42, 14 + 21] = [84, 35]. The granule-4 mutant reads gates from rows 8q..8q+3 and ups
 * from 8q+4..8q+7: every nonzero row (0, 8, 16, 17, 24, 25) is read as a gate, every up is 0: [0, 0]. */
static void make_deepgemm(layer_case *c)
{
    init(c, 1, 2, 2, 128, 2, MOECTS_ACT_SILU);
    w13(c, 0, 0, 14, 14), w13(c, 0, 8, 1, 1), w13(c, 0, 17, 13.5f, 13.5f), w13(c, 0, 25, 0.5f, 0.5f);
    w13(c, 1, 16, 21, 21), w13(c, 1, 24, 2, 2);
    w2(c, 0, 0, 0, 1), w2(c, 0, 0, 9, 1), w2(c, 0, 1, 0, -0.5f), w2(c, 0, 1, 9, 2);
    w2(c, 1, 0, 8, 1), w2(c, 1, 1, 8, 0.5f);
    c->ids[0] = 0, c->ids[1] = 1;
    c->tw[0] = 0.5f, c->tw[1] = 0.25f;
}

Test(fused_moe_kernels, deepgemm_interleave8_fp8_128_and_granule_mutant)
{
    layer_case c;
    make_deepgemm(&c);
    run("cpu.fused_moe.deepgemm", &c);
    cr_expect(c.out[0] == 84.0f && c.out[1] == 35.0f, "%g %g", c.out[0], c.out[1]);
    run("cpu.mutant.fused_moe.interleave_granule", &c);
    cr_expect(c.out[0] == 0.0f && c.out[1] == 0.0f, "%g %g", c.out[0], c.out[1]);
}

/* mxfp8: [gate, up], I 32, UE8M0 scale per 32: column 0 g = 20, u = 2: a = 40; column 1 g = 27,
 * u = 1: a = 27. amax 40: 448 * 2^-4 = 28 < 40 <= 448 * 2^-3: s = 0.125; 40 / s = 320 (quantum 32
 * in [256, 448]: exact), 27 / s = 216 -> 224: m = [40, 28]. W2 [[1, 1], [0, 1]]: [68, 28]; w 0.5:
 * [34, 14]. */
Test(fused_moe_kernels, mxfp8_ue8m0_per_32)
{
    layer_case c;
    init(&c, 1, 1, 2, 32, 1, MOECTS_ACT_SILU);
    w13(&c, 0, 0, 10, 10), w13(&c, 0, 32, 1, 1), w13(&c, 0, 1, 13.5f, 13.5f), w13(&c, 0, 33, 0.5f, 0.5f);
    w2(&c, 0, 0, 0, 1), w2(&c, 0, 0, 1, 1), w2(&c, 0, 1, 1, 1);
    c.tw[0] = 0.5f;
    run("cpu.fused_moe.mxfp8", &c);
    cr_expect(c.out[0] == 34.0f && c.out[1] == 14.0f, "%g %g", c.out[0], c.out[1]);
}

/* combine_bf16, vllm recipe, w 1: expert 0 g = 32, u = 8: a = 256, W2 [[1], [1]]: y = [256, 256];
 * expert 1 g = 20, u = 0.5: a = 10, W2 [[0.125], [0.25]]: y = [1.25, 2.5]. FP32 slots: [257.25,
 * 258.5]; a BF16 running sum (quantum 2 at 256): [258, 258]. */
Test(fused_moe_kernels, combine_bf16_mutant)
{
    layer_case c;
    init(&c, 1, 2, 2, 1, 2, MOECTS_ACT_SILU);
    w13(&c, 0, 0, 16, 16), w13(&c, 0, 1, 4, 4), w13(&c, 1, 0, 10, 10), w13(&c, 1, 1, 0.5f, 0);
    w2(&c, 0, 0, 0, 1), w2(&c, 0, 1, 0, 1), w2(&c, 1, 0, 0, 0.125f), w2(&c, 1, 1, 0, 0.25f);
    c.ids[0] = 0, c.ids[1] = 1;
    c.tw[0] = c.tw[1] = 1.0f;
    run("cpu.fused_moe.vllm", &c);
    cr_expect(c.out[0] == 257.25f && c.out[1] == 258.5f, "%g %g", c.out[0], c.out[1]);
    run("cpu.mutant.fused_moe.combine_bf16", &c);
    cr_expect(c.out[0] == 258.0f && c.out[1] == 258.0f, "%g %g", c.out[0], c.out[1]);
}

/* MXFP4 weights (E2M1 codes two per byte, element 2j in the low nibble; UE8M0 127 = 1, 0xFF NaN),
 * vllm, T 1, k 1, H 32, I 32, x = [1, 2, 0, ...], w 0.5, BF16 out.
 * W13 row 0 (gate of column 0): byte 0x27 = [6, 1], scale 129 (4): g = 24 + 8 = 32 (nibbles read
 * swapped: 52); row 32 (up of column 0): byte 0x01 = [0.5, 0]: u = 0.5; a = 16, other columns 0.
 * W2 row 0: 0x04 = [2], scale 126 (0.5): y = 16; row 1: 0x0D = [-3]: -48; row 2 scale 0xFF: NaN;
 * the rest 0. out = [8, -24, NaN, +0...] = BF16 0x4100, 0xC1C0, NaN, 0x0000. */
Test(fused_moe_kernels, mxfp4_weights)
{
    layer_case c;
    init(&c, 1, 1, 32, 32, 1, MOECTS_ACT_SILU);
    static uint8_t c13[64 * 16], s13[64], c2[32 * 16], s2[32];
    memset(c13, 0, sizeof c13), memset(c2, 0, sizeof c2);
    memset(s13, 127, sizeof s13), memset(s2, 127, sizeof s2);
    memset(c.x, 0, sizeof c.x);
    c.x[0] = bf(1), c.x[1] = bf(2);
    c13[0] = 0x27, s13[0] = 129, c13[32 * 16] = 0x01;
    c2[0] = 0x04, s2[0] = 126, c2[16] = 0x0D, s2[2] = 0xFF;
    c.s.format = MOECTS_LAYER_MXFP4, c.s.out_dtype = MOECTS_BF16;
    c.a.w13 = c13, c.a.w13_scale = s13, c.a.w2 = c2, c.a.w2_scale = s2;
    c.tw[0] = 0.5f;
    uint16_t out[32];
    memset(out, 0xAB, sizeof out);
    c.a.out = out;
    const moects_kernel *k = find("cpu.fused_moe.vllm");
    cr_assert(k->supports(&c.s, NULL, 0));
    cr_assert_eq(k->run(&c.s, &c.a, NULL), 0);
    cr_expect(out[0] == 0x4100 && out[1] == 0xC1C0, "%04x %04x", out[0], out[1]);
    cr_expect((out[2] & 0x7FFF) > 0x7F80, "%04x", out[2]);
    for (int h = 3; h < 32; h++) cr_expect_eq(out[h], 0x0000, "out[%d] = %04x", h, out[h]);
}

/* The router weight on the input (Llama 4, top-1; not a registered kernel's recipe): x = [3, 1],
 * w = 0.3f: h = [bf16(0.90000004), bf16(0.3f)] = [0.8984375, 0.30078125]. Gate row [40, 0]: g =
 * 35.9375 -> BF16 36; up row [0, 4]: u = 1.203125; a = 43.3125 -> BF16 43.25 (quantum 0.25).
 * W2 [[1], [2]]: out = [43.25, 86.5]. */
Test(fused_moe_kernels, weight_on_the_input)
{
    layer_case c;
    init(&c, 1, 1, 2, 1, 1, MOECTS_ACT_SILU);
    c.x[0] = bf(3);
    w13(&c, 0, 0, 40, 0), w13(&c, 0, 1, 0, 4);
    w2(&c, 0, 0, 0, 1), w2(&c, 0, 1, 0, 2);
    c.tw[0] = 0.3f;
    run_recipe("fused_moe.layer_v1(weight=input)", &c);
    cr_expect(c.out[0] == 43.25f && c.out[1] == 86.5f, "%g %g", c.out[0], c.out[1]);
}

/* relu2 (no gate: W13 holds I rows), vllm, x = [2, 1], I 2: rows [1, 1] -> 3 -> 9 and [-1, -1] ->
 * -3 -> 0; W2 [[1, 1], [2, 5]]: [9, 18]; w 0.5: [4.5, 9]. */
Test(fused_moe_kernels, relu2_without_gate)
{
    layer_case c;
    init(&c, 1, 1, 2, 2, 1, MOECTS_ACT_RELU2);
    c.x[0] = bf(2);
    w13(&c, 0, 0, 1, 1), w13(&c, 0, 1, -1, -1);
    w2(&c, 0, 0, 0, 1), w2(&c, 0, 0, 1, 1), w2(&c, 0, 1, 0, 2), w2(&c, 0, 1, 1, 5);
    c.tw[0] = 0.5f;
    run("cpu.fused_moe.vllm", &c);
    cr_expect(c.out[0] == 4.5f && c.out[1] == 9.0f, "%g %g", c.out[0], c.out[1]);
}

/* The vllm layer under the other gated activations: gelu_tanh and gelu_erf of g = 20 and 25 are g
 * itself (tanh, erf round to 1): [57.5, -8.75] again. silu_clamp L 20 with expert 1's up row
 * [30, 0]: expert 1 g = 25 -> 20, u = 30 -> 20: a = 400, y = [800, -400] * 0.25 = [200, -100];
 * out = [20 + 200, 10 - 100] = [220, -90]. */
Test(fused_moe_kernels, gelu_and_clamped_silu)
{
    static const moects_activation acts[] = {MOECTS_ACT_GELU_TANH, MOECTS_ACT_GELU_ERF};
    for (int i = 0; i < 2; i++) {
        layer_case c;
        make_vllm(&c);
        c.s.activation = acts[i];
        run("cpu.fused_moe.vllm", &c);
        cr_expect(c.out[0] == 57.5f && c.out[1] == -8.75f, "act %d: %g %g", (int)acts[i], c.out[0], c.out[1]);
    }
    layer_case c;
    make_vllm(&c);
    c.s.activation = MOECTS_ACT_SILU_CLAMP, c.s.act_limit = 20.0f;
    w13(&c, 1, 1, 30, 0);
    run("cpu.fused_moe.vllm", &c);
    cr_expect(c.out[0] == 220.0f && c.out[1] == -90.0f, "%g %g", c.out[0], c.out[1]);
}

/* situ (Kimi K3: a 4, L 25), vLLM layout, T 1, k 1, H 2, I 2, E 1, w 1, W2 = identity:
 * column 0: gate row [32, 32] -> g = 64, up row [250, 250] -> u = 500. tanh(64 * 0.25) = tanh(16) is
 *   1 - 2.5e-14, FP32 1; exp(-64) < 2^-24, so 1 + e = 1: gate = 4. fl(1 / 25) = 0.039999999105...,
 *   500 times it = 19.99999955 -> 20 (FP32 step 2^-19 there), tanh(20) rounds to 1: up' = 25. a = 100.
 * column 1: g = -64: gate = -4 / (1 + e^64), about -6.4e-28; u = 500 -> 25: a about -1.6e-26
 *   (negative, tiny; BF16 per slot keeps it so).
 * Without L (0): up unchanged: a = [2000, about -3.2e-25]. act_on_up (up squashed to 25, then the
 * roles swapped): gate(25) * 64 = 4 tanh(6.25) / (1 + e^-25) * 64, tanh(6.25) = 1 - 7.45e-6:
 * 255.998, BF16 256; column 1: gate(25) * -64 -> -256. The bounded kernel (libm's tanh, exp) gives
 * the same saturated values. */
static void make_situ(layer_case *c)
{
    init(c, 1, 1, 2, 2, 1, MOECTS_ACT_SITU);
    c->s.act_alpha = 4.0f, c->s.act_limit = 25.0f;
    w13(c, 0, 0, 32, 32), w13(c, 0, 1, -32, -32), w13(c, 0, 2, 250, 250), w13(c, 0, 3, 250, 250);
    w2(c, 0, 0, 0, 1), w2(c, 0, 1, 1, 1);
    c->tw[0] = 1.0f;
}

Test(fused_moe_kernels, situ)
{
    static const char *const honest[] = {"cpu.fused_moe.vllm", "cpu.fused_moe.fast"};
    layer_case c;
    for (int i = 0; i < 2; i++) {
        make_situ(&c);
        run(honest[i], &c);
        cr_expect(c.out[0] == 100.0f && c.out[1] < 0.0f && c.out[1] > -1e-25f, "%s: %g %g", honest[i], c.out[0],
                  c.out[1]);
        c.s.act_limit = 0.0f;
        run(honest[i], &c);
        cr_expect(c.out[0] == 2000.0f && c.out[1] < 0.0f && c.out[1] > -1e-24f, "%s L 0: %g %g", honest[i],
                  c.out[0], c.out[1]);
    }
    make_situ(&c);
    run("cpu.mutant.fused_moe.act_on_up", &c);
    cr_expect(c.out[0] == 256.0f && c.out[1] == -256.0f, "%g %g", c.out[0], c.out[1]);
    run("cpu.mutant.fused_moe.gate_up_swapped", &c);
    cr_expect(c.out[0] != 100.0f, "%g", c.out[0]);
}

/* Biases on the vllm layer: b13 of expert 0 [5, 0.5]: g = 25, u = 2.5, a = 62.5; b2 of expert 0
 * [0.5, -0.25]: y = [62.5 + 0.5, 31.25 - 0.25] = [63, 31], times 0.5: [31.5, 15.5]; expert 1 as
 * before [37.5, -18.75]: out = [69, -3.25]. A second token, x = [2, 2], ids [1, -1]: expert 1
 * g = 50, u = 6, a = 300, y = [600, -300] * 0.25: [150, -75]. */
Test(fused_moe_kernels, biases_and_two_tokens)
{
    layer_case c;
    make_vllm(&c);
    c.s.T = 2, c.s.has_bias = 1;
    c.a.b13 = c.b13, c.a.b2 = c.b2;
    c.b13[0] = 5, c.b13[1] = 0.5f, c.b2[0] = 0.5f, c.b2[1] = -0.25f;
    c.x[2] = c.x[3] = bf(2);
    c.ids[2] = 1, c.ids[3] = -1;
    c.tw[2] = 0.25f, c.tw[3] = 7.0f;
    run("cpu.fused_moe.vllm", &c);
    cr_expect(c.out[0] == 69.0f && c.out[1] == -3.25f, "%g %g", c.out[0], c.out[1]);
    cr_expect(c.out[2] == 150.0f && c.out[3] == -75.0f, "%g %g", c.out[2], c.out[3]);
}

/* What a recipe cannot do on a shape, and what a mutant's bug cannot show on, is refused. */
Test(fused_moe_kernels, supports_refuses)
{
    layer_case c;
    init(&c, 1, 2, 2, 64, 2, MOECTS_ACT_RELU2);
    cr_expect(find("cpu.fused_moe.vllm")->supports(&c.s, NULL, 0));
    cr_expect(refuses("cpu.fused_moe.cutlass", &c.s, "relu2"));
    cr_expect(refuses("cpu.mutant.fused_moe.gate_up_swapped", &c.s, "gated"));
    c.s.activation = MOECTS_ACT_SILU;
    cr_expect(refuses("cpu.fused_moe.deepgemm", &c.s, "fp8_128"));
    cr_expect(refuses("cpu.mutant.fused_moe.gpt_oss_no_plus1", &c.s, "gpt_oss"));
    cr_expect(refuses("cpu.mutant.fused_moe.expert_map_ignored", &c.s, "EP"));
    c.s.inter = 16;
    cr_expect(refuses("cpu.fused_moe.mxfp8", &c.s, "mxfp8"));
    c.s.format = MOECTS_LAYER_MXFP4, c.s.inter = 32, c.s.H = 16;
    cr_expect(refuses("cpu.fused_moe.vllm", &c.s, "MXFP4"));
    c.s.format = (moects_layer_format)6; /* past W4A8 */
    cr_expect(refuses("cpu.fused_moe.vllm", &c.s, "format"));
    c.s.format = MOECTS_LAYER_W4A8, c.s.H = 64, c.s.inter = 32;
    cr_expect(refuses("cpu.fused_moe.vllm", &c.s, "mid=fp8_128 or mxfp8"), "W4A8 reads FP8 inputs");
    cr_expect(find("cpu.fused_moe.w4a8")->supports(&c.s, NULL, 0));
    cr_expect(refuses("cpu.fused_moe.w4a8", &(moects_fused_moe_shape){.T = 1, .k = 1, .H = 64, .inter = 32, .E = 1,
                                                                      .E_global = 1, .format = MOECTS_LAYER_BF16,
                                                                      .activation = MOECTS_ACT_SILU, .out_dtype = MOECTS_BF16},
                      "scope"));
    c.s.format = MOECTS_LAYER_NVFP4, c.s.H = 16, c.s.inter = 24;
    cr_expect(refuses("cpu.fused_moe.vllm", &c.s, "NVFP4"));
    c.s.inter = 16;
    cr_expect(find("cpu.mutant.fused_moe.nvfp4_alpha_twice")->supports(&c.s, NULL, 0));
    cr_expect(refuses("cpu.fused_moe.situ_native", &c.s, "situ"));
    c.s.H = 16;
    c.s.format = MOECTS_LAYER_BF16, c.s.inter = 4, c.s.activation = MOECTS_ACT_SITU, c.s.act_alpha = 4.0f;
    cr_expect(find("cpu.fused_moe.vllm")->supports(&c.s, NULL, 0), "situ, L 0 (none)");
    c.s.act_alpha = 0.0f;
    cr_expect(refuses("cpu.fused_moe.vllm", &c.s, "0 < a"));
    c.s.act_alpha = 4.0f, c.s.act_limit = INFINITY;
    cr_expect(refuses("cpu.fused_moe.vllm", &c.s, "linear_beta"));
    c.s.activation = MOECTS_ACT_SILU, c.s.act_limit = 0.0f;
    static const char *const recipes[][2] = {{"fused_moe.layer_v1(weight=input)", "top-1"},
                                             {"fused_moe.layer_v1(combine=f32_any)", "f32_any"},
                                             {"fused_moe.layer_v1(w13=interleave8)", "interleave8"},
                                             {"fused_moe.layer_v1(w13=bogus)", "w13"},
                                             {"fused_moe.layer_v2", "layer_v1"}};
    for (int i = 0; i < 5; i++) {
        moects__fml_kernel k = MOECTS__FML_KERNEL_INIT(recipes[i][0], MOECTS__FML_BUG_NONE, 0);
        char why[200] = "";
        cr_expect(!moects__fml_supports(&k, &c.s, why, sizeof why), "%s", recipes[i][0]);
        cr_expect(strstr(why, recipes[i][1]), "%s: \"%s\"", recipes[i][0], why);
        cr_expect_neq(moects__fml_run(&k, &c.s, &c.a), 0);
    }
}

/* Every registered fused_moe kernel: a recipe that parses; the CPU ones named cpu.*, the honest ones
 * without a bug (the CUDA layer kernels, in a CUDA build, only parse). */
Test(fused_moe_kernels, registry)
{
    size_t n, honest = 0, mutants = 0;
    const moects_kernel *const *all = moects__builtin_kernels(&n);
    for (size_t i = 0; i < n; i++) {
        if (all[i]->op != MOECTS_OP_FUSED_MOE) continue;
        moects_layer_recipe r;
        char err[160];
        cr_expect_eq(moects__layer_recipe_parse(all[i]->recipe, &r, err, sizeof err), 0, "%s: %s", all[i]->name, err);
        if (all[i]->device != MOECTS_DEVICE_CPU) continue;
        cr_expect_eq(all[i]->abi_version, MOECTS_KERNEL_ABI_VERSION);
        const char *prefix = all[i]->bug ? "cpu.mutant.fused_moe." : "cpu.fused_moe.";
        cr_expect(!strncmp(all[i]->name, prefix, strlen(prefix)), "%s", all[i]->name);
        *(all[i]->bug ? &mutants : &honest) += 1;
    }
    cr_expect(honest >= 4 && mutants == 13, "%zu honest, %zu mutants", honest, mutants);
}

/* GEMM2 in a BF16 accumulator (cpu.mutant.fused_moe.gemm2_bf16_acc) against FP32 (cpu.fused_moe.fast):
 * T 1, k 1, H 2, I 5, E 1, silu, w 1. Gate rows [16, 16]: g = 32, silu(32) = 32 (exp(-32) < 2^-24);
 * up rows [2^-6, 2^-6]: u = 2^-5; a = 32 * 2^-5 = 1 in every column (BF16 exact). W2 row 0 [1, 2^-9,
 * 2^-9, 2^-9, 2^-9]: FP32 sums 1 + 4 * 2^-9 = 1 + 2^-7 exactly (a BF16 value, so the slot keeps it);
 * a BF16 running sum adds 2^-9, a quarter of BF16's ULP at 1 (2^-7), and rounds back to 1 each time:
 * 1. Row 1 all 0: 0 either way. */
Test(fused_moe_kernels, gemm2_bf16_acc_loses_what_fp32_keeps)
{
    layer_case c;
    init(&c, 1, 1, 2, 5, 1, MOECTS_ACT_SILU);
    for (int i = 0; i < 5; i++) w13(&c, 0, i, 16, 16), w13(&c, 0, 5 + i, 0x1p-6f, 0x1p-6f);
    w2(&c, 0, 0, 0, 1);
    for (int i = 1; i < 5; i++) w2(&c, 0, 0, i, 0x1p-9f);
    c.ids[0] = 0, c.tw[0] = 1.0f;
    run("cpu.fused_moe.fast", &c);
    cr_expect(c.out[0] == 1.0f + 0x1p-7f && c.out[1] == 0.0f, "fast: %a %g", c.out[0], c.out[1]);
    run("cpu.mutant.fused_moe.gemm2_bf16_acc", &c);
    cr_expect(c.out[0] == 1.0f && c.out[1] == 0.0f, "gemm2_bf16_acc: %a %g", c.out[0], c.out[1]);
    cr_expect_eq(find("cpu.mutant.fused_moe.gemm2_bf16_acc")->acc.bits, 24);
    const double a[5] = {1, 0x1p-9, 0x1p-9, 0x1p-9, 0x1p-9}, one[5] = {1, 1, 1, 1, 1};
    cr_expect_eq(moects__fml_dot_bf16(a, one, 5), 1.0f);
}

/* The exactly rounded dot product: cancellation the double sum loses (2^60 + 1 - 2^60 = 1), an
 * exact tie (1 + 2^-24: to even, 1), a tie broken by a term the double sum drops (+ 2^-80: up),
 * NaN and Inf. */
Test(fused_moe_kernels, dot_hard_cases)
{
    const double one[3] = {1, 1, 1};
    const double lost[3] = {0x1p60, 1, -0x1p60}, tie[3] = {1, 0x1p-24, 0}, past[3] = {1, 0x1p-24, 0x1p-80};
    cr_expect_eq(moects__fml_dot(lost, one, 3), 1.0f);
    cr_expect_eq(moects__fml_dot(tie, one, 3), 1.0f);
    cr_expect_eq(moects__fml_dot(past, one, 3), 1.0f + 0x1p-23f);
    const double nan[2] = {NAN, 1}, inf[2] = {INFINITY, 1}, zero_inf[2] = {0, INFINITY};
    cr_expect(isnan(moects__fml_dot(nan, one, 2)));
    cr_expect_eq(moects__fml_dot(inf, one, 2), INFINITY);
    cr_expect(isnan(moects__fml_dot(zero_inf, inf, 2)));
    cr_expect(moects__fml_dot(tie, one, 0) == 0.0f && !signbit(moects__fml_dot(tie, one, 0)));
}

/* The double-sum shortcut agrees with moects_xsum on random BF16 dot products of length 7168, half
 * of them built to cancel to a few terms (many near FP32 rounding boundaries, xsum's fallback). */
Test(fused_moe_kernels, dot_agrees_with_xsum)
{
    enum { K = 7168 };
    static double a[K], b[K];
    uint64_t st = 12345;
    for (int trial = 0; trial < 400; trial++) {
        for (int k = 0; k < K; k++) {
            st = st * 6364136223846793005ull + 1442695040888963407ull;
            uint16_t bits = (uint16_t)(((st >> 33) & 0x807F) | (0x3C00 + ((st >> 40) & 0x7) * 0x80));
            uint32_t u = (uint32_t)bits << 16;
            float f;
            memcpy(&f, &u, sizeof f);
            a[k] = f;
            b[k] = (double)((int)((st >> 50) % 7) - 3);
        }
        if (trial % 2) /* pairs that cancel: a[k] b[k] + a[k+1] b[k+1] = 0, but for the last few */
            for (int k = 0; k + 1 < K - 4; k += 2) a[k + 1] = a[k], b[k + 1] = -b[k];
        moects_xsum x;
        moects__xsum_init(&x);
        for (int k = 0; k < K; k++) moects__xsum_add_product(&x, a[k], b[k]);
        float want = moects__xsum_round_f32(&x), got = moects__fml_dot(a, b, K);
        cr_assert(memcmp(&want, &got, sizeof got) == 0, "trial %d: %a, xsum %a", trial, got, want);
    }
}

/* W8A8 block FP8 (FP8_128 weights) by hand: T 1, top-1 (w 1), H 256, I 128, relu2, x = 1 (every x /
 * fl(1 / 448) rounds to the E4M3 value 448), every weight code 0x38 (1.0): each 128-block dot is
 * 57344 exactly and an element is its scale chain, acc = fmaf(57344, sa_b * sb_b, acc) over the
 * blocks in order. GEMM1 (two K blocks, scales 2^-9 and 2^-10): g = fl(fl(57344 A 2^-9) + 57344 A
 * 2^-10), A = fl(1 / 448), in long double (exact) rounded once; relu2 and its BF16 rounding (g1,
 * act) give a, the intermediate's scale s = fl(a / 448), codes 448 again; GEMM2 (one K block) of
 * column h in row block h / 128 (scales 2^-6, 3 2^-8): y = fl(57344 fl(s sb)). The mutant that reads
 * row h's scales at block row h mod 2 takes the other block's scale on odd h < 128 and even h >= 128. */
static float bf_round(float v)
{
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    u = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u; /* RNE, finite v */
    memcpy(&v, &u, sizeof u);
    return v;
}

static float fp8_hand_y(int h)
{
    const float A = 1.0f / 448.0f, sb2[2] = {0x1p-6f, 0x3p-8f};
    const float acc = (float)(57344.0L * (long double)(A * 0x1p-9f));
    const float g = bf_round((float)((long double)acc + 57344.0L * (long double)(A * 0x1p-10f)));
    const float a = bf_round(g * g), s = a / 448.0f;
    return (float)(57344.0L * (long double)(s * sb2[h / 128]));
}

Test(fused_moe_kernels, fp8_128_weights_and_scale_row_mutant)
{
    static uint8_t w13[128 * 256], w2[256 * 128];
    static uint16_t x[256];
    static float out[256];
    float sb1[2] = {0x1p-9f, 0x1p-10f}, sb2[2] = {0x1p-6f, 0x3p-8f}, tw = 1.0f, gs = 1.0f;
    int32_t id = 0;
    memset(w13, 0x38, sizeof w13), memset(w2, 0x38, sizeof w2);
    for (int i = 0; i < 256; i++) x[i] = bf(1.0f);
    const moects_fused_moe_shape s = {.T = 1, .k = 1, .H = 256, .inter = 128, .E = 1, .E_global = 1,
                                      .format = MOECTS_LAYER_FP8_128, .activation = MOECTS_ACT_RELU2,
                                      .out_dtype = MOECTS_F32};
    const moects_fused_moe_args a = {.x = x, .topk_ids = &id, .topk_weights = &tw, .w13 = w13, .w2 = w2,
                                     .mid_global_scale = &gs, .out = out, .w13_block_scale = sb1,
                                     .w2_block_scale = sb2};
    const moects_kernel *k = find("cpu.fused_moe.vllm_fp8"), *m = find("cpu.mutant.fused_moe.fp8_scale_per_row");
    char why[200] = "";
    cr_assert(k->supports(&s, why, sizeof why), "%s", why);
    cr_assert_eq(k->run(&s, &a, NULL), 0);
    for (int h = 0; h < 256; h++) cr_expect_eq(out[h], fp8_hand_y(h), "h %d: %a, hand %a", h, out[h], fp8_hand_y(h));
    cr_assert_eq(m->run(&s, &a, NULL), 0);
    cr_expect(out[0] == fp8_hand_y(0) && out[1] == fp8_hand_y(129) && out[128] == fp8_hand_y(0) &&
              out[129] == fp8_hand_y(129));
    cr_expect_neq(fp8_hand_y(0), fp8_hand_y(129));
    moects_fused_moe_shape bad = s;
    bad.H = 192;
    cr_expect(refuses("cpu.fused_moe.vllm_fp8", &bad, "multiples of 128"));
    cr_expect(refuses("cpu.fused_moe.vllm", &s, "mid=fp8_128"));
}
