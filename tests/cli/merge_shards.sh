#!/bin/sh
# merge_shards.sh MOECTS WORK_DIR: run ~20 cases whole and in 3 shards, merge the shards with
# `moects merge`, and check that the merged results.json equals the whole run's (every entry, in
# order, and the header, but the date and the tasks' timing), that the merged run.tap equals the
# whole run's, that the merged run passes `moects gate` against the whole one, and that
# `moects coverage` reads it.
set -eu
# ep_gather under every layout and FP4 GEMMs under TP, at 16 tokens: ~20 cases x all kernels
moects=$1 work=$2
set -- --tier full 'ep_gather/gpt-oss-20b/*/t16*' 'fp4_gemm.mxfp4/gpt-oss-20b/tp*/*/m16*'
rm -rf "$work"
mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }
# exit 1 (a failing kernel or an escaped mutant) is a result, not an error here
"$moects" run "$@" --out "$work/whole" >/dev/null 2>"$work/whole.err" || [ $? -eq 1 ] || fail "whole run"
for i in 0 1 2; do
    "$moects" run "$@" --shard $i/3 --out "$work/s$i" >/dev/null 2>"$work/s$i.err" || [ $? -eq 1 ] || fail "shard $i"
done
# exit 1: a mutant escaped the merged run (a result, as above)
"$moects" merge "$work/merged" "$work/s2/results.json" "$work/s0/results.json" "$work/s1/results.json" ||
    [ $? -eq 1 ] || fail "merge"
# each task's "timing" (seconds) differs from run to run: left out of the comparison
untimed() { grep -v '^"date":' "$1" | sed 's/, "timing": {[^}]*}//'; }
untimed "$work/whole/results.json" > "$work/whole.json"
untimed "$work/merged/results.json" > "$work/merged.json"
[ "$(grep -c '"kernel":' "$work/whole.json")" -gt 0 ] || fail "the whole run has no result"
diff "$work/whole.json" "$work/merged.json" || fail "merged results.json differs from the whole run's"
diff "$work/whole/run.tap" "$work/merged/run.tap" || fail "merged run.tap differs from the whole run's"
# the merged run gates clean against the whole run, and its coverage report renders
"$moects" gate "$work/merged/results.json" --baseline "$work/whole/results.json" --summary "$work/gate.md" >/dev/null ||
    fail "gate of the merged run against the whole run: $(cat "$work/gate.md" 2>/dev/null)"
"$moects" coverage "$work/merged/results.json" 2>/dev/null
[ -s "$work/merged/coverage.md" ] && [ -s "$work/merged/coverage.html" ] || fail "no coverage report"
echo "ok: $(grep -c '"kernel":' "$work/whole.json") results merged from 3 shards equal the whole run"
