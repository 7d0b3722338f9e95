#!/usr/bin/env python3
"""gpus_check.py: checks a `moects run --gpus` run (issue 33 item 1; docs/scale-out.md "Every GPU of a
host") from its results.json, for tests/cli/gpus.sh on CPU (MOECTS_FAKE_GPUS) and tools/h200_gpus.sh on
a GPU host.

    gpus_check.py RUN_DIR --gpus 0,1,2,3 --jobs N [--same-as OTHER_RUN_DIR] [--task-overhead-s S]

--gpus: the CUDA_VISIBLE_DEVICES values of the run's GPUs in --gpus order; --jobs: its workers. Checks:
  1. every result that ran names one of those GPUs ("gpu"), and all of a case's results the same one
     (a case runs in one worker; a worker that dies is replaced in its own GPU's set);
  2. every GPU that has a worker (worker w is in the set of GPU w % n) ran a case, when there are at
     least as many cases as workers (each worker starts a case at once);
  3. the per-GPU busy seconds (wall_s summed over its results) are spread within the bound of
     docs/scale-out.md: with k_g workers on GPU g, b_g = busy_g / k_g, p the longest case (its
     results' wall_s summed), t_g = results_g / k_g,
         max_g b_g - min_g b_g <= p + 0.5 s + task_overhead_s * max_g t_g
     (every worker is busy from its start until the last case starts, at S, and done by S + p; what
     wall_s does not count is the workers' start, 0.5 s, and each task's hand-off, task_overhead_s,
     default 0.01 s);
  4. with --same-as: the same (kernel, case) pairs as that run, each with the same verdict, mismatch
     count, ULP distance and input and reference hashes.
Prints one line per GPU and "ok: ..." and exits 0, or prints each "FAIL: ..." and exits 1.
"""
import argparse
import collections
import json
import os
import sys


def results(run_dir):
    with open(os.path.join(run_dir, "results.json")) as f:
        return json.load(f)["results"]


def ran(r):
    return not r["reason"].startswith("not run: ")


def check_gpus(rs, gpus, fails):
    """Check 1; returns {case: gpu}."""
    case_gpu = {}
    for r in filter(ran, rs):
        g = r.get("gpu")
        if g not in gpus:
            fails.append("%s on %s: gpu %r, not one of --gpus %s" % (r["kernel"], r["case"], g, ",".join(gpus)))
        elif case_gpu.setdefault(r["case"], g) != g:
            fails.append("case %s ran on GPU %s and on GPU %s" % (r["case"], case_gpu[r["case"]], g))
    return case_gpu


def check_spread(rs, case_gpu, gpus, jobs, overhead, fails):
    """Checks 2 and 3; prints the per-GPU lines."""
    workers = {g: len(range(i, jobs, len(gpus))) for i, g in enumerate(gpus)}
    busy, tasks, cases, case_s = collections.Counter(), collections.Counter(), collections.Counter(), collections.Counter()
    for r in filter(ran, rs):
        w = r.get("timing", {}).get("wall_s", 0)
        busy[r.get("gpu")] += w
        tasks[r.get("gpu")] += 1
        case_s[r["case"]] += w
    for c, g in case_gpu.items():
        cases[g] += 1
    used = [g for g in gpus if workers[g]]
    for g in used:
        print("GPU %s: %d worker(s), %d cases, %d results, %.1f s busy" % (g, workers[g], cases[g], tasks[g], busy[g]))
        if len(case_gpu) >= jobs and not cases[g]:
            fails.append("GPU %s has %d worker(s) but ran no case of %d" % (g, workers[g], len(case_gpu)))
    b = {g: busy[g] / workers[g] for g in used}
    p = max(case_s.values(), default=0)
    bound = p + 0.5 + overhead * max((tasks[g] / workers[g] for g in used), default=0)
    spread = max(b.values(), default=0) - min(b.values(), default=0)
    if spread > bound:
        fails.append("busy seconds per worker spread over %.2f s across the GPUs (%s), more than the bound %.2f s "
                     "(longest case %.2f s)" % (spread, ", ".join("%s: %.2f" % kv for kv in b.items()), bound, p))
    return spread, bound


def check_same(rs, other, fails):
    """Check 4."""
    keys = ("verdict", "mismatches", "max_ulp", "input_xxh64", "reference_xxh64")
    mine = {(r["kernel"], r["case"]): tuple(r.get(k) for k in keys) for r in rs}
    theirs = {(r["kernel"], r["case"]): tuple(r.get(k) for k in keys) for r in other}
    if set(mine) != set(theirs):
        fails.append("%d (kernel, case) pairs in one run only, e.g. %s" % (len(set(mine) ^ set(theirs)),
                                                                          sorted(set(mine) ^ set(theirs))[0]))
    for kc in sorted(set(mine) & set(theirs)):
        if mine[kc] != theirs[kc]:
            fails.append("%s on %s: %s here, %s in the other run" % (kc[0], kc[1], mine[kc], theirs[kc]))
    return len(set(mine) & set(theirs))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run_dir")
    ap.add_argument("--gpus", required=True)
    ap.add_argument("--jobs", type=int, required=True)
    ap.add_argument("--same-as")
    ap.add_argument("--task-overhead-s", type=float, default=0.01)
    a = ap.parse_args()
    gpus = a.gpus.split(",")
    rs, fails = results(a.run_dir), []
    case_gpu = check_gpus(rs, gpus, fails)
    spread, bound = check_spread(rs, case_gpu, gpus, a.jobs, a.task_overhead_s, fails)
    same = check_same(rs, results(a.same_as), fails) if a.same_as else 0
    for f in fails[:20]:
        print("FAIL: " + f)
    if fails:
        print("FAIL: %d problem(s) in %s" % (len(fails), a.run_dir))
        return 1
    print("ok: %d cases over %d GPU(s); busy spread %.2f s <= bound %.2f s%s" % (
        len(case_gpu), len(set(case_gpu.values())), spread, bound,
        "; %d results identical to %s" % (same, a.same_as) if a.same_as else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
