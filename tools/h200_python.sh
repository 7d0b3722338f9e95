#!/usr/bin/env bash
# h200_python.sh: the Python side of moects on a GPU host (issue 10), from the repository root.
#   tools/h200_python.sh BUILD [OUTDIR]
# BUILD: a build folder made with CUDA (bin/moects, lib/libmoects.so.0). OUTDIR (default
# reports/h200/python) receives machine.txt (date, commit, Python, torch, triton, GPU), cases.txt,
# kernel_py/ (moects run --kernel-py: run.tap, results.json, summary.md), pytest/ (the pytest plugin,
# in shards merged by moects merge: results.json, run.tap, pytest-*.log), compare.md (the check
# below) and status.txt (each step's exit status and seconds).
# Needs python3 with numpy, pytest, torch and triton; no network: the package is installed from
# the checkout into that Python's environment (pip --no-deps --no-build-isolation), or, if pip
# cannot, used from the checkout through PYTHONPATH.
# The cases: every smoke ep_gather case and the full-tier kimi-k3, deepseek-v3 and gpt-oss ones.
# Kernels: examples/triton_ep_gather.py, BLOCK_D = gcd(H, 1024) (triton.ep_gather) and min(H, 1024)
# (triton.mutant.ep_gather.block_min1024). The check (exit 1 if any part fails): gcd passes every
# case bit-exactly (PASS_EXACT under ep_gather.fma_v1); min fails exactly the cases whose H neither
# divides 1024 nor is a multiple of it (Kimi K3's 3584, gpt-oss's 2880, the non-power-of-two
# regression widths) and passes the others (DeepSeek-V3's 7168); both routes give the same verdict
# for every (kernel, case). Fits one 10-minute device call (MOECTS_BUDGET_S, default 560).
# Step moe (MOECTS_PY_STEPS=moe for it alone): the grouped MoE GEMM examples, examples/torch_moe_gemm.py
# and examples/triton_moe_w4a16.py, under --kernel-py and the pytest plugin (moe/, moe-pytest/).
set -u
B=${1:?usage: tools/h200_python.sh BUILD [OUTDIR]}
B=$(cd "$B" && pwd)
D=${2:-reports/h200/python}
BUDGET=${MOECTS_BUDGET_S:-560}
JOBS=${MOECTS_JOBS:-$(nproc)}
PY=${PYTHON:-python3}
export MOECTS_ROOT=$PWD MOECTS_LIB=$B/lib/libmoects.so.0 PYTHONUNBUFFERED=1
export TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-/tmp/moects-triton-cache}
rm -rf "$D" && mkdir -p "$D"
D=$(cd "$D" && pwd)
FAILED=0 STEP_MARGIN=30 STEP_MIN=20
# shellcheck source=tools/h200_steps.sh
. "$(dirname "$0")/h200_steps.sh"

# 1. the package: pip install into the Python that holds torch and triton (on the GPU host that
# python3 is itself a venv, and a venv made from it with --system-site-packages would not see them),
# else PYTHONPATH
rm -rf /tmp/moects-pkg && cp -r python /tmp/moects-pkg && rm -rf /tmp/moects-pkg/build /tmp/moects-pkg/*.egg-info
if "$PY" -m pip install --no-deps --no-build-isolation --force-reinstall /tmp/moects-pkg > "$D/install.log" 2>&1; then
  PLUGIN=(); echo "install: pip into $("$PY" -c 'import sys; print(sys.prefix)')" >> "$D/status.txt"
else # not installed: no pytest11 entry point, name the plugin
  export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}; PLUGIN=(-p moects.pytest_plugin)
  echo "install: PYTHONPATH (pip failed, see install.log)" >> "$D/status.txt"
fi
export MOECTS_PYTHON=$PY
py_machine "$PY" > "$D/machine.txt"

# MOECTS_PY_STEPS: ep_gather (steps 2-5, the Triton ep_gather check), moe (step 6); default both
has() { case ",${MOECTS_PY_STEPS:-ep_gather,moe}," in *",$1,"*) return 0 ;; esac; return 1; }

# 6. the grouped MoE GEMM examples (torch every format, Triton fused W4A16 and its straddling-tile
# mutant, which the offsets cases must catch) under moects run
# --kernel-py on the smoke moe_gemm cases and the full-tier W4A16 ones of DeepSeek-V3 and gpt-oss-120b
# (297 cases at 744aae7; with Kimi K3 and gpt-oss-20b, 432 cases had 183 of 1296 results after 192 s
# on the H200: a W4A16 exact reference is 6-7 s of one core), and the GPU tests of
# tests/python/test_gpu_moe_examples.py through the pytest plugin
if has moe; then
  { "$B/bin/moects" list 'moe_gemm*' --tier smoke
    "$B/bin/moects" list 'moe_gemm.w4a16/deepseek-v3/*' 'moe_gemm.w4a16/gpt-oss-120b/*' --tier full; } |
    awk -F'\t' '!seen[$1]++ {print $1}' > "$D/moe-cases.txt"
  echo "moe cases: $(wc -l < "$D/moe-cases.txt")" >> "$D/status.txt"
  step moe 300 "$B/bin/moects" run --kernel-py examples/torch_moe_gemm.py:kernel \
    --kernel-py examples/triton_moe_w4a16.py:kernels --kernel 'torch.*,triton.*' --cases "$D/moe-cases.txt" \
    --jobs "$JOBS" --out "$D/moe"
  PYTHONPATH=$PWD/examples:$PWD/tests/python${PYTHONPATH:+:$PYTHONPATH} step moe_pytest 200 "$PY" -m pytest -q \
    -p no:cacheprovider "${PLUGIN[@]}" tests/python/test_gpu_moe_examples.py --moects-results "$D/moe-pytest/results.json"
fi
has ep_gather || exit 0

# 2. the cases
{ "$B/bin/moects" list 'ep_gather/*' --tier smoke
  "$B/bin/moects" list 'ep_gather/kimi-k3/*' 'ep_gather/deepseek-v3/*' 'ep_gather/gpt-oss-*' --tier full; } |
  awk -F'\t' '!seen[$1]++ {print $1}' > "$D/cases.txt"
"$B/bin/moects" list -l 'ep_gather/*' --tier all > "$D/tiers.txt"
echo "cases: $(wc -l < "$D/cases.txt")" >> "$D/status.txt"

# 3. moects run --kernel-py: both policies, one worker per CPU core sharing the GPU
step kernel_py 240 "$B/bin/moects" run --kernel-py examples/triton_ep_gather.py:kernels --kernel 'triton.*' \
  --cases "$D/cases.txt" --jobs "$JOBS" --out "$D/kernel_py"

# 4. the pytest plugin: NS shards in parallel (--moects-shard), merged by moects merge
NS=${MOECTS_PYTEST_SHARDS:-8}
t0=$SECONDS
left=$((BUDGET - SECONDS - 40))
for ((i = 0; i < NS; i++)); do
  MOECTS_CASES_FILE=$D/cases.txt PYTHONPATH=$PWD/examples:$PWD/tests/python${PYTHONPATH:+:$PYTHONPATH} \
    timeout "$left" "$PY" -m pytest -q -p no:cacheprovider "${PLUGIN[@]}" tests/python/h200_triton_cases.py \
    --moects-shard $i/$NS --moects-results "$D/pytest/shard$i/results.json" > "$D/pytest-$i.log" 2>&1 &
done
wait
echo "pytest shards seconds=$((SECONDS - t0))" >> "$D/status.txt"
"$B/bin/moects" merge "$D/pytest" "$D"/pytest/shard*/results.json > "$D/pytest-merge.log" 2>&1
echo "pytest merge rc=$?" >> "$D/status.txt"

# 5. the check
"$PY" - "$D" > "$D/compare.md" <<'EOF'
import json, sys
D = sys.argv[1]
tiers = dict(l.rstrip("\n").split("\t")[:2] for l in open(D + "/tiers.txt") if "\t" in l)
ids = [l.strip() for l in open(D + "/cases.txt") if l.strip()]
def load(p):
    try:
        return {(r["kernel"], r["case"]): r for r in json.load(open(p))["results"]}
    except (OSError, ValueError) as e:
        print("- %s: unreadable (%s)" % (p, e)); return {}
routes = {"kernel_py": load(D + "/kernel_py/results.json"), "pytest": load(D + "/pytest/results.json")}
import moects
H = {}
for c in moects.cases(*ids, tier="all"):
    H[c.id] = c.info["shape"]["H"]
GCD, MIN = "triton.ep_gather", "triton.mutant.ep_gather.block_min1024"
def min_ok(h): return 1024 % h == 0 or h % 1024 == 0
bad = []
print("# Triton ep_gather under moects (pytest plugin and --kernel-py)\n")
print("%d cases (%d smoke, the rest full-tier kimi-k3, deepseek-v3, gpt-oss)\n" % (
    len(ids), sum("smoke" in tiers.get(i, "") for i in ids)))
print("| route | kernel | PASS_EXACT | FAIL (expected) | FAIL (unexpected) | PASS (unexpected) | missing |")
print("|---|---|---|---|---|---|---|")
for route, res in routes.items():
    for k in (GCD, MIN):
        n = {"pass": 0, "fail_exp": 0, "fail_unexp": 0, "pass_unexp": 0, "missing": 0}
        for cid in ids:
            r = res.get((k, cid))
            if r is None:
                n["missing"] += 1; bad.append("%s %s %s: no result" % (route, k, cid)); continue
            want_pass = k == GCD or min_ok(H[cid])
            got_pass = r["verdict"] == "PASS_EXACT"
            if got_pass and want_pass: n["pass"] += 1
            elif not got_pass and not want_pass: n["fail_exp"] += 1
            elif got_pass: n["pass_unexp"] += 1; bad.append("%s %s %s: passes, H %d" % (route, k, cid, H[cid]))
            else: n["fail_unexp"] += 1; bad.append("%s %s %s: %s %s" % (route, k, cid, r["verdict"], r["reason"][:200]))
        print("| %s | %s | %d | %d | %d | %d | %d |" % (route, k, n["pass"], n["fail_exp"], n["fail_unexp"], n["pass_unexp"], n["missing"]))
differ = [key for key in routes["kernel_py"] if key in routes["pytest"] and key[1] in H
          and routes["kernel_py"][key]["verdict"] != routes["pytest"][key]["verdict"]]
for key in differ:
    bad.append("routes differ on %s %s: kernel_py %s, pytest %s" % (key + (routes["kernel_py"][key]["verdict"], routes["pytest"][key]["verdict"])))
print("\nSame verdict in both routes: %d (kernel, case) pairs, %d differ." % (
    sum(1 for key in routes["kernel_py"] if key in routes["pytest"]) - len(differ), len(differ)))
for h in (3584, 2880, 7168):
    ks = [c for c in ids if H[c] == h]
    print("- H %d: %d cases; min policy: %s" % (h, len(ks), sorted({routes["kernel_py"].get((MIN, c), {}).get("verdict", "none") for c in ks})))
print("\n## Problems (%d)\n" % len(bad))
for b in bad[:60]:
    print("- " + b)
print("\nRESULT: %s" % ("PASS" if not bad else "FAIL"))
sys.exit(1 if bad else 0)
EOF
echo "compare rc=$?" >> "$D/status.txt"
tail -n 1 "$D/compare.md"
gzip -f "$D"/kernel_py/run.tap "$D"/pytest/run.tap 2>/dev/null
cat "$D/status.txt"
