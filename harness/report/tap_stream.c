/* tap_stream.c: the TAP of `moects run` on stdout while the run goes (moects_tap.h). The TAP is
 * kernel-major (a subtest per kernel, a point per case in case order) and the run case-major, so a
 * kernel's subtest can be written only once every case of its op is done; the runner finishes the ops
 * in the kernels' order (harness/run/runner.c plan_schedule), so the subtests come op by op. A kernel
 * done before the ones ahead of it is held. Each subtest is rendered by moects__tap_kernel from the
 * kernel's results alone, known findings marked as moects__known_apply marks them after the run: the
 * same bytes as the run.tap the finished run renders (tests/cli/run.sh "stream" checks it). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "moects_tap.h"

struct moects_tap_stream {
    FILE *out;
    moects_run run; /* the header; v: the results of the kernel being written */
    const moects_kernel *const *kernels;
    size_t nk, ncases, next, top; /* next: the first kernel not written; top: points written */
    const moects_case *cases;
    const moects_result **res; /* [c * nk + k] */
    size_t *want, *got;        /* per kernel: results expected (cases of its op), in */
    moects_tap_opts o;
    const moects_known *known;
    int failed;
};

moects_tap_stream *moects__tap_stream_new(FILE *out, const moects_run *head, const moects_kernel *const *kernels,
                                          size_t nk, const moects_case *cases, size_t ncases, const moects_tap_opts *o,
                                          const moects_known *known)
{
    moects_tap_stream *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->res = calloc(ncases * nk + 1, sizeof *s->res);
    s->want = calloc(nk + 1, sizeof *s->want);
    s->got = calloc(nk + 1, sizeof *s->got);
    if (!s->res || !s->want || !s->got) {
        free(s->res), free(s->want), free(s->got), free(s);
        return NULL;
    }
    s->out = out, s->kernels = kernels, s->nk = nk, s->cases = cases, s->ncases = ncases, s->o = *o;
    s->known = known;
    s->run = *head;
    s->run.v = NULL, s->run.n = s->run.cap = 0;
    size_t nplan = 0;
    for (size_t k = 0; k < nk; k++) {
        for (size_t c = 0; c < ncases; c++) s->want[k] += cases[c].op == kernels[k]->op;
        nplan += s->want[k] > 0;
    }
    moects__tap_head(out, &s->run, nplan, o);
    fflush(out);
    while (s->next < nk && !s->want[s->next]) s->next++; /* kernels that take no case: not in the TAP */
    return s;
}

/* Kernel k's subtest from its results in case order, known findings marked. 0, or -1 out of memory. */
static int write_kernel(moects_tap_stream *s, size_t k)
{
    s->run.n = 0;
    for (size_t c = 0; c < s->ncases; c++) {
        const moects_result *r = s->res[c * s->nk + k];
        if (!r) continue;
        if (moects__run_push(&s->run, r) != 0) return -1;
        if (s->known) moects__known_mark(s->known, &s->run.v[s->run.n - 1]);
    }
    s->top += (size_t)moects__tap_kernel(s->out, &s->run, s->kernels[k], s->top + 1, &s->o);
    fflush(s->out);
    return 0;
}

int moects__tap_stream_add(moects_tap_stream *s, size_t c, size_t k, const moects_result *r)
{
    if (!s || s->failed || c >= s->ncases || k >= s->nk) return -1;
    if (!s->res[c * s->nk + k]) s->got[k]++;
    s->res[c * s->nk + k] = r;
    while (s->next < s->nk && s->got[s->next] == s->want[s->next]) { /* the kernels now whole, in order */
        if (s->want[s->next] && write_kernel(s, s->next) != 0) return s->failed = 1, -1;
        s->next++;
    }
    return 0;
}

int moects__tap_stream_close(moects_tap_stream *s)
{
    if (!s) return 0;
    int whole = !s->failed && s->next == s->nk;
    moects__run_free(&s->run);
    free(s->res), free(s->want), free(s->got), free(s);
    return whole;
}
