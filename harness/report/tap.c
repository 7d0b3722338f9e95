/* tap.c: TAP 13/14 output and summary.md of a run (DESIGN.md "Harness", "Verdicts").
 * Layout (TAP 14 subtests, readable by TAP 13 consumers, which skip indented lines):
 *   TAP version 13
 *   1..N
 *   # Subtest: <kernel>
 *       1..M
 *       ok 1 - <case id>
 *       not ok 2 - <case id>
 *         ---  (YAML diagnostics)  ...
 *   ok 1 - <kernel>
 */
#include "moects_tap.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "moects_compare.h"
#include "moects_op.h"
#include "reports_internal.h"

moects_kernel_status moects__kernel_status_of(const moects_run *run, const char *name, int is_mutant,
                                             size_t counts[MOECTS_VERDICT_COUNT])
{
    size_t c[MOECTS_VERDICT_COUNT] = {0}, pass = 0, fail = 0, known = 0;
    for (size_t i = 0; i < run->n; i++) {
        const moects_result *r = &run->v[i];
        if (strcmp(r->kernel, name) != 0) continue;
        if ((unsigned)r->verdict < MOECTS_VERDICT_COUNT) c[r->verdict]++;
        pass += moects_verdict_is_pass(r->verdict);
        if (moects_verdict_is_fail(r->verdict)) {
            if (!is_mutant && r->known[0]) known++;
            else fail++;
        }
    }
    if (counts) memcpy(counts, c, sizeof c);
    if (is_mutant) return fail ? MOECTS_KS_CAUGHT : pass ? MOECTS_KS_ESCAPED : MOECTS_KS_NOT_EXERCISED;
    if (fail) return MOECTS_KS_FAIL;
    if (pass || known) return MOECTS_KS_PASS;
    /* UNSUPPORTED is a coverage gap, never a pass: a kernel that refused all it was given fails (a
     * SKIP, e.g. no GPU here, says nothing about the kernel) */
    return c[MOECTS_UNSUPPORTED] && !c[MOECTS_SKIP] ? MOECTS_KS_REFUSED : MOECTS_KS_NOT_EXERCISED;
}

size_t moects__kernel_known_of(const moects_run *run, const char *name, int is_mutant, size_t *fixed)
{
    size_t known = 0, fx = 0;
    for (size_t i = 0; i < run->n && !is_mutant; i++) {
        const moects_result *r = &run->v[i];
        if (!r->known[0] || strcmp(r->kernel, name) != 0) continue;
        known += moects_verdict_is_fail(r->verdict);
        fx += moects_verdict_is_pass(r->verdict);
    }
    if (fixed) *fixed = fx;
    return known;
}

/* A FAIL_* of an honest kernel that a known-findings entry explains. */
static int is_known_fail(const moects_result *r, const moects_kernel *k)
{
    int mutant = k ? k->bug != NULL : r->is_mutant;
    return !mutant && r->known[0] && moects_verdict_is_fail(r->verdict);
}

static int by_case_id(const void *a, const void *b, void *ctx)
{
    const moects_run *run = ctx;
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    int d = strcmp(run->v[x].case_id, run->v[y].case_id);
    return d ? d : (x > y) - (x < y);
}

typedef struct {
    size_t first, honest; /* a case's first result, its first honest one (SIZE_MAX: none) */
} case_pick;

static int by_first(const void *a, const void *b)
{
    size_t x = ((const case_pick *)a)->first, y = ((const case_pick *)b)->first;
    return (x > y) - (x < y);
}

size_t moects__unjudged_cases(const moects_run *run, const char ***ids, const char ***why)
{
    *ids = NULL, *why = NULL;
    size_t *ix = malloc((run->n ? run->n : 1) * sizeof *ix);
    case_pick *u = malloc((run->n ? run->n : 1) * sizeof *u);
    if (!ix || !u) {
        free(ix), free(u);
        return (size_t)-1;
    }
    for (size_t i = 0; i < run->n; i++) ix[i] = i;
    qsort_r(ix, run->n, sizeof *ix, by_case_id, (void *)run); /* by case, then by index */
    size_t n = 0;
    for (size_t a = 0, b; a < run->n; a = b) {
        int judged = 0;
        size_t honest = SIZE_MAX;
        for (b = a; b < run->n && !strcmp(run->v[ix[b]].case_id, run->v[ix[a]].case_id); b++) {
            const moects_result *r = &run->v[ix[b]];
            judged |= !r->is_mutant && (moects_verdict_is_pass(r->verdict) || moects_verdict_is_fail(r->verdict));
            if (!r->is_mutant && honest == SIZE_MAX) honest = ix[b];
        }
        if (!judged) u[n++] = (case_pick){ix[a], honest};
    }
    free(ix);
    qsort(u, n, sizeof *u, by_first); /* first-appearance order */
    if (n) {
        *ids = malloc(n * sizeof **ids), *why = malloc(n * sizeof **why);
        if (!*ids || !*why) {
            free(u), free(*ids), free(*why);
            *ids = NULL, *why = NULL;
            return (size_t)-1;
        }
    }
    for (size_t k = 0; k < n; k++) {
        const moects_result *h = u[k].honest == SIZE_MAX ? NULL : &run->v[u[k].honest];
        (*ids)[k] = run->v[u[k].first].case_id;
        (*why)[k] = !h ? "no honest kernel selected" : h->reason[0] ? h->reason : moects__verdict_name(h->verdict);
    }
    free(u);
    return n;
}

int moects__kernel_status_fails(moects_kernel_status s)
{
    return s == MOECTS_KS_FAIL || s == MOECTS_KS_ESCAPED || s == MOECTS_KS_REFUSED;
}

int moects__kernel_status_deferred(moects_kernel_status s)
{
    return s == MOECTS_KS_ESCAPED || s == MOECTS_KS_REFUSED;
}

int moects__filter_narrowed(const char *filter)
{
    static const char *const with_value[] = {"--kernel", "--kernel-lib", "--kernel-py", "--config", "--tp", "--ep",
                                             "--tier"};
    char tok[2048];
    for (const char *p = filter; *p;) {
        size_t n = strcspn(p, " ");
        snprintf(tok, sizeof tok, "%.*s", (int)(n < sizeof tok ? n : sizeof tok - 1), p);
        p += n + (p[n] == ' ');
        if (!tok[0]) continue;
        if (!strcmp(tok, "--cases") || tok[0] != '-') return 1; /* a must-pass list, a case glob */
        for (size_t i = 0; i < sizeof with_value / sizeof *with_value; i++)
            if (!strcmp(tok, with_value[i])) { /* its value is not a case glob */
                p += strcspn(p, " ");
                p += *p == ' ';
                break;
            }
    }
    return 0;
}

const char *moects__status_deferred_to(const moects_run *run, const moects_tap_opts *o, moects_kernel_status st)
{
    if (moects__kernel_status_deferred(st) && run->shard[0]) return "shard";
    if (st == MOECTS_KS_ESCAPED && o && o->narrowed) return "selection";
    return NULL;
}

void moects__shell_quote_file(FILE *f, const char *s)
{
    fputc('\'', f);
    for (; *s; s++) {
        if (*s == '\'') fputs("'\\''", f);
        else fputc(*s, f);
    }
    fputc('\'', f);
}

/* A YAMLish double-quoted scalar (TAP::Parser::YAMLish::Reader: \" \\ \xNN escapes). */
static void yaml_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
        else if (ch < 0x20 || ch == 0x7f) fprintf(f, "\\x%02x", ch);
        else fputc(ch, f);
    }
    fputc('"', f);
}

/* One line of free text: newlines and tabs become spaces; '#' escaped where asked (descriptions). */
static void line_text(FILE *f, const char *s, int escape_hash)
{
    for (; *s; s++) {
        char ch = *s;
        if (ch == '\n' || ch == '\r' || ch == '\t') ch = ' ';
        if (escape_hash && (ch == '#' || ch == '\\')) fputc('\\', f);
        fputc(ch, f);
    }
}

/* PROGRAM run --kernel K --seed S --out reports/repro/ID [extra] CASE: the case alone, into a folder
 * of its own (moects__repro_dir), never over reports/latest. */
static void repro(FILE *f, const moects_result *r, const moects_tap_opts *o)
{
    char dir[256];
    if (o->repro_fixed) {
        fputs(o->repro_fixed, f);
        return;
    }
    moects__repro_dir(r->case_id, dir, sizeof dir);
    fputs(o->program ? o->program : "moects", f);
    fputs(" run --kernel ", f);
    moects__shell_quote_file(f, r->kernel);
    fprintf(f, " --seed %" PRIu64 " --out %s", r->seed, dir);
    if (o->repro_extra) fputs(o->repro_extra, f);
    fputc(' ', f);
    moects__shell_quote_file(f, r->case_id);
}

void moects__first_at(const moects_result *r, char *buf, size_t len)
{
    if (len) buf[0] = '\0';
    if (r->first_index < 0) return;
    if (r->diag.ndims && r->diag.nfirst) moects__diag_at(&r->diag, &r->diag.first[0], buf, len);
    else snprintf(buf, len, "element %" PRId64 " (flat index)", r->first_index);
}

/* An ULP distance and its line end; UINT64_MAX (unbounded: moects_compare_result.max_ulp) in words. */
static void yaml_ulp(FILE *f, uint64_t ulp)
{
    if (ulp == UINT64_MAX) fputs("\"NaN or Inf against another value\"\n", f);
    else fprintf(f, "%" PRIu64 "\n", ulp);
}

/* A YAML list of mismatching elements: at (the op's coordinates), index, got, want, ulp. */
static void yaml_elems(FILE *f, const char *ind, const char *key, const moects_diag *d, const moects_diag_elem *e,
                       int n)
{
    fprintf(f, "%s%s:\n", ind, key);
    for (int i = 0; i < n; i++) {
        char at[96], v[64], noted[96];
        moects__diag_at(d, &e[i], at, sizeof at);
        fprintf(f, "%s  - at: ", ind);
        yaml_str(f, at);
        fprintf(f, "\n%s    index: %" PRId64 "\n%s    got: ", ind, e[i].index, ind);
        moects__diag_value(d, e[i].got, v, sizeof v);
        moects__value_noted(v, noted, sizeof noted);
        yaml_str(f, noted);
        fprintf(f, "\n%s    want: ", ind);
        moects__diag_value(d, e[i].want, v, sizeof v);
        yaml_str(f, v);
        fprintf(f, "\n%s    ulp: ", ind);
        yaml_ulp(f, e[i].ulp);
    }
}

/* 1 when the worst list would only repeat the first: every mismatch is in both (5 or fewer), or
 * every worst element has the same ULP distance (all NaN, say), so that the ranking is element order
 * (moects_diag.h: an earlier element first among equals) and begins with the first list. */
static int worst_repeats_first(const moects_diag *d)
{
    if (d->nworst <= d->nfirst) return 1;
    for (int i = 1; i < d->nworst; i++)
        if (d->worst[i].ulp != d->worst[0].ulp) return 0;
    return 1;
}

/* Where the output differs (moects_diag.h): the pattern line, the first mismatches and, unless they
 * would repeat them (worst_repeats_first), the worst. */
static void yaml_diag(FILE *f, const char *ind, const moects_diag *d)
{
    fprintf(f, "%spattern: ", ind);
    yaml_str(f, d->pattern);
    fputc('\n', f);
    yaml_elems(f, ind, "first_mismatches", d, d->first, d->nfirst);
    if (!worst_repeats_first(d)) yaml_elems(f, ind, "worst_mismatches", d, d->worst, d->nworst);
}

void moects__tap_yaml(FILE *f, const char *ind, const moects_result *r, const moects_tap_opts *o)
{
    fprintf(f, "%s---\n", ind);
    fprintf(f, "%sverdict: %s\n", ind, moects__verdict_name(r->verdict));
    fprintf(f, "%skernel: ", ind);
    yaml_str(f, r->kernel);
    fprintf(f, "\n%srecipe: ", ind);
    yaml_str(f, r->recipe);
    fprintf(f, "\n%smismatches: %" PRId64 "\n", ind, r->mismatches);
    fprintf(f, "%smax_ulp: ", ind);
    yaml_ulp(f, r->max_ulp);
    if (r->first_index >= 0) {
        char noted[sizeof r->got + 32];
        moects__value_noted(r->got, noted, sizeof noted);
        fprintf(f, "%sfirst_mismatch:\n", ind);
        if (r->diag.ndims && r->diag.nfirst) {
            char at[96];
            moects__first_at(r, at, sizeof at);
            fprintf(f, "%s  at: ", ind);
            yaml_str(f, at);
            fputc('\n', f);
        }
        fprintf(f, "%s  index: %" PRId64 "\n%s  got: ", ind, r->first_index, ind);
        yaml_str(f, noted);
        fprintf(f, "\n%s  want: ", ind);
        yaml_str(f, r->want);
        fputc('\n', f);
    } else {
        fprintf(f, "%sfirst_mismatch: ~\n", ind);
    }
    if (r->diag.ndims) yaml_diag(f, ind, &r->diag);
    fprintf(f, "%scalc_diff: %.6g\n", ind, r->calc_diff);
    if (r->acc_n > 0) /* the accumulation check: its limit is 2 sigma (DESIGN.md "Bounded verdicts") */
        fprintf(f, "%sacc_check:\n%s  rms_sigma: %.4g\n%s  elements: %" PRId64 "\n", ind, ind, r->acc_rms, ind, r->acc_n);
    fprintf(f, "%sseed: %" PRIu64 "\n", ind, r->seed);
    if (r->reason[0]) {
        fprintf(f, "%sreason: ", ind);
        yaml_str(f, r->reason);
        fputc('\n', f);
    }
    if (r->known[0]) {
        fprintf(f, "%sknown: ", ind);
        yaml_str(f, r->known);
        fputc('\n', f);
    }
    if (r->kernel_ms > 0) {
        fprintf(f, "%skernel_ms: %.6g\n", ind, r->kernel_ms);
        const moects__op_def *op = moects__op(r->op);
        fprintf(f, "%s%s: %.6g\n", ind, op ? op->perf_key : "perf", r->perf_value);
        fprintf(f, "%sfraction_of_ceiling: %.4g\n", ind, r->perf_fraction);
    }
    /* repro: build it, then emit quoted */
    char *cmd = NULL;
    size_t clen = 0;
    FILE *m = open_memstream(&cmd, &clen);
    if (m) {
        repro(m, r, o);
        fclose(m);
        fprintf(f, "%srepro: ", ind);
        yaml_str(f, cmd ? cmd : "");
        fputc('\n', f);
        free(cmd);
    }
    fprintf(f, "%s...\n", ind);
}

static void case_point(FILE *f, size_t num, const moects_result *r, const moects_kernel *k,
                       const moects_tap_opts *o)
{
    int ok = !moects_verdict_is_fail(r->verdict);
    fprintf(f, "    %s %zu - ", ok ? "ok" : "not ok", num);
    line_text(f, r->case_id, 1);
    const char *bug = k && k->bug ? k->bug : (r->is_mutant ? "(mutant)" : NULL);
    if (r->verdict == MOECTS_UNSUPPORTED) {
        fputs(" # SKIP UNSUPPORTED: ", f);
        line_text(f, r->reason[0] ? r->reason : "refused by supports()", 0);
    } else if (r->verdict == MOECTS_SKIP) {
        fputs(" # SKIP ", f);
        line_text(f, r->reason[0] ? r->reason : "skipped", 0);
    } else if (!ok && bug) {
        fputs(" # TODO mutant: ", f);
        line_text(f, bug, 0);
    } else if (is_known_fail(r, k)) {
        fputs(" # TODO known finding: ", f);
        line_text(f, r->known, 0);
    }
    fputc('\n', f);
    if (!ok || (o->verbose && r->verdict != MOECTS_SKIP && r->verdict != MOECTS_UNSUPPORTED) ||
        (o->verbose && r->reason[0]))
        moects__tap_yaml(f, "      ", r, o);
}

void moects__tap_head(FILE *f, const moects_run *run, size_t nplan, const moects_tap_opts *o)
{
    fprintf(f, "TAP version %d\n", o->version == 14 ? 14 : 13);
    if (nplan == 0) {
        fputs("1..0 # SKIP ", f);
        line_text(f, o->empty_reason ? o->empty_reason : "no cases selected", 0);
        fputc('\n', f);
    } else {
        fprintf(f, "1..%zu\n", nplan);
    }
    fprintf(f, "# moects %s seed %" PRIu64 " commit %s", run->moects_version, run->seed,
            run->commit[0] ? run->commit : "unknown");
    if (run->machine[0]) {
        fputs(" on ", f);
        line_text(f, run->machine, 0);
    }
    if (run->shard[0]) fprintf(f, " shard %s", run->shard);
    fputc('\n', f);
}

/* What a kernel's counts say of it. */
typedef struct {
    moects_kernel_status st;
    size_t c[MOECTS_VERDICT_COUNT], cnt, known, fixed, fails, passes;
    const char *deferred; /* moects__status_deferred_to */
    int failing;
} kernel_tally;

/* " (shape 3, format 1)": kernel k's UNSUPPORTED results of run by refusal class, in class order. */
static void refusal_classes(FILE *f, const moects_run *run, const char *k)
{
    size_t n[MOECTS_REFUSE_COUNT] = {0};
    for (size_t j = 0; j < run->n; j++)
        if (run->v[j].verdict == MOECTS_UNSUPPORTED && strcmp(run->v[j].kernel, k) == 0)
            n[moects__refusal_of(run->v[j].reason)]++;
    const char *sep = " (";
    for (int c = 1; c <= MOECTS_REFUSE_COUNT; c++) { /* unspecified (0) last */
        const int cls = c % MOECTS_REFUSE_COUNT;
        if (n[cls]) fprintf(f, "%s%s %zu", sep, moects__refusal_name((moects_refusal)cls), n[cls]), sep = ", ";
    }
    if (sep[0] == ',') fputc(')', f);
}

/* The words after "ok N - KERNEL" for status t->st. */
static void status_words(FILE *f, const moects_run *run, const moects_kernel *k, const kernel_tally *t)
{
    switch (t->st) {
    case MOECTS_KS_PASS:
        fprintf(f, ": %zu of %zu cases pass", t->passes, t->cnt);
        if (t->known) fprintf(f, ", %zu known finding%s (TODO)", t->known, t->known == 1 ? "" : "s");
        if (t->c[MOECTS_UNSUPPORTED]) fprintf(f, ", %zu unsupported", t->c[MOECTS_UNSUPPORTED]);
        if (t->c[MOECTS_UNSUPPORTED]) refusal_classes(f, run, k->name);
        if (t->c[MOECTS_SKIP]) fprintf(f, ", %zu skipped", t->c[MOECTS_SKIP]);
        break;
    case MOECTS_KS_FAIL:
        fprintf(f, ": %zu of %zu cases fail", t->fails, t->cnt);
        if (t->known) fprintf(f, " (and %zu known finding%s)", t->known, t->known == 1 ? "" : "s");
        break;
    case MOECTS_KS_CAUGHT: fprintf(f, ": mutant caught by %zu of %zu cases", t->fails, t->cnt); break;
    case MOECTS_KS_ESCAPED:
        if (t->deferred && !strcmp(t->deferred, "shard"))
            fprintf(f, ": mutant escaped in this shard, passed all %zu exercised cases # TODO judged on the "
                       "merged run (moects merge)",
                    t->passes);
        else if (t->deferred)
            fprintf(f, ": mutant escaped in this selection, passed all %zu exercised cases # TODO judged on the "
                       "whole tier (this run's cases were narrowed)",
                    t->passes);
        else
            fprintf(f, ": mutant escaped, passed all %zu exercised cases", t->passes);
        break;
    case MOECTS_KS_NOT_EXERCISED:
    case MOECTS_KS_REFUSED: {
        const char *why = "";
        for (size_t j = 0; j < run->n && !why[0]; j++)
            if (strcmp(run->v[j].kernel, k->name) == 0) why = run->v[j].reason;
        if (t->st == MOECTS_KS_REFUSED)
            fprintf(f, ": refused all %zu cases it was given%s (UNSUPPORTED)", t->cnt, t->deferred ? " in this shard" : "");
        else
            fprintf(f, " # SKIP no case exercised it (%zu UNSUPPORTED, %zu SKIP)", t->c[MOECTS_UNSUPPORTED],
                    t->c[MOECTS_SKIP]);
        if (why[0]) {
            fputs(": ", f);
            line_text(f, why, 0);
        }
        if (t->deferred) fputs(" # TODO judged on the merged run (moects merge)", f);
        break;
    }
    }
    if (t->fixed)
        fprintf(f, ", %zu known finding%s now pass%s (fixed?)", t->fixed, t->fixed == 1 ? "" : "s",
                t->fixed == 1 ? "es" : "");
    fputc('\n', f);
}

/* A failing kernel's YAML block: its counts, then its bug (an escaped mutant) or its first 20
 * refused or failed cases. */
static void failing_yaml(FILE *f, const moects_run *run, const moects_kernel *k, const kernel_tally *t)
{
    fprintf(f, "  ---\n  kernel: ");
    yaml_str(f, k->name);
    fprintf(f, "\n  cases: %zu\n", t->cnt);
    for (int v = 0; v < MOECTS_VERDICT_COUNT; v++)
        if (t->c[v]) fprintf(f, "  %s: %zu\n", moects__verdict_name((moects_verdict)v), t->c[v]);
    if (t->known) fprintf(f, "  known_findings: %zu\n", t->known);
    if (t->st == MOECTS_KS_ESCAPED) {
        fputs("  bug: ", f);
        yaml_str(f, k->bug);
        fputc('\n', f);
    } else {
        const int refused = t->st == MOECTS_KS_REFUSED; /* list the refused cases, else the failed */
        fputs(refused ? "  refused:\n" : "  failed:\n", f);
        size_t shown = 0;
        for (size_t j = 0; j < run->n; j++) {
            const moects_result *r = &run->v[j];
            if (strcmp(r->kernel, k->name) ||
                (refused ? r->verdict != MOECTS_UNSUPPORTED : !moects_verdict_is_fail(r->verdict) || is_known_fail(r, k)))
                continue;
            if (++shown > 20) {
                fprintf(f, "    - \"... %zu more\"\n", (refused ? t->cnt : t->fails) - 20);
                break;
            }
            fputs("    - ", f);
            yaml_str(f, r->case_id);
            fputc('\n', f);
        }
    }
    fputs("  ...\n", f);
}

int moects__tap_kernel(FILE *f, const moects_run *run, const moects_kernel *k, size_t top, const moects_tap_opts *o)
{
    kernel_tally t = {0};
    for (size_t j = 0; j < run->n; j++) t.cnt += strcmp(run->v[j].kernel, k->name) == 0;
    if (!t.cnt) return 0;
    fputs("# Subtest: ", f);
    line_text(f, k->name, 0);
    fprintf(f, "\n    1..%zu\n", t.cnt);
    size_t num = 0;
    for (size_t j = 0; j < run->n; j++)
        if (strcmp(run->v[j].kernel, k->name) == 0) case_point(f, ++num, &run->v[j], k, o);
    int mutant = k->bug != NULL;
    t.st = moects__kernel_status_of(run, k->name, mutant, t.c);
    t.known = moects__kernel_known_of(run, k->name, mutant, &t.fixed);
    t.fails = moects__fail_count(t.c) - t.known;
    t.passes = moects__pass_count(t.c);
    t.deferred = moects__status_deferred_to(run, o, t.st); /* moects merge, or the whole tier, judges it */
    t.failing = moects__kernel_status_fails(t.st) && !t.deferred;
    fprintf(f, "%s %zu - ", t.failing ? "not ok" : "ok", top);
    line_text(f, k->name, 1);
    status_words(f, run, k, &t);
    if (t.failing) failing_yaml(f, run, k, &t);
    return 1;
}

/* The must-pass points: ids no case has, and ids no honest kernel judged. */
static void mustpass_points(FILE *f, size_t top, const moects_tap_opts *o)
{
    for (size_t i = 0; i < o->nmissing; i++) {
        fprintf(f, "not ok %zu - must-pass case ", ++top);
        line_text(f, o->missing[i], 1);
        fputs(" is not registered", f);
        if (o->missing_file) {
            fputs(" (", f);
            line_text(f, o->missing_file, 1);
            fputc(')', f);
        }
        fputc('\n', f);
    }
    for (size_t i = 0; i < o->nunjudged; i++) {
        fprintf(f, "not ok %zu - must-pass case ", ++top);
        line_text(f, o->unjudged[i], 1);
        fputs(" was not judged: no honest kernel passed or failed it (", f);
        line_text(f, o->unjudged_why[i], 1);
        fputs(")\n", f);
    }
}

char *moects__tap_render(const moects_run *run, const moects_kernel *const *kernels, size_t nk,
                        const moects_tap_opts *o, size_t *len)
{
    char *buf = NULL;
    size_t blen = 0;
    FILE *f = open_memstream(&buf, &blen);
    if (!f) return NULL;
    size_t nplan = o->nmissing + o->nunjudged; /* kernels with results, then the must-pass points */
    for (size_t i = 0; i < nk; i++)
        for (size_t j = 0; j < run->n; j++)
            if (strcmp(run->v[j].kernel, kernels[i]->name) == 0) {
                nplan++;
                break;
            }
    moects__tap_head(f, run, nplan, o);
    size_t top = 0;
    for (size_t i = 0; i < nk; i++) top += (size_t)moects__tap_kernel(f, run, kernels[i], top + 1, o);
    mustpass_points(f, top, o);
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    if (len) *len = blen;
    return buf;
}

/* Free text in a Markdown table cell: | and the emphasis/code marks escaped, one line. */
static void md_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (strchr("\\`*_|<>[]", *s)) fputc('\\', f);
        fputc(*s == '\n' || *s == '\r' ? ' ' : *s, f);
    }
}

static const char *status_word(moects_kernel_status s)
{
    switch (s) {
    case MOECTS_KS_PASS: return "pass";
    case MOECTS_KS_FAIL: return "**FAIL**";
    case MOECTS_KS_CAUGHT: return "caught";
    case MOECTS_KS_ESCAPED: return "**ESCAPED**";
    case MOECTS_KS_REFUSED: return "**REFUSED**";
    default: return "not exercised";
    }
}

/* One case's tasks, their timing summed (moects_result.wall_s ...). */
typedef struct {
    const char *case_id;
    size_t tasks;
    double wall, inputs, reference, kernel, compare;
    int threads;
} case_time;


static int by_wall_desc(const void *a, const void *b)
{
    const case_time *x = a, *y = b;
    if (x->wall != y->wall) return x->wall > y->wall ? -1 : 1;
    return strcmp(x->case_id, y->case_id);
}

/* "## Where the time went": the tasks' seconds by phase, and the 10 cases whose tasks took the
 * longest (a case's inputs and reference are in its tasks). Nothing when no result is timed (a
 * results.json from before the timing, or merged from such shards). Returns -1 out of memory. */
static int summary_timing(FILE *f, const moects_run *run)
{
    double wall = 0, in = 0, ref = 0, ker = 0, cmp = 0;
    for (size_t i = 0; i < run->n; i++) {
        const moects_result *r = &run->v[i];
        wall += r->wall_s, in += r->inputs_s, ref += r->reference_s, ker += r->kernel_s, cmp += r->compare_s;
    }
    if (!(wall > 0)) return 0;
    size_t *ix = malloc(run->n * sizeof *ix);
    case_time *ct = malloc(run->n * sizeof *ct);
    if (!ix || !ct) {
        free(ix);
        free(ct);
        return -1;
    }
    for (size_t i = 0; i < run->n; i++) ix[i] = i;
    qsort_r(ix, run->n, sizeof *ix, by_case_id, (void *)run);
    size_t nc = 0;
    for (size_t j = 0; j < run->n; j++) {
        const moects_result *r = &run->v[ix[j]];
        if (!nc || strcmp(ct[nc - 1].case_id, r->case_id)) ct[nc++] = (case_time){.case_id = r->case_id};
        case_time *c = &ct[nc - 1];
        c->tasks++;
        c->wall += r->wall_s, c->inputs += r->inputs_s, c->reference += r->reference_s;
        c->kernel += r->kernel_s, c->compare += r->compare_s;
        if (r->ref_threads > c->threads) c->threads = r->ref_threads;
    }
    qsort(ct, nc, sizeof *ct, by_wall_desc);
    double other = wall - in - ref - ker - cmp;
    fputs("\n## Where the time went\n\n", f);
    fprintf(f, "%zu tasks took %.1f s of worker time (summed over the workers): inputs %.1f s, reference %.1f s, "
               "kernel %.1f s, compare %.1f s, other %.1f s.\n",
            run->n, wall, in, ref, ker, cmp, other > 0 ? other : 0);
    fputs("\nSlowest cases (seconds, summed over the case's tasks; reference threads in parentheses):\n\n"
          "| case | tasks | wall | inputs | reference | kernel | compare |\n|---|---:|---:|---:|---:|---:|---:|\n",
          f);
    for (size_t i = 0; i < nc && i < 10; i++) {
        const case_time *c = &ct[i];
        fprintf(f, "| `%s` | %zu | %.3f | %.3f | %.3f", c->case_id, c->tasks, c->wall, c->inputs, c->reference);
        if (c->threads) fprintf(f, " (%d)", c->threads);
        fprintf(f, " | %.3f | %.3f |\n", c->kernel, c->compare);
    }
    free(ix);
    free(ct);
    return 0;
}

/* "## GPUs" (issue 33): per GPU the results name (moects run --gpus), its cases, results and worker
 * seconds: how the run was spread. Nothing when no result names a GPU. Returns -1 out of memory. */
static int summary_gpus(FILE *f, const moects_run *run)
{
    moects__gpu_share *g;
    long n = moects__gpu_shares(run, &g);
    if (n > 0)
        fputs("\n## GPUs\n\nOne worker set per GPU, each worker started with CUDA_VISIBLE_DEVICES set to its GPU "
              "(`moects run --gpus`); the cases go to whichever worker is free, costliest first.\n\n"
              "| GPU | cases | results | worker seconds |\n|---|---:|---:|---:|\n", f);
    for (long i = 0; i < n; i++) {
        fputs("| ", f);
        md_text(f, g[i].gpu);
        fprintf(f, " | %zu | %zu | %.1f |\n", g[i].cases, g[i].results, g[i].wall_s);
    }
    free(g);
    return n < 0 ? -1 : 0;
}

/* "## Accumulation check": per kernel whose bounded results ran it (acc_n > 0), the cases checked,
 * those over the limit, and the largest RMS with its case: how far each kernel is from the limit. */
static void summary_acc_check(FILE *f, const moects_run *run, const moects_kernel *const *kernels, size_t nk)
{
    int head = 0;
    for (size_t i = 0; i < nk; i++) {
        size_t n = 0, over = 0;
        const moects_result *worst = NULL;
        for (size_t j = 0; j < run->n; j++) {
            const moects_result *r = &run->v[j];
            if (r->acc_n <= 0 || strcmp(r->kernel, kernels[i]->name)) continue;
            n++, over += r->acc_n >= MOECTS_ACC_CHECK_MIN && r->acc_rms > MOECTS_ACC_CHECK_LIMIT;
            if (!worst || r->acc_rms > worst->acc_rms) worst = r;
        }
        if (!n) continue;
        if (!head++)
            fprintf(f, "\n## Accumulation check (bounded verdicts)\n\nThe RMS, in units of sigma (each element's expected "
                  "accumulation error for the declared class), of the accumulation error the output implies; a case "
                  "of %d compared elements or more fails above %g (docs/DESIGN.md \"Bounded verdicts\").\n\n"
                  "| kernel | kind | cases checked | over %g | largest RMS | its case |\n|---|---|---:|---:|---:|---|\n",
                    MOECTS_ACC_CHECK_MIN, MOECTS_ACC_CHECK_LIMIT, MOECTS_ACC_CHECK_LIMIT);
        fprintf(f, "| `%s` | %s | %zu | %zu | %.3g | `%s` |\n", kernels[i]->name, kernels[i]->bug ? "mutant" : "kernel",
                n, over, worst->acc_rms, worst->case_id);
    }
}

/* summary.md's failures of honest kernels, the first 50 (known findings apart). */
static void summary_failures(FILE *f, const moects_run *run)
{
    size_t shown = 0, nfail = 0;
    for (size_t j = 0; j < run->n; j++)
        nfail += moects_verdict_is_fail(run->v[j].verdict) && !run->v[j].is_mutant && !is_known_fail(&run->v[j], NULL);
    for (size_t j = 0; j < run->n; j++) {
        const moects_result *r = &run->v[j];
        if (!moects_verdict_is_fail(r->verdict) || r->is_mutant || is_known_fail(r, NULL)) continue;
        if (!shown) fputs("\n## Failures (honest kernels)\n\n| kernel | case | verdict | detail |\n|---|---|---|---|\n", f);
        if (++shown > 50) {
            fprintf(f, "| ... %zu more | | | each in run.tap (diagnostics, repro line) and results.json |\n", nfail - 50);
            break;
        }
        fprintf(f, "| `%s` | `%s` | %s | ", r->kernel, r->case_id, moects__verdict_name(r->verdict));
        if (r->verdict == MOECTS_FAIL_MISMATCH && r->diag.ndims) {
            char at[96];
            moects__diag_at(&r->diag, &r->diag.first[0], at, sizeof at);
            fprintf(f, "%" PRId64 " mismatches: ", r->mismatches);
            for (const char *c = r->diag.pattern; *c; c++) fputc(*c == '|' ? '/' : *c, f);
            fprintf(f, "; first %s: got %s want %s", at, r->got, r->want);
        } else if (r->verdict == MOECTS_FAIL_MISMATCH) {
            char at[96];
            moects__first_at(r, at, sizeof at);
            fprintf(f, "%" PRId64 " mismatches, first at %s: got %s want %s", r->mismatches, at, r->got, r->want);
        }
        /* a mismatch's reason, when it has one, is the bound or tolerance it broke ('|': a cell's \|) */
        if (r->verdict == MOECTS_FAIL_MISMATCH && r->reason[0]) fputs("; ", f);
        for (const char *s = r->reason; *s; s++) {
            if (*s == '|') fputc('\\', f);
            fputc(*s == '\n' ? ' ' : *s, f);
        }
        fputs(" |\n", f);
    }
}

/* summary.md's known findings: still failing (TODO), then entries that match a passing case (stale?). */
static void summary_known(FILE *f, const moects_run *run, size_t tot_known, size_t tot_fixed)
{
    size_t shown;
    for (int pass = 0; pass < 2; pass++) {
        if (!(pass ? tot_fixed : tot_known)) continue;
        if (pass)
            fputs("\n## Known findings that now pass: fixed? remove from known-findings\n\n"
                  "A cases/known-findings.txt entry matches these passing results; if the kernel was fixed, "
                  "remove the entry (not an error).\n\n",
                  f);
        else
            fputs("\n## Known findings (honest kernels; TAP TODO, not gating)\n\n", f);
        fputs("| kernel | case | verdict | known finding |\n|---|---|---|---|\n", f);
        shown = 0;
        for (size_t j = 0; j < run->n; j++) {
            const moects_result *r = &run->v[j];
            if (r->is_mutant || !r->known[0] || !(pass ? moects_verdict_is_pass(r->verdict) : moects_verdict_is_fail(r->verdict)))
                continue;
            if (++shown > 50) {
                fprintf(f, "| ... %zu more | | | |\n", (pass ? tot_fixed : tot_known) - 50);
                break;
            }
            fprintf(f, "| `%s` | `%s` | %s | ", r->kernel, r->case_id, moects__verdict_name(r->verdict));
            md_text(f, r->known);
            fputs(pass ? " (fixed? remove from known-findings) |\n" : " |\n", f);
        }
    }
}

char *moects__summary_render(const moects_run *run, const moects_kernel *const *kernels, size_t nk,
                            const moects_tap_opts *o, size_t *len)
{
    char *buf = NULL;
    size_t blen = 0;
    FILE *f = open_memstream(&buf, &blen);
    if (!f) return NULL;
    fprintf(f, "# moects run summary\n\n");
    fprintf(f, "- moects %s, commit `%s`, %s\n", run->moects_version, run->commit[0] ? run->commit : "unknown",
            run->date);
    if (run->machine[0]) {
        fputs("- machine: ", f);
        line_text(f, run->machine, 0);
        fputc('\n', f);
    }
    fprintf(f, "- seed %" PRIu64, run->seed);
    if (run->filter[0]) fprintf(f, ", filter `%s`", run->filter);
    if (run->shard[0]) fprintf(f, ", shard %s", run->shard);
    fputs("\n\n", f);
    fputs("| kernel | kind |", f);
    for (int v = 0; v < MOECTS_VERDICT_COUNT; v++) fprintf(f, " %s |", moects__verdict_name((moects_verdict)v));
    fputs(" status |\n|---|---|", f);
    for (int v = 0; v < MOECTS_VERDICT_COUNT; v++) fputs("---:|", f);
    fputs("---|\n", f);
    size_t tot[MOECTS_VERDICT_COUNT] = {0}, tot_known = 0, tot_fixed = 0;
    for (size_t i = 0; i < nk; i++) {
        size_t c[MOECTS_VERDICT_COUNT], n = 0;
        moects_kernel_status st = moects__kernel_status_of(run, kernels[i]->name, kernels[i]->bug != NULL, c);
        for (int v = 0; v < MOECTS_VERDICT_COUNT; v++) n += c[v], tot[v] += c[v];
        if (!n) continue;
        size_t fixed = 0, known = moects__kernel_known_of(run, kernels[i]->name, kernels[i]->bug != NULL, &fixed);
        tot_known += known;
        tot_fixed += fixed;
        fprintf(f, "| `%s` | %s |", kernels[i]->name, kernels[i]->bug ? "mutant" : "kernel");
        for (int v = 0; v < MOECTS_VERDICT_COUNT; v++) fprintf(f, " %zu |", c[v]);
        const char *defer = moects__status_deferred_to(run, o, st);
        if (defer && !strcmp(defer, "shard"))
            fprintf(f, " %s in this shard (judged on the merged run)", st == MOECTS_KS_ESCAPED ? "escaped" : "refused");
        else if (defer) fputs(" escaped in this selection (judged on the whole tier)", f);
        else fprintf(f, " %s", status_word(st));
        if (known) fprintf(f, " (%zu known finding%s)", known, known == 1 ? "" : "s");
        fputs(" |\n", f);
    }
    fputs("| total | |", f);
    for (int v = 0; v < MOECTS_VERDICT_COUNT; v++) fprintf(f, " %zu |", tot[v]);
    fputs(" |\n", f);
    if (tot_known)
        fprintf(f, "\nKnown findings: %zu of the FAIL_* results above %s of honest kernels "
                   "(cases/known-findings.txt): reported, not gating.\n",
                tot_known, tot_known == 1 ? "is a known finding" : "are known findings");
    summary_acc_check(f, run, kernels, nk);
    if (o && o->nmissing) {
        fprintf(f, "\nMust-pass ids not registered (%s):\n\n", o->missing_file ? o->missing_file : "");
        for (size_t i = 0; i < o->nmissing; i++) fprintf(f, "- `%s`\n", o->missing[i]);
    }
    if (o && o->nunjudged) {
        fputs("\nMust-pass cases not judged (no honest kernel passed or failed them):\n\n", f);
        for (size_t i = 0; i < o->nunjudged; i++) {
            fprintf(f, "- `%s`: ", o->unjudged[i]);
            md_text(f, o->unjudged_why[i]);
            fputc('\n', f);
        }
    }
    summary_failures(f, run);
    summary_known(f, run, tot_known, tot_fixed);
    int oom = summary_timing(f, run) != 0 || summary_gpus(f, run) != 0;
    if (fclose(f) != 0 || oom) {
        free(buf);
        return NULL;
    }
    if (len) *len = blen;
    return buf;
}
