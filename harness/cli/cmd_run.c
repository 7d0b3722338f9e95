/* cmd_run.c: `moects run` (DESIGN.md "Harness"). Selection of cases (globs,
 * tiers, must-pass files, shards) and kernels (globs, --kernel-lib), the run itself
 * (harness/run/runner.c), known findings (harness/report/known.c: ROOT/cases/known-findings.txt or
 * --known-findings FILE) marked on the results, then TAP on stdout and the reports under --out
 * (created and checked writable before the run, written at the end). What the kernels print goes
 * to --out/kernels.log (harness/run/runner.c), not to stderr, which keeps the run's own lines. */
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

static int usage_run(void)
{
    fputs("usage: moects run [GLOB...] [options]\n"
          "Runs every selected kernel on every selected case against the bit-exact reference: TAP on stdout,\n"
          "results.json, run.tap, summary.md, junit.xml (and perf.md) in --out; progress, errors and, last,\n"
          "the run's verdict in one line on stderr. Exit 0 when every honest kernel passes (known findings\n"
          "aside) and every mutant is caught, 1 otherwise, 2 bad input.\n"
          "Selection:\n"
          "  GLOB                   fnmatch on case ids; an exact id runs whatever its tier (default: all); a run\n"
          "                         narrowed by GLOB or --cases makes an escaping mutant a TODO, not a failure\n"
          "  --tier T               smoke, full, large, local, all or a comma list (default: smoke; --config: smoke,full)\n"
          "  --cases FILE           a must-pass list (ids or globs, # comments; one without ids is an error;\n"
          "                         - reads it from standard input, as `moects list ... | moects run --cases -`);\n"
          "                         honest kernels only unless --kernel is given\n"
          "  --kernel GLOB          kernels whose name matches, from all loaded (comma-separated allowed; default:\n"
          "                         those of --kernel-lib and --kernel-py when given, else the built-in ones)\n"
          "  --kernel-lib LIB.so    out-of-tree kernels (moects_plugin_kernels), recorded with a SHA-256\n"
          "  --kernel-py MODULE:NAME  Python kernels (NAME: a moects.Kernel description or a list; repeatable),\n"
          "                         run in workers started by exec of $MOECTS_PYTHON (default python3)\n"
          "                         -m moects._worker; an exception, a crash or a hang is that case's\n"
          "                         FAIL_CRASH / FAIL_TIMEOUT with its text; --perf includes the call overhead\n"
          "  --config CONFIG.json   the cases derived from that model (registry file or raw Hugging Face\n"
          "                         config.json) instead of the registry; --tp N / --ep N: its layouts\n"
          "                         (default: all it has); repro lines carry --config\n"
          "  --shard i/n            every n-th case from i (0-based; or TEST_TOTAL_SHARDS/TEST_SHARD_INDEX);\n"
          "                         an escaping mutant is then a TODO, judged by `moects merge`\n"
          "  --root DIR             where cases/ is (default: $MOECTS_ROOT, else the source tree)\n"
          "Running:\n"
          "  --seed N               input generator seed (default 1)\n"
          "  --timeout SEC          a kernel is killed after SEC s (FAIL_TIMEOUT), inputs and reference, and\n"
          "                         the comparison, after 10 x SEC; each + 30 s per GiB of the case's\n"
          "                         buffers (default 120; 0: no limit)\n"
          "  --jobs N               worker processes (default: one per GPU when a CUDA kernel has work, else\n"
          "                         one per CPU core and at least one per GPU of a --gpus list)\n"
          "  --gpus LIST|all        the GPUs the workers are spread over, one worker set per GPU, each worker\n"
          "                         started with CUDA_VISIBLE_DEVICES set to its GPU, cases to whichever worker\n"
          "                         is free (costliest first); results.json records each result's \"gpu\".\n"
          "                         LIST: ordinals of the GPUs the driver reports (0,1,3; with\n"
          "                         CUDA_VISIBLE_DEVICES set, of its entries). Default all; MOECTS_FAKE_GPUS=N\n"
          "                         stands in for N GPUs on a host without one (tests)\n"
          "  --perf                 time CUDA kernels with CUDA events; perf.md\n"
          "  --perf-phases          print each phase's throughput (inputs, reference, kernel, compare) at the end\n"
          "  --reference gpu|cpu    the reference path (default gpu on a host with a CUDA device, else cpu); a GPU\n"
          "                         reference is re-checked by the CPU one on every FAIL, every smoke case and a\n"
          "                         1% sample (--reference-seed N); a difference is FAIL_REFERENCE and fails the run\n"
          "  --known-findings FILE  understood failures, TODO points (default ROOT/cases/known-findings.txt;\n"
          "                         /dev/null for none; a FILE given must exist)\n"
          "Failing fast (honest kernels; mutants fail on purpose; an unrun case is SKIP \"not run: why\"):\n"
          "  --max-failures N       stop the run after N failures (default 0: no limit)\n"
          "  --max-kernel-failures N  stop a kernel after N of its failures (default 0: no limit)\n"
          "  --stop-dead-after N    stop a kernel whose first N cases crashed or timed out (default 3; 0 never)\n"
          "Reports:\n"
          "  --out DIR              report directory, created and checked writable first (default\n"
          "                         ROOT/reports/latest in a source tree, else ./reports/latest, never inside\n"
          "                         an installed registry); kernels.log there holds what the kernels printed,\n"
          "                         results.journal each finished result while the run goes (removed at its end)\n"
          "  --resume DIR           continue the run killed while writing to --out DIR: the results in\n"
          "                         DIR/results.journal are kept, the rest run, the reports hold all. Give the\n"
          "                         same seed, shard and selection: the same cases and kernels (globs and --tier\n"
          "                         may be spelled otherwise); another is refused, naming what differs\n"
          "  --junit FILE           the JUnit XML there too (one testcase per kernel and case)\n"
          "  --dump DIR             each FAIL_MISMATCH writes DIR/KERNEL/CASE.safetensors (inputs, reference;\n"
          "                         the `moects export` format) and CASE.out.safetensors (the output):\n"
          "                         `moects verify DIR/KERNEL --recipe R` judges it again (default: none)\n"
          "  -v                     YAML diagnostics on passing points too\n"
          "  --tap-version 13|14    the TAP header (default 13, which Perl's TAP::Harness reads)\n"
          "Scheduling: cases start costliest first; an FP4 GEMM case of F = 2MNK flops holds\n"
          "ceil(F / MOECTS_BIG_CASE_FLOPS) of the --jobs slots until its reference is done, which runs on as\n"
          "many times ncpu/jobs threads (MOECTS_BIG_CASE_FLOPS: environment, default 6.4e10, about a second\n"
          "of one core's reference; results do not depend on it).\n",
          stdout);
    return 0;
}

#define KERNEL_LOG "kernels.log"
#define KERNEL_LOG_WHAT "kernel log (what the kernels printed; each crash and timeout)"

/* Lines in a file (a last line without a newline counts); -1 when it cannot be read. */
static long count_lines(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    long n = 0;
    int c, last = '\n';
    while ((c = getc(f)) != EOF) {
        if (c == '\n') n++;
        last = c;
    }
    fclose(f);
    return n + (last != '\n');
}

/* text (malloc'ed, *len bytes) with line inserted after its first line starting with prefix, else
 * at its end. Returns the new text (text is freed), or NULL when out of memory. */
static char *insert_after_line(char *text, size_t *len, const char *prefix, const char *line)
{
    size_t at = *len, pl = strlen(prefix), ll = strlen(line);
    for (const char *p = text; p < text + *len;) {
        const char *nl = memchr(p, '\n', (size_t)(text + *len - p));
        if (!strncmp(p, prefix, pl)) {
            at = nl ? (size_t)(nl - text) + 1 : *len;
            break;
        }
        if (!nl) break;
        p = nl + 1;
    }
    char *t = malloc(*len + ll + 1);
    if (!t) {
        free(text);
        return NULL;
    }
    memcpy(t, text, at);
    memcpy(t + at, line, ll);
    memcpy(t + at + ll, text + at, *len - at + 1);
    free(text);
    *len += ll;
    return t;
}

static int stage_out(moects_report_set *set, const char *dir, const char *name, const char *data, size_t len,
                     char *err, size_t errlen)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return moects__report_stage(set, p, data, len, err, errlen);
}

/* --out proved writable (moects__dir_writable): 0, or 2 with one line naming dir. */
static int check_outdir(const cli *o, const char *dir)
{
    char err[4400];
    if (!moects__dir_writable(dir, err, sizeof err)) return 0;
    size_t l = strlen(dir);
    if (!strncmp(err, dir, l) && err[l] == ':') return moects__cli_bad(o, "--out %s", err);
    return moects__cli_bad(o, "--out %s: %s", dir, err); /* a parent directory it could not make */
}

/* --resume DIR holds a journal (before --out's check makes DIR): 0, or 2 with one line saying why not,
 * a finished run's reports apart. */
static int check_resume(const cli *o, const char *dir)
{
    char p[4200];
    struct stat st;
    if (!o->resume) return 0;
    snprintf(p, sizeof p, "%s/%s", dir, MOECTS_JOURNAL);
    if (stat(p, &st) == 0) return 0;
    int e = errno;
    snprintf(p, sizeof p, "%s/results.json", dir);
    if (stat(p, &st) == 0)
        return moects__cli_bad(o, "--resume %s: no %s there: that run finished (its results.json is written), nothing to resume",
                   dir, MOECTS_JOURNAL);
    return moects__cli_bad(o, "--resume %s: no %s there: %s", dir, MOECTS_JOURNAL, strerror(e));
}

/* Interrupted (SIGINT, SIGTERM, SIGHUP) while the kernels' log is being written to its temporary
 * name: remove it and die of the signal; the previous reports stay whole. Workers die with us
 * (PR_SET_PDEATHSIG). */
static char klog_tmp[4200]; /* OUT/kernels.log while the run writes it; renamed with the other reports */
static char int_note[9000]; /* the line said on stderr when interrupted (written ahead: a handler formats nothing) */
static void (*old_sig[3])(int);
static const int int_sigs[3] = {SIGINT, SIGTERM, SIGHUP};
static void on_interrupt(int sig)
{
    if (klog_tmp[0]) unlink(klog_tmp);
    if (int_note[0] && write(2, int_note, strlen(int_note)) < 0) int_note[0] = '\0';
    signal(sig, SIG_DFL);
    raise(sig);
}

/* Whether kernel k's status fails the run. In a sharded run an escaped mutant or a kernel that
 * refused its part does not: another shard may catch it or run it; `moects merge` judges them. In a run
 * of narrowed cases (to->narrowed) an escaped mutant does not either: the whole tier's run judges it. */
static int fails_run(const moects_run *run, const moects_kernel *k, const moects_tap_opts *to)
{
    moects_kernel_status st = moects__kernel_status_of(run, k->name, k->bug != NULL, NULL);
    return moects__kernel_status_fails(st) && !moects__status_deferred_to(run, to, st);
}

/* stderr: one line per kernel that fail-fast stopped (its reason, how many of its cases were not run). */
static void report_not_run(const moects_run *run, const moects_kernel *const *kernels, size_t nk)
{
    size_t pre = strlen(MOECTS_NOT_RUN);
    for (size_t k = 0; k < nk; k++) {
        size_t n = 0;
        const char *why = NULL;
        for (size_t i = 0; i < run->n; i++)
            if (run->v[i].verdict == MOECTS_SKIP && !strcmp(run->v[i].kernel, kernels[k]->name) &&
                !strncmp(run->v[i].reason, MOECTS_NOT_RUN, pre) && !n++)
                why = run->v[i].reason + pre;
        if (n) fprintf(stderr, "moects run: %s: %zu case%s not run: %s\n", kernels[k]->name, n, n == 1 ? "" : "s", why);
    }
}

/* The state of one `moects run`, carried through its stages (moects__cmd_run). */
typedef struct {
    cli o;
    const char *root;
    double big_case_flops;
    const moects_kernel **kernels;
    size_t nk;
    moects_case_list all;
    char *sel, **missing, *mfile;
    size_t nmissing;
    moects_case *cases;
    size_t ncases;
    moects_known known;
    size_t nknown; /* honest failures that are known findings (moects__known_apply) */
    char outdir[4096];
    moects_device_info dev;
    moects_gpu_list gpus; /* --gpus: one worker set per GPU */
    int jobs;
    moects_run run;
    char klog[4200];
    char kpath[4200];   /* the known-findings file */
    char tier[32];      /* the tiers the cases were selected from */
    moects_journal journal;
    moects_run done;    /* --resume: the journal's results */
    const moects_result **prior; /* --resume: per (case, kernel), its journaled result or NULL */
    moects_tap_stream *stream;   /* the TAP on stdout while the run goes (not with --cases), NULL none */
    int streamed;                /* stdout has the TAP: write_reports does not print it again */
    char *extra;                 /* repro_extra(o) */
    char empty[128];             /* the plan's SKIP reason when nothing runs */
} run_ctx;

/* Stage 1: the shard from --shard or the Bazel/GoogleTest variables, MOECTS_BIG_CASE_FLOPS. 0 or 2. */
static int run_environment(run_ctx *x)
{
    cli *o = &x->o;
    if (!o->shard_n) {
        const char *tn = getenv("TEST_TOTAL_SHARDS"), *ti = getenv("TEST_SHARD_INDEX");
        if (tn && *tn && !(ti && *ti))
            return moects__cli_bad(o, "TEST_TOTAL_SHARDS=%s without TEST_SHARD_INDEX: set both (or use --shard i/n)", tn);
        if (tn && *tn) {
            char spec[64];
            snprintf(spec, sizeof spec, "%s/%s", ti, tn);
            if (moects__cli_parse_shard(spec, &o->shard_i, &o->shard_n) != 0)
                return moects__cli_bad(o, "TEST_TOTAL_SHARDS=%s TEST_SHARD_INDEX=%s: not a shard", tn, ti ? ti : "");
        }
    }
    const char *bf = getenv("MOECTS_BIG_CASE_FLOPS");
    if (bf && *bf) {
        char *e;
        errno = 0;
        x->big_case_flops = strtod(bf, &e);
        if (errno || *e || !(x->big_case_flops > 0) || x->big_case_flops > 1e30)
            return moects__cli_bad(o, "MOECTS_BIG_CASE_FLOPS=%s: not a number of flops > 0", bf);
    }
    return 0;
}

/* Stage 2: the kernels, the cases and the known findings (checked against the cases). 0 or 2. */
static int run_load(run_ctx *x)
{
    cli *o = &x->o;
    int rc;
    char *kpath = x->kpath, kerr[1024];
    if (o->known_file) snprintf(kpath, sizeof x->kpath, "%s", o->known_file);
    else snprintf(kpath, sizeof x->kpath, "%s/cases/known-findings.txt", x->root);
    if ((rc = moects__cli_load_kernels(o, &x->kernels, &x->nk)) || (rc = moects__cli_select_kernels(o, x->kernels, &x->nk)) ||
        (rc = moects__cli_load_cases(o, x->root, &x->all)))
        return rc;
    struct stat kst;
    if (o->known_file && stat(kpath, &kst) != 0) /* only the default file may be absent */
        return moects__cli_bad(o, "--known-findings %s: %s", kpath, strerror(errno));
    /* every CASE_GLOB must match a case of the registry; --config holds one model's derived cases, no
     * regressions, so the check is the registry's alone */
    if (moects__known_load(kpath, &x->known, kerr, sizeof kerr) ||
        (!o->config && moects__known_check_cases(&x->known, kpath, &x->all, kerr, sizeof kerr)))
        return moects__cli_bad(o, "%s", kerr);
    return 0;
}

/* Stage 3: the selected cases of this shard, in run order; TEST_SHARD_STATUS_FILE touched. 0, 1 or 2. */
static int run_select(run_ctx *x)
{
    cli *o = &x->o;
    int rc;
    x->sel = calloc(x->all.n + 1, 1);
    x->cases = malloc((x->all.n + 1) * sizeof *x->cases);
    if (!x->sel || !x->cases) return moects__cli_bad(o, "out of memory");
    if ((rc = moects__cli_select_cases(o, &x->all, x->sel, &x->missing, &x->nmissing, &x->mfile))) return rc;
    moects__cli_tier_names(o->tier_given ? o->tiers : MOECTS_TIER_SMOKE, x->tier, sizeof x->tier);
    size_t nsel = 0;
    for (size_t c = 0; c < x->all.n; c++)
        if (x->sel[c]) {
            if (!o->shard_n || (int)(nsel % (size_t)o->shard_n) == o->shard_i) x->cases[x->ncases++] = x->all.v[c];
            nsel++;
        }
    const char *sf = o->shard_n ? getenv("TEST_SHARD_STATUS_FILE") : NULL;
    if (sf && *sf) {
        FILE *f = fopen(sf, "a");
        if (f) fclose(f);
    }
    return 0;
}

/* Stage 4: --out proved writable before any case runs; the devices (asked of a throwaway child when a
 * CUDA kernel has work, the reference may be the GPU's, --gpus or MOECTS_FAKE_GPUS is given), the GPUs
 * (--gpus) and --jobs (default one worker per GPU when a CUDA kernel has work, else one per core and
 * at least one per GPU a --gpus list names; given, it must cover such a list). */
static int run_prepare(run_ctx *x)
{
    cli *o = &x->o;
    int rc;
    char src[4200];
    struct stat st;
    snprintf(src, sizeof src, "%s/CMakeLists.txt", x->root);
    if (o->out) snprintf(x->outdir, sizeof x->outdir, "%s", o->out);
    else if (stat(src, &st) == 0) snprintf(x->outdir, sizeof x->outdir, "%s/reports/latest", x->root);
    else snprintf(x->outdir, sizeof x->outdir, "reports/latest"); /* an installed registry: never write there */
    if ((rc = check_resume(o, x->outdir)) || (rc = check_outdir(o, x->outdir))) return rc;
    int need_cuda = 0;
    for (size_t k = 0; k < x->nk && !need_cuda; k++)
        if (x->kernels[k]->device == MOECTS_DEVICE_CUDA)
            for (size_t c = 0; c < x->ncases && !need_cuda; c++) need_cuda = x->cases[c].op == x->kernels[k]->op;
    const char *fake = getenv("MOECTS_FAKE_GPUS");
    if (need_cuda || !o->reference || !strcmp(o->reference, "gpu") || o->gpus || (fake && *fake))
        moects__probe_devices(&x->dev);
    if ((rc = moects__cli_gpus_resolve(o, &x->dev, &x->gpus))) return rc;
    const int ngpus = (int)x->gpus.n;
    long ncores = sysconf(_SC_NPROCESSORS_ONLN);
    x->jobs = o->jobs ? o->jobs : need_cuda && ngpus ? ngpus : ncores > 1 ? (int)(ncores < 1024 ? ncores : 1024) : 1;
    if (o->ngpu_ids && x->jobs < ngpus && o->jobs)
        return moects__cli_bad(o, "--jobs %d is fewer than the %d GPUs of --gpus %s (one worker set per GPU): "
                               "--jobs %d or more, or fewer GPUs", o->jobs, ngpus, o->gpus, ngpus);
    if (o->ngpu_ids && x->jobs < ngpus) x->jobs = ngpus;
    return 0;
}

/* A --kernel-py FILE.py:NAME with its file as moects__path_here names it (malloc'ed), or NULL (a
 * module name, or out of memory): the spec as given then. */
static char *py_spec_abs(const char *spec)
{
    const char *colon = strrchr(spec, ':');
    char file[4096], *abs = NULL, *full = NULL;
    if (colon && (size_t)(colon - spec) < sizeof file && (strchr(spec, '/') || strstr(spec, ".py:"))) {
        snprintf(file, sizeof file, "%.*s", (int)(colon - spec), spec);
        if ((abs = moects__path_here(file)) && asprintf(&full, "%s%s", abs, colon) < 0) full = NULL;
    }
    free(abs);
    return full;
}

/* run.filter: the selection as options (--kernel-lib, --kernel-py files and --config as
 * moects__path_here names them: relative inside the current folder, else absolute; the gate's and
 * the coverage's repro lines carry them). */
static void run_filter(const cli *o, moects_run *run)
{
    size_t l = 0, cap = sizeof run->filter;
    for (size_t f = 0; f < o->ncase_files && l < cap; f++)
        l += (size_t)snprintf(run->filter + l, cap - l, "%s--cases %s", l ? " " : "", o->case_files[f]);
    for (size_t g = 0; g < o->nglobs && l < cap; g++)
        l += (size_t)snprintf(run->filter + l, cap - l, "%s%s", l ? " " : "", o->globs[g]);
    for (size_t g = 0; g < o->nkernel_globs && l < cap; g++)
        l += (size_t)snprintf(run->filter + l, cap - l, "%s--kernel %s", l ? " " : "", o->kernel_globs[g]);
    for (size_t i = 0; i < o->nlibs && l < cap; i++) {
        char *abs = moects__path_here(o->libs[i]);
        l += (size_t)snprintf(run->filter + l, cap - l, "%s--kernel-lib %s", l ? " " : "", abs ? abs : o->libs[i]);
        free(abs);
    }
    for (size_t i = 0; i < o->nkernel_py && l < cap; i++) {
        char *full = py_spec_abs(o->kernel_py[i]);
        l += (size_t)snprintf(run->filter + l, cap - l, "%s--kernel-py %s", l ? " " : "", full ? full : o->kernel_py[i]);
        free(full);
    }
    if (o->config && l < cap) {
        char *abs = moects__path_here(o->config);
        l += (size_t)snprintf(run->filter + l, cap - l, "%s--config %s", l ? " " : "", abs ? abs : o->config);
        free(abs);
        for (int i = 0; i < o->ntp + o->nep && l < cap; i++)
            l += (size_t)snprintf(run->filter + l, cap - l, " --%s %d", i < o->ntp ? "tp" : "ep",
                                  i < o->ntp ? o->tps[i] : o->eps[i - o->ntp]);
    }
    if (o->tier_given && l < cap) {
        char t[32];
        moects__cli_tier_names(o->tiers, t, sizeof t);
        snprintf(run->filter + l, cap - l, "%s--tier %s", l ? " " : "", t);
    }
}

/* Stage 5: the run's header: version, commit, date, machine, selection, shard, seed, the libraries'
 * identity (path and SHA-256). */
static void run_metadata(run_ctx *x)
{
    const cli *o = &x->o;
    moects_run *run = &x->run;
    snprintf(run->moects_version, sizeof run->moects_version, "%s", MOECTS_VERSION);
    moects__cli_git_commit(x->root, run->commit, sizeof run->commit);
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(run->date, sizeof run->date, "%Y-%m-%dT%H:%M:%SZ", &tm);
    char host[64] = "";
    gethostname(host, sizeof host - 1);
    if (x->dev.count > 1)
        snprintf(run->machine, sizeof run->machine, "%.60s, %d x %.50s", host, x->dev.count, x->dev.name);
    else snprintf(run->machine, sizeof run->machine, "%.60s%s%.60s", host, x->dev.count > 0 ? ", " : "",
                  x->dev.count > 0 ? x->dev.name : "");
    run_filter(o, run);
    if (o->shard_n) snprintf(run->shard, sizeof run->shard, "%d/%d", o->shard_i, o->shard_n);
    run->seed = o->seed;
    for (size_t i = 0; i < o->nlibs && run->nlibs < MOECTS_RUN_LIBS; i++, run->nlibs++) {
        char *abs = moects__path_here(o->libs[i]);
        snprintf(run->libs[i].path, sizeof run->libs[i].path, "%s", abs ? abs : o->libs[i]);
        free(abs);
        moects__cli_file_sha256(run->libs[i].path, run->libs[i].sha256, sizeof run->libs[i].sha256);
    }
}

/* Each finished result, as results.json will hold it (known findings marked), into the journal. */
static void journal_result(void *ctx, const moects_result *r)
{
    run_ctx *x = ctx;
    static moects_result m; /* large: not on the stack */
    m = *r;
    moects__known_mark(&x->known, &m);
    moects__journal_add(&x->journal, &m);
}

/* The XXH64 of the file at path's bytes in 16 hex digits into out (at least 17 bytes). 0, or -1 (errno). */
static int file_xxh64(const char *path, char *out, size_t len)
{
    FILE *f = fopen(path, "rb");
    struct stat st;
    if (!f) return -1;
    errno = 0;
    char *data = fstat(fileno(f), &st) == 0 ? malloc((size_t)st.st_size + 1) : NULL;
    size_t n = data ? fread(data, 1, (size_t)st.st_size, f) : 0;
    int rc = data && n == (size_t)st.st_size && !ferror(f) ? 0 : -1, e = errno ? errno : EIO;
    if (!rc) snprintf(out, len, "%016" PRIx64, moects__xxh64(data, n));
    free(data);
    fclose(f);
    errno = e;
    return rc;
}

/* OUT/results.journal: started afresh (replacing an interrupted run's, said on stderr), or with
 * --resume read back (its header must name this selection) into x->done and x->prior. 0 or 2. */
static int run_journal(run_ctx *x)
{
    cli *o = &x->o;
    char err[4400], cfg[24] = "";
    if (o->config && file_xxh64(o->config, cfg, sizeof cfg)) return moects__cli_bad(o, "--config %s: %s", o->config, strerror(errno));
    moects_journal_sel sel = {.run = &x->run, .tier = x->tier, .kernels = x->kernels, .nkernels = x->nk,
                              .cases = x->cases, .ncases = x->ncases, .known_findings = x->kpath,
                              .config_xxh64 = cfg};
    if (!o->resume) {
        snprintf(err, sizeof err, "%s/%s", x->outdir, MOECTS_JOURNAL);
        if (access(err, F_OK) == 0) {
            fprintf(stderr, "moects run: %s: an interrupted run's journal, replaced (--resume %s continues one)\n", err,
                    x->outdir);
            moects__report_remove_dead_tmps(x->outdir); /* the killed run's kernel log */
        }
        return moects__journal_start(&x->journal, x->outdir, &sel, err, sizeof err) ? moects__cli_bad(o, "--out %s", err) : 0;
    }
    moects__report_remove_dead_tmps(x->outdir); /* the killed run's kernel log */
    if (moects__journal_resume(&x->journal, x->outdir, &sel, &x->done, err, sizeof err) ||
        moects__journal_prior(&x->done, x->journal.path, &sel, &x->prior, err, sizeof err))
        return moects__cli_bad(o, "--resume %s", err);
    fprintf(stderr, "moects run: --resume: %zu results kept from %s, the others run now\n", x->done.n, x->journal.path);
    return 0;
}

static char *repro_extra(const cli *o);

/* Each task's result, as it finishes (with --resume, the journal's first), into the TAP on stdout. */
static void stream_task(void *ctx, size_t c, size_t k, const moects_result *r)
{
    run_ctx *x = ctx;
    if (x->stream && moects__tap_stream_add(x->stream, c, k, r) != 0) { /* said once; the stream stops */
        fprintf(stderr, "moects run: out of memory streaming the TAP: stdout is cut short; run.tap is whole\n");
        moects__tap_stream_close(x->stream);
        x->stream = NULL;
    }
}

/* The TAP options of the run's reports (moects_tap_opts; the must-pass points apart). 0, or 2 out of memory. */
static int tap_opts_of(run_ctx *x, moects_tap_opts *to)
{
    const cli *o = &x->o;
    if (!x->extra && !(x->extra = repro_extra(o))) return moects__cli_bad(o, "out of memory");
    if (o->shard_n) snprintf(x->empty, sizeof x->empty, "no case or kernel selected in shard %d/%d", o->shard_i, o->shard_n);
    else snprintf(x->empty, sizeof x->empty, "no selected kernel takes the selected cases");
    *to = (moects_tap_opts){.version = o->tap_version, .verbose = o->verbose, .program = moects__self_program(),
                            .repro_extra = x->extra, .empty_reason = x->empty, .narrowed = o->nglobs || o->ncase_files};
    return 0;
}

/* The TAP on stdout as the run goes: the head now, then each kernel once its cases are done
 * (harness/report/tap_stream.c), the journal's results (--resume) first. Not with --cases, whose
 * must-pass points (in the plan) are known only at the end: the TAP is printed then. 0, or 2. */
static int stream_start(run_ctx *x)
{
    moects_tap_opts to;
    int rc;
    if (x->o.ncase_files) return 0;
    if ((rc = tap_opts_of(x, &to))) return rc;
    if (!(x->stream = moects__tap_stream_new(stdout, &x->run, x->kernels, x->nk, x->cases, x->ncases, &to, &x->known)))
        return 0; /* out of memory: the TAP at the end */
    x->streamed = 1;
    for (size_t c = 0; x->prior && c < x->ncases; c++)
        for (size_t k = 0; k < x->nk; k++)
            if (x->prior[c * x->nk + k]) stream_task(x, c, k, x->prior[c * x->nk + k]);
    return 0;
}

/* Stage 6: the tasks in workers (but those the journal holds), each result journaled, what the kernels
 * print going to OUT/kernels.log's temporary name (an interrupt removes it); known findings applied.
 * 0 or 2. */
static int run_execute(run_ctx *x)
{
    cli *o = &x->o;
    char err[4400];
    int rc;
    if ((rc = run_journal(x))) return rc;
    snprintf(x->klog, sizeof x->klog, "%s/%s", x->outdir, KERNEL_LOG);
    if (moects__report_tmp(x->klog, klog_tmp, sizeof klog_tmp, err, sizeof err)) {
        klog_tmp[0] = '\0';
        return moects__cli_bad(o, "--out %s", err);
    }
    snprintf(int_note, sizeof int_note, "\nmoects run: interrupted: the results so far are in %s/%s (--resume %s "
             "continues the run); any other report there is an earlier run's\n", x->outdir, MOECTS_JOURNAL, x->outdir);
    for (int i = 0; i < 3; i++) old_sig[i] = signal(int_sigs[i], on_interrupt); /* restored by run_free */
    if ((rc = stream_start(x))) return rc;
    unsigned char *refcheck = NULL;
    const int refgpu = moects__cli_reference_setup(o, &x->dev, x->cases, x->ncases, &x->run, &refcheck);
    if (refgpu < 0) return moects__cli_bad(o, "out of memory");
    moects_runner_opts ro = {.cases = x->cases, .ncases = x->ncases, .kernels = x->kernels, .nkernels = x->nk,
                             .seed = o->seed, .timeout_s = o->timeout, .jobs = x->jobs, .perf = o->perf,
                             .progress = isatty(2) ? 1 : 2, .devices = x->gpus.ids, .ndevices = x->gpus.n,
                             .fake_devices = x->gpus.fake,
                             .big_case_flops = x->big_case_flops, .kernel_log = klog_tmp,
                             .max_failures = o->max_failures, .max_kernel_failures = o->max_kernel_failures,
                             .dead_after = o->dead_after,
                             .kernel_py = (const char *const *)o->kernel_py, .nkernel_py = o->nkernel_py,
                             .libmoects = o->libmoects, .libs = (const char *const *)o->libs, .nlibs = o->nlibs,
                             .dump_dir = o->dump, .prior = x->prior, .on_result = journal_result, .on_result_ctx = x,
                             .on_task = stream_task, .on_task_ctx = x,
                             .reference_gpu = refgpu, .refcheck = refcheck};
    rc = moects__runner_run(&ro, &x->run, err, sizeof err);
    free(refcheck);
    if (x->stream && !moects__tap_stream_close(x->stream) && rc == 0)
        fprintf(stderr, "moects run: the TAP on stdout is cut short (out of memory); run.tap is whole\n");
    x->stream = NULL;
    if (rc != 0) {
        fprintf(stderr, "moects run: %s\n", err);
        return 2;
    }
    x->nknown = moects__known_apply(&x->known, &x->run);
    return 0;
}

/* What every repro line appends, the files as moects__path_here names them (relative inside the
 * current folder, else absolute): the libraries, --root, --config (its cases are not in the
 * registry: the repro derives them again). malloc'ed;
 * NULL out of memory. */
static char *repro_extra(const cli *o)
{
    char *extra = NULL;
    size_t elen = 0;
    FILE *ef = open_memstream(&extra, &elen);
    if (!ef) return NULL;
    for (size_t i = 0; i < o->nlibs; i++) {
        char *abs = moects__path_here(o->libs[i]);
        fputs(" --kernel-lib ", ef);
        moects__shell_quote_file(ef, abs ? abs : o->libs[i]);
        free(abs);
    }
    for (size_t i = 0; i < o->nkernel_py; i++) {
        char *full = py_spec_abs(o->kernel_py[i]);
        fputs(" --kernel-py ", ef);
        moects__shell_quote_file(ef, full ? full : o->kernel_py[i]);
        free(full);
    }
    if (o->root) {
        fputs(" --root ", ef);
        moects__shell_quote_file(ef, o->root);
    }
    if (o->config) {
        char *abs = moects__path_here(o->config);
        fputs(" --config ", ef);
        moects__shell_quote_file(ef, abs ? abs : o->config);
        free(abs);
    }
    fclose(ef);
    return extra;
}

/* The rendered reports of a run. */
typedef struct {
    char *tap, *sum, *perf, *junit;
    size_t tlen, slen, plen, jlen;
} rendered;

/* Write the reports as one set (on a failed write the previous report stays whole, kernels.log
 * included); TAP on stdout first. 0, or 2 with one line. */
static int write_reports(run_ctx *x, const rendered *rd)
{
    char p[4200], err[4400];
    const char *outdir = x->outdir;
    static moects_report_set set; /* 32 KiB of paths: not on the stack */
    if (!x->streamed) fwrite(rd->tap, 1, rd->tlen, stdout);
    fflush(stdout);
    snprintf(p, sizeof p, "%s/results.json", outdir);
    if (moects__mkdirs(outdir, err, sizeof err) || moects__results_stage(&set, p, &x->run, err, sizeof err) ||
        stage_out(&set, outdir, "run.tap", rd->tap, rd->tlen, err, sizeof err) ||
        stage_out(&set, outdir, "summary.md", rd->sum, rd->slen, err, sizeof err) ||
        (rd->perf && stage_out(&set, outdir, "perf.md", rd->perf, rd->plen, err, sizeof err)) ||
        stage_out(&set, outdir, "junit.xml", rd->junit, rd->jlen, err, sizeof err) ||
        (x->o.junit && moects__report_stage(&set, x->o.junit, rd->junit, rd->jlen, err, sizeof err)) ||
        (access(klog_tmp, F_OK) == 0 && moects__report_adopt(&set, x->klog, err, sizeof err)) ||
        moects__report_commit(&set, err, sizeof err)) {
        moects__report_abort(&set);
        return moects__cli_bad(&x->o, "%s", err);
    }
    if (!rd->perf) { /* no stale perf.md next to this run's results */
        snprintf(p, sizeof p, "%s/perf.md", outdir);
        unlink(p);
    }
    return 0;
}

/* Without --kernel every honest kernel is judged, and one made for other formats refuses every case
 * of a narrow selection (W4A16 cases: the blockwise kernels): say which, and how to leave them out. */
static void refused_hint(const moects_run *run, const moects_kernel *const *ks, size_t nk)
{
    size_t n = 0;
    char names[512] = "";
    for (size_t k = 0; k < nk; k++) {
        if (ks[k]->bug || moects__kernel_status_of(run, ks[k]->name, 0, NULL) != MOECTS_KS_REFUSED) continue;
        size_t l = strlen(names);
        if (l + 64 < sizeof names) snprintf(names + l, sizeof names - l, "%s%s", n ? ", " : "", ks[k]->name);
        n++;
    }
    if (n)
        fprintf(stderr, "moects run: %zu kernel%s refused every selected case (%s): --kernel GLOB names the kernels "
                "to judge\n", n, n == 1 ? "" : "s", names);
}

/* The exit status of a written run (0 pass, 1 fail, 2 a case too big for this host's memory, which
 * was not judged: never 0), and its closing stderr lines, the verdict last. */
static int run_status(run_ctx *x, const moects_tap_opts *to, size_t nunj, long klines)
{
    const moects_run *run = &x->run;
    int rc = x->nmissing || nunj ? 1 : 0;
    if (x->o.perf_phases) moects__cli_perf_phases(run);
    if (moects__cli_reference_status(run)) rc = 1;
    for (size_t k = 0; k < x->nk; k++)
        if (fails_run(run, x->kernels[k], to)) rc = 1;
    size_t noom = 0, first = 0;
    for (size_t i = 0; i < run->n; i++)
        if (run->v[i].verdict == MOECTS_SKIP && strstr(run->v[i].reason, MOECTS_HOST_OOM) && !noom++) first = i;
    if (noom) {
        const moects_result *r = &run->v[first];
        fprintf(stderr, "moects run: %zu result%s not judged, %s (first: %s, case %s: %s)\n", noom, noom == 1 ? "" : "s",
                MOECTS_HOST_OOM, r->kernel, r->case_id, strstr(r->reason, MOECTS_HOST_OOM));
        if (rc == 0) rc = 2;
    }
    if (klines > 0)
        fprintf(stderr, "moects run: %s: %ld line%s in %s\n", KERNEL_LOG_WHAT, klines, klines == 1 ? "" : "s",
                x->klog);
    report_not_run(run, x->kernels, x->nk);
    if (!x->o.nkernel_globs) refused_hint(run, x->kernels, x->nk);
    if (x->nmissing)
        fprintf(stderr, "moects run: --cases %s: %zu must-pass id%s not registered (first: %s): the run fails; "
                "summary.md lists them\n", x->mfile ? x->mfile : "", x->nmissing, x->nmissing == 1 ? "" : "s",
                x->missing[0]);
    if (nunj)
        fprintf(stderr, "moects run: %zu must-pass case%s not judged (no honest kernel passed or failed %s): the run "
                "fails; summary.md lists them\n", nunj, nunj == 1 ? "" : "s", nunj == 1 ? "it" : "them");
    moects__cli_verdict_line(run, x->kernels, x->nk, to, rc, x->outdir);
    return rc;
}

/* Stage 7: TAP, summary.md (with where the kernels' output is: not in the TAP, which depends on the
 * results alone), perf.md, junit.xml; written; the exit status. */
static int run_report(run_ctx *x)
{
    cli *o = &x->o;
    long klines = count_lines(klog_tmp);
    moects_tap_opts to;
    int rc;
    if ((rc = tap_opts_of(x, &to))) return rc;
    /* must-pass lists: a listed case that no honest kernel passed or failed is not passed */
    const char **unj = NULL, **unj_why = NULL;
    size_t nunj = o->ncase_files ? moects__unjudged_cases(&x->run, &unj, &unj_why) : 0;
    if (nunj == (size_t)-1) return moects__cli_bad(o, "out of memory");
    to.missing = x->missing, to.nmissing = x->nmissing, to.missing_file = x->mfile;
    to.unjudged = unj, to.unjudged_why = unj_why, to.nunjudged = nunj;
    rendered rd = {0};
    rd.tap = moects__tap_render(&x->run, x->kernels, x->nk, &to, &rd.tlen);
    rd.sum = moects__summary_render(&x->run, x->kernels, x->nk, &to, &rd.slen);
    char note[4400], n[64];
    if (klines == 0) snprintf(n, sizeof n, "empty, ");
    else if (klines > 0) snprintf(n, sizeof n, "%ld line%s in ", klines, klines == 1 ? "" : "s");
    else n[0] = '\0';
    snprintf(note, sizeof note, "- %s: %s`%s` (next to this file)\n", KERNEL_LOG_WHAT, n, KERNEL_LOG);
    if (rd.sum) rd.sum = insert_after_line(rd.sum, &rd.slen, "- seed ", note);
    rd.perf = o->perf ? moects__perf_render(&x->run, &rd.plen) : NULL;
    rd.junit = moects__junit_render(&x->run, x->kernels, x->nk, &to, &rd.jlen);
    if (!rd.tap || !rd.sum || (o->perf && !rd.perf) || !rd.junit) rc = moects__cli_bad(o, "out of memory rendering the reports");
    else if (!(rc = write_reports(x, &rd))) {
        moects__journal_close(&x->journal, 1); /* the reports hold every result now */
        rc = run_status(x, &to, nunj, klines);
    }
    free(rd.tap), free(rd.sum), free(rd.perf), free(rd.junit);
    free(unj), free(unj_why);
    return rc;
}

static void run_free(run_ctx *x)
{
    if (klog_tmp[0]) { /* removed if still there (the run or the reports failed); handlers restored */
        unlink(klog_tmp);
        for (int i = 0; i < 3; i++) signal(int_sigs[i], old_sig[i]);
        klog_tmp[0] = '\0';
    }
    moects__journal_close(&x->journal, 0);
    moects__tap_stream_close(x->stream);
    free(x->extra);
    free(x->prior);
    moects__run_free(&x->done);
    moects__known_free(&x->known);
    moects__run_free(&x->run);
    for (size_t i = 0; i < x->nmissing; i++) free(x->missing[i]);
    free(x->missing);
    free(x->sel);
    free(x->cases);
    moects__cli_gpus_free(&x->gpus);
    moects__case_list_free(&x->all);
    free(x->kernels);
    moects__cli_free(&x->o);
}

/* `moects run`: a sequence of stages, each of which may end the command with its exit status. */
int moects__cmd_run(int argc, char **argv)
{
    static run_ctx x; /* large (paths, the run's header): not on the stack */
    memset(&x, 0, sizeof x);
    x.o = (cli){.cmd = "run", .tiers = MOECTS_TIER_SMOKE, .seed = 1, .timeout = 120, .tap_version = 13,
                .dead_after = 3};
    klog_tmp[0] = '\0';
    int rc = moects__cli_parse_args(&x.o, argc, argv, 1);
    if (rc) {
        moects__cli_free(&x.o);
        return rc < 0 ? usage_run() : rc;
    }
    x.root = moects__cli_resolve_root(x.o.root);
    if (!(rc = run_environment(&x)) && !(rc = run_load(&x)) && !(rc = run_select(&x)) && !(rc = run_prepare(&x))) {
        run_metadata(&x);
        if (!(rc = run_execute(&x))) rc = run_report(&x);
    }
    run_free(&x);
    return rc;
}
