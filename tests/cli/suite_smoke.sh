#!/bin/sh
# suite_smoke.sh: the CPU part of the conformance suite, as CI runs it, in shards that CTest runs
# side by side (no serial test of minutes), then joined:
#   suite_smoke.sh part MOECTS ROOT WORKDIR i/n   the default run's shard i of n (WORKDIR/part<i>)
#   suite_smoke.sh merge MOECTS ROOT WORKDIR n    moects merge of the n shards into WORKDIR/run
# The merged run (smoke tier, every kernel: CPU kernels run, CUDA kernels SKIP without a GPU) must
# exit 0 (honest kernels pass, every mutant caught in some shard), its TAP must pass through prove,
# and the gate against the committed baseline and the smoke must-pass lists must pass
# (kimi-k3-tp8.txt holds full-tier cases: prove runs it, see docs/usage.md).
set -eu
mode=$1 moects=$2 root=$3 work=$4
mkdir -p "$work"
case $mode in
part)
  i=${5%/*}
  rm -rf "$work/part$i"
  # one job a shard: CTest runs the shards side by side, one per core it was given
  "$moects" run --root "$root" --jobs 1 --shard "$5" --out "$work/part$i" > "$work/part$i.tap"
  ;;
merge)
  parts=
  for i in $(seq 0 $(($5 - 1))); do parts="$parts $work/part$i/results.json"; done
  rm -rf "$work/run"
  # shellcheck disable=SC2086 # the shards' files, one word each
  "$moects" merge "$work/run" $parts --root "$root"
  prove --exec cat "$work/run/run.tap"
  "$moects" gate "$work/run/results.json" --baseline "$root/reports/baseline/results.json" \
      --mustpass "$root"/cases/mustpass/smoke-core.txt "$root"/cases/mustpass/regressions-smoke.txt \
      --summary "$work/gate.md"
  ;;
*) echo "suite_smoke.sh: unknown mode $mode (part or merge)" >&2; exit 2 ;;
esac
