/* safetensors.h: reading and writing safetensors files (huggingface/safetensors, the format its
 * README specifies): an 8-byte little-endian unsigned header length N, N bytes of a JSON object
 * {"NAME": {"dtype": "F32", "shape": [..], "data_offsets": [BEGIN, END]}, ..., "__metadata__":
 * {"key": "string value"}}, then the byte buffer: raw little-endian data, offsets relative to its
 * start, the tensors covering it without holes or overlaps. Used by moects export/verify and run
 * --dump (harness/cli/cmd_export.c). Internal: moects__ names. */
#ifndef MOECTS_SAFETENSORS_H
#define MOECTS_SAFETENSORS_H
#include <stddef.h>
#include <stdint.h>

#define MOECTS__ST_MAX_DIMS 8
/* The reference implementation's limit on the header (100 MB). */
#define MOECTS__ST_MAX_HEADER 100000000ull

typedef struct {
    char name[128];
    char dtype[8];  /* "BF16", "F32", "I32", "I64", "U8" (also read: F16, F64, I8, I16, U16, U32, U64, BOOL) */
    int ndim;
    int64_t dims[MOECTS__ST_MAX_DIMS];
    size_t bytes;
    const void *data; /* reader: into the file's buffer; writer: the caller's bytes (NULL when bytes 0) */
} moects__st_tensor;

typedef struct {
    moects__st_tensor *t;
    size_t n;
    char **meta; /* key, value, key, value ... (2 * nmeta strings) */
    size_t nmeta;
    unsigned char *buf; /* the whole file, mapped read-only (NULL for an empty file) */
    size_t len;
} moects__st_file;

/* Element size of a safetensors dtype name, 0 when unknown. */
size_t moects__st_dtype_size(const char *dtype);

/* Read and validate path: header length within the file and the limit, the header a JSON object
 * without duplicate keys, each tensor's dtype known, shape non-negative integers, data_offsets
 * [begin, end] with end - begin = elements * size, the tensors covering the buffer exactly (sorted
 * by offset: no hole, no overlap), metadata string to string. 0, or -1 with "PATH: FIELD: problem"
 * in err (field: the tensor name and key, "header", "__metadata__.KEY"). */
int moects__st_read(const char *path, moects__st_file *f, char *err, size_t errlen);
void moects__st_free(moects__st_file *f);
const moects__st_tensor *moects__st_find(const moects__st_file *f, const char *name);
/* The metadata value of key, NULL when absent. */
const char *moects__st_meta(const moects__st_file *f, const char *key);

/* Write n tensors (in order, 8-byte aligned buffer: the header padded with spaces) and nmeta
 * metadata pairs (kv: key, value, ...) to path through a temporary file and rename. 0, or -1 with
 * "PATH: problem" in err. */
int moects__st_write(const char *path, const moects__st_tensor *t, size_t n, const char *const *kv, size_t nmeta,
                     char *err, size_t errlen);

#endif
