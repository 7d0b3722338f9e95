/* cmd_case.c: `moects case add FILE`: a case made from an op's captured inputs (issue 32; the checks
 * and the store: harness/run/localcase.c), judged by run, list, gate and coverage like a registry
 * case, in tier local. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capi_internal.h"
#include "cli_internal.h"
#include "moects_commands.h"
#include "moects_runner.h"

static int usage_case(FILE *f)
{
    fputs("usage: moects case add FILE [--cases-dir DIR] [--name NAME] [--root DIR]\n"
          "  Checks a safetensors file of an op's inputs (the tensor names and layouts of `moects export`,\n"
          "  its moects.case, moects.seed, moects.recipe and moects.scalars metadata; ref.* tensors are\n"
          "  ignored) against the op's contract: every input present with its dtype and the case's shape,\n"
          "  nothing else, ids in range, no NaN scale unless the case's data is nan. Refused: one line\n"
          "  naming the file, the tensor and the rule, exit 2, nothing written. Else stores the case in DIR\n"
          "  (tensors once by content in DIR/blobs, a manifest per case) and prints its id,\n"
          "  <op>/local/[NAME-]<content hash>: `moects run ID`, `list --tier local`, gate and coverage take\n"
          "  it like a registry case; moects computes its reference.\n"
          "  --cases-dir DIR   the user case folder (default $MOECTS_CASES_DIR, else ROOT/cases/local)\n"
          "  --name NAME       a label in the id (a-z 0-9 . - _, at most 64)\n"
          "  MOECTS_HOST_MEM_BUDGET  bytes a case may need (default MemAvailable): a larger one is refused\n"
          "                          before loading, with the size it needs\n",
          f);
    return f == stdout ? 0 : 2;
}

int moects__cmd_case(int argc, char **argv)
{
    static const struct option lo[] = {{"cases-dir", required_argument, 0, 'd'}, {"name", required_argument, 0, 'n'},
                                       {"root", required_argument, 0, 'r'},      {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
    const char *dir = NULL, *name = NULL, *root = NULL;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        switch (c) {
        case 'd': dir = optarg; break;
        case 'n': name = optarg; break;
        case 'r': root = optarg; break;
        case 'h': return usage_case(stdout);
        default:
            moects__bad_arg("case", argv[optind - 1], (const char *const[]){"--cases-dir", "--name", "--root", NULL});
            return 2;
        }
    }
    if (argc - optind != 2 || strcmp(argv[optind], "add")) return usage_case(stderr);
    char d[1024], id[192], err[4600];
    if (dir) snprintf(d, sizeof d, "%s", dir);
    else moects__local_dir(root ? root : moects_default_root(), d, sizeof d);
    int existed = 0;
    if (moects__case_add(argv[optind + 1], d, name, id, sizeof id, &existed, err, sizeof err))
        return moects__cli_fail("case", err);
    printf("%s\n", id);
    fprintf(stderr, "moects case: %s %s in %s\n", id, existed ? "was there already" : "added", d);
    return 0;
}
