/* cmd_list.c: `moects list` (DESIGN.md "Harness"): the selected case ids one per line (a valid
 * `run --cases` file), -l their tiers, -v their shapes; --kernels the kernels. */
#include <errno.h>
#include <fnmatch.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "capi_internal.h"
#include "moects.h"
#include "moects_cases.h"
#include "moects_commands.h"
#include "reports_internal.h"
#include "moects_harness.h"
#include "moects_journal.h"
#include "moects_known.h"
#include "moects_ref.h"
#include "moects_registry.h"
#include "moects_runner.h"
#include "moects_tap.h"
#include "cli_internal.h"

static int usage_list(void)
{
    fputs("usage: moects list [GLOB...] [--tier smoke|full|large|local|all] [--root DIR] [-l | -v]\n"
          "                   [--config CONFIG.json [--tp N]... [--ep N]...]\n"
          "       moects list --kernels [--kernel GLOB] [--kernel-lib LIB.so]\n"
          "Case ids, one a line (a valid `moects run --cases` file; `--cases -` reads it from a pipe): the\n"
          "cases `moects run` selects with the same GLOBs, --tier and --config; or kernels (name, op,\n"
          "device, recipe or tolerance, bug), tab-separated.\n"
          "  GLOB               fnmatch on case ids (default: every case of the tier); an exact id is listed\n"
          "                     whatever its tier unless --tier is given\n"
          "  --tier T           smoke, full, large, local, all or a comma list (default: smoke, as moects run;\n"
          "                     with --config: smoke,full); globs that match only cases of other tiers are an\n"
          "                     error\n"
          "  -l, --long         each case's tiers too, after a tab (\"smoke,full\")\n"
          "  -v                 its tiers and its shape, tab-separated\n"
          "  --root DIR         where cases/ is (default: $MOECTS_ROOT, else the source tree)\n"
          "  --config FILE      the cases derived from that model instead of the registry (--tp/--ep:\n"
          "                     its layouts; default: all it has)\n"
          "  --kernels          list kernels instead: --kernel GLOB narrows them, --kernel-lib LIB.so adds\n"
          "                     a library's\n",
          stdout);
    return 0;
}

int moects__cmd_list(int argc, char **argv)
{
    cli o = {.cmd = "list", .tiers = MOECTS_TIER_SMOKE, .tap_version = 13, .dead_after = 3};
    int rc = moects__cli_parse_args(&o, argc, argv, 0);
    if (rc) {
        moects__cli_free(&o);
        return rc < 0 ? usage_list() : rc;
    }
    if (o.list_kernels) {
        const moects_kernel **v = NULL;
        size_t n = 0;
        if ((rc = moects__cli_load_kernels(&o, &v, &n)) == 0 && (rc = moects__cli_select_kernels(&o, v, &n)) == 0)
            for (size_t i = 0; i < n; i++) {
                const moects_kernel *k = v[i];
                printf("%s\t%s\t%s\t", k->name, moects__op_name(k->op) ? moects__op_name(k->op) : "?",
                       k->device == MOECTS_DEVICE_CUDA ? "cuda" : "cpu");
                if (k->recipe) printf("%s", k->recipe);
                else if (k->acc.bits) {
                    char b[64];
                    moects__bound_name(k, b, sizeof b);
                    printf("%s", b);
                }
                else if (k->tol.max_ulp == UINT32_MAX) /* no ULP limit (a NaN or Inf still fails) */
                    printf("tol(calc_diff<=%g,ulp<=any)", k->tol.max_calc_diff);
                else printf("tol(calc_diff<=%g,ulp<=%u)", k->tol.max_calc_diff, k->tol.max_ulp);
                if (k->bug) printf("\tmutant: %s", k->bug);
                putchar('\n');
            }
        free(v);
        moects__cli_free(&o);
        return rc;
    }
    moects_case_list all;
    if ((rc = moects__cli_load_cases(&o, moects__cli_resolve_root(o.root), &all)) != 0) {
        moects__cli_free(&o);
        return rc;
    }
    char *sel = calloc(all.n + 1, 1), **missing = NULL, *first = NULL;
    size_t nmissing = 0; /* --cases (a must-pass list) is run's alone: none here */
    rc = sel ? moects__cli_select_cases(&o, &all, sel, &missing, &nmissing, &first) : moects__cli_bad(&o, "out of memory");
    for (size_t c = 0; c < all.n && !rc; c++) {
        const moects_case *k = &all.v[c];
        if (!sel[c]) continue;
        char t[32], shape[256];
        moects__cli_tier_names(k->tiers, t, sizeof t);
        if (o.verbose) {
            moects__case_shape(k, shape, sizeof shape);
            printf("%s\t%s\t%s\n", k->id, t, shape);
        } else if (o.long_list) {
            printf("%s\t%s\n", k->id, t);
        } else {
            puts(k->id);
        }
    }
    free(sel);
    moects__case_list_free(&all);
    moects__cli_free(&o);
    return rc;
}

/* ----------------------------------------------------------------- run ---- */
