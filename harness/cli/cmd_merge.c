/* cmd_merge.c: `moects merge OUT_DIR SHARD_RESULTS... [--cases FILE] [--root DIR]`, the shards of one
 * run merged into the run's reports: its usage, its arguments and its stages; the merge itself
 * (order, checks, the reports written) is harness/report/merge.c (moects__merge, reports_commands.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moects_commands.h"
#include "reports_commands.h"

static int usage_to(FILE *f)
{
    fprintf(f, "usage: moects merge OUT_DIR SHARD_RESULTS... [--cases FILE] [--root DIR]\n"
               "Merges the results.json of the shards of one run (moects run --shard i/n) into OUT_DIR:\n"
               "results.json, run.tap, summary.md and junit.xml, as the unsharded run would have written.\n"
               "  --cases FILE  case order of the merged report (default: the built-in registry's order)\n"
               "  --root DIR    where cases/ is (default: $MOECTS_ROOT, else the source tree)\n"
               "Exit 0; 1 when an honest kernel fails, a mutant escapes, or a kernel refuses every case of, the\n"
               "merged run (as the unsharded run exits); 2 bad input.\n");
    return 2;
}
static int usage(void) { return usage_to(stderr); }

/* Stage 1: argv (argc entries, argv[0] "merge") into a; shards[] (argc entries) receives the
 * SHARD_RESULTS paths, a->shards points to it. -1 to go on, else the exit status (0 after --help,
 * 2 bad usage with the usage on stderr). */
static int merge_args(moects__merge_args *a, const char **shards, int argc, char **argv)
{
    a->shards = shards;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--cases") && i + 1 < argc) a->cases_file = argv[++i];
        else if (!strcmp(argv[i], "--root") && i + 1 < argc) a->root = argv[++i];
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage_to(stdout);
            return 0;
        } else if (argv[i][0] == '-') {
            static const char *const valued[] = {"--cases", "--root", NULL};
            moects__bad_arg("merge", argv[i], valued);
            return usage();
        } else if (!a->out_dir) a->out_dir = argv[i];
        else shards[a->nshards++] = argv[i];
    }
    return !a->out_dir || !a->nshards ? usage() : -1;
}

/* `moects merge`: the arguments (stage 1), then the merge (moects__merge: OUT_DIR not an input, the
 * shards read and checked, ordered, merged, written, escapes judged). Returns the exit status. */
int moects__cmd_merge(int argc, char **argv)
{
    moects__merge_args a = {0};
    const char **shards = calloc((size_t)argc, sizeof *shards);
    if (!shards) return 2;
    int rc = merge_args(&a, shards, argc, argv);
    if (rc < 0) rc = moects__merge(&a);
    free(shards);
    return rc;
}
