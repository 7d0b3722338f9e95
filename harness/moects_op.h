/* moects_op.h: the op table (issue 26, DESIGN.md "The house"). Everything the harness knows of an op
 * is one moects__op_def, filled by harness/ops/<op>.c; harness/ops/ops.def lists the ops. Every other
 * place that depends on the op calls the table (tests/unit/harness_layers.py counts op switches outside
 * harness/ops/: none). Adding an op: its file in ops/, one line in ops.def, its references in ref/ and
 * its derivation in cases/ (docs/extending.md). Internal: moects__ names. */
#ifndef MOECTS_OP_H
#define MOECTS_OP_H
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "moects.h"
#include "moects_cases.h"
#include "moects_diag.h"
#include "moects_harness.h"
#include "moects_inputs.h"
#include "moects_layer.h"
#include "moects_ref.h"

/* A kernel's shape argument (what run() and supports() get), for any op. */
typedef union {
    moects_ep_gather_shape eg;
    moects_fp4_gemm_shape fg;
    moects_moe_gemm_shape mg;
    moects_fused_moe_shape fm;
    moects_moe_route_shape mr;
    moects_ep_dispatch_combine_shape ed;
} moects__kshape;

/* A case's rows inside a larger batch (batch invariance: DESIGN.md "Batch invariance"): where each row
 * of the case's output sits in the batch's output, and the two batch sizes for the diagnostics. */
typedef struct {
    int64_t *row_of;  /* [rows]: the row of the batch's output holding the case's output row; -1: not
                         compared (moe_gemm padding, rows past masked_m). malloc'd */
    int64_t rows;     /* the case's output rows (moects_out_geom.rows) */
    int64_t n, n_big; /* the batch sizes: the case's and the larger batch's tokens (fused_moe) or
                         valid grouped-GEMM rows (moe_gemm) */
    const char *unit; /* "tokens", "rows" */
} moects__batch;

/* ---- exposed intermediates (fused_moe: docs/fused_moe.md "Exposed intermediates") ---- */
#define MOECTS_STAGES_MAX 4
/* The byte a stage buffer holds where the kernel wrote nothing (a NaN pattern, float and double,
 * that no arithmetic makes): a stage with no valid element written counts as not exposed. */
#define MOECTS__STAGE_POISON 0xFF

/* One stage a kernel may expose, [rows, cols] of float (f64: double) elements, and its reference. */
typedef struct {
    const char *name;  /* in the op's order: "gemm1", "act", "mid", "gemm2" */
    const char *arg;   /* its field of the op's args, the Python key: "g1_out", "act_out", ... */
    size_t arg_off;    /* offsetof(moects_op_args, that field): where a harness binds its buffer */
    int64_t cols;
    int f64;           /* double elements, else float */
    /* A GEMM's output stage: the type its last rounding makes (MOECTS_BF16 or MOECTS_F32: the
     * accumulation check's output rounding) and the reduction length; 0 otherwise. */
    moects_dtype round;
    int64_t K;
    /* The reference (the op's stages() given the kernel's stages): exact values want, or an enclosure
     * [lo, hi] (NaN in lo: NaN expected; lo -Inf and hi +Inf: no claim); st: the accumulation check's
     * inputs (x NULL: not checked). malloc'd, each NULL when not computed. */
    void *want, *lo, *hi;
    moects_bound_stats st;
} moects__stage;

typedef struct {
    int n;              /* stages */
    int64_t rows;       /* every stage's rows */
    int64_t group;      /* row r is slot r % group of token r / group */
    uint8_t *valid;     /* [rows]: 1 where the row is compared (a valid slot); malloc'd */
    moects__stage s[MOECTS_STAGES_MAX];
} moects__stages;

/* Frees what st holds (its reference and valid), keeping the geometry. */
void moects__stages_free(moects__stages *st);
/* Bytes of stage i's buffer. */
static inline size_t moects__stage_bytes(const moects__stages *st, int i)
{
    return (size_t)(st->rows * st->s[i].cols) * (st->s[i].f64 ? 8 : 4);
}

typedef struct moects__op_def {
    moects_op op;
    const char *name; /* "ep_gather": results.json, case files, kernel ids; = ops.def's name */

    /* ---- a case, before its inputs exist ---- */
    /* The kernel shape of case c (supports(), coverage; moe_gemm: M from the expected rows). */
    void (*case_shape)(const moects_case *c, moects__kshape *s);
    /* c's shape as the JSON object of a case file's and moects_case_json's "shape" (the ABI's field
     * names, enums by name); in: the built inputs (fix ep_gather M_sum, moe_gemm M) or NULL (-1). */
    json_t *(*shape_json)(const moects_case *c, const moects_inputs *in);
    /* The reverse, from a case file's "shape" object into c: 0; 1 when the rows per expert are not in
     * the shape but in a local case's tensors (moe_gemm: local_shape reads them; `verify` takes the
     * registry's case of that id); or -1 with "PATH: moects.case: shape.FIELD: problem" in err. NULL:
     * the case is the built-in registry's case of that id. */
    int (*shape_parse)(const char *path, json_t *sh, moects_case *c, char *err, size_t errlen);
    /* The recipe names of c, the first the one `verify` uses unless told (the built-in kernels'
     * recipe); returns their count (at most 3). */
    int (*recipes)(const moects_case *c, const char **names);
    /* Rough work in element operations (the runner's order, largest first). */
    double (*cost)(const moects_case *c);
    /* Seconds of one run (a kernel on a case, its share of inputs and reference) per cost unit on
     * one CPU worker: the rough estimate of `moects run`'s first line (harness/run/progress.c says
     * how they were fitted). */
    double secs_per_cost;
    /* Bytes of the main buffers, an upper bound (the memory budget of parallel workers). */
    double (*bytes)(const moects_case *c);
    /* 2MNK of a GEMM (the reference's slot weight); NULL: the reference runs on one thread. */
    double (*ref_flops)(const moects_case *c);
    /* coverage: the shape key ("N=7168 K=2048") and the case's dims one by one ("OP|K=2048"). */
    void (*shape_key)(const moects_case *c, char *dst, size_t cap);
    int (*dims)(const moects_case *c, const char *op, char out[3][96]);
    /* coverage: the variants of the op's ids split into columns ("fp4_gemm.mxfp4/" as "MXFP4"); NULL none. */
    const char *const *split_prefix, *const *split_label;

    /* ---- its inputs (harness/moects_inputs.h) ---- */
    /* Fill in (zeroed) from (c, seed): 0; -1 the generator cannot satisfy c; -2 out of memory (err). */
    int (*build)(const moects_case *c, uint64_t seed, int64_t pool_min, moects_inputs *in, char *err,
                 size_t errlen);
    const void *(*shape)(const moects_inputs *in); /* &in->eg, &in->fg or &in->mg */
    /* The op's args with tensor i at ptr[i] and the output at out (absent tensors NULL). */
    void (*bind)(const moects_inputs *in, void *const ptr[MOECTS_INPUTS_MAX], void *out, moects_op_args *args);
    /* Bytes of one row of input slot i, or of the output (i = -1): the guard's minimum canary. */
    size_t (*row_bytes)(const moects_inputs *in, int i);
    /* Input j's dtype and dims with row structure, per the ABI (t holds its name, data and bytes; dims
     * left unset: its bytes, 1-D): 0, or 1 when the format or layout has no such tensor. The output's
     * dims (t holds name, dtype, bytes, ndim 2). */
    int (*describe)(const moects_inputs *in, int j, moects_tensor_info *t);
    void (*describe_out)(const moects_inputs *in, moects_tensor_info *t);
    /* The case's scalars (fp4_gemm "alpha", "gs_a", "gs_b") as a JSON object; NULL: none. */
    json_t *(*scalars)(const moects_inputs *in);
    /* The op's contract on input values a case from outside the generator must keep (a local case,
     * `moects case add`): ids in range, no NaN scale unless the case's data is nan. 0, or -1 with
     * "WHERE: TENSOR: the rule broken" in err. NULL: no rule beyond dtype and shape. */
    int (*check)(const moects_case *c, const moects_inputs *in, const char *where, char *err, size_t errlen);
    /* A local case's shape facts its own tensors decide, not the generator (ep_gather: M_sum, the rows of
     * a captured x, which an engine pads its own way): before the tensors replace the generated ones,
     * re-size in's slots to them (moe_gemm: the rows per expert of m_indices, masked_m or
     * expert_offsets). 0; -1 with "TENSOR: the rule broken" in err (the caller puts the file or case
     * before it); -2 out of memory (err). NULL: every dim comes from the case. */
    int (*local_shape)(const moects_case *c, moects_inputs *in, const moects__src_tensor *src, size_t n,
                       char *err, size_t errlen);

    /* ---- reference, bound, verdict ---- */
    /* The reference under recipe r into a's output: 0, or -1 refused. */
    int (*reference)(const moects_inputs *in, const moects_op_args *a, moects_recipe r);
    /* blockwise_v1 and exact_v1 from one pass, for a case whose recipes() lists at least two; NULL: none. */
    int (*reference_pair)(const moects_inputs *in, const moects_op_args *a, void *blockwise, void *exact);
    /* The GPU reference under recipe r into a's output (host), in mode (moects_gpuref_mode, gpu/moects_gpuref.h:
     * the device, or a test stand-in on the host): 0 done, bit-identical to reference() (docs/gpu_reference.md);
     * 1 this case or recipe is not exact on the GPU path, -1 an error (why says which): the case takes the CPU
     * path. NULL: the op has none (every case takes the CPU path). Issue 31. */
    int (*reference_gpu)(const moects_inputs *in, const moects_op_args *a, moects_recipe r, int mode, char *why,
                         size_t whylen);
    /* Per-element bounds of accumulation class cls (and the accumulation check's inputs, st); NULL:
     * the op has no bounded claim. 0, or -1. */
    int (*bound)(const moects_inputs *in, const moects_op_args *a, const moects_acc_class *cls, double *bound,
                 const moects_bound_stats *st);
    int64_t (*reduction_k)(const moects_inputs *in); /* the GEMM's K of a bounded case */
    /* The output's coordinates for the diagnostics (moects_out_geom, harness/moects_diag.h). */
    void (*geometry)(const moects_inputs *in, moects_out_geom *g);
    /* Why a kernel's claim of recipe (bounded: with an accumulation class) cannot be judged on c
     * ("which W4A16 does not have ..."), or NULL. */
    const char *(*claim_refused)(const moects_case *c, moects_recipe recipe, int bounded);
    /* A bounded claim of a layer recipe (fused_moe): per element the interval [lo, hi] (out_dtype,
     * [out_elems] each) every admissible implementation lies in, and its widths; NULL: the op has
     * none. 0, or -1. */
    int (*enclosure)(const moects_inputs *in, const moects_op_args *a, moects_recipe r, const moects_acc_class *cls,
                     void *lo, void *hi, moects_layer_tightness *tight);
    /* An op whose output is not one tensor compared element by element (moe_route: ids compared as
     * the kernel's recipe says, ties, weights): the verdict of one run's output got against want (the
     * reference under recipe, the kernel's string) into r: verdict, reason, mismatches, first
     * mismatch; returns 1 when the claim lets two runs differ (ties or slots in any order), else 0.
     * NULL: the element-wise judge. */
    int (*judge)(const moects_inputs *in, const char *recipe, const void *got, const void *want, moects_result *r);
    /* Batch invariance (a kernel with MOECTS_KERNEL_BATCH_INVARIANT): into big (zeroed) the inputs of
     * a larger batch that holds case c's rows (in, built from seed) at other positions, beside rows of
     * the same generator under another seed (moects__batch_seed), every other tensor (the weights) in's
     * bytes; where each row went into b. 0; -1 the op cannot (err); -2 out of memory (err). On an
     * error the caller frees big and b->row_of. NULL: the op has no batch. */
    int (*batch)(const moects_case *c, uint64_t seed, const moects_inputs *in, moects_inputs *big, moects__batch *b,
                 char *err, size_t errlen);
    /* Exposed intermediates (a kernel with MOECTS_KERNEL_INTERMEDIATES): into st (zeroed) the stages'
     * geometry and valid rows; with got (got[i]: the kernel's stage i, NULL where it has none) also
     * their reference under recipe r: exact values (cls NULL: an exact claim), or the enclosures of a
     * bounded claim of class cls with the accumulation check's inputs of the GEMM stages (GEMM2's from
     * the kernel's own intermediate). 0; -1 the reference refused (why says so); -2 out of memory. On
     * an error st is freed. NULL: the op has none. */
    int (*stages)(const moects_inputs *in, moects_recipe r, const moects_acc_class *cls, const void *const *got,
                  moects__stages *st, char *why, size_t cap);

    /* ---- its kernels' call ---- */
    /* An op whose kernel runs as several processes (ep_dispatch_combine: one a rank): k's call on the
     * case's shape and args (bind's, over every rank), in place of k->run (moects__kernel_call). 0, or
     * non-zero as run() returns. NULL: k->run is called once. */
    int (*launch)(const moects_kernel *k, const void *shape, const void *args, void *stream);

    /* ---- --perf ---- */
    const char *perf_unit, *perf_key; /* "GB/s" "gbps" (bytes moved) or "TFLOP/s" "tflops" (2MNK) */
    /* Bytes moved by the kernel; or, for a GEMM, -1 with its M, N, K in mnk. */
    double (*perf_bytes)(const moects_inputs *in, long mnk[3]);
} moects__op_def;

/* The table entry of op, or NULL for an op no entry has. */
const moects__op_def *moects__op(moects_op op);
/* Every entry, in ops.def's order; *n their count. */
const moects__op_def *const *moects__ops(size_t *n);
/* The same as moects__op(in->op) / moects__op(c->op), for inputs that were built (never NULL). */
const moects__op_def *moects__op_of_inputs(const moects_inputs *in);

/* The op's kernel shape of case c (zeroed, op unknown). */
void moects__case_kshape(const moects_case *c, moects__kshape *s);
/* The op's args over the host tensors of built inputs (tensors of no bytes: a non-NULL dummy, as the
 * references want) and the output at out. */
void moects__host_args(const moects_inputs *in, void *out, moects_op_args *a);
/* The seed the other rows of a batch-invariance batch are drawn from (the case's seed is seed). */
static inline uint64_t moects__batch_seed(uint64_t seed) { return seed ^ 0xba7c4ba7c4ba7c4bull; }

/* Kernel k's call on a case's shape and args: its op's launch where it has one, else k->run. */
int moects__kernel_call(const moects_kernel *k, const void *shape, const void *args, void *stream);

/* `moects __ep-rank FD RANK` (argv from "__ep-rank" on): a CUDA kernel's rank of an ep_dispatch_combine
 * launch, exec'd by the launcher (harness/ops/ep_rank_exec.c). Its result goes into the launch region;
 * returns 0, or 2 when FD holds no region. */
int moects__ed_rank_main(int argc, char **argv);

/* The reference of built inputs under recipe r into out (out_bytes): 0, or -1 refused. */
int moects__reference(const moects_inputs *in, moects_recipe r, void *out);

/* The op entries (harness/ops/<op>.c). */
#define MOECTS_OP_DEF(e, n, def) extern const moects__op_def def;
#include "ops/ops.def"
#undef MOECTS_OP_DEF

#endif
