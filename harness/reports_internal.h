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
/* Append s as Markdown text: \ ` * _ [ ] < > | # backslash-escaped, newlines as spaces (safe in
 * table cells and list items). */
void moects__buf_md(moects__buf *b, const char *s);
/* Append s for the inside of a `code span`: backticks become ', newlines spaces. */
void moects__buf_md_code(moects__buf *b, const char *s);
/* Append s quoted for a POSIX shell when it holds anything but [A-Za-z0-9/._-:=+,@%]. */
void moects__shell_quote(moects__buf *b, const char *s);
void moects__buf_free(moects__buf *b);
/* Write the buffer atomically to path; -1 with err on failure (or oom). */
int moects__buf_write(const moects__buf *b, const char *path, char *err, size_t errlen);
/* The same, staged in set instead (set NULL: written now, as moects__buf_write). */
int moects__buf_stage(const moects__buf *b, moects_report_set *set, const char *path, char *err, size_t errlen);

/* "ep_gather" / "fp4_gemm"; NULL for an unknown op. */
const char *moects__op_name(moects_op op);
/* One result as the JSON object results.json holds for it (harness/model/results.c). */
void moects__buf_result(moects__buf *b, const moects_result *r);
int moects__op_parse(const char *s, moects_op *out);
/* One result from the JSON text of one object as moects__buf_result writes it (len bytes at text):
 * 0, or -1 with "path: WHERE field: problem" in err (where: a prefix such as "line 3 "). */
int moects__result_parse(const char *text, size_t len, const char *path, const char *where, moects_result *r,
                         char *err, size_t errlen);

/* The command line that reproduces one (kernel, case) alone (DESIGN.md "Verdicts"): moects__self_program()
 * run --kernel K --seed S --out moects__repro_dir(CASE) CASE (its own folder, never reports/latest). */
void moects__repro(moects__buf *b, const moects_result *r);
/* The same with the program given (NULL: "moects") and extra (NULL, or options put before CASE, quoted by
 * the caller, e.g. " --kernel-py '/abs/test_mine.py:kernel'"). */
void moects__repro_as(moects__buf *b, const moects_result *r, const char *program, const char *extra);
/* The same for a result read back from a run whose filter is given: each `--kernel-lib PATH`,
 * `--kernel-py FILE:NAME` and `--config PATH` of the filter (paths without spaces: the filter is
 * space-separated) is carried over (moects__filter_carried appends just those). */
void moects__repro_filter(moects__buf *b, const moects_result *r, const char *filter);
void moects__filter_carried(moects__buf *b, const char *filter);

/* Markdown counts of a run: one row per verdict, one column per honest/mutant split. */
void moects__md_counts(moects__buf *b, const moects_run *run);

/* One GPU's share of a run (issue 33: moects run --gpus): the results whose worker set ran with that
 * CUDA_VISIBLE_DEVICES (moects_result.gpu), the cases among them, their wall_s summed (seconds). */
typedef struct {
    const char *gpu; /* points into the run */
    size_t cases, results;
    double wall_s;
} moects__gpu_share;
/* The GPUs the results of a run name, in order ("2" before "10", then by strcmp); results without one
 * are left out (a merged run adds up the like-named GPUs of its shards). *out malloc'ed (free it even
 * when the count is 0). The count, or -1 out of memory. */
long moects__gpu_shares(const moects_run *run, moects__gpu_share **out);

/* Natural order of layout names: tp1 < tp2 < tp16 < ep2 < ep64 < anything else (strcmp). */
int moects__layout_cmp(const char *a, const char *b);

/* Positions of a run's results by (kernel, case), hashed. */
typedef struct {
    const moects_run *run;
    size_t *slot; /* cap entries, each result index + 1, 0 empty */
    size_t cap;
} moects__index;

int moects__index_build(moects__index *ix, const moects_run *run); /* 0, -1 out of memory */
/* Index of the result of (kernel, case_id), or -1. */
long moects__index_find(const moects__index *ix, const char *kernel, const char *case_id);
void moects__index_free(moects__index *ix);

/* A coverage cell: one kernel on one model under one layout, and the verdicts of its cases. */
typedef enum {
    MOECTS__CELL_PASS = 0,       /* some case passed, none failed or was refused */
    MOECTS__CELL_FAIL,           /* some case failed (mismatch, crash, timeout) */
    MOECTS__CELL_UNSUPPORTED,    /* the kernel refused some case, none failed */
    MOECTS__CELL_NOT_REGISTERED, /* no case of this model/layout for the kernel's op */
    MOECTS__CELL_NOT_RUN,        /* cases exist, none has a verdict (filtered out or SKIP) */
    MOECTS__CELL_COUNT
} moects__cell_state;

typedef struct {
    const char *kernel, *model, *layout; /* point into the run */
    moects_op op;
    int is_mutant;
    size_t n[MOECTS_VERDICT_COUNT];
    long first_bad; /* index of the first FAIL_* (else UNSUPPORTED) result, -1 if none */
} moects__cell;

const char *moects__cell_name(moects__cell_state s); /* "PASS", ..., "NOT_REGISTERED", "NOT_RUN" */
moects__cell_state moects__cell_state_of(const moects__cell *c);
/* The cells of a run's results i with keep[i] != 0 (keep NULL: all), sorted by (kernel, model,
 * layout). *out is malloc'ed. Returns the count, or -1 out of memory. */
long moects__cells(const moects_run *run, const char *keep, moects__cell **out);
const moects__cell *moects__cell_find(const moects__cell *v, long n, const char *kernel, const char *model,
                                      const char *layout);

/* The registry an installed or pip-bundled moects carries beside itself: DIR/../share/moects, DIR the
 * folder of libmoects (when this code runs in it) or of the executable, when that holds cases/; else NULL. */
const char *moects__bundled_root(void);
/* Directory holding cases/ and gpu/: $MOECTS_ROOT, else moects__bundled_root(), else the source tree the
 * binary was built in. */
const char *moects__source_root(void);
/* How a report shows a path of this machine (a results.json, a registry), never absolute: relative to
 * the current folder when inside it (moects__path_here), else relative to the source root
 * (moects__source_root) when inside that, else the file's base name. Writes buf. */
void moects__path_shown(const char *path, char *buf, size_t len);

/* ---- report/coverage.c, report/prelaunch.c (`moects coverage`: harness/cli/cmd_coverage.c) ---- */
/* The head of a run's coverage page (report/coverage_failed.c): "What failed", each honest kernel
 * with an unexplained FAIL_* and its failing cases (cell, verdict, first difference in the op's
 * coordinates, TAP point: its line in the run.tap beside run_path when there, repro line), then the
 * escaped mutants; "Nothing" when none. Markdown, or HTML when html. 0, or -1 out of memory. */
int moects__cov_failed_section(moects__buf *b, const moects_run *run, const char *run_path, int html);
/* The coverage table of a run (run_path) or of the kernels' supports() (NULL) over the registry
 * (registry_dir, or root's built-in one), as OUT/coverage.md and coverage.html. 0, or 2 with one
 * line on stderr. */
int moects__coverage_table(const char *run_path, const char *out_dir, const char *root, const char *registry_dir);
/* The pre-launch check of a model config under layouts tps x eps against the registry, for kernels
 * bk[nb]; Markdown on stdout (and OUT/prelaunch.md). 0 pass, 1 a shape uncovered or refused, 2 bad input. */
int moects__coverage_prelaunch(const char *config, const moects_kernel *const *bk, size_t nb, const int *tps, int ntp,
                               const int *eps, int nep, const char *registry_dir, const char *root, const char *out_dir);

#endif
