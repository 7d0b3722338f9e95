#!/bin/sh
# suite_smoke.sh MOECTS ROOT WORKDIR: the CPU part of the conformance suite, as CI runs it.
# The default run (smoke tier, every kernel: CPU kernels run, CUDA kernels SKIP without a GPU)
# must exit 0 (honest kernels pass, every mutant caught), its TAP must pass through prove, and the
# gate against the committed baseline and the smoke must-pass lists must pass (kimi-k3-tp8.txt
# holds full-tier cases: prove runs it, see docs/usage.md).
set -eu
moects=$1 root=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
"$moects" run --root "$root" --out "$work/run" > "$work/run.tap"
prove --exec cat "$work/run.tap"
"$moects" gate "$work/run/results.json" --baseline "$root/reports/baseline/results.json" \
    --mustpass "$root"/cases/mustpass/smoke-core.txt "$root"/cases/mustpass/regressions-smoke.txt \
    --summary "$work/gate.md"
