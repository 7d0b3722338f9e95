/* shape.c: a case's shape in one line, in the op's terms (`moects list -v`). */
#include <stdio.h>

#include "moects_cases.h"

static const char *dtype_name(moects_dtype d)
{
    return d == MOECTS_BF16 ? "bf16" : d == MOECTS_F32 ? "f32" : d == MOECTS_I32 ? "int32" : d == MOECTS_I64 ? "int64" : "?";
}

void moects__case_shape(const moects_case *c, char *buf, size_t len)
{
    switch (c->op) {
    case MOECTS_OP_EP_GATHER: {
        char map[48] = "no expert_map";
        if (c->ep_size > 1) snprintf(map, sizeof map, "EP rank %d of %d", c->ep_rank, c->ep_size);
        snprintf(buf, len, "out [T %lld, H %lld] %s; topk %lld of E %lld; %s; ids %s; routing %s; data %s",
                 (long long)c->T, (long long)c->H, dtype_name(c->out_dtype), (long long)c->k, (long long)c->E_global,
                 map, dtype_name(c->id_dtype), moects__routing_name(c->routing), moects__data_name(c->data));
        return;
    }
    case MOECTS_OP_FP4_GEMM:
        snprintf(buf, len, "D [M %lld, N %lld] %s = A [M, K %lld] x B [N, K]^T; %s, %s scales%s%s; data %s",
                 (long long)c->M, (long long)c->N, dtype_name(c->out_dtype), (long long)c->K,
                 c->format == MOECTS_FP4_NVFP4 ? "NVFP4" : "MXFP4",
                 c->scale_layout == MOECTS_SCALES_SWIZZLED_128X4 ? "128x4 swizzled" : "linear", c->gemm[0] ? "; " : "",
                 c->gemm, moects__data_name(c->data));
        return;
    case MOECTS_OP_MOE_GEMM: {
        char rows[96], fmt[48] = "";
        if (c->n_counts > 0)
            snprintf(rows, sizeof rows, "rows per expert from %d fixed counts (%lld..%lld)", c->n_counts,
                     (long long)c->counts[0], (long long)c->counts[c->n_counts - 1]);
        else
            snprintf(rows, sizeof rows, "rows from T %lld, topk %lld of E %lld", (long long)c->T, (long long)c->k,
                     (long long)c->E_global);
        if (c->moe_format == MOECTS_MOE_W4A8)
            snprintf(fmt, sizeof fmt, "; A scales per 1x%lld %s", (long long)c->a_scale_block,
                     c->a_scale_f32 ? "FP32" : "UE8M0");
        snprintf(buf, len, "D [rows, N %lld] %s = A [rows, K %lld] x B [E %lld, N, K]^T; %s (B %s), %s scales%s; "
                 "%s rows%s; %s; %s; data %s",
                 (long long)c->N, dtype_name(c->out_dtype), (long long)c->K, (long long)c->E,
                 moects__moe_format_name(c->moe_format), c->b_format == MOECTS_FP4_NVFP4 ? "NVFP4" : "MXFP4",
                 c->scale_layout == MOECTS_SCALES_SWIZZLED_128X4 ? "128x4 swizzled" : "linear", fmt,
                 moects__row_layout_name(c->rows), c->rows == MOECTS_ROWS_CONTIGUOUS && c->align > 1 ? ", padded" : "",
                 rows, c->gemm, moects__data_name(c->data));
        return;
    }
    case MOECTS_OP_MOE_ROUTE: {
        static const char *const methods[] = {"?", "softmax", "top-k then softmax", "sigmoid", "Llama 4 sigmoid top-1"};
        snprintf(buf, len, "logits [T %lld, E %lld] %s -> ids, weights [T, %lld]; %s; groups %lld of %lld; %s; scale %g; "
                 "%s; data %s", (long long)c->T, (long long)c->E, dtype_name(c->logits_dtype), (long long)c->k,
                 methods[c->route_method >= 1 && c->route_method <= 4 ? c->route_method : 0], (long long)c->topk_group,
                 (long long)c->n_group, c->renormalize ? "renormalized" : "not renormalized", (double)c->route_scale,
                 c->route_bias ? "correction bias" : "no bias", moects__data_name(c->data));
        return;
    }
    case MOECTS_OP_FUSED_MOE: {
        char map[48] = "no expert_map", act[64];
        if (c->ep_size > 1) snprintf(map, sizeof map, "EP rank %d of %d", c->ep_rank, c->ep_size);
        int n = snprintf(act, sizeof act, "%s", moects__activation_name(c->activation));
        if (c->act_limit > 0) n += snprintf(act + n, sizeof act - (size_t)n, " limit %g", (double)c->act_limit);
        if (c->act_alpha > 0) snprintf(act + n, sizeof act - (size_t)n, " alpha %g", (double)c->act_alpha);
        snprintf(buf, len, "out [T %lld, H %lld] %s; topk %lld of E %lld, %lld local; %s; W13 [E, %s%lld, H], W2 [E, H, "
                 "I %lld] %s%s; %s; routing %s; data %s",
                 (long long)c->T, (long long)c->H, dtype_name(c->out_dtype), (long long)c->k, (long long)c->E_global,
                 (long long)c->E, map, c->activation == MOECTS_ACT_RELU2 ? "" : "2x", (long long)c->inter,
                 (long long)c->inter, moects__layer_format_name(c->layer_format), c->has_bias ? " with biases" : "", act,
                 moects__routing_name(c->routing), moects__data_name(c->data));
        return;
    }
    case MOECTS_OP_EP_DISPATCH_COMBINE:
        snprintf(buf, len, "%d ranks x x [T %lld, H %lld] bf16%s; topk %lld of E %lld; routing %s; recv rows, out [T, H] "
                 "bf16", c->ep_size, (long long)c->T, (long long)c->H, c->empty_ranks ? " (odd ranks empty)" : "",
                 (long long)c->k, (long long)c->E_global, moects__routing_name(c->routing));
        return;
    default:
        snprintf(buf, len, "op %d", (int)c->op);
        return;
    }
}
