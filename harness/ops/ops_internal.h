/* ops_internal.h: what the op files of harness/ops/ share (inputs.c, describe.c), and nothing outside
 * the room uses. */
#ifndef MOECTS_OPS_INTERNAL_H
#define MOECTS_OPS_INTERNAL_H
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "moects.h"
#include "moects_cases.h"
#include "moects_inputs.h"
#include "moects_op.h"

#define POOL_ELEMS (1ll << 20) /* elements of the random pool large tensors are tiled from */

/* Draw i of a tensor's stream (moects__input_u64). */
static inline uint64_t moects__draw(uint64_t key, uint64_t i) { return moects__input_u64(key, i); }

/* Tensor slot i of in, between guard pages (zero bytes: NULL); in->op set. 0, or -2 with "case ID:
 * out of host memory (N bytes for NAME)" in err. */
int moects__input_alloc(moects_inputs *in, int i, const char *name, size_t bytes, const char *id, char *err,
                        size_t errlen);
/* Tensor slot i of dst is src's tensor i, the same read-only mapping (no copy): a batch-invariance
 * batch's weights, which its case's inputs hold and outlive it (task.c frees the batch first). A
 * copy would fault in every page of the source, also the never-written weights of the experts no
 * slot routes to (fused_moe: 1.4 GB for an FP8 block-128 DeepSeek-V3 case). */
void moects__input_borrow(moects_inputs *dst, int i, const moects_inputs *src);
float moects__f32_bits(uint32_t u);
/* fused_moe's moects__op_def.stages (harness/ops/fused_stages.c). */
int moects__fused_stages(const moects_inputs *in, moects_recipe r, const moects_acc_class *cls, const void *const *got,
                         moects__stages *st, char *why, size_t cap);
/* One BF16 activation (bits) of column col for data mode d from a draw u (ep_gather x, moe_gemm W4A16 A). */
uint16_t moects__bf16_input(moects_data d, uint64_t u, int64_t col);
/* Expert j of token t under c's routing: distinct from prev[0..j), not excl, not in [xlo, xhi). */
int64_t moects__pick_expert(const moects_case *c, uint64_t key, const int64_t *prev, int64_t t, int64_t j,
                            int64_t first_local, int64_t excl, int64_t xlo, int64_t xhi);
/* A block-scale code of format f (UE8M0 for MXFP4, UE4M3 for NVFP4) for data mode d from a draw u. */
uint8_t moects__fp4_scale_code(moects_fp4_format f, moects_data d, uint64_t u);

/* The inputs of a fused_moe case (harness/ops/fused_inputs.c; moects__op_def.build). */
int moects__fused_build(const moects_case *c, uint64_t seed, int64_t pool_min, moects_inputs *in, char *err,
                        size_t errlen);
/* A fused_moe case's tokens inside a larger batch (harness/ops/fused_inputs.c; moects__op_def.batch). */
int moects__fused_batch(const moects_case *c, uint64_t seed, const moects_inputs *in, moects_inputs *big,
                        moects__batch *b, char *err, size_t errlen);

/* fused_moe local cases (harness/ops/fused_local.c; moects__op_def.shape_parse, local_shape, check). */
int moects__fused_shape_parse(const char *path, json_t *sh, moects_case *c, char *err, size_t errlen);
int moects__fused_local_shape(const moects_case *c, moects_inputs *in, const moects__src_tensor *src, size_t n,
                              char *err, size_t errlen);
int moects__fused_contract(const moects_case *c, const moects_inputs *in, const char *where, char *err, size_t errlen);

/* ep_dispatch_combine (harness/ops/ep_dispatch_combine.c's entry): its judge (ep_dispatch_judge.c;
 * moects__op_def.judge) and its kernels' launch, one process a rank over the CPU transport (ep_ranks.c;
 * moects__op_def.launch). */
int moects__ed_judge(const moects_inputs *in, const char *recipe, const void *got, const void *want, moects_result *r);
int moects__ed_launch(const moects_kernel *k, const void *shape, const void *args, void *stream);

/* ---- describe.c: tensor descriptions and shape JSON ---- */
#define MOECTS__DT_U8 ((moects_dtype)0) /* bytes: codes, UE8M0 / E4M3 scales ("U8") */
/* "BF16", "F32", "I32", "I64"; "U8" for anything else. */
const char *moects__abi_dtype(moects_dtype d);
/* t as a 2-D [a, b] tensor of dt (b 0 and ndim set to 1 by the caller for 1-D). */
void moects__tinfo_2d(moects_tensor_info *t, moects_dtype dt, int64_t a, int64_t b);
/* "mxfp4"/"nvfp4", "linear"/"swizzled_128x4". */
const char *moects__fp4_format_name(moects_fp4_format f);
const char *moects__scale_layout_name(moects_scale_layout l);
/* Field readers of a case file's "shape" object: 0, or -1 with "PATH: moects.case: shape.F: problem". */
int moects__json_int(const char *path, json_t *o, const char *field, int64_t *v, char *err, size_t errlen);
int moects__json_dtype(const char *path, const char *field, json_t *o, moects_dtype *d, char *err, size_t errlen);
int moects__json_fp4(const char *path, json_t *sh, moects_fp4_format *f, moects_scale_layout *l, char *err,
                     size_t errlen);

#endif
