/* cmd_hashes.c: `moects hashes A.json B.json [--limit N]`, whether two runs saw the same input and
 * reference bytes: its usage, its arguments and its stages; the comparison itself is
 * harness/report/hashes.c (moects__hashes_compare, reports_commands.h; DESIGN.md "Determinism"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moects_commands.h"
#include "reports_commands.h"

static int usage(FILE *f, int rc)
{
    fputs("usage: moects hashes A.json B.json [--limit N]\n"
          "Compares the XXH64 of every input tensor and reference of the cases both results.json files\n"
          "hold (same seed). Exit 0 all agree, 1 a difference or nothing compared, 2 bad usage.\n",
          f);
    return rc;
}

/* Stage 1: argv (argc entries, argv[0] "hashes") into path[2] and *limit (preset to its default,
 * 20). -1 to go on, else the exit status (0 after --help, 2 bad usage: one line, or the usage on
 * stderr without two paths). */
static int hashes_args(const char *path[2], size_t *limit, int argc, char **argv)
{
    int np = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) return usage(stdout, 0);
        if (!strcmp(argv[i], "--limit") && i + 1 < argc) {
            char *end;
            unsigned long long v = strtoull(argv[++i], &end, 10);
            if (*end || argv[i][0] == '-' || !argv[i][0]) {
                fprintf(stderr, "moects hashes: --limit: not a count: \"%s\"\n", argv[i]);
                return 2;
            }
            *limit = (size_t)v;
        } else if (argv[i][0] == '-' || np == 2) {
            static const char *const valued[] = {"--limit", NULL};
            moects__bad_arg("hashes", argv[i], valued);
            return 2;
        } else {
            path[np++] = argv[i];
        }
    }
    return np != 2 ? usage(stderr, 2) : -1;
}

/* `moects hashes`: the arguments (stage 1), then the comparison (moects__hashes_compare: both files
 * read, their hashes collected and joined, the counts printed). Returns the exit status. */
int moects__cmd_hashes(int argc, char **argv)
{
    const char *path[2] = {NULL, NULL};
    size_t limit = 20;
    int rc = hashes_args(path, &limit, argc, argv);
    return rc < 0 ? moects__hashes_compare(path[0], path[1], limit) : rc;
}
