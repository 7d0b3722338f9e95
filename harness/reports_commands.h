/* reports_commands.h: the work of the report commands `moects gate`, `merge`, `killmatrix` and
 * `hashes` (harness/report/gate.c, merge.c, killmatrix.c, hashes.c), on the arguments their
 * command files parsed (harness/cli/cmd_gate.c, cmd_merge.c, cmd_killmatrix.c, cmd_hashes.c; the
 * commands' options and exit statuses: `moects CMD --help`, DESIGN.md "Harness"). Each function
 * returns the command's exit status (0 ok, 1 problems found, 2 bad input or out of memory) and
 * prints its errors on stderr, one line each naming the file and field. Internal: moects__ names. */
#ifndef MOECTS_REPORTS_COMMANDS_H
#define MOECTS_REPORTS_COMMANDS_H
#include <stddef.h>

/* ---- report/gate.c ---- */

/* One --mustpass list of `moects gate`: the ids (or globs) of FILE as moects__idlist_load read them. */
typedef struct {
    char **ids; /* n case ids or globs, owned by the caller (moects__idlist_free) */
    int n;      /* >= 1: a list without ids is refused while parsing */
    const char *file;
} moects__gate_list;

/* The parsed command line of `moects gate` (harness/cli/cmd_gate.c). */
typedef struct {
    const char *run_path;     /* RUN_RESULTS: a results.json, not a shard */
    const char *base_path;    /* --baseline BASE_RESULTS, or NULL: every honest failure is new */
    const char *summary_path; /* --summary FILE.md, or NULL (not given, or given empty) */
    int summary_empty;        /* 1: --summary "" ($GITHUB_STEP_SUMMARY outside Actions): no file, noted */
    moects__gate_list lists[64]; /* --mustpass FILE... */
    int nlists;
    long limit; /* --limit N >= 0: problems listed (default 20) */
} moects__gate_args;

/* The gate on a parsed command line: --summary proved writable (nothing read before), the run and
 * the baseline read, the checks, the Markdown summary to --summary then stdout. 0 pass, 1 problems,
 * 2 bad input (an unreadable file, a shard, a --summary that cannot be created) or out of memory.
 * harness/report/gate.c (DESIGN.md "Harness", Gate). */
int moects__gate(const moects__gate_args *a);

/* ---- report/merge.c ---- */

/* The parsed command line of `moects merge` (harness/cli/cmd_merge.c). */
typedef struct {
    const char *out_dir;       /* OUT_DIR: results.json, run.tap, summary.md, junit.xml go there */
    const char *const *shards; /* SHARD_RESULTS: nshards >= 1 results.json files of one run's shards */
    int nshards;
    const char *cases_file;    /* --cases FILE: the case order, or NULL: the registry's order */
    const char *root;          /* --root DIR: where cases/ is, or NULL: moects__source_root() */
} moects__merge_args;

/* The merge of a run's shards into OUT_DIR, equal to what the unsharded run would have written:
 * OUT_DIR/results.json refused as an input (before anything is read), the shards read and checked
 * as one set, ordered, merged, written, the escaped mutants judged. 0, 1 a mutant escaped or a
 * kernel refused every case, 2 bad input. harness/report/merge.c (DESIGN.md "Harness", Scale-out). */
int moects__merge(const moects__merge_args *a);

/* ---- report/killmatrix.c ---- */

/* The parsed command line of `moects killmatrix` (harness/cli/cmd_killmatrix.c). */
typedef struct {
    const char *const *in; /* RESULTS.json...: nin in 1..64 files, read as one run */
    int nin;
    const char *out;       /* --out FILE, or NULL: Markdown on stdout */
    int min_smoke;         /* --min-smoke N in 0..1000000; 0: not checked */
    const char *root;      /* --root DIR: the registry the tiers come from (default: moects__source_root()) */
} moects__killmatrix_args;

/* The kill matrix of the runs' mutants (case families x mutants, smoke cases that caught each) as
 * Markdown on stdout or to --out FILE (atomically). 0, 1 a mutant below --min-smoke (named on
 * stderr), 2 bad input. harness/report/killmatrix.c (issue 13). */
int moects__killmatrix(const moects__killmatrix_args *a);

/* ---- report/hashes.c ---- */

/* The input and reference XXH64 hashes of two results.json files (path_a, path_b) compared case by
 * case (same seed); counts and at most limit differences on stdout. 0 all agree and some reference
 * was compared, 1 a difference or nothing compared, 2 an unreadable file or out of memory.
 * harness/report/hashes.c (DESIGN.md "Determinism"). */
int moects__hashes_compare(const char *path_a, const char *path_b, size_t limit);

#endif
