#!/bin/sh
# doc_examples.sh MOECTS ROOT WORKDIR PYTHON: the example commands of README.md and docs/usage.md that a
# fresh clone runs anywhere (no GPU, the built-in registry, the CPU examples/) exit 0 on a correct
# kernel. Each line below is FILE|COMMAND, COMMAND as the file spells it (checked: a doc that changes
# the command must change it here); it runs from ROOT with build/bin/moects as this build's binary,
# its reports under WORKDIR (--out), --kernel-py with ROOT/python on PYTHONPATH and PYTHON (numpy).
set -u
moects=$1 root=$2 work=$3 python=$4
rm -rf "$work" && mkdir -p "$work" || exit 1
fail() { echo "FAIL [doc_examples]: $*" >&2; exit 1; }
export MOECTS_ROOT="$root" MOECTS_COMMIT=doc-test PYTHONPATH="$root/python" MOECTS_PYTHON="$python"
unset TEST_TOTAL_SHARDS TEST_SHARD_INDEX TEST_SHARD_STATUS_FILE
cd "$root" || exit 1
i=0
while IFS='|' read -r file cmd; do
    [ -n "$file" ] || continue
    i=$((i + 1))
    grep -qF -- "$cmd" "$file" || fail "$file no longer has: $cmd"
    case $cmd in
    "build/bin/moects run "*) run="\"\$moects\" run --out \"$work/ex$i\" ${cmd#build/bin/moects run }" ;;
    "build/bin/moects "*) run="\"\$moects\" ${cmd#build/bin/moects }" ;;
    *) fail "not a build/bin/moects command: $cmd" ;;
    esac
    eval "$run" > "$work/ex$i.out" 2> "$work/ex$i.err"
    rc=$?
    [ $rc -eq 0 ] || { tail -n 3 "$work/ex$i.err"; fail "$file: exit $rc: $cmd"; }
    echo "ok $i - $file: $cmd"
done <<'LIST'
README.md|build/bin/moects run --kernel-py examples/numpy_ep_gather.py:kernel 'ep_gather/deepseek-v3/*'
docs/usage.md|build/bin/moects list 'ep_gather/kimi-k3/tp8/*'
docs/usage.md|build/bin/moects list --kernels
docs/usage.md|build/bin/moects run 'ep_gather/kimi-k3/tp8/*'
LIST
[ "$i" = 4 ] || fail "$i commands run, want 4"
