#!/bin/sh
# pip_install.sh: the package as a user gets it (docs/python.md "Install"). `pip install` of python/
# from this checkout into a fresh venv (the venv sees Debian's numpy and pytest and the
# scikit-build-core .ci/setup installs: no network; CUDA off), then, from a folder outside the
# checkout with MOECTS_LIB, MOECTS_BIN, MOECTS_ROOT and PYTHONPATH unset:
#   - the package loads its bundled libmoects and registry, `moects list` and `python -m moects list`
#     print the registry;
#   - pytest (the plugin registered by its entry point) passes an honest numpy ep_gather (exit 0;
#     --moects-results has both cases PASS_EXACT) and fails one that drops the last topk slot (exit 1), and each of the two repro lines a failure prints fails that same case again (exit 1);
#   - a libmoects that cannot be loaded is one collection error line, no traceback.
# The build of the library is the cost (a few minutes on 2 cores; WORK_DIR/cmake is kept, so a
# second run is incremental).
# usage: pip_install.sh PYTHON SOURCE_DIR WORK_DIR
set -eu
py=$1 src=$2 work=$3
unset MOECTS_LIB MOECTS_BIN MOECTS_ROOT PYTHONPATH PYTEST_DISABLE_PLUGIN_AUTOLOAD MOECTS_PYTHON MOECTS_PROGRAM \
      MOECTS_BUILD VIRTUAL_ENV || true
fail() { echo "pip_install: FAIL: $*" >&2; exit 1; }
"$py" -c 'import scikit_build_core' 2>/dev/null ||
    fail "$py cannot import scikit_build_core (bash .ci/setup installs it from PyPI)"

mkdir -p "$work" && rm -rf "$work/venv"
"$py" -m venv --system-site-packages "$work/venv"
vpy=$work/venv/bin/python
t0=$(date +%s)
"$vpy" -m pip install -q --no-build-isolation --no-deps --config-settings=cmake.define.MOECTS_CUDA=OFF --config-settings=build-dir="$work/cmake" \
    "$src/python" || fail "pip install $src/python"
echo "pip_install: pip install took $(($(date +%s) - t0)) s"
git -C "$src" status --porcelain --ignored python 2>/dev/null | grep '^!!' | grep -v __pycache__ &&
    fail "pip install left files in $src/python"

dir=$(mktemp -d /tmp/moects_pip_install.XXXXXX)
trap 'rm -rf "$dir"' EXIT
cd "$dir"
export PATH="$work/venv/bin:$PATH" # as `. venv/bin/activate` does: `moects` is the package's entry point

# The bundled library and registry, found with no variable set.
"$vpy" - "$work/venv" <<'PY' || fail "the package does not use its bundled libmoects and registry"
import os, sys
import moects, moects._lib as L
venv = os.path.realpath(sys.argv[1])
lib, root = os.path.realpath(L.path()), os.path.realpath(L.s(L.lib().moects_default_root()))
print("pip_install: libmoects", lib, "registry", root)
assert lib.startswith(venv) and root.startswith(venv), (lib, root)
assert [c.id for c in moects.cases("ep_gather/deepseek-v3/ep2/t16")] == ["ep_gather/deepseek-v3/ep2/t16"]
PY
moects list | head -3 > list.txt
"$vpy" -m moects list > list_py.txt
echo "pip_install: moects list | head -3:" && cat list.txt
[ "$(wc -l < list.txt)" = 3 ] || fail "moects list printed $(wc -l < list.txt) lines"
head -3 list_py.txt | cmp -s - list.txt || fail "python -m moects list differs from moects list"
grep -qx 'ep_gather/deepseek-v3/ep2/t16' list_py.txt || fail "python -m moects list lacks ep_gather/deepseek-v3/ep2/t16"
# A run without --out writes here (./reports/latest), never into the installed package's registry.
moects run --kernel cpu.ep_gather 'ep_gather/deepseek-v3/ep2/t16' > run.tap 2> run.err || { cat run.err; fail "moects run: exit $?"; }
[ -s reports/latest/results.json ] || { cat run.err; fail "moects run without --out: no ./reports/latest/results.json"; }
! find "$work/venv" -path '*share/moects/reports*' | grep -q . || fail "moects run wrote reports into the venv"

# An honest kernel and a buggy one, as a user writes them beside their kernel.
cp "$src/examples/numpy_ep_gather.py" .
cat > test_honest.py <<'PY'
import pytest
import numpy_ep_gather as ne

@pytest.mark.moects("ep_gather/deepseek-v3/ep2/t16", "ep_gather/deepseek-v3/tp2/t16", kernel=ne.kernel)
def test_honest(moects_case):
    args = moects_case.args()
    ne.ep_gather(moects_case.shape, args)
    moects_case.check(args["out"])
PY
cat > test_buggy.py <<'PY'
import pytest
import numpy_ep_gather as ne


def dropped_last_slot(shape, args):
    """ep_gather.fma_v1 over every topk slot but the last: a loop one short."""
    cut = {n: args[n][:, :-1] for n in ("topk_ids", "topk_weights", "input_index")}
    ne.ep_gather(dict(shape, k=shape["k"] - 1), dict(args, **cut))


buggy = {"name": "mine.ep_gather", "op": "ep_gather", "recipe": "ep_gather.fma_v1", "run": dropped_last_slot}


@pytest.mark.moects("ep_gather/deepseek-v3/ep2/t16", "ep_gather/deepseek-v3/tp2/t16", kernel=buggy)
def test_buggy(moects_case):
    args = moects_case.args()
    buggy["run"](moects_case.shape, args)
    moects_case.check(args["out"])
PY
rc=0 && "$vpy" -m pytest -q -p no:cacheprovider test_honest.py --moects-results honest.json > honest.out 2>&1 || rc=$?
[ $rc = 0 ] || { cat honest.out; fail "pytest test_honest.py: exit $rc, want 0"; }
[ "$(grep -c '"verdict": *"PASS_EXACT"' honest.json)" = 2 ] || fail "honest.json: not 2 PASS_EXACT"
rc=0 && "$vpy" -m pytest -q -p no:cacheprovider test_buggy.py > buggy.out 2>&1 || rc=$?
[ $rc = 1 ] || { cat buggy.out; fail "pytest test_buggy.py: exit $rc, want 1"; }
grep -q '^FAILED test_buggy.py::test_buggy\[ep_gather/deepseek-v3/ep2/t16\]' buggy.out || fail "ep2 case not failed"

# Each repro line of the first failure, run as printed, fails that same case again.
pyline=$(sed -n 's/^E *pytest repro: //p' buggy.out | head -1)
mline=$(sed -n 's/^E *moects repro: //p' buggy.out | head -1)
case_id=$(printf '%s\n' "$pyline" | sed -n 's/.*::test_buggy\[\(.*\)\].*/\1/p')
echo "pip_install: case $case_id"
echo "pip_install: pytest repro: $pyline"
echo "pip_install: moects repro: $mline"
[ -n "$case_id" ] && [ -n "$mline" ] || fail "no repro lines in the pytest output"
case $mline in moects\ run\ *--kernel-py\ "$dir"/test_buggy.py:buggy*) ;; *) fail "moects repro: $mline" ;; esac
rc=0 && sh -c "$pyline" > repro_pytest.out 2>&1 || rc=$?
[ $rc = 1 ] || { cat repro_pytest.out; fail "pytest repro: exit $rc, want 1"; }
grep -q "^FAILED test_buggy.py::test_buggy\[$case_id\]" repro_pytest.out && grep -Eq '(^|=+ )1 failed in ' repro_pytest.out ||
    { cat repro_pytest.out; fail "pytest repro: not that case alone failing"; }
rc=0 && sh -c "$mline" > repro_moects.out 2>&1 || rc=$?
[ $rc = 1 ] || { cat repro_moects.out; fail "moects repro: exit $rc, want 1"; }
grep -q "not ok 1 - $case_id\$" repro_moects.out && grep -q 'runs: honest 0 passed, 1 failed' repro_moects.out ||
    { cat repro_moects.out; fail "moects repro: not that case alone failing"; }
out=reports/repro/$(printf '%s' "$case_id" | tr '/' '_')
grep -q '"verdict": *"FAIL_MISMATCH"' "$out/results.json" || fail "no FAIL_MISMATCH in $out/results.json"

# A library that cannot be loaded: one line, at collection, naming where it looked; no traceback.
rc=0 && MOECTS_LIB=$dir/nowhere/libmoects.so.0 "$vpy" -m pytest -q -p no:cacheprovider test_honest.py > nolib.out 2>&1 ||
    rc=$?
[ $rc != 0 ] && grep -q "moects: test_honest: libmoects not loaded from \$MOECTS_LIB=$dir/nowhere/libmoects.so.0" nolib.out &&
    ! grep -q Traceback nolib.out || { cat nolib.out; fail "a missing libmoects is not one line"; }
echo "pip_install: ok"
