/* moects.h: the public C API of libmoects (DESIGN.md "Kernels from Python, and from any language").
 *
 * What the `moects` CLI does, as a library: enumerate cases, build a case's deterministic inputs,
 * compute the reference output of a recipe, judge a kernel's output (verdict plus the diagnostics the
 * TAP prints), write results.json that `moects gate`, `coverage` and `merge` read, and serve as the
 * worker of `moects run --kernel-py` (a Python process that hands its kernels to the runner).
 *
 * Conventions (stable from MOECTS_API_VERSION 1 on):
 * - Every name starts with moects_; handles are opaque and freed by their *_free function (NULL is a
 *   no-op). Strings and tensors a handle returns are owned by it and live until it is freed.
 * - Errors: functions returning int give 0 on success and -1 on failure; functions returning a
 *   pointer give NULL on failure. Either way moects_errmsg() then holds one line naming the file and
 *   field ("cases/models/x.json: hidden_size: not an integer", "case 17: out of range (12 cases)").
 *   The message is per thread and kept until the next failing call of that thread.
 * - Dtype names are the safetensors ones: "BF16" (bfloat16 bits as uint16), "F32", "I32", "I64", "U8"
 *   (E2M1 codes packed two per byte, element 2j in the low nibble; UE8M0 / UE4M3 scale bytes).
 *   Tensors are host memory, row-major (C order), little-endian, dims outermost first.
 * - Thread safety: handles are not shared between threads without the caller's locking; distinct
 *   handles may be used from distinct threads.
 * Include directory: `pkg-config --cflags moects` (this header, moects_kernel.h, moects_types.h). */
#ifndef MOECTS_H
#define MOECTS_H
#include <stddef.h>
#include <stdint.h>

#include "moects_kernel.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define MOECTS_API __attribute__((visibility("default")))
#else
#define MOECTS_API
#endif

/* Version of this API (bumped on an incompatible change; additions keep it). */
#define MOECTS_API_VERSION 1

/* ---------------------------------------------------------------- library ---- */

/* The library's version, "0.1" (the moects release; results.json's moects_version). */
MOECTS_API const char *moects_version(void);
/* MOECTS_API_VERSION of the loaded library (a binding checks it against the one it was written for). */
MOECTS_API int moects_api_version(void);
/* The last error of the calling thread, one line; "" when none. */
MOECTS_API const char *moects_errmsg(void);
/* The registry root (the directory holding cases/models, cases/regressions): $MOECTS_ROOT, else the
 * installed share/moects, else the source tree the library was built from, else ".". */
MOECTS_API const char *moects_default_root(void);

/* ---------------------------------------------------------------- cases ---- */

typedef struct moects_caselist moects_caselist; /* an ordered list of cases (registry order) */

/* The cases of the built-in registry under root (NULL: moects_default_root()), or, with config set,
 * the cases derived from one model file: a registry file (cases/models/NAME.json) or a raw Hugging
 * Face config.json of any family (DESIGN.md "Cases"). tp / ep (0: every derived layout) keep only
 * layout tp<tp> or ep<ep>; tp and ep > 0 together is an error. tiers: comma-separated "smoke",
 * "full", "large", "all" (NULL: "smoke", from a config "smoke,full"); a case is kept when it belongs
 * to one of them. globs: nglobs fnmatch(3) patterns on case ids (a case is kept when one matches;
 * nglobs 0: all), and with tiers NULL an id named exactly is kept whatever its tier: the rule of
 * `moects list` (cases/select.c), which selects the same ids for the same words. The order is the
 * order `moects list` prints. Errors: unreadable or invalid model/regression files (the message names
 * the file and field), a bad tier name, tp with ep. An empty result is not an error. */
MOECTS_API moects_caselist *moects_cases_select(const char *root, const char *config, int tp, int ep,
                                                const char *tiers, const char *const *globs, size_t nglobs);
MOECTS_API void moects_caselist_free(moects_caselist *l);
MOECTS_API size_t moects_caselist_count(const moects_caselist *l);
/* Index of case id in l, or -1 (no error set). */
MOECTS_API long moects_caselist_find(const moects_caselist *l, const char *id);

/* Case i's stable id ("ep_gather/kimi-k3/tp8/t128"); NULL (error) when i is out of range. */
MOECTS_API const char *moects_case_id(const moects_caselist *l, size_t i);
/* Case i's op: "ep_gather", "fp4_gemm" or "moe_gemm". NULL when i is out of range. */
MOECTS_API const char *moects_case_op(const moects_caselist *l, size_t i);
/* Case i as one JSON object, for a Python dict: {"id", "op", "model", "layout", "source", "tiers":
 * ["smoke", ...], "data": "exact"|"adversarial"|"nan"|"negzero", "shape": {...}} where shape holds the
 * op's shape struct by its C field names (moects_types.h) with enums as names: ep_gather {"T", "k",
 * "M_sum", "H", "E_global", "id_dtype", "out_dtype", "has_expert_map", "ep_size", "ep_rank",
 * "routing"}; fp4_gemm {"M", "N", "K", "format": "mxfp4"|"nvfp4", "scale_layout": "linear"|
 * "swizzled_128x4", "out_dtype", "gemm"}; moe_gemm {"E", "M", "N", "K", "format": "mxfp4"|"nvfp4"|
 * "w4a8"|"w4a16", "b_format", "rows": "contiguous"|"masked"|"offsets", "align", "a_scale_block",
 * "a_scale_f32", "scale_layout", "out_dtype", "gemm"}; M_sum and moe_gemm's M (rows of A; masked:
 * max_m) are known only once the inputs are built (-1 here).
 * Integers are JSON integers (int64). NULL when i is out of range. */
MOECTS_API const char *moects_case_json(const moects_caselist *l, size_t i);

/* ---------------------------------------------------------------- case data ---- */

/* One case's inputs (and, on demand, its references), built for a seed. */
typedef struct moects_casedata moects_casedata;

/* A tensor's description; data points into the owning handle (NULL when bytes == 0). */
typedef struct {
    const char *name;  /* "x", "topk_ids", "topk_weights", "input_index", "expert_map";
                          "a", "b", "sa", "sb"; moe_gemm also "alpha", "gs_a", "gs_b", "m_indices",
                          "masked_m", "expert_offsets" (moects_moe_gemm_args); "out" for the output */
    const char *dtype; /* "BF16", "F32", "I32", "I64", "U8"; "F64" (an exposed intermediate) */
    int ndim;          /* 1 to 3; 0: a moe_gemm tensor the case's format and row layout do not have
                          (its pointer in moects_moe_gemm_args is NULL) */
    int64_t dims[4];   /* elements per dim, outermost first (unused dims 0) */
    const void *data;  /* host memory, C order; NULL for an output description or when bytes == 0 */
    size_t bytes;      /* product of dims times the element size */
} moects_tensor_info;

/* Build case i's inputs for seed (the default seed of `moects run` is MOECTS_DEFAULT_SEED): the same
 * bytes as every run of that case with that seed (DESIGN.md "Determinism"). Errors: i out of range, a
 * case the generator cannot satisfy, out of host memory ("out of host memory (N bytes for TENSOR)"). */
#define MOECTS_DEFAULT_SEED 1u
MOECTS_API moects_casedata *moects_casedata_build(const moects_caselist *l, size_t i, uint64_t seed);
MOECTS_API void moects_casedata_free(moects_casedata *d);
/* The case's id and its shape JSON (as moects_case_json, with M_sum / M filled in). */
MOECTS_API const char *moects_casedata_id(const moects_casedata *d);
MOECTS_API const char *moects_casedata_json(const moects_casedata *d);
MOECTS_API uint64_t moects_casedata_seed(const moects_casedata *d);
/* Number of input tensors, in the kernel ABI's argument order (ep_gather: x [M_sum, H] BF16,
 * topk_ids [T, k] I32|I64, topk_weights [T, k] F32, input_index [T, k] I32, expert_map [E_global] I32
 * (bytes 0 without a map); fp4_gemm: a [M, ceil(K/2)] U8, b [N, ceil(K/2)] U8, sa and sb: U8 scales,
 * [rows, nkb] when linear, [bytes] when swizzled_128x4; moe_gemm: moects_moe_gemm_args's ten, one
 * absent when the format or row layout has none: ndim 0). */
MOECTS_API int moects_casedata_ninputs(const moects_casedata *d);
/* Input j (0 .. ninputs-1) into *t. -1 when j is out of range. */
MOECTS_API int moects_casedata_input(const moects_casedata *d, int j, moects_tensor_info *t);
/* The output's name "out", dtype and dims (ep_gather [T, H], fp4_gemm [M, N], moe_gemm [M, N] or masked
 * [E, max_m, N]; BF16 or F32); data NULL. moe_gemm inputs: A [M, .] or masked [E, max_m, .], B [E, N, K/2],
 * linear scales [.., nkb] (swizzled: bytes, sb [E, bytes per expert]). */
MOECTS_API int moects_casedata_output(const moects_casedata *d, moects_tensor_info *t);
/* The exposed intermediates a kernel of d's op may write (fused_moe: g1_out [T*k, N1] F32, act_out
 * [T*k, I] F32, mid_out [T*k, I] F64, y_out [T*k, H] F32; moects_fused_moe_args): their number (0:
 * none), and stage j's name, dtype and dims into *t (data NULL; bytes its size). -1 on an error. */
MOECTS_API int moects_casedata_nstages(const moects_casedata *d);
MOECTS_API int moects_casedata_stage(const moects_casedata *d, int j, moects_tensor_info *t);
/* Scalars a kernel takes besides tensors, by name: "alpha" (fp4_gemm: 1 for MXFP4, 1/(gs_a*gs_b) in
 * FP32 for NVFP4), "gs_a", "gs_b" (NVFP4 global scales). -1 when the case has no such scalar. */
MOECTS_API int moects_casedata_scalar(const moects_casedata *d, const char *name, double *value);

/* The reference output under recipe ("ep_gather.fma_v1", "ep_gather.muladd_v1", "ep_gather.exact_v1",
 * "fp4_gemm.blockwise_v1", "fp4_gemm.exact_v1"; NULL: the op's exact_v1), computed once per recipe
 * by the bit-exact CPU reference (ref/). *t describes it (name "reference", dtype and dims of the
 * output, data owned by d). Errors: unknown recipe for the op, the reference refusing the case, out
 * of host memory. */
MOECTS_API int moects_casedata_reference(moects_casedata *d, const char *recipe, moects_tensor_info *t);

/* ---------------------------------------------------------------- judging ---- */

/* A verdict with its diagnostics (one moects_result of a run). */
typedef struct moects_judgement moects_judgement;

/* Judge output bytes (host memory, the output's dtype and dims, moects_casedata_output) of kernel k on
 * case d exactly as `moects run` does: k->recipe set: identical bits under that recipe (PASS_EXACT);
 * else k->acc.bits > 0: per-element bounds (PASS_BOUNDED, once the runner has it); else k->tol against
 * exact_v1 (PASS_TOLERANCE). k->name names the kernel in the result (k->bug marks a mutant); k->run
 * and k->supports are not called. bytes must equal the output's size. Errors (NULL): size mismatch,
 * unknown recipe, the reference refusing the case. */
MOECTS_API moects_judgement *moects_judge(moects_casedata *d, const moects_kernel *k, const void *out,
                                          size_t bytes);
/* moects_judge with the kernel's exposed intermediates (docs/fused_moe.md "Exposed intermediates"):
 * stages[j] the host bytes of stage j as moects_casedata_stage describes it (NULL, j >= nstages, or
 * no valid row written: not given). After the output's verdict, an exact claim that failed names
 * the first stage whose values left the exact reference's; a bounded claim's stages are held to their
 * enclosures (a failure names the first stage outside its enclosure, the element and its interval)
 * and its GEMM stages (g1_out, y_out) to the accumulation check of its class, which can fail a
 * passing output. The runner judges a kernel with MOECTS_KERNEL_INTERMEDIATES by the same rule. */
MOECTS_API moects_judgement *moects_judge_stages(moects_casedata *d, const moects_kernel *k, const void *out,
                                                 size_t bytes, const void *const *stages, int nstages);
/* A verdict without an output: UNSUPPORTED (the kernel's supports() refused: reason), FAIL_CRASH (the
 * kernel raised or returned an error: reason), FAIL_TIMEOUT, FAIL_OOB_WRITE (a write found outside the
 * output: reason names side and byte offset), SKIP (reason). verdict: one of those names. */
MOECTS_API moects_judgement *moects_judge_outcome(const moects_casedata *d, const moects_kernel *k,
                                                  const char *verdict, const char *reason);
MOECTS_API void moects_judgement_free(moects_judgement *j);
/* "PASS_EXACT", "PASS_BOUNDED", "PASS_TOLERANCE", "PASS_TIE", "FAIL_MISMATCH", "FAIL_OOB_WRITE",
 * "FAIL_NONDETERMINISTIC", "FAIL_BATCH_VARIANT", "FAIL_CRASH", "FAIL_TIMEOUT", "UNSUPPORTED", "SKIP". */
MOECTS_API const char *moects_judgement_verdict(const moects_judgement *j);
/* 1 for a PASS_* verdict, 0 for FAIL_*, -1 for UNSUPPORTED and SKIP (neither). */
MOECTS_API int moects_judgement_passed(const moects_judgement *j);
/* The TAP's YAML diagnostics block of this result (from "---" to "...", unindented, newline-ended):
 * verdict, kernel, recipe, mismatches, max_ulp, first_mismatch, calc_diff, acc_check (a bounded verdict's
 * accumulation check), seed, reason, repro. */
MOECTS_API const char *moects_judgement_text(const moects_judgement *j);
/* The command line that reproduces this result alone: PROGRAM run --kernel K --seed S --out
 * reports/repro/ID EXTRA CASE (program NULL: "moects"; extra NULL, or the options the kernel needs placed
 * before CASE, shell-quoted by the caller, e.g. " --kernel-py '/abs/test_mine.py:kernel'"). It becomes
 * the repro line of moects_judgement_text (which is rendered again) until the next call. The string
 * is j's (valid until the next call or moects_judgement_free); NULL on no j or out of memory. Added
 * within API version 1: a binding that may load an older library looks it up (dlsym) and does without. */
MOECTS_API const char *moects_judgement_repro(moects_judgement *j, const char *program, const char *extra);
/* The result as the JSON object results.json holds for it. */
MOECTS_API const char *moects_judgement_json(const moects_judgement *j);

/* ---------------------------------------------------------------- results.json ---- */

typedef struct moects_resultset moects_resultset;

/* An empty set of results; filter: the selection, as the options that made it (results.json
 * "filter"; NULL: ""); seed: the run's seed. */
MOECTS_API moects_resultset *moects_resultset_new(const char *filter, uint64_t seed);
MOECTS_API void moects_resultset_free(moects_resultset *s);
/* Append a copy of j's result (order kept: add them case-major as a run does); a result for a
 * (kernel, case) already in s replaces that one, in its place. */
MOECTS_API int moects_resultset_add(moects_resultset *s, const moects_judgement *j);
MOECTS_API size_t moects_resultset_count(const moects_resultset *s);
/* Write results.json at path (temp file + rename: never half-written), with moects_version, git
 * commit (of the working directory, "unknown" outside a checkout), date and machine filled in. The
 * file is what `moects run --out DIR` writes: gate, coverage and merge read it unchanged. */
MOECTS_API int moects_resultset_write(const moects_resultset *s, const char *path);
/* Read a results.json (errors name the file and field). */
MOECTS_API moects_resultset *moects_resultset_read(const char *path);

/* ---------------------------------------------------------------- safetensors ---- */

/* `moects export`: write the cases of l matching (all of l) as DIR/<file>.safetensors, one per case,
 * file = the case id with '/' replaced by "__": tensors = the inputs (their names), "ref.<recipe>"
 * for each reference written (every recipe the op defines), metadata (all strings): "moects.case_id",
 * "moects.op", "moects.shape" (the JSON of moects_casedata_json), "moects.seed", "moects.recipes",
 * "moects.version", "moects.dtypes" (JSON name -> dtype). Returns the number of files written, -1 on
 * error (nothing half-written: each file via temp + rename). */
MOECTS_API long moects_export(const moects_caselist *l, uint64_t seed, const char *dir);
/* `moects verify`: judge DIR/<file>.out.safetensors (tensor "out", the output's dtype and dims) beside
 * each exported file with kernel description k (name, recipe / acc / tol); a missing .out file is
 * FAIL_CRASH "no output written". Results appended to s (may be NULL). Returns the number of failing
 * cases, -1 on error (a malformed file: one line naming the file and field). */
MOECTS_API long moects_verify(const char *dir, const moects_kernel *k, moects_resultset *s);
/* `moects case add` (issue 32): check the safetensors file of an op's inputs (export's names and
 * layouts, its moects.case, moects.seed, moects.recipe and moects.scalars metadata; ref.* tensors
 * ignored) against the op's contract (dtype and shape of every input, ids in range, no NaN scale),
 * then store it as a local case in cases_dir (NULL: $MOECTS_CASES_DIR, else
 * moects_default_root()/cases/local): each tensor once by content in cases_dir/blobs, a manifest per
 * case. name: a label in the id (1 to 64 of a-z 0-9 . - _; NULL: none). The case's id,
 * "<op prefix>/local/[name-]<16 hex digits>", goes into id (idlen bytes; 192 hold any). Returns 0
 * when added, 1 when that case was there already, -1 when refused: moects_errmsg() is the one line
 * "FILE: TENSOR: the rule broken", and nothing was written. Added within API version 1: a binding
 * that may load an older library looks it up (dlsym) and does without. */
MOECTS_API int moects_case_add(const char *file, const char *cases_dir, const char *name, char *id, size_t idlen);

/* ---------------------------------------------------------------- layout adapters ---- */

/* The layout adapters (docs/adapters.md): a case's tensors in an engine's layout and back, each a
 * named and versioned convention ("w13.interleave1.v1", "scales.nvfp4.swizzle_128x4.v1",
 * "fp4.hi_first.v1"). A tensor is seen as its canonical (moects) layout [batch][rows][cols] of bytes:
 * w13.* permute the rows = N1 = 2I rows of W13 ([gate | up] in moects) of each batch (expert), cols
 * = one row's bytes (BF16 W13: 2H; MXFP4 codes: H/2; their scales: H/32; b13: 4); scales.* take
 * linear block scales [batch][rows][K-blocks] to the 128x4 tiles of cuBLASLt/CUTLASS per batch,
 * padding 0xFF (the NaN scale); fp4.* swap the nibbles of packed E2M1 bytes. inverse = 1 goes back:
 * inverse(forward(x)) == x bit for bit. */
MOECTS_API size_t moects_adapter_count(void);
/* Adapter i's name, and one line naming the engine convention and the source it follows (NULL when i
 * is out of range). */
MOECTS_API const char *moects_adapter_name(size_t i);
MOECTS_API const char *moects_adapter_convention(size_t i);
/* Bytes moects_adapt writes for [batch][rows][cols] in that direction; -1 for an unknown name or a
 * shape the adapter cannot take (odd rows for w13.*, rows not a multiple of 16 for interleave8). */
MOECTS_API int64_t moects_adapter_bytes(const char *name, int inverse, int64_t batch, int64_t rows,
                                        int64_t cols);
/* Adapt src (src_bytes: moects_adapter_bytes of the other direction) into dst (dst_bytes:
 * moects_adapter_bytes of this one); they must not overlap. 0, or -1 (unknown name, bad shape, a
 * size that is not the one expected; dst untouched). */
MOECTS_API int moects_adapt(const char *name, int inverse, int64_t batch, int64_t rows, int64_t cols,
                            const void *src, size_t src_bytes, void *dst, size_t dst_bytes);

/* ---------------------------------------------------------------- worker ---- */

/* Inside a kernel's run() or supports() called by moects_worker_serve (the calling thread only): the
 * task's case as moects_case_json (M_sum / moe_gemm M filled in; "" outside a task), and its tensors described as
 * moects_casedata_input does, j = 0 .. ninputs-1, or j = -1 for the output "out". data is what run()
 * gets: host pointers for a kernel of device MOECTS_DEVICE_CPU, device pointers for
 * MOECTS_DEVICE_CUDA (the output is writable memory, filled with a NaN pattern before run()).
 * moects_task_stream: the cudaStream_t run() gets (NULL for CPU kernels). -1 / NULL outside a task or
 * for j out of range (in supports(), the data pointers are NULL). */
MOECTS_API const char *moects_task_json(void);
MOECTS_API int moects_task_tensor(int j, moects_tensor_info *t);
MOECTS_API void *moects_task_stream(void);

/* The body of a `moects run --kernel-py` worker process: the runner started this process by fork and
 * exec (`$MOECTS_PYTHON -m moects._worker --moects-worker RFD WFD ...`) before any CUDA
 * initialisation; the process builds its kernels (Python callbacks behind moects_kernel descriptors,
 * abi_version 2, last_error giving the exception text) and calls this, which reads the runner's
 * setup and tasks from rfd, runs each task exactly as the C workers do (inputs, reference, the
 * kernel, comparison; kernels by name from the built-ins, the runner's --kernel-lib libraries
 * loaded again by path, and kernels[0..n)), and writes results to wfd. Returns when the runner
 * closes rfd: 0, or 2 after writing the reason to stderr when the setup cannot be honoured (a kernel
 * name the runner sent that this process lacks, a different libmoects build). Never returns on a
 * sticky CUDA error (the process exits and the runner starts another). */
MOECTS_API int moects_worker_serve(int rfd, int wfd, const moects_kernel *const *kernels, size_t n);

#ifdef __cplusplus
}
#endif
#endif
