/* cmd_gate.c: `moects gate RUN_RESULTS [--baseline BASE_RESULTS] [--mustpass FILE...] [--summary
 * FILE.md] [--limit N]`, CI's pass/fail decision on a run: its usage, its arguments (the --mustpass
 * lists read and checked here, as `moects run --cases` checks them) and its stages; the gate itself
 * (what fails it, the summary) is harness/report/gate.c (moects__gate, reports_commands.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moects_cases.h"
#include "moects_commands.h"
#include "reports_commands.h"

static int usage_to(FILE *f)
{
    fprintf(f, "usage: moects gate RUN_RESULTS [--baseline BASE_RESULTS] [--mustpass FILE...] "
               "[--summary FILE.md] [--limit N]\n"
               "CI's pass/fail decision on a run's results.json: exit 1 on a regression, a new honest failure,\n"
               "a must-pass case not passed, a lost coverage cell, a mutant no longer caught, an empty run or\n"
               "nothing compared; 2 on bad input. A Markdown summary with a repro line per problem on stdout.\n"
               "  --baseline BASE_RESULTS  the results.json to compare with (default: none; then every honest\n"
               "                           failure is new)\n"
               "  --mustpass FILE...       case-id lists (ids or globs) whose cases must pass (default: none)\n"
               "  --summary FILE.md        the summary there too (default: none; an empty path writes none)\n"
               "  --limit N                problems listed, shared among their kinds (default 20)\n");
    return 2;
}
static int usage(void) { return usage_to(stderr); }

/* --mustpass FILE...: the files up to the next option (argv[*i + 1] on), each list read (a list
 * without case ids is refused as `moects run --cases` refuses it) into a->lists; *i moves past
 * them. 0, or 2 with one line (no file, more than 64, unreadable, no ids). */
static int gate_mustpass_arg(moects__gate_args *a, int argc, char **argv, int *i)
{
    char err[1024];
    int got = 0;
    while (*i + 1 < argc && argv[*i + 1][0] != '-') {
        if (a->nlists == (int)(sizeof a->lists / sizeof a->lists[0])) {
            fprintf(stderr, "moects gate: --mustpass: more than 64 files\n");
            return 2;
        }
        moects__gate_list *l = &a->lists[a->nlists];
        l->file = argv[++*i];
        l->n = moects__idlist_load(argv[*i], &l->ids, err, sizeof err);
        if (l->n < 0) {
            fprintf(stderr, "%s\n", err);
            return 2;
        }
        if (l->n == 0) {
            fprintf(stderr, "moects gate: --mustpass %s: no case ids\n", argv[*i]);
            moects__idlist_free(l->ids, 0);
            return 2;
        }
        a->nlists++;
        got++;
    }
    if (!got) {
        fprintf(stderr, "moects gate: --mustpass needs at least one file\n");
        return 2;
    }
    return 0;
}

/* Stage 1: argv (argc entries, argv[0] "gate") into a (a->limit preset to its default). -1 to go
 * on, else the exit status (0 after --help; 2 bad usage, usage on stderr, or a bad --mustpass
 * list or --limit, one line). */
static int gate_args(moects__gate_args *a, int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        if (!strcmp(s, "--baseline") && i + 1 < argc) a->base_path = argv[++i];
        else if (!strcmp(s, "--summary") && i + 1 < argc) a->summary_path = argv[++i];
        else if (!strcmp(s, "--limit") && i + 1 < argc) {
            char *end;
            a->limit = strtol(argv[++i], &end, 10);
            if (*end || a->limit < 0) {
                fprintf(stderr, "moects gate: --limit: \"%s\" is not a count\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(s, "--mustpass")) {
            if (gate_mustpass_arg(a, argc, argv, &i)) return 2;
        } else if (!strcmp(s, "-h") || !strcmp(s, "--help")) {
            usage_to(stdout);
            return 0;
        } else if (s[0] == '-' || a->run_path) {
            static const char *const valued[] = {"--baseline", "--summary", "--limit", NULL};
            moects__bad_arg("gate", s, valued);
            return usage();
        } else {
            a->run_path = s;
        }
    }
    if (!a->run_path) return usage();
    a->summary_empty = a->summary_path && !a->summary_path[0];
    if (a->summary_empty) a->summary_path = NULL;
    return -1;
}

/* `moects gate`: the arguments (stage 1), then the gate (moects__gate: --summary proved writable,
 * the two runs read, the checks, the summary). Returns the exit status. */
int moects__cmd_gate(int argc, char **argv)
{
    moects__gate_args a = {.limit = 20};
    int rc = gate_args(&a, argc, argv);
    if (rc < 0) rc = moects__gate(&a);
    for (int l = 0; l < a.nlists; l++) moects__idlist_free(a.lists[l].ids, (size_t)a.lists[l].n);
    return rc;
}
