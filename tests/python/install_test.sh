#!/bin/sh
# pip install of python/ into a fresh venv (the README's install line, without network: the venv sees
# Debian's setuptools, numpy and pytest), then the installed package finds this build's libmoects
# (MOECTS_LIB) and its pytest plugin is registered by the pytest11 entry point (no -p option).
# usage: install_test.sh PYTHON SOURCE_DIR BUILD_DIR WORK_DIR
set -eu
py=$1 src=$2 build=$3 work=$4
rm -rf "$work" && mkdir -p "$work"
"$py" -m venv --system-site-packages "$work/venv"
cp -r "$src/python" "$work/pkg"   # build outside the checkout: no egg-info left there
rm -rf "$work/pkg/build" "$work/pkg"/*.egg-info
"$work/venv/bin/python" -m pip install -q --no-build-isolation --no-deps "$work/pkg"
cd "$work"
unset PYTHONPATH PYTEST_DISABLE_PLUGIN_AUTOLOAD
export MOECTS_LIB="$build/lib/libmoects.so.0"
"$work/venv/bin/python" -c 'import moects, sys; assert moects.__file__.startswith(sys.prefix), moects.__file__
print(moects.library_version(), len(moects.cases("ep_gather/kimi-k3/*")))'
cat > "$work/test_installed.py" <<'PY'
import pytest

@pytest.mark.moects("ep_gather/kimi-k3/tp8/t16", tier="smoke")
def test_reference_passes(moects_case):
    moects_case.check(moects_case.reference("ep_gather.fma_v1"), recipe="ep_gather.fma_v1")
PY
"$work/venv/bin/python" -m pytest -q -p no:cacheprovider "$work/test_installed.py" --moects-results "$work/results.json"
grep -q '"verdict": *"PASS_EXACT"' "$work/results.json"
echo "py_install: ok"
