/* cmd_verify.c: `moects verify`: judge the outputs a program wrote beside exported cases (TAP on
 * stdout, results.json, run.tap and summary.md as `moects run` writes them; harness/api/export.c). */
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

static int usage_verify(FILE *f)
{
    fputs("usage: moects verify DIR [--kernel NAME] [--recipe RECIPE | --bound BITS[,trunc][,bf16-split-k=N] |\n"
          "                     --tol CALC_DIFF,MAX_ULP]\n"
          "                     [--out OUT] [-v] [--tap-version 13|14]\n"
          "  Judges DIR/<case>.out.safetensors (tensor \"out\") against each case `moects export` wrote in DIR,\n"
          "  as `moects run` judges a kernel: TAP on stdout; results.json, run.tap, summary.md in OUT\n"
          "  (default DIR). A missing or malformed output file is that case's FAIL_CRASH.\n"
          "  --kernel: the name the results carry (default \"external\"). Judgement: --recipe (identical\n"
          "  bits under that recipe), --bound (the kernel's accumulation class: BITS of significand 2..64,\n"
          "  24 for FP32, \",trunc\" for truncating sums as tensor cores, \",rne\" the default: each element\n"
          "  within its proven bound of exact_v1; \",bf16-split-k=N\": K split into at most N pieces whose partials\n"
          "  are added in BF16, as cuBLAS and torch may), --tol (calc_diff and max ULP bounds against exact_v1),\n"
          "  default each file's moects.recipe (ep_gather.fma_v1, fp4_gemm.blockwise_v1,\n"
          "  moe_gemm.blockwise_v1; W4A16: moe_gemm.exact_v1): a kernel summing in another order declares\n"
          "  --bound. Each file must keep the name export gave it.\n"
          "  Exit status: 0 all judged cases pass, 1 a failure, 2 bad input.\n",
          f);
    return f == stdout ? 0 : 2;
}

typedef struct {
    const char *dir, *out;
    moects_kernel k;
    int verbose, tapv;
} verify_opts;

static int parse_verify(verify_opts *o, int argc, char **argv)
{
    static const struct option lo[] = {{"kernel", required_argument, 0, 'k'}, {"recipe", required_argument, 0, 'r'},
                                       {"tol", required_argument, 0, 't'},    {"out", required_argument, 0, 'o'},
                                       {"bound", required_argument, 0, 'b'},
                                       {"verbose", no_argument, 0, 'v'},      {"tap-version", required_argument, 0, 'V'},
                                       {"help", no_argument, 0, 'h'},         {0, 0, 0, 0}};
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "vh", lo, NULL)) != -1) {
        char *e = NULL;
        switch (c) {
        case 'k': o->k.name = optarg; break;
        case 'r': o->k.recipe = optarg; break;
        case 'o': o->out = optarg; break;
        case 'v': o->verbose = 1; break;
        case 'V':
            o->tapv = (int)strtol(optarg, &e, 10);
            if (*e || (o->tapv != 13 && o->tapv != 14)) return moects__cli_fail("verify", "--tap-version: 13 or 14");
            break;
        case 't': {
            unsigned long u = 0;
            o->k.tol.max_calc_diff = strtod(optarg, &e);
            if (*e == ',') u = strtoul(e + 1, &e, 10);
            if (*e || !(o->k.tol.max_calc_diff >= 0) || u > UINT32_MAX) return moects__cli_fail("verify", "--tol: CALC_DIFF,MAX_ULP");
            o->k.tol.max_ulp = (uint32_t)u;
            break;
        }
        case 'b': {
            unsigned long bits = strtoul(optarg, &e, 10), splits = 0;
            int trunc = !strncmp(e, ",trunc", 6), rne = !strncmp(e, ",rne", 4);
            e += trunc ? 6 : rne ? 4 : 0;
            if (!strncmp(e, ",bf16-split-k=", 14)) splits = strtoul(e + 14, &e, 10), splits += !splits;
            if (*e || bits < 2 || bits > 64 || splits == 1 || splits > 256)
                return moects__cli_fail("verify", "--bound: BITS[,trunc|,rne][,bf16-split-k=N], BITS 2..64 (24: FP32 "
                                      "accumulation), N 2..256");
            o->k.acc.bits = (uint32_t)bits, o->k.acc.truncation = trunc;
            o->k.split_k = (moects_split_k){(uint32_t)splits, splits ? MOECTS_BF16 : 0};
            break;
        }
        case 'h': return usage_verify(stdout) - 1;
        default:
            moects__bad_arg("verify", argv[optind - 1],
                           (const char *const[]){"--kernel", "--recipe", "--bound", "--tol", "--out", "--tap-version", NULL});
            return 2;
        }
    }
    if (optind != argc - 1) return moects__cli_fail("verify", "one DIR (the directory `moects export` wrote)");
    if (!!o->k.recipe + !!o->k.acc.bits + (o->k.tol.max_calc_diff > 0 || o->k.tol.max_ulp) > 1)
        return moects__cli_fail("verify", "one of --recipe, --bound and --tol");
    o->dir = argv[optind];
    if (!o->out) o->out = o->dir;
    return 0;
}

/* results.json, run.tap, summary.md in out, as one set. */
static int write_reports(const char *out, moects_run *run, const char *tap, size_t tlen, const char *sum, size_t slen)
{
    static moects_report_set set;
    char p[4200], err[4400];
    snprintf(p, sizeof p, "%s/results.json", out);
    memset(&set, 0, sizeof set);
    if (moects__dir_writable(out, err, sizeof err) || moects__results_stage(&set, p, run, err, sizeof err)) goto bad;
    snprintf(p, sizeof p, "%s/run.tap", out);
    if (moects__report_stage(&set, p, tap, tlen, err, sizeof err)) goto bad;
    snprintf(p, sizeof p, "%s/summary.md", out);
    if (moects__report_stage(&set, p, sum, slen, err, sizeof err) || moects__report_commit(&set, err, sizeof err)) goto bad;
    return 0;
bad:
    moects__report_abort(&set);
    return moects__cli_fail("verify", err);
}

/* The run's seed is its first result's. Files exported with several seeds: the summary's filter line
 * lists them and stderr says so once (each result's YAML and repro line carry its own seed). */
static void mixed_seeds(moects_run *run)
{
    if (!run->n) return;
    run->seed = run->v[0].seed;
    char seeds[256] = "";
    uint64_t seen[sizeof seeds / 2]; /* the distinct seeds listed so far: more than seeds can hold */
    size_t n = 0, l = 0;
    for (size_t i = 0; i < run->n && l < sizeof seeds - 24; i++) {
        size_t j = 0;
        while (j < n && seen[j] != run->v[i].seed) j++;
        if (j < n) continue;
        seen[n] = run->v[i].seed;
        l += (size_t)snprintf(seeds + l, sizeof seeds - l, "%s%" PRIu64, n++ ? ", " : "", run->v[i].seed);
    }
    if (n < 2) return;
    size_t fl = strlen(run->filter);
    snprintf(run->filter + fl, sizeof run->filter - fl, "; files of seeds %s", seeds);
    fprintf(stderr, "moects verify: the files hold seeds %s: the TAP header shows %" PRIu64 "; each result's "
                    "YAML and repro line its own\n", seeds, run->seed);
}

/* The repro line of every verified case: this verify again (DIR absolute), as `run`'s repro cannot
 * run an external kernel. malloc'ed; NULL out of memory (then run's form). */
static char *verify_again(int argc, char **argv, const char *dir)
{
    char *cmd = NULL, *abs = realpath(dir, NULL);
    size_t len = 0;
    FILE *m = open_memstream(&cmd, &len);
    if (m) {
        fputs(moects__self_program(), m);
        fputs(" verify", m);
        for (int i = 1; i < argc; i++) {
            fputc(' ', m);
            moects__shell_quote_file(m, argv[i] == dir && abs ? abs : argv[i]);
        }
        fclose(m);
    }
    free(abs);
    return cmd;
}

int moects__cmd_verify(int argc, char **argv)
{
    verify_opts o = {.k = {.abi_version = MOECTS_KERNEL_ABI_VERSION, .name = "external"}, /* op: each file's */
                     .tapv = 13};
    int rc = parse_verify(&o, argc, argv);
    if (rc) return rc < 0 ? 0 : rc;
    char filter[2100];
    snprintf(filter, sizeof filter, "verify %.2000s", o.dir);
    moects_resultset *s = moects_resultset_new(filter, 0);
    long fails = s ? moects_verify(o.dir, &o.k, s) : -1;
    if (fails < 0) {
        rc = moects__cli_fail("verify", moects_errmsg());
        moects_resultset_free(s);
        return rc;
    }
    moects_run *run = moects__resultset_run(s);
    moects__run_metadata(run);
    mixed_seeds(run);
    const moects_kernel *kp = &o.k;
    char *again = verify_again(argc, argv, o.dir);
    moects_tap_opts to = {.version = o.tapv, .verbose = o.verbose, .empty_reason = "no exported case",
                          .repro_fixed = again};
    size_t tlen = 0, slen = 0;
    char *tap = moects__tap_render(run, &kp, 1, &to, &tlen), *sum = moects__summary_render(run, &kp, 1, &to, &slen);
    if (!tap || !sum) {
        rc = moects__cli_fail("verify", "out of memory rendering the reports");
    } else {
        fwrite(tap, 1, tlen, stdout);
        fflush(stdout);
        rc = write_reports(o.out, run, tap, tlen, sum, slen);
        if (!rc) rc = moects__kernel_status_fails(moects__kernel_status_of(run, o.k.name, 0, NULL)) ? 1 : 0;
    }
    free(tap);
    free(sum);
    free(again);
    moects_resultset_free(s);
    return rc;
}
