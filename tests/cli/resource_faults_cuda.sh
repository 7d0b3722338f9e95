#!/bin/sh
# resource_faults_cuda.sh MOECTS PLUGIN_CUDA OUTDIR: on a GPU host (the lead's H200 run; issue 15), a
# CUDA kernel that leaks device memory, exhausts it, or leaves a sticky error costs only its own case.
# PLUGIN_CUDA: build/lib/libmoects_plugin_faults_cuda.so (tests/fixtures/plugins/plugin_faults_cuda.cu). One worker
# (--jobs 1: it has the GPU alone, so the device-memory check applies); on each T >= 2 case the
# faulty kernels run next to cuda.ep_gather. Checks: cuda.ep_gather passes every case, the faults are
# named (FAIL_CRASH for the mutants; the leak's result says "of device memory allocated; its worker
# was replaced"), cuda.fault.warmup (workspaces taken on a process's first call, kept) passes every
# case with an empty reason, exit 0. Reports in OUTDIR (results.json, run.tap, kernels.log).
set -eu
moects=$1 plugin=$2 out=$3
fail() { echo "resource_faults_cuda: $*" >&2; exit 1; }
a=ep_gather/kimi-k3/tp8/t16 b=ep_gather/regression/block-divides-h/kimi-k3-tp8/t16
c=ep_gather/regression/block-divides-h/kimi-k3-tp8/t1
rc=0
"$moects" run --jobs 1 --out "$out" --kernel-lib "$plugin" --kernel 'cuda.fault.*,cuda.ep_gather' "$a" "$b" "$c" \
    > "$out.tap" 2> "$out.err" || rc=$?
cat "$out.err"
[ $rc -eq 0 ] || { cat "$out.tap"; fail "exit $rc, want 0"; }
python3 - "$out/results.json" "$a" "$b" "$c" <<'PY' || fail "results"
import json, sys
path, a, b, c = sys.argv[1:]
res = {(r["kernel"], r["case"]): r for r in json.load(open(path))["results"]}
for (k, case), r in sorted(res.items()):
    print(f"{k:22} {case:55} {r['verdict']:12} {r['reason']}")
assert len(res) == 15, len(res)
for case in (a, b):
    assert res[("cuda.fault.exhaust", case)]["verdict"] == "FAIL_CRASH"
    assert res[("cuda.fault.sticky", case)]["verdict"] == "FAIL_CRASH"
    assert "of device memory allocated; its worker was replaced" in res[("cuda.fault.leak", case)]["reason"]
for (k, case), r in res.items():
    if k in ("cuda.ep_gather", "cuda.fault.leak", "cuda.fault.warmup") or case == c:
        assert r["verdict"] == "PASS_EXACT", (k, case, r)
    if k == "cuda.fault.warmup":
        assert r["reason"] == "", (k, case, r["reason"])
PY
echo "resource_faults_cuda: ok"
