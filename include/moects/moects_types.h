/* moects_types.h: dtypes, operand formats and the shape/argument structs of the kernel ops.
 * Shared by ref/ (the references) and include/moects/moects_kernel.h (the kernel ABI). No dependencies. */
#ifndef MOECTS_TYPES_H
#define MOECTS_TYPES_H
#include <stddef.h>
#include <stdint.h>

typedef enum {
    MOECTS_BF16 = 1, /* bfloat16 bits in uint16_t */
    MOECTS_F32 = 2,
    MOECTS_I32 = 3,
    MOECTS_I64 = 4
} moects_dtype;

typedef enum {
    MOECTS_OP_EP_GATHER = 1, /* MoE combine, DESIGN.md "ep_gather" */
    MOECTS_OP_FP4_GEMM = 2,  /* block-scaled FP4 GEMM, NT layout */
    MOECTS_OP_MOE_GEMM = 3,  /* grouped MoE GEMM over all local experts, DESIGN.md "Grouped MoE GEMM" */
    MOECTS_OP_FUSED_MOE = 4, /* the whole routed MoE layer, DESIGN.md "The fused MoE layer" */
    MOECTS_OP_MOE_ROUTE = 5, /* the router: logits -> topk ids and weights, DESIGN.md "Routing" */
    MOECTS_OP_EP_DISPATCH_COMBINE = 6 /* EP all-to-all dispatch, expert transform, combine over R ranks,
                                         docs/ep_dispatch_combine.md */
} moects_op;

typedef enum {
    MOECTS_FP4_MXFP4 = 1, /* E2M1 + UE8M0 per 32 along K (OCP MX v1.0 sec. 5) */
    MOECTS_FP4_NVFP4 = 2  /* E2M1 + UE4M3 per 16 along K + FP32 global scale */
} moects_fp4_format;

typedef enum {
    MOECTS_SCALES_LINEAR = 0,        /* [rows][nkb], nkb = ceil(K / block) */
    MOECTS_SCALES_SWIZZLED_128X4 = 1 /* cuBLASLt/CUTLASS 128x4 tiles, DESIGN.md */
} moects_scale_layout;

typedef enum {
    MOECTS_ROUND_RNE = 0,         /* round to nearest, ties to even (default) */
    MOECTS_ROUND_TIES_TO_ZERO = 1 /* round to nearest, ties toward zero */
} moects_rounding;

/* ep_gather shape. out[T][H] = sum over valid slots j of x[input_index[t][j]][:] * w[t][j]. */
typedef struct {
    int64_t T;              /* tokens (may be 0) */
    int64_t k;              /* topk, slots per token */
    int64_t M_sum;          /* rows of x (expert-sorted, padded) */
    int64_t H;              /* row width: hidden_size or latent width */
    int64_t E_global;       /* global routed experts (length of expert_map) */
    moects_dtype id_dtype;  /* MOECTS_I32 or MOECTS_I64 */
    moects_dtype out_dtype; /* MOECTS_BF16 or MOECTS_F32 */
    int has_expert_map;     /* 0: slot valid iff id >= 0 */
} moects_ep_gather_shape;

typedef struct {
    const uint16_t *x;          /* [M_sum, H] bf16 */
    const void *topk_ids;       /* [T, k] int32 or int64 */
    const float *topk_weights;  /* [T, k] */
    const int32_t *input_index; /* [T, k] row of x for each slot */
    const int32_t *expert_map;  /* [E_global], -1 = expert on another rank; NULL if none */
    void *out;                  /* [T, H] out_dtype */
} moects_ep_gather_args;

/* FP4 GEMM, NT layout: D[M, N] = alpha * A[M, K] * B[N, K]^T with block scales along K. */
typedef struct {
    int64_t M, N, K;
    moects_fp4_format format;
    moects_scale_layout scale_layout; /* same layout for A's and B's scales */
    moects_dtype out_dtype;           /* MOECTS_BF16 or MOECTS_F32 */
} moects_fp4_gemm_shape;

typedef struct {
    const uint8_t *a;  /* [M, ceil(K/2)] E2M1 codes, element 2j low nibble, 2j+1 high */
    const uint8_t *b;  /* [N, ceil(K/2)] */
    const uint8_t *sa; /* A's scales: UE8M0 (MXFP4) or UE4M3 (NVFP4), in scale_layout */
    const uint8_t *sb; /* B's scales */
    float alpha;       /* MXFP4: 1; NVFP4: 1.0f / (gs_a * gs_b), FP32 ops */
    void *d;           /* [M, N] out_dtype */
} moects_fp4_gemm_args;

/* ---- grouped MoE GEMM (moe_gemm), DESIGN.md "Grouped MoE GEMM" ----
 * For every valid row r of expert e: D[r, :] = alpha[e] * A[r, :] * B[e]^T, NT layout. */
typedef enum {
    MOECTS_MOE_MXFP4 = 1, /* A, B MXFP4 (E2M1 + UE8M0 per 32) */
    MOECTS_MOE_NVFP4 = 2, /* A, B NVFP4 (E2M1 + UE4M3 per 16), alpha[e] = 1/(gs_a[e]*gs_b[e]) */
    MOECTS_MOE_W4A8 = 3,  /* A E4M3 with one scale per 1 x a_scale_block (UE8M0 or FP32); B MXFP4 */
    MOECTS_MOE_W4A16 = 4  /* A BF16, no scale; B MXFP4 or NVFP4 (b_format; NVFP4: alpha[e] = 1/gs_b[e]) */
} moects_moe_format;

typedef enum {
    MOECTS_ROWS_CONTIGUOUS = 1, /* A [M, K]: experts' rows consecutive, each group padded to `align`
                                   rows; m_indices[M] names each row's expert, -1 for padding rows */
    MOECTS_ROWS_MASKED = 2,     /* A [E, M, K] (M = max_m): rows >= masked_m[e] are not valid */
    MOECTS_ROWS_OFFSETS = 3     /* A [M, K] unpadded: expert e's rows are [off[e], off[e+1]) */
} moects_row_layout;

typedef struct {
    int64_t E;                      /* local experts (groups), >= 1 */
    int64_t M;                      /* contiguous/offsets: rows of A (M_sum); masked: max_m */
    int64_t N, K;                   /* per-expert GEMM: [rows, K] x [N, K]^T */
    moects_moe_format format;
    moects_fp4_format b_format;     /* B's FP4 format: MXFP4, except NVFP4 x NVFP4 and W4A16-NVFP4 */
    moects_row_layout rows;
    int64_t align;                  /* contiguous: group padding (128); 1 otherwise */
    int64_t a_scale_block;          /* W4A8: 128 or 32 (an A scale covers a_scale_block/32 K-blocks) */
    int a_scale_f32;                /* W4A8: 1 = A scales are FP32, 0 = UE8M0 bytes */
    moects_scale_layout scale_layout; /* B's scales, and FP4 A's (contiguous/masked; offsets: linear) */
    moects_dtype out_dtype;         /* MOECTS_BF16 or MOECTS_F32 */
} moects_moe_gemm_shape;

/* rows(A) = M (contiguous, offsets) or E*M (masked); nkb = ceil(K / g) with g the scale block of the
 * operand. Scales of expert e start at e * (bytes of one expert's [N][nkb] layout): linear N*nkb,
 * swizzled moects_swizzle_bytes(N, nkb). */
typedef struct {
    const void *a;                  /* FP4: [rows, ceil(K/2)] E2M1 codes; W4A8: [rows, K] E4M3;
                                       W4A16: [rows, K] bf16 */
    const void *sa;                 /* FP4: A's block scales (as fp4_gemm, per expert block for masked);
                                       W4A8: [rows, ceil(K/a_scale_block)] UE8M0 bytes or FP32; W4A16: NULL */
    const uint8_t *b;               /* [E, N, ceil(K/2)] E2M1 codes */
    const uint8_t *sb;              /* [E] x [N, nkb] block scales of B, in scale_layout */
    const float *alpha;             /* [E] FP32 per-expert multiplier (1 for MXFP4, W4A8, W4A16-MXFP4) */
    const float *gs_a;              /* [E] NVFP4 x NVFP4: A's global scales alpha was computed from; else NULL */
    const float *gs_b;              /* [E] NVFP4 B's global scales (NVFP4, W4A16-NVFP4); else NULL */
    const int32_t *m_indices;       /* contiguous: [M] expert of each row, -1 = padding; else NULL */
    const int32_t *masked_m;        /* masked: [E] valid rows per expert, 0..M; else NULL */
    const int64_t *expert_offsets;  /* offsets: [E+1] prefix sums, off[0] = 0, off[E] = M; else NULL */
    void *d;                        /* [rows, N] out_dtype; invalid rows are not compared */
} moects_moe_gemm_args;

/* ---- fused MoE layer (fused_moe), DESIGN.md "The fused MoE layer" ----
 * For token t and each valid slot j (expert id i = topk_ids[t][j]; valid: expert_map NULL and
 * 0 <= i < E, or expert_map[i] >= 0, the local expert e = expert_map[i]):
 *   h    = x[t] (router weight on the input: bf16(x[t] * w[t][j]))
 *   g1   = h * W13[e]^T (+ b13[e])                 [2I] (gated) or [I] (relu2)
 *   a    = act(gate half, up half)                  [I], halves as the recipe's W13 order says
 *   m    = the intermediate (BF16, FP8, MXFP8, NVFP4) of a (times w when the recipe puts it there)
 *   (NVFP4 weights: each GEMM's FP32 result times the expert's alpha; an NVFP4 intermediate: GEMM2's
 *   times 1 / mid_global_scale[e], folded into one FP32 factor with W2's alpha, ref/moects_layer.h)
 *   y    = m * W2[e]^T (+ b2[e])                   [H]
 *   out[t] = combine over the valid slots of y (times w where the recipe puts it)
 * Every rounding and its place is the kernel's layer recipe (moects_layer_recipe, ref/layer_recipe.c). */
typedef enum {
    MOECTS_ACT_SILU = 1,       /* silu(g) * u */
    MOECTS_ACT_GELU_TANH = 2,  /* gelu_tanh(g) * u, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
    MOECTS_ACT_GELU_ERF = 3,   /* gelu(g) * u, 0.5 x (1 + erf(x / sqrt(2))) */
    MOECTS_ACT_RELU2 = 4,      /* relu(x)^2, no gate: GEMM1 gives I columns, not 2I */
    MOECTS_ACT_SILU_CLAMP = 5, /* silu(min(g, L)) * clamp(u, -L, L) */
    MOECTS_ACT_GPT_OSS = 6,    /* g' = min(g, L), u' = clamp(u, -L, L): (u' + 1) * g' * sigmoid(a g') */
    MOECTS_ACT_SITU = 7        /* a tanh(g / a) sigmoid(g) * L tanh(u / L); no L: u unchanged (Kimi K3) */
} moects_activation;

typedef enum {
    MOECTS_LAYER_BF16 = 1,  /* W13, W2 BF16; x BF16 */
    MOECTS_LAYER_MXFP4 = 2, /* W13, W2 MXFP4 (E2M1 + UE8M0 per 32 along K, linear scales); x BF16 (W4A16) */
    MOECTS_LAYER_FP8_128 = 3, /* W8A8 block FP8 (DeepSeek-V3's release, vLLM w8a8 block / DeepGEMM): W13, W2
                                E4M3 with an FP32 scale per 128 x 128 block; each GEMM's input quantized per
                                token per 128 along K (x: as the recipe's FP8 scale says; GEMM2's: the
                                recipe's mid, which must be fp8_128); H and I multiples of 128 */
    MOECTS_LAYER_NVFP4 = 4,  /* W13, W2 NVFP4 (E2M1 + UE4M3 per 16 along K, linear scales) with a per-expert FP32
                                alpha (the global scale's decode direction, ModelOpt weight_scale_2 = 1 / gs):
                                GEMM = fp32(exact h . (e2m1 * scale)) * alpha[e]; x BF16 (W4A16); H, I % 16 == 0 */
    MOECTS_LAYER_W4A8 = 5    /* W13, W2 MXFP4 as MOECTS_LAYER_MXFP4; each GEMM's input E4M3 (moe_gemm's W4A8):
                                x quantized as the recipe's mid (fp8_128: FP32 scale per 128; mxfp8: UE8M0 per
                                32), GEMM2 reads the mid; each 32-block's exact dot rounded to FP32, then the
                                recipe's block-scale chain; H, I % 128 (fp8_128) or % 32 (mxfp8) == 0 */
} moects_layer_format;

typedef struct {
    int64_t T;                   /* tokens (may be 0) */
    int64_t k;                   /* topk slots per token */
    int64_t H;                   /* hidden size: GEMM1's K, GEMM2's N */
    int64_t inter;               /* I: intermediate width of one expert on this rank (after TP) */
    int64_t E;                   /* local experts: W13 and W2 hold E experts */
    int64_t E_global;            /* routed experts of the model: length of expert_map */
    int has_expert_map;          /* 1: expert_map given (EP); 0: ids are local expert indices */
    moects_layer_format format;
    moects_activation activation;
    float act_limit;             /* L of SILU_CLAMP, GPT_OSS, SITU (FP32, as engines pass it); else 0 */
    float act_alpha;             /* GPT_OSS's alpha (1.702f), SITU's a (beta, 4.0f); else 0 */
    int has_bias;                /* 1: b13 [E, 2I or I] and b2 [E, H] FP32 are given */
    moects_dtype out_dtype;      /* MOECTS_BF16 or MOECTS_F32 */
} moects_fused_moe_shape;

/* N1 = 2I gated (every activation but RELU2), I for RELU2. Weights of expert e start at e times one
 * expert's bytes. MXFP4 (and W4A8): W13 codes [E, N1, H/2] and scales [E, N1, H/32]; W2 [E, H, I/2] and
 * [E, H, I/32]. NVFP4: codes as MXFP4, E4M3 scale bytes [E, N1, H/16] and [E, H, I/16] (0x7F/0xFF NaN).
 * FP8_128: W13 E4M3 bytes [E, N1, H] (OCP E4M3FN: 0x7F and 0xFF NaN, no Inf) with FP32 scales
 * w13_block_scale [E, N1/128, H/128] (block (n / 128, k / 128) scales element (n, k)); W2 [E, H, I] with
 * w2_block_scale [E, H/128, I/128]; row-major, linear (DeepSeek-V3's weight_scale_inv). */
typedef struct {
    const uint16_t *x;            /* [T, H] bf16 hidden states */
    const int32_t *topk_ids;      /* [T, k] global expert ids; < 0 or an id the map leaves out: no expert */
    const float *topk_weights;    /* [T, k] FP32 router weights */
    const int32_t *expert_map;    /* [E_global] local index or -1; NULL without EP */
    const void *w13;              /* BF16 [E, N1, H], MXFP4 codes [E, N1, H/2] or E4M3 [E, N1, H], rows in the
                                     recipe's order */
    const uint8_t *w13_scale;     /* MXFP4, W4A8: [E, N1, H/32] UE8M0; NVFP4: [E, N1, H/16] UE4M3; BF16: NULL */
    const void *w2;               /* BF16 [E, H, I], MXFP4 codes [E, H, I/2] or E4M3 [E, H, I] */
    const uint8_t *w2_scale;      /* MXFP4, W4A8: [E, H, I/32] UE8M0; NVFP4: [E, H, I/16] UE4M3; BF16: NULL */
    const float *b13;             /* [E, N1] FP32 or NULL */
    const float *b2;              /* [E, H] FP32 or NULL */
    const float *mid_global_scale; /* [E] FP32: the NVFP4 intermediate's static per-expert global scale
                                      (encode direction, as trtllm-gen's fc2 input scale); always given */
    void *out;                    /* [T, H] out_dtype */
    const float *w13_block_scale; /* FP8_128: [E, N1/128, H/128] FP32; else NULL */
    const float *w2_block_scale;  /* FP8_128: [E, H/128, I/128] FP32; else NULL */
    /* Exposed intermediates (optional outputs, asked only of a kernel whose flags hold
     * MOECTS_KERNEL_INTERMEDIATES; NULL: not asked, and a kernel writes none). Row t * k + j is slot j
     * of token t; a kernel writes the rows of the valid slots (the others are not read): */
    float *g1_out;                /* [T * k, N1] GEMM1's output as the activation reads it: bias added,
                                     the recipe's g1 rounding applied, rows in W13's order */
    float *act_out;               /* [T * k, I] the activation's output (times w under weight=act) */
    double *mid_out;              /* [T * k, I] the intermediate GEMM2 reads, its exact value (BF16, FP32;
                                     FP8 / MXFP8: the E4M3 value times its group's scale, exact in double;
                                     NVFP4: the E2M1 value times its block's scale, 1 / gs left to GEMM2) */
    const float *w13_alpha;       /* NVFP4: [E] FP32 GEMM1's per-expert multiplier (1 / W13's global scale); else NULL */
    const float *w2_alpha;        /* NVFP4: [E] FP32 GEMM2's per-expert multiplier (1 / W2's global scale); else NULL */
    float *y_out;                 /* [T * k, H] (an exposed intermediate, as g1_out) GEMM2's per-slot output as the
                                     combine reads it: its epilogue (alpha, b2, the router weight under
                                     weight=gemm2) and the recipe's slot rounding applied */
} moects_fused_moe_args;

/* ---- routing (moe_route), DESIGN.md "Routing", docs/moe_route.md ----
 * Per token t, from its logits row x [E] (and the correction bias b [E] where given), k distinct expert
 * ids and their FP32 weights. Every FP32 operation and its order is the method's recipe
 * (ref/moects_route.h gives each; exp correctly rounded): */
typedef enum {
    MOECTS_ROUTE_SOFTMAX = 1,      /* p = softmax(x) over E; select as SIGMOID does on p (+ b); w = p
                                      [/ sum of the k p] * scale (Mixtral, Qwen3, DBRX, Grok-1, ERNIE 4.5) */
    MOECTS_ROUTE_TOPK_SOFTMAX = 2, /* top-k on x; w = softmax over the k selected x (gpt-oss; FlashInfer
                                      "Renormalize") */
    MOECTS_ROUTE_SIGMOID = 3,      /* s = sigmoid(x); select on s (+ b), groups of E / n_group ranked by
                                      the sum of their top 2 (with b; else their max), the topk_group best
                                      kept; top-k; w = s (unbiased) [/ (sum + 1e-20)] * scale
                                      (DeepSeek-V3 noaux_tc, Kimi K2, Nemotron 3) */
    MOECTS_ROUTE_LLAMA4 = 4        /* top-1 on x; w = sigmoid(x) (Llama 4) */
} moects_route_method;

typedef struct {
    int64_t T;                   /* tokens (may be 0) */
    int64_t E;                   /* routed experts: the logits' row length */
    int64_t k;                   /* experts per token, 1 <= k <= E */
    moects_route_method method;
    int64_t n_group;             /* SOFTMAX, SIGMOID: expert groups (E a multiple), 1 for none */
    int64_t topk_group;          /* SOFTMAX, SIGMOID: groups kept, 1 <= topk_group <= n_group */
    int renormalize;             /* SOFTMAX, SIGMOID: divide by the sum of the selected weights */
    float scale;                 /* SOFTMAX, SIGMOID: the routed scaling factor (1 for none) */
    int has_bias;                /* SOFTMAX, SIGMOID: the correction bias b is given (selection only) */
    moects_dtype logits_dtype;   /* MOECTS_F32 or MOECTS_BF16 */
} moects_moe_route_shape;

typedef struct {
    const void *logits;          /* [T, E] logits_dtype */
    const float *bias;           /* [E] FP32 e_score_correction_bias, or NULL */
    int32_t *topk_ids;           /* [T, k] out: distinct expert ids in [0, E) */
    float *topk_weights;         /* [T, k] out: FP32 weight of each slot's expert */
} moects_moe_route_args;

/* ---- expert-parallel dispatch and combine (ep_dispatch_combine), docs/ep_dispatch_combine.md ----
 * R ranks (processes, one per GPU), each with its own tokens x [T, H] BF16, their routing (topk_ids [T, k]
 * global expert ids, -1 for a slot routed nowhere; topk_weights [T, k] FP32) and the EP layout (rank r
 * holds the experts [expert_first[r], expert_first[r+1]), vLLM's linear split). Dispatch: every valid slot
 * (token t, slot j) sends row x[t] to the rank holding expert topk_ids[t][j]; that rank returns the rows
 * it received (recv_x, recv_src, recv_count). Transform: the expert's output is y = x * expert_scale[e]
 * (a power of two times +-1: exact in BF16). Combine: back on the token's own rank, out[t][d] = BF16 of
 * the FP32 sum over its valid slots j ascending of weight * y (the recipe's fma or mul-add, as
 * ep_gather's recipes); a token with no valid slot gives +0. Mirrors DeepEP's low-latency pair
 * (deepseek-ai/DeepEP deep_ep/buffer.py: low_latency_dispatch packs received tokens per local expert,
 * low_latency_combine "reduce with weights" on the token's rank). */
typedef struct moects_ep_comm moects_ep_comm;
/* The communicator moects gives each rank's run(), CPU and CUDA kernels alike. The transport
 * (harness/ops/ep_ranks.c) implements barrier, broadcast and alltoallv over host shared memory; a kernel
 * with its own device transport uses it for set-up and phases only: cuda.ep_dispatch_combine.ipc passes
 * its CUDA IPC handles with alltoallv and separates its phases with barrier; an NCCL kernel: rank 0 makes
 * an ncclUniqueId, broadcasts its bytes, every rank calls ncclCommInitRank(world, id, rank) on its device.
 * Each call returns 0, or -1 when a peer failed or the arguments break the transport's limits (then the
 * kernel returns non-zero). */
struct moects_ep_comm {
    int rank, world; /* this process's rank in [0, world) */
    int device;      /* CUDA kernels: the device this rank's process made current (rank when it sees at least
                        world devices, else 0: one GPU runs every rank); CPU: -1 */
    /* Every rank waits until all have called it. */
    int (*barrier)(moects_ep_comm *c);
    /* bytes from root's buf into every other rank's buf (at most max_bytes). */
    int (*broadcast)(moects_ep_comm *c, int root, void *buf, size_t bytes);
    /* All-to-all: send holds, in rank order, send_bytes[d] bytes for each rank d (this rank's own too); recv
     * gets, in rank order, recv_bytes[s] bytes from each rank s, which must equal what s sends here (a
     * mismatch: -1 on both). At most max_bytes sent by one rank in one call. */
    int (*alltoallv)(moects_ep_comm *c, const void *send, const size_t *send_bytes, void *recv,
                     const size_t *recv_bytes);
    size_t max_bytes; /* the transport's per-call limit (CPU: 2 * (T_max k + R) (H 2 + 64) + 64 KiB) */
    void *impl;       /* the transport's own state */
};

typedef struct {
    int64_t world;    /* R: ranks, the EP size */
    int64_t rank;     /* this process's rank; -1 in supports(): the case as a whole */
    int64_t T;        /* this rank's tokens (may be 0); supports(): the most of any rank */
    int64_t T_total;  /* tokens over all ranks */
    int64_t H;        /* row width (hidden_size, or the latent width) */
    int64_t k;        /* slots per token */
    int64_t E;        /* global routed experts */
    int64_t recv_cap; /* rows recv_x and recv_src hold: at least the valid slots routed to this rank's
                         experts; supports(): the most of any rank */
} moects_ep_dispatch_combine_shape;

typedef struct {
    moects_ep_comm *comm;
    const uint16_t *x;            /* [T, H] bf16: this rank's tokens */
    const int32_t *topk_ids;      /* [T, k] global expert ids; -1: the slot goes nowhere */
    const float *topk_weights;    /* [T, k] (an invalid slot's weight is NaN: never read it) */
    const int64_t *expert_first;  /* [world + 1]: rank r holds experts [expert_first[r], expert_first[r+1]) */
    const float *expert_scale;    /* [E]: expert e's transform y = x * expert_scale[e] */
    const int64_t *token_first;   /* [world + 1]: rank r's tokens are global tokens [token_first[r], +T) */
    uint16_t *recv_x;             /* out [recv_cap, H] bf16: the rows this rank received, in the order the
                                     recipe declares (order=expert: by local expert, then source rank, then
                                     token) or any order (order=any) */
    int64_t *recv_src;            /* out [recv_cap]: each received row's slot, (token_first[src] + t) * k + j */
    int64_t *recv_count;          /* out [1]: rows received */
    uint16_t *out;                /* out [T, H] bf16: the combined outputs of this rank's tokens */
} moects_ep_dispatch_combine_args;

/* Scale block size along K: 32 for MXFP4, 16 for NVFP4. */
static inline int64_t moects_fp4_block(moects_fp4_format f) { return f == MOECTS_FP4_NVFP4 ? 16 : 32; }

#endif
