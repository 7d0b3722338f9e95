/* gen_twin.c: the input generator's twin on the host (gpu/moects_gen.h): gpu/gpuref/gen_elem.h over a
 * stream, the code the device runs (gpu/cuda/gen_twin.cu), so CTest compares it with harness/ops/'s
 * generator on every CPU build; and the device entry's answer in a build without CUDA. */
#include <stdio.h>

#include "gpuref/gen_elem.h"
#include "moects_gen.h"

size_t moects__gen_elem_bytes(int kind) { return kind >= 0 && kind < GE_NKINDS ? (size_t)ge_kind_size(kind) : 0; }

int moects__gen_fill_host(const moects_gen_stream *s, void *out)
{
    const size_t es = moects__gen_elem_bytes(s->kind);
    if (!es || s->cols < 1) return -1;
    for (uint64_t i = 0; i < s->n; i++) ge_elem(s->kind, s->key, s->d, s->fmt, s->cols, i, (unsigned char *)out + i * es);
    return 0;
}

#if !MOECTS_HAVE_CUDA
int moects__gen_fill_cuda(const moects_gen_stream *s, void *dev_out, char *why, size_t whylen)
{
    (void)s, (void)dev_out;
    snprintf(why, whylen, "built without CUDA");
    return -1;
}
#endif
