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
    assert m.returncode == 0, m.stderr
    with open(tmp_path / "merged" / "results.json") as f:
        merged = [(x["kernel"], x["case"], x["verdict"]) for x in json.load(f)["results"]]
    assert sorted(merged) == sorted(got), m.stderr
