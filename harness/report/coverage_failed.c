/* coverage_failed.c: the head of the coverage page of a run (coverage.md, coverage.html): what
 * failed, before any table or map. Each honest kernel with a FAIL_* that no known finding explains,
 * then its failing cases (model x layout cell, verdict, where the output first differs in the op's
 * coordinates, the TAP point in run.tap, the repro line); then each mutant that escaped. The TAP
 * point is found in the run.tap beside results.json (its line number, as `prove` and editors count)
 * when that file is there, else named by its subtest and point number (harness/report/tap.c numbers
 * a kernel's cases 1.. in results.json order). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coverage_internal.h"
#include "moects_tap.h"
#include "reports_internal.h"

#define FAILED_SHOWN 50 /* failing cases listed; the rest are counted */

/* run.tap beside run_path, whole (NULL when absent or unreadable). */
static char *read_tap(const char *run_path)
{
    char p[4200];
    const char *slash = strrchr(run_path, '/');
    snprintf(p, sizeof p, "%.*s%srun.tap", slash ? (int)(slash - run_path) : 0, run_path, slash ? "/" : "");
    FILE *f = fopen(p, "rb");
    if (!f) return NULL;
    moects__buf b = {0};
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) moects__buf_addn(&b, chunk, n);
    fclose(f);
    if (b.oom) moects__buf_free(&b);
    return b.s;
}

/* The 1-based line of "    not ok NUM - CASE" under "# Subtest: KERNEL" in tap, or 0. */
static long tap_line(const char *tap, const char *kernel, size_t num, const char *case_id)
{
    if (!tap) return 0;
    char head[256], point[320];
    snprintf(head, sizeof head, "# Subtest: %s\n", kernel);
    snprintf(point, sizeof point, "    not ok %zu - %s", num, case_id);
    const char *s = strstr(tap, head);
    while (s && s != tap && s[-1] != '\n') s = strstr(s + 1, head);
    if (!s) return 0;
    size_t pl = strlen(point);
    long line = 1;
    for (const char *p = tap; *p; p++) {
        if (p >= s && !strncmp(p, point, pl) && (p[pl] == '\n' || p[pl] == ' ')) return line;
        if (*p == '\n') line++;
        if (p > s && !strncmp(p, "\n# Subtest: ", 12)) break; /* the next kernel's subtest */
    }
    return 0;
}

static void add_text(moects__buf *b, const char *s, int html)
{
    (html ? moects__buf_html : moects__buf_md)(b, s);
}

static void add_code(moects__buf *b, const char *s, int html)
{
    moects__buf_add(b, html ? "<code>" : "`");
    (html ? moects__buf_html : moects__buf_md_code)(b, s);
    moects__buf_add(b, html ? "</code>" : "`");
}

/* One failing case: its cell, verdict, first difference, TAP point and repro line. */
static void failed_case(moects__buf *b, const moects_run *run, const moects_result *r, size_t num, const char *tap,
                        int html)
{
    moects__buf_add(b, html ? "<li>" : "- ");
    add_code(b, r->case_id, html);
    moects__buf_add(b, " (");
    add_text(b, r->model, html);
    moects__buf_add(b, " ");
    add_text(b, r->layout, html);
    moects__buf_printf(b, "): %s", moects__verdict_name(r->verdict));
    if (r->verdict == MOECTS_FAIL_MISMATCH) {
        char at[96];
        moects__first_at(r, at, sizeof at);
        moects__buf_printf(b, ", %" PRId64 " mismatch%s", r->mismatches, r->mismatches == 1 ? "" : "es");
        if (r->diag.ndims && r->diag.pattern[0]) {
            moects__buf_add(b, " (");
            add_text(b, r->diag.pattern, html);
            moects__buf_add(b, ")");
        }
        if (at[0]) {
            moects__buf_add(b, ", first at ");
            add_text(b, at, html);
            moects__buf_add(b, ": got ");
            add_text(b, r->got, html);
            moects__buf_add(b, ", want ");
            add_text(b, r->want, html);
        }
    }
    if (r->reason[0]) {
        moects__buf_add(b, "; ");
        add_text(b, r->reason, html);
    }
    long line = tap_line(tap, r->kernel, num, r->case_id);
    moects__buf_add(b, html ? "<br>TAP: " : "\n  TAP: ");
    if (line) {
        moects__buf_add(b, html ? "<a href=\"run.tap\">run.tap</a>" : "[run.tap](run.tap)");
        moects__buf_printf(b, " line %ld, ", line);
    }
    moects__buf_add(b, "subtest ");
    add_code(b, r->kernel, html);
    moects__buf_printf(b, html ? ", point %zu (<code>not ok %zu</code>)" : ", point %zu (`not ok %zu`)", num, num);
    moects__buf cmd = {0};
    moects__repro_filter(&cmd, r, run->filter);
    moects__buf_add(b, html ? "<br>repro: " : "\n  repro: ");
    add_code(b, cmd.s ? cmd.s : "", html);
    moects__buf_free(&cmd);
    moects__buf_add(b, html ? "</li>\n" : "\n");
}

/* Kernels of run in first-appearance order: their names (pointers into run), count in *n. */
static const char **kernels_of(const moects_run *run, size_t *n)
{
    const char **v = malloc((run->n ? run->n : 1) * sizeof *v);
    *n = 0;
    for (size_t i = 0; v && i < run->n; i++) {
        size_t j = 0;
        while (j < *n && strcmp(v[j], run->v[i].kernel)) j++;
        if (j == *n) v[(*n)++] = run->v[i].kernel;
    }
    return v;
}

static int honest_unknown_fail(const moects_result *r)
{
    return moects_verdict_is_fail(r->verdict) && !r->is_mutant && !r->known[0];
}

/* One failing honest kernel: its heading and failing cases (up to *budget in all). */
static void failed_kernel(moects__buf *b, const moects_run *run, const char *k, size_t nfail, const char *tap,
                          int html, size_t *budget)
{
    moects__buf_add(b, html ? "<h3>" : "\n### ");
    add_code(b, k, html);
    moects__buf_printf(b, ": %zu failing case%s%s", nfail, nfail == 1 ? "" : "s", html ? "</h3>\n<ul>\n" : "\n\n");
    size_t num = 0, shown = 0;
    for (size_t i = 0; i < run->n; i++) {
        const moects_result *r = &run->v[i];
        if (strcmp(r->kernel, k)) continue;
        num++; /* its TAP point: the kernel's results are numbered in results.json order */
        if (!honest_unknown_fail(r)) continue;
        if (*budget == 0) break;
        (*budget)--, shown++;
        failed_case(b, run, r, num, tap, html);
    }
    if (shown < nfail)
        moects__buf_printf(b, html ? "<li>and %zu more (run.tap, results.json)</li>\n" : "- and %zu more (run.tap, "
                                                                                      "results.json)\n",
                           nfail - shown);
    if (html) moects__buf_add(b, "</ul>\n");
}

int moects__cov_failed_section(moects__buf *b, const moects_run *run, const char *run_path, int html)
{
    size_t nk;
    const char **ks = kernels_of(run, &nk);
    if (!ks) return -1;
    char *tap = read_tap(run_path);
    size_t failing = 0, escaped = 0, budget = FAILED_SHOWN;
    moects__buf_add(b, html ? "<section id=\"failed\">\n<h2>What failed</h2>\n" : "\n## What failed\n");
    for (size_t i = 0; i < nk; i++) {
        size_t nfail = 0, c[MOECTS_VERDICT_COUNT];
        int mutant = 0;
        for (size_t j = 0; j < run->n; j++)
            if (!strcmp(run->v[j].kernel, ks[i])) nfail += honest_unknown_fail(&run->v[j]), mutant |= run->v[j].is_mutant;
        if (mutant && moects__kernel_status_of(run, ks[i], 1, c) == MOECTS_KS_ESCAPED && !run->shard[0]) escaped++;
        if (!nfail) continue;
        failing++;
        failed_kernel(b, run, ks[i], nfail, tap, html, &budget);
    }
    if (escaped) {
        moects__buf_printf(b, html ? "<h3>%zu mutant%s escaped</h3>\n<ul>\n" : "\n### %zu mutant%s escaped\n\n", escaped,
                           escaped == 1 ? "" : "s");
        for (size_t i = 0; i < nk; i++) {
            size_t c[MOECTS_VERDICT_COUNT];
            int mutant = 0;
            for (size_t j = 0; j < run->n && !mutant; j++) mutant = !strcmp(run->v[j].kernel, ks[i]) && run->v[j].is_mutant;
            if (!mutant || moects__kernel_status_of(run, ks[i], 1, c) != MOECTS_KS_ESCAPED) continue;
            moects__buf_add(b, html ? "<li>" : "- ");
            add_code(b, ks[i], html);
            moects__buf_printf(b, ": passed all %zu cases it ran (its bug never showed)%s",
                               moects__pass_count(c),
                               html ? "</li>\n" : "\n");
        }
        if (html) moects__buf_add(b, "</ul>\n");
    }
    if (!failing && !escaped)
        moects__buf_printf(b, html ? "<p>Nothing: no honest kernel failed and no mutant escaped (%zu results).</p>\n"
                                   : "\nNothing: no honest kernel failed and no mutant escaped (%zu results).\n",
                           run->n);
    if (html) moects__buf_add(b, "</section>\n");
    free(tap);
    free(ks);
    return b->oom ? -1 : 0;
}
