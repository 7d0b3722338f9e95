#!/usr/bin/env bash
# h200_run.sh: the conformance run on a GPU host (an H200 here), from the repository root.
#   tools/h200_run.sh BIN [OUTDIR] [STEPS]
# BIN: a moects binary built with CUDA (sm_90a). OUTDIR (default reports/h200) receives:
#   machine.txt; smoke/ (smoke tier, every kernel: run.tap, results.json, summary.md),
#   full/ (full tier, CUDA kernels), memcheck.txt (compute-sanitizer memcheck of the honest CUDA
#   kernels on the smoke cases that are not also in the large tier), perf/ (--perf on prefill shapes),
#   coverage of the full run, initcheck.txt (compute-sanitizer initcheck on the same cases: poison
#   and canaries are initialised, so initcheck sees reads of uninitialised scratch or of bytes past
#   every guard; issue 13), and status.txt (each step's exit status and seconds).
# STEPS: comma list of smoke,paths,full0..full<NF-1>,memcheck,initcheck,perf,moe* (default below, with 4 full shards);
# paths: each cuda.fp4_gemm.blockwise path (MOECTS_FP4_TILE) forced on the FP4 smoke cases;
# each step has a time limit. Steps run only when named (issue 15): large (the large tier, > 2^31
# elements in one buffer, CUDA kernels: the built-ins pass, the int32 mutants fail), racecheck
# (compute-sanitizer over the smoke cases memcheck takes; racecheck on every 4th of them),
# initcheck0..initcheck<NI-1> (initcheck over the whole smoke tier, grouped kernels included, in
# MOECTS_INITCHECK_PARTS parts, default 2), faults (tests/cli/resource_faults_cuda.sh with
# MOECTS_FAULTS_LIB, default the plugin beside BIN's build: ../lib/libmoects_plugin_faults_cuda.so). The smoke run's results.json carries the input
# and reference hashes: `moects hashes` compares them with a CPU run of the same cases elsewhere.
# The grouped MoE GEMM (moe_gemm) steps (moeself,moesan,moecheck,moeperf are in the default list,
# moefull0..moefull<NM-1> run only when named): moeself: moects_gpu_selftest (beside BIN) on the CUDA
# moe_gemm kernels and mutants against moects__ref_moe_gemm (small shapes, no harness cases needed);
# moesan: the same for the honest kernels under compute-sanitizer memcheck and initcheck; moecheck:
# memcheck and initcheck (racecheck on every 4th case) of the CUDA moe_gemm kernels on the moe_gemm
# smoke cases of the harness;
# moeperf: the selftest's grouped --perf (DeepSeek-V3 / Kimi K3 prefill routing, TP8 and EP8, beside
# cuBLAS BF16 grouped GEMM); moefullI: shard I of MOECTS_MOE_SHARDS (default 2) of the full tier's
# moe_gemm cases with the honest CUDA grouped kernels (the mutants are judged on the smoke tier; merged
# into moefull/ when all are there; the fullI steps run them too, among every other case).
# Narrower steps for a short device budget: MOECTS_SMOKE_KERNELS (a --kernel glob for the smoke step,
# e.g. 'cuda.*'; default every kernel), MOECTS_INITCHECK_EVERY (initcheck on every Nth smoke case,
# default 1; MOECTS_RACECHECK_EVERY likewise, default 4), MOECTS_MOECHECK_TOOLS (default "memcheck
# initcheck racecheck"), MOECTS_LARGE_JOBS (workers of the large step, default 8).
# A step left for a later call (device calls are limited to 10 minutes) reuses OUTDIR; a fullI or
# moefullI step cut by its time limit leaves its results in OUTDIR/<step>/results.journal, and the same
# step in a later call continues it (moects run --resume); one finished there is skipped.
# MOECTS_PACK=FILE: after every step all of OUTDIR is packed into FILE (.tar.gz, written to FILE.tmp
# and renamed; the host returns at most 8 files a call, 16 MiB each: a larger pack comes as FILE.00,
# FILE.01, ...), so a cut call returns what finished: put it back with tools/h200_unpack.sh FILE
# OUTDIR before the next call (not tar over OUTDIR).
set -u
B=${1:?usage: tools/h200_run.sh BIN [OUTDIR] [STEPS]}
D=${2:-reports/h200}
STEPS=${3:-smoke,paths,full0,full1,full2,full3,memcheck,initcheck,perf,moeself,moesan,moecheck,moeperf}
SELFTEST=$(dirname "$B")/moects_gpu_selftest
export MOECTS_ROOT=$PWD
# One worker per CPU core (the runner spreads them over the GPUs): input generation and the
# references are CPU work, and a lone worker left 15 of 16 cores idle (the full tier did not finish a
# quarter in 380 s).
JOBS=${MOECTS_JOBS:-$(nproc)}
mkdir -p "$D"
# A report kept as NAME.gz in the tree (tools/h200_unpack.sh) is restored to NAME for this call.
for z in "$D"/*.gz "$D"/*/*.gz; do [ -e "$z" ] && [ ! -e "${z%.gz}" ] && gunzip -k "$z"; done
has() { case ",$STEPS," in *",$1,"*) return 0 ;; esac; return 1; }
# MOECTS_BUDGET_S: seconds this call may take in all (a device call's limit); a step's limit is cut
# to what is left (less 20 s to pack the results), and a step with under 30 s left is skipped.
BUDGET=${MOECTS_BUDGET_S:-100000}
step() { # step NAME LIMIT_S CMD... ; stdout to $D/NAME.log
  local name=$1 lim=$2 t0=$SECONDS; shift 2
  local left=$((BUDGET - SECONDS - 20))
  [ "$left" -lt "$lim" ] && lim=$left
  if [ "$lim" -lt 30 ]; then echo "$name skipped: ${left}s left" | tee -a "$D/status.txt"; return; fi
  timeout "$lim" "$@" > "$D/$name.log" 2> "$D/$name.err"
  echo "$name rc=$? seconds=$((SECONDS - t0))" | tee -a "$D/status.txt"
  pack
}
# A pack over MOECTS_PACK_PART bytes (default 15 MiB: the host returns files of 16 MiB at most) is
# split into FILE.00, FILE.01, ... instead; h200_unpack.sh FILE joins them.
PART=${MOECTS_PACK_PART:-15728640}
pack() { # MOECTS_PACK=FILE: OUTDIR into FILE (FILE itself left out when it is inside OUTDIR)
  [ -n "${MOECTS_PACK:-}" ] || return 0
  tar -czf "$MOECTS_PACK.tmp" --exclude="$(basename "$MOECTS_PACK")*" -C "$(dirname "$D")" "$(basename "$D")" ||
    return
  rm -f "$MOECTS_PACK" "$MOECTS_PACK".[0-9][0-9]
  if [ "$(stat -c %s "$MOECTS_PACK.tmp")" -gt "$PART" ]; then
    split -d -a 2 -b "$PART" "$MOECTS_PACK.tmp" "$MOECTS_PACK." && rm -f "$MOECTS_PACK.tmp"
  else
    mv -f "$MOECTS_PACK.tmp" "$MOECTS_PACK"
  fi
}
# od: --out DIR, or --resume DIR when DIR holds the journal of a run that was cut; finished DIR: its
# reports are there and no journal (a step done in an earlier call is not run again)
outdir() { od=(--out "$1"); if [ -e "$1/results.journal" ]; then od=(--resume "$1"); fi; }
finished() { [ -e "$1/results.json" ] && [ ! -e "$1/results.journal" ] && echo "$2 done earlier" >> "$D/status.txt"; }
{ echo "date: $(date -u +%FT%TZ)"; echo "commit: ${MOECTS_COMMIT:-unknown}"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  echo "cpus: $(nproc)"; compute-sanitizer --version | tail -1; } > "$D/machine.txt" 2>&1
if has smoke; then # cut: continued with --resume; done in an earlier call: not run again
  sk=(); [ -n "${MOECTS_SMOKE_KERNELS:-}" ] && sk=(--kernel "$MOECTS_SMOKE_KERNELS") # e.g. 'cuda.*'
  outdir "$D/smoke"
  if ! finished "$D/smoke" smoke; then
    step smoke 420 "$B" run --tier smoke --jobs "$JOBS" "${sk[@]}" "${od[@]}"
    prove --exec cat "$D/smoke/run.tap" > "$D/smoke.prove" 2>&1; echo "smoke prove rc=$?" >> "$D/status.txt"
  fi
fi
# The full tier in NF shards (MOECTS_FULL_SHARDS, default 4; each a step fullI that fits one
# 10-minute device call with room to spare), merged once every shard's results.json is there.
NF=${MOECTS_FULL_SHARDS:-4}
parts=()
for ((i = 0; i < NF; i++)); do
  outdir "$D/full$i"
  has full$i && ! finished "$D/full$i" full$i && step full$i 540 "$B" run --tier full --jobs "$JOBS" --kernel 'cuda.*' --shard $i/$NF "${od[@]}"
  parts+=("$D/full$i/results.json")
done
if ls "${parts[@]}" > /dev/null 2>&1; then
  "$B" merge "$D/full" "${parts[@]}" > "$D/full-merge.log" 2>&1; echo "full merge rc=$?" >> "$D/status.txt"
  "$B" coverage "$D/full/results.json" --out "$D/full" > /dev/null
  prove --exec cat "$D/full/run.tap" > "$D/full.prove" 2>&1; echo "full prove rc=$?" >> "$D/status.txt"
fi
# every smoke case but those also in the large tier (> 2^31 elements: hours under compute-sanitizer)
smoke_cases() { "$B" list -l --tier smoke | awk -F'\t' '$2 !~ /large/ {print $1}'; }
if has memcheck; then
  smoke_cases > "$D/memcheck-cases.txt"
  step memcheck 540 compute-sanitizer --tool memcheck --target-processes all --leak-check no \
    --error-exitcode 9 "$B" run --cases "$D/memcheck-cases.txt" --kernel 'cuda.[ef]*' --jobs "$JOBS" \
    --out "$D/memcheck"
  grep -E "ERROR SUMMARY|Invalid|========= [A-Z]" "$D/memcheck.log" "$D/memcheck.err" | sort | uniq -c \
    > "$D/memcheck.txt"
fi
# initcheck0..initcheck<NI-1> (MOECTS_INITCHECK_PARTS, default 2): the whole smoke tier under initcheck
# in parts that each fit a device call, part I every case with (line - 1) % NI == I, grouped kernels too.
NI=${MOECTS_INITCHECK_PARTS:-2}
for tool in initcheck racecheck $(for ((i = 0; i < NI; i++)); do echo initcheck$i; done); do
  has $tool || continue
  every=${MOECTS_INITCHECK_EVERY:-1} from=1 kern='cuda.[ef]*'
  [ $tool = racecheck ] && every=${MOECTS_RACECHECK_EVERY:-4}
  case $tool in initcheck?*) every=$NI from=$((${tool#initcheck} + 1)) kern='cuda.[ef]*,cuda.moe_gemm.*' ;; esac
  smoke_cases | awk -v every="$every" -v from="$from" 'NR % every == from % every' > "$D/$tool-cases.txt"
  step $tool 540 compute-sanitizer --tool ${tool%%[0-9]*} --target-processes all --error-exitcode 9 "$B" run \
    --cases "$D/$tool-cases.txt" --kernel "$kern" --jobs "$JOBS" --out "$D/$tool"
  grep -E "ERROR SUMMARY|========= [A-Z]" "$D/$tool.log" "$D/$tool.err" | sort | uniq -c > "$D/$tool.txt"
done
# large: every large ep_gather case and, per moe_gemm (format, row layout, gemm), the one with the
# fewest tokens (the whole large tier's references take hours of CPU: the experts' weights alone pass
# 2^31 elements); MOECTS_LARGE_JOBS workers (default 8: up to ~10 GB of host memory each).
if has large; then
  "$B" list --tier large | awk -F'\t' '{print $1}' | awk -F/ '/^ep_gather/ {print; next}
    { key = $1 "/" $4 "/" $5; t = substr($NF, 2) + 0; if (!(key in best) || t < bt[key]) { best[key] = $0; bt[key] = t } }
    END { for (k in best) print best[k] }' | sort > "$D/large-cases.txt"
  step large 540 "$B" run --cases "$D/large-cases.txt" --jobs "${MOECTS_LARGE_JOBS:-8}" --kernel 'cuda.*' \
    --out "$D/large"
fi
if has faults; then
  step faults 300 bash tests/cli/resource_faults_cuda.sh "$B" \
    "${MOECTS_FAULTS_LIB:-$(dirname "$B")/../lib/libmoects_plugin_faults_cuda.so}" "$D/faults"
fi
if has paths; then # every FP4 path forced on the FP4 smoke cases: the default picks one per shape
  mkdir -p "$D/paths"
  for t in 64x64 128x64 128x128 fp8ws; do
    MOECTS_FP4_TILE=$t step paths-$t 120 "$B" run --tier smoke --jobs "$JOBS" --kernel 'cuda.*fp4_gemm*' \
      --out "$D/paths/$t" 'fp4_gemm*'
  done
fi
if has perf; then
  step perf 300 "$B" run --perf --tier full --kernel 'cuda.[ef]*' --out "$D/perf" \
    'ep_gather/deepseek-v3/tp8/t4096' 'ep_gather/deepseek-v3/tp8/t8192' 'ep_gather/deepseek-v3/ep8/t4096' \
    'ep_gather/kimi-k3/tp8/t4096' 'ep_gather/kimi-k3/tp8/t8192' \
    'fp4_gemm.*/deepseek-v3/tp8/gemm?/m4096' 'fp4_gemm.*/kimi-k3/tp8/gemm?/m4096'
fi
if has moeself; then
  step moeself 240 "$SELFTEST" --kernel moe_gemm
  grep -E "^(FAIL|summary|  cuda)|SELFTEST" "$D/moeself.log" > "$D/moeself.txt"
fi
if has moesan; then
  for tool in memcheck initcheck; do
    step moesan-$tool 240 compute-sanitizer --tool $tool --target-processes all --error-exitcode 9 \
      "$SELFTEST" --kernel cuda.moe_gemm.
  done
  grep -hE "ERROR SUMMARY|Invalid|Uninitialized|SELFTEST" "$D"/moesan-*.log "$D"/moesan-*.err | sort | uniq -c \
    > "$D/moesan.txt"
fi
if has moecheck; then
  "$B" list -l --tier smoke 'moe_gemm*' | awk -F'\t' '$2 !~ /large/ {print $1}' > "$D/moecheck-cases.txt"
  awk 'NR % 4 == 1' "$D/moecheck-cases.txt" > "$D/moecheck-racecheck-cases.txt" # racecheck: every 4th
  for tool in ${MOECTS_MOECHECK_TOOLS:-memcheck initcheck racecheck}; do
    list="$D/moecheck-cases.txt"; [ $tool = racecheck ] && list="$D/moecheck-racecheck-cases.txt"
    step moecheck-$tool 300 compute-sanitizer --tool $tool --target-processes all --error-exitcode 9 \
      "$B" run --cases "$list" --kernel 'cuda.moe_gemm.*' --jobs "$JOBS" --out "$D/moecheck-$tool"
  done
  grep -hE "ERROR SUMMARY|Invalid|Uninitialized|========= [A-Z]" "$D"/moecheck-*.log "$D"/moecheck-*.err | sort | \
    uniq -c > "$D/moecheck.txt"
fi
if has moeperf; then
  step moeperf 300 "$SELFTEST" --perf-moe-only
fi
NM=${MOECTS_MOE_SHARDS:-2}
mparts=()
for ((i = 0; i < NM; i++)); do
  outdir "$D/moefull$i"
  has moefull$i && ! finished "$D/moefull$i" moefull$i && step moefull$i 540 "$B" run --tier full --jobs "$JOBS" --kernel 'cuda.moe_gemm.*' \
    --shard $i/$NM "${od[@]}" 'moe_gemm*'
  mparts+=("$D/moefull$i/results.json")
done
if ls "${mparts[@]}" > /dev/null 2>&1; then
  "$B" merge "$D/moefull" "${mparts[@]}" > "$D/moefull-merge.log" 2>&1; echo "moefull merge rc=$?" >> "$D/status.txt"
  prove --exec cat "$D/moefull/run.tap" > "$D/moefull.prove" 2>&1; echo "moefull prove rc=$?" >> "$D/status.txt"
fi
pack
