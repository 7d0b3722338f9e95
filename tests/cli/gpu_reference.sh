#!/bin/sh
# gpu_reference.sh: --reference (issue 31) on CPU, through the GPU reference's host stand-ins: the
# stand-in (the element code gpu/cuda/gpuref.cu runs) gives the CPU reference's hashes on ep_gather,
# fp4_gemm and moe_gemm exact_v1 (FP4) and fused_moe's layer recipes, and every re-check is "same"; the broken stand-in
# (one bit flipped) is FAIL_REFERENCE and fails the run. Usage: gpu_reference.sh MOECTS_BINARY
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
# moe_gemm exact_v1 (the bound kernel's reference): MXFP4, NVFP4, W4A8 and W4A16 in every row layout,
# both output dtypes, swizzled scales, NaN scales (FP4: canonical NaN on the GPU path), K tails.
set -f
L='moe_gemm.*/regression/moe-layouts/e5/n256/k384/* moe_gemm.mxfp4/regression/moe-scale-stride/*
   moe_gemm.nvfp4/regression/moe-nan-leak/* moe_gemm.w4a16/regression/moe-k-tail-scales/*'
"$M" run --tier smoke $L --kernel cpu.moe_gemm.dequant_sgemm --out "$T/mc" --reference cpu >/dev/null 2>&1 ||
    fail "cpu run moe_gemm"
"$M" run --tier smoke $L --kernel cpu.moe_gemm.dequant_sgemm --out "$T/ms" --reference test-standin >/dev/null 2>&1 ||
    fail "stand-in run moe_gemm"
"$M" hashes "$T/mc/results.json" "$T/ms/results.json" 2>&1 | grep -q ' 0 differ;' || fail "hashes differ on moe_gemm"
[ "$(grep -o '"reference": "gpu"' "$T/ms/results.json" | wc -l)" -ge 40 ] || fail "moe_gemm: too few GPU references"
grep -q '"reference_check": "differs"' "$T/ms/results.json" && fail "a re-check differs on moe_gemm"
if "$M" run --tier smoke 'moe_gemm.nvfp4/regression/moe-layouts/e5/n256/k384/masked/f32' --kernel \
    cpu.moe_gemm.dequant_sgemm --out "$T/mb" --reference test-broken >/dev/null 2>&1; then
    fail "the broken stand-in passed on moe_gemm"
fi
grep -q '"verdict": "FAIL_REFERENCE"' "$T/mb/results.json" || fail "no FAIL_REFERENCE on moe_gemm"

# fused_moe: seven layer recipes (seven cpu.fused_moe kernels, FK: every w13 order, mid bf16/fp8_token/fp8_128/mxfp8,
# weight at gemm2/act/combine, a bounded recipe's exact point) on BF16, MXFP4 and FP8_128 weights; the
# NaN case takes the CPU path (a NaN output's payload is the CPU's).
# (named: the NVFP4, W4A8 and situ kernels refuse every case here, which fails a run)
FK=cpu.fused_moe.vllm,cpu.fused_moe.cutlass,cpu.fused_moe.gpt_oss,cpu.fused_moe.deepgemm,cpu.fused_moe.mxfp8
FK=$FK,cpu.fused_moe.vllm_fp8,cpu.fused_moe.fast
L='fused_moe.bf16/gpt-oss-20b/tp16/t4/smoke fused_moe.fp8_128/deepseek-v3.2/tp16/t1/smoke
   fused_moe.mxfp4/deepseek-v4-flash/tp16/t2/smoke fused_moe.mxfp4/kimi-k2/tp16/t1/smoke-nan'
"$M" run --tier smoke $L --kernel "$FK" --out "$T/fc" --reference cpu >/dev/null 2>&1 || fail "cpu run fused_moe"
"$M" run --tier smoke $L --kernel "$FK" --out "$T/fs" --reference test-standin >/dev/null 2>&1 ||
    fail "stand-in run fused_moe"
"$M" hashes "$T/fc/results.json" "$T/fs/results.json" 2>&1 | grep -q ' 0 differ;' || fail "hashes differ on fused_moe"
[ "$(grep -o '"reference": "gpu"' "$T/fs/results.json" | wc -l)" -ge 13 ] || fail "fused_moe: too few GPU references"
grep -q '"reference_check": "differs"' "$T/fs/results.json" && fail "a re-check differs on fused_moe"
if "$M" run --tier smoke 'fused_moe.bf16/gpt-oss-20b/tp16/t4/smoke' --kernel cpu.fused_moe.gpt_oss --out "$T/fb" \
    --reference test-broken >/dev/null 2>&1; then
    fail "the broken stand-in passed on fused_moe"
fi
grep -q '"verdict": "FAIL_REFERENCE"' "$T/fb/results.json" || fail "no FAIL_REFERENCE on fused_moe"
echo "ok: --reference stand-in identical, broken stand-in FAIL_REFERENCE"
