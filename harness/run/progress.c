/* progress.c: what `moects run` says on stderr while it runs (harness/run/runner.c's parent): a first
 * line at once, in the README's terms (cases, kernels, runs: one run per (kernel, case) of its op)
 * with a rough estimate of the time from the cases' costs; then done/total, rate and what is left:
 * on a terminal one line redrawn at each result and at least every 10 s, in a log a line 10 s after
 * the start and every 60 s after.
 *
 * The estimate: a run's seconds = its case's cost (moects__op_def.cost, element operations) times
 * the op's seconds per cost unit (moects__op_def.secs_per_cost), summed over the runs and divided by
 * the workers (--jobs); a CUDA kernel's run counts 0 without a device (SKIP at once).
 * The constants are the ratio of the summed wall_s (results.json) to the summed cost, per op, of one
 * smoke-tier run of this build's CPU kernels (CUDA off: 24 kernels, 7926 runs, --jobs 2 on 2 cores
 * that three other jobs shared, load about 5; 1247 worker-seconds, 10.5 min of wall time; commit
 * 9777521 with this change), times 0.25: on 2 quiet cores the whole smoke run (12,996 runs, CUDA
 * kernels SKIP) took 134 s where the unscaled fit said 600 s (c08973f). Elsewhere anything: a rough
 * figure, said as "about ... rough". What is left is then
 * measured: the estimate of the runs not done scaled by how the finished ones compared
 * with their estimate (the work done so far, costliest first, so the measure is of that work). */
#include "moects_progress.h"

#include <stdio.h>
#include <string.h>

#include "moects_op.h"
#include "moects_task_internal.h"

double moects__progress_run_s(const moects_case *c)
{
    const moects__op_def *op = moects__op(c->op);
    return op ? op->cost(c) * op->secs_per_cost : 0;
}

/* n with thousands separated by commas into buf ("12,020"). */
static const char *commas(size_t n, char *buf, size_t len)
{
    char d[32];
    int nd = snprintf(d, sizeof d, "%zu", n), o = 0;
    for (int i = 0; i < nd && (size_t)o + 2 < len; i++) {
        if (i && (nd - i) % 3 == 0) buf[o++] = ',';
        buf[o++] = d[i];
    }
    buf[o] = '\0';
    return buf;
}

/* Seconds as "45 s", "3 min", "1 h 20 min" into buf. */
static const char *span(double s, char *buf, size_t len)
{
    if (s < 90) snprintf(buf, len, "%.0f s", s < 0 ? 0 : s);
    else if (s < 5400) snprintf(buf, len, "%.0f min", s / 60);
    else snprintf(buf, len, "%.0f h %02.0f min", (double)(long)(s / 3600), (s - 3600 * (double)(long)(s / 3600)) / 60);
    return buf;
}

void moects__progress_start(moects__progress *pg, int mode, size_t ncases, size_t nkernels, size_t nruns, size_t nprior,
                           double est_s, int jobs, size_t gpus)
{
    memset(pg, 0, sizeof *pg);
    pg->mode = mode;
    pg->nt = nruns - nprior;
    pg->est_total = est_s;
    pg->jobs = jobs > 0 ? jobs : 1;
    pg->t0 = moects__now_s();
    pg->next = pg->t0 + 10;
    char a[32], b[32], c[32], d[32], t[32];
    fprintf(stderr, "moects run: %s case%s, %s kernel%s: %s run%s (each kernel on the cases of its op)",
            commas(ncases, a, sizeof a), ncases == 1 ? "" : "s", commas(nkernels, b, sizeof b), nkernels == 1 ? "" : "s",
            commas(nruns, c, sizeof c), nruns == 1 ? "" : "s");
    if (nprior) fprintf(stderr, ", %s kept from the journal", commas(nprior, d, sizeof d));
    double wall = est_s / (jobs > 0 ? jobs : 1);
    fprintf(stderr, "; %s%s on this machine (%d job%s", wall < 1 ? "under a second" : "about ",
            wall < 1 ? "" : span(wall, t, sizeof t), jobs, jobs == 1 ? "" : "s");
    if (gpus > 1) fprintf(stderr, " over %zu GPUs", gpus);
    fputs("; rough, from the cases' sizes)\n", stderr);
}

/* "N of M runs done after T, R runs/s, about L left" (L once anything is done). L blends the first
 * estimate of the work left (est_total - est_done, over the workers) with the measured one (elapsed
 * times left/done, in estimate units), weighted by the fraction of the estimate done: the first runs
 * are the costliest cases, whose time the fit predicts worst, and the measure takes over as it grows. */
static void status(const moects__progress *pg, double now, FILE *f)
{
    char a[32], b[32], t[32], l[32];
    double el = now - pg->t0;
    fprintf(f, "%s of %s runs done after %s, %.1f runs/s", commas(pg->ndone, a, sizeof a), commas(pg->nt, b, sizeof b),
            span(el, t, sizeof t), el > 0 ? (double)pg->ndone / el : 0.0);
    if (pg->est_done > 0 && pg->ndone < pg->nt) {
        double rest = pg->est_total - pg->est_done, w = pg->est_total > 0 ? pg->est_done / pg->est_total : 1;
        double left = w * (el * rest / pg->est_done) + (1 - w) * (rest / pg->jobs);
        fprintf(f, ", about %s left", span(left, l, sizeof l));
    }
}

void moects__progress_tick(moects__progress *pg, const char *kernel, const char *case_id)
{
    double now = moects__now_s();
    if (pg->mode == 1 && (kernel || now >= pg->next)) {
        fputs("\r\033[K", stderr);
        status(pg, now, stderr);
        if (kernel) fprintf(stderr, ": %s %s", kernel, case_id);
        fflush(stderr);
        pg->next = now + 10;
    } else if (pg->mode == 2 && now >= pg->next) {
        fputs("moects run: ", stderr);
        status(pg, now, stderr);
        fputc('\n', stderr);
        pg->next = now + 60;
    }
}

void moects__progress_done(moects__progress *pg, double est_s, const char *kernel, const char *case_id)
{
    pg->ndone++;
    pg->est_done += est_s;
    moects__progress_tick(pg, kernel, case_id);
}

void moects__progress_end(moects__progress *pg)
{
    if (pg->mode == 1) fputs("\r\033[K", stderr);
}
