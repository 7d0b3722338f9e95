/* shared.c: what several reports share (reports_internal.h): repro lines and their folder, the
 * Markdown verdict counts, the GPUs' shares, layout order, the (kernel, case) index and the model x
 * layout cells. */
#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cases_internal.h"
#include "reports_internal.h"

void moects__shell_quote(moects__buf *b, const char *s)
{
    int plain = *s != '\0';
    for (const char *p = s; *p; p++)
        if (!isalnum((unsigned char)*p) && !strchr("/._-:=+,@%", *p)) plain = 0;
    if (plain) {
        moects__buf_add(b, s);
        return;
    }
    moects__buf_add(b, "'");
    for (; *s; s++) {
        if (*s == '\'') moects__buf_add(b, "'\\''");
        else moects__buf_addn(b, s, 1);
    }
    moects__buf_add(b, "'");
}

char *moects__path_here(const char *path)
{
    char *abs = realpath(path, NULL), cwd[4096];
    if (!abs) return strdup(path);
    size_t n = getcwd(cwd, sizeof cwd) ? strlen(cwd) : 0;
    if (n > 1 && !strncmp(abs, cwd, n) && abs[n] == '/' && abs[n + 1]) {
        const char *rel = abs + n + 1;
        char *out = malloc(strlen(rel) + 3);
        if (out) sprintf(out, "%s%s", strchr(rel, '/') ? "" : "./", rel);
        free(abs);
        return out;
    }
    return abs;
}

/* One case alone under one kernel, same seed: `moects run --kernel K --seed S CASE` (the form
 * harness/report/tap.c prints). $MOECTS_PROGRAM, when set, is the command verbatim: the Python
 * package's `moects` entry point and `python -m moects` set it to themselves, as the bundled binary
 * they exec is not what a user types (its runner would not find their interpreter). */
const char *moects__self_program(void)
{
    static char prog[4200];
    if (prog[0]) return prog;
    const char *given = getenv("MOECTS_PROGRAM");
    if (given && *given) return snprintf(prog, sizeof prog, "%s", given), prog;
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    snprintf(prog, sizeof prog, "moects");
    if (n <= 0) return prog;
    self[n] = '\0';
    const char *path = getenv("PATH");
    for (const char *p = path ? path : ""; *p;) { /* the first moects on PATH: is it this binary? */
        size_t l = strcspn(p, ":");
        char cand[4200];
        snprintf(cand, sizeof cand, "%.*s/moects", (int)(l < 4096 ? l : 4096), p);
        char *real = l ? realpath(cand, NULL) : NULL;
        if (real) {
            int same = strcmp(real, self) == 0;
            free(real);
            if (same) return prog;
            break;
        }
        p += l + (p[l] == ':');
    }
    moects__buf b = {0};
    char *here = moects__path_here(self);
    moects__shell_quote(&b, here ? here : self);
    if (b.s) snprintf(prog, sizeof prog, "%s", b.s);
    moects__buf_free(&b);
    free(here);
    return prog;
}

void moects__repro_dir(const char *case_id, char *buf, size_t len)
{
    int n = snprintf(buf, len, "reports/repro/");
    for (const char *c = case_id; *c && n >= 0 && (size_t)n + 1 < len; c++, n++)
        buf[n] = isalnum((unsigned char)*c) || strchr("._-", *c) ? *c : '_';
    if (n >= 0 && (size_t)n < len) buf[n] = '\0';
}

void moects__repro_as(moects__buf *b, const moects_result *r, const char *program, const char *extra)
{
    char dir[256];
    moects__repro_dir(r->case_id, dir, sizeof dir);
    moects__buf_add(b, program ? program : "moects");
    moects__buf_add(b, " run --kernel ");
    moects__shell_quote(b, r->kernel);
    moects__buf_printf(b, " --seed %" PRIu64 " --out ", r->seed);
    moects__shell_quote(b, dir);
    if (extra) moects__buf_add(b, extra);
    moects__buf_add(b, " ");
    moects__shell_quote(b, r->case_id);
}

void moects__repro(moects__buf *b, const moects_result *r) { moects__repro_as(b, r, moects__self_program(), NULL); }

void moects__filter_carried(moects__buf *b, const char *filter)
{
    static const char *const carried[] = {"--kernel-lib ", "--kernel-py ", "--config "};
    for (int o = 0; o < 3; o++)
        for (const char *p = filter; (p = strstr(p, carried[o])) != NULL;) {
            p += strlen(carried[o]);
            size_t n = strcspn(p, " ");
            char path[4096];
            snprintf(path, sizeof path, "%.*s", (int)(n < sizeof path ? n : sizeof path - 1), p);
            moects__buf_printf(b, " %s", carried[o]);
            moects__shell_quote(b, path);
            p += n;
        }
}

void moects__repro_filter(moects__buf *b, const moects_result *r, const char *filter)
{
    moects__repro(b, r);
    moects__filter_carried(b, filter);
}

void moects__md_counts(moects__buf *b, const moects_run *run)
{
    size_t cnt[2][MOECTS_VERDICT_COUNT] = {{0}};
    for (size_t i = 0; i < run->n; i++)
        if ((unsigned)run->v[i].verdict < MOECTS_VERDICT_COUNT) cnt[run->v[i].is_mutant != 0][run->v[i].verdict]++;
    moects__buf_add(b, "| verdict | kernels | mutants |\n|---|---:|---:|\n");
    for (int v = 0; v < MOECTS_VERDICT_COUNT; v++)
        if (cnt[0][v] || cnt[1][v])
            moects__buf_printf(b, "| %s | %zu | %zu |\n", moects__verdict_name((moects_verdict)v), cnt[0][v], cnt[1][v]);
    size_t t0 = 0, t1 = 0;
    for (int v = 0; v < MOECTS_VERDICT_COUNT; v++) t0 += cnt[0][v], t1 += cnt[1][v];
    moects__buf_printf(b, "| total | %zu | %zu |\n", t0, t1);
}

/* GPU names in order: decimal ordinals by value ("2" < "10"), before anything else, which goes by strcmp. */
static int gpu_cmp(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    int da = la && strspn(a, "0123456789") == la, db = lb && strspn(b, "0123456789") == lb;
    if (da != db) return da ? -1 : 1;
    if (da && la != lb) return la < lb ? -1 : 1;
    return strcmp(a, b);
}

/* qsort_r: result indices by (gpu, case id). */
static int by_gpu_case(const void *x, const void *y, void *ctx)
{
    const moects_run *run = ctx;
    const moects_result *a = &run->v[*(const size_t *)x], *b = &run->v[*(const size_t *)y];
    int c = gpu_cmp(a->gpu, b->gpu);
    return c ? c : strcmp(a->case_id, b->case_id);
}

long moects__gpu_shares(const moects_run *run, moects__gpu_share **out)
{
    size_t *ix = malloc((run->n + 1) * sizeof *ix), m = 0;
    moects__gpu_share *v = *out = malloc((run->n + 1) * sizeof *v);
    if (!ix || !v) return free(ix), -1;
    for (size_t i = 0; i < run->n; i++)
        if (run->v[i].gpu[0]) ix[m++] = i;
    qsort_r(ix, m, sizeof *ix, by_gpu_case, (void *)run);
    long n = 0;
    for (size_t j = 0; j < m; j++) {
        const moects_result *r = &run->v[ix[j]], *prev = j ? &run->v[ix[j - 1]] : NULL;
        int new_gpu = !prev || strcmp(prev->gpu, r->gpu);
        if (new_gpu) v[n++] = (moects__gpu_share){.gpu = r->gpu};
        v[n - 1].cases += new_gpu || strcmp(prev->case_id, r->case_id);
        v[n - 1].results++;
        v[n - 1].wall_s += r->wall_s;
    }
    free(ix);
    return n;
}

static int layout_rank(const char *s, long *num)
{
    char *end;
    if ((s[0] == 't' || s[0] == 'e') && s[1] == 'p' && isdigit((unsigned char)s[2])) {
        *num = strtol(s + 2, &end, 10);
        if (*end == '\0') return s[0] == 't' ? 0 : 1;
    }
    *num = 0;
    return 2;
}

int moects__layout_cmp(const char *a, const char *b)
{
    long na, nb;
    int ra = layout_rank(a, &na), rb = layout_rank(b, &nb);
    if (ra != rb) return ra < rb ? -1 : 1;
    if (na != nb) return na < nb ? -1 : 1;
    return strcmp(a, b);
}

static uint64_t fnv1a(uint64_t h, const char *s)
{
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

static uint64_t pair_hash(const char *kernel, const char *case_id)
{
    return fnv1a(fnv1a(0xcbf29ce484222325ull, kernel) * 31 + 1, case_id);
}

int moects__index_build(moects__index *ix, const moects_run *run)
{
    ix->run = run;
    ix->cap = 16;
    while (ix->cap < 2 * run->n + 1) ix->cap *= 2;
    ix->slot = calloc(ix->cap, sizeof *ix->slot);
    if (!ix->slot) return -1;
    for (size_t i = 0; i < run->n; i++) {
        size_t h = (size_t)pair_hash(run->v[i].kernel, run->v[i].case_id) & (ix->cap - 1);
        while (ix->slot[h]) {
            const moects_result *o = &run->v[ix->slot[h] - 1];
            if (!strcmp(o->kernel, run->v[i].kernel) && !strcmp(o->case_id, run->v[i].case_id)) break;
            h = (h + 1) & (ix->cap - 1);
        }
        if (!ix->slot[h]) ix->slot[h] = i + 1; /* a duplicate keeps the first */
    }
    return 0;
}

long moects__index_find(const moects__index *ix, const char *kernel, const char *case_id)
{
    size_t h = (size_t)pair_hash(kernel, case_id) & (ix->cap - 1);
    while (ix->slot[h]) {
        const moects_result *o = &ix->run->v[ix->slot[h] - 1];
        if (!strcmp(o->kernel, kernel) && !strcmp(o->case_id, case_id)) return (long)ix->slot[h] - 1;
        h = (h + 1) & (ix->cap - 1);
    }
    return -1;
}

void moects__index_free(moects__index *ix)
{
    free(ix->slot);
    ix->slot = NULL;
    ix->cap = 0;
}

static const char *const cell_names[MOECTS__CELL_COUNT] = {
    "PASS", "FAIL", "UNSUPPORTED", "NOT_REGISTERED", "NOT_RUN"};

const char *moects__cell_name(moects__cell_state s)
{
    return (unsigned)s < MOECTS__CELL_COUNT ? cell_names[s] : "?";
}

moects__cell_state moects__cell_state_of(const moects__cell *c)
{
    if (moects__fail_count(c->n)) return MOECTS__CELL_FAIL;
    if (c->n[MOECTS_UNSUPPORTED]) return MOECTS__CELL_UNSUPPORTED;
    if (moects__pass_count(c->n)) return MOECTS__CELL_PASS;
    return MOECTS__CELL_NOT_RUN;
}

static int cell_key_cmp(const char *k1, const char *m1, const char *l1, const char *k2, const char *m2,
                        const char *l2)
{
    int d = strcmp(k1, k2);
    if (!d) d = strcmp(m1, m2);
    if (!d) d = strcmp(l1, l2);
    return d;
}

static int cells_sort_cmp(const void *a, const void *b, void *ctx)
{
    const moects_run *run = ctx;
    const moects_result *x = &run->v[*(const size_t *)a], *y = &run->v[*(const size_t *)b];
    int d = cell_key_cmp(x->kernel, x->model, x->layout, y->kernel, y->model, y->layout);
    if (!d) d = (*(const size_t *)a > *(const size_t *)b) - (*(const size_t *)a < *(const size_t *)b);
    return d;
}

long moects__cells(const moects_run *run, const char *keep, moects__cell **out)
{
    *out = NULL;
    size_t *ord = malloc((run->n ? run->n : 1) * sizeof *ord);
    moects__cell *v = malloc((run->n ? run->n : 1) * sizeof *v);
    if (!ord || !v) {
        free(ord);
        free(v);
        return -1;
    }
    size_t m = 0;
    for (size_t i = 0; i < run->n; i++)
        if (!keep || keep[i]) ord[m++] = i;
    qsort_r(ord, m, sizeof *ord, cells_sort_cmp, (void *)run);
    long n = 0;
    for (size_t j = 0; j < m; j++) {
        const moects_result *r = &run->v[ord[j]];
        moects__cell *c = n ? &v[n - 1] : NULL;
        if (!c || cell_key_cmp(c->kernel, c->model, c->layout, r->kernel, r->model, r->layout)) {
            c = &v[n++];
            memset(c, 0, sizeof *c);
            c->kernel = r->kernel;
            c->model = r->model;
            c->layout = r->layout;
            c->op = r->op;
            c->is_mutant = r->is_mutant;
            c->first_bad = -1;
        }
        c->n[r->verdict]++;
        if (moects_verdict_is_fail(r->verdict) &&
            (c->first_bad < 0 || !moects_verdict_is_fail(run->v[c->first_bad].verdict)))
            c->first_bad = (long)ord[j];
        else if (r->verdict == MOECTS_UNSUPPORTED && c->first_bad < 0)
            c->first_bad = (long)ord[j];
    }
    free(ord);
    *out = v;
    return n;
}

const moects__cell *moects__cell_find(const moects__cell *v, long n, const char *kernel, const char *model,
                                      const char *layout)
{
    long lo = 0, hi = n;
    while (lo < hi) {
        long mid = lo + (hi - lo) / 2;
        int d = cell_key_cmp(v[mid].kernel, v[mid].model, v[mid].layout, kernel, model, layout);
        if (!d) return &v[mid];
        if (d < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

/* DIR/../share/moects of the file holding this code: libmoects when it is loaded (dladdr names it), else
 * the executable (/proc/self/exe); "" when that folder has no cases/. */
static void bundled_root_of(char *out, size_t len)
{
    char self[4096] = "";
    Dl_info di;
    if (dladdr((void *)bundled_root_of, &di) && di.dli_fname && strstr(di.dli_fname, "libmoects")) {
        char *real = realpath(di.dli_fname, NULL);
        if (real) snprintf(self, sizeof self, "%s", real);
        free(real);
    }
    if (!self[0]) {
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        self[n > 0 ? n : 0] = '\0';
    }
    char *slash = strrchr(self, '/');
    out[0] = '\0';
    if (!slash) return;
    *slash = '\0';
    char dir[4200], cases[4300];
    snprintf(dir, sizeof dir, "%s/../share/moects", self);
    snprintf(cases, sizeof cases, "%s/cases", dir);
    struct stat st;
    char *real = stat(cases, &st) == 0 && S_ISDIR(st.st_mode) ? realpath(dir, NULL) : NULL;
    if (real) snprintf(out, len, "%s", real);
    free(real);
}

const char *moects__bundled_root(void)
{
    static char root[4096];
    static int done;
    if (!done) bundled_root_of(root, sizeof root), done = 1;
    return root[0] ? root : NULL;
}

const char *moects__source_root(void)
{
    const char *r = getenv("MOECTS_ROOT");
    if (r && *r) return r;
    if ((r = moects__bundled_root()) != NULL) return r;
#ifdef MOECTS_SOURCE_DIR
    return MOECTS_SOURCE_DIR;
#else
    return ".";
#endif
}

void moects__path_shown(const char *path, char *buf, size_t len)
{
    char *here = moects__path_here(path), *root = realpath(moects__source_root(), NULL);
    const char *shown = here ? here : path;
    size_t n = root ? strlen(root) : 0;
    if (shown[0] == '/' && n > 1 && !strncmp(shown, root, n) && shown[n] == '/' && shown[n + 1]) shown += n + 1;
    else if (shown[0] == '/' && strrchr(shown, '/')[1]) shown = strrchr(shown, '/') + 1;
    snprintf(buf, len, "%s", shown);
    free(here);
    free(root);
}
