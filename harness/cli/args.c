/* args.c: the command line of `moects list` and `moects run` (harness/cli/cli_internal.h): options,
 * case and kernel loading and selection, provenance (git commit, file digests). */
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

int moects__cli_bad(const cli *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "moects %s: ", o->cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 2;
}

int moects__cli_push_str(char ***v, size_t *n, const char *s)
{
    char **nv = realloc(*v, (*n + 1) * sizeof *nv);
    if (!nv) return -1;
    nv[(*n)++] = (char *)s;
    *v = nv;
    return 0;
}

void moects__cli_free(cli *o)
{
    free(o->globs);
    free(o->case_files);
    free(o->kernel_globs);
    for (size_t i = 0; i < o->nkernel_bufs; i++) free(o->kernel_bufs[i]);
    free(o->kernel_bufs);
    free(o->libs);
    free(o->kernel_py);
}


static int parse_u64(const char *s, uint64_t *out)
{
    if (!s || !*s || *s == '-') return -1;
    char *e;
    errno = 0;
    unsigned long long v = strtoull(s, &e, 0);
    if (errno || *e) return -1;
    *out = v;
    return 0;
}

int moects__cli_parse_shard(const char *s, int *i, int *n)
{
    char *e;
    errno = 0;
    long a = strtol(s, &e, 10);
    if (errno || e == s || *e != '/') return -1;
    const char *q = e + 1;
    long b = strtol(q, &e, 10);
    if (errno || e == q || *e || b < 1 || a < 0 || a >= b || b > 1000000) return -1;
    *i = (int)a;
    *n = (int)b;
    return 0;
}

/* Whether paths a and b name the same directory (the same string, or the same real path). */
static int same_dir(const char *a, const char *b)
{
    if (!strcmp(a, b)) return 1;
    char *ra = realpath(a, NULL), *rb = realpath(b, NULL);
    int same = ra && rb && !strcmp(ra, rb);
    free(ra), free(rb);
    return same;
}

/* root = where cases/ is: --root, else moects_default_root() ($MOECTS_ROOT, the source tree compiled
 * in, the installed share/moects, else "."). */
const char *moects__cli_resolve_root(const char *given) { return given ? given : moects_default_root(); }

enum { OPT_TIER = 256, OPT_CASES, OPT_KERNEL, OPT_LIB, OPT_SEED, OPT_TIMEOUT, OPT_TAPV, OPT_SHARD, OPT_OUT,
       OPT_PERF, OPT_ROOT, OPT_KERNELS, OPT_FILTER, OPT_KNOWN, OPT_MAXF, OPT_MAXKF, OPT_DEAD, OPT_JUNIT, OPT_CONFIG, OPT_TP, OPT_EP,
       OPT_KERNEL_PY, OPT_DUMP, OPT_RESUME, OPT_REFERENCE, OPT_REF_SEED, OPT_PERF_PHASES, OPT_GPUS };

/* A count 0..1000000000 for option opt: 0, or -1 (the caller names the option). */
static int parse_count(const char *s, int *out)
{
    char *e;
    errno = 0;
    long v = strtol(s, &e, 10);
    if (!*s || *e || errno || v < 0 || v > 1000000000) return -1;
    *out = (int)v;
    return 0;
}

/* The options that belong to `run` only, and those that would otherwise be ignored: 0, or 2 (bad). */
static int check_args(cli *o, int is_run)
{
    if (!is_run && (o->reference || o->perf_phases || o->ref_seed_given || o->gpus))
        return moects__cli_bad(o, "--reference, --reference-seed, --perf-phases and --gpus belong to `moects run`");
    if (!is_run && (o->ncase_files || o->perf || o->out || o->shard_n || o->known_file || o->max_failures ||
                    o->max_kernel_failures || o->dead_after != 3 || o->junit || o->dump || o->resume))
        return moects__cli_bad(o, "--cases, --perf, --out, --shard, --known-findings, --junit, --dump, --resume and the fail-fast "
                      "options belong to `moects run`");
    if (o->resume && o->out && !same_dir(o->resume, o->out))
        return moects__cli_bad(o, "--resume %s and --out %s: the same directory, or leave --out out", o->resume, o->out);
    if (o->resume) o->out = o->resume;
    /* options that would otherwise be ignored */
    if (!is_run && o->list_kernels && o->nglobs)
        return moects__cli_bad(o, "--kernels takes --kernel GLOB, not case globs (\"%s\")", o->globs[0]);
    if (!is_run && !o->list_kernels && o->nkernel_globs) return moects__cli_bad(o, "--kernel lists kernels only with --kernels");
    if ((o->ntp || o->nep) && !o->config) return moects__cli_bad(o, "--tp/--ep choose the layouts of --config: give --config FILE");
    if (is_run && o->ncase_files && o->nglobs)
        return moects__cli_bad(o, "--cases and case globs (\"%s\"): give one or the other", o->globs[0]);
    return 0;
}

int moects__cli_parse_args(cli *o, int argc, char **argv, int is_run)
{
    static const struct option longopts[] = {
        {"tier", required_argument, 0, OPT_TIER},       {"cases", required_argument, 0, OPT_CASES},
        {"kernel", required_argument, 0, OPT_KERNEL},   {"kernel-lib", required_argument, 0, OPT_LIB},
        {"seed", required_argument, 0, OPT_SEED},       {"timeout", required_argument, 0, OPT_TIMEOUT},
        {"jobs", required_argument, 0, 'j'},            {"verbose", no_argument, 0, 'v'},
        {"long", no_argument, 0, 'l'},
        {"tap-version", required_argument, 0, OPT_TAPV}, {"shard", required_argument, 0, OPT_SHARD},
        {"out", required_argument, 0, OPT_OUT},         {"perf", no_argument, 0, OPT_PERF},
        {"root", required_argument, 0, OPT_ROOT},       {"kernels", no_argument, 0, OPT_KERNELS},
        {"filter", required_argument, 0, OPT_FILTER},   {"help", no_argument, 0, 'h'},
        {"known-findings", required_argument, 0, OPT_KNOWN},
        {"max-failures", required_argument, 0, OPT_MAXF}, {"max-kernel-failures", required_argument, 0, OPT_MAXKF},
        {"stop-dead-after", required_argument, 0, OPT_DEAD}, {"junit", required_argument, 0, OPT_JUNIT},
        {"config", required_argument, 0, OPT_CONFIG},   {"tp", required_argument, 0, OPT_TP},
        {"ep", required_argument, 0, OPT_EP},
        {"kernel-py", required_argument, 0, OPT_KERNEL_PY}, {"dump", required_argument, 0, OPT_DUMP},
        {"resume", required_argument, 0, OPT_RESUME}, {"reference", required_argument, 0, OPT_REFERENCE},
        {"reference-seed", required_argument, 0, OPT_REF_SEED}, {"perf-phases", no_argument, 0, OPT_PERF_PHASES},
        {"gpus", required_argument, 0, OPT_GPUS},
        {0, 0, 0, 0}};
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, is_run ? ":j:vh" : ":j:vlh", longopts, NULL)) != -1) {
        const char *a = optarg;
        switch (c) {
        case OPT_TIER:
            if (moects__tiers_parse(a, &o->tiers) != 0)
                return moects__cli_bad(o, "--tier: unknown tier \"%s\" (smoke, full, large, local, all, or a comma list)", a);
            o->tier_given = 1;
            break;
        case OPT_CASES: if (moects__cli_push_str(&o->case_files, &o->ncase_files, a)) return moects__cli_bad(o, "out of memory"); break;
        case OPT_KERNEL: {
            /* comma-separated lists allowed */
            char *s = a ? strdup(a) : NULL, *save = NULL;
            if (!s || moects__cli_push_str(&o->kernel_bufs, &o->nkernel_bufs, s)) {
                free(s);
                return moects__cli_bad(o, "out of memory");
            }
            for (char *t = strtok_r(s, ",", &save); t; t = strtok_r(NULL, ",", &save))
                if (moects__cli_push_str(&o->kernel_globs, &o->nkernel_globs, t)) return moects__cli_bad(o, "out of memory");
            break; /* s stays allocated (cli_free): the globs point into it */
        }
        case OPT_LIB: if (moects__cli_push_str(&o->libs, &o->nlibs, a)) return moects__cli_bad(o, "out of memory"); break;
        case OPT_SEED:
            if (parse_u64(a, &o->seed) != 0) return moects__cli_bad(o, "--seed: not an unsigned integer: \"%s\"", a);
            break;
        case OPT_TIMEOUT: {
            char *e;
            double t = strtod(a, &e);
            if (*e || !(t >= 0)) return moects__cli_bad(o, "--timeout: not a number of seconds: \"%s\"", a);
            o->timeout = t;
            break;
        }
        case 'j':
            if (parse_count(a, &o->jobs) || o->jobs < 1 || o->jobs > 1024)
                return moects__cli_bad(o, "--jobs: not a count 1..1024: \"%s\"", a);
            break;
        case 'v': o->verbose = 1; break;
        case 'l': o->long_list = 1; break;
        case OPT_TAPV:
            if (strcmp(a, "13") && strcmp(a, "14")) return moects__cli_bad(o, "--tap-version: 13 or 14, not \"%s\"", a);
            o->tap_version = atoi(a);
            break;
        case OPT_SHARD:
            if (moects__cli_parse_shard(a, &o->shard_i, &o->shard_n) != 0)
                return moects__cli_bad(o, "--shard: want i/n with 0 <= i < n, got \"%s\"", a);
            break;
        case OPT_OUT: o->out = a; break;
        case OPT_PERF: o->perf = 1; break;
        case OPT_PERF_PHASES: o->perf_phases = 1; break;
        case OPT_REFERENCE:
            if (strcmp(a, "gpu") && strcmp(a, "cpu") && strcmp(a, "test-standin") && strcmp(a, "test-broken"))
                return moects__cli_bad(o, "--reference: want gpu or cpu, got \"%s\"", a);
            o->reference = a;
            break;
        case OPT_REF_SEED:
            if (parse_u64(a, &o->ref_seed) != 0) return moects__cli_bad(o, "--reference-seed: not an unsigned integer: \"%s\"", a);
            o->ref_seed_given = 1;
            break;
        case OPT_ROOT: o->root = a; break;
        case OPT_KERNELS: o->list_kernels = 1; break;
        case OPT_FILTER: if (moects__cli_push_str(&o->globs, &o->nglobs, a)) return moects__cli_bad(o, "out of memory"); break;
        case OPT_KNOWN: o->known_file = a; break;
        case OPT_JUNIT: o->junit = a; break;
        case OPT_CONFIG: o->config = a; break;
        case OPT_TP:
        case OPT_EP: {
            int v, *n = c == OPT_TP ? &o->ntp : &o->nep;
            const char *name = c == OPT_TP ? "--tp" : "--ep";
            if (parse_count(a, &v) || v < 1) return moects__cli_bad(o, "%s: not a count >= 1: \"%s\"", name, a);
            if (*n == 16) return moects__cli_bad(o, "%s: at most 16 of them", name);
            (c == OPT_TP ? o->tps : o->eps)[(*n)++] = v;
            break;
        }
        case OPT_MAXF:
        case OPT_MAXKF:
        case OPT_DEAD:
            if (parse_count(a, c == OPT_MAXF ? &o->max_failures : c == OPT_MAXKF ? &o->max_kernel_failures
                                                                                 : &o->dead_after))
                return moects__cli_bad(o, "%s: not a count 0..1000000000: \"%s\"",
                           c == OPT_MAXF ? "--max-failures" : c == OPT_MAXKF ? "--max-kernel-failures"
                                                                             : "--stop-dead-after", a);
            break;
        case OPT_KERNEL_PY: if (moects__cli_push_str(&o->kernel_py, &o->nkernel_py, a)) return moects__cli_bad(o, "out of memory"); break;
        case OPT_DUMP: o->dump = a; break;
        case OPT_RESUME: o->resume = a; break;
        case OPT_GPUS: if (moects__cli_gpus_parse(o, a)) return 2; break;
        case 'h': return -1;
        case ':': return moects__cli_bad(o, "%s needs a value", argv[optind - 1]);
        default: return moects__cli_bad(o, "unknown option %s", argv[optind - 1]);
        }
    }
    for (int i = optind; i < argc; i++)
        if (moects__cli_push_str(&o->globs, &o->nglobs, argv[i])) return moects__cli_bad(o, "out of memory");
    return check_args(o, is_run);
}

/* ----------------------------------------------------------------- kernels ---- */

/* Where kernel i of load_kernels' list came from: the first nbuilt are built in, then each
 * --kernel-lib's up to lib_end[l], then --kernel-py's (its spec named when there is one). */
static const char *kernel_origin(const cli *o, size_t i, size_t nbuilt, const size_t *lib_end, char *buf, size_t len)
{
    if (i < nbuilt) return "built in";
    for (size_t l = 0; l < o->nlibs; l++)
        if (i < lib_end[l]) return snprintf(buf, len, "by --kernel-lib %s", o->libs[l]), buf;
    if (o->nkernel_py == 1) return snprintf(buf, len, "by --kernel-py %s", o->kernel_py[0]), buf;
    return "by --kernel-py";
}

int moects__cli_load_kernels(cli *o, const moects_kernel ***out, size_t *n)
{
    size_t nb, np;
    const moects_kernel *const *b = moects__builtin_kernels(&nb);
    const moects_kernel *const *pool = moects__pool_kernels(&np);
    const moects_kernel **v = malloc((nb + np + 1) * sizeof *v);
    size_t *lib_end = malloc((o->nlibs + 1) * sizeof *lib_end);
    if (!v || !lib_end) return free(v), free(lib_end), moects__cli_bad(o, "out of memory");
    for (size_t i = 0; i < nb; i++) v[i] = b[i];
    for (size_t i = 0; i < np; i++) v[nb + i] = pool[i];
    *n = o->nbuiltin = nb + np;
    char err[1400];
    for (size_t i = 0; i < o->nlibs; i++) {
        if (moects__plugin_load(o->libs[i], &v, n, err, sizeof err) != 0) {
            free(v), free(lib_end);
            return moects__cli_bad(o, "--kernel-lib %s", err);
        }
        lib_end[i] = *n;
    }
    if (o->nkernel_py) { /* described by Python in a child: this process imports nothing */
        if (moects__libmoects_path(o->libmoects, sizeof o->libmoects) != 0) {
            free(v), free(lib_end);
            return moects__cli_bad(o, "--kernel-py: libmoects.so.0 not found beside this moects (../lib): set MOECTS_LIB");
        }
        if (moects__kernel_py_load(o->kernel_py, o->nkernel_py, o->libmoects, &v, n, err, sizeof err) != 0) {
            free(v), free(lib_end);
            return moects__cli_bad(o, "--kernel-py: %s", err);
        }
    }
    int rc = 0;
    for (size_t i = 0; i < *n && !rc; i++) {
        moects_recipe r;
        if (v[i]->recipe && moects__recipe_parse(v[i]->recipe, v[i]->op, &r) != 0)
            rc = moects__cli_bad(o, "kernel %s: recipe: unknown \"%s\"", v[i]->name, v[i]->recipe);
        for (size_t j = 0; j < i && !rc; j++)
            if (!strcmp(v[i]->name, v[j]->name)) {
                char bi[1200], bj[1200];
                const char *wi = kernel_origin(o, i, nb + np, lib_end, bi, sizeof bi);
                const char *wj = kernel_origin(o, j, nb + np, lib_end, bj, sizeof bj);
                rc = strcmp(wi, wj) ? moects__cli_bad(o, "kernel %s: registered twice: %s and %s", v[i]->name, wj, wi)
                                    : moects__cli_bad(o, "kernel %s: registered twice, both %s", v[i]->name, wi);
            }
    }
    free(lib_end);
    if (rc) return free(v), rc;
    *out = v;
    return 0;
}

/* Whether glob selects kernel k: a pool mutant (gpu/cpu/pool.def) only for a glob written for the
 * pool ("pool.*", "pool.ep_gather.cap_*"), so that '*' keeps meaning the built-in kernels. */
static int glob_selects(const char *glob, const moects_kernel *k)
{
    if (!strncmp(k->name, "pool.", 5) && strncmp(glob, "pool.", 5)) return 0;
    return fnmatch(glob, k->name, 0) == 0;
}

/* Keep the kernels matching --kernel globs (each glob must match one); without globs the kernels from
 * outside (--kernel-lib, --kernel-py: those after the first o->nbuiltin) when any is given, else the
 * built-in ones but the mutant pool; must-pass runs (--cases) keep honest kernels only. */
int moects__cli_select_kernels(cli *o, const moects_kernel **v, size_t *n)
{
    size_t m = 0;
    for (size_t g = 0; g < o->nkernel_globs; g++) {
        int hit = 0;
        for (size_t i = 0; i < *n && !hit; i++) hit = glob_selects(o->kernel_globs[g], v[i]);
        if (!hit) return moects__cli_bad(o, "--kernel: no kernel matches \"%s\" (see moects list --kernels)", o->kernel_globs[g]);
    }
    for (size_t i = 0; i < *n; i++) {
        int keep = 0;
        if (o->nkernel_globs) {
            for (size_t g = 0; g < o->nkernel_globs && !keep; g++) keep = glob_selects(o->kernel_globs[g], v[i]);
        } else {
            int outside = o->nlibs || o->nkernel_py;
            keep = !(o->ncase_files && v[i]->bug) && (outside ? i >= o->nbuiltin : strncmp(v[i]->name, "pool.", 5) != 0);
        }
        if (keep) v[m++] = v[i];
    }
    *n = m;
    return 0;
}

/* ----------------------------------------------------------------- cases ---- */

void moects__cli_tier_names(unsigned t, char *buf, size_t len) { moects__tiers_text(t, buf, len); }

/* Mark the selected cases in sel[] by the one rule (moects__cases_pick). Missing must-pass entries go
 * to *missing; *first_file: the first must-pass list. */
int moects__cli_select_cases(cli *o, const moects_case_list *all, char *sel, char ***missing, size_t *nmissing,
                        char **first_file)
{
    const moects_selection s = {(const char *const *)o->globs, o->nglobs, o->tiers, o->tier_given,
                                (const char *const *)o->case_files, o->ncase_files};
    char err[1024];
    const int rc = moects__cases_pick(all, &s, sel, missing, nmissing, err, sizeof err);
    if (rc == -2) return moects__cli_bad(o, "%s%s", err, strcmp(o->cmd, "list") ? " (see moects list)" : "");
    if (rc) return moects__cli_bad(o, "%s", err);
    if (o->ncase_files) *first_file = o->case_files[0];
    return 0;
}

/* --config FILE [--tp N]... [--ep N]...: the model's derived cases under the layouts asked for (all its
 * layouts when none), every tier but large unless --tier says. A layout the derivation lacks for the
 * model is an error naming the file, the option and why. */
static int load_config_cases(cli *o, moects_case_list *all)
{
    char err[1024];
    moects_model m;
    if (moects__model_load(o->config, &m, err, sizeof err) != 0) return moects__cli_bad(o, "%s", err);
    char want[32][16];
    int nwant = 0;
    for (int i = 0; i < o->ntp + o->nep; i++) {
        int tp = i < o->ntp ? o->tps[i] : 0, ep = i < o->ntp ? 0 : o->eps[i - o->ntp];
        char why[200];
        if (!moects__layout_exists(&m, tp, ep, why, sizeof why))
            return moects__cli_bad(o, "%s: --%s %d: %s", o->config, tp ? "tp" : "ep", tp ? tp : ep, why);
        snprintf(want[nwant++], 16, "%s%d", tp ? "tp" : "ep", tp ? tp : ep);
    }
    moects_case_list mine = {0};
    if (moects__derive_cases(&m, &mine) != 0) return moects__cli_bad(o, "%s: case derivation failed", o->config);
    for (size_t c = 0; c < mine.n; c++) {
        int keep = !nwant;
        for (int w = 0; w < nwant && !keep; w++) keep = !strcmp(mine.v[c].layout, want[w]);
        if (keep && moects__case_list_push(all, &mine.v[c]) != 0) {
            moects__case_list_free(&mine);
            return moects__cli_bad(o, "out of memory");
        }
    }
    moects__case_list_free(&mine);
    if (!o->tier_given) o->tiers = MOECTS_TIER_SMOKE | MOECTS_TIER_FULL, o->tier_given = 1;
    return 0;
}

int moects__cli_load_cases(cli *o, const char *root, moects_case_list *all)
{
    char err[1024];
    memset(all, 0, sizeof *all);
    if (o->config) return load_config_cases(o, all);
    if (moects__cases_registry(root, all, err, sizeof err) != 0) return moects__cli_bad(o, "%s", err);
    return 0;
}

/* ----------------------------------------------------------------- metadata ---- */

static void read_line(const char *path, char *buf, size_t len)
{
    buf[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f) return;
    if (fgets(buf, (int)len, f)) buf[strcspn(buf, "\r\n")] = '\0';
    fclose(f);
}

/* The first line of what `fmt` (a shell command with one %s, given arg shell-quoted) prints on stdout;
 * "" when it fails or prints nothing. */
static void command_line(const char *fmt, const char *arg, char *out, size_t len)
{
    char *q = NULL, cmd[8400];
    size_t ql = 0;
    FILE *m = open_memstream(&q, &ql);
    out[0] = '\0';
    if (!m) return;
    moects__shell_quote_file(m, arg);
    fclose(m);
    snprintf(cmd, sizeof cmd, fmt, q ? q : "''");
    free(q);
    fflush(NULL);
    FILE *p = popen(cmd, "r");
    if (!p) return;
    if (!fgets(out, (int)len, p)) out[0] = '\0';
    out[strcspn(out, "\r\n")] = '\0';
    if (pclose(p) != 0) out[0] = '\0';
}

/* The SHA-256 of a file in hex (sha256sum), "" when it cannot be read. */
void moects__cli_file_sha256(const char *path, char *out, size_t len)
{
    char line[4200];
    command_line("sha256sum -- %s 2>/dev/null", path, line, sizeof line);
    snprintf(out, len, "%.64s", strlen(line) >= 64 ? line : "");
}

static void git_commit_files(const char *root, char *out, size_t len);

/* The commit the tree is at: $MOECTS_COMMIT, else what git says (rev-parse HEAD, "-dirty" appended when
 * `git status` sees tracked files changed), else read from <root>/.git when git is not installed (the
 * GPU host), without the dirty flag. */
void moects__cli_git_commit(const char *root, char *out, size_t len)
{
    const char *e = getenv("MOECTS_COMMIT");
    if (e && *e) {
        snprintf(out, len, "%s", e);
        return;
    }
    char sha[128], dirty[256];
    command_line("git -C %s rev-parse HEAD 2>/dev/null", root, sha, sizeof sha);
    if (strlen(sha) >= 40) {
        command_line("git -C %s status --porcelain --untracked-files=no 2>/dev/null", root, dirty, sizeof dirty);
        snprintf(out, len, "%.40s%s", sha, dirty[0] ? "-dirty" : "");
        return;
    }
    git_commit_files(root, out, len);
}

/* The commit from <root>/.git's files (HEAD, loose ref, packed-refs), "unknown" when none. */
static void git_commit_files(const char *root, char *out, size_t len)
{
    snprintf(out, len, "unknown");
    char gitdir[3000], p[4096], line[512];
    snprintf(gitdir, sizeof gitdir, "%.2900s/.git", root);
    struct stat st;
    if (stat(gitdir, &st) != 0) return;
    if (S_ISREG(st.st_mode)) { /* worktree: "gitdir: PATH" */
        read_line(gitdir, line, sizeof line);
        if (strncmp(line, "gitdir: ", 8)) return;
        if (line[8] == '/') snprintf(gitdir, sizeof gitdir, "%s", line + 8);
        else snprintf(gitdir, sizeof gitdir, "%.2000s/%.500s", root, line + 8);
    }
    snprintf(p, sizeof p, "%s/HEAD", gitdir);
    read_line(p, line, sizeof line);
    if (strncmp(line, "ref: ", 5) != 0) {
        if (strlen(line) >= 40) snprintf(out, len, "%.40s", line);
        return;
    }
    char ref[sizeof line];
    memcpy(ref, line + 5, strlen(line + 5) + 1);
    snprintf(p, sizeof p, "%s/%s", gitdir, ref);
    read_line(p, line, sizeof line);
    if (strlen(line) >= 40) {
        snprintf(out, len, "%.40s", line);
        return;
    }
    snprintf(p, sizeof p, "%s/packed-refs", gitdir);
    FILE *f = fopen(p, "r");
    if (!f) return;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = '\0';
        char *sp = strchr(line, ' ');
        if (sp && !strcmp(sp + 1, ref) && sp - line >= 40) {
            snprintf(out, len, "%.40s", line);
            break;
        }
    }
    fclose(f);
}

/* ----------------------------------------------------------------- list ---- */

int moects__cli_fail(const char *cmd, const char *msg)
{
    fprintf(stderr, "moects %s: %s\n", cmd, msg);
    return 2;
}
