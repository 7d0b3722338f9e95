/* fused_moe_mutants.c: CPU fused MoE layer kernels with one known bug each (DESIGN.md "The fused MoE
 * layer": every stage's convention is a declared parameter, and a kernel that declares one and does
 * another is what the suite must catch). Each declares an honest recipe and runs the generic layer
 * loop of fused_moe.c with one bug switched on (fused_moe_internal.h); each takes the shapes its bug
 * can show on (moects__fml_supports). */
#include "fused_moe_internal.h"

/* A mutant whose one bug is per token: it declares no batch invariance (fused_moe_internal.h); every
 * layer kernel here exposes its intermediates (MOECTS_KERNEL_INTERMEDIATES) */
#define MUTANT(sym, nm, rec, bugv, bugtext) MOECTS__FML_DESCRIPTOR(sym, nm, rec, bugv, bugtext, 0, MOECTS_KERNEL_INTERMEDIATES)

#define GPT_OSS "fused_moe.layer_v1(w13=interleave1,g1=f32,act=f32,sig=rcp,mid=bf16,weight=gemm2,wdtype=bf16,slot=bf16)"
#define DEEPGEMM "fused_moe.layer_v1(w13=interleave8,g1=bf16,act=f32,mid=fp8_128,weight=act,slot=f32,combine=f32_slots)"

MUTANT(moects_cpu_mutant_fused_moe_gate_up_swapped, "cpu.mutant.fused_moe.gate_up_swapped", MOECTS_LAYER_RECIPE_V1,
       MOECTS__FML_BUG_GATE_UP_SWAPPED,
       "declares W13 [gate, up] but reads rows [I, 2I) as the gate and [0, I) as up (the CUTLASS order)");
MUTANT(moects_cpu_mutant_fused_moe_interleave_granule, "cpu.mutant.fused_moe.interleave_granule", DEEPGEMM,
       MOECTS__FML_BUG_INTERLEAVE_GRANULE,
       "declares W13 interleaved in granules of 8 rows but reads granules of 4 (gate 8(i/4) + i%4, up + 4)");
MUTANT(moects_cpu_mutant_fused_moe_gpt_oss_no_plus1, "cpu.mutant.fused_moe.gpt_oss_no_plus1", GPT_OSS,
       MOECTS__FML_BUG_GPT_OSS_NO_PLUS1, "gpt_oss activation without the + 1 on up: u' * glu, not (u' + 1) * glu");
MUTANT(moects_cpu_mutant_fused_moe_act_on_up, "cpu.mutant.fused_moe.act_on_up", MOECTS_LAYER_RECIPE_V1,
       MOECTS__FML_BUG_ACT_ON_UP,
       "the activation applied to the up half and multiplied by the gate, each clamped as itself: act(u') * g'");
MUTANT(moects_cpu_mutant_fused_moe_weight_twice, "cpu.mutant.fused_moe.weight_twice", MOECTS_LAYER_RECIPE_V1,
       MOECTS__FML_BUG_WEIGHT_TWICE,
       "the router weight applied in GEMM2's epilogue and again in the combine (fmaf(y, w, acc)): w^2");
MUTANT(moects_cpu_mutant_fused_moe_expert_map_ignored, "cpu.mutant.fused_moe.expert_map_ignored",
       MOECTS_LAYER_RECIPE_V1,
       MOECTS__FML_BUG_EXPERT_MAP_IGNORED,
       "EP: expert_map ignored, a global id < E taken as the local expert index (ids >= E skipped)");
MUTANT(moects_cpu_mutant_fused_moe_combine_bf16, "cpu.mutant.fused_moe.combine_bf16", MOECTS_LAYER_RECIPE_V1,
       MOECTS__FML_BUG_COMBINE_BF16,
       "declares combine=f32_slots but sums the slots in BF16 (a BF16 running sum, vLLM before PR 46643)");

MUTANT(moects_cpu_mutant_fused_moe_fp8_scale_per_row, "cpu.mutant.fused_moe.fp8_scale_per_row",
       "fused_moe.layer_v1(mid=fp8_128)", MOECTS__FML_BUG_FP8_SCALE_PER_ROW,
       "FP8 block-128 weights: row n's block scales read at block row n mod (N / 128), a per-row scale "
       "layout, instead of n / 128");

MOECTS__FML_DESCRIPTOR(moects_cpu_mutant_fused_moe_split_k_batch, "cpu.mutant.fused_moe.split_k_batch",
                       MOECTS_LAYER_RECIPE_V1, MOECTS__FML_BUG_SPLIT_K_BATCH,
                       "declares batch invariance, but a batch of more than 4 tokens splits GEMM2's K in two, each "
                       "partial rounded to BF16 (split-K picked by T, reduced in the output type): exact alone, not "
                       "in a larger batch",
                       0, MOECTS_KERNEL_BATCH_INVARIANT | MOECTS_KERNEL_INTERMEDIATES);

/* The combine mutant of a bounded kernel: only an enclosure narrower than the moved ULPs catches it. */
MOECTS__FML_DESCRIPTOR(moects_cpu_mutant_fused_moe_fast_combine_bf16, "cpu.mutant.fused_moe.fast_combine_bf16",
                       MOECTS_FML_FAST_RECIPE, MOECTS__FML_BUG_COMBINE_BF16,
                       "bounded (FP32 accumulation, fn=ulp2): declares combine=f32_slots but sums the slots in BF16",
                       24, MOECTS_KERNEL_INTERMEDIATES);

/* The accumulation check's mutant (DESIGN.md "Bounded verdicts"): GEMM2's sums lossier than declared. */
MOECTS__FML_DESCRIPTOR(moects_cpu_mutant_fused_moe_gemm2_bf16_acc, "cpu.mutant.fused_moe.gemm2_bf16_acc",
                       MOECTS_FML_FAST_RECIPE, MOECTS__FML_BUG_GEMM2_BF16_ACC,
                       "bounded, declares FP32 accumulation (24, RNE) but sums GEMM2 in a BF16 accumulator (a "
                       "BF16 running sum, each addition rounded to BF16)",
                       24, MOECTS_KERNEL_INTERMEDIATES);

MUTANT(moects_cpu_mutant_fused_moe_nvfp4_alpha_twice, "cpu.mutant.fused_moe.nvfp4_alpha_twice",
       "fused_moe.layer_v1(w13=up_gate,g1=f32,act=f32,mid=nvfp4,weight=combine,slot=f32)",
       MOECTS__FML_BUG_NVFP4_ALPHA_TWICE,
       "NVFP4 weights: GEMM1's per-expert global scale (alpha = 1 / gs) applied twice, folded into the "
       "dequantized weights and again in the epilogue");
MUTANT(moects_cpu_mutant_fused_moe_w4a8_scale_next, "cpu.mutant.fused_moe.w4a8_scale_next",
       "fused_moe.layer_v1(w13=up_gate,g1=f32,act=f32,mid=mxfp8,weight=combine,slot=f32)",
       MOECTS__FML_BUG_W4A8_SCALE_NEXT,
       "W4A8: the weights' UE8M0 scale of K-block kb read at kb + 1 (the last block its own): a block scale "
       "index off by one");
