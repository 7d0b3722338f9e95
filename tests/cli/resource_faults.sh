#!/bin/sh
# resource_faults.sh MOECTS PLUGIN WORKDIR: a kernel that leaks host memory, takes all of it, or maps
# all the address space costs only its own case (issue 15): run under a 4 GB address-space limit
# (ulimit -v; the kernels touch a page per block, so the machine's memory is not used), with one
# worker, the faulty kernels of tests/fixtures/plugins/plugin_faults.c run before the honest plugin.ep_gather on each
# case. Each fault is named in its result and the kernel log, its worker is replaced, and every
# later task passes: the honest kernel on every case, the faulty ones on the T = 1 case.
set -eu
moects=$1 plugin=$2 work=$3
rm -rf "$work" && mkdir -p "$work" && cd "$work"
fail() { echo "resource_faults: $*" >&2; exit 1; }
a=ep_gather/kimi-k3/tp8/t16 b=ep_gather/regression/block-divides-h/kimi-k3-tp8/t16
c=ep_gather/regression/block-divides-h/kimi-k3-tp8/t1
rc=0
(ulimit -v 4000000 && exec "$moects" run --jobs 1 --out out --kernel-lib "$plugin" --kernel 'plugin.*' "$a" "$b" "$c" \
    > run.tap 2> err.txt) || rc=$?
[ $rc -eq 0 ] || { cat run.tap err.txt; fail "exit $rc, want 0 (honest kernels pass, the exhausting mutant caught)"; }
python3 - "$a" "$b" "$c" <<'PY' || fail "results"
import json, sys
a, b, c = sys.argv[1:]
res = {(r["kernel"], r["case"]): r for r in json.load(open("out/results.json"))["results"]}
assert len(res) == 12, len(res)
for case in (a, b):
    for k, verdict, note in (("plugin.fault.exhaust", "FAIL_CRASH", "MiB of host memory allocated; its worker was replaced"),
                             ("plugin.fault.leak", "PASS_EXACT", "run() kept 256 MiB of host memory allocated; its worker was replaced"),
                             ("plugin.fault.mmap", "PASS_EXACT", "MiB of host address space mapped; its worker was replaced")):
        r = res[(k, case)]
        assert r["verdict"] == verdict and note in r["reason"], (k, case, r["verdict"], r["reason"])
    assert res[("plugin.fault.exhaust", case)]["reason"].startswith("run() returned -1; run() kept ")
for (k, case), r in res.items():
    if k == "plugin.ep_gather" or case == c:
        assert r["verdict"] == "PASS_EXACT" and r["reason"] == "", (k, case, r)
PY
[ "$(grep -c 'its worker was replaced$' out/kernels.log)" -eq 6 ] || { cat out/kernels.log; fail "kernel log: want 6 lines"; }
grep -qxF "moects: plugin.fault.leak on $a: run() kept 256 MiB of host memory allocated; its worker was replaced" \
    out/kernels.log || { cat out/kernels.log; fail "kernel log: leak line"; }
echo "resource_faults: ok"
