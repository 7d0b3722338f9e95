#!/usr/bin/env bash
# h200_route.sh: the GPU run of the CUDA router (issue 30, docs/moe_route.md "CUDA kernel"). On the
# GPU host, from the repository root:
#   tools/h200_route.sh BUILD [OUTDIR]
# BUILD: a Release build folder made with CUDA (sm_90a), carried to the host: bin/moects. OUTDIR
# (default reports/h200/route/<commit>) receives, step by step:
#   machine.txt   date, commit, GPU, driver, compute-sanitizer
#   smoke/        the moe_route smoke tier, cuda.moe_route and its mutants (run.tap, results.json,
#                 summary.md): the honest kernel passes, each mutant is caught
#   full/         the moe_route full tier, the same kernels
#   memcheck/     compute-sanitizer memcheck of cuda.moe_route over the moe_route smoke tier (every
#                 worker process followed); memcheck.txt its error summary lines, counted
#   kernels.txt   one line per step and kernel: what it passed, failed, refused (printed at the end)
#   status.txt    each step's exit status and seconds
# MOECTS_BUDGET_S (default 240): the seconds this call may take; a step's limit is cut to what is left.
# MOECTS_PACK=FILE: OUTDIR packed into FILE (.tar.gz) after every step, for a device call that
# returns files. Exit 1 when any step failed.
set -u
B=$(cd "${1:?usage: tools/h200_route.sh BUILD [OUTDIR]}" && pwd)
COMMIT=${MOECTS_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
D=${2:-reports/h200/route/$COMMIT}
BUDGET=${MOECTS_BUDGET_S:-240}
JOBS=${MOECTS_JOBS:-$(nproc)}
KERNELS='cuda.moe_route,cuda.mutant.moe_route.*'
export MOECTS_ROOT=$PWD MOECTS_COMMIT=$COMMIT
mkdir -p "$D" && D=$(cd "$D" && pwd)
: > "$D/status.txt"
FAILED=0

STEP_MARGIN=10 STEP_MIN=10
# shellcheck source=tools/h200_steps.sh
. "$(dirname "$0")/h200_steps.sh"

{ echo "date: $(date -u +%FT%TZ)"; echo "commit: $COMMIT"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  echo "cpus: $(nproc)"; compute-sanitizer --version | tail -1; } > "$D/machine.txt" 2>&1

# 1. smoke, 2. full: moects run exits 0 when the honest kernel passes and every mutant is caught
step smoke 60 "$B/bin/moects" run --tier smoke 'moe_route*' --kernel "$KERNELS" --jobs "$JOBS" --out "$D/smoke"
step full 110 "$B/bin/moects" run --tier full 'moe_route*' --kernel "$KERNELS" --jobs "$JOBS" --out "$D/full"
# 3. memcheck of the honest kernel on the smoke tier; --error-exitcode: any access error fails the step
step memcheck 60 compute-sanitizer --tool memcheck --target-processes all --leak-check no --error-exitcode 9 \
  "$B/bin/moects" run --tier smoke 'moe_route*' --kernel cuda.moe_route --jobs "$JOBS" --out "$D/memcheck"
grep -E "ERROR SUMMARY|Invalid|========= [A-Z]" "$D/memcheck.log" "$D/memcheck.err" | sort | uniq -c > "$D/memcheck.txt"

# 4. one line per step and kernel
python3 - "$D" > "$D/kernels.txt" <<'EOF'
import collections, json, os, sys
d = sys.argv[1]
for part in ("smoke", "full", "memcheck"):
    p = os.path.join(d, part, "results.json")
    if not os.path.exists(p):
        print("%s: no results.json" % part)
        continue
    rows = collections.OrderedDict()
    for r in json.load(open(p))["results"]:
        c = rows.setdefault(r["kernel"], [r.get("mutant", False), collections.Counter()])
        c[1][r["verdict"]] += 1
    for kern, (mutant, c) in rows.items():
        fails = sum(n for v, n in c.items() if v.startswith("FAIL"))
        what = ("mutant %s" % ("CAUGHT" if fails else "ESCAPED")) if mutant else ("FAIL" if fails else "PASS")
        verdicts = " ".join("%s %d" % (v, n) for v, n in sorted(c.items()))
        print("%-8s %-40s %-14s %s" % (part, kern, what, verdicts))
EOF
cat "$D/kernels.txt"
grep -q " FAIL \|ESCAPED\|no results" "$D/kernels.txt" && FAILED=1
pack
echo "h200_route: $([ $FAILED = 0 ] && echo PASS || echo FAIL) ($D/status.txt)"
exit $FAILED
