/* cases_internal.h: helpers shared by the cases/ sources (not part of the public API). */
#ifndef MOECTS_CASES_INTERNAL_H
#define MOECTS_CASES_INTERNAL_H
#include <jansson.h>
#include <stdarg.h>
#include <stddef.h>

/* Read and parse a JSON file. Python's json module writes bare NaN, Infinity and -Infinity, which
 * jansson rejects: outside strings they are read as null (line:col of errors stay those of the
 * file). strict: reject duplicate keys. Returns a new reference, or NULL with one of
 * "path: unreadable file: <errno text>", "path:LINE:COL: malformed JSON: <what>",
 * "path: (root): not a JSON object" in err. */
json_t *moects__json_load_file(const char *path, int strict, char *err, size_t errlen);

/* snprintf into err, never overflowing; returns -1 so callers can `return moects__fail(...)`. */
int moects__fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The names of the .json files in dir (not those starting with '.'), sorted by strcmp. Returns 0
 * with *names (free with moects__names_free) and *n, or -1 with "dir: unreadable directory: <errno
 * text>" or "dir: out of memory" in err. */
int moects__json_names(const char *dir, char ***names, size_t *n, char *err, size_t errlen);
void moects__names_free(char **names, size_t n);

/* Copy src into dst[n] (NUL-terminated); returns -1 if it did not fit. */
int moects__copy(char *dst, size_t n, const char *src);

#endif
