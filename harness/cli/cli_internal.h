/* cli_internal.h: what the commands of harness/cli/ share (args.c): the parsed command line of
 * `list` and `run`, its parser, and the case and kernel loading and selection they both do. */
#ifndef MOECTS_CLI_INTERNAL_H
#define MOECTS_CLI_INTERNAL_H
#include <stddef.h>
#include <stdint.h>

#include "moects.h"
#include "moects_cases.h"
#include "moects_kernel.h"
#include "moects_runner.h"
#include "moects_tap.h"

#ifndef MOECTS_VERSION
#define MOECTS_VERSION "0.1"/* "moects CMD: msg" on stderr; returns 2 (bad usage or input). */
int moects__cli_fail(const char *cmd, const char *msg);

#endif

#define MOECTS_GPUS_MAX 1024 /* GPUs a --gpus list may name (ordinals 0..MOECTS_GPUS_MAX-1) */

typedef struct {
    const char *cmd;
    char **globs;
    size_t nglobs;
    unsigned tiers;
    int tier_given;
    char **case_files;
    size_t ncase_files;
    char **kernel_globs;
    size_t nkernel_globs;
    char **kernel_bufs; /* the strdup'ed --kernel arguments the globs point into */
    size_t nkernel_bufs;
    char **libs;
    size_t nlibs;
    uint64_t seed;
    double timeout;
    int jobs;
    int verbose;
    int long_list; /* list -l: the tier column */
    int tap_version;
    int shard_i, shard_n;
    const char *out;
    const char *root;
    int perf;
    int perf_phases;     /* --perf-phases: each phase's throughput on stderr at the end */
    const char *reference; /* --reference gpu|cpu (NULL: gpu on a CUDA host); test-standin, test-broken */
    uint64_t ref_seed;   /* --reference-seed: the 1% re-check sample's seed (ref_seed_given 0: drawn) */
    int ref_seed_given;
    int list_kernels;
    const char *known_file;
    int max_failures, max_kernel_failures, dead_after; /* fail fast (moects_runner_opts) */
    const char *junit; /* --junit FILE: JUnit XML there too (OUT/junit.xml always) */
    const char *config; /* --config FILE: that model's derived cases instead of the registry */
    int tps[16], eps[16], ntp, nep; /* --tp N / --ep N: the layouts of --config (none: all) */
    char **kernel_py; /* --kernel-py MODULE:NAME */
    size_t nkernel_py;
    const char *dump;
    const char *resume; /* --resume DIR: continue the run whose journal is DIR/results.journal */
    const char *gpus;   /* --gpus LIST|all as given (NULL: not given, all) */
    int gpu_ids[MOECTS_GPUS_MAX]; /* its ordinals, in its order; ngpu_ids 0: all */
    size_t ngpu_ids;
    char libmoects[4096];
    size_t nbuiltin; /* load_kernels: the first nbuiltin kernels are built in (the pool included) */
} cli;

/* ---- run_gpus.c: --gpus (issue 33) ---- */
/* The GPUs of a run: the CUDA_VISIBLE_DEVICES value of each GPU's worker set, in --gpus order. */
typedef struct {
    char **ids;   /* [n] */
    size_t n;
    int fake;     /* MOECTS_FAKE_GPUS's: no CUDA device behind them */
    char **all;   /* every visible GPU's value, by ordinal (ids point to the same strings) */
    char *buf;    /* what the strings are in */
} moects_gpu_list;
/* --gpus SPEC's syntax into o (gpus, gpu_ids): "all", or decimal ordinals separated by commas, each
 * once. 0, or 2 with one line naming the option ("--gpus 0,0: GPU 0 listed twice"). */
int moects__cli_gpus_parse(cli *o, const char *spec);
/* The run's GPUs into g: o's ordinals (none: all) of the devices dev reports (probed; its count
 * 0: MOECTS_FAKE_GPUS's, if set), numbered as the driver numbers them for this process (an already
 * set CUDA_VISIBLE_DEVICES: its entries). g->n 0: no GPU. 0, or 2 with one line: an ordinal beyond
 * the count, MOECTS_FAKE_GPUS not a count, out of memory. Freed by moects__cli_gpus_free. */
int moects__cli_gpus_resolve(const cli *o, const moects_device_info *dev, moects_gpu_list *g);
void moects__cli_gpus_free(moects_gpu_list *g);

/* ---- run_reference.c: --reference and --perf-phases (issue 31) ---- */
/* The run's reference path (run->reference; under a GPU reference the re-check sample's seed and ids):
 * 0 the CPU reference, else moects_runner_opts.reference_gpu, with *refcheck [n] (malloc'd) set for
 * the cases re-checked whatever their verdicts (smoke, the 1% sample). dev: the devices probed (asked
 * whenever --reference is gpu, the default). -1 out of memory. */
int moects__cli_reference_setup(const cli *o, const moects_device_info *dev, const moects_case *cases, size_t n,
                                moects_run *run, unsigned char **refcheck);
/* stderr: the re-check's counts and any FAIL_REFERENCE; 1 when one fails the run, else 0. */
int moects__cli_reference_status(const moects_run *run);
/* stderr: each phase's worker seconds, share and rate (--perf-phases). */
void moects__cli_perf_phases(const moects_run *run);

/* "moects CMD: message" on stderr; returns 2 (bad usage). */
int moects__cli_bad(const cli *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Frees what parse_args allocated. */
void moects__cli_free(cli *o);
/* The SHA-256 of a file in hex ("" when unreadable). */
void moects__cli_file_sha256(const char *path, char *out, size_t len);
/* The git commit of root ("-dirty" when tracked files differ), "unknown" outside a checkout. */
void moects__cli_git_commit(const char *root, char *out, size_t len);
/* The cases of the registry under root (or of --config): 0, or 2 with a line on stderr. */
int moects__cli_load_cases(cli *o, const char *root, moects_case_list *all);
/* The built-in kernels, then --kernel-lib's, then --kernel-py's: 0, or 2 with a line on stderr. */
int moects__cli_load_kernels(cli *o, const moects_kernel ***out, size_t *n);
/* argv of `list` (is_run 0) or `run` into o: 0, -1 for --help, 2 bad usage (one line on stderr). */
int moects__cli_parse_args(cli *o, int argc, char **argv, int is_run);
/* "i/n" with 0 <= i < n: 0, or -1. */
int moects__cli_parse_shard(const char *s, int *i, int *n);
/* Append s to the list v[n]: 0, or -1 out of memory. */
int moects__cli_push_str(char ***v, size_t *n, const char *s);
/* --root, else moects_default_root(). */
const char *moects__cli_resolve_root(const char *given);
/* The cases of all that the globs, --tier and --cases select (cases/select.c's rule) into sel[]; must-pass ids not registered into missing. 0, or 2. */
int moects__cli_select_cases(cli *o, const moects_case_list *all, char *sel, char ***missing, size_t *nmissing,
                        char **first_file);
/* The kernels the --kernel globs select, from all loaded; without globs, the kernels of --kernel-lib and
 * --kernel-py when any is given, else the built-in ones (honest kernels and mutants, not the pool);
 * --cases without globs keeps honest kernels only. 0, or 2. */
int moects__cli_select_kernels(cli *o, const moects_kernel **v, size_t *n);
/* The verdict line of `moects run` on stderr (run_verdict.c): rc its exit status, to its TAP options
 * (o->narrowed: escaped mutants deferred), outdir where summary.md is. */
void moects__cli_verdict_line(const moects_run *run, const moects_kernel *const *kernels, size_t nk,
                              const moects_tap_opts *to, int rc, const char *outdir);
/* "smoke,full" for tier bits t. */
void moects__cli_tier_names(unsigned t, char *buf, size_t len);
/* "moects CMD: msg" on stderr; returns 2 (bad usage or input). */
int moects__cli_fail(const char *cmd, const char *msg);

#endif
