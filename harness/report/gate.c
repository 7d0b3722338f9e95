/* gate.c: the work of `moects gate RUN_RESULTS [--baseline BASE_RESULTS] [--mustpass FILE...] [--summary
 * FILE.md] [--limit N]` (moects__gate, harness/reports_commands.h; its usage and arguments:
 * harness/cli/cmd_gate.c): the pass/fail decision of CI on a run (DESIGN.md "Harness", Gate).
 *
 * The gate fails (exit 1) on:
 *   regression       an honest kernel's (kernel, case) passed in the baseline and now fails
 *                    (FAIL_MISMATCH, FAIL_CRASH, FAIL_TIMEOUT);
 *   new failure      an honest kernel fails a (kernel, case) that did not fail in the baseline
 *                    (absent, UNSUPPORTED or SKIP there); without a baseline, every honest failure;
 *   must-pass        a case of a --mustpass list (ids or globs) has no honest-kernel result, or
 *                    none passed, or one was refused or failed (a failure already listed above is
 *                    not listed twice);
 *   lost coverage    a (model, layout, honest kernel) cell that was PASS in the baseline is now
 *                    FAIL, UNSUPPORTED, absent or only skipped;
 *   mutant escaped   a mutant caught (some case failed) in the baseline is caught by no case now;
 *   empty run        the run holds no result;
 *   nothing compared the run holds results but shares no (kernel, case) result with the baseline
 *                    (another registry, or disjoint selections): nothing was compared.
 * When the run and the baseline were made with the same selection ("filter", the run's case and
 * kernel options), every baseline result is compared, and a result or cell the run lacks is lost.
 * When the selections differ (a developer's filtered run against the CI baseline), only baseline
 * results whose case and kernel the run holds are compared. A failure in both runs ("known") is
 * reported but does not fail the gate; so is an honest failure that the run marked as a known
 * finding (results.json "known", from cases/known-findings.txt), which also satisfies must-pass as
 * a SKIP does. Known findings and entries matching passing results ("fixed?") are counted in the
 * summary. Exit 2: bad usage, an unreadable results file, a --mustpass FILE without case ids (as
 * `moects run --cases` refuses it), a --summary FILE that cannot be created (both checked before
 * anything is read; nothing printed), or a shard (merge shards first: `moects merge`). --summary
 * FILE is written before the summary goes to stdout; an empty --summary path (--summary
 * "$GITHUB_STEP_SUMMARY" outside GitHub Actions) writes no file, says so in one stderr line after
 * the summary, and leaves the exit status alone. The Markdown summary (stdout, and --summary FILE)
 * is fit for a PR comment or $GITHUB_STEP_SUMMARY: the counts, then the problems with a repro line
 * each, at most --limit (default 20) of them shared round-robin among the kinds of problem, each
 * kind cut short ending with "- and N more <kind>". */
#include <errno.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "moects_tap.h"
#include "reports_commands.h"
#include "reports_internal.h"

enum { CAT_REGRESSION, CAT_NEW_FAIL, CAT_MUSTPASS, CAT_LOST_CELL, CAT_MUTANT, CAT_EMPTY, CAT_DISJOINT, CAT_COUNT };
static const char *const cat_title[CAT_COUNT] = {"regression", "new failure", "must-pass", "lost coverage",
                                                  "mutant escaped", "empty run", "nothing compared"};
static const char *const cat_plural[CAT_COUNT] = {"regressions", "new failures", "must-pass cases",
                                                   "lost coverage cells", "mutants escaped", "empty run",
                                                   "nothing compared"};

typedef struct {
    char **items[CAT_COUNT]; /* each a Markdown list item ("- ...\n", repro line included) */
    size_t ncat[CAT_COUNT], cap[CAT_COUNT], n;
    size_t limit;
    size_t known; /* honest failures that failed in the baseline too */
    size_t findings, fixed; /* honest failures / passes that carry a known finding ("known") */
    int oom;
} problems;

static void add_item(problems *p, int cat, const moects__buf *text)
{
    p->n++;
    if (p->ncat[cat] == p->cap[cat]) {
        size_t cap = p->cap[cat] ? 2 * p->cap[cat] : 16;
        char **v = realloc(p->items[cat], cap * sizeof *v);
        if (!v) {
            p->oom = 1;
            return;
        }
        p->items[cat] = v;
        p->cap[cat] = cap;
    }
    char *s = strdup(text->s ? text->s : "");
    if (!s) p->oom = 1;
    p->items[cat][p->ncat[cat]++] = s;
}

/* Share the --limit among the categories round-robin, so that each kind of problem shows. */
static void list_items(moects__buf *out, const problems *p)
{
    size_t quota[CAT_COUNT] = {0}, left = p->limit;
    for (int more = 1; more && left;) {
        more = 0;
        for (int c = 0; c < CAT_COUNT && left; c++)
            if (quota[c] < p->ncat[c]) {
                quota[c]++;
                left--;
                more = 1;
            }
    }
    for (int c = 0; c < CAT_COUNT; c++) {
        for (size_t i = 0; i < quota[c]; i++) moects__buf_add(out, p->items[c][i] ? p->items[c][i] : "");
        if (p->ncat[c] > quota[c])
            moects__buf_printf(out, "- and %zu more %s\n", p->ncat[c] - quota[c],
                               p->ncat[c] - quota[c] == 1 && c != CAT_MUSTPASS ? cat_title[c] : cat_plural[c]);
    }
}

static void problems_free(problems *p)
{
    for (int c = 0; c < CAT_COUNT; c++) {
        for (size_t i = 0; i < p->ncat[c] && i < p->cap[c]; i++) free(p->items[c][i]);
        free(p->items[c]);
    }
}

/* "FAIL_MISMATCH: 12 mismatches, max ULP 3, first at (t 0, d 5): got 0x.. want 0x.." or "VERDICT: reason". */
static void describe(moects__buf *b, const moects_result *r)
{
    moects__buf_add(b, moects__verdict_name(r->verdict));
    if (r->verdict == MOECTS_FAIL_MISMATCH || r->mismatches) {
        moects__buf_printf(b, ": %" PRId64 " mismatches", r->mismatches);
        if (r->max_ulp == UINT64_MAX) moects__buf_add(b, ", NaN or Inf against another value");
        else moects__buf_printf(b, ", max ULP %" PRIu64, r->max_ulp);
        if (r->first_index >= 0) {
            char at[96];
            moects__first_at(r, at, sizeof at); /* the op's coordinates, as the TAP's */
            moects__buf_add(b, ", first at ");
            moects__buf_md(b, at);
            moects__buf_add(b, ": got ");
            moects__buf_md(b, r->got);
            moects__buf_add(b, ", want ");
            moects__buf_md(b, r->want);
        }
    }
    if (r->reason[0]) {
        moects__buf_add(b, r->verdict == MOECTS_FAIL_MISMATCH ? "; " : ": ");
        moects__buf_md(b, r->reason);
    }
}

/* "  `command`\n": the repro line under a problem. */
static void code_line(moects__buf *b, const moects__buf *cmd)
{
    moects__buf_add(b, "  `");
    moects__buf_md_code(b, cmd->s ? cmd->s : "");
    moects__buf_add(b, "`\n");
}

/* " reports/repro/<a>[_<b>]" (moects__repro_dir): a folder of its own for a command's reports. */
static void out_dir(moects__buf *b, const char *a, const char *c)
{
    char name[512], dir[600];
    snprintf(name, sizeof name, "%s%s%s", a, c ? "_" : "", c ? c : "");
    moects__repro_dir(name, dir, sizeof dir);
    moects__shell_quote(b, dir);
}

/* The repro command of r, with the run's --kernel-lib and --config (moects__repro_filter). */
static void repro_line(moects__buf *b, const moects_result *r, const char *filter)
{
    moects__buf cmd = {0};
    moects__repro_filter(&cmd, r, filter);
    code_line(b, &cmd);
    moects__buf_free(&cmd);
}

static void short_commit(char *dst, size_t cap, const char *c)
{
    snprintf(dst, cap, "%.12s", c[0] ? c : "unknown");
}

static int cmp_pstr(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* keep[i] = 1 for the baseline results compared: all when the selections are the same, else
 * those whose case and kernel the run holds. 0, or -1 out of memory. */
static int scope(const moects_run *run, const moects_run *base, int same_sel, char *keep, size_t *compared)
{
    *compared = 0;
    if (same_sel) {
        memset(keep, 1, base->n);
        *compared = base->n;
        return 0;
    }
    const char **cases = malloc((run->n ? run->n : 1) * sizeof *cases);
    const char **kernels = malloc((run->n ? run->n : 1) * sizeof *kernels);
    if (!cases || !kernels) {
        free(cases);
        free(kernels);
        return -1;
    }
    for (size_t i = 0; i < run->n; i++) {
        cases[i] = run->v[i].case_id;
        kernels[i] = run->v[i].kernel;
    }
    qsort(cases, run->n, sizeof *cases, cmp_pstr);
    qsort(kernels, run->n, sizeof *kernels, cmp_pstr);
    for (size_t i = 0; i < base->n; i++) {
        const char *c = base->v[i].case_id, *k = base->v[i].kernel;
        keep[i] = run->n && bsearch(&c, cases, run->n, sizeof *cases, cmp_pstr) &&
                  bsearch(&k, kernels, run->n, sizeof *kernels, cmp_pstr);
        *compared += keep[i] != 0;
    }
    free(cases);
    free(kernels);
    return 0;
}

/* Proves --summary PATH can be written the way moects__buf_write writes it (PATH.tmp.*, then a
 * rename onto PATH): creates and removes such a file. 0, or -1 with one line naming PATH. */
static int summary_writable(const char *path)
{
    struct stat st;
    char tmp[4200];
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        fprintf(stderr, "moects gate: --summary: %s: is a directory\n", path);
        return -1;
    }
    if (snprintf(tmp, sizeof tmp, "%s.tmp.XXXXXX", path) >= (int)sizeof tmp) {
        fprintf(stderr, "moects gate: --summary: %.200s...: path too long\n", path);
        return -1;
    }
    int fd = mkstemp(tmp);
    if (fd < 0) {
        fprintf(stderr, "moects gate: --summary: %s: cannot create: %s\n", path, strerror(errno));
        return -1;
    }
    close(fd);
    unlink(tmp);
    return 0;
}

/* The state of one `moects gate`, carried through its stages (moects__gate). */
typedef struct {
    const char *run_path, *base_path, *summary_path;
    int summary_empty; /* --summary "" ($GITHUB_STEP_SUMMARY outside Actions): no file, noted after */
    const moects__gate_list *lists; /* the --mustpass lists, owned by the caller */
    int nlists;
    long limit;
    moects_run run, base;
    moects__index run_ix, base_ix;
    moects__cell *run_cells, *base_cells;
    long n_run_cells, n_base_cells;
    char *keep, *flagged; /* baseline results compared; run results already listed as a problem */
    int same_sel;
    size_t compared;
    problems p;
    moects__buf item, cmd;
} gate_ctx;

/* Stage 2: the run and the baseline (no shard), their indexes, the part of the baseline compared and
 * both runs' coverage cells. 0, or 2 with one line. */
static int gate_read(gate_ctx *g)
{
    char err[1024];
    const char *paths[2] = {g->run_path, g->base_path}, *what[2] = {"the run", "the baseline"};
    moects_run *runs[2] = {&g->run, &g->base};
    for (int i = 0; i < 2 && paths[i]; i++) {
        if (moects__results_read(paths[i], runs[i], err, sizeof err)) {
            fprintf(stderr, "%s\n", err);
            return 2;
        }
        if (runs[i]->shard[0]) {
            fprintf(stderr, "%s: shard: %s is shard %s; merge the shards first (moects merge)\n", paths[i], what[i],
                    runs[i]->shard);
            return 2;
        }
    }
    g->same_sel = !strcmp(g->run.filter, g->base.filter);
    g->keep = malloc(g->base.n ? g->base.n : 1);
    g->flagged = calloc(g->run.n ? g->run.n : 1, 1);
    if (!g->keep || !g->flagged || moects__index_build(&g->run_ix, &g->run) ||
        moects__index_build(&g->base_ix, &g->base) ||
        scope(&g->run, &g->base, g->same_sel, g->keep, &g->compared) ||
        (g->n_run_cells = moects__cells(&g->run, NULL, &g->run_cells)) < 0 ||
        (g->n_base_cells = moects__cells(&g->base, g->keep, &g->base_cells)) < 0) {
        fprintf(stderr, "moects gate: out of memory\n");
        return 2;
    }
    return 0;
}

/* Problems: an empty run; a run sharing no (kernel, case) with the baseline (nothing compared). */
static void check_empty(gate_ctx *g)
{
    const moects_run *run = &g->run, *base = &g->base;
    if (run->n == 0) {
        g->item.n = 0;
        moects__buf_add(&g->item, "- **empty run**: the run holds no result\n");
        add_item(&g->p, CAT_EMPTY, &g->item);
    }
    size_t shared = 0;
    for (size_t i = 0; g->base_path && i < run->n && !shared; i++)
        shared += moects__index_find(&g->base_ix, run->v[i].kernel, run->v[i].case_id) >= 0;
    if (!g->base_path || !run->n || shared) return;
    g->item.n = 0;
    moects__buf_add(&g->item, "- **nothing compared**: the run (selection `");
    moects__buf_md_code(&g->item, run->filter[0] ? run->filter : "(default)");
    moects__buf_printf(&g->item, "`, %zu result%s) and the baseline (selection `", run->n, run->n == 1 ? "" : "s");
    moects__buf_md_code(&g->item, base->filter[0] ? base->filter : "(default)");
    moects__buf_printf(&g->item, "`, %zu result%s) share no (kernel, case) result\n", base->n, base->n == 1 ? "" : "s");
    add_item(&g->p, CAT_DISJOINT, &g->item);
}

/* Problems: regressions and new failures of honest kernels (a failure in the baseline too is known, a
 * known finding reported apart); each result listed is flagged. */
static void check_failures(gate_ctx *g)
{
    const moects_run *run = &g->run;
    for (size_t i = 0; i < run->n; i++) {
        const moects_result *r = &run->v[i];
        if (!r->is_mutant && r->known[0] && moects_verdict_is_pass(r->verdict)) g->p.fixed++;
        if (r->is_mutant || !moects_verdict_is_fail(r->verdict)) continue;
        if (r->known[0]) {
            g->p.findings++;
            g->flagged[i] = 1;
            continue;
        }
        long j = g->base_path ? moects__index_find(&g->base_ix, r->kernel, r->case_id) : -1;
        const moects_result *was = j >= 0 ? &g->base.v[j] : NULL;
        if (was && moects_verdict_is_fail(was->verdict)) {
            g->p.known++;
            continue;
        }
        int cat = was && moects_verdict_is_pass(was->verdict) ? CAT_REGRESSION : CAT_NEW_FAIL;
        moects__buf *it = &g->item;
        it->n = 0;
        moects__buf_printf(it, "- **%s** `", cat_title[cat]);
        moects__buf_md_code(it, r->case_id);
        moects__buf_add(it, "` on `");
        moects__buf_md_code(it, r->kernel);
        moects__buf_add(it, "`: ");
        describe(it, r);
        if (was) moects__buf_printf(it, " (baseline: %s)", moects__verdict_name(was->verdict));
        else if (g->base_path) moects__buf_add(it, " (not in the baseline)");
        moects__buf_add(it, "\n");
        repro_line(it, r, run->filter);
        add_item(&g->p, cat, it);
        g->flagged[i] = 1;
    }
}

/* Problems of one must-pass id (or glob) of list l: each honest result of it neither passed nor
 * skipped nor listed already; the id itself when no honest kernel passed it. */
static void check_mustpass_id(gate_ctx *g, const moects__gate_list *l, const char *id)
{
    const moects_run *run = &g->run;
    moects__buf *it = &g->item;
    int glob = strpbrk(id, "*?[") != NULL;
    size_t honest = 0, passed = 0;
    for (size_t i = 0; i < run->n; i++) {
        const moects_result *r = &run->v[i];
        if (r->is_mutant || (glob ? fnmatch(id, r->case_id, 0) : strcmp(id, r->case_id))) continue;
        honest++;
        if (moects_verdict_is_pass(r->verdict)) passed++;
        if (moects_verdict_is_pass(r->verdict) || r->verdict == MOECTS_SKIP || g->flagged[i]) continue;
        it->n = 0;
        moects__buf_add(it, "- **must-pass** `");
        moects__buf_md_code(it, r->case_id);
        moects__buf_add(it, "` on `");
        moects__buf_md_code(it, r->kernel);
        moects__buf_add(it, "`: ");
        describe(it, r);
        moects__buf_add(it, " (`");
        moects__buf_md_code(it, l->file);
        moects__buf_add(it, "`)\n");
        repro_line(it, r, run->filter);
        add_item(&g->p, CAT_MUSTPASS, it);
        g->flagged[i] = 1;
    }
    if (passed) return;
    it->n = 0;
    moects__buf_add(it, "- **must-pass** `");
    moects__buf_md_code(it, id);
    moects__buf_printf(it, "`: %s (`", honest ? "no honest kernel passed it" : "missing from the run");
    moects__buf_md_code(it, l->file);
    moects__buf_add(it, "`)\n");
    g->cmd.n = 0;
    moects__buf_add(&g->cmd, moects__self_program());
    moects__buf_add(&g->cmd, " run --out ");
    out_dir(&g->cmd, id, NULL);
    moects__buf_add(&g->cmd, " ");
    moects__shell_quote(&g->cmd, id);
    code_line(it, &g->cmd);
    add_item(&g->p, CAT_MUSTPASS, it);
}

/* Problems: (model, layout, honest kernel) cells PASS in the baseline and not now. */
static void check_lost_cells(gate_ctx *g)
{
    moects__buf *it = &g->item;
    for (long c = 0; c < g->n_base_cells; c++) {
        const moects__cell *bc = &g->base_cells[c];
        if (bc->is_mutant || moects__cell_state_of(bc) != MOECTS__CELL_PASS) continue;
        const moects__cell *rc_ = moects__cell_find(g->run_cells, g->n_run_cells, bc->kernel, bc->model, bc->layout);
        moects__cell_state now = rc_ ? moects__cell_state_of(rc_) : MOECTS__CELL_NOT_RUN;
        if (now == MOECTS__CELL_PASS) continue;
        it->n = 0;
        moects__buf_add(it, "- **lost coverage** `");
        moects__buf_md_code(it, bc->model);
        moects__buf_add(it, "` x `");
        moects__buf_md_code(it, bc->layout);
        moects__buf_add(it, "` on `");
        moects__buf_md_code(it, bc->kernel);
        moects__buf_printf(it, "`: PASS in the baseline, now %s",
                           rc_ ? (now == MOECTS__CELL_NOT_RUN ? "only SKIP" : moects__cell_name(now)) : "absent");
        if (rc_ && rc_->first_bad >= 0) {
            moects__buf_add(it, " (`");
            moects__buf_md_code(it, g->run.v[rc_->first_bad].case_id);
            moects__buf_add(it, "`: ");
            describe(it, &g->run.v[rc_->first_bad]);
            moects__buf_add(it, ")");
        }
        moects__buf_add(it, "\n");
        char glob[sizeof bc->model + sizeof bc->layout + 8];
        if (!strcmp(bc->layout, "-")) /* no layout (regressions): the model's cases */
            snprintf(glob, sizeof glob, "*/%s/*", bc->model);
        else
            snprintf(glob, sizeof glob, "*/%s/%s/*", bc->model, bc->layout);
        g->cmd.n = 0;
        moects__buf_add(&g->cmd, moects__self_program());
        moects__buf_add(&g->cmd, " run --kernel ");
        moects__shell_quote(&g->cmd, bc->kernel);
        moects__buf_add(&g->cmd, " --out ");
        out_dir(&g->cmd, bc->kernel, glob);
        moects__filter_carried(&g->cmd, g->run.filter);
        moects__buf_add(&g->cmd, " ");
        moects__shell_quote(&g->cmd, glob);
        code_line(it, &g->cmd);
        add_item(&g->p, CAT_LOST_CELL, it);
    }
}

/* Problems: mutants caught in the baseline and by no case now. */
static void check_mutants(gate_ctx *g)
{
    const moects__cell *cells = g->base_cells;
    for (long c = 0; c < g->n_base_cells; c++) {
        const moects__cell *bc = &cells[c];
        if (!bc->is_mutant || (c > 0 && !strcmp(cells[c - 1].kernel, bc->kernel))) continue;
        size_t caught_was = 0, caught_now = 0, ran_now = 0;
        for (long d = c; d < g->n_base_cells && !strcmp(cells[d].kernel, bc->kernel); d++)
            caught_was += moects__fail_count(cells[d].n);
        for (size_t i = 0; i < g->run.n; i++)
            if (!strcmp(g->run.v[i].kernel, bc->kernel)) {
                ran_now++;
                caught_now += moects_verdict_is_fail(g->run.v[i].verdict);
            }
        if (!caught_was || caught_now) continue;
        g->item.n = 0;
        moects__buf_add(&g->item, "- **mutant escaped** `");
        moects__buf_md_code(&g->item, bc->kernel);
        moects__buf_printf(&g->item, "`: caught in %zu baseline case%s, in none of its %zu case%s now\n", caught_was,
                           caught_was == 1 ? "" : "s", ran_now, ran_now == 1 ? "" : "s");
        g->cmd.n = 0;
        moects__buf_add(&g->cmd, moects__self_program());
        moects__buf_add(&g->cmd, " run --kernel ");
        moects__shell_quote(&g->cmd, bc->kernel);
        moects__buf_add(&g->cmd, " --out ");
        out_dir(&g->cmd, bc->kernel, NULL);
        code_line(&g->item, &g->cmd);
        add_item(&g->p, CAT_MUTANT, &g->item);
    }
}

/* The summary's head: the verdict, what was compared with what, the counts. */
static void summary_head(const gate_ctx *g, moects__buf *out)
{
    const moects_run *run = &g->run, *base = &g->base;
    const problems *p = &g->p;
    char c1[16], c2[16];
    short_commit(c1, sizeof c1, run->commit);
    if (p->n) moects__buf_printf(out, "## moects gate: FAIL (%zu problem%s)\n\n", p->n, p->n == 1 ? "" : "s");
    else moects__buf_add(out, "## moects gate: PASS\n\n");
    moects__buf_printf(out, "Run `%s`", c1);
    if (run->date[0]) moects__buf_printf(out, " of %s", run->date);
    if (run->machine[0]) {
        moects__buf_add(out, " on ");
        moects__buf_md(out, run->machine);
    }
    if (run->filter[0]) {
        moects__buf_add(out, ", filter `");
        moects__buf_md_code(out, run->filter);
        moects__buf_add(out, "`");
    }
    moects__buf_printf(out, ": %zu results", run->n);
    if (g->base_path) {
        short_commit(c2, sizeof c2, base->commit);
        moects__buf_printf(out, ". Baseline `%s`", c2);
        if (base->date[0]) moects__buf_printf(out, " of %s", base->date);
        moects__buf_printf(out, ": %zu results, %zu compared", base->n, g->compared);
        if (!g->same_sel) {
            moects__buf_add(out, " (the run's selection `");
            moects__buf_md_code(out, run->filter[0] ? run->filter : "(default)");
            moects__buf_add(out, "` is not the baseline's `");
            moects__buf_md_code(out, base->filter[0] ? base->filter : "(default)");
            moects__buf_add(out, "`: only the cases and kernels the run holds)");
        }
    } else {
        moects__buf_add(out, ". No baseline");
    }
    if (g->nlists) moects__buf_printf(out, "; %d must-pass list%s", g->nlists, g->nlists == 1 ? "" : "s");
    moects__buf_add(out, ".\n\n");
    moects__md_counts(out, run);
    moects__buf_add(out, "\n");
}

/* The summary's tail: the problems by kind, then the known, known-finding and fixed? notes. */
static void summary_tail(const gate_ctx *g, moects__buf *out)
{
    const moects_run *run = &g->run;
    const problems *p = &g->p;
    if (p->n) {
        int first = 1;
        for (int c = 0; c < CAT_COUNT; c++)
            if (p->ncat[c]) {
                moects__buf_printf(out, "%s%zu %s", first ? "Problems: " : ", ", p->ncat[c],
                                   p->ncat[c] == 1 && c != CAT_MUSTPASS ? cat_title[c] : cat_plural[c]);
                first = 0;
            }
        moects__buf_add(out, ".\n\n");
        list_items(out, p);
        moects__buf_add(out, "\n");
    }
    if (p->known)
        moects__buf_printf(out, "%zu honest failure%s also failed in the baseline (known, not gating).\n\n", p->known,
                           p->known == 1 ? "" : "s");
    if (p->findings) {
        moects__buf_printf(out, "%zu honest failure%s (cases/known-findings.txt; not gating):\n\n", p->findings,
                           p->findings == 1 ? " is a known finding" : "s are known findings");
        for (size_t i = 0; i < run->n; i++) { /* one line per (kernel, reason) with its count */
            const moects_result *r = &run->v[i];
            if (r->is_mutant || !r->known[0] || !moects_verdict_is_fail(r->verdict)) continue;
            int seen = 0;
            for (size_t j = 0; j < i && !seen; j++)
                seen = !run->v[j].is_mutant && moects_verdict_is_fail(run->v[j].verdict) &&
                       !strcmp(run->v[j].kernel, r->kernel) && !strcmp(run->v[j].known, r->known);
            if (seen) continue;
            size_t cnt = 0;
            for (size_t j = i; j < run->n; j++)
                cnt += !run->v[j].is_mutant && moects_verdict_is_fail(run->v[j].verdict) &&
                       !strcmp(run->v[j].kernel, r->kernel) && !strcmp(run->v[j].known, r->known);
            moects__buf_add(out, "- `");
            moects__buf_md_code(out, r->kernel);
            moects__buf_printf(out, "`: %zu case%s: ", cnt, cnt == 1 ? "" : "s");
            moects__buf_md(out, r->known);
            moects__buf_add(out, "\n");
        }
        moects__buf_add(out, "\n");
    }
    if (p->fixed)
        moects__buf_printf(out, "%zu passing result%s match%s a known-findings entry: fixed? remove it from "
                                "cases/known-findings.txt (not an error).\n\n",
                           p->fixed, p->fixed == 1 ? "" : "s", p->fixed == 1 ? "es" : "");
}

/* Stage 4: the summary to --summary FILE first (a failed write prints nothing), then stdout. The exit
 * status: 1 with problems, 0 without, 2 out of memory or a failed write. */
static int gate_emit(gate_ctx *g)
{
    moects__buf out = {0};
    char err[1024];
    int rc = 2;
    summary_head(g, &out);
    summary_tail(g, &out);
    if (out.oom || g->p.oom) fprintf(stderr, "moects gate: out of memory\n");
    else if (g->summary_path && moects__buf_write(&out, g->summary_path, err, sizeof err))
        fprintf(stderr, "moects gate: --summary: %s\n", err);
    else {
        fputs(out.s, stdout);
        fflush(stdout);
        if (g->summary_empty) fprintf(stderr, "moects gate: --summary is empty: no summary file written\n");
        rc = g->p.n ? 1 : 0;
    }
    moects__buf_free(&out);
    return rc;
}

static void gate_free(gate_ctx *g)
{
    moects__buf_free(&g->item);
    moects__buf_free(&g->cmd);
    problems_free(&g->p);
    free(g->run_cells);
    free(g->base_cells);
    free(g->keep);
    free(g->flagged);
    moects__index_free(&g->run_ix);
    moects__index_free(&g->base_ix);
    moects__run_free(&g->run);
    moects__run_free(&g->base);
}

/* `moects gate` on its parsed arguments (harness/reports_commands.h): --summary proved writable
 * before anything is read (stage 1), the two runs, the checks (stage 3), the summary. */
int moects__gate(const moects__gate_args *a)
{
    static gate_ctx g; /* large (two runs' headers): not on the stack */
    memset(&g, 0, sizeof g);
    g.run_path = a->run_path, g.base_path = a->base_path, g.summary_path = a->summary_path;
    g.summary_empty = a->summary_empty;
    g.lists = a->lists, g.nlists = a->nlists;
    g.limit = a->limit;
    int rc = g.summary_path && summary_writable(g.summary_path) ? 2 : -1;
    if (rc < 0 && (rc = gate_read(&g)) == 0) {
        g.p.limit = (size_t)g.limit;
        check_empty(&g);
        check_failures(&g);
        for (int l = 0; l < g.nlists; l++)
            for (int k = 0; k < g.lists[l].n; k++) check_mustpass_id(&g, &g.lists[l], g.lists[l].ids[k]);
        check_lost_cells(&g);
        check_mutants(&g);
        rc = gate_emit(&g);
    }
    gate_free(&g);
    return rc;
}
