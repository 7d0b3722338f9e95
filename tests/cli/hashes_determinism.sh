#!/bin/sh
# hashes_determinism.sh MOECTS ROOT WORKDIR FULL_RESULTS: the input and reference hashes of
# results.json (harness/report/hashes.c) are the same for a case run alone, inside the full smoke run
# (FULL_RESULTS: suite_smoke's, the default run), in a shard, with 1 and with several OpenBLAS
# threads per reference, and under every OpenBLAS core type this CPU runs (OPENBLAS_CORETYPE; the
# core OpenBLAS picked is read from its OPENBLAS_VERBOSE=2 line). Each comparison is
# `moects hashes`, which must exit 0 (every common hash agrees, some reference compared). Then
# `moects hashes` must catch a changed hash and refuse files without hashes.
set -eu
moects=$1 root=$2 work=$3 full=$4
rm -rf "$work" && mkdir -p "$work" && cd "$work"
fail() { echo "hashes_determinism: $*" >&2; exit 1; }
# A smoke subset: both FP4 formats, both recipes (the honest CPU kernels: blockwise_v1, exact_v1
# through the tolerance kernel), linear and swizzled scales, exact, adversarial and NaN data, the
# largest smoke FP4 case (Grok-1 gemm1, N 8192: its reference is split over the threads), ep_gather.
set -- 'fp4_gemm.*/grok-1/tp8/gemm1/m16' 'fp4_gemm.*/kimi-k3/tp8/*' 'ep_gather/kimi-k3/tp8/t16' \
       'fp4_gemm.*/regression/scale-format/kimi-k3/gemm1/*' 'ep_gather/regression/stale-ids/ep8/*'
kernels='cpu.[ef]*' # the honest CPU kernels (cpu.mutant.* left out)
same() { # same A B WHAT: moects hashes agrees
    "$moects" hashes "$1" "$2" > cmp.txt || { cat cmp.txt; fail "$3: hashes differ from $1"; }
    grep -q ' 0 differ;' cmp.txt || fail "$3: $(cat cmp.txt)"
    echo "$3: $(tail -1 cmp.txt)"
}
threads() { # threads RESULTS: the ref_threads of the FP4 results that computed a reference (a task that
    # computed only per-element bounds, for a bounded kernel, records none)
    python3 -c 'import json,sys
r=json.load(open(sys.argv[1]))["results"]
print(" ".join(sorted({str(x["timing"]["ref_threads"]) for x in r if x["op"]=="fp4_gemm" and x["timing"]["ref_threads"]>0})))' "$1"
}
[ -s "$full" ] || fail "$full: the full smoke run's results are missing (suite_smoke makes them)"
ncpu=$(nproc)

# alone: three cases, each in a run of its own
for id in fp4_gemm.nvfp4/grok-1/tp8/gemm1/m16 fp4_gemm.mxfp4/kimi-k3/tp8/gemm2/m16/swizzled ep_gather/kimi-k3/tp8/t16; do
    "$moects" run --root "$root" --out alone --kernel "$kernels" "$id" > /dev/null || fail "run $id alone"
    same "$full" alone/results.json "alone $id"
done
# a shard of the subset
"$moects" run --root "$root" --out shard --kernel "$kernels" --shard 1/3 "$@" > /dev/null || fail "shard run"
same "$full" shard/results.json "shard 1/3"
# one thread per reference (every case one slot), then all threads on one worker
MOECTS_BIG_CASE_FLOPS=1e30 "$moects" run --root "$root" --out t1 --kernel "$kernels" --jobs "$ncpu" "$@" > /dev/null ||
    fail "run with 1 thread"
[ "$(threads t1/results.json)" = 1 ] || fail "want 1 reference thread, got $(threads t1/results.json)"
same "$full" t1/results.json "1 OpenBLAS thread"
if [ "$ncpu" -ge 2 ]; then
    "$moects" run --root "$root" --out tn --kernel "$kernels" --jobs 1 "$@" > /dev/null || fail "run with $ncpu threads"
    [ "$(threads tn/results.json)" = "$ncpu" ] || fail "want $ncpu reference threads, got $(threads tn/results.json)"
    same t1/results.json tn/results.json "$ncpu OpenBLAS threads"
fi
# every OpenBLAS core type this CPU can run (as in tests/unit/test_ref_fp4_invariance.c)
cores="Haswell Zen Sandybridge Nehalem Prescott Core2 Barcelona Atom"
grep -qw avx512f /proc/cpuinfo && cores="$cores SkylakeX"
grep -qw avx512_bf16 /proc/cpuinfo && cores="$cores Cooperlake"
for c in $cores; do
    OPENBLAS_VERBOSE=2 OPENBLAS_CORETYPE=$c "$moects" run --root "$root" --out "core" --kernel "$kernels" "$@" \
        > /dev/null 2> core.err || { cat core.err; fail "run under core $c"; }
    grep -q "^Core: $c\$" core.err || fail "OPENBLAS_CORETYPE=$c: OpenBLAS ran $(grep '^Core:' core.err)"
    same "$full" core/results.json "OpenBLAS core $c"
done

# moects hashes itself: a changed reference hash is a difference naming the case (exit 1)
python3 - t1/results.json changed.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
r = next(x for x in d["results"] if x["case"] == "fp4_gemm.nvfp4/grok-1/tp8/gemm1/m16" and "reference_xxh64" in x)
r["reference_xxh64"] = "%016x" % (int(r["reference_xxh64"], 16) ^ 1)
json.dump(d, open(sys.argv[2], "w"))
PY
rc=0; "$moects" hashes t1/results.json changed.json > cmp.txt || rc=$?
[ $rc -eq 1 ] || fail "a changed hash: exit $rc, want 1"
grep -q '^DIFFER within changed.json: fp4_gemm.nvfp4/grok-1/tp8/gemm1/m16: reference fp4_gemm\.' cmp.txt ||
    grep -q '^DIFFER fp4_gemm.nvfp4/grok-1/tp8/gemm1/m16: reference fp4_gemm\.' cmp.txt || { cat cmp.txt; fail "difference not named"; }
# files without hashes (written before they existed): nothing compared, exit 1
rc=0; "$moects" hashes "$root/reports/baseline/results.json" t1/results.json > cmp.txt || rc=$?
[ $rc -eq 1 ] && grep -q 'nothing compared' cmp.txt || { cat cmp.txt; fail "baseline without hashes: exit $rc"; }
rc=0; "$moects" hashes t1/results.json > /dev/null 2>&1 || rc=$?
[ $rc -eq 2 ] || fail "one file: exit $rc, want 2"
echo "hashes_determinism: ok"
