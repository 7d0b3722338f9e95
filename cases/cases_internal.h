/* cases_internal.h: helpers shared by the cases/ sources (not part of the public API). */
#ifndef MOECTS_CASES_INTERNAL_H
#define MOECTS_CASES_INTERNAL_H
#include <jansson.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "moects_cases.h"

/* Read and parse a JSON file. Python's json module writes bare NaN, Infinity and -Infinity, which
 * jansson rejects: outside strings they are read as null (line:col of errors stay those of the
 * file). strict: reject duplicate keys. Returns a new reference, or NULL with one of
 * "path: unreadable file: <errno text>", "path:LINE:COL: malformed JSON: <what>",
 * "path: (root): not a JSON object" in err. */
json_t *moects__json_load_file(const char *path, int strict, char *err, size_t errlen);

/* snprintf into err, never overflowing, then moects__oneline; returns -1 so callers can
 * `return moects__fail(...)`. */
int moects__fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Replace each control byte (0x00-0x1f, 0x7f) of the message s with '?': an error quoting a file's
 * bytes (a JSON parser's "near '...'", an id with a stray CR) stays one printable line, and no
 * escape sequence of a hostile file reaches the terminal. Found by fuzz/fuzz_*.c. */
void moects__oneline(char *s);

/* The names of the .json files in dir (not those starting with '.'), sorted by strcmp. Returns 0
 * with *names (free with moects__names_free) and *n, or -1 with "dir: unreadable directory: <errno
 * text>" or "dir: out of memory" in err. */
int moects__json_names(const char *dir, char ***names, size_t *n, char *err, size_t errlen);
void moects__names_free(char **names, size_t n);

/* Load-time bounds of the sizes read from registry files, raw Hugging Face configs and regression
 * files: beyond them a size is a typo or an attack, and products such as T*k*H or E*N*K would wrap
 * int64 or only SKIP for lack of memory. Real models are far below (2025-26: hidden <= 8192,
 * routed width <= 32768 (Grok-1), latent <= 3584, E <= 896, top-k <= 22; regression files: H <= 8192,
 * N, K <= 10304, M <= 4096, T <= 262200 (LARGE addr64 cases)), so each bound leaves a margin of
 * 32x or more, and products stay below 2^60: T*k*H <= 2^24*2^10*2^20, E*N*K <= 2^16*2^21*2^20. */
#define MOECTS__MAX_WIDTH ((int64_t)1 << 20)   /* hidden, latent, intermediate, shared width; H */
#define MOECTS__MAX_EXPERTS ((int64_t)1 << 16) /* routed (and shared) experts; E */
#define MOECTS__MAX_TOPK ((int64_t)1024)       /* experts per token; k (also <= the routed experts) */
#define MOECTS__MAX_ROWS ((int64_t)1 << 24)    /* T, M, N, K of regression files */
#define MOECTS__MAX_FILE_CASES 10000           /* cases per regression file (largest: 170) */

/* 0 if x <= max; else -1 with "path: <pre><field>: out of range (min..max)" in err (pre: "" or
 * "text_config." or "cases[3]."; min is only printed, the caller checks it with its own message). */
int moects__check_max(const char *path, const char *pre, const char *field, int64_t x, int64_t min, int64_t max,
                      char *err, size_t errlen);

/* Append the moe_gemm cases of model m under layout tp<tp> or ep<ep> (cases/derive_moe.c), each a
 * copy of base (model, layout, source, data, out_dtype set) with the moe fields filled. I_rank: the
 * rank's share of moe_intermediate_size. grid: every format x row layout x token count and the
 * variants; smoke: this layout carries the model's smoke case. 0, or -1 out of memory. */
int moects__derive_moe_cases(const moects_model *m, const moects_case *base, int tp, int ep, int64_t I_rank,
                             int grid, int smoke, moects_case_list *out);

/* Append the fused_moe cases of model m under one layout (cases/derive_fused.c), each a copy of
 * base (model, layout, source, data set); tp or ep its size, I_rank the rank's I; grid: the layout
 * carries the T grid and the variants; smoke: it carries the model's smoke case. -1 out of memory. */
int moects__derive_fused_cases(const moects_model *m, const moects_case *base, int tp, int ep, int64_t I_rank,
                               int grid, int smoke, moects_case_list *out);

/* Append the moe_route cases of model m (cases/derive_route.c), each a copy of base (model, source
 * set); none for a router without a method (DeepSeek-V4's sqrtsoftplus, a raw config). -1 out of
 * memory. */
int moects__derive_route_cases(const moects_model *m, const moects_case *base, moects_case_list *out);

/* Append the ep_dispatch_combine cases of model m under EP ep (cases/derive_dispatch.c; EP 2, 4 and 8 only,
 * none for another size), each a copy of base (model, layout, source set). -1 out of memory. */
int moects__derive_dispatch_cases(const moects_model *m, const moects_case *base, int ep, moects_case_list *out);

/* Copy src into dst[n] (NUL-terminated); returns -1 if it did not fit. */
int moects__copy(char *dst, size_t n, const char *src);

#endif
