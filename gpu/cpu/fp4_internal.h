/* fp4_internal.h: internals shared by the CPU FP4 GEMM kernels under test (gpu/cpu/fp4_*.c). */
#ifndef MOECTS_FP4_INTERNAL_H
#define MOECTS_FP4_INTERNAL_H
#include <stddef.h>

#include "moects_kernel.h"

#include "mutation.h"

/* Checks the shape fields every FP4 kernel needs (dims >= 0, known format, layout, out dtype);
 * 1, or 0 with a one-line reason. */
int moects__fp4_shape_ok(const moects_fp4_gemm_shape *s, char *why, size_t why_len);

/* fp4_gemm.blockwise_v1 by a per-(m, n) loop (gpu/cpu/fp4_blockwise.c), with mutation m
 * (mutation.h; NULL or MOECTS__MUT_NONE: honest). Host pointers. Returns 0, or -1 for a bad shape
 * or out of memory. */
int moects__fp4_blockwise_run(const moects__mut *m, const void *shape, const void *args);

/* supports() of the dequantize-then-sgemm kernels (fp4_dequant_sgemm.c, fp4_splitk.c): the common
 * shape checks, and M, N, K within cblas_sgemm's int. */
int moects__fp4_sgemm_supports(const void *shape, char *why, size_t why_len);

/* n outputs of a dequantize-then-sgemm kernel: c[j] * alpha (c NULL when K = 0: the empty sum, +0)
 * stored at elements o .. o + n - 1 of out, as FP32 or as BF16 by RNE (gpu/cpu/fp4_dequant_sgemm.c). */
void moects__store_scaled(moects_dtype dt, void *out, int64_t o, const float *c, int64_t n, float alpha);

/* Decoding tables of one FP4 format, this directory's own (OCP MX v1.0 sec. 5.3.3 E2M1, 5.4.1 UE8M0
 * with 0xFF NaN; E4M3 as cuda_fp8.h, 0x7F/0xFF NaN): E2M1 code -> value, scale code -> value. */
typedef struct {
    float e2m1[16], scale[256];
} moects__fp4_luts;
void moects__fp4_luts_init(moects_fp4_format f, moects__fp4_luts *l);

/* Rows [r0, r0 + nr) of packed E2M1 codes [rows][ceil(K/2)] with block scales sc (layout, the
 * format's block g) dequantized to FP32 [nr][K]: value * scale, one FP32 multiply each. */
void moects__fp4_dequant_rows(const moects__fp4_luts *l, const uint8_t *codes, const uint8_t *sc,
                              moects_scale_layout layout, int64_t g, int64_t r0, int64_t nr, int64_t K, float *out);
#endif
