/* moects_known.h: known findings (cases/known-findings.txt): failures of honest kernels that the
 * suite keeps reporting but that do not fail a run (DESIGN.md "Verdicts", "Gate"). A FAIL_* of an
 * honest kernel on a case an entry matches is a TAP TODO point ("# TODO known finding: reason"),
 * carries "known" in results.json, is counted apart in summary.md and the gate, and does not make
 * `moects run` exit 1. An entry matching a case that now passes is reported as "fixed?", unless
 * its reason begins "host-dependent:" (a finding that occurs on some hosts only, e.g. with the BLAS
 * kernel one CPU gets): a pass is then unmarked.
 *
 * File format, one entry per line:  KERNEL_GLOB  CASE_GLOB  reason...
 *   fields separated by blanks (spaces, tabs); KERNEL_GLOB and CASE_GLOB are fnmatch(3) globs
 *   (flags 0: '*' also matches '/') on kernel names and case ids; the reason is the rest of the
 *   line, required, at most 255 bytes. A line whose first non-blank character is '#' is a comment;
 *   blank lines are ignored. The first entry (in file order) that matches a result wins. */
#ifndef MOECTS_KNOWN_H
#define MOECTS_KNOWN_H
#include <stddef.h>

#include "moects_cases.h"
#include "moects_harness.h"

typedef struct {
    char *kernel_glob, *case_glob, *reason; /* malloc'ed */
    int line;                               /* 1-based line in the file */
} moects_known_entry;

typedef struct {
    moects_known_entry *v;
    size_t n;
} moects_known;

/* Parse the text of a known-findings file (path names it in messages). Returns 0, or -1 with a
 * one-line "path:line: problem" in err (kf left empty): a line with one field ("missing CASE_GLOB")
 * or two ("missing reason"), a glob with no literal character (a blanket such as "*"), an unclosed
 * '[' in a glob, a reason over 255 bytes, an entry repeating the globs of an earlier line. */
int moects__known_parse(const char *text, const char *path, moects_known *kf, char *err, size_t errlen);

/* Read and parse the file at path. A file that does not exist is no entries (returns 0); an
 * unreadable one is -1 with "path: cannot read: reason". */
int moects__known_load(const char *path, moects_known *kf, char *err, size_t errlen);

/* Every entry's CASE_GLOB must match some registered case: -1 with "path:line: CASE_GLOB \"g\"
 * matches no registered case" for the first that matches none (a stale or mistyped entry). */
int moects__known_check_cases(const moects_known *kf, const char *path, const moects_case_list *all, char *err,
                             size_t errlen);

/* The first entry matching (kernel, case_id), or NULL. */
const moects_known_entry *moects__known_match(const moects_known *kf, const char *kernel, const char *case_id);

/* Set r->known to the matching entry's reason on every result of an honest kernel (is_mutant 0)
 * whose verdict is FAIL_* or PASS_* (PASS_* not for a "host-dependent:" reason); clear it
 * elsewhere. Returns the number of FAIL_* results marked. */
size_t moects__known_apply(const moects_known *kf, moects_run *run);
/* The same for one result: 1 when it is a FAIL_* now marked, else 0. */
int moects__known_mark(const moects_known *kf, moects_result *r);

void moects__known_free(moects_known *kf);

#endif
