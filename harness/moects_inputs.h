/* moects_inputs.h: the input tensors of a case (DESIGN.md "Determinism", "Cases").
 * Every byte comes from a counter-based generator keyed by (seed, case id, tensor name,
 * element index), so a case built alone and inside a full run gets identical bytes. */
#ifndef MOECTS_INPUTS_H
#define MOECTS_INPUTS_H
#include <stddef.h>
#include <stdint.h>

#include "moects_cases.h"
#include "moects_types.h"

/* Tensor slots, in this order, of the two ops. */
enum { MOECTS_EG_X, MOECTS_EG_IDS, MOECTS_EG_W, MOECTS_EG_IDX, MOECTS_EG_MAP, MOECTS_EG_NT };
enum { MOECTS_FG_A, MOECTS_FG_B, MOECTS_FG_SA, MOECTS_FG_SB, MOECTS_FG_NT };
/* moe_gemm: names = the moects_moe_gemm_args fields */
enum {
    MOECTS_MG_A, MOECTS_MG_SA, MOECTS_MG_B, MOECTS_MG_SB, MOECTS_MG_ALPHA, MOECTS_MG_GS_A, MOECTS_MG_GS_B,
    MOECTS_MG_M_INDICES, MOECTS_MG_MASKED_M, MOECTS_MG_EXPERT_OFFSETS, MOECTS_MG_NT
};
/* fused_moe: names = the moects_fused_moe_args fields (out aside) */
enum {
    MOECTS_FM_X, MOECTS_FM_IDS, MOECTS_FM_W, MOECTS_FM_MAP, MOECTS_FM_W13, MOECTS_FM_W13S, MOECTS_FM_W2,
    MOECTS_FM_W2S, MOECTS_FM_B13, MOECTS_FM_B2, MOECTS_FM_MID_GS, MOECTS_FM_W13A, MOECTS_FM_W2A, MOECTS_FM_NT
};
/* moe_route: names = the moects_moe_route_args inputs */
enum { MOECTS_MR_LOGITS, MOECTS_MR_BIAS, MOECTS_MR_NT };
/* ep_dispatch_combine: the ranks' tensors stacked in rank order (names = moects_ep_dispatch_combine_args') */
enum { MOECTS_ED_X, MOECTS_ED_IDS, MOECTS_ED_W, MOECTS_ED_EXPERT_FIRST, MOECTS_ED_SCALE, MOECTS_ED_TOKEN_FIRST, MOECTS_ED_NT };
/* Rank count bound of ep_dispatch_combine cases (ref/moects_edc.h's MOECTS_EDC_MAX_WORLD). */
#define MOECTS_ED_MAX_WORLD 64
#define MOECTS_INPUTS_MAX 13 /* fused_moe's 13 (NVFP4 weights' alphas the last two) */

/* One guarded buffer.
 * Host (device 0): one anonymous shared mapping (a forked child's output writes are seen by its parent):
 *   [PROT_NONE guard][canary lo][data][canary hi < 64 B][PROT_NONE guard]
 *   data ends 64-byte aligned at most 63 bytes before the upper guard page, so a write past the end
 *   faults at the write (or lands in the checked tail canary); the lower canary (>= 4 KiB and one
 *   row) is checked after the run, and a write further down faults in the lower guard.
 * Device (device 1): one allocation [canary lo][data][canary hi], each canary >= 4 KiB and one
 *   row, filled with a byte pattern and read back after the kernel. */
typedef struct {
    const char *name;    /* "x", "a", ..., "out" */
    int device;          /* 0 host, 1 CUDA */
    unsigned char *base; /* the mapping (host) or the allocation (device) */
    size_t map_len;      /* host: bytes of the mapping; device: of the allocation */
    size_t guard;        /* host: bytes of each PROT_NONE guard */
    unsigned char *data; /* what the kernel gets; NULL when bytes == 0 */
    size_t bytes;
    size_t lo, hi;       /* canary bytes before and after data */
    unsigned char canary;
} moects_guarded;

typedef struct {
    const char *name; /* "x", "topk_ids", "topk_weights", "input_index", "expert_map",
                         "a", "b", "sa", "sb"; moe_gemm: "a", "sa", "b", "sb", "alpha", "gs_a",
                         "gs_b", "m_indices", "masked_m", "expert_offsets" */
    void *host;       /* NULL when bytes == 0 (and for expert_map without a map) */
    size_t bytes;
    moects_guarded g; /* host is g.data: the tensor sits between guard pages (harness/run/guard.c) */
    int borrowed;     /* 1: g is another moects_inputs' tensor (a batch's weights, moects__input_borrow),
                         which outlives this one and owns the mapping: moects__inputs_free leaves it */
} moects_tensor;

/* ep_dispatch_combine's args over all ranks (the op's launcher, harness/ops/ep_ranks.c, cuts each rank's
 * own from them): a's tensors stacked in rank order, its outputs the case's one output buffer's parts:
 * out [T_total, H], recv_x [recv_first[world], H], recv_src [recv_first[world]], recv_count [world]. */
typedef struct {
    moects_ep_dispatch_combine_args a;
    const int64_t *recv_first; /* [world + 1]: rank r's received rows at [recv_first[r], recv_first[r + 1]) */
} moects__ed_args;

typedef union {
    moects_ep_gather_args eg;
    moects_fp4_gemm_args fg;
    moects_moe_gemm_args mg;
    moects_fused_moe_args fm;
    moects_moe_route_args mr;
    moects__ed_args ed;
} moects_op_args;

typedef struct {
    moects_op op;
    moects_ep_gather_shape eg;
    moects_fp4_gemm_shape fg;
    moects_moe_gemm_shape mg;
    moects_fused_moe_shape fm;
    moects_moe_route_shape mr;
    moects_ep_dispatch_combine_shape ed; /* rank -1: the case as a whole (T, recv_cap: the most of any rank) */
    moects_tensor t[MOECTS_INPUTS_MAX];
    int nt;
    moects_dtype out_dtype;
    int64_t out_elems;
    size_t out_bytes;
    /* ep_gather facts (DESIGN.md derivation) */
    int64_t n_local, first_local; /* this EP rank's experts: [first_local, first_local+n_local) */
    int64_t valid_slots;          /* slots that read a row of x */
    /* fp4_gemm facts */
    float gs_a, gs_b;             /* NVFP4 encode global scales 448*6/amax (1 for MXFP4) */
    float alpha;                  /* 1 (MXFP4) or 1.0f/(gs_a*gs_b) in FP32 (NVFP4) */
    int pooled;                   /* bulk tensors tiled from a random pool (large cases) */
    /* moe_gemm facts: out_elems = rows * N, rows = mg.M (contiguous, offsets) or mg.E * mg.M (masked) */
    int64_t rows;
    unsigned char *row_valid;     /* [rows]: 1 when the row is compared (invalid rows are the kernel's) */
    int32_t *row_expert;          /* [rows]: the local expert of a compared row, -1 for the others */
    int64_t valid_rows;
    /* ep_dispatch_combine facts: the reference's received rows per rank, and where the output buffer's
     * parts start (bytes): recv_x, recv_src, recv_count */
    int64_t ed_recv_first[MOECTS_ED_MAX_WORLD + 1];
    size_t ed_off_recv_x, ed_off_recv_src, ed_off_recv_count;
} moects_inputs;

/* Key of one tensor's stream: SplitMix64 of (seed, FNV-1a(case id), FNV-1a(tensor name)). */
uint64_t moects__input_key(uint64_t seed, const char *case_id, const char *tensor);
/* Element i of that stream: the SplitMix64 output at counter i (Steele et al. 2014). */
uint64_t moects__input_u64(uint64_t key, uint64_t i);

/* Bulk tensors with more elements than this are tiled from a 2^20-element random pool (one
 * memcpy per row at a row-keyed offset) instead of hashed per element. */
#define MOECTS_POOL_MIN_ELEMS (1ll << 26)

/* Build the inputs of case c (host memory). Returns 0; -1 for a case the generator cannot
 * satisfy (message "case ID: field: problem" in err); -2 when memory runs out (err says how
 * many bytes of which tensor). in is zeroed first and must be freed with moects__inputs_free. */
int moects__inputs_build(const moects_case *c, uint64_t seed, moects_inputs *in, char *err,
                        size_t errlen);
/* The same with the pooled-generation threshold given (tests). */
int moects__inputs_build_ex(const moects_case *c, uint64_t seed, int64_t pool_min_elems,
                           moects_inputs *in, char *err, size_t errlen);
void moects__inputs_free(moects_inputs *in);

/* ---- local cases (tier local, harness/ops/local.c) ---- */
/* A tensor from outside the generator (a safetensors file, a blob): its ABI name, safetensors dtype
 * ("BF16", "I32", "U8"...), dims (ndim of them) and bytes over data. */
typedef struct {
    const char *name, *dtype;
    int ndim;
    const int64_t *dims;
    size_t bytes;
    const void *data;
} moects__src_tensor;
/* The name of a blob of bytes: XXH3-128 of its content, 32 lower-case hex digits. */
void moects__blob_name(const void *data, size_t bytes, char hex[33]);
/* Replace the bytes of every tensor slot of built inputs in (case c) with src's tensor of its name, then
 * check the op's contract on them (moects__op_def.check). Each slot the case has must be in src with
 * its dtype and dims (moects__tensor_describe), and src must hold nothing else. 0, or -1 with "WHERE:
 * TENSOR: the rule broken" in err. */
int moects__inputs_replace(const moects_case *c, moects_inputs *in, const moects__src_tensor *src, size_t n,
                           const char *where, char *err, size_t errlen);
/* The scalars of a case file or manifest ("alpha", "gs_a", "gs_b" in sc, a JSON object) over the generator's. */
struct json_t;
void moects__local_scalars(struct json_t *sc, moects_inputs *in);
/* What the generator builds a local case's slots from: its manifest's (c->file) seed and c under the
 * id of the case the tensors were captured as (the generator is keyed by the id). 0, or -1 with err. */
int moects__local_gen(const moects_case *c, uint64_t *seed, moects_case *gen, char *err, size_t errlen);
/* Built inputs of local case c take its manifest's tensors (blobs mapped read-only, each checked
 * against its content hash) and scalars. 0, -1 with err, -2 out of memory. */
int moects__local_fill(const moects_case *c, moects_inputs *in, char *err, size_t errlen);

/* The op's args with tensor i at ptr[i] (host or device) and the output at out. */
void moects__inputs_bind(const moects_inputs *in, void *const ptr[MOECTS_INPUTS_MAX], void *out,
                        moects_op_args *args);
/* &in->eg, &in->fg or &in->mg. */
const void *moects__inputs_shape(const moects_inputs *in);

/* Byte offset of scale (row r, K-block kb) in the cuBLASLt/CUTLASS 128x4 swizzled layout
 * (DESIGN.md "Scale layouts") with nkb K-blocks per row, and the layout's size for rows. */
size_t moects__swizzle_offset(int64_t r, int64_t kb, int64_t nkb);
size_t moects_swizzle_bytes(int64_t rows, int64_t nkb);

/* The kernel shape of a moe_gemm case without building its inputs (coverage, supports()): M from
 * moects__moe_expected_rows (contiguous: each expert padded to align; masked: the fullest expert's
 * estimate, a multiple of 128). Zeroed for another op. */
void moects__moe_case_shape(const moects_case *c, moects_moe_gemm_shape *s);

/* The kernel shape of a fused_moe case (harness/ops/fused_moe.c). Zeroed for another op. */
void moects__fused_case_shape(const moects_case *c, moects_fused_moe_shape *s);

/* Rows of each local expert of a moe_gemm case: c->counts cycled when c->n_counts > 0, else the
 * slots that the ep_gather routing rule (c->routing over c->T tokens, c->k slots, c->E_global
 * experts, rank c->ep_rank of c->ep_size; uniform, skewed, zero-expert, hot-rank) puts on each of
 * the rank's c->E experts, drawn from (seed, case id) as an ep_gather case's topk_ids are.
 * cnt[c->E]. 0, or -1 with "case ID: field: problem" in err. */
int moects__moe_counts(const moects_case *c, uint64_t seed, int64_t *cnt, char *err, size_t errlen);

#endif
