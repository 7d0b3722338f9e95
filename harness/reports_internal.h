/* reports_internal.h: helpers shared by the report commands (results.c, gate.c, coverage.c,
 * merge.c). Internal: moects__ names, not part of the public API. */
#ifndef MOECTS_REPORTS_INTERNAL_H
#define MOECTS_REPORTS_INTERNAL_H
#include <stdarg.h>
#include <stddef.h>

#include "moects_harness.h"

/* A growable text buffer for reports; on allocation failure it sets oom and stops growing. */
typedef struct {
    char *s;
    size_t n, cap;
    int oom;
} moects__buf;

void moects__buf_add(moects__buf *b, const char *s);
void moects__buf_addn(moects__buf *b, const char *s, size_t n);
__attribute__((format(printf, 2, 3))) void moects__buf_printf(moects__buf *b, const char *fmt, ...);
/* Append s as a JSON string literal (quotes, escapes). */
void moects__buf_json_str(moects__buf *b, const char *s);
/* Append s escaped for HTML text and attribute values (& < > " '). */
void moects__buf_html(moects__buf *b, const char *s);
/* Append s for a Markdown table cell / inline code: | and newlines escaped. */
void moects__buf_md(moects__buf *b, const char *s);
void moects__buf_free(moects__buf *b);
/* Write the buffer atomically to path; -1 with err on failure (or oom). */
int moects__buf_write(const moects__buf *b, const char *path, char *err, size_t errlen);

/* "ep_gather" / "fp4_gemm"; NULL for an unknown op. */
const char *moects__op_name(moects_op op);
int moects__op_parse(const char *s, moects_op *out);

/* The command line that reproduces one (kernel, case) alone (DESIGN.md "Verdicts"). */
void moects__repro(moects__buf *b, const moects_result *r);

/* Markdown counts of a run: one row per verdict, one column per honest/mutant split. */
void moects__md_counts(moects__buf *b, const moects_run *run);

/* Natural order of layout names: tp1 < tp2 < tp16 < ep2 < ep64 < anything else (strcmp). */
int moects__layout_cmp(const char *a, const char *b);

/* Read a list of case ids (must-pass file, case order file): one id or glob per line, '#'
 * comments and blank lines ignored. Returns the count, or -1 with "path: line N: problem". */
int moects__read_id_list(const char *path, char ***out, char *err, size_t errlen);
void moects__free_id_list(char **v, int n);

/* Directory holding cases/ and gpu/: $MOECTS_ROOT, else the source tree the binary was built in. */
const char *moects__source_root(void);

#endif
