#!/bin/bash
# h200_selftest.sh: on the GPU machine, from the repository root, with the built binaries in $1
# (default build-cuda/bin): environment facts, moects_gpu_selftest (every CUDA kernel and mutant
# against the references), --perf, and compute-sanitizer memcheck of the real kernels.
# Logs go to $OUT (default /tmp/moects-h200). Usage: tools/h200_selftest.sh [bindir] [steps]
# steps: any of env,test,testws,perf,tiles,memcheck,ncu,sass,sassfull (default env,test,testws,perf,tiles,memcheck).
B=${1:-build-cuda/bin}
STEPS=${2:-env,test,testws,perf,tiles,memcheck}
OUT=${OUT:-/tmp/moects-h200}
mkdir -p "$OUT"
T=$B/moects_gpu_selftest
has() { case ",$STEPS," in *",$1,"*) return 0 ;; esac; return 1; }
if has env; then
  { nvidia-smi; echo; ls /usr/local/cuda*/lib64 2>&1 | grep -i cublas; ldconfig -p | grep -i cublas;
    compute-sanitizer --version; } > "$OUT/env.txt" 2>&1
  head -20 "$OUT/env.txt"; grep -i -E "cublas|sanitizer|Version" "$OUT/env.txt"
fi
if has test; then
  echo "== selftest"; $T > "$OUT/selftest.txt" 2>&1; echo "rc=$?" >> "$OUT/selftest.txt"
  grep -v "^PASS" "$OUT/selftest.txt"
fi
if has testws; then # every FP4 kernel and mutant again with the fp8ws path forced on every shape
  echo "== selftest, MOECTS_FP4_TILE=fp8ws"; MOECTS_FP4_TILE=fp8ws $T --kernel fp4_gemm > "$OUT/selftest_fp8ws.txt" 2>&1
  echo "rc=$?" >> "$OUT/selftest_fp8ws.txt"; grep -v "^PASS" "$OUT/selftest_fp8ws.txt" | grep -v "^FAIL cuda.mutant"
fi
if has perf; then
  echo "== perf"; $T --perf-only 2>&1 | tee "$OUT/perf.txt"
fi
if has tiles; then
  for t in fp8ws 128x128 128x64 64x64; do echo "== perf fp4 tile $t"; MOECTS_FP4_TILE=$t $T --perf-fp4-only 2>&1 | grep blockwise; done | tee "$OUT/tiles.txt"
fi
if has memcheck; then
  echo "== memcheck"
  for k in cuda.ep_gather cuda.fp4_gemm.blockwise cuda.fp4_gemm.dequant_cublas fp8ws:cuda.fp4_gemm.blockwise; do
    case $k in fp8ws:*) k=${k#fp8ws:}; export MOECTS_FP4_TILE=fp8ws ;; esac
    timeout 300 compute-sanitizer --tool memcheck --leak-check no --error-exitcode 9 $T --no-fork --no-large --kernel $k \
      > "$OUT/mc.tmp" 2>&1
    echo "$k rc=$? $(grep -c ^PASS "$OUT/mc.tmp") PASS, $(grep -c ^FAIL "$OUT/mc.tmp") FAIL; $(grep -E 'ERROR SUMMARY' "$OUT/mc.tmp")"
    cat "$OUT/mc.tmp" >> "$OUT/memcheck_log.txt"; rm -f "$OUT/mc.tmp"; unset MOECTS_FP4_TILE
  done | tee "$OUT/memcheck.txt"
fi
if has ncu; then # stall reasons of the blockwise MXFP4 kernel (gemm1 shape) and of ep_gather (DSv3 T=4096)
  S="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats --section SourceCounters"
  timeout 240 ncu --clock-control none -k regex:fp4_gemm_kernel --launch-skip 10 --launch-count 1 $S $T --perf-fp4-only > "$OUT/ncu.txt" 2>&1
  timeout 240 ncu --clock-control none -k regex:ep_gather_kernel --launch-skip 5 --launch-count 1 $S $T --perf-only >> "$OUT/ncu.txt" 2>&1
  grep -E "Duration|Throughput|Warp Cycles Per Issued|Stall|Achieved Occupancy|Theoretical Occupancy|Registers|Block Limit|Issued Ipc|No Eligible|One or More" "$OUT/ncu.txt" | head -80
fi
if has sass; then # the real kernels' SASS and an opcode histogram per function
  cuobjdump --dump-sass "$T" 2>&1 | awk '/Function : /{keep = ($0 ~ /moects_fp4_exact.*ELi0EE|ep_gather_kernelIiLb1ELi8ELi0E/)} keep' > "$OUT/sass.tmp"
  awk '/Function : /{f=$3} /^ +\/\*[0-9a-f]+\*\/ /{op=$2; if (op ~ /^@/) op=$3; sub(/\..*/, "", op); n[f" "op]++} END{for (k in n) print n[k], k}' "$OUT/sass.tmp" | sort -k2,2 -k1,1nr > "$OUT/sass_ops.txt"
  case ",$STEPS," in *",sassfull,"*) mv "$OUT/sass.tmp" "$OUT/sass.txt" ;; *) rm -f "$OUT/sass.tmp" ;; esac
  grep -E "MMA|LDSM|LDGSTS|FFMA|FMUL|PRMT" "$OUT/sass_ops.txt" | head -60
fi
