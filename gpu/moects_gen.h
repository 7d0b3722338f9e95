/* moects_gen.h: the input generator's per-element twin (gpu/gpuref/gen_elem.h, issue 31 item 2) over
 * a whole stream, on the host and on the CUDA device, bit-identical to harness/ops/'s generator.
 * Internal (moects__ names). */
#ifndef MOECTS_GEN_H
#define MOECTS_GEN_H
#include <stddef.h>
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif

/* A stream's parameters: kind (GE_KIND_*), key (moects__input_key), data mode d (moects_data), FP4
 * format fmt (moects_fp4_format, for GE_KIND_SCALE), cols (GE_KIND_BF16: the row width for the column
 * of each element; GE_KIND_WEIGHT: slots a token), n elements from element 0. */
typedef struct {
    int kind, d, fmt;
    int64_t cols;
    uint64_t key, n;
} moects_gen_stream;

/* Bytes per element of a stream of kind k (8, 4, 2 or 1); 0 for an unknown kind. */
size_t moects__gen_elem_bytes(int kind);
/* Stream s into host memory out (n * moects__gen_elem_bytes bytes), on the host. 0, or -1 (unknown
 * kind, cols < 1). */
int moects__gen_fill_host(const moects_gen_stream *s, void *out);
/* Stream s into device memory dev_out on the current CUDA device (gpu/cuda/gen_twin.cu; one thread an
 * element, the worker's stream, synchronous). 0, or -1 with why (a CUDA error, a build without CUDA:
 * "built without CUDA"). */
int moects__gen_fill_cuda(const moects_gen_stream *s, void *dev_out, char *why, size_t whylen);

#ifdef __cplusplus
}
#endif
#endif
