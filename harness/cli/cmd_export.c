/* cmd_export.c: `moects export`: cases as safetensors files for a kernel in any language (the
 * format: harness/api/export.c). */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capi_internal.h"
#include "moects_commands.h"
#include "moects_tap.h"
#include "cli_internal.h"

static int usage_export(FILE *f)
{
    fputs("usage: moects export [GLOB...] --out DIR [--tier smoke|full|large|all] [--seed N] [--root DIR]\n"
          "                     [--config CONFIG.json [--tp N | --ep N]]\n"
          "  Writes each selected case as DIR/<case id, / as __>.safetensors: its inputs, its reference\n"
          "  outputs (ref.<recipe>) and metadata (moects.case_id, moects.case, moects.shape, moects.dtypes,\n"
          "  moects.out, moects.recipe, moects.seed, moects.version). A program writes its output beside\n"
          "  each as <same name>.out.safetensors (one tensor \"out\", dtype and shape of moects.out);\n"
          "  `moects verify DIR` judges them. Defaults: tier smoke, seed 1, all cases of the tier.\n",
          f);
    return f == stdout ? 0 : 2;
}

int moects__cmd_export(int argc, char **argv)
{
    static const struct option lo[] = {{"out", required_argument, 0, 'o'},  {"tier", required_argument, 0, 't'},
                                       {"seed", required_argument, 0, 's'}, {"root", required_argument, 0, 'r'},
                                       {"config", required_argument, 0, 'c'}, {"tp", required_argument, 0, 'T'},
                                       {"ep", required_argument, 0, 'E'},   {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
    const char *out = NULL, *tier = "smoke", *root = NULL, *config = NULL;
    uint64_t seed = MOECTS_DEFAULT_SEED;
    int tp = 0, ep = 0, c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        char *e = NULL;
        switch (c) {
        case 'o': out = optarg; break;
        case 't': tier = optarg; break;
        case 'r': root = optarg; break;
        case 'c': config = optarg; break;
        case 's':
            errno = 0;
            seed = strtoull(optarg, &e, 0);
            if (errno || *e || *optarg == '-') return moects__cli_fail("export", "--seed: not a non-negative integer");
            break;
        case 'T': case 'E':
            (c == 'T' ? &tp : &ep)[0] = (int)strtol(optarg, &e, 10);
            if (*e || (c == 'T' ? tp : ep) < 1) return moects__cli_fail("export", c == 'T' ? "--tp: not a positive integer" : "--ep: not a positive integer");
            break;
        case 'h': return usage_export(stdout);
        default:
            moects__bad_arg("export", argv[optind - 1], (const char *const[]){"--out", "--tier", "--seed", "--root", "--config", "--tp", "--ep", NULL});
            return 2;
        }
    }
    if (!out) return moects__cli_fail("export", "--out DIR is required");
    moects_caselist *l = moects_cases_select(root, config, tp, ep, tier, (const char *const *)argv + optind,
                                             (size_t)(argc - optind));
    if (!l) return moects__cli_fail("export", moects_errmsg());
    if (!moects_caselist_count(l)) {
        moects_caselist_free(l);
        return moects__cli_fail("export", "no case matches the globs in the tier (see moects list)");
    }
    long n = moects_export(l, seed, out);
    moects_caselist_free(l);
    if (n < 0) return moects__cli_fail("export", moects_errmsg());
    fprintf(stderr, "moects export: %ld case%s written to %s (seed %" PRIu64 ")\n", n, n == 1 ? "" : "s", out, seed);
    return 0;
}
