/* moects_types.h: dtypes, operand formats and the shape/argument structs of the kernel ops.
 * Shared by ref/ (the references) and gpu/moects_kernel.h (the kernel ABI). No dependencies. */
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
    MOECTS_OP_FP4_GEMM = 2   /* block-scaled FP4 GEMM, NT layout */
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

/* Scale block size along K: 32 for MXFP4, 16 for NVFP4. */
static inline int64_t moects_fp4_block(moects_fp4_format f) { return f == MOECTS_FP4_NVFP4 ? 16 : 32; }

#endif
