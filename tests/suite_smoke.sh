#!/bin/sh
# suite_smoke.sh MOECTS ROOT WORKDIR: the CPU part of the conformance suite, as CI runs it.
# The default run (smoke tier, every kernel: CPU kernels run, CUDA kernels SKIP without a GPU)
# must exit 0 (honest kernels pass, every mutant caught), its TAP must pass through prove, and the
# gate against the committed baseline and the must-pass lists must pass.
set -eu
moects=$1 root=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
"$moects" run --root "$root" --out "$work/run" > "$work/run.tap"
prove --exec cat "$work/run.tap"
"$moects" gate "$work/run/results.json" --baseline "$root/reports/baseline/results.json" \
    --mustpass "$root"/cases/mustpass/*.txt --summary "$work/gate.md"
