/* local.c: the inputs of a local case (issue 32, tier local: a case made from an engine's captured
 * tensors by `moects case add`, harness/run/localcase.c). Its manifest (c->file) names each input
 * tensor's dtype, shape and blob, a file of its raw bytes stored once by content (XXH3-128) in the
 * blobs/ folder beside the manifest and shared between cases. The generator builds the case's
 * tensor slots from the manifest's seed (the shape facts the op derives: EP split, rows), then each
 * slot gets the tensor's bytes, read through a read-only mapping of its blob, and the op's contract
 * (moects__op_def.check) is checked on them. The reference is always computed from these inputs. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "capi_internal.h"
#include "moects_op.h"
#include "ops_internal.h"

void moects__blob_name(const void *data, size_t bytes, char hex[33])
{
    XXH128_hash_t h = XXH3_128bits(data, bytes);
    snprintf(hex, 33, "%016" PRIx64 "%016" PRIx64, (uint64_t)h.high64, (uint64_t)h.low64);
}

/* Whether src is what the slot wants: the same dtype and dims. 0, or -1 with "WHERE: NAME: problem". */
static int same_layout(const moects_tensor_info *t, const moects__src_tensor *s, const char *where, char *err,
                       size_t errlen)
{
    int same = s->ndim == t->ndim;
    for (int d = 0; same && d < t->ndim; d++) same = s->dims[d] == t->dims[d];
    if (strcmp(s->dtype, t->dtype))
        return snprintf(err, errlen, "%s: %s: dtype %s, the op's contract wants %s", where, t->name, s->dtype, t->dtype), -1;
    if (!same || s->bytes != t->bytes) {
        char want[96] = "", got[96] = "";
        for (int d = 0; d < t->ndim; d++) snprintf(want + strlen(want), sizeof want - strlen(want), "%s%" PRId64, d ? ", " : "", t->dims[d]);
        for (int d = 0; d < s->ndim && d < 8; d++) snprintf(got + strlen(got), sizeof got - strlen(got), "%s%" PRId64, d ? ", " : "", s->dims[d]);
        return snprintf(err, errlen, "%s: %s: shape [%s] disagrees with the case's shape, which wants [%s]", where, t->name,
                        got, want), -1;
    }
    return 0;
}

int moects__inputs_replace(const moects_case *c, moects_inputs *in, const moects__src_tensor *src, size_t n,
                           const char *where, char *err, size_t errlen)
{
    const moects__op_def *op = moects__op_of_inputs(in);
    int used[64] = {0};
    char e[2048];
    if (op->local_shape && op->local_shape(c, in, src, n, e, sizeof e))
        return snprintf(err, errlen, "%s: %s", where, e), -1;
    for (int j = 0; j < in->nt; j++) {
        moects_tensor_info t;
        moects__tensor_describe(in, j, &t);
        if (!t.ndim) continue; /* a tensor this case has none of */
        size_t i = 0;
        while (i < n && strcmp(src[i].name, t.name)) i++;
        if (i == n && !t.bytes) continue; /* an empty one (ep_gather's expert_map without a map) may be left out */
        if (i == n) return snprintf(err, errlen, "%s: %s: missing (an input of %s)", where, t.name, op->name), -1;
        if (same_layout(&t, &src[i], where, err, errlen)) return -1;
        if (t.bytes) memcpy(in->t[j].host, src[i].data, t.bytes);
        if (i < 64) used[i] = 1;
    }
    for (size_t i = 0; i < n; i++)
        if (i >= 64 || !used[i])
            return snprintf(err, errlen, "%s: %s: not an input of this %s case", where, src[i].name, op->name), -1;
    return op->check ? op->check(c, in, where, err, errlen) : 0;
}

/* The manifest of local case c, parsed. NULL with "FILE: problem" in err. */
static json_t *manifest_of(const moects_case *c, char *err, size_t errlen)
{
    json_error_t je;
    json_t *m = json_load_file(c->file, JSON_REJECT_DUPLICATES, &je);
    if (!json_is_object(m) || !json_is_object(json_object_get(m, "tensors")) ||
        !json_is_integer(json_object_get(m, "seed"))) {
        snprintf(err, errlen, "case %s: %s: %s", c->id, c->file, m ? "not a local case manifest (tensors, seed)" : je.text);
        return json_decref(m), NULL;
    }
    return m;
}

/* Blob hex of the manifest beside `file`, mapped read-only into *p (its length *len) after its content
 * was checked against its name. 0, or -1 with err. */
static int map_blob(const char *file, const char *id, const char *name, const char *hex, const void **p, size_t *len,
                    char *err, size_t errlen)
{
    char path[1200];
    const char *sl = strrchr(file, '/');
    snprintf(path, sizeof path, "%.*s/blobs/%.40s.bin", sl ? (int)(sl - file) : 1, sl ? file : ".", hex);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st))
        return snprintf(err, errlen, "case %s: %s: blob %s: %s", id, name, path, strerror(errno)), fd >= 0 ? close(fd) : 0, -1;
    *len = (size_t)st.st_size;
    *p = *len ? mmap(NULL, *len, PROT_READ, MAP_PRIVATE, fd, 0) : "";
    close(fd);
    if (*p == MAP_FAILED) return snprintf(err, errlen, "case %s: %s: blob %s: %s", id, name, path, strerror(errno)), -1;
    char got[33];
    moects__blob_name(*p, *len, got);
    if (strcmp(got, hex)) {
        if (*len) munmap((void *)*p, *len);
        return snprintf(err, errlen, "case %s: %s: blob %s: its content hashes to %s (changed after `moects case add`)",
                        id, name, path, got), -1;
    }
    return 0;
}

/* One manifest entry {"dtype", "shape", "blob"} as a source tensor over its mapped blob. */
static int entry_of(const moects_case *c, const char *name, json_t *e, moects__src_tensor *s, int64_t *dims, char *err,
                    size_t errlen)
{
    json_t *sh = json_object_get(e, "shape");
    const char *dt = json_string_value(json_object_get(e, "dtype")), *hex = json_string_value(json_object_get(e, "blob"));
    if (!dt || !hex || !json_is_array(sh) || json_array_size(sh) > 8)
        return snprintf(err, errlen, "case %s: %s: tensors.%s: not {dtype, shape, blob}", c->id, c->file, name), -1;
    memset(s, 0, sizeof *s);
    s->name = name, s->dtype = dt, s->ndim = (int)json_array_size(sh), s->dims = dims;
    for (int d = 0; d < s->ndim; d++) dims[d] = json_integer_value(json_array_get(sh, (size_t)d));
    return map_blob(c->file, c->id, name, hex, &s->data, &s->bytes, err, errlen);
}

int moects__local_gen(const moects_case *c, uint64_t *seed, moects_case *gen, char *err, size_t errlen)
{
    json_t *m = manifest_of(c, err, errlen);
    const char *id = m ? json_string_value(json_object_get(json_object_get(m, "case"), "id")) : NULL;
    if (m && !id) snprintf(err, errlen, "case %s: %s: case.id: missing", c->id, c->file);
    if (id) {
        *seed = (uint64_t)json_integer_value(json_object_get(m, "seed"));
        *gen = *c;
        snprintf(gen->id, sizeof gen->id, "%s", id);
    }
    json_decref(m);
    return id ? 0 : -1;
}

/* The scalars of the manifest (fp4_gemm alpha, gs_a, gs_b) over the generator's. */
void moects__local_scalars(json_t *sc, moects_inputs *in)
{
    if (json_is_number(json_object_get(sc, "alpha"))) in->alpha = (float)json_number_value(json_object_get(sc, "alpha"));
    if (json_is_number(json_object_get(sc, "gs_a"))) in->gs_a = (float)json_number_value(json_object_get(sc, "gs_a"));
    if (json_is_number(json_object_get(sc, "gs_b"))) in->gs_b = (float)json_number_value(json_object_get(sc, "gs_b"));
}

int moects__local_fill(const moects_case *c, moects_inputs *in, char *err, size_t errlen)
{
    json_t *m = manifest_of(c, err, errlen), *ts = m ? json_object_get(m, "tensors") : NULL;
    if (!m) return -1;
    size_t n = 0, cap = json_object_size(ts);
    moects__src_tensor *s = calloc(cap + 1, sizeof *s);
    int64_t(*dims)[8] = calloc(cap + 1, sizeof *dims);
    int rc = s && dims ? 0 : (snprintf(err, errlen, "case %s: " MOECTS_HOST_OOM, c->id), -2);
    const char *k;
    json_t *e;
    json_object_foreach(ts, k, e) {
        if (rc || (rc = entry_of(c, k, e, &s[n], dims[n], err, errlen))) break;
        n++;
    }
    char where[600];
    snprintf(where, sizeof where, "case %s", c->id);
    if (!rc) moects__local_scalars(json_object_get(m, "scalars"), in);
    if (!rc) rc = moects__inputs_replace(c, in, s, n, where, err, errlen);
    for (size_t i = 0; i < n; i++)
        if (s && s[i].bytes) munmap((void *)s[i].data, s[i].bytes);
    free(s);
    free(dims);
    json_decref(m);
    return rc;
}
