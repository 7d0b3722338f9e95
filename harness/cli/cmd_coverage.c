/* cmd_coverage.c: `moects coverage`, the shape-coverage report (harness/report/coverage.c) and the
 * pre-launch check (harness/report/prelaunch.c)
 * (DESIGN.md "Harness", Coverage).
 *
 * moects coverage [RUN_RESULTS] [--out DIR] [--root DIR] [--registry DIR]
 *   A models x layouts table per honest kernel, each cell one of
 *     PASS            every case of the cell passed (each cell of a run reads "k/n": k of its n
 *                     cases pass; PASS only when k = n)
 *     FAIL            some case failed (FAIL_MISMATCH, FAIL_CRASH, FAIL_TIMEOUT)
 *     UNSUPPORTED     the kernel refused some case (its supports()), none failed
 *     NOT_REGISTERED  no case of that model and layout for the kernel's op
 *     NOT_RUN         cases exist but none has a verdict (filtered out, or SKIP)
 *   With RUN_RESULTS the cells come from the run's verdicts (its honest kernels); without, from
 *   every built-in honest kernel's supports() on the registered cases (UNSUPPORTED or NOT_RUN).
 *   Writes DIR/coverage.md and DIR/coverage.html (one self-contained page: inline CSS, inline SVG
 *   heat maps, titles on hover, no script, no external resource), atomically. DIR defaults to the
 *   directory of RUN_RESULTS, else ".". Regression cases (model "regression") are counted apart.
 *
 * moects coverage --config CONFIG.json [--tp N]... [--ep N]... [--registry DIR] [--out DIR]
 *   Pre-launch check of a model not registered yet (a raw Hugging Face config.json of any family,
 *   or a registry file): derives its cases (moects__derive_cases) under the given layouts (all
 *   derived layouts when none is given), then lists
 *     - the shapes no registered case covers, by op and the dims that matter: ep_gather
 *       (H, topk, E, EP size, expert map), fp4_gemm.<format> (N, K); a dim value no registered case of the op has is
 *       named "new";
 *     - the shapes an honest kernel refuses (supports() false), with its reason: the built-in kernels
 *       and those of each --kernel-lib LIB.so, kept when a --kernel GLOB matches (all when none).
 *   The registry is the built-in one (cases/models and cases/regressions under --root) or --registry
 *   DIR (a source tree holding cases/models, or a directory of model files), without the model
 *   itself (same registry name, or same hf_id). Markdown on stdout (and DIR/prelaunch.md with
 *   --out, written first). Exit 1 when a shape is uncovered or refused, else 0. A --tp/--ep layout
 *   the derivation does not have for the model (moects__layout_exists: TP t in {1,2,4,8,16} dividing
 *   moe_intermediate_size, EP e in {2,...,64} with e <= E) is a usage error (exit 2), as is a
 *   registry without model files.
 *   ep_gather shapes are checked with M_sum = T*k + 127 * min(T*k, local experts), the largest
 *   expert-padded row count (DESIGN.md derivation: rows per expert padded to 128).
 * Exit 2: bad usage or bad input (one line naming the file and field), all checked before any
 * report is made; the report directory is created and proved writable (like `moects run --out`)
 * before the report is made, and nothing is printed or written after an error. */
#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "moects_commands.h"
#include "moects_inputs.h"
#include "moects_op.h"
#include "moects_registry.h"
#include "moects_runner.h"
#include "reports_internal.h"

static int usage_to(FILE *f)
{
    fprintf(f, "usage: moects coverage [RUN_RESULTS] [--out DIR] [--root DIR] [--registry DIR]\n"
               "       moects coverage --config CONFIG.json [--tp N]... [--ep N]... [--registry DIR] [--out DIR]\n"
               "                       [--kernel-lib LIB.so]... [--kernel GLOB]...\n"
               "The models x layouts x kernels table of a run (coverage.md, coverage.html), or without a run each\n"
               "built-in kernel's supports() on the registered cases; with --config, the pre-launch check of a\n"
               "model not registered yet (the kernel shapes it needs that no case covers or a kernel refuses).\n"
               "  RUN_RESULTS         a run's results.json (default: none, supports() only)\n"
               "  --out DIR           write the reports there (default: RUN_RESULTS's directory, else \".\";\n"
               "                      --config: stdout only)\n"
               "  --root DIR          where cases/ is (default: $MOECTS_ROOT, else the source tree)\n"
               "  --registry DIR      another registry (a source tree or a directory of model files)\n"
               "  --config FILE       a registry file or a raw Hugging Face config.json\n"
               "  --tp N, --ep N      the layouts to check (default: every layout the derivation has)\n"
               "  --kernel-lib LIB.so kernels of a library too (default: the built-in kernels only)\n"
               "  --kernel GLOB       only the kernels it matches (default: all; mutants never count)\n"
               "Exit 0; 1 when --config finds a shape uncovered or refused; 2 bad input.\n");
    return 2;
}
static int usage(void) { return usage_to(stderr); }

static int parse_size(const char *opt, const char *s, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (*end || end == s || errno || v < 1 || v > 1024) {
        fprintf(stderr, "moects coverage: %s: \"%s\" is not a parallel size (1..1024)\n", opt, s);
        return -1;
    }
    *out = (int)v;
    return 0;
}

/* The kernels a pre-launch check asks: the built-in ones and those of each --kernel-lib, kept when a
 * --kernel glob matches (all when none). 0, or 2 with one line (a library that does not load). */
static int prelaunch_kernels(char **libs, int nlibs, char **globs, int nglobs, const moects_kernel ***out, size_t *n)
{
    size_t nb;
    const moects_kernel *const *bk = moects__builtin_kernels(&nb);
    const moects_kernel **v = malloc((nb + 1) * sizeof *v);
    if (!v) return 2;
    memcpy(v, bk, nb * sizeof *v);
    *n = nb;
    char err[1024];
    for (int i = 0; i < nlibs; i++)
        if (moects__plugin_load(libs[i], &v, n, err, sizeof err) != 0) {
            fprintf(stderr, "moects coverage: --kernel-lib %s\n", err);
            free(v);
            return 2;
        }
    size_t m = 0;
    for (size_t i = 0; i < *n; i++) {
        int keep = !nglobs;
        for (int g = 0; g < nglobs && !keep; g++) keep = fnmatch(globs[g], v[i]->name, 0) == 0;
        if (keep) v[m++] = v[i];
    }
    *n = m;
    *out = v;
    return 0;
}

int moects__cmd_coverage(int argc, char **argv)
{
    const char *run_path = NULL, *out_dir = NULL, *root = NULL, *registry_dir = NULL, *config = NULL;
    int tps[20], eps[20], ntp = 0, nep = 0, nlibs = 0, nglobs = 0;
    char *libs[16], *globs[16];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int more = i + 1 < argc;
        if (!strcmp(a, "--out") && more) out_dir = argv[++i];
        else if (!strcmp(a, "--root") && more) root = argv[++i];
        else if (!strcmp(a, "--registry") && more) registry_dir = argv[++i];
        else if (!strcmp(a, "--config") && more) config = argv[++i];
        else if ((!strcmp(a, "--kernel-lib") || !strcmp(a, "--kernel")) && more) {
            int lib = !strcmp(a, "--kernel-lib"), *n = lib ? &nlibs : &nglobs;
            if (*n == 16) {
                fprintf(stderr, "moects coverage: %s: more than 16\n", a);
                return 2;
            }
            (lib ? libs : globs)[(*n)++] = argv[++i];
        }
        else if ((!strcmp(a, "--tp") || !strcmp(a, "--ep")) && more) {
            int tp = a[2] == 't', *n = tp ? &ntp : &nep;
            if (*n == 20) {
                fprintf(stderr, "moects coverage: %s: more than 20 sizes\n", a);
                return 2;
            }
            if (parse_size(a, argv[++i], tp ? &tps[*n] : &eps[*n])) return 2;
            ++*n;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage_to(stdout);
            return 0;
        } else if (a[0] == '-' || run_path) {
            static const char *const valued[] = {"--out", "--root", "--registry", "--config", "--tp", "--ep",
                                                 "--kernel-lib", "--kernel", NULL};
            moects__bad_arg("coverage", a, valued);
            return usage();
        } else {
            run_path = a;
        }
    }
    if (!root) root = moects__source_root();
    if (config) {
        if (run_path) {
            fprintf(stderr, "moects coverage: --config checks a model, not a run: drop \"%s\"\n", run_path);
            return usage();
        }
        const moects_kernel **ks = NULL;
        size_t nks = 0;
        if (prelaunch_kernels(libs, nlibs, globs, nglobs, &ks, &nks)) return 2;
        int rc = moects__coverage_prelaunch(config, ks, nks, tps, ntp, eps, nep, registry_dir, root, out_dir);
        free(ks);
        return rc;
    }
    if (nlibs || nglobs) {
        fprintf(stderr, "moects coverage: --kernel-lib/--kernel choose the kernels of --config\n");
        return usage();
    }
    if (ntp || nep) {
        fprintf(stderr, "moects coverage: --tp/--ep need --config\n");
        return usage();
    }
    return moects__coverage_table(run_path, out_dir, root, registry_dir);
}
