/* moects_journal.h: the journal of a run in progress, OUT/results.journal (harness/report/journal.c;
 * DESIGN.md "Harness"), which `moects run --resume OUT` continues after the run was killed. */
#ifndef MOECTS_JOURNAL_H
#define MOECTS_JOURNAL_H
#include <stddef.h>
#include <stdint.h>

#include "moects_harness.h"

#define MOECTS_JOURNAL "results.journal" /* in the run's --out directory */

/* What identifies a run's selection: a journal is resumed only by a run whose header agrees, every
 * field but the selection's spelling (filter and tier): the same cases and kernels, however the case
 * globs, --kernel globs and --tier that selected them were written (harness/report/journal.c). */
typedef struct {
    const moects_run *run; /* moects_version, commit, shard, seed, kernel_libs (path, SHA-256); filter */
    const char *tier;      /* the tiers the cases were selected from: "smoke", "smoke,full" ... (not compared) */
    const moects_kernel *const *kernels; /* the selected kernels, in run order (their names) */
    size_t nkernels;
    const moects_case *cases; /* this shard's selected cases, in run order (their count and ids' XXH64) */
    size_t ncases;
    const char *known_findings; /* the known-findings file's path */
    const char *config_xxh64;   /* the XXH64 of --config FILE's bytes, 16 hex digits; "" or NULL: none */
} moects_journal_sel;

/* Zeroed: no journal (moects__journal_add and _close do nothing). */
typedef struct {
    int fd;          /* appended to; -1 when closed or stopped by a failed write */
    char path[4200]; /* OUT/results.journal; "" never opened */
} moects_journal;

/* Start OUT/results.journal afresh (created or truncated) with the header line of s. 0, or -1 with
 * "PATH: why" in err. */
int moects__journal_start(moects_journal *j, const char *outdir, const moects_journal_sel *s, char *err,
                         size_t errlen);

/* Continue OUT/results.journal: its header must agree with s (else -1, err "PATH: header field F: the
 * interrupted run had X, this run Y (resume with its arguments; its selection: \"...\")"; a format
 * other than 1 and 2 is field moects_journal); its results go to *done (zeroed first), in journal
 * order; a torn last line (one without a newline at its end) is cut off the file; a line that ends in
 * a newline but is not a result, the last one too, is -1 with "PATH: line N ..." (the file untouched).
 * A file with no whole line (killed while writing its header) starts afresh. The journal is then open
 * for appending. 0, or -1 with err (also "PATH: cannot open: why"). */
int moects__journal_resume(moects_journal *j, const char *outdir, const moects_journal_sel *s, moects_run *done,
                          char *err, size_t errlen);

/* (*prior)[c * nkernels + k] (malloc'ed, ncases * nkernels entries): done's result of case c under kernel
 * k, NULL when done has none; for moects_runner_opts.prior. Every result of done must be a (case,
 * kernel) of s whose ops agree, once: else -1 with "PATH: line N: kernel K on case C: not in this
 * run's selection, or journaled twice" (N counts the header line), or "out of memory". */
int moects__journal_prior(const moects_run *done, const char *path, const moects_journal_sel *s,
                         const moects_result ***prior, char *err, size_t errlen);

/* Append r as one line (the object results.json holds for it), written whole by write(2): in the
 * file when it returns, whatever then kills the process. A failed write says so on stderr in one line
 * and stops the journal (the run goes on). */
void moects__journal_add(moects_journal *j, const moects_result *r);

/* Close the journal; remove 1: delete the file too (the run's reports are written). */
void moects__journal_close(moects_journal *j, int remove);

#endif
