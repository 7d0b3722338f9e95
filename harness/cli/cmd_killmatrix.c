/* cmd_killmatrix.c: `moects killmatrix RESULTS.json... [--out FILE] [--min-smoke N] [--root DIR]`, the
 * kill matrix of a run's mutants: its usage, its arguments and its stages; the matrix itself (case
 * families, counts, Markdown) is harness/report/killmatrix.c (moects__killmatrix, reports_commands.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moects_commands.h"
#include "reports_commands.h"
#include "reports_internal.h"

static void usage(FILE *f)
{
    fputs("usage: moects killmatrix RESULTS.json... [--out FILE] [--min-smoke N] [--root DIR]\n"
          "Kill matrix of the run's mutants (e.g. `moects run --tier full --kernel 'pool.*'`, the CPU mutant\n"
          "pool of gpu/cpu/pool.def): per op, case families x mutants, each cell k/n (k of the family's n\n"
          "judged cases caught the mutant: FAIL_*), and per mutant the smoke-tier cases that caught it\n"
          "(tiers from the registry at --root). Several RESULTS.json (runs, shards) count as one run.\n"
          "Markdown on stdout, or to FILE.\n"
          "Family: <op>/regression/<class>, or <op>/<tp|ep>/<variant> for derived cases (model, layout\n"
          "size and token/row count dropped; 'plain' without a variant).\n"
          "--min-smoke N: exit 1 when a mutant whose bug text says neither '(equivalent' nor '(large tier'\n"
          "is caught by fewer than N smoke cases (named on stderr).\n"
          "Exit: 0, 1 (--min-smoke not met), 2 bad input.\n",
          f);
}

/* Stage 1: argv (argc entries, argv[0] "killmatrix") into a; in[64] receives the RESULTS.json
 * paths (a 65th is an unexpected argument), a->in points to it; a->root preset to its default. -1
 * to go on, else the exit status (0 after --help, 2 bad usage: one line, or the usage on stderr
 * without RESULTS.json). */
static int killmatrix_args(moects__killmatrix_args *a, const char **in, int argc, char **argv)
{
    static const char *const valued[] = {"--out", "--min-smoke", "--root", NULL};
    a->in = in;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--out") && i + 1 < argc) a->out = argv[++i];
        else if (!strcmp(argv[i], "--root") && i + 1 < argc) a->root = argv[++i];
        else if (!strcmp(argv[i], "--min-smoke") && i + 1 < argc) {
            char *e;
            long v = strtol(argv[++i], &e, 10);
            if (*e || v < 0 || v > 1000000) {
                fprintf(stderr, "moects killmatrix: --min-smoke: not a count: \"%s\"\n", argv[i]);
                return 2;
            }
            a->min_smoke = (int)v;
        } else if (argv[i][0] != '-' && a->nin < 64) in[a->nin++] = argv[i];
        else {
            moects__bad_arg("killmatrix", argv[i], valued);
            return 2;
        }
    }
    if (!a->nin) {
        usage(stderr);
        return 2;
    }
    return -1;
}

/* `moects killmatrix`: the arguments (stage 1), then the matrix (moects__killmatrix: the runs and
 * the registry's tiers read, counted, rendered, --min-smoke checked). Returns the exit status. */
int moects__cmd_killmatrix(int argc, char **argv)
{
    const char *in[64];
    moects__killmatrix_args a = {.root = moects__source_root()};
    int rc = killmatrix_args(&a, in, argc, argv);
    return rc < 0 ? moects__killmatrix(&a) : rc;
}
