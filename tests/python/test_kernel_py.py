"""Python kernels that raise, kill their process, abort or hang get that case's FAIL_CRASH or
FAIL_TIMEOUT with the right text, under `moects run --kernel-py` and under the pytest plugin; the
cases they do not break (T = 1) pass."""
import json
import os
import re
import subprocess
import sys

from conftest import ROOT

T1, T16 = "ep_gather/kimi-k3/ep64/t1", "ep_gather/kimi-k3/ep64/t16"
BAD = os.path.join(ROOT, "tests", "python", "bad_kernels.py")


def subtests(tap):
    """{kernel: {case: (ok, directive, yaml text)}} from moects's TAP."""
    out, cur, last = {}, None, None
    for line in tap.splitlines():
        m = re.match(r"# Subtest: (\S+)", line)
        if m:
            cur = out.setdefault(m.group(1), {})
            continue
        m = re.match(r"    (not ok|ok) \d+ - (\S+)(.*)", line)
        if m and cur is not None:
            last = [m.group(1) == "ok", m.group(3), ""]
            cur[m.group(2)] = last
        elif line.startswith("      ") and last is not None:
            last[2] += line.strip() + "\n"
    return out


def test_kernel_py_isolates_each_failure(build_dir, tmp_path):
    r = subprocess.run([os.path.join(build_dir, "bin", "moects"), "run", "--kernel-py", BAD + ":all_bad",
                        "--kernel", "py.*", "--timeout", "5", "--out", str(tmp_path), T1, T16],
                       capture_output=True, text=True, timeout=600)
    tap = subtests(r.stdout)
    assert r.returncode == 0, r.stdout + r.stderr  # every mutant caught
    want = {"py.mutant.raise": ("FAIL_CRASH", "ValueError: boom from the python kernel"),
            "py.mutant.kill": ("FAIL_CRASH", "signal 9"),
            "py.mutant.abort": ("FAIL_CRASH", "signal 6"),
            "py.mutant.hang": ("FAIL_TIMEOUT", "killed after 5 s"),
            "py.mutant.returns": ("FAIL_CRASH", "run(shape, args) returned a numpy.ndarray of shape (3, 5)")}
    for kernel, (verdict, text) in want.items():
        assert tap[kernel][T1][0], (kernel, tap[kernel][T1])
        ok, directive, diag = tap[kernel][T16]
        assert not ok and "TODO mutant" in directive, (kernel, tap[kernel][T16])
        assert "verdict: " + verdict in diag and text in diag, (kernel, diag)
    with open(tmp_path / "results.json") as f:
        res = {(x["kernel"], x["case"]): x for x in json.load(f)["results"]}
    assert "ValueError: boom" in res[("py.mutant.raise", T16)]["reason"]
    assert res[("py.mutant.returns", T16)]["reason"] == (
        'run() returned 1: run(shape, args) returned a numpy.ndarray of shape (3, 5): the output must be written into '
        'args["out"] (e.g. args["out"][...] = result), not returned')


PLUGIN_TEST = '''
import pytest
import bad_kernels as bk

@pytest.mark.moects(%r, %r, tier="all", kernel=bk.raises)
def test_raises(moects_case):
    a = moects_case.args()
    bk.raises["run"](moects_case.shape, a)
    moects_case.check(a["out"])
''' % (T1, T16)


def test_plugin_records_the_exception(tmp_path):
    (tmp_path / "test_bad.py").write_text(PLUGIN_TEST)
    res = tmp_path / "results.json"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "python"), os.path.dirname(BAD)]))
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "moects.pytest_plugin", "-p", "no:cacheprovider",
                        str(tmp_path / "test_bad.py"), "--moects-results", str(res)],
                       capture_output=True, text=True, env=env, cwd=str(tmp_path))
    assert r.returncode == 1 and "1 failed, 1 passed" in r.stdout, r.stdout + r.stderr
    assert "[%s]" % T16 in r.stdout and "ValueError: boom from the python kernel" in r.stdout
    with open(res) as f:
        got = {x["case"]: x for x in json.load(f)["results"]}
    assert got[T1]["verdict"] == "PASS_EXACT"
    assert got[T16]["verdict"] == "FAIL_CRASH" and "ValueError: boom" in got[T16]["reason"]


def test_gate_repro_lines_carry_kernel_py(build_dir, tmp_path):
    """`moects gate` on two --kernel-py runs: the regression's repro line names the --kernel-py file as
    given, relative to the run's folder that holds it (docs/usage.md) and, pasted there, fails that
    case again; a lost regression cell's line selects the
    regression cases (once '*/regression/-/*', which matched none)."""
    import shlex
    moects_bin = os.path.join(build_dir, "bin", "moects")
    sel = "moe_gemm.w4a16/regression/moe-layouts/*"
    honest = os.path.join(ROOT, "examples", "numpy_moe_gemm.py") + ":kernel"
    buggy = tmp_path / "buggy.py"  # the same kernel name, expert 0's alpha for every expert
    buggy.write_text("import sys\nsys.path.insert(0, %r)\nimport numpy as np\nimport numpy_moe_gemm as nm\n\n\n"
                     "def run(shape, args):\n"
                     "    nm.moe_gemm(shape, dict(args, alpha=np.full(shape['E'], args['alpha'][0], np.float32)))\n\n\n"
                     "kernel = dict(nm.kernel, run=run)\n" % os.path.join(ROOT, "examples"))
    for out, spec in (("base", honest), ("now", "buggy.py:kernel")):
        subprocess.run([moects_bin, "run", "--kernel-py", spec, "--out", out, sel], capture_output=True, cwd=tmp_path)
    g = subprocess.run([moects_bin, "gate", "now/results.json", "--baseline", "base/results.json"],
                       capture_output=True, text=True, cwd=tmp_path)
    assert g.returncode == 1, g.stdout + g.stderr
    # NVFP4 weights: alpha differs per expert; the 6 b-nvfp4 cases regress, the MXFP4 ones (alpha 1) do not
    lines = [l.strip().strip("`") for l in g.stdout.splitlines() if l.strip().startswith("`" + moects_bin)]
    runs = [l for l in lines if "/b-nvfp4/" in l]
    assert len(runs) == 6, g.stdout
    assert all("--kernel-py ./buggy.py:kernel" in l for l in runs), runs
    assert any("'*/regression/*'" in l for l in lines) and not any("/-/" in l for l in lines), lines
    again = subprocess.run(shlex.split(runs[0]), capture_output=True, text=True, cwd=tmp_path)
    assert again.returncode == 1 and "not ok" in again.stdout, again.stdout + again.stderr


def test_no_package_says_how_to_fix(build_dir, tmp_path):
    """--kernel-py where the Python cannot import the moects package: exit 2, one line saying to set
    PYTHONPATH (or MOECTS_PYTHON); also when a folder named moects in the working directory (a checkout
    of that name) shadows it, where Python says "No module named moects._worker"."""
    moects_bin = os.path.join(build_dir, "bin", "moects")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.setdefault("MOECTS_PYTHON", sys.executable)
    spec = os.path.join(ROOT, "examples", "numpy_moe_gemm.py") + ":kernel"
    for shadow in (False, True):
        if shadow:
            (tmp_path / "moects").mkdir()
        r = subprocess.run([moects_bin, "run", "--kernel-py", spec, "--out", str(tmp_path / "o"),
                            "moe_gemm.w4a16/regression/moe-layouts/*"], capture_output=True, text=True, env=env,
                           cwd=str(tmp_path))
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert "cannot import the moects package: set PYTHONPATH=%s/python" % ROOT in r.stderr, r.stderr
        assert not (tmp_path / "o").exists()
