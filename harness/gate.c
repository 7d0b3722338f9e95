/* gate.c: `moects gate RUN_RESULTS [--baseline BASE_RESULTS] [--mustpass FILE...] [--summary FILE.md]
 * [--limit N]`: the pass/fail decision of CI on a run (DESIGN.md "Harness", Gate).
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

#include "moects_commands.h"
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

/* "FAIL_MISMATCH: 12 mismatches, max ULP 3, first at 5: got 0x.. want 0x.." or "VERDICT: reason". */
static void describe(moects__buf *b, const moects_result *r)
{
    moects__buf_add(b, moects_verdict_name(r->verdict));
    if (r->verdict == MOECTS_FAIL_MISMATCH || r->mismatches) {
        moects__buf_printf(b, ": %" PRId64 " mismatches", r->mismatches);
        if (r->max_ulp == UINT64_MAX) moects__buf_add(b, ", NaN against a number");
        else moects__buf_printf(b, ", max ULP %" PRIu64, r->max_ulp);
        if (r->first_index >= 0) {
            moects__buf_printf(b, ", first at %" PRId64 ": got ", r->first_index);
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

/* " reports/repro/<a>[_<b>]" (moects_repro_dir): a folder of its own for a command's reports. */
static void out_dir(moects__buf *b, const char *a, const char *c)
{
    char name[512], dir[600];
    snprintf(name, sizeof name, "%s%s%s", a, c ? "_" : "", c ? c : "");
    moects_repro_dir(name, dir, sizeof dir);
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

static int usage_to(FILE *f)
{
    fprintf(f, "usage: moects gate RUN_RESULTS [--baseline BASE_RESULTS] [--mustpass FILE...] "
               "[--summary FILE.md] [--limit N]\n"
               "CI's pass/fail decision on a run's results.json: exit 1 on a regression, a new honest failure,\n"
               "a must-pass case not passed, a lost coverage cell, a mutant no longer caught, an empty run or\n"
               "nothing compared; 2 on bad input. A Markdown summary with a repro line per problem on stdout.\n"
               "  --baseline BASE_RESULTS  the results.json to compare with (default: none; then every honest\n"
               "                           failure is new)\n"
               "  --mustpass FILE...       case-id lists (ids or globs) whose cases must pass (default: none)\n"
               "  --summary FILE.md        the summary there too (default: none; an empty path writes none)\n"
               "  --limit N                problems listed, shared among their kinds (default 20)\n");
    return 2;
}
static int usage(void) { return usage_to(stderr); }

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

typedef struct {
    char **ids;
    int n;
    const char *file;
} idlist;

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

int moects_cmd_gate(int argc, char **argv)
{
    const char *run_path = NULL, *base_path = NULL, *summary_path = NULL;
    idlist lists[64];
    int nlists = 0, rc = 2;
    long limit = 20;
    char err[1024];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--baseline") && i + 1 < argc) base_path = argv[++i];
        else if (!strcmp(a, "--summary") && i + 1 < argc) summary_path = argv[++i];
        else if (!strcmp(a, "--limit") && i + 1 < argc) {
            char *end;
            limit = strtol(argv[++i], &end, 10);
            if (*end || limit < 0) {
                fprintf(stderr, "moects gate: --limit: \"%s\" is not a count\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(a, "--mustpass")) {
            int got = 0;
            while (i + 1 < argc && argv[i + 1][0] != '-') {
                if (nlists == (int)(sizeof lists / sizeof lists[0])) {
                    fprintf(stderr, "moects gate: --mustpass: more than 64 files\n");
                    goto out;
                }
                lists[nlists].file = argv[++i];
                lists[nlists].n = moects_idlist_load(argv[i], &lists[nlists].ids, err, sizeof err);
                if (lists[nlists].n < 0) {
                    fprintf(stderr, "%s\n", err);
                    goto out;
                }
                if (lists[nlists].n == 0) { /* as `moects run --cases` refuses it */
                    fprintf(stderr, "moects gate: --mustpass %s: no case ids\n", argv[i]);
                    moects_idlist_free(lists[nlists].ids, 0);
                    goto out;
                }
                nlists++;
                got++;
            }
            if (!got) {
                fprintf(stderr, "moects gate: --mustpass needs at least one file\n");
                goto out;
            }
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage_to(stdout);
            rc = 0;
            goto out;
        } else if (a[0] == '-' || run_path) {
            static const char *const valued[] = {"--baseline", "--summary", "--limit", NULL};
            moects_bad_arg("gate", a, valued);
            usage();
            goto out;
        } else {
            run_path = a;
        }
    }
    if (!run_path) {
        usage();
        goto out;
    }
    /* an empty path (--summary "$GITHUB_STEP_SUMMARY" outside Actions) means no file: noted after the summary */
    int summary_empty = summary_path && !summary_path[0];
    if (summary_empty) summary_path = NULL;
    if (summary_path && summary_writable(summary_path)) goto out;

    moects_run run = {0}, base = {0};
    moects__index run_ix = {0}, base_ix = {0};
    moects__cell *run_cells = NULL, *base_cells = NULL;
    char *keep = NULL;
    long n_run_cells = 0, n_base_cells = 0;
    problems p = {.limit = (size_t)limit};
    moects__buf item = {0}, out = {0}, cmd = {0};

    if (moects_results_read(run_path, &run, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        goto done;
    }
    if (run.shard[0]) {
        fprintf(stderr, "%s: shard: the run is shard %s; merge the shards first (moects merge)\n", run_path,
                run.shard);
        goto done;
    }
    if (base_path) {
        if (moects_results_read(base_path, &base, err, sizeof err)) {
            fprintf(stderr, "%s\n", err);
            goto done;
        }
        if (base.shard[0]) {
            fprintf(stderr, "%s: shard: the baseline is shard %s; merge the shards first (moects merge)\n",
                    base_path, base.shard);
            goto done;
        }
    }
    /* the part of the baseline compared */
    int same_sel = !strcmp(run.filter, base.filter);
    size_t compared = 0;
    keep = malloc(base.n ? base.n : 1);
    if (!keep || moects__index_build(&run_ix, &run) || moects__index_build(&base_ix, &base) ||
        scope(&run, &base, same_sel, keep, &compared) ||
        (n_run_cells = moects__cells(&run, NULL, &run_cells)) < 0 ||
        (n_base_cells = moects__cells(&base, keep, &base_cells)) < 0) {
        fprintf(stderr, "moects gate: out of memory\n");
        goto done;
    }

    if (run.n == 0) {
        moects__buf_add(&item, "- **empty run**: the run holds no result\n");
        add_item(&p, CAT_EMPTY, &item);
    }
    /* a run sharing no (kernel, case) with the baseline compared nothing: not a pass */
    size_t shared = 0;
    for (size_t i = 0; base_path && i < run.n && !shared; i++)
        shared += moects__index_find(&base_ix, run.v[i].kernel, run.v[i].case_id) >= 0;
    if (base_path && run.n && !shared) {
        item.n = 0;
        moects__buf_add(&item, "- **nothing compared**: the run (selection `");
        moects__buf_md_code(&item, run.filter[0] ? run.filter : "(default)");
        moects__buf_printf(&item, "`, %zu result%s) and the baseline (selection `", run.n, run.n == 1 ? "" : "s");
        moects__buf_md_code(&item, base.filter[0] ? base.filter : "(default)");
        moects__buf_printf(&item, "`, %zu result%s) share no (kernel, case) result\n", base.n,
                           base.n == 1 ? "" : "s");
        add_item(&p, CAT_DISJOINT, &item);
    }

    /* regressions and new failures of honest kernels; flagged[i] marks run results listed */
    char *flagged = calloc(run.n ? run.n : 1, 1);
    if (!flagged) {
        fprintf(stderr, "moects gate: out of memory\n");
        goto done;
    }
    for (size_t i = 0; i < run.n; i++) {
        const moects_result *r = &run.v[i];
        if (!r->is_mutant && r->known[0] && moects_verdict_is_pass(r->verdict)) p.fixed++;
        if (r->is_mutant || !moects_verdict_is_fail(r->verdict)) continue;
        if (r->known[0]) { /* a known finding: reported, not gating */
            p.findings++;
            flagged[i] = 1;
            continue;
        }
        long j = base_path ? moects__index_find(&base_ix, r->kernel, r->case_id) : -1;
        const moects_result *was = j >= 0 ? &base.v[j] : NULL;
        if (was && moects_verdict_is_fail(was->verdict)) {
            p.known++;
            continue;
        }
        int cat = was && moects_verdict_is_pass(was->verdict) ? CAT_REGRESSION : CAT_NEW_FAIL;
        item.n = 0;
        moects__buf_printf(&item, "- **%s** `", cat_title[cat]);
        moects__buf_md_code(&item, r->case_id);
        moects__buf_add(&item, "` on `");
        moects__buf_md_code(&item, r->kernel);
        moects__buf_add(&item, "`: ");
        describe(&item, r);
        if (was) moects__buf_printf(&item, " (baseline: %s)", moects_verdict_name(was->verdict));
        else if (base_path) moects__buf_add(&item, " (not in the baseline)");
        moects__buf_add(&item, "\n");
        repro_line(&item, r, run.filter);
        add_item(&p, cat, &item);
        flagged[i] = 1;
    }

    /* must-pass lists */
    for (int l = 0; l < nlists; l++)
        for (int k = 0; k < lists[l].n; k++) {
            const char *id = lists[l].ids[k];
            int glob = strpbrk(id, "*?[") != NULL;
            size_t honest = 0, passed = 0;
            for (size_t i = 0; i < run.n; i++) {
                const moects_result *r = &run.v[i];
                if (r->is_mutant || (glob ? fnmatch(id, r->case_id, 0) : strcmp(id, r->case_id))) continue;
                honest++;
                if (moects_verdict_is_pass(r->verdict)) passed++;
                if (moects_verdict_is_pass(r->verdict) || r->verdict == MOECTS_SKIP || flagged[i]) continue;
                item.n = 0;
                moects__buf_add(&item, "- **must-pass** `");
                moects__buf_md_code(&item, r->case_id);
                moects__buf_add(&item, "` on `");
                moects__buf_md_code(&item, r->kernel);
                moects__buf_add(&item, "`: ");
                describe(&item, r);
                moects__buf_add(&item, " (`");
                moects__buf_md_code(&item, lists[l].file);
                moects__buf_add(&item, "`)\n");
                repro_line(&item, r, run.filter);
                add_item(&p, CAT_MUSTPASS, &item);
                flagged[i] = 1;
            }
            if (passed) continue;
            item.n = 0;
            moects__buf_add(&item, "- **must-pass** `");
            moects__buf_md_code(&item, id);
            moects__buf_printf(&item, "`: %s (`", honest ? "no honest kernel passed it" : "missing from the run");
            moects__buf_md_code(&item, lists[l].file);
            moects__buf_add(&item, "`)\n");
            cmd.n = 0;
            moects__buf_add(&cmd, moects_self_program());
            moects__buf_add(&cmd, " run --out ");
            out_dir(&cmd, id, NULL);
            moects__buf_add(&cmd, " ");
            moects__shell_quote(&cmd, id);
            code_line(&item, &cmd);
            add_item(&p, CAT_MUSTPASS, &item);
        }
    free(flagged);

    /* lost coverage cells (honest kernels) */
    for (long c = 0; c < n_base_cells; c++) {
        const moects__cell *bc = &base_cells[c];
        if (bc->is_mutant || moects__cell_state_of(bc) != MOECTS__CELL_PASS) continue;
        const moects__cell *rc_ = moects__cell_find(run_cells, n_run_cells, bc->kernel, bc->model, bc->layout);
        moects__cell_state now = rc_ ? moects__cell_state_of(rc_) : MOECTS__CELL_NOT_RUN;
        if (now == MOECTS__CELL_PASS) continue;
        item.n = 0;
        moects__buf_add(&item, "- **lost coverage** `");
        moects__buf_md_code(&item, bc->model);
        moects__buf_add(&item, "` x `");
        moects__buf_md_code(&item, bc->layout);
        moects__buf_add(&item, "` on `");
        moects__buf_md_code(&item, bc->kernel);
        moects__buf_printf(&item, "`: PASS in the baseline, now %s",
                           rc_ ? (now == MOECTS__CELL_NOT_RUN ? "only SKIP" : moects__cell_name(now)) : "absent");
        if (rc_ && rc_->first_bad >= 0) {
            moects__buf_add(&item, " (`");
            moects__buf_md_code(&item, run.v[rc_->first_bad].case_id);
            moects__buf_add(&item, "`: ");
            describe(&item, &run.v[rc_->first_bad]);
            moects__buf_add(&item, ")");
        }
        moects__buf_add(&item, "\n");
        char glob[sizeof bc->model + sizeof bc->layout + 8];
        snprintf(glob, sizeof glob, "*/%s/%s/*", bc->model, bc->layout);
        cmd.n = 0;
        moects__buf_add(&cmd, moects_self_program());
        moects__buf_add(&cmd, " run --kernel ");
        moects__shell_quote(&cmd, bc->kernel);
        moects__buf_add(&cmd, " --out ");
        out_dir(&cmd, bc->kernel, glob);
        moects__buf_add(&cmd, " ");
        moects__shell_quote(&cmd, glob);
        code_line(&item, &cmd);
        add_item(&p, CAT_LOST_CELL, &item);
    }

    /* mutants caught in the baseline and by no case now */
    for (long c = 0; c < n_base_cells; c++) {
        const moects__cell *bc = &base_cells[c];
        if (!bc->is_mutant || (c > 0 && !strcmp(base_cells[c - 1].kernel, bc->kernel))) continue;
        size_t caught_was = 0, caught_now = 0, ran_now = 0;
        for (long d = c; d < n_base_cells && !strcmp(base_cells[d].kernel, bc->kernel); d++)
            caught_was += base_cells[d].n[MOECTS_FAIL_MISMATCH] + base_cells[d].n[MOECTS_FAIL_CRASH] +
                          base_cells[d].n[MOECTS_FAIL_TIMEOUT];
        for (size_t i = 0; i < run.n; i++)
            if (!strcmp(run.v[i].kernel, bc->kernel)) {
                ran_now++;
                caught_now += moects_verdict_is_fail(run.v[i].verdict);
            }
        if (!caught_was || caught_now) continue;
        item.n = 0;
        moects__buf_add(&item, "- **mutant escaped** `");
        moects__buf_md_code(&item, bc->kernel);
        moects__buf_printf(&item, "`: caught in %zu baseline case%s, in none of its %zu case%s now\n", caught_was,
                           caught_was == 1 ? "" : "s", ran_now, ran_now == 1 ? "" : "s");
        cmd.n = 0;
        moects__buf_add(&cmd, moects_self_program());
        moects__buf_add(&cmd, " run --kernel ");
        moects__shell_quote(&cmd, bc->kernel);
        moects__buf_add(&cmd, " --out ");
        out_dir(&cmd, bc->kernel, NULL);
        code_line(&item, &cmd);
        add_item(&p, CAT_MUTANT, &item);
    }

    /* the summary */
    char c1[16], c2[16];
    short_commit(c1, sizeof c1, run.commit);
    if (p.n) moects__buf_printf(&out, "## moects gate: FAIL (%zu problem%s)\n\n", p.n, p.n == 1 ? "" : "s");
    else moects__buf_add(&out, "## moects gate: PASS\n\n");
    moects__buf_printf(&out, "Run `%s`", c1);
    if (run.date[0]) moects__buf_printf(&out, " of %s", run.date);
    if (run.machine[0]) {
        moects__buf_add(&out, " on ");
        moects__buf_md(&out, run.machine);
    }
    if (run.filter[0]) {
        moects__buf_add(&out, ", filter `");
        moects__buf_md_code(&out, run.filter);
        moects__buf_add(&out, "`");
    }
    moects__buf_printf(&out, ": %zu results", run.n);
    if (base_path) {
        short_commit(c2, sizeof c2, base.commit);
        moects__buf_printf(&out, ". Baseline `%s`", c2);
        if (base.date[0]) moects__buf_printf(&out, " of %s", base.date);
        moects__buf_printf(&out, ": %zu results, %zu compared", base.n, compared);
        if (!same_sel) {
            moects__buf_add(&out, " (the run's selection `");
            moects__buf_md_code(&out, run.filter[0] ? run.filter : "(default)");
            moects__buf_add(&out, "` is not the baseline's `");
            moects__buf_md_code(&out, base.filter[0] ? base.filter : "(default)");
            moects__buf_add(&out, "`: only the cases and kernels the run holds)");
        }
    } else {
        moects__buf_add(&out, ". No baseline");
    }
    if (nlists) moects__buf_printf(&out, "; %d must-pass list%s", nlists, nlists == 1 ? "" : "s");
    moects__buf_add(&out, ".\n\n");
    moects__md_counts(&out, &run);
    moects__buf_add(&out, "\n");
    if (p.n) {
        int first = 1;
        for (int c = 0; c < CAT_COUNT; c++)
            if (p.ncat[c]) {
                moects__buf_printf(&out, "%s%zu %s", first ? "Problems: " : ", ", p.ncat[c],
                                   p.ncat[c] == 1 && c != CAT_MUSTPASS ? cat_title[c] : cat_plural[c]);
                first = 0;
            }
        moects__buf_add(&out, ".\n\n");
        list_items(&out, &p);
        moects__buf_add(&out, "\n");
    }
    if (p.known)
        moects__buf_printf(&out, "%zu honest failure%s also failed in the baseline (known, not gating).\n\n",
                           p.known, p.known == 1 ? "" : "s");
    if (p.findings) {
        moects__buf_printf(&out, "%zu honest failure%s (cases/known-findings.txt; not gating):\n\n", p.findings,
                           p.findings == 1 ? " is a known finding" : "s are known findings");
        /* one line per (kernel, reason) with its count */
        for (size_t i = 0; i < run.n; i++) {
            const moects_result *r = &run.v[i];
            if (r->is_mutant || !r->known[0] || !moects_verdict_is_fail(r->verdict)) continue;
            int seen = 0;
            for (size_t j = 0; j < i && !seen; j++)
                seen = !run.v[j].is_mutant && moects_verdict_is_fail(run.v[j].verdict) &&
                       !strcmp(run.v[j].kernel, r->kernel) && !strcmp(run.v[j].known, r->known);
            if (seen) continue;
            size_t cnt = 0;
            for (size_t j = i; j < run.n; j++)
                cnt += !run.v[j].is_mutant && moects_verdict_is_fail(run.v[j].verdict) &&
                       !strcmp(run.v[j].kernel, r->kernel) && !strcmp(run.v[j].known, r->known);
            moects__buf_add(&out, "- `");
            moects__buf_md_code(&out, r->kernel);
            moects__buf_printf(&out, "`: %zu case%s: ", cnt, cnt == 1 ? "" : "s");
            moects__buf_md(&out, r->known);
            moects__buf_add(&out, "\n");
        }
        moects__buf_add(&out, "\n");
    }
    if (p.fixed)
        moects__buf_printf(&out, "%zu passing result%s match%s a known-findings entry: fixed? remove it from "
                                 "cases/known-findings.txt (not an error).\n\n",
                           p.fixed, p.fixed == 1 ? "" : "s", p.fixed == 1 ? "es" : "");
    if (out.oom || p.oom) {
        fprintf(stderr, "moects gate: out of memory\n");
        goto done;
    }
    /* the file first: a failed write prints nothing */
    if (summary_path && moects__buf_write(&out, summary_path, err, sizeof err)) {
        fprintf(stderr, "moects gate: --summary: %s\n", err);
        goto done;
    }
    fputs(out.s, stdout);
    fflush(stdout);
    if (summary_empty) fprintf(stderr, "moects gate: --summary is empty: no summary file written\n");
    rc = p.n ? 1 : 0;
done:
    moects__buf_free(&item);
    moects__buf_free(&cmd);
    moects__buf_free(&out);
    problems_free(&p);
    free(run_cells);
    free(base_cells);
    free(keep);
    moects__index_free(&run_ix);
    moects__index_free(&base_ix);
    moects_run_free(&run);
    moects_run_free(&base);
out:
    for (int l = 0; l < nlists; l++) moects_idlist_free(lists[l].ids, (size_t)lists[l].n);
    return rc;
}
