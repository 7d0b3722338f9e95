/* fuzz_safetensors.c: libFuzzer target of moects__st_read (harness/run/safetensors.c): the safetensors
 * files that `moects verify` reads (an export, or outputs any program wrote beside it). Seeds:
 * fuzz/corpus/safetensors (an export of moects and files of the reference Python implementation).
 * An accepted file's tensors lie in its buffer, cover it without holes or overlaps in offset order,
 * have a known dtype and bytes = elements x element size; its metadata are strings. */
#include "fuzz_util.h"
#include "safetensors.h"

static int by_offset(const void *x, const void *y)
{
    const moects__st_tensor *a = x, *b = y;
    const unsigned char *pa = a->data, *pb = b->data;
    return pa < pb ? -1 : pa > pb;
}

static void check_file(const moects__st_file *f)
{
    if (f->len < 8) abort();
    uint64_t hl = 0;
    for (int i = 0; i < 8; i++) hl |= (uint64_t)f->buf[i] << (8 * i);
    const unsigned char *start = f->buf + 8 + hl, *end = f->buf + f->len, *at = start;
    moects__st_tensor *t = malloc((f->n + 1) * sizeof *t);
    if (!t) abort();
    memcpy(t, f->t, f->n * sizeof *t);
    qsort(t, f->n, sizeof *t, by_offset);
    for (size_t i = 0; i < f->n; i++) {
        size_t es = moects__st_dtype_size(t[i].dtype), el = 1;
        if (!es || t[i].ndim < 0 || t[i].ndim > MOECTS__ST_MAX_DIMS) abort();
        for (int d = 0; d < t[i].ndim; d++) {
            if (t[i].dims[d] < 0) abort();
            el *= (size_t)t[i].dims[d];
        }
        if (t[i].bytes != el * es) abort();
        if (t[i].bytes && (const unsigned char *)t[i].data != at) abort(); /* a hole or an overlap */
        at += t[i].bytes;
        if (at > end || !moects__st_find(f, t[i].name)) abort();
    }
    if (at != end) abort();
    for (size_t i = 0; i < 2 * f->nmeta; i++)
        if (!f->meta[i]) abort();
    free(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_path("case.safetensors");
    fuzz_write(path, data, size);
    moects__st_file f;
    memset(&f, 0, sizeof f);
    char err[1024] = "";
    if (moects__st_read(path, &f, err, sizeof err) != 0) {
        fuzz_check_err(err, path);
        moects__st_free(&f);
        return 0;
    }
    check_file(&f);
    moects__st_free(&f);
    return 0;
}
