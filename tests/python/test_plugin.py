"""The pytest plugin: one test per case (the case id is the test id), check()'s AssertionError carries
the TAP's diagnostics, and --moects-results writes a results.json that moects gate, coverage and
merge read unchanged (merge joins the results.json of --moects-shard runs)."""
import json
import os
import subprocess
import sys

from conftest import ROOT

TESTS = '''
import pytest
import numpy_ep_gather as ne

@pytest.mark.moects("ep_gather/kimi-k3/*", tier="smoke", kernel=ne.kernel)
def test_numpy(moects_case):
    a = moects_case.args()
    ne.ep_gather(moects_case.shape, a)
    moects_case.check(a["out"])

@pytest.mark.moects("ep_gather/kimi-k3/tp8/t16", tier="smoke")
def test_flipped(moects_case):
    a = moects_case.args()
    ne.ep_gather(moects_case.shape, a)
    a["out"].reshape(-1)[0] ^= 0x8000   # the sign of element 0
    moects_case.check(a["out"], recipe="ep_gather.fma_v1", name="py.flipped")
'''


def pytest_run(tmp_path, *args):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "python"), os.path.join(ROOT, "examples")]))
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rf", "-p", "moects.pytest_plugin",
                           "-p", "no:cacheprovider"] + list(args), capture_output=True, text=True, env=env,
                          cwd=str(tmp_path))


def test_cases_are_tests_and_results_feed_gate_coverage_merge(build_dir, tmp_path):
    (tmp_path / "test_k.py").write_text(TESTS)
    res = tmp_path / "run" / "results.json"
    r = pytest_run(tmp_path, "test_k.py", "--moects-results", str(res))
    assert "1 failed, 12 passed" in r.stdout, r.stdout + r.stderr
    assert "test_k.py::test_numpy[ep_gather/kimi-k3/tp8/t16]\n" in pytest_run(tmp_path, "test_k.py", "--collect-only").stdout
    assert "verdict: FAIL_MISMATCH" in r.stdout and "mismatches: 1" in r.stdout  # the TAP's block
    with open(res) as f:
        doc = json.load(f)
    got = [(x["kernel"], x["case"], x["verdict"]) for x in doc["results"]]
    assert len(got) == 13 and doc["seed"] == 1
    assert ("py.flipped", "ep_gather/kimi-k3/tp8/t16", "FAIL_MISMATCH") in got
    assert sum(v == "PASS_EXACT" and k == "py.numpy.ep_gather" for k, _, v in got) == 12
    moects = os.path.join(build_dir, "bin", "moects")
    g = subprocess.run([moects, "gate", str(res), "--baseline", str(res), "--summary", ""], capture_output=True, text=True)
    assert g.returncode == 0, g.stdout + g.stderr
    c = subprocess.run([moects, "coverage", str(res), "--out", str(tmp_path / "cov")], capture_output=True, text=True)
    assert c.returncode in (0, 1) and "py.numpy.ep_gather" in (tmp_path / "cov" / "coverage.md").read_text(), c.stderr
    shards = [tmp_path / ("shard%d" % i) / "results.json" for i in (0, 1)]
    for i, path in enumerate(shards):
        pytest_run(tmp_path, "test_k.py", "--moects-shard", "%d/2" % i, "--moects-results", str(path))
    m = subprocess.run([moects, "merge", str(tmp_path / "merged")] + [str(p) for p in shards], capture_output=True,
                       text=True)
    # py.flipped fails a case: the merge exits 1, as the unsharded run (and each shard's pytest) does
    assert m.returncode == 1 and "kernel py.flipped failed in the merged run" in m.stderr, m.stderr
    with open(tmp_path / "merged" / "results.json") as f:
        merged = [(x["kernel"], x["case"], x["verdict"]) for x in json.load(f)["results"]]
    assert sorted(merged) == sorted(got), m.stderr


MINE = '''
import pytest
import numpy_ep_gather as ne

def flipped(shape, args):
    ne.ep_gather(shape, args)
    args["out"].reshape(-1)[0] ^= 0x8000   # the sign of element 0

mine = {"name": "mine.flipped", "op": "ep_gather", "recipe": "ep_gather.fma_v1", "run": flipped}

@pytest.mark.moects("ep_gather/kimi-k3/tp8/t16", kernel=mine)
def test_mine(moects_case):
    a = moects_case.args()
    mine["run"](moects_case.shape, a)
    moects_case.check(a["out"])

@pytest.mark.moects("ep_gather/kimi-k3/tp8/t16")
def test_inline(moects_case):
    a = moects_case.args()
    flipped(moects_case.shape, a)
    moects_case.check(a["out"], recipe="ep_gather.fma_v1", name="py.inline")
'''


def test_failed_check_prints_pytest_and_moects_repro_lines(tmp_path):
    (tmp_path / "test_b.py").write_text(MINE)
    r = pytest_run(tmp_path, "test_b.py", "--moects-seed", "7")
    assert r.returncode == 1, r.stdout + r.stderr
    got = [l.split("E ", 1)[1].strip() for l in r.stdout.splitlines() if " repro: " in l and l.startswith("E ")]
    f = str(tmp_path / "test_b.py")
    # written out from the plugin's contract (python/moects/repro.py): node id, seed, -p as given
    want_pytest = "-p moects.pytest_plugin '%s::test_mine[ep_gather/kimi-k3/tp8/t16]' --moects-seed 7" % f
    want_moects = (" run --kernel mine.flipped --seed 7 --out reports/repro/ep_gather_kimi-k3_tp8_t16 --kernel-py "
                   "%s:mine ep_gather/kimi-k3/tp8/t16" % f)
    mine = [l for l in got if l.startswith("pytest repro: ") and "test_mine" in l]
    assert len(mine) == 1 and mine[0].endswith(want_pytest), got
    moects_lines = [l for l in got if l.startswith("moects repro: ") and "mine.flipped" in l]
    assert len(moects_lines) == 1 and moects_lines[0].endswith(want_moects), got
    # the diagnostics' own repro line is that command too, not one without --kernel-py
    assert 'repro: "%s"' % moects_lines[0][len("moects repro: "):] in r.stdout, r.stdout
    # a kernel judged by recipe= inside the test has no description --kernel-py could load: said so
    assert any(l.startswith("moects repro: none (kernel 'py.inline' is no module-level description") for l in got), got


def test_missing_libmoects_is_one_collection_line(tmp_path):
    import shutil
    shutil.copytree(os.path.join(ROOT, "python", "moects"), str(tmp_path / "pkg" / "moects"),
                    ignore=shutil.ignore_patterns("__pycache__", "_native"))
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "test_b.py").write_text(MINE)
    env = {k: v for k, v in os.environ.items() if k not in ("MOECTS_LIB", "MOECTS_BIN", "MOECTS_ROOT")}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path / "pkg"), os.path.join(ROOT, "examples")])
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "moects.pytest_plugin", "-p", "no:cacheprovider",
                        "test_b.py"], capture_output=True, text=True, env=env, cwd=str(tmp_path / "w"))
    out = r.stdout + r.stderr
    lines = [l for l in out.splitlines() if l.startswith("moects: test_")]
    assert r.returncode == 2 and "Traceback" not in out, out  # 2: interrupted by a collection error
    assert len(lines) == 1 and "libmoects not found (looked in %s" % (tmp_path / "pkg" / "moects" / "_native" / "lib") \
        in lines[0] and str(tmp_path / "w" / "build" / "lib") in lines[0], out


PARAMETRIZED = '''
import pytest
import numpy_ep_gather as ne

@pytest.mark.parametrize("flip", [False, True], ids=["honest", "flipped"])
@pytest.mark.moects("ep_gather/kimi-k3/*", tier="smoke")
def test_both(moects_case, flip):
    a = moects_case.args()
    ne.ep_gather(moects_case.shape, a)
    if flip:
        a["out"].reshape(-1)[0] ^= 0x8000   # the sign of element 0
    moects_case.check(a["out"], recipe="ep_gather.fma_v1", name="py.flipped" if flip else "py.honest")
'''


def test_parametrized_kernels_each_keep_their_results(tmp_path):
    """@pytest.mark.parametrize over kernels shares one Case object per case between the kernels'
    tests: --moects-results holds every test's own verdict, once (each of the N cases: py.honest
    PASS_EXACT and py.flipped FAIL_MISMATCH where the case has an output element, 2N results)."""
    (tmp_path / "test_p.py").write_text(PARAMETRIZED)
    res = tmp_path / "results.json"
    r = pytest_run(tmp_path, "test_p.py", "--moects-results", str(res))
    with open(res) as f:
        got = [(x["kernel"], x["case"], x["verdict"]) for x in json.load(f)["results"]]
    cases = sorted({c for _, c, _ in got})
    assert len(cases) >= 2 and len(got) == 2 * len(cases), (got, r.stdout)
    for c in cases:
        assert ("py.honest", c, "PASS_EXACT") in got, (c, got)
        assert [k for k, cc, _ in got if cc == c].count("py.flipped") == 1
    assert "%d failed" % sum(v.startswith("FAIL") for _, _, v in got) in r.stdout, r.stdout
