/* stages.c: the exposed intermediates' rule (moects__judge_stages, harness/moects_judge.h;
 * docs/fused_moe.md "Exposed intermediates"): a layer kernel's stages against the exact reference's
 * (the first stage off) or against the enclosure's per-stage intervals (the first stage outside its
 * enclosure), and the accumulation check (DESIGN.md "Bounded verdicts", the rule judge.c applies to
 * a bounded GEMM's output) on the stages that are GEMM outputs. Pure: the op computes the reference
 * (moects__op_def.stages). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "moects_judge.h"

static double val(const moects__stage *s, const void *p, int64_t e)
{
    return s->f64 ? ((const double *)p)[e] : ((const float *)p)[e];
}

/* Whether some valid element of stage s was written (its bytes are not all the poison). */
static int written(const moects__stages *st, const moects__stage *s, const void *g)
{
    const size_t es = s->f64 ? 8 : 4;
    for (int64_t r = 0; g && r < st->rows; r++) {
        if (!st->valid[r]) continue;
        const unsigned char *p = (const unsigned char *)g + (size_t)(r * s->cols) * es;
        for (size_t b = 0; b < (size_t)s->cols * es; b++)
            if (p[b] != MOECTS__STAGE_POISON) return 1;
    }
    return 0;
}

/* Whether element e of stage s is off its reference: bits (NaN equals NaN) against want, or outside
 * [lo, hi]. */
static int off(const moects__stage *s, const void *g, int64_t e)
{
    const double v = val(s, g, e);
    if (!s->lo) {
        const double w = val(s, s->want, e);
        return !((v == w && signbit(v) == signbit(w)) || (v != v && w != w));
    }
    return !moects__judge_in_enclosure(v, val(s, s->lo, e), val(s, s->hi, e));
}

/* The first element (valid rows, row-major) of stage s off its reference into *e: 1, or 0 none. */
static int first_off(const moects__stages *st, const moects__stage *s, const void *g, int64_t *e)
{
    for (int64_t r = 0; r < st->rows; r++)
        for (int64_t c = 0; st->valid[r] && c < s->cols; c++)
            if (off(s, g, r * s->cols + c)) return *e = r * s->cols + c, 1;
    return 0;
}

/* reason += "; " note (or note alone). */
static void note(moects_result *r, const char *text)
{
    const size_t l = strlen(r->reason);
    snprintf(r->reason + l, sizeof r->reason - l, "%s%s", l ? "; " : "", text);
}

/* "first stage off: act, slot (t 0, j 1), column 5: got ..., exact ..." (or "outside its enclosure"
 * with the interval), or which exposed stages all agree; exposed names the stages compared. */
static void locate(const moects__stages *st, const void *const *g, const int *shown, moects_result *r)
{
    char buf[512], names[96] = "";
    const int bounded = st->s[0].lo != NULL;
    for (int i = 0; i < st->n; i++) {
        const moects__stage *s = &st->s[i];
        int64_t e;
        if (!shown[i]) continue;
        snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", names[0] ? ", " : "", s->name);
        if (!first_off(st, s, g[i], &e)) continue;
        const int64_t row = e / s->cols, col = e % s->cols;
        int n = snprintf(buf, sizeof buf, "first stage %s: %s, slot (t %" PRId64 ", j %" PRId64 "), column %" PRId64
                         ": got %.9g, ", bounded ? "outside its enclosure" : "off", s->name, row / st->group,
                         row % st->group, col, val(s, g[i], e));
        if (!bounded) snprintf(buf + n, sizeof buf - (size_t)n, "exact %.9g", val(s, s->want, e));
        else snprintf(buf + n, sizeof buf - (size_t)n, "enclosure [%.9g, %.9g]", val(s, s->lo, e), val(s, s->hi, e));
        return note(r, buf);
    }
    if (!names[0]) return note(r, "intermediates not compared: the kernel wrote none");
    snprintf(buf, sizeof buf, "first stage %s: none of the exposed stages (%s): the layer after them",
             bounded ? "outside its enclosure" : "off", names);
    note(r, buf);
}

/* The accumulation check of stage s (its valid rows): RMS into *rms over *n elements, the elements
 * over the limit into *over. */
static void acc_check(const moects__stages *st, const moects__stage *s, const void *g, double *rms, int64_t *n,
                      int64_t *over)
{
    double sum = 0;
    *n = *over = 0;
    for (int64_t r = 0; r < st->rows; r++)
        for (int64_t c = 0; st->valid[r] && c < s->cols; c++) {
            const int64_t e = r * s->cols + c;
            const double a = moects__judge_implied_acc(&s->st, e, val(s, g, e), s->round == MOECTS_BF16);
            if (a < 0) continue;
            const double q = a / s->st.sigma[e];
            (*n)++, sum += q * q, *over += q > MOECTS_ACC_CHECK_LIMIT;
        }
    *rms = *n ? sqrt(sum / (double)*n) : 0;
}

/* The accumulation check of every GEMM stage shown: r's acc_rms (the largest), a note of each RMS when
 * none fails; a failing stage's text (it fails a passing verdict, or joins a failing one's reason).
 * Returns 1 when it changed the verdict. */
static int accumulation(const moects__stages *st, const void *const *g, const int *shown,
                        const moects_acc_class *cls, moects_result *r)
{
    char buf[1024], notes[400] = "";
    int changed = 0, failed = 0;
    for (int i = 0; i < st->n; i++) {
        const moects__stage *s = &st->s[i];
        double rms;
        int64_t n, over;
        if (!shown[i] || !s->st.x) continue;
        acc_check(st, s, g[i], &rms, &n, &over);
        snprintf(notes + strlen(notes), sizeof notes - strlen(notes), "%s%s %.3g sigma over %" PRId64,
                 notes[0] ? ", " : "accumulation check of the stages (RMS): ", s->name, rms, n);
        if (n > 0 && (r->acc_n == 0 || rms > r->acc_rms)) r->acc_rms = rms, r->acc_n = n;
        if (n < MOECTS_ACC_CHECK_MIN || !(rms > MOECTS_ACC_CHECK_LIMIT)) continue;
        failed = 1;
        char head[160];
        snprintf(head, sizeof head, "%sthe accumulation check of stage %s (a GEMM's output, exposed)",
                 r->verdict == MOECTS_PASS_BOUNDED ? "no element outside its enclosure, but " : "", s->name);
        moects__judge_acc_text(s->K, cls, rms, n, head, "stage", buf, sizeof buf);
        if (r->verdict == MOECTS_PASS_BOUNDED) {
            char old[sizeof r->reason];
            snprintf(old, sizeof old, "%s", r->reason);
            r->verdict = MOECTS_FAIL_MISMATCH, r->mismatches = over, r->first_index = -1, changed = 1;
            moects__copy_str(r->reason, sizeof r->reason, buf);
            if (old[0]) note(r, old);
        } else if (!changed) {
            note(r, buf);
        }
    }
    if (notes[0] && !failed) note(r, notes);
    return changed;
}

int moects__judge_stages(const moects__stages *ref, const void *const *got, const moects_acc_class *cls,
                         moects_result *r)
{
    int shown[MOECTS_STAGES_MAX] = {0};
    for (int i = 0; i < ref->n; i++) shown[i] = got[i] && written(ref, &ref->s[i], got[i]);
    const int failed = r->verdict == MOECTS_FAIL_MISMATCH;
    if (failed) locate(ref, got, shown, r);
    return cls && ref->s[0].lo ? accumulation(ref, got, shown, cls, r) : 0;
}
