/* run_verdict.c: the last stderr line of `moects run`, its verdict, for a reader to take in at once
 * (docs/usage.md "Reports and exit status"): honest kernels (passed, failed, refused, not exercised),
 * mutants (caught, escaped, not exercised), then the runs, one (kernel, case) each: honest passed,
 * failed, known findings; mutants caught, passed; not run (no device, unsupported, skipped). The
 * counts come from the results and the kernel statuses of harness/report/tap.c; the exit status is
 * decided elsewhere (cmd_run.c run_status) and only printed here. */
#include <stdio.h>
#include <string.h>

#include "cli_internal.h"
#include "moects_harness.h"
#include "moects_tap.h"

/* ", N WORD" appended to buf when n > 0. */
static void part(char *buf, size_t len, size_t n, const char *word)
{
    size_t l = strlen(buf);
    if (n && l < len) snprintf(buf + l, len - l, ", %zu %s", n, word);
}

/* "; honest kernels P of K passed, F failed, ...; mutants C of M caught, E escaped, ..." into buf, each
 * part only when such kernels ran. Kernels count when they have a result (a kernel that took no
 * selected case is not in the TAP either). */
static void kernel_counts(const moects_run *run, const moects_kernel *const *kernels, size_t nk,
                          const moects_tap_opts *to, char *buf, size_t len)
{
    /* h: passed, failed, refused, not exercised, refused a shard; m: caught, escaped, deferred, not exercised */
    size_t h[5] = {0}, m[4] = {0}, nh = 0, nm = 0;
    for (size_t k = 0; k < nk; k++) {
        size_t c[MOECTS_VERDICT_COUNT], n = 0;
        moects_kernel_status st = moects__kernel_status_of(run, kernels[k]->name, kernels[k]->bug != NULL, c);
        for (int v = 0; v < MOECTS_VERDICT_COUNT; v++) n += c[v];
        if (!n) continue;
        if (kernels[k]->bug) {
            nm++;
            m[st == MOECTS_KS_CAUGHT ? 0 : st != MOECTS_KS_ESCAPED ? 3 : moects__status_deferred_to(run, to, st) ? 2 : 1]++;
        } else {
            nh++;
            h[st == MOECTS_KS_PASS ? 0 : st == MOECTS_KS_FAIL ? 1 : st != MOECTS_KS_REFUSED ? 3
              : moects__status_deferred_to(run, to, st) ? 4 : 2]++;
        }
    }
    buf[0] = '\0';
    if (nh) {
        snprintf(buf, len, "; honest kernels %zu of %zu passed", h[0], nh);
        part(buf, len, h[1], "failed");
        part(buf, len, h[2], "refused every case");
        part(buf, len, h[3], "not exercised");
        part(buf, len, h[4], "refused every case of this shard (TODO)");
    }
    if (nm) {
        size_t l = strlen(buf);
        snprintf(buf + l, len - l, "; mutants %zu of %zu caught", m[0], nm);
        part(buf, len, m[1], "escaped");
        part(buf, len, m[2], run->shard[0] ? "escaped this shard (TODO)" : "escaped this selection (TODO)");
        part(buf, len, m[3], "not exercised");
    }
    if (!nh && !nm) snprintf(buf, len, "; no kernel took a selected case");
}

void moects__cli_verdict_line(const moects_run *run, const moects_kernel *const *kernels, size_t nk,
                              const moects_tap_opts *to, int rc, const char *outdir)
{
    char ks[512];
    kernel_counts(run, kernels, nk, to, ks, sizeof ks);
    size_t hp = 0, hf = 0, hk = 0, mc = 0, mp = 0, nodev = 0, unsup = 0, skip = 0;
    for (size_t i = 0; i < run->n; i++) {
        const moects_result *r = &run->v[i];
        int pass = moects_verdict_is_pass(r->verdict), fail = moects_verdict_is_fail(r->verdict);
        if (r->is_mutant) mc += fail, mp += pass;
        else hp += pass, hf += fail && !r->known[0], hk += fail && r->known[0];
        if (r->verdict == MOECTS_UNSUPPORTED) unsup++;
        else if (r->verdict == MOECTS_SKIP) moects__reason_is_no_device(r->reason) ? nodev++ : skip++;
    }
    char rs[400] = "", nr[160] = "";
    if (hp + hf + hk) snprintf(rs, sizeof rs, "; honest %zu passed, %zu failed", hp, hf);
    if (hk) part(rs, sizeof rs, hk, hk == 1 ? "known finding" : "known findings");
    if (mc + mp) snprintf(rs + strlen(rs), sizeof rs - strlen(rs), "; mutants %zu caught, %zu passed", mc, mp);
    part(nr, sizeof nr, nodev, "no device");
    part(nr, sizeof nr, unsup, "unsupported");
    part(nr, sizeof nr, skip, "skipped");
    if (nr[0]) snprintf(rs + strlen(rs), sizeof rs - strlen(rs), "; %zu not run (%s)", nodev + unsup + skip, nr + 2);
    fprintf(stderr, "moects run: %s: %s; runs:%s; summary: %s/summary.md\n", rc == 0 ? "PASS" : "FAIL", ks + 2,
            rs[0] ? rs + 1 : " none", outdir);
}
