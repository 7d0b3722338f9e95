/* test_harness_sched.c: weighted scheduling (harness/run/sched.c) and the weighted runner
 * (harness/run/runner.c). Expected weights are worked out by hand from 2MNK; the scheduler's starts
 * are traced by hand through its four rules (sched.c's comment); a simulated run checks its
 * promises on random groups. The runner with weights is checked against the same run on one job
 * through results.json: same verdicts and comparisons, bit for bit. No timing assertions. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moects_registry.h"
#include "moects_runner.h"
#include "test_tmpdir.h"

static moects_case fg_case(const char *id, int64_t M, int64_t N, int64_t K, moects_fp4_format f,
                           moects_scale_layout l)
{
    moects_case c;
    memset(&c, 0, sizeof c);
    snprintf(c.id, sizeof c.id, "%s", id);
    snprintf(c.model, sizeof c.model, "m");
    snprintf(c.layout, sizeof c.layout, "tp1");
    c.op = MOECTS_OP_FP4_GEMM;
    c.M = M;
    c.N = N;
    c.K = K;
    c.format = f;
    c.scale_layout = l;
    c.out_dtype = MOECTS_BF16;
    c.tiers = MOECTS_TIER_SMOKE;
    return c;
}

static moects_case eg_case(const char *id, int64_t T, int64_t k, int64_t H, int64_t E)
{
    moects_case c;
    memset(&c, 0, sizeof c);
    snprintf(c.id, sizeof c.id, "%s", id);
    snprintf(c.model, sizeof c.model, "m");
    snprintf(c.layout, sizeof c.layout, "tp1");
    c.op = MOECTS_OP_EP_GATHER;
    c.T = T;
    c.k = k;
    c.H = H;
    c.E_global = E;
    c.ep_size = 1;
    c.id_dtype = MOECTS_I32;
    c.out_dtype = MOECTS_BF16;
    c.routing = MOECTS_ROUTE_UNIFORM;
    c.tiers = MOECTS_TIER_SMOKE;
    return c;
}

/* ---------------------------------------------------------------- weights ---- */

Test(sched, case_weight_is_ceil_of_flops_over_threshold)
{
    /* 2 * 16 * 1024 * 512 = 16777216 flops */
    moects_case c = fg_case("f", 16, 1024, 512, MOECTS_FP4_MXFP4, MOECTS_SCALES_LINEAR);
    cr_assert_eq(moects__case_weight(&c, 16777216.0, 64), 1);  /* exactly 1 */
    cr_assert_eq(moects__case_weight(&c, 16777217.0, 64), 1);  /* below 1 */
    cr_assert_eq(moects__case_weight(&c, 8388608.0, 64), 2);   /* exactly 2 */
    cr_assert_eq(moects__case_weight(&c, 8388607.0, 64), 3);   /* 2.00000012: up */
    cr_assert_eq(moects__case_weight(&c, 1e6, 64), 17);        /* 16.78 */
    cr_assert_eq(moects__case_weight(&c, 1e6, 8), 8);          /* clamped to the slots */
    cr_assert_eq(moects__case_weight(&c, 1e6, 1), 1);
    cr_assert_eq(moects__case_weight(&c, 0, 64), 1);           /* no threshold: no weights */
    /* ep_gather's reference is single-threaded: one slot whatever its size */
    moects_case e = eg_case("e", 1 << 20, 8, 7168, 256);
    cr_assert_eq(moects__case_weight(&e, 1.0, 64), 1);
}

/* ---------------------------------------------------------------- rules, by hand ---- */

static long next(moects__sched *s, int *n) { return moects__sched_next(s, n); }

Test(sched, rule1_and_rule3_head_starts_whole_or_with_at_least_half)
{
    /* 4 slots; cost order g0 (wants 4), g1 (4), g2, g3 (1 each) */
    size_t order[] = {0, 1, 2, 3};
    int want[] = {4, 4, 1, 1}, n;
    moects__sched s;
    cr_assert_eq(moects__sched_init(&s, 4, order, want, 4), 0);
    cr_assert_eq(next(&s, &n), 0);
    cr_assert_eq(n, 4);                   /* rule 1: 4 free */
    cr_assert_eq(next(&s, &n), -1);       /* nothing free */
    moects__sched_shrink(&s, 0);          /* g0's reference done: 3 free, nothing pending */
    cr_assert_eq(next(&s, &n), 1);
    cr_assert_eq(n, 3);                   /* rule 3: 3 >= ceil(4/2) */
    cr_assert_eq(next(&s, &n), -1);
    moects__sched_done(&s, 0);            /* 1 free: g2 is the head now, wants 1 */
    cr_assert_eq(next(&s, &n), 2);
    cr_assert_eq(n, 1);
    cr_assert_eq(next(&s, &n), -1);
    cr_assert_eq(moects__sched_left(&s), 1u);
    moects__sched_free(&s);
}

Test(sched, rule2_head_waits_for_pending_slots_and_the_spare_ones_are_used)
{
    /* 8 slots; g0 wants 6, g1 4, g2..g4 1 */
    size_t order[] = {0, 1, 2, 3, 4};
    int want[] = {6, 4, 1, 1, 1}, n;
    moects__sched s;
    cr_assert_eq(moects__sched_init(&s, 5, order, want, 8), 0);
    cr_assert_eq(next(&s, &n), 0);
    cr_assert_eq(n, 6);
    /* 2 free + 5 pending >= 4: g1 waits for 4; spare: 2 - 1 + 5 = 6 >= 4, then 1 - 1 + 5 >= 4 */
    cr_assert_eq(next(&s, &n), 2);
    cr_assert_eq(n, 1);
    cr_assert_eq(next(&s, &n), 3);
    cr_assert_eq(n, 1);
    cr_assert_eq(next(&s, &n), -1);       /* no slot free */
    moects__sched_shrink(&s, 0);          /* 5 free */
    cr_assert_eq(next(&s, &n), 1);
    cr_assert_eq(n, 4);                   /* whole, not the 2 it could have had before */
    cr_assert_eq(next(&s, &n), 4);
    cr_assert_eq(n, 1);
    cr_assert_eq(moects__sched_left(&s), 0u);
    moects__sched_free(&s);
}

Test(sched, rule4_head_waits_and_nothing_jumps_ahead_when_nothing_is_pending)
{
    /* 4 slots; g0..g2 want 1, g3 wants 4, g4 wants 1 */
    size_t order[] = {0, 1, 2, 3, 4};
    int want[] = {1, 1, 1, 4, 1}, n;
    moects__sched s;
    cr_assert_eq(moects__sched_init(&s, 5, order, want, 4), 0);
    for (long g = 0; g < 3; g++) {
        cr_assert_eq(next(&s, &n), g);
        cr_assert_eq(n, 1);
    }
    /* 1 free < ceil(4/2), nothing pending: g3 waits; g4 must not take the slot (g3 would starve
     * behind a stream of one-slot groups) */
    cr_assert_eq(next(&s, &n), -1);
    moects__sched_done(&s, 1);            /* 2 free */
    cr_assert_eq(next(&s, &n), 3);
    cr_assert_eq(n, 2);
    cr_assert_eq(next(&s, &n), -1);
    moects__sched_done(&s, 0);
    cr_assert_eq(next(&s, &n), 4);
    moects__sched_free(&s);
}

Test(sched, want_beyond_slots_is_clamped_and_one_slot_never_waits)
{
    size_t order[] = {1, 0};
    int want[] = {1, 99}, n;
    moects__sched s;
    cr_assert_eq(moects__sched_init(&s, 2, order, want, 3), 0);
    cr_assert_eq(next(&s, &n), 1);
    cr_assert_eq(n, 3);
    moects__sched_shrink(&s, 1);
    cr_assert_eq(next(&s, &n), 0);
    cr_assert_eq(n, 1);
    moects__sched_free(&s);
}

/* ---------------------------------------------------------------- simulated runs ---- */

static uint64_t rng_state;
static double urand(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}

/* Random groups on random slot counts, a group's reference taking work/slots and its rest a random
 * time. Checked: slots never over-committed; a group gets what it wants or at least half; a group
 * that wants several slots starts in cost order; when a slot is free and the head fits, it has
 * started; the run never stalls; and a head starts no later than the end of the groups that were
 * running when it became the head (one-slot groups started meanwhile do not delay it). */
Test(sched, simulated_runs_keep_the_promises)
{
    rng_state = 12345;
    for (int run = 0; run < 300; run++) {
        int slots = 1 + (int)(urand() * 12);
        size_t ng = 1 + (size_t)(urand() * 60);
        size_t *order = malloc(ng * sizeof *order);
        int *want = malloc(ng * sizeof *want), *grant = calloc(ng, sizeof *grant), *st = calloc(ng, sizeof *st);
        double *work = malloc(ng * sizeof *work), *rest = malloc(ng * sizeof *rest);
        double *t_shrink = malloc(ng * sizeof *t_shrink), *t_end = malloc(ng * sizeof *t_end);
        double *t_start = malloc(ng * sizeof *t_start);
        for (size_t i = 0; i < ng; i++) {
            order[i] = i;
            double u = urand();
            want[i] = u < 0.3 ? 1 + (int)(urand() * slots) : 1;
            work[i] = urand() * 10;
            rest[i] = urand() * 2;
        }
        for (size_t i = ng; i > 1; i--) { /* cost order unrelated to the weights */
            size_t j = (size_t)(urand() * i), t = order[i - 1];
            order[i - 1] = order[j];
            order[j] = t;
        }
        moects__sched s;
        cr_assert_eq(moects__sched_init(&s, ng, order, want, slots), 0);
        double now = 0, head_bound = 0;
        size_t head = 0, last_multi = 0, done = 0;
        int have_multi = 0;
        for (int steps = 0; done < ng; steps++) {
            cr_assert_lt(steps, 100000, "run %d stalls", run);
            int n;
            long g;
            while ((g = moects__sched_next(&s, &n)) >= 0) {
                cr_assert_eq(st[g], 0, "group started twice");
                int w = want[g] > slots ? slots : want[g];
                cr_assert(n == w || (n < w && n >= (w + 1) / 2), "run %d: group %ld wants %d, got %d", run, g, w, n);
                st[g] = 1;
                grant[g] = n;
                t_start[g] = now;
                t_shrink[g] = now + work[g] / n;
                t_end[g] = t_shrink[g] + rest[g];
                if (w > 1) { /* groups wanting several slots start in cost order */
                    size_t pos = 0;
                    while (order[pos] != (size_t)g) pos++;
                    cr_assert(!have_multi || pos > last_multi, "run %d: out of order", run);
                    last_multi = pos;
                    have_multi = 1;
                }
            }
            int held = 0, running = 0;
            for (size_t i = 0; i < ng; i++)
                if (st[i] == 1 || st[i] == 2) held += st[i] == 1 ? grant[i] : 1, running++;
            cr_assert_leq(held, slots, "run %d: %d slots held of %d", run, held, slots);
            cr_assert_eq(slots - held, s.free_slots);
            /* the head: waits only when it does not fit; became head -> bound */
            size_t h = head;
            while (h < ng && st[order[h]]) h++;
            if (h != head || steps == 0) {
                head = h;
                head_bound = now;
                for (size_t i = 0; i < ng; i++)
                    if ((st[i] == 1 || st[i] == 2) && t_end[i] > head_bound) head_bound = t_end[i];
            }
            if (h < ng) {
                int w = want[order[h]] > slots ? slots : want[order[h]];
                cr_assert(s.free_slots < w, "run %d: head fits in %d free slots but waits", run, s.free_slots);
                cr_assert(running > 0, "run %d: nothing runs and the head waits", run);
                cr_assert_leq(now, head_bound + 1e-9, "run %d: head waits past the end of what ran before it", run);
            }
            /* next event */
            double t = INFINITY;
            for (size_t i = 0; i < ng; i++) {
                if (st[i] == 1 && t_shrink[i] < t) t = t_shrink[i];
                if ((st[i] == 1 || st[i] == 2) && t_end[i] < t) t = t_end[i];
            }
            if (t == INFINITY) break;
            now = t;
            for (size_t i = 0; i < ng; i++) {
                if (st[i] == 1 && t_shrink[i] <= now) {
                    moects__sched_shrink(&s, i);
                    st[i] = 2;
                }
                if (st[i] == 2 && t_end[i] <= now) {
                    moects__sched_done(&s, i);
                    st[i] = 3;
                    done++;
                }
            }
        }
        cr_assert_eq(done, ng, "run %d: %zu of %zu groups done", run, done, ng);
        cr_assert_eq(s.free_slots, slots);
        cr_assert_eq(s.pending, 0);
        moects__sched_free(&s);
        free(order), free(want), free(grant), free(st), free(work), free(rest), free(t_shrink), free(t_end), free(t_start);
    }
}

/* ---------------------------------------------------------------- the weighted runner ---- */

static moects_case cases[8];
static size_t ncases;
static const moects_kernel *kernels[32];
static size_t nkernels;

/* Small cases: FP4 GEMMs of 2MNK = 4.2, 12.6, 25.2, 50.3 Mflop (M = 16 rows; N = 512..2048 spans
 * 2..8 of the reference's 256-column tiles), both formats and scale layouts, and 2 ep_gather;
 * every CPU kernel, honest ones and mutants. */
static void setup_cases(void)
{
    ncases = 0;
    cases[ncases++] = fg_case("fp4_gemm.mxfp4/m/tp1/gemm1/m16", 16, 512, 256, MOECTS_FP4_MXFP4, MOECTS_SCALES_LINEAR);
    cases[ncases++] = eg_case("ep_gather/m/tp1/t16", 16, 4, 384, 32);
    cases[ncases++] = fg_case("fp4_gemm.nvfp4/m/tp1/gemm1/m16", 16, 1536, 256, MOECTS_FP4_NVFP4, MOECTS_SCALES_LINEAR);
    cases[ncases++] = fg_case("fp4_gemm.mxfp4/m/tp1/gemm2/m16/swizzled", 16, 1024, 768, MOECTS_FP4_MXFP4,
                              MOECTS_SCALES_SWIZZLED_128X4);
    cases[ncases++] = fg_case("fp4_gemm.nvfp4/m/tp1/gemm2/m16", 16, 2048, 768, MOECTS_FP4_NVFP4, MOECTS_SCALES_LINEAR);
    cases[ncases++] = eg_case("ep_gather/m/tp1/t40", 40, 8, 1000, 64);
    size_t nb;
    const moects_kernel *const *b = moects__builtin_kernels(&nb);
    nkernels = 0;
    for (size_t i = 0; i < nb && nkernels < 32; i++)
        if (b[i]->device == MOECTS_DEVICE_CPU) kernels[nkernels++] = b[i];
    cr_assert_gt(nkernels, 4);
}

/* Run the cases on `jobs` slots of a machine of `ncpu` cores, write results.json, read it back. */
static void run_to_json(int jobs, int ncpu, double big, const char *name, moects_run *back)
{
    moects_runner_opts o = {.cases = cases, .ncases = ncases, .kernels = kernels, .nkernels = nkernels, .seed = 7,
                            .timeout_s = 0, .jobs = jobs, .big_case_flops = big, .ncpu = ncpu};
    moects_run run;
    memset(&run, 0, sizeof run);
    snprintf(run.moects_version, sizeof run.moects_version, "0.1");
    char err[512] = "", path[512];
    cr_assert_eq(moects__runner_run(&o, &run, err, sizeof err), 0, "%s", err);
    snprintf(path, sizeof path, "%s/%s.json", tmpdir, name);
    cr_assert_eq(moects__results_write(path, &run, err, sizeof err), 0, "%s", err);
    cr_assert_eq(moects__results_read(path, back, err, sizeof err), 0, "%s", err);
    cr_assert_eq(back->n, run.n);
    for (size_t i = 0; i < run.n; i++) { /* the timing survives the file */
        cr_assert_eq(back->v[i].wall_s, run.v[i].wall_s);
        cr_assert_eq(back->v[i].reference_s, run.v[i].reference_s);
        cr_assert_eq(back->v[i].ref_threads, run.v[i].ref_threads);
    }
    moects__run_free(&run);
}

static int same_bits(double a, double b) { return memcmp(&a, &b, sizeof a) == 0; }

static void setup(void)
{
    mk_tmpdir("/tmp/moects-sched-XXXXXX");
    setup_cases();
}

/* Weights change the threads of the references, never a result: 6 slots on 6 "cores" (one thread
 * a slot, so the CPU kernels, which run on the slot's threads, see the same count) with a
 * threshold of 4 Mflop (the FP4 cases want 2, 4, 7 and 13 -> 6 slots) against one job. */
Test(sched, weighted_run_equals_one_job_through_results_json, .init = setup, .fini = rm_tmp, .timeout = 600)
{
    moects_run w, one;
    run_to_json(6, 6, 4e6, "weighted", &w);
    run_to_json(1, 1, 4e6, "one", &one);
    cr_assert_eq(w.n, one.n);
    int max_threads = 0, mismatching = 0;
    for (size_t i = 0; i < w.n; i++) {
        const moects_result *x = &w.v[i], *y = &one.v[i];
        cr_assert_str_eq(x->kernel, y->kernel, "results[%zu]", i);
        cr_assert_str_eq(x->case_id, y->case_id, "results[%zu]", i);
        cr_assert_eq(x->verdict, y->verdict, "%s %s: %s vs %s", x->kernel, x->case_id,
                     moects__verdict_name(x->verdict), moects__verdict_name(y->verdict));
        cr_assert_str_eq(x->recipe, y->recipe);
        cr_assert_eq(x->mismatches, y->mismatches, "%s %s", x->kernel, x->case_id);
        cr_assert_eq(x->max_ulp, y->max_ulp, "%s %s", x->kernel, x->case_id);
        cr_assert(same_bits(x->calc_diff, y->calc_diff), "%s %s: calc_diff %.17g vs %.17g", x->kernel, x->case_id,
                  x->calc_diff, y->calc_diff);
        cr_assert_eq(x->first_index, y->first_index);
        cr_assert_str_eq(x->got, y->got);
        cr_assert_str_eq(x->want, y->want);
        cr_assert_str_eq(x->reason, y->reason);
        if (x->ref_threads > max_threads) max_threads = x->ref_threads;
        cr_assert_leq(y->ref_threads, 1, "one job: one thread");
        mismatching += x->mismatches > 0;
    }
    /* the weights did act (a reference on 6 threads: the 50 Mflop case wants 13, clamped to 6),
     * and mutants' mismatches (got/want bits, calc_diff) fingerprint the references compared */
    cr_assert_eq(max_threads, 6);
    cr_assert_gt(mismatching, 0);
    moects__run_free(&w);
    moects__run_free(&one);
}

/* The timing of every task: present, >= 0, phases within the wall time; a case's inputs and its
 * reference counted once, in one task (the FP4 cases' kernels want blockwise_v1 and exact_v1 -- the
 * tolerance kernel compares under exact_v1 -- both computed in one pass). */
Test(sched, timing_is_present_and_adds_up, .init = setup, .fini = rm_tmp, .timeout = 600)
{
    moects_run w;
    run_to_json(3, 3, 4e6, "timing", &w);
    for (size_t c = 0; c < ncases; c++) {
        int with_inputs = 0, with_ref = 0;
        unsigned recipes = 0;
        for (size_t i = 0; i < w.n; i++) {
            const moects_result *r = &w.v[i];
            if (strcmp(r->case_id, cases[c].id)) continue;
            cr_assert_gt(r->wall_s, 0, "%s %s", r->kernel, r->case_id);
            cr_assert_geq(r->inputs_s, 0);
            cr_assert_geq(r->reference_s, 0);
            cr_assert_geq(r->kernel_s, 0);
            cr_assert_geq(r->compare_s, 0);
            cr_assert_leq(r->inputs_s + r->reference_s + r->kernel_s + r->compare_s, r->wall_s + 1e-5,
                          "%s %s: phases %g %g %g %g, wall %g", r->kernel, r->case_id, r->inputs_s, r->reference_s,
                          r->kernel_s, r->compare_s, r->wall_s);
            cr_assert_geq(r->ref_threads, 0);
            with_inputs += r->inputs_s > 0;
            with_ref += r->ref_threads > 0;
            recipes |= strstr(r->recipe, "exact_v1") ? 1u : strstr(r->recipe, "blockwise_v1") ? 2u : 4u;
        }
        cr_assert_leq(with_inputs, 1, "%s: inputs timed in %d tasks", cases[c].id, with_inputs);
        if (cases[c].op == MOECTS_OP_FP4_GEMM) {
            cr_assert_eq(recipes, 3u, "%s: want both FP4 recipes", cases[c].id);
            cr_assert_eq(with_ref, 1, "%s: references in %d tasks, want one pass", cases[c].id, with_ref);
        } else {
            cr_assert_geq(with_ref, 1); /* ep_gather: one reference per recipe */
        }
    }
    moects__run_free(&w);
}

static int n_on_result;
static void count_result(void *ctx, const moects_result *r)
{
    (void)ctx, (void)r;
    n_on_result++;
}

/* --resume (moects_runner_opts.prior): the first case's results given as prior ones (marked by their
 * reason, cpu.ep_gather's a crash) are not run and stand in their places, case-major in kernel order;
 * only the second case's tasks report (on_result); the prior crash counts for fail fast, so that with
 * dead_after 1 cpu.ep_gather is not run on the second case. */
Test(sched, prior_results_take_their_places_and_are_not_run, .init = setup, .fini = rm_tmp, .timeout = 600)
{
    moects_case eg[2] = {cases[1], cases[5]}; /* the two ep_gather cases */
    static moects_result old[32];
    const moects_result *prior[2 * 32] = {0};
    size_t neg = 0, honest = 0;
    long ke = -1;
    for (size_t k = 0; k < nkernels; k++) {
        if (kernels[k]->op != MOECTS_OP_EP_GATHER) continue;
        moects__result_identity(&old[k], &eg[0], kernels[k], 7);
        old[k].verdict = strcmp(kernels[k]->name, "cpu.ep_gather") ? MOECTS_SKIP : MOECTS_FAIL_CRASH;
        snprintf(old[k].reason, sizeof old[k].reason, "from the journal");
        prior[k] = &old[k]; /* case 0, kernel k */
        if (!strcmp(kernels[k]->name, "cpu.ep_gather")) ke = (long)neg;
        neg++, honest += !kernels[k]->bug;
    }
    cr_assert_geq(ke, 0);
    cr_assert_gt(honest, 1);
    moects_runner_opts o = {.cases = eg, .ncases = 2, .kernels = kernels, .nkernels = nkernels, .seed = 7, .jobs = 2,
                            .dead_after = 1, .prior = prior, .on_result = count_result};
    moects_run run;
    memset(&run, 0, sizeof run);
    char err[512] = "";
    n_on_result = 0;
    cr_assert_eq(moects__runner_run(&o, &run, err, sizeof err), 0, "%s", err);
    cr_assert_eq(run.n, 2 * neg);
    cr_assert_eq(n_on_result, (int)neg - 1, "tasks reported: %d, want %zu", n_on_result, neg - 1);
    for (size_t i = 0; i < run.n; i++) {
        const moects_result *r = &run.v[i];
        cr_assert_str_eq(r->case_id, eg[i / neg].id, "results[%zu]", i);
        cr_assert_str_eq(r->kernel, run.v[i % neg].kernel, "results[%zu]: kernel order", i);
        if (i < neg) cr_assert_str_eq(r->reason, "from the journal", "results[%zu]", i);
        else if (i == neg + (size_t)ke)
            cr_assert(r->verdict == MOECTS_SKIP && strstr(r->reason, "not run: cpu.ep_gather stopped"), "%s", r->reason);
        else cr_assert(r->verdict != MOECTS_SKIP && strcmp(r->reason, "from the journal"), "%s: %s", r->kernel, r->reason);
    }
    moects__run_free(&run);
}

/* By hand: ep_gather x [T*k, H] BF16 + out [T, H] BF16 = 1024 * 4096 * (8*2 + 2) bytes = 72 MiB;
 * fp4_gemm codes (128 + 256) * 64 / 2 = 12288 bytes + FP32 out 128 * 256 * 4 = 131072. */
Test(sched, case_bytes_of_ep_gather_and_fp4_gemm)
{
    moects_case c = {.op = MOECTS_OP_EP_GATHER, .T = 1024, .k = 8, .H = 4096, .out_dtype = MOECTS_BF16};
    cr_assert_eq(moects__case_bytes(&c), 72.0 * 1048576);
    moects_case g = {.op = MOECTS_OP_FP4_GEMM, .M = 128, .N = 256, .K = 64, .out_dtype = MOECTS_F32};
    cr_assert_eq(moects__case_bytes(&g), 12288.0 + 131072.0);
}
