/* moects_kernel.h: the C ABI every kernel under test implements (built-in CUDA kernels, CPU
 * stand-ins, mutants, and out-of-tree kernels loaded with `moects run --kernel-lib lib.so`).
 * DESIGN.md "GPU side". Include dirs: ref/ (moects_types.h) and gpu/. */
#ifndef MOECTS_KERNEL_H
#define MOECTS_KERNEL_H
#include "moects_types.h"

/* 2: adds `acc` (bounded verdicts) and `last_error`; 3: adds `split_k`; 4: adds `flags`. Older
 * kernels still load: the fields their version lacks read as zero. */
#define MOECTS_KERNEL_ABI_VERSION 4u

/* `flags` bits (ABI 4). BATCH_INVARIANT: each output row depends only on its own token's (or grouped
 * GEMM row's) inputs and the weights, never on the batch around it: the same rows run inside a larger
 * batch beside other tokens give the same bits, or the case is FAIL_BATCH_VARIANT (DESIGN.md "Batch
 * invariance"). fused_moe and moe_gemm check it. */
#define MOECTS_KERNEL_BATCH_INVARIANT 1u
/* INTERMEDIATES (fused_moe): the kernel can write the layer's intermediates when its args ask for them
 * (moects_fused_moe_args g1_out, act_out, mid_out, y_out; a field left unwritten is not judged). A
 * bounded claim's kernel runs once more with them asked on every case: each exposed stage is held to
 * its enclosure ("first stage outside its enclosure: act, slot (t 0, j 1), column 5: ...") and its
 * GEMMs' outputs (g1_out, y_out) to the accumulation check of the declared class; an exact claim's,
 * when it fails under MOECTS_STAGES=1, to the exact reference's ("first stage off: ..."; docs/fused_moe.md
 * "Exposed intermediates"). Kernels without the bit get NULL there and need not know the fields exist. */
#define MOECTS_KERNEL_INTERMEDIATES 2u

typedef enum {
    MOECTS_DEVICE_CPU = 0, /* run() gets host pointers */
    MOECTS_DEVICE_CUDA = 1 /* run() gets device pointers and a cudaStream_t */
} moects_device;

/* Bound used when a kernel declares no exact recipe: compared with the op's exact_v1 reference,
 * the case passes when calc_diff <= max_calc_diff and the max ULP distance <= max_ulp. */
typedef struct {
    double max_calc_diff;
    uint32_t max_ulp;
} moects_tolerance;

/* Accumulation class of a kernel that cannot name an exact recipe (DESIGN.md "Bounded verdicts"):
 * each output element is judged against its own forward error bound for summation in any order,
 * gamma(n) = n*u/(1-n*u), u = 2^-bits (RNE) or 2^(1-bits) (truncation). bits = 0: no class
 * declared (the kernel is judged by tol). */
typedef struct {
    uint32_t bits;      /* accumulator precision p in bits (24 for FP32 accumulation) */
    int truncation;     /* 0: round to nearest even, 1: truncation (some FP8 MMA accumulators) */
} moects_accumulation;

/* Split-K with a reduced-precision reduction, part of a bounded kernel's accumulation class
 * (DESIGN.md "Bounded verdicts"): K cut into at most max_splits pieces, each piece's partial formed in
 * the `acc` class and times alpha in FP32, the partials then added in `dtype` with RNE after each
 * addition. This is cuBLASLt's REDUCTION_SCHEME_OUTPUT_TYPE on a BF16 output, which cuBLAS may pick
 * unless the handle's math mode has CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION, and torch's
 * default allow_bf16_reduced_precision_reduction = True. max_splits 0: none (max_splits 2..256 with
 * dtype MOECTS_BF16 otherwise; the bound grows as gamma(max_splits - 1, 2^-8)). */
typedef struct {
    uint32_t max_splits;
    moects_dtype dtype; /* MOECTS_BF16 */
} moects_split_k;

/* The classes of a supports() refusal (DESIGN.md "Verdicts"), the word that opens its reason. */
typedef enum {
    MOECTS_REFUSE_UNSPECIFIED = 0, /* no class word: an out-of-tree kernel's free text */
    MOECTS_REFUSE_FORMAT,     /* "format": a number format, dtype or scale format the kernel lacks */
    MOECTS_REFUSE_SHAPE,      /* "shape": a dimension's size, alignment, divisibility or index range */
    MOECTS_REFUSE_LAYOUT,     /* "layout": a row, scale or expert layout (masked, swizzled, EP map) */
    MOECTS_REFUSE_ACTIVATION, /* "activation": fused_moe's activation or its constants */
    MOECTS_REFUSE_ROUTING,    /* "routing": a routing method, top-k or expert count (moe_route) */
    MOECTS_REFUSE_RECIPE,     /* "recipe": the kernel's declared recipe does not apply to the case */
    MOECTS_REFUSE_SCOPE,      /* "scope": a mutant takes only the cases its one bug can touch */
    MOECTS_REFUSE_RESOURCE,   /* "resource": a library, device or workspace the kernel needs */
    MOECTS_REFUSE_COUNT
} moects_refusal;

typedef struct moects_kernel {
    uint32_t abi_version; /* MOECTS_KERNEL_ABI_VERSION */
    const char *name;     /* unique, dotted: "cuda.ep_gather", "cpu.mutant.ep_gather.block_min1024" */
    moects_op op;
    moects_device device;
    const char *recipe;   /* "ep_gather.fma_v1", "fp4_gemm.blockwise_v1", ...; NULL: use tol */
    moects_tolerance tol; /* used only when recipe == NULL */
    const char *bug;      /* mutants: the one known bug, one line; NULL for real kernels */
    /* shape: moects_ep_gather_shape*, moects_fp4_gemm_shape* or moects_moe_gemm_shape* per op. Returns 1 if the kernel
     * takes the shape, else 0 with a one-line reason in why (UNSUPPORTED, a coverage gap) that opens
     * with its class, one word of moects_refusal's closed list and ": " ("shape: K not a multiple
     * of 32"); a reason without one is class "unspecified" in the reports. */
    int (*supports)(const void *shape, char *why, size_t why_len);
    /* args: moects_ep_gather_args*, moects_fp4_gemm_args* or moects_moe_gemm_args*; pointers live on `device`.
     * stream: cudaStream_t for CUDA kernels (NULL for CPU). Returns 0, or non-zero on a launch
     * or runtime error (reported as FAIL_CRASH). CUDA kernels need not synchronise. */
    int (*run)(const void *shape, const void *args, void *stream);
    /* ---- ABI version 2 ---- */
    /* recipe == NULL and acc.bits > 0: judged by per-element bounds against exact_v1 (PASS_BOUNDED)
     * instead of tol. */
    moects_accumulation acc;
    /* Optional: after run() returned non-zero, the kernel's own one-line error text (an exception,
     * a CUDA error name), reported in that case's diagnostics. NULL: none. */
    const char *(*last_error)(void);
    /* ---- ABI version 3 ---- */
    /* acc.bits > 0 and split_k.max_splits > 0: the accumulation class includes a split-K reduction
     * in split_k.dtype (above). */
    moects_split_k split_k;
    /* ---- ABI version 4 ---- */
    /* MOECTS_KERNEL_* bits (above); 0: none. */
    uint32_t flags;
} moects_kernel;

/* An out-of-tree kernel library exports this symbol: an array of *count kernel descriptors. */
typedef const moects_kernel *const *(*moects_kernels_fn)(size_t *count);
#define MOECTS_PLUGIN_SYMBOL "moects_plugin_kernels"

#endif
