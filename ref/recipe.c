/* recipe.c: names of the numeric recipes (DESIGN.md "Numeric recipes"); fused_moe's layer recipes
 * are parsed and interned by ref/layer_recipe.c, moe_route's parsed by ref/moe_route.c. */
#include <string.h>

#include "moects_edc.h"
#include "moects_layer.h"
#include "moects_ref.h"
#include "moects_route.h"

int moects__recipe_parse(const char *name, moects_op op, moects_recipe *out)
{
    static const struct {
        const char *name;
        moects_op op;
        moects_recipe recipe;
    } table[] = {
        {"ep_gather.exact_v1", MOECTS_OP_EP_GATHER, MOECTS_RECIPE_EXACT_V1},
        {"ep_gather.fma_v1", MOECTS_OP_EP_GATHER, MOECTS_RECIPE_EPG_FMA_V1},
        {"ep_gather.muladd_v1", MOECTS_OP_EP_GATHER, MOECTS_RECIPE_EPG_MULADD_V1},
        {"fp4_gemm.exact_v1", MOECTS_OP_FP4_GEMM, MOECTS_RECIPE_EXACT_V1},
        {"fp4_gemm.blockwise_v1", MOECTS_OP_FP4_GEMM, MOECTS_RECIPE_FP4_BLOCKWISE_V1},
        {"moe_gemm.exact_v1", MOECTS_OP_MOE_GEMM, MOECTS_RECIPE_EXACT_V1},
        {"moe_gemm.blockwise_v1", MOECTS_OP_MOE_GEMM, MOECTS_RECIPE_FP4_BLOCKWISE_V1},
    };
    if (!name) return -1;
    if (op == MOECTS_OP_FUSED_MOE) {
        moects_layer_recipe r;
        char err[256];
        return moects__layer_recipe_parse(name, &r, err, sizeof err) ? -1 : moects__layer_recipe_intern(&r, out);
    }
    if (op == MOECTS_OP_MOE_ROUTE) {
        moects_route_recipe r;
        char err[256];
        return moects__route_recipe_parse(name, &r, err, sizeof err) ? -1 : (*out = moects__route_recipe_value(&r), 0);
    }
    if (op == MOECTS_OP_EP_DISPATCH_COMBINE) return moects__edc_recipe_parse(name, out, NULL);
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (table[i].op == op && strcmp(table[i].name, name) == 0) {
            *out = table[i].recipe;
            return 0;
        }
    return -1;
}
