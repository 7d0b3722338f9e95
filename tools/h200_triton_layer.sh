#!/usr/bin/env bash
# h200_triton_layer.sh: the Triton fused MoE layer example on a GPU host (issue 29 item 2), from the
# repository root.
#   tools/h200_triton_layer.sh BUILD [OUTDIR]
# BUILD: a build folder made with CUDA (bin/moects, lib/libmoects.so.0). OUTDIR (default
# reports/h200/triton_layer) receives machine.txt (date, commit, Python, torch, triton, GPU),
# cases.txt (every BF16 fused_moe smoke case: the weight format the example takes), kernel_py/
# (moects run --kernel-py: run.tap, results.json, summary.md), pytest/ (the pytest plugin's
# results.json, pytest.log), compare.md (the check below) and status.txt (each step's exit status and
# seconds).
# Kernels: examples/triton_fused_moe.py:kernels, both conventions (triton.fused_moe.vllm: [gate | up],
# silu / silu_clamp / relu2; triton.fused_moe.gpt_oss: interleaved rows, swigluoai) and their
# gate/up-swapped mutants, on CUDA. The check (exit 1 if any part fails): every (kernel, case) has the
# verdict tests/python/test_triton_fused_moe.py expects (honest PASS_BOUNDED, mutants FAIL_MISMATCH
# where a slot is computed, UNSUPPORTED for another convention's activation) in both routes, and the
# two routes agree. Needs python3 with numpy, pytest, torch and triton; the package is used from the
# checkout (PYTHONPATH). Fits 200 s (MOECTS_BUDGET_S, default 200).
set -u
B=${1:?usage: tools/h200_triton_layer.sh BUILD [OUTDIR]}
B=$(cd "$B" && pwd)
D=${2:-reports/h200/triton_layer}
BUDGET=${MOECTS_BUDGET_S:-200}
JOBS=${MOECTS_JOBS:-$(nproc)}
PY=${PYTHON:-python3}
export MOECTS_ROOT=$PWD MOECTS_LIB=$B/lib/libmoects.so.0 PYTHONUNBUFFERED=1 MOECTS_PYTHON=$PY
export PYTHONPATH=$PWD/python:$PWD/examples:$PWD/tests/python${PYTHONPATH:+:$PYTHONPATH}
export TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-/tmp/moects-triton-cache}
# MOECTS_TRITON_INTERPRET=1: a dry run of this script on a CPU host under Triton's interpreter (slow:
# name a few cases in MOECTS_LAYER_CASES and raise MOECTS_BUDGET_S); else real CUDA
if [ "${MOECTS_TRITON_INTERPRET:-}" = 1 ]; then export TRITON_INTERPRET=1; else unset TRITON_INTERPRET; fi
rm -rf "$D" && mkdir -p "$D"
D=$(cd "$D" && pwd)
FAILED=0 STEP_MARGIN=15 STEP_MIN=20
# shellcheck source=tools/h200_steps.sh
. "$(dirname "$0")/h200_steps.sh"

py_machine "$PY" > "$D/machine.txt"

# 1. the cases: every BF16 fused_moe smoke case (MOECTS_LAYER_CASES: other globs, any tier)
if [ -n "${MOECTS_LAYER_CASES:-}" ]; then
  read -ra GLOBS <<< "$MOECTS_LAYER_CASES"; TIER=all
else
  GLOBS=('fused_moe.bf16/*'); TIER=smoke
fi
"$B/bin/moects" list "${GLOBS[@]}" --tier "$TIER" | awk -F'\t' '!seen[$1]++ {print $1}' > "$D/cases.txt"
echo "cases: $(wc -l < "$D/cases.txt")" >> "$D/status.txt"

# 2. moects run --kernel-py: a Python process per call, JOBS workers sharing the GPU
# (--kernel: a --cases run takes honest kernels only without it)
step kernel_py 100 "$B/bin/moects" run --kernel-py examples/triton_fused_moe.py:kernels --kernel 'triton.*' \
  --cases "$D/cases.txt" --jobs "$JOBS" --out "$D/kernel_py"

# 3. the pytest plugin, in process (the route test only: step 2 is the runner's route)
MOECTS_CASES_FILE=$D/cases.txt step pytest 80 "$PY" -m pytest -q -p no:cacheprovider -p moects.pytest_plugin \
  tests/python/test_triton_fused_moe.py -k test_pytest_route --moects-results "$D/pytest/results.json"

# 4. the check: expected verdicts (the test file's rule) in both routes, and the routes agree
MOECTS_CASES_FILE=$D/cases.txt "$PY" - "$D" > "$D/compare.md" 2> "$D/compare.err" <<'EOF'
import json, sys
import moects
import test_triton_fused_moe as t
D = sys.argv[1]
def load(p):
    try:
        return {(r["kernel"], r["case"]): r for r in json.load(open(p))["results"]}
    except (OSError, ValueError) as e:
        print("- %s: unreadable (%s)" % (p, e)); return {}
routes = {"kernel_py": load(D + "/kernel_py/results.json"), "pytest": load(D + "/pytest/results.json")}
cases = list(moects.cases(*t.IDS, tier="all"))
bad, rows = [], []
print("# Triton fused MoE layer under moects (pytest plugin and --kernel-py)\n")
print("%d cases (cases.txt)\n" % len(cases))
print("| kernel | route | PASS_BOUNDED | FAIL_MISMATCH | UNSUPPORTED | other | unexpected | missing |")
print("|---|---|---|---|---|---|---|---|")
for k in sorted(t.KERNELS):
    for route, res in routes.items():
        n = dict.fromkeys(("PASS_BOUNDED", "FAIL_MISMATCH", "UNSUPPORTED", "other", "unexpected", "missing"), 0)
        for c in cases:
            r = res.get((k, c.id))
            if r is None:
                n["missing"] += 1; bad.append("%s %s %s: no result" % (route, k, c.id)); continue
            v = r["verdict"]
            n[v if v in n else "other"] += 1
            if v != t.expected(k, c):
                n["unexpected"] += 1
                bad.append("%s %s %s: %s, expected %s: %s" % (route, k, c.id, v, t.expected(k, c), r.get("reason", "")[:200]))
        print("| %s | %s | %s |" % (k, route, " | ".join(str(n[x]) for x in n)))
same = differ = 0
for key, r in routes["kernel_py"].items():
    if key in routes["pytest"]:
        if r["verdict"] == routes["pytest"][key]["verdict"]:
            same += 1
        else:
            differ += 1; bad.append("routes differ on %s %s: kernel_py %s, pytest %s" % (key + (r["verdict"], routes["pytest"][key]["verdict"])))
print("\nSame verdict in both routes: %d (kernel, case) pairs, %d differ." % (same, differ))
print("\n## Problems (%d)\n" % len(bad))
for b in bad[:60]:
    print("- " + b)
print("\nRESULT: %s" % ("PASS" if not bad and same else "FAIL"))
sys.exit(1 if bad or not same else 0)
EOF
rc=$?
echo "compare rc=$rc" >> "$D/status.txt"
tail -n 1 "$D/compare.md"
gzip -f "$D"/kernel_py/run.tap 2>/dev/null
cat "$D/status.txt"
exit $rc
