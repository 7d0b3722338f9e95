/* killmatrix.c: the work of `moects killmatrix RESULTS.json... [--out FILE] [--min-smoke N] [--root
 * DIR]` (moects__killmatrix, harness/reports_commands.h; its usage and arguments:
 * harness/cli/cmd_killmatrix.c): the kill matrix of a run's mutants (of several runs or shards, read as one) (the CPU mutant pool, gpu/cpu/pool.def, and any other mutant in the
 * run): one row per mutant, one column per case family, each cell "k/n", k of the family's n cases
 * that caught the mutant (a FAIL_* verdict), and the number of smoke-tier cases that caught it.
 * Issue 13: the smoke tier is chosen so that every pool mutant is caught by at least two smoke
 * cases; --min-smoke N makes the command exit 1 when a mutant not marked "(equivalent" or "(large
 * tier" (a bug that needs more than 2^31 elements) in its bug text is caught by fewer than N smoke
 * cases (listed on stderr).
 *
 * Case family: regressions `<op>/regression/<class>`; derived cases `<op>/<tp|ep>/<variant>` with
 * the model, the layout's size and the token or row count dropped ("ep_gather/ep/skewed",
 * "fp4_gemm.nvfp4/tp/gemm1"). Exit 0, 1 (--min-smoke not met), 2 bad input. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moects_registry.h"
#include "moects_runner.h"
#include "reports_commands.h"
#include "reports_internal.h"

/* 1 when s is a token or row count component: t128, m1024 */
static int is_count(const char *s, size_t n)
{
    if (n < 2 || (s[0] != 't' && s[0] != 'm')) return 0;
    for (size_t i = 1; i < n; i++)
        if (!isdigit((unsigned char)s[i])) return 0;
    return 1;
}

/* The family of case id (above) into fam. */
static void family_of(const char *id, char *fam, size_t len)
{
    const char *p[8];
    size_t l[8], n = 0;
    for (const char *s = id; *s && n < 8;) {
        const char *e = strchr(s, '/');
        p[n] = s;
        l[n++] = e ? (size_t)(e - s) : strlen(s);
        if (!e) break;
        s = e + 1;
    }
    if (n >= 3 && l[1] == 10 && !strncmp(p[1], "regression", 10)) {
        snprintf(fam, len, "%.*s/regression/%.*s", (int)l[0], p[0], (int)l[2], p[2]);
        return;
    }
    char rest[96] = "";
    size_t rl = 0;
    for (size_t i = 3; i < n; i++) {
        if (is_count(p[i], l[i])) continue;
        rl += (size_t)snprintf(rest + rl, sizeof rest - rl, "%s%.*s", rl ? "/" : "", (int)l[i], p[i]);
        if (rl >= sizeof rest) break;
    }
    snprintf(fam, len, "%.*s/%.2s/%s", (int)l[0], p[0], n > 2 ? p[2] : "-", rl ? rest : "plain");
}

typedef struct {
    char **fam;       /* distinct families, sorted */
    size_t nfam;
    char **mut;       /* distinct mutants, in run order */
    size_t nmut;
    int *killed, *ran; /* [nmut][nfam] */
    int *smoke_kills; /* [nmut] */
    const char **bug; /* [nmut] the mutant's bug text (from the pool/built-in table), or "" */
} km;

static long find_str(char **v, size_t n, const char *s)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(v[i], s)) return (long)i;
    return -1;
}

static int push_str(char ***v, size_t *n, const char *s)
{
    char **g = realloc(*v, (*n + 1) * sizeof **v);
    if (!g) return -1;
    *v = g;
    if (!(g[*n] = strdup(s))) return -1;
    (*n)++;
    return 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Families and mutants of the run's mutant results. */
static int km_collect(km *m, const moects_run *run)
{
    char fam[128];
    for (size_t i = 0; i < run->n; i++) {
        const moects_result *r = &run->v[i];
        if (!r->is_mutant) continue;
        family_of(r->case_id, fam, sizeof fam);
        if (find_str(m->fam, m->nfam, fam) < 0 && push_str(&m->fam, &m->nfam, fam)) return -1;
        if (find_str(m->mut, m->nmut, r->kernel) < 0 && push_str(&m->mut, &m->nmut, r->kernel)) return -1;
    }
    qsort(m->fam, m->nfam, sizeof *m->fam, cmp_str);
    m->killed = calloc(m->nmut * m->nfam + 1, sizeof *m->killed);
    m->ran = calloc(m->nmut * m->nfam + 1, sizeof *m->ran);
    m->smoke_kills = calloc(m->nmut + 1, sizeof *m->smoke_kills);
    return m->killed && m->ran && m->smoke_kills ? 0 : -1;
}

/* Case tiers from the registry at root: id -> tiers (linear search on a sorted copy). */
typedef struct {
    moects_case_list cl;
    const moects_case **byid;
} km_tiers;

static int cmp_case(const void *a, const void *b)
{
    return strcmp((*(const moects_case *const *)a)->id, (*(const moects_case *const *)b)->id);
}

static unsigned tiers_of(const km_tiers *t, const char *id)
{
    size_t lo = 0, hi = t->cl.n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int d = strcmp(t->byid[mid]->id, id);
        if (!d) return t->byid[mid]->tiers;
        if (d < 0) lo = mid + 1;
        else hi = mid;
    }
    return 0;
}

static void km_count(km *m, const moects_run *run, const km_tiers *t)
{
    char fam[128];
    for (size_t i = 0; i < run->n; i++) {
        const moects_result *r = &run->v[i];
        if (!r->is_mutant || r->verdict == MOECTS_SKIP || r->verdict == MOECTS_UNSUPPORTED) continue;
        family_of(r->case_id, fam, sizeof fam);
        size_t mi = (size_t)find_str(m->mut, m->nmut, r->kernel), fi = (size_t)find_str(m->fam, m->nfam, fam);
        int kill = moects_verdict_is_fail(r->verdict);
        m->ran[mi * m->nfam + fi]++;
        m->killed[mi * m->nfam + fi] += kill;
        if (kill && (tiers_of(t, r->case_id) & MOECTS_TIER_SMOKE)) m->smoke_kills[mi]++;
    }
}

/* Markdown: per op, a table of mutants x families of that op. */
static void km_render(moects__buf *b, const km *m, const moects_run *run)
{
    moects__buf_printf(b, "# Mutant kill matrix\n\nRun at commit %s, %s, seed %llu, %zu results; selection: ",
                       run->commit, run->date, (unsigned long long)run->seed, run->n);
    moects__buf_md_code(b, run->filter[0] ? run->filter : "(all)");
    moects__buf_add(b, ".\nA cell is k/n: k of the family's n judged cases caught the mutant (FAIL_*); "
                       "`smoke`: smoke-tier cases that caught it. Families: `moects killmatrix --help`.\n");
    const char *ops[] = {"ep_gather", "fp4_gemm", "moe_gemm"};
    for (size_t o = 0; o < 3; o++) {
        size_t ol = strlen(ops[o]), nf = 0;
        for (size_t f = 0; f < m->nfam; f++) nf += !strncmp(m->fam[f], ops[o], ol);
        if (!nf) continue;
        moects__buf_printf(b, "\n## %s\n\n| family |", ops[o]);
        for (size_t i = 0; i < m->nmut; i++) {
            size_t any = 0;
            for (size_t f = 0; f < m->nfam; f++) any += !strncmp(m->fam[f], ops[o], ol) && m->ran[i * m->nfam + f];
            if (any) moects__buf_printf(b, " %zu |", i);
        }
        moects__buf_add(b, "\n|---|");
        for (size_t i = 0; i < m->nmut; i++) {
            size_t any = 0;
            for (size_t f = 0; f < m->nfam; f++) any += !strncmp(m->fam[f], ops[o], ol) && m->ran[i * m->nfam + f];
            if (any) moects__buf_add(b, "---|");
        }
        moects__buf_add(b, "\n");
        for (size_t f = 0; f < m->nfam; f++) {
            if (strncmp(m->fam[f], ops[o], ol)) continue;
            moects__buf_add(b, "| ");
            moects__buf_md(b, m->fam[f]);
            moects__buf_add(b, " |");
            for (size_t i = 0; i < m->nmut; i++) {
                size_t any = 0;
                for (size_t g = 0; g < m->nfam; g++) any += !strncmp(m->fam[g], ops[o], ol) && m->ran[i * m->nfam + g];
                if (!any) continue;
                int k = m->killed[i * m->nfam + f], n = m->ran[i * m->nfam + f];
                if (n) moects__buf_printf(b, " %s%d/%d%s |", k ? "**" : "", k, n, k ? "**" : "");
                else moects__buf_add(b, " |");
            }
            moects__buf_add(b, "\n");
        }
    }
    moects__buf_add(b, "\n## Mutants\n\n| # | mutant | caught | smoke cases that caught it | bug |\n|---|---|---|---|---|\n");
    for (size_t i = 0; i < m->nmut; i++) {
        int k = 0, n = 0;
        for (size_t f = 0; f < m->nfam; f++) {
            k += m->killed[i * m->nfam + f];
            n += m->ran[i * m->nfam + f];
        }
        moects__buf_printf(b, "| %zu | ", i);
        moects__buf_md_code(b, m->mut[i]);
        moects__buf_printf(b, " | %d/%d | %d | ", k, n, m->smoke_kills[i]);
        moects__buf_md(b, m->bug[i]);
        moects__buf_add(b, " |\n");
    }
}

static void km_free(km *m)
{
    for (size_t i = 0; i < m->nfam; i++) free(m->fam[i]);
    for (size_t i = 0; i < m->nmut; i++) free(m->mut[i]);
    free(m->fam);
    free(m->mut);
    free(m->killed);
    free(m->ran);
    free(m->smoke_kills);
    free(m->bug);
}

/* Bug texts of the mutants, from the pool and the built-in table (a library's: ""). */
static int km_bugs(km *m)
{
    size_t nb, np;
    const moects_kernel *const *b = moects__builtin_kernels(&nb);
    const moects_kernel *const *p = moects__pool_kernels(&np);
    if (!(m->bug = calloc(m->nmut + 1, sizeof *m->bug))) return -1;
    for (size_t i = 0; i < m->nmut; i++) {
        m->bug[i] = "";
        for (size_t j = 0; j < nb + np; j++) {
            const moects_kernel *k = j < nb ? b[j] : p[j - nb];
            if (!strcmp(k->name, m->mut[i]) && k->bug) m->bug[i] = k->bug;
        }
    }
    return 0;
}

/* Mutants below --min-smoke, named on stderr; their count. */
static int km_short(const km *m, int min_smoke)
{
    int bad = 0;
    for (size_t i = 0; i < m->nmut; i++) {
        if (m->smoke_kills[i] >= min_smoke || strstr(m->bug[i], "(equivalent") || strstr(m->bug[i], "(large tier"))
            continue;
        fprintf(stderr, "moects killmatrix: %s caught by %d smoke case%s (want >= %d)\n", m->mut[i],
                m->smoke_kills[i], m->smoke_kills[i] == 1 ? "" : "s", min_smoke);
        bad++;
    }
    return bad;
}

/* The results of every file into one run (the first file's header). 0, or -1 with err. */
static int read_all(const char *const *paths, int n, moects_run *run, char *err, size_t len)
{
    if (moects__results_read(paths[0], run, err, len)) return -1;
    for (int f = 1; f < n; f++) {
        moects_run more = {0};
        if (moects__results_read(paths[f], &more, err, len)) return -1;
        for (size_t i = 0; i < more.n; i++)
            if (moects__run_push(run, &more.v[i])) {
                moects__run_free(&more);
                snprintf(err, len, "out of memory");
                return -1;
            }
        moects__run_free(&more);
    }
    return 0;
}

/* `moects killmatrix` on its parsed arguments (harness/reports_commands.h): the runs read as one and
 * the registry's tiers, the matrix counted and rendered, --min-smoke checked. */
int moects__killmatrix(const moects__killmatrix_args *a)
{
    char err[1024];
    moects_run run = {0};
    km m = {0};
    km_tiers t = {{0}, NULL};
    moects__buf b = {0};
    int rc = 2;
    if (read_all(a->in, a->nin, &run, err, sizeof err) || moects__cases_registry(a->root, &t.cl, err, sizeof err)) {
        fprintf(stderr, "moects killmatrix: %s\n", err);
        goto done;
    }
    if (!(t.byid = malloc((t.cl.n + 1) * sizeof *t.byid)) || km_collect(&m, &run) || km_bugs(&m)) {
        fprintf(stderr, "moects killmatrix: out of memory\n");
        goto done;
    }
    for (size_t i = 0; i < t.cl.n; i++) t.byid[i] = &t.cl.v[i];
    qsort(t.byid, t.cl.n, sizeof *t.byid, cmp_case);
    km_count(&m, &run, &t);
    km_render(&b, &m, &run);
    if (a->out) {
        if (moects__buf_write(&b, a->out, err, sizeof err)) {
            fprintf(stderr, "moects killmatrix: %s\n", err);
            goto done;
        }
    } else {
        fwrite(b.s, 1, b.n, stdout);
    }
    rc = a->min_smoke && km_short(&m, a->min_smoke) ? 1 : 0;
done:
    moects__buf_free(&b);
    km_free(&m);
    free(t.byid);
    moects__case_list_free(&t.cl);
    moects__run_free(&run);
    return rc;
}
