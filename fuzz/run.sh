#!/usr/bin/env bash
# fuzz/run.sh BUILD_DIR [SECONDS] [TARGET...]: run each libFuzzer target of a -DMOECTS_FUZZ=ON build
# (all of fuzz/CMakeLists.txt's MOECTS_FUZZ_TARGETS, or those named) for SECONDS (default 60) on
# one core, from a working corpus in BUILD_DIR/fuzz-corpus/TARGET seeded with the target's seed
# files, fuzz/corpus/TARGET and the kept crash inputs fuzz/crashes/TARGET. One line per target;
# exit 1 when a target finds a crash, leak or broken rule: its input is under
# BUILD_DIR/fuzz-artifacts/TARGET/ (fuzz/README.md says how to keep it as a regression test).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:?usage: fuzz/run.sh BUILD_DIR [SECONDS] [TARGET...]}" && pwd)
secs=${2:-60}
shift $(($# < 2 ? $# : 2))
mapfile -t entries < <(sed -n 's/^  "\([a-z_]*\):[a-z_.]*:\([^"]*\)".*$/\1:\2/p' "$root/fuzz/CMakeLists.txt")
((${#entries[@]})) || { echo "fuzz/run.sh: no targets in fuzz/CMakeLists.txt" >&2; exit 2; }
failed=0
for entry in "${entries[@]}"; do
  name=${entry%%:*} seeds=${entry#*:}
  if (($#)) && [[ " $* " != *" $name "* ]]; then continue; fi
  work=$build/fuzz-corpus/$name art=$build/fuzz-artifacts/$name/ log=$build/fuzz-logs/$name.log
  mkdir -p "$work" "$art" "$(dirname "$log")"
  for s in ${seeds//,/ } fuzz/corpus/$name fuzz/crashes/$name; do
    if [ -d "$root/$s" ]; then
      find "$root/$s" -maxdepth 1 -type f ! -name '*.err' -exec cp -f {} "$work/" \;
    elif [ -f "$root/$s" ]; then
      cp -f "$root/$s" "$work/"
    fi
  done
  dict=()
  case $name in model|hf_config|regressions|results) dict=(-dict="$root/fuzz/json.dict") ;; esac
  if "$build/bin/fuzz_$name" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$art" "${dict[@]}" "$work" > "$log" 2>&1; then
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
    echo "fuzz_$name: ${secs} s, ${runs:-?} inputs, $cov, corpus $(ls "$work" | wc -l) files: no crash"
  else
    failed=1
    echo "fuzz_$name: FAILED (log $log); inputs kept:"
    ls -1 "$art" | sed "s|^|  $art|"
    grep -m1 -A12 -E '^==[0-9]+==ERROR|^fuzz: |runtime error|SUMMARY' "$log" || tail -20 "$log"
  fi
done
exit $failed
