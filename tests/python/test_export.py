"""export/verify round trip (safetensors, read and written here by an independent numpy
implementation of the format): the reference written back as the output passes, one flipped bit
fails, a missing output is FAIL_CRASH."""
import json
import os

import numpy as np

import moects
import safetensors_np as st

CASES = ["ep_gather/kimi-k3/tp8/t16", "ep_gather/regression/zero-tokens/t0*"]


def test_round_trip(tmp_path):
    n = moects.export(str(tmp_path), *CASES, tier="all")
    files = sorted(f for f in os.listdir(tmp_path) if f.endswith(".safetensors"))
    assert n == len(files) >= 2
    kimi = "ep_gather__kimi-k3__tp8__t16.safetensors"
    tensors, meta = st.load(str(tmp_path / kimi))
    assert meta["moects.case_id"] == "ep_gather/kimi-k3/tp8/t16" and meta["moects.op"] == "ep_gather"
    shape = json.loads(meta["moects.shape"])
    assert tensors["x"].shape == (shape["M_sum"], 3584) and tensors["topk_ids"].shape == (16, shape["k"])
    ref = tensors["ref.ep_gather.fma_v1"]
    assert ref.shape == (16, 3584)
    case = moects.case("ep_gather/kimi-k3/tp8/t16")  # the file holds the library's own bytes
    assert np.array_equal(tensors["x"], case.inputs()["x"])
    for f in files:  # every output = its reference: all pass
        t, m = st.load(str(tmp_path / f))
        st.save(str(tmp_path / f.replace(".safetensors", ".out.safetensors")), {"out": t["ref.ep_gather.fma_v1"]},
                {"out": json.loads(m["moects.dtypes"])["ref.ep_gather.fma_v1"]})
    kernel = {"name": "py.verify", "op": "ep_gather", "recipe": "ep_gather.fma_v1"}
    failing, res = moects.verify(str(tmp_path), kernel)
    assert failing == 0 and len(res) == len(files)
    bad = ref.copy()
    bad.reshape(-1)[5] ^= 1  # one bit
    st.save(str(tmp_path / kimi.replace(".safetensors", ".out.safetensors")), {"out": bad}, {"out": "BF16"})
    failing, res = moects.verify(str(tmp_path), kernel)
    assert failing == 1
    path = tmp_path / "results.json"
    res.write(str(path))
    with open(path) as f:
        got = {r["case"]: r for r in json.load(f)["results"]}
    assert got["ep_gather/kimi-k3/tp8/t16"]["verdict"] == "FAIL_MISMATCH"
    assert got["ep_gather/kimi-k3/tp8/t16"]["mismatches"] == 1
    os.remove(tmp_path / kimi.replace(".safetensors", ".out.safetensors"))
    failing, res = moects.verify(str(tmp_path), kernel)
    assert failing == 1
