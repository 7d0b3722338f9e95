#!/bin/sh
# plugin_abi2.sh MOECTS PLUGIN WORK: a version-2 kernel library, built from the last release before
# ABI 3 (84ebde0) against that release's installed headers (tests/fixtures/abi2/, as installed then),
# still loads in this moects: its honest ep_gather passes and its two mutants are caught (issue 26).
set -u
moects=$1 plugin=$2 work=$3
rm -rf "$work" && mkdir -p "$work" || exit 1
fail() { echo "FAIL [plugin_abi2]: $*"; exit 1; }
"$moects" run --out "$work/out" --timeout 5 --kernel-lib "$plugin" --kernel 'plugin.*' 'ep_gather/kimi-k3/tp8/*' \
  > "$work/run.tap" 2> "$work/run.err"
rc=$?
[ $rc -eq 0 ] || { cat "$work/run.tap" "$work/run.err"; fail "exit $rc, want 0"; }
grep -q '^ok [0-9]* - plugin\.ep_gather: [0-9]* of [0-9]* cases pass$' "$work/run.tap" || fail "the honest kernel's point"
[ "$(grep -c '^ok [0-9]* - plugin\.mutant\.[a-z0-9_.]*: mutant caught by' "$work/run.tap")" -eq 2 ] ||
  { grep '^\(not \)\?ok' "$work/run.tap"; fail "both mutants caught"; }
echo "plugin_abi2: ok (an ABI-2 library of 84ebde0 loads and is judged)"
