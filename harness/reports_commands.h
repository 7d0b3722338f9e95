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

#endif
