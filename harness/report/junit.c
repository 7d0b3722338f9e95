/* junit.c: a run's JUnit XML, written by moects itself (moects_tap.h moects__junit_render). The
 * structure follows the Jenkins/Ant JUnit schema (tests/fixtures/data/junit/junit.xsd). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moects_tap.h"

/* s as XML text or attribute value: & < > " ' escaped; control characters that XML 1.0 forbids
 * become '?'. */
static void xml(FILE *f, const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        switch (c) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&apos;", f); break;
        default: fputc(c < 0x20 && c != '\n' && c != '\t' ? '?' : c, f);
        }
    }
}

/* The YAML diagnostics of r as XML text. */
static void diagnostics(FILE *f, const moects_result *r, const moects_tap_opts *o)
{
    char *y = NULL;
    size_t n = 0;
    FILE *m = open_memstream(&y, &n);
    if (!m) return;
    moects__tap_yaml(m, "", r, o);
    fclose(m);
    if (y) xml(f, y);
    free(y);
}

/* The one-line message of a failure: the pattern when the output differs, else the reason. */
static void message(FILE *f, const moects_result *r)
{
    char m[1200];
    if (r->diag.ndims) snprintf(m, sizeof m, "%s: %" PRId64 " mismatches: %s", moects__verdict_name(r->verdict),
                                r->mismatches, r->diag.pattern);
    else snprintf(m, sizeof m, "%s: %s", moects__verdict_name(r->verdict), r->reason[0] ? r->reason : "-");
    xml(f, m);
}

static int honest_fail(const moects_result *r) { return !r->is_mutant && !r->known[0] && moects_verdict_is_fail(r->verdict); }
static int skipped(const moects_result *r)
{
    return r->verdict == MOECTS_SKIP || r->verdict == MOECTS_UNSUPPORTED ||
           (!r->is_mutant && r->known[0] && moects_verdict_is_fail(r->verdict));
}

static void testcase(FILE *f, const moects_result *r, const moects_tap_opts *o)
{
    fputs("    <testcase name=\"", f);
    xml(f, r->case_id);
    fputs("\" classname=\"", f);
    xml(f, r->kernel);
    fprintf(f, "\" time=\"%.6f\"", r->wall_s);
    if (honest_fail(r)) {
        const char *el = r->verdict == MOECTS_FAIL_MISMATCH ? "failure" : "error";
        fprintf(f, ">\n      <%s type=\"%s\" message=\"", el, moects__verdict_name(r->verdict));
        message(f, r);
        fputs("\">", f);
        diagnostics(f, r, o);
        fprintf(f, "</%s>\n    </testcase>\n", el);
    } else if (skipped(r)) {
        char m[1200];
        if (r->known[0]) snprintf(m, sizeof m, "known finding: %s", r->known);
        else snprintf(m, sizeof m, "%s: %s", moects__verdict_name(r->verdict), r->reason[0] ? r->reason : "-");
        fputs(">\n      <skipped message=\"", f);
        xml(f, m);
        fputs("\"", f);
        if (r->known[0]) {
            fputs(">", f);
            diagnostics(f, r, o);
            fputs("</skipped>\n    </testcase>\n", f);
        } else {
            fputs("/>\n    </testcase>\n", f);
        }
    } else if (r->is_mutant && moects_verdict_is_fail(r->verdict)) { /* caught: the suite did its job */
        fputs(">\n      <system-out>", f);
        diagnostics(f, r, o);
        fputs("</system-out>\n    </testcase>\n", f);
    } else {
        fputs("/>\n", f);
    }
}

/* The failing kernel-level testcase of a kernel whose failure no case shows (escaped, refused). */
static void kernel_verdict(FILE *f, const moects_kernel *k, moects_kernel_status st, size_t cnt)
{
    fputs("    <testcase name=\"", f);
    xml(f, k->name);
    fputs(": kernel verdict\" classname=\"", f);
    xml(f, k->name);
    fputs("\" time=\"0\">\n      <failure type=\"", f);
    fputs(st == MOECTS_KS_ESCAPED ? "MUTANT_ESCAPED\" message=\"mutant escaped: its bug (" : "REFUSED\" message=\"", f);
    if (st == MOECTS_KS_ESCAPED) {
        xml(f, k->bug);
        fprintf(f, ") showed in none of its %zu cases\"/>\n    </testcase>\n", cnt);
    } else {
        fprintf(f, "refused all %zu cases it was given (UNSUPPORTED is a coverage gap, never a pass)\"/>\n"
                   "    </testcase>\n", cnt);
    }
}

static void must_pass_suite(FILE *f, const moects_tap_opts *o)
{
    size_t n = o->nmissing + o->nunjudged;
    if (!n) return;
    fprintf(f, "  <testsuite name=\"must-pass\" tests=\"%zu\" failures=\"%zu\" errors=\"0\" skipped=\"0\">\n", n, n);
    for (size_t i = 0; i < n; i++) {
        const char *id = i < o->nmissing ? o->missing[i] : o->unjudged[i - o->nmissing];
        fputs("    <testcase name=\"", f);
        xml(f, id);
        fputs("\" classname=\"must-pass\">\n      <failure type=\"MUST_PASS\" message=\"", f);
        if (i < o->nmissing) {
            fputs("not registered", f);
            if (o->missing_file) {
                fputs(" (listed in ", f);
                xml(f, o->missing_file);
                fputs(")", f);
            }
        } else {
            fputs("no honest kernel passed or failed it: ", f);
            xml(f, o->unjudged_why ? o->unjudged_why[i - o->nmissing] : "");
        }
        fputs("\"/>\n    </testcase>\n", f);
    }
    fputs("  </testsuite>\n", f);
}

char *moects__junit_render(const moects_run *run, const moects_kernel *const *kernels, size_t nk,
                          const moects_tap_opts *o, size_t *len)
{
    char *buf = NULL;
    size_t blen = 0;
    FILE *f = open_memstream(&buf, &blen);
    if (!f) return NULL;
    size_t tot[4] = {0}; /* tests, failures, errors, skipped */
    for (size_t pass = 0; pass < 2; pass++) {
        if (pass == 1) {
            fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"moects\" tests=\"%zu\" "
                       "failures=\"%zu\" errors=\"%zu\" skipped=\"%zu\">\n", tot[0], tot[1], tot[2], tot[3]);
        }
        for (size_t i = 0; i < nk; i++) {
            const moects_kernel *k = kernels[i];
            size_t c[4] = {0};
            for (size_t j = 0; j < run->n; j++) {
                const moects_result *r = &run->v[j];
                if (strcmp(r->kernel, k->name)) continue;
                c[0]++;
                c[1] += honest_fail(r) && r->verdict == MOECTS_FAIL_MISMATCH;
                c[2] += honest_fail(r) && r->verdict != MOECTS_FAIL_MISMATCH;
                c[3] += skipped(r);
            }
            if (!c[0]) continue;
            moects_kernel_status st = moects__kernel_status_of(run, k->name, k->bug != NULL, NULL);
            int extra = (st == MOECTS_KS_ESCAPED || st == MOECTS_KS_REFUSED) && !moects__status_deferred_to(run, o, st);
            c[0] += extra, c[1] += extra;
            if (pass == 0) {
                for (int t = 0; t < 4; t++) tot[t] += c[t];
                continue;
            }
            fputs("  <testsuite name=\"", f);
            xml(f, k->name);
            fprintf(f, "\" tests=\"%zu\" failures=\"%zu\" errors=\"%zu\" skipped=\"%zu\" timestamp=\"", c[0], c[1],
                    c[2], c[3]);
            xml(f, run->date);
            fputs("\" hostname=\"", f);
            xml(f, run->machine);
            fprintf(f, "\">\n    <properties>\n      <property name=\"seed\" value=\"%" PRIu64 "\"/>\n"
                       "      <property name=\"commit\" value=\"", run->seed);
            xml(f, run->commit);
            fputs("\"/>\n    </properties>\n", f);
            for (size_t j = 0; j < run->n; j++)
                if (!strcmp(run->v[j].kernel, k->name)) testcase(f, &run->v[j], o);
            if (extra) kernel_verdict(f, k, st, c[0] - 1);
            fputs("  </testsuite>\n", f);
        }
        if (pass == 0) {
            tot[0] += o->nmissing + o->nunjudged;
            tot[1] += o->nmissing + o->nunjudged;
        }
    }
    must_pass_suite(f, o);
    fputs("</testsuites>\n", f);
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    if (len) *len = blen;
    return buf;
}
