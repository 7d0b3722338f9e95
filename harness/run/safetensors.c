/* safetensors.c: the safetensors format (harness/safetensors.h), header JSON through jansson. */
#include "safetensors.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cases_internal.h"
#include "moects_harness.h"

size_t moects__st_dtype_size(const char *d)
{
    static const struct { const char *n; size_t s; } t[] = {
        {"BOOL", 1}, {"U8", 1}, {"I8", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1}, {"U16", 2}, {"I16", 2}, {"F16", 2},
        {"BF16", 2}, {"U32", 4}, {"I32", 4}, {"F32", 4}, {"U64", 8}, {"I64", 8}, {"F64", 8}};
    for (size_t i = 0; i < sizeof t / sizeof *t; i++)
        if (!strcmp(d, t[i].n)) return t[i].s;
    return 0;
}

void moects__st_free(moects__st_file *f)
{
    for (size_t i = 0; i < 2 * f->nmeta; i++) free(f->meta[i]);
    free(f->meta);
    free(f->t);
    if (f->buf) munmap(f->buf, f->len);
    memset(f, 0, sizeof *f);
}

/* The whole file mapped read-only (a 1-10 GB case's tensors are never copied into a heap buffer). */
static int load_file(const char *path, moects__st_file *f, char *err, size_t errlen)
{
    errno = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0) return snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno)), -1;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s: cannot read: %s", path, errno ? strerror(errno) : "not a regular file");
        return close(fd), -1;
    }
    f->len = (size_t)st.st_size;
    void *p = f->len ? mmap(NULL, f->len, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
    close(fd);
    if (p == MAP_FAILED) return f->len = 0, snprintf(err, errlen, "%s: cannot map: %s", path, strerror(errno)), -1;
    f->buf = p;
    return 0;
}

/* One tensor entry of the header into t; offsets into *b, *e. */
static int read_entry(const char *path, const char *name, json_t *v, moects__st_tensor *t, uint64_t *b, uint64_t *e,
                      char *err, size_t errlen)
{
    json_t *dt = json_object_get(v, "dtype"), *sh = json_object_get(v, "shape"), *off = json_object_get(v, "data_offsets");
    if (!json_is_object(v)) return snprintf(err, errlen, "%s: %s: not an object", path, name), -1;
    if (strlen(name) >= sizeof t->name) return snprintf(err, errlen, "%s: %s: tensor name too long", path, name), -1;
    snprintf(t->name, sizeof t->name, "%s", name);
    if (!json_is_string(dt) || !moects__st_dtype_size(json_string_value(dt)))
        return snprintf(err, errlen, "%s: %s.dtype: missing or unknown", path, name), -1;
    snprintf(t->dtype, sizeof t->dtype, "%s", json_string_value(dt));
    if (!json_is_array(sh) || json_array_size(sh) > MOECTS__ST_MAX_DIMS)
        return snprintf(err, errlen, "%s: %s.shape: not an array of at most %d integers", path, name, MOECTS__ST_MAX_DIMS), -1;
    unsigned __int128 elems = 1;
    t->ndim = (int)json_array_size(sh);
    for (int i = 0; i < t->ndim; i++) {
        json_t *d = json_array_get(sh, (size_t)i);
        if (!json_is_integer(d) || json_integer_value(d) < 0)
            return snprintf(err, errlen, "%s: %s.shape[%d]: not a non-negative integer", path, name, i), -1;
        t->dims[i] = json_integer_value(d);
        elems *= (uint64_t)t->dims[i];
        if (elems > ((unsigned __int128)1 << 62)) return snprintf(err, errlen, "%s: %s.shape: too many elements", path, name), -1;
    }
    if (!json_is_array(off) || json_array_size(off) != 2 || !json_is_integer(json_array_get(off, 0)) ||
        !json_is_integer(json_array_get(off, 1)) || json_integer_value(json_array_get(off, 0)) < 0 ||
        json_integer_value(json_array_get(off, 1)) < json_integer_value(json_array_get(off, 0)))
        return snprintf(err, errlen, "%s: %s.data_offsets: not [begin, end] with 0 <= begin <= end", path, name), -1;
    *b = (uint64_t)json_integer_value(json_array_get(off, 0));
    *e = (uint64_t)json_integer_value(json_array_get(off, 1));
    if ((unsigned __int128)(*e - *b) != elems * moects__st_dtype_size(t->dtype))
        return snprintf(err, errlen, "%s: %s.data_offsets: %llu bytes, shape and dtype need %llu", path, name,
                        (unsigned long long)(*e - *b), (unsigned long long)(elems * moects__st_dtype_size(t->dtype))), -1;
    t->bytes = (size_t)(*e - *b);
    return 0;
}

static int read_meta(const char *path, json_t *m, moects__st_file *f, char *err, size_t errlen)
{
    if (!json_is_object(m)) return snprintf(err, errlen, "%s: __metadata__: not an object", path), -1;
    f->meta = calloc(2 * json_object_size(m) + 1, sizeof *f->meta);
    if (!f->meta) return snprintf(err, errlen, "%s: out of memory", path), -1;
    const char *k;
    json_t *v;
    json_object_foreach(m, k, v) {
        if (!json_is_string(v)) return snprintf(err, errlen, "%s: __metadata__.%s: not a string", path, k), -1;
        f->meta[2 * f->nmeta] = strdup(k);
        f->meta[2 * f->nmeta + 1] = strdup(json_string_value(v));
        f->nmeta++;
        if (!f->meta[2 * f->nmeta - 2] || !f->meta[2 * f->nmeta - 1]) return snprintf(err, errlen, "%s: out of memory", path), -1;
    }
    return 0;
}

typedef struct {
    uint64_t b, e;
    size_t i;
} span;

static int by_begin(const void *x, const void *y)
{
    const span *a = x, *b = y;
    return a->b < b->b ? -1 : a->b > b->b ? 1 : a->e < b->e ? -1 : a->e > b->e;
}

/* Offsets sorted: each tensor starts where the previous ended, the last ends at the buffer's end. */
static int check_cover(const char *path, moects__st_file *f, span *s, uint64_t data_len, char *err, size_t errlen)
{
    qsort(s, f->n, sizeof *s, by_begin);
    uint64_t at = 0;
    for (size_t i = 0; i < f->n; i++) {
        if (s[i].b != at)
            return snprintf(err, errlen, "%s: %s.data_offsets: begins at %llu, the previous tensor ends at %llu (%s)", path,
                            f->t[s[i].i].name, (unsigned long long)s[i].b, (unsigned long long)at,
                            s[i].b > at ? "a hole" : "overlap"), -1;
        at = s[i].e;
    }
    if (at != data_len)
        return snprintf(err, errlen, "%s: data_offsets: the tensors cover %llu bytes of a %llu-byte buffer", path,
                        (unsigned long long)at, (unsigned long long)data_len), -1;
    return 0;
}

static int parse_header(const char *path, moects__st_file *f, uint64_t hlen, char *err, size_t errlen)
{
    json_error_t je;
    json_t *h = json_loadb((const char *)f->buf + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, &je);
    if (!h || !json_is_object(h)) {
        json_decref(h);
        return snprintf(err, errlen, "%s: header: %s", path, h ? "not a JSON object" : je.text), -1;
    }
    size_t cap = json_object_size(h);
    f->t = calloc(cap + 1, sizeof *f->t);
    span *s = calloc(cap + 1, sizeof *s);
    int rc = f->t && s ? 0 : (snprintf(err, errlen, "%s: out of memory", path), -1);
    const char *k;
    json_t *v;
    json_object_foreach(h, k, v) {
        if (rc) break;
        if (!strcmp(k, "__metadata__")) {
            rc = read_meta(path, v, f, err, errlen);
            continue;
        }
        moects__st_tensor *t = &f->t[f->n];
        rc = read_entry(path, k, v, t, &s[f->n].b, &s[f->n].e, err, errlen);
        s[f->n].i = f->n;
        if (!rc) f->n++;
    }
    uint64_t data_len = f->len - 8 - hlen;
    if (!rc) rc = check_cover(path, f, s, data_len, err, errlen);
    for (size_t i = 0; !rc && i < f->n; i++) f->t[s[i].i].data = f->t[s[i].i].bytes ? f->buf + 8 + hlen + s[i].b : NULL;
    free(s);
    json_decref(h);
    return rc;
}

static int st_read(const char *path, moects__st_file *f, char *err, size_t errlen)
{
    memset(f, 0, sizeof *f);
    if (load_file(path, f, err, errlen)) return moects__st_free(f), -1;
    uint64_t hlen = 0;
    for (int i = 7; f->len >= 8 && i >= 0; i--) hlen = hlen << 8 | f->buf[i];
    if (f->len < 8 || hlen > MOECTS__ST_MAX_HEADER || hlen > f->len - 8) {
        snprintf(err, errlen, "%s: header length: %llu bytes in a %zu-byte file (limit %llu)", path,
                 (unsigned long long)hlen, f->len, MOECTS__ST_MAX_HEADER);
        return moects__st_free(f), -1;
    }
    if (hlen == 0 || f->buf[8] != '{') {
        snprintf(err, errlen, "%s: header: does not start with '{'", path);
        return moects__st_free(f), -1;
    }
    if (parse_header(path, f, hlen, err, errlen)) return moects__st_free(f), -1;
    return 0;
}

int moects__st_read(const char *path, moects__st_file *f, char *err, size_t errlen)
{
    if (st_read(path, f, err, errlen) == 0) return 0;
    moects__oneline(err); /* a JSON parser's "near '...'" and tensor names quote the file's bytes */
    return -1;
}

const moects__st_tensor *moects__st_find(const moects__st_file *f, const char *name)
{
    for (size_t i = 0; i < f->n; i++)
        if (!strcmp(f->t[i].name, name)) return &f->t[i];
    return NULL;
}

const char *moects__st_meta(const moects__st_file *f, const char *key)
{
    for (size_t i = 0; i < f->nmeta; i++)
        if (!strcmp(f->meta[2 * i], key)) return f->meta[2 * i + 1];
    return NULL;
}

/* The header JSON of n tensors laid out in order, padded with spaces to a multiple of 8 bytes. */
static char *header_json(const moects__st_tensor *t, size_t n, const char *const *kv, size_t nmeta, size_t *len)
{
    json_t *h = json_object();
    if (nmeta) {
        json_t *m = json_object();
        for (size_t i = 0; i < nmeta; i++) json_object_set_new(m, kv[2 * i], json_string(kv[2 * i + 1]));
        json_object_set_new(h, "__metadata__", m);
    }
    uint64_t at = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *sh = json_array();
        for (int d = 0; d < t[i].ndim; d++) json_array_append_new(sh, json_integer(t[i].dims[d]));
        json_object_set_new(h, t[i].name, json_pack("{ss so s[II]}", "dtype", t[i].dtype, "shape", sh, "data_offsets",
                                                    (json_int_t)at, (json_int_t)(at + t[i].bytes)));
        at += t[i].bytes;
    }
    char *s = json_dumps(h, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(h);
    if (!s) return NULL;
    size_t l = strlen(s), pad = (8 - l % 8) % 8;
    char *p = realloc(s, l + pad + 1);
    if (!p) return free(s), NULL;
    memset(p + l, ' ', pad);
    p[l + pad] = '\0';
    *len = l + pad;
    return p;
}

int moects__st_write(const char *path, const moects__st_tensor *t, size_t n, const char *const *kv, size_t nmeta,
                     char *err, size_t errlen)
{
    size_t hl = 0;
    char *h = header_json(t, n, kv, nmeta, &hl);
    char tmp[4200];
    if (!h) return snprintf(err, errlen, "%s: out of memory", path), -1;
    if (moects__report_tmp(path, tmp, sizeof tmp, err, errlen)) return free(h), -1;
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        free(h);
        return snprintf(err, errlen, "%s: cannot create: %s", path, strerror(errno)), -1;
    }
    unsigned char le[8];
    for (int i = 0; i < 8; i++) le[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    int ok = fwrite(le, 1, 8, f) == 8 && fwrite(h, 1, hl, f) == hl;
    for (size_t i = 0; ok && i < n; i++) ok = !t[i].bytes || fwrite(t[i].data, 1, t[i].bytes, f) == t[i].bytes;
    ok = fclose(f) == 0 && ok;
    free(h);
    if (!ok || rename(tmp, path) != 0) {
        snprintf(err, errlen, "%s: write failed: %s", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}
