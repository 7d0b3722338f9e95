#!/bin/sh
# gpu_reference.sh: --reference (issue 31) on CPU, through the GPU reference's host stand-ins: the
# stand-in (the element code gpu/cuda/gpuref.cu runs) gives the CPU reference's hashes on ep_gather and
# fp4_gemm exact_v1 and every re-check is "same"; the broken stand-in (one bit flipped) is FAIL_REFERENCE
# and fails the run. Usage: gpu_reference.sh MOECTS_BINARY
set -u
M=$1
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
for S in 'ep_gather/deepseek-v3/*:cpu.ep_gather*' 'fp4_gemm.mxfp4/deepseek-v3/*:cpu.fp4_gemm.dequant_sgemm'; do
    G=${S%%:*} K=${S#*:}
    "$M" run --tier smoke "$G" --kernel "$K" --out "$T/c" --reference cpu >/dev/null 2>&1 || fail "cpu run $G"
    "$M" run --tier smoke "$G" --kernel "$K" --out "$T/s" --reference test-standin >/dev/null 2>&1 || fail "stand-in run $G"
    "$M" hashes "$T/c/results.json" "$T/s/results.json" 2>&1 | grep -q ' 0 differ;' || fail "hashes differ on $G"
    grep -q '"reference": "gpu"' "$T/s/results.json" || fail "no GPU reference on $G"
    grep -q '"reference_check": "differs"' "$T/s/results.json" && fail "a re-check differs on $G"
    grep -q '"sample_seed"' "$T/s/results.json" || fail "no sample seed"
    if "$M" run --tier smoke "$G" --kernel "$K" --out "$T/b" --reference test-broken >/dev/null 2>&1; then
        fail "the broken stand-in passed on $G"
    fi
    grep -q '"verdict": "FAIL_REFERENCE"' "$T/b/results.json" || fail "no FAIL_REFERENCE on $G"
done
echo "ok: --reference stand-in identical, broken stand-in FAIL_REFERENCE"
