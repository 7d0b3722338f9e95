/* run_reference.c: `moects run --reference gpu|cpu` and `--perf-phases` (issue 31, docs/gpu_reference.md):
 * which reference path the run takes (gpu on a host with a CUDA device, cpu elsewhere), the cases whose
 * GPU references the CPU re-checks whatever the verdicts (every smoke case and a 1% sample of the rest,
 * drawn from a seed that results.json records with the sampled ids), the run's failure when two
 * references differed (FAIL_REFERENCE), and each phase's throughput at the end. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli_internal.h"
#include "moects_harness.h"
#include "moects_inputs.h"
#include "moects_runner.h"
#include "reports_internal.h"

#define SAMPLE_PER 100 /* one case in SAMPLE_PER of those outside smoke */

/* 1 when case id falls in the sample of seed (the counter-based generator over the id). */
static int sampled(uint64_t seed, const char *id)
{
    return moects__input_u64(moects__input_key(seed, id, "reference-check"), 0) % SAMPLE_PER == 0;
}

int moects__cli_reference_setup(const cli *o, const moects_device_info *dev, const moects_case *cases, size_t n,
                                moects_run *run, unsigned char **refcheck)
{
    *refcheck = NULL;
    const char *want = o->reference ? o->reference : "gpu";
    int mode = !strcmp(want, "test-standin") ? 2 : !strcmp(want, "test-broken") ? 3 : !strcmp(want, "gpu") ? 1 : 0;
    if (mode == 1 && dev->count <= 0) {
        if (o->reference)
            fprintf(stderr, "moects run: --reference gpu: no CUDA device (%s): the CPU reference\n", dev->why);
        mode = 0;
    }
    snprintf(run->reference, sizeof run->reference, "%s",
             mode == 0 ? "cpu" : mode == 1 ? "gpu" : mode == 2 ? "gpu-standin" : "gpu-broken");
    if (!mode) return 0;
    run->ref_sample_seed = o->ref_seed_given ? o->ref_seed : (uint64_t)time(NULL) * 1000003u ^ (uint64_t)getpid();
    unsigned char *rc = calloc(n + 1, 1);
    if (!rc) return -1;
    for (size_t c = 0; c < n; c++) {
        if (cases[c].tiers & MOECTS_TIER_SMOKE) rc[c] = 1;
        else if (sampled(run->ref_sample_seed, cases[c].id)) {
            char **v = realloc(run->ref_sampled, (run->nref_sampled + 1) * sizeof *v);
            if (!v) return free(rc), -1;
            run->ref_sampled = v;
            if (!(v[run->nref_sampled] = strdup(cases[c].id))) return free(rc), -1;
            run->nref_sampled++;
            rc[c] = 1;
        }
    }
    *refcheck = rc;
    return mode;
}

int moects__cli_reference_status(const moects_run *run)
{
    size_t nd = 0, first = 0, ng = 0, nc = 0;
    for (size_t i = 0; i < run->n; i++) {
        if (run->v[i].verdict == MOECTS_FAIL_REFERENCE && !nd++) first = i;
        ng += run->v[i].ref_check != 0;
        nc += run->v[i].ref_check == 1;
    }
    if (!strncmp(run->reference, "gpu", 3))
        fprintf(stderr, "moects run: reference %s: %zu result%s re-checked with the CPU reference, %zu the same\n",
                run->reference, ng, ng == 1 ? "" : "s", nc);
    if (!nd) return 0;
    fprintf(stderr, "moects run: %zu result%s FAIL_REFERENCE: the GPU and CPU references differ, a bug of the suite "
            "(first: %s on %s: %s): the run fails\n", nd, nd == 1 ? "" : "s", run->v[first].kernel,
            run->v[first].case_id, run->v[first].reason);
    return 1;
}

void moects__cli_perf_phases(const moects_run *run)
{
    double s[4] = {0}, wall = 0;
    size_t n[4] = {0}, gpu = 0;
    for (size_t i = 0; i < run->n; i++) {
        const moects_result *r = &run->v[i];
        const double v[4] = {r->inputs_s, r->reference_s, r->kernel_s, r->compare_s};
        for (int p = 0; p < 4; p++) s[p] += v[p], n[p] += v[p] > 0;
        gpu += r->reference_s > 0 && !strcmp(r->reference, "gpu");
        wall += r->wall_s;
    }
    static const char *const what[4] = {"inputs", "reference", "kernel", "compare"};
    static const char *const unit[4] = {"cases built", "references", "tasks", "tasks"};
    fprintf(stderr, "moects run: --perf-phases (worker seconds; a phase's rate counts the results that spent time "
            "in it):\n");
    for (int p = 0; p < 4; p++)
        fprintf(stderr, "  %-9s %10.3f s %5.1f%%  %8zu %s  %10.1f /s%s\n", what[p], s[p],
                wall > 0 ? 100 * s[p] / wall : 0.0, n[p], unit[p], s[p] > 0 ? n[p] / s[p] : 0.0,
                p == 1 ? (gpu ? " (some on the GPU)" : " (CPU)") : "");
    fprintf(stderr, "  %-9s %10.3f s over %zu results\n", "all", wall, run->n);
    moects__gpu_share *g;
    long ng = moects__gpu_shares(run, &g); /* --gpus: each GPU's worker set */
    for (long i = 0; i < ng; i++)
        fprintf(stderr, "  GPU %-5s %10.3f s over %zu results, %zu cases\n", g[i].gpu, g[i].wall_s, g[i].results,
                g[i].cases);
    free(g);
}
