/* moects_tap.h: the TAP stream and summary.md of a run (DESIGN.md "Harness"): one indented
 * subtest per kernel, one test point per case, YAML diagnostics on failures (and with -v on
 * passes). Header "TAP version 13" by default: Perl TAP::Harness 3.44 rejects 14. */
#ifndef MOECTS_TAP_H
#define MOECTS_TAP_H
#include <stddef.h>
#include <stdio.h>

#include "moects_harness.h"
#include "moects_cases.h"
#include "moects_kernel.h"
#include "moects_known.h"

typedef struct {
    int version;             /* 13 (default) or 14: only the header line differs */
    int verbose;             /* YAML blocks on passing points too */
    const char *program;     /* the program repro commands call (moects__self_program()); NULL: "moects" */
    const char *repro_extra; /* appended to every repro command, e.g. " --kernel-lib 'x.so'" */
    const char *repro_fixed; /* the repro command of every result instead (verify: its own command) */
    char **missing;          /* must-pass ids that match no registered case: failing points */
    size_t nmissing;
    const char *missing_file;
    const char *const *unjudged; /* must-pass ids no honest kernel judged (moects__unjudged_cases) */
    const char *const *unjudged_why;
    size_t nunjudged;
    const char *empty_reason; /* plan "1..0 # SKIP <reason>" when nothing ran; NULL: "no cases" */
    int narrowed;             /* the cases were narrowed (case globs, --cases): an escaped mutant is a TODO */
} moects_tap_opts;

/* Must-pass cases that no honest kernel judged: case ids of run with no PASS_* or FAIL_* result of a
 * non-mutant kernel (all SKIP / UNSUPPORTED, e.g. out of host memory, or no honest kernel selected),
 * in first-appearance order, with the first honest result's reason (or "no honest kernel selected").
 * *ids and *why (pointers into run, NULL when none) are malloc'ed arrays the caller frees. Returns the
 * count, or (size_t)-1 when out of memory. Source: DESIGN.md "Must-pass lists" (a listed case must be
 * passed, and a case nobody ran is not passed). */
size_t moects__unjudged_cases(const moects_run *run, const char ***ids, const char ***why);

/* Where r's first mismatch is, in the op's coordinates of its output geometry (harness/moects_op.h,
 * carried by r->diag): "(t 0, d 5)", "(m 15, n 767)", "(expert 3, row 2, col 17)"; without diag (a
 * results.json from before it, or none computed): "element 3072 (flat index)". "" when r has none
 * (first_index < 0). Writes buf (96 bytes are enough); harness/report/tap.c. */
void moects__first_at(const moects_result *r, char *buf, size_t len);

/* How a kernel came out over the selected cases (the top-level test point). */
typedef enum {
    MOECTS_KS_PASS,          /* honest: no FAIL_* but known findings, some PASS_* or known finding */
    MOECTS_KS_FAIL,          /* honest: some FAIL_* that is not a known finding (r->known empty) */
    MOECTS_KS_CAUGHT,        /* mutant: some FAIL_* (the suite detected the bug) */
    MOECTS_KS_ESCAPED,       /* mutant: passed every selected case */
    MOECTS_KS_NOT_EXERCISED, /* no PASS_* and no FAIL_*: all SKIP / UNSUPPORTED (or none) */
    MOECTS_KS_REFUSED        /* honest: every result UNSUPPORTED (a gap in every case it was given) */
} moects_kernel_status;

/* Status of kernel `name` over run's results; counts[v] gets the number of each verdict
 * (counts may be NULL). is_mutant: the kernel declares a bug. */
moects_kernel_status moects__kernel_status_of(const moects_run *run, const char *name, int is_mutant,
                                             size_t counts[MOECTS_VERDICT_COUNT]);
/* Known findings of kernel `name` (none for a mutant): the FAIL_* results carrying r->known are
 * returned; *fixed (may be NULL) gets the PASS_* results carrying it (an entry that may be stale). */
size_t moects__kernel_known_of(const moects_run *run, const char *name, int is_mutant, size_t *fixed);
/* 1 when the status counts as a failure of the run (FAIL, ESCAPED or REFUSED). */
int moects__kernel_status_fails(moects_kernel_status s);
/* 1 when a shard cannot judge the status and leaves it to `moects merge`: an escaped mutant (another
 * shard may catch it) or a refusing kernel (another shard may give it a case it supports). */
int moects__kernel_status_deferred(moects_kernel_status s);
/* Whether a run's filter (moects_run.filter: the selection as `moects run` options) narrows the cases:
 * it holds a case glob or --cases (--kernel, --kernel-lib, --kernel-py, --config, --tp, --ep and --tier
 * do not, nor their values). moects merge judges a merged run by it. */
int moects__filter_narrowed(const char *filter);
/* Where a kernel's status st is judged instead of in this run: "shard" (a sharded run, run->shard
 * set: an escaped mutant or a refusing kernel, judged by `moects merge` over all shards),
 * "selection" (o->narrowed: an escaped mutant, which cases outside the selection may catch; the run
 * of the whole tier judges it), NULL when it is judged here. o may be NULL. */
const char *moects__status_deferred_to(const moects_run *run, const moects_tap_opts *o, moects_kernel_status st);

/* Render the TAP of run. kernels: the run's kernels in report order (kernels without results are
 * left out). Returns a malloc'ed NUL-terminated text (length in *len), NULL when out of memory. */
char *moects__tap_render(const moects_run *run, const moects_kernel *const *kernels, size_t nk,
                        const moects_tap_opts *o, size_t *len);

/* The TAP's head: "TAP version N", the plan "1..nplan" (or "1..0 # SKIP o->empty_reason") and the run's
 * comment line (version, seed, commit, machine, shard of run). */
void moects__tap_head(FILE *f, const moects_run *run, size_t nplan, const moects_tap_opts *o);
/* Kernel k's subtest (a point per result of k in run, in run's order) and its own point, numbered top;
 * returns 0 (nothing written) when run has no result of k. */
int moects__tap_kernel(FILE *f, const moects_run *run, const moects_kernel *k, size_t top, const moects_tap_opts *o);

/* The TAP of a run written while it runs (harness/report/tap_stream.c): the head at once, then each
 * kernel's subtest as soon as all its results are in and the kernels before it are written, so that
 * the text is moects__tap_render's of the finished run (without must-pass points: not for --cases). */
typedef struct moects_tap_stream moects_tap_stream;
/* out: where (stdout); head: the run's header (its results unused); kernels[nk] in report order;
 * cases[ncases]: kernel k takes each case of its op; known: the findings marked on each result before
 * it is written (moects__known_mark; NULL none). The head is written here. NULL when out of memory. */
moects_tap_stream *moects__tap_stream_new(FILE *out, const moects_run *head, const moects_kernel *const *kernels,
                                          size_t nk, const moects_case *cases, size_t ncases, const moects_tap_opts *o,
                                          const moects_known *known);
/* The result r of case c under kernel k; r must stay valid until k's subtest is written. Kernels whose
 * results are all in are written, in order. Returns -1 when out of memory (the stream stops). */
int moects__tap_stream_add(moects_tap_stream *s, size_t c, size_t k, const moects_result *r);
/* Whether every kernel was written (every result came in); frees s. */
int moects__tap_stream_close(moects_tap_stream *s);

/* summary.md: one row per kernel with its count of each verdict and its status; when the results
 * are timed, where the time went (seconds per phase) and the 10 slowest cases. */
char *moects__summary_render(const moects_run *run, const moects_kernel *const *kernels, size_t nk,
                            const moects_tap_opts *o, size_t *len);

/* The YAML diagnostics block of one result ("---" .. "..."), each line prefixed by ind: verdict, kernel,
 * recipe, mismatch count, max ULP, first mismatch, pattern and the first and worst mismatches in the op's
 * coordinates, calc_diff, seed, reason, known finding, --perf numbers, the repro command. The TAP's
 * block of a point; JUnit's text of a failure; what libmoects' moects_judgement_text gives a Python test. */
void moects__tap_yaml(FILE *f, const char *ind, const moects_result *r, const moects_tap_opts *o);

/* JUnit XML of run (harness/report/junit.c): one <testsuite> per kernel with results, in the given order; one
 * <testcase> per (kernel, case), name the case id, classname the kernel, time its wall seconds. An
 * honest kernel's FAIL_MISMATCH is a <failure>, FAIL_CRASH / FAIL_TIMEOUT an <error>, each with the
 * verdict as type, the reason or pattern as message and the YAML diagnostics as text; SKIP,
 * UNSUPPORTED and known findings are <skipped> with the reason. A mutant's case is a passed testcase
 * (a caught case carries its diagnostics in <system-out>); a mutant that escaped the whole run (not
 * a shard), or an honest kernel that refused every case, adds one failing testcase named
 * "<kernel>: kernel verdict". Must-pass ids not registered or not judged: failing testcases of a
 * suite "must-pass". Schema: tests/fixtures/data/junit/junit.xsd (Jenkins/Ant JUnit). NULL out of memory. */
char *moects__junit_render(const moects_run *run, const moects_kernel *const *kernels, size_t nk,
                          const moects_tap_opts *o, size_t *len);

/* Append s to f single-quoted for a POSIX shell. */
void moects__shell_quote_file(FILE *f, const char *s);

#endif
