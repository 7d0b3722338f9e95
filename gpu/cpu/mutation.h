/* mutation.h: mutation operators of the CPU mutant pool (gpu/cpu/pool.def, issue 13). A mutant is
 * an honest CPU loop (ep_gather_mutants.c, fp4_blockwise.c) with one operator switched on, and a
 * parameter (a cap, a bit width). The operators follow the classical mutation-testing classes:
 * boundary off by one, power-of-two caps on a dimension (a grid or a type that stops there),
 * index narrowing, rounding swapped for a neighbour, special values mis-decoded, loops shortened
 * or reordered, accumulators initialised differently. */
#ifndef MOECTS_MUTATION_H
#define MOECTS_MUTATION_H
#include <stdint.h>
#include <string.h>

typedef enum {
    MOECTS__MUT_NONE = 0,
    /* ---- ep_gather ---- */
    MOECTS__EPG_BLOCK_MIN1024, /* BLOCK_D = min(H, 1024), abort unless H % BLOCK_D == 0 */
    MOECTS__EPG_MULADD,        /* acc + x*w, two roundings (recipe fuses) */
    MOECTS__EPG_NEG1_ONLY,     /* only id == -1 invalid, expert_map read unchecked */
    MOECTS__EPG_IGNORE_MAP,    /* expert_map ignored */
    MOECTS__EPG_XOFF32,        /* x offset row*H + d in 32 bits */
    MOECTS__EPG_OFF_T,         /* last token skipped */
    MOECTS__EPG_OFF_H,         /* last column skipped */
    MOECTS__EPG_OFF_K,         /* last slot skipped */
    MOECTS__EPG_OFF_J0,        /* first slot skipped */
    MOECTS__EPG_OFF_ID0,       /* id > 0 valid (expert 0 dropped) */
    MOECTS__EPG_OFF_EMAP,      /* id <= E_global passes the map range check */
    MOECTS__EPG_CAP_T,         /* tokens >= p not written (grid capped at p) */
    MOECTS__EPG_CAP_H,         /* columns >= p not written */
    MOECTS__EPG_WRAP_ROW,      /* x row index kept modulo p */
    MOECTS__EPG_NARROW_T,      /* output token index in p bits (wraps) */
    MOECTS__EPG_NARROW_D,      /* column index in p bits (wraps) */
    MOECTS__EPG_NARROW_ROW,    /* x row index in p bits (wraps) */
    MOECTS__EPG_OOFF32,        /* out offset t*H + d in 32 bits */
    MOECTS__EPG_ID32,          /* int64 ids read as their low 32 bits */
    MOECTS__EPG_ROUND,         /* BF16 output rounding p (MOECTS__RND_*) instead of RNE */
    MOECTS__EPG_SATFINITE,     /* BF16 overflow saturates to the largest finite */
    MOECTS__EPG_ZERO_SIGN,     /* a zero result stored as +0 */
    MOECTS__EPG_EMPTY_NEGZERO, /* a token with no valid slot gets -0 */
    MOECTS__EPG_DAZ_X,         /* subnormal x read as zero */
    MOECTS__EPG_DAZ_W,         /* subnormal weight read as zero */
    MOECTS__EPG_F32_VIA_BF16,  /* FP32 output rounded through BF16 */
    MOECTS__EPG_REVERSE,       /* slots summed in descending order */
    MOECTS__EPG_ACC_NEGZERO,   /* acc starts at -0 */
    MOECTS__EPG_ACC_DOUBLE,    /* acc in double, rounded once at the end */
    MOECTS__EPG_ACC_CARRY,     /* acc not reset between tokens */
    MOECTS__EPG_ACC_FIRST,     /* acc starts at x*w of the first valid slot (rounded product) */
    /* ---- fp4_gemm ---- */
    MOECTS__FP4_NIBBLE_SWAP_B, /* B's nibbles swapped */
    MOECTS__FP4_NIBBLE_SWAP_A, /* A's nibbles swapped */
    MOECTS__FP4_TAIL_SCALE,    /* last K-block reads block nkb-2's scales */
    MOECTS__FP4_E4M3_AS_UE8M0, /* NVFP4 scales decoded as UE8M0 */
    MOECTS__FP4_SCALE_FTZ,     /* subnormal scales read as 0 */
    MOECTS__FP4_OFF_KB,        /* last K-block skipped */
    MOECTS__FP4_OFF_KB0,       /* first K-block skipped */
    MOECTS__FP4_OFF_KODD,      /* the odd last element of K dropped */
    MOECTS__FP4_OFF_M,         /* last row not written */
    MOECTS__FP4_OFF_N,         /* last column not written */
    MOECTS__FP4_SWZ_KTILES,    /* swizzle: K-tiles floor(nkb/4) instead of ceil */
    MOECTS__FP4_SWZ_ROW,       /* swizzle: (r/32)%4 and r%32 roles swapped */
    MOECTS__FP4_CAP_M,         /* rows >= p not written */
    MOECTS__FP4_CAP_N,         /* columns >= p not written */
    MOECTS__FP4_CAP_K,         /* K >= p ignored */
    MOECTS__FP4_NARROW_M,      /* A row index in p bits (wraps) */
    MOECTS__FP4_NARROW_N,      /* B row index in p bits (wraps) */
    MOECTS__FP4_DOFF32,        /* D offset m*N + n in 32 bits */
    MOECTS__FP4_ROUND,         /* BF16 output rounding p (MOECTS__RND_*) instead of RNE */
    MOECTS__FP4_UE8M0_FF_INF,  /* UE8M0 0xFF read as +Inf */
    MOECTS__FP4_UE8M0_FF_ZERO, /* UE8M0 0xFF read as 0 */
    MOECTS__FP4_E4M3_7F_480,   /* E4M3 0x7F read as 480 */
    MOECTS__FP4_NO_ALPHA,      /* alpha ignored */
    MOECTS__FP4_ALPHA_PER_BLOCK, /* alpha folded into each block's scale */
    MOECTS__FP4_MULADD,        /* acc + p*s, two roundings */
    MOECTS__FP4_REVERSE,       /* K-blocks summed in descending order */
    MOECTS__FP4_ACC_NEGZERO,   /* acc starts at -0 */
    MOECTS__FP4_ACC_DOUBLE,    /* acc in double, rounded once */
    MOECTS__FP4_ACC_CARRY,     /* acc not reset between columns */
    MOECTS__FP4_F32_VIA_BF16   /* FP32 output rounded through BF16 */
} moects__mut_op;

/* Rounding of FP32 -> BF16 a ROUND mutant uses. */
enum { MOECTS__RND_TIES_ZERO = 1, MOECTS__RND_TRUNC = 2, MOECTS__RND_TIES_AWAY = 3, MOECTS__RND_UP = 4 };

typedef struct {
    moects__mut_op op;
    int64_t p; /* the operator's parameter (cap, bits, rounding), 0 when none */
} moects__mut;

/* FP32 -> BF16 under rounding rnd (0: RNE); NaN stays a quiet NaN. RND_UP: toward +Inf. */
static inline uint16_t moects__bf16_round(float f, int rnd)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x0040u);
    uint32_t lo = u & 0xFFFFu, t = u >> 16, neg = u >> 31;
    switch (rnd) {
    case MOECTS__RND_TIES_ZERO: return (uint16_t)(t + (lo > 0x8000u));
    case MOECTS__RND_TRUNC: return (uint16_t)t;
    case MOECTS__RND_TIES_AWAY: return (uint16_t)(t + (lo >= 0x8000u));
    case MOECTS__RND_UP: return (uint16_t)(t + (!neg && lo));
    default: return (uint16_t)((u + 0x7FFFu + (t & 1u)) >> 16);
    }
}

/* Index i kept in `bits` bits (unsigned wrap), as a kernel with a narrow index type computes it. */
static inline int64_t moects__wrap_bits(int64_t i, int64_t bits)
{
    return bits >= 63 ? i : (int64_t)((uint64_t)i & ((1ull << bits) - 1));
}
#endif
