/* moe_route_mutants.c: CPU router kernels with one known bug each (DESIGN.md "Routing": the method,
 * its tie rule and its slot order are declared, and a kernel that declares one and does another is
 * what the suite must catch). Each declares moe_route.v1 (ties to the lower id, sorted slots) and
 * runs the generic loop of moe_route.c with its bug switched on; the last two run cpu.moe_route.fast's
 * loop and declare its bounded claim, judged by the enclosure. */
#include "moe_route_internal.h"

#define MUTANT(sym, nm, high, bugv, bugtext) \
    MOECTS__MR_DESCRIPTOR(sym, nm, MOECTS_ROUTE_RECIPE_V1, high, 0, 0, 0, bugv, bugtext)
/* The fast kernel's loop (cpu.moe_route.fast) with a bug only an enclosure tighter than BF16 sees. */
#define FAST_MUTANT(sym, nm, bugv, bugtext) \
    MOECTS__MR_DESCRIPTOR(sym, nm, MOECTS_ROUTE_RECIPE_V1 "(fn=ulp2,sum=any)", 0, 0, 1, 0, bugv, bugtext)

MUTANT(moects_cpu_mutant_moe_route_softmax_after_topk, "cpu.mutant.moe_route.softmax_after_topk", 0,
       MOECTS__MR_BUG_SOFTMAX_AFTER_TOPK,
       "softmax router: top-k on the logits, then softmax over the k (gpt-oss's order), not softmax over E first");
MUTANT(moects_cpu_mutant_moe_route_bias_in_weights, "cpu.mutant.moe_route.bias_in_weights", 0,
       MOECTS__MR_BUG_BIAS_IN_WEIGHTS, "the correction bias kept in the weights: w from s + b, not from s");
MUTANT(moects_cpu_mutant_moe_route_group_max, "cpu.mutant.moe_route.group_max", 0, MOECTS__MR_BUG_GROUP_MAX,
       "grouped top-k with a bias: groups ranked by their best score, not the sum of their top 2");
MUTANT(moects_cpu_mutant_moe_route_scale_twice, "cpu.mutant.moe_route.scale_twice", 0, MOECTS__MR_BUG_SCALE_TWICE,
       "the routed scaling factor applied twice");
MUTANT(moects_cpu_mutant_moe_route_ties_high, "cpu.mutant.moe_route.ties_high", 1, MOECTS__MR_BUG_NONE,
       "declares ties to the lower id but breaks them to the higher (groups and experts)");
FAST_MUTANT(moects_cpu_mutant_moe_route_sum_bf16, "cpu.mutant.moe_route.sum_bf16", MOECTS__MR_BUG_SUM_BF16,
            "declares FP32 sums (fn=ulp2,sum=any) but rounds the renormalization sum to BF16 after each addition");
FAST_MUTANT(moects_cpu_mutant_moe_route_weights_bf16, "cpu.mutant.moe_route.weights_bf16", MOECTS__MR_BUG_WEIGHTS_BF16,
            "declares FP32 weights (fn=ulp2,sum=any) but rounds each weight to BF16");
