"""A numpy ep_gather judged through the pytest plugin, through `moects run --kernel-py` and through
export/verify gets the same verdict, case for case, as the built-in cpu.ep_gather on the smoke
ep_gather cases (issue 10). MOECTS_EQ_SHARD=i/n narrows every route to the same shard of them (every
n-th case, as `moects run --shard`), so that CTest runs the routes in parts side by side. The one
smoke case also in the large tier (more than 2^31 elements, about 5.5 GB of inputs) is left to the C
suite: every route would hold its inputs again (and export would write them to disk)."""
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import pytest

import moects
import numpy_ep_gather as ne
import safetensors_np as st
from conftest import ROOT

GLOB = "ep_gather/*"
SHARD = os.environ.get("MOECTS_EQ_SHARD")  # "i/n" or None: the whole selection


def shard_args(flag):
    return [flag, SHARD] if SHARD else []


def verdicts(path, kernel):
    with open(path) as f:
        res = json.load(f)["results"]
    return {r["case"]: r["verdict"] for r in res if r["kernel"] == kernel}


def env(build):
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join([os.path.join(ROOT, "python"), e.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    e["MOECTS_LIB"] = os.path.join(build, "lib", "libmoects.so.0")
    e["MOECTS_PYTHON"] = sys.executable
    e["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    return e


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return tmp_path_factory.mktemp("equivalence")


@pytest.fixture(scope="module")
def builtin(work):
    build = os.environ.get("MOECTS_BUILD", os.path.join(ROOT, "build"))
    out = work / "builtin"
    subprocess.run([os.path.join(build, "bin", "moects"), "run", "--kernel", "cpu.ep_gather", "--out", str(out)]
                   + shard_args("--shard") + [GLOB], check=True, stdout=subprocess.DEVNULL, env=env(build))
    v = verdicts(out / "results.json", "cpu.ep_gather")
    large = {c.id for c in moects.cases(GLOB, tier="large")}
    parts = int(SHARD.split("/")[1]) if SHARD else 1
    assert len(v) > 300 // parts and len(large) >= 1
    return build, {k: x for k, x in v.items() if k not in large}


def same(got, want):
    missing = sorted(set(want) - set(got))
    differ = sorted(c for c in want if c in got and got[c] != want[c])
    assert not missing, "%d cases without a verdict, e.g. %s" % (len(missing), missing[:3])
    assert not differ, "%d verdicts differ, e.g. %s: %s vs built-in %s" % (
        len(differ), differ[0], got[differ[0]], want[differ[0]])


def test_pytest_plugin_route(builtin, work):
    build, want = builtin
    res = work / "pytest" / "results.json"
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "moects.pytest_plugin", "-p", "no:cacheprovider",
                        os.path.join(ROOT, "tests", "python", "plugin_numpy_cases.py"), "--moects-results", str(res)] + shard_args("--moects-shard"),
                       env=env(build), capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    same(verdicts(res, "py.numpy.ep_gather"), want)


def test_kernel_py_route(builtin, work):
    build, want = builtin
    out = work / "kernel_py"
    ids = work / "kernel_py_cases.txt"  # the built-in's cases: the large-tier one left out, as in want
    ids.write_text("".join(c + "\n" for c in sorted(want)))
    subprocess.run([os.path.join(build, "bin", "moects"), "run", "--kernel-py",
                    os.path.join(ROOT, "examples", "numpy_ep_gather.py") + ":kernel", "--kernel", "py.numpy.ep_gather",
                    "--out", str(out), "--cases", str(ids)], env=env(build), capture_output=True, text=True)
    got = verdicts(out / "results.json", "py.numpy.ep_gather")
    same(got, want)


def test_export_verify_route(builtin, work):
    build, want = builtin
    res = moects.Results("export/verify " + GLOB)
    scratch = "/dev/shm" if os.access("/dev/shm", os.W_OK) else str(work)  # memory, not disk, when there
    for case_id in want:  # one case at a time: its files are removed once judged
        d = pathlib.Path(tempfile.mkdtemp(prefix="moects-export-", dir=scratch))
        moects.export(str(d), case_id, tier="all")
        (name,) = [f for f in os.listdir(d) if f.endswith(".safetensors")]
        tensors, meta = st.load(str(d / name))
        shape = json.loads(meta["moects.shape"])
        args = {k: tensors[k] for k in ("x", "topk_ids", "topk_weights", "input_index")}
        args["expert_map"] = tensors.get("expert_map") if shape["has_expert_map"] else None
        out_dtype = "F32" if shape["out_dtype"] == "F32" else "BF16"
        args["out"] = np.zeros((shape["T"], shape["H"]), dtype=st.DTYPES[out_dtype])
        ne.ep_gather(shape, args)
        st.save(str(d / name.replace(".safetensors", ".out.safetensors")), {"out": args["out"]}, {"out": out_dtype})
        moects.verify(str(d), ne.kernel, res)
        shutil.rmtree(d)
    path = work / "verify" / "results.json"
    res.write(str(path))
    same(verdicts(path, "py.numpy.ep_gather"), want)
