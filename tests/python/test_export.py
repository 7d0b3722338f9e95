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


MOE = ["moe_gemm.w4a16/deepseek-v3/ep64/contiguous/gemm2/t16", "moe_gemm.w4a8/kimi-k2/ep64/masked/gemm2/t16",
       "moe_gemm.nvfp4/regression/moe-experts-not-4/e40/n256/k512/offsets"]


def test_moe_gemm_round_trip(tmp_path, build_dir):
    """Grouped cases: the tensors a kernel gets (absent ones left out), the W4A16 case computed from
    the file alone by examples/numpy_moe_gemm.py and judged by its bound, the others' blockwise_v1
    reference written back as the output, then one element of a valid row broken."""
    import subprocess
    import numpy_moe_gemm as nm
    assert moects.export(str(tmp_path), *MOE, tier="all") == 3
    names = {}
    for cid in MOE:
        f = cid.replace("/", "__") + ".safetensors"
        t, m = st.load(str(tmp_path / f))
        names[cid] = sorted(t)
        shape, out = json.loads(m["moects.shape"]), json.loads(m["moects.out"])
        if shape["format"] == "w4a16":
            assert m["moects.recipe"] == "moe_gemm.exact_v1" and "ref.moe_gemm.blockwise_v1" not in t
            args = dict(t, out=np.full(out["shape"], 0xFFFF, dtype=np.uint16))
            nm.moe_gemm(shape, args)
            got = args["out"]
        else:
            got = t["ref.moe_gemm.blockwise_v1"]
        st.save(str(tmp_path / f.replace(".safetensors", ".out.safetensors")), {"out": got}, {"out": out["dtype"]})
    assert names[MOE[0]] == ["a", "alpha", "b", "m_indices", "ref.moe_gemm.exact_v1", "sb"]
    assert names[MOE[1]] == ["a", "alpha", "b", "masked_m", "ref.moe_gemm.blockwise_v1", "ref.moe_gemm.exact_v1",
                             "sa", "sb"]
    assert "expert_offsets" in names[MOE[2]] and "gs_a" in names[MOE[2]] and "gs_b" in names[MOE[2]]
    moects_bin = os.path.join(build_dir, "bin", "moects")
    r = subprocess.run([moects_bin, "verify", str(tmp_path), "--bound", "24"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.count("\n    ok ") == 3, r.stdout + r.stderr
    r = subprocess.run([moects_bin, "verify", str(tmp_path)], capture_output=True, text=True)  # each file's recipe
    with open(tmp_path / "results.json") as fh:
        recipes = {x["case"]: x["recipe"] for x in json.load(fh)["results"]}
    assert recipes == {MOE[0]: "moe_gemm.exact_v1", MOE[1]: "moe_gemm.blockwise_v1", MOE[2]: "moe_gemm.blockwise_v1"}
    f = MOE[1].replace("/", "__")
    t, m = st.load(str(tmp_path / (f + ".safetensors")))
    bad = t["ref.moe_gemm.blockwise_v1"].copy()
    e = int(np.argmax(t["masked_m"] > 0))  # an expert with rows: its first row is valid
    bad[e, 0, 7] ^= 0x4000  # the top exponent bit: far outside any bound
    st.save(str(tmp_path / (f + ".out.safetensors")), {"out": bad}, {"out": "BF16"})
    r = subprocess.run([moects_bin, "verify", str(tmp_path), "--bound", "24"], capture_output=True, text=True)
    assert r.returncode == 1 and "not ok 3 - " + MOE[1] in r.stdout, r.stdout


def test_verify_refuses_copies_and_names_shapes(tmp_path, build_dir):
    """A copy of an exported file under another name is refused (two files could claim one case, one
    judged); a masked case's output written 2-D is FAIL_CRASH naming both shapes in full; the repro
    line of a verified case is that verify again."""
    import shutil
    import subprocess
    cid = MOE[1]  # Kimi K2 EP64 masked: out [6 experts, max_m, N 7168]
    assert moects.export(str(tmp_path), cid, tier="all") == 1
    f = tmp_path / (cid.replace("/", "__") + ".safetensors")
    m = st.load(str(f))[1]
    E, maxm, N = json.loads(m["moects.out"])["shape"]
    assert (E, N) == (6, 7168)
    st.save(str(tmp_path / (cid.replace("/", "__") + ".out.safetensors")), {"out": np.zeros((E * maxm, N), np.uint16)},
            {"out": "BF16"})
    moects_bin = os.path.join(build_dir, "bin", "moects")
    r = subprocess.run([moects_bin, "verify", str(tmp_path), "--bound", "24"], capture_output=True, text=True)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "out: BF16 [%d, %d], the case's output is BF16 [%d, %d, %d]" % (E * maxm, N, E, maxm, N) in r.stdout
    # the program as repro lines name it (docs/usage.md): relative to the current folder when inside it
    prog, cwd = os.path.realpath(moects_bin), os.path.realpath(os.getcwd())
    if prog.startswith(cwd + "/"):
        prog = os.path.relpath(prog, cwd)
    assert "repro: \"%s verify '--bound' '24' '%s'\"" % (prog, os.path.realpath(tmp_path)) in r.stdout, r.stdout
    shutil.copy(f, tmp_path / "renamed.safetensors")
    r = subprocess.run([moects_bin, "verify", str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.strip() == (
        "moects verify: %s/renamed.safetensors: moects.case_id %s: that case's file is %s (renamed or copied?)"
        % (tmp_path, cid, f.name)), r.stderr


def test_verify_refuses_an_edited_case_id(tmp_path, build_dir):
    """A file whose moects.case_id names another case than its moects.case (which verify judges) is
    refused, naming both, and one without it; its output is its reference, so it passes before the edit."""
    import subprocess
    cid, other = "ep_gather/kimi-k3/tp8/t16", "ep_gather/kimi-k3/ep64/t16"
    assert moects.export(str(tmp_path), cid, tier="all") == 1
    f = tmp_path / "ep_gather__kimi-k3__tp8__t16.safetensors"
    t, m = st.load(str(f))
    t = {k: np.array(v) for k, v in t.items()}  # copies: the file is written over below
    dtypes = json.loads(m["moects.dtypes"])
    st.save(str(tmp_path / "ep_gather__kimi-k3__tp8__t16.out.safetensors"), {"out": t["ref.ep_gather.fma_v1"]},
            {"out": "BF16"})
    moects_bin = os.path.join(build_dir, "bin", "moects")
    r = subprocess.run([moects_bin, "verify", str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    st.save(str(f), t, dtypes, dict(m, **{"moects.case_id": other}))
    r = subprocess.run([moects_bin, "verify", str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr == (
        "moects verify: %s: moects.case_id %s: not the case of moects.case (%s)\n" % (f, other, cid)), r.stderr
    st.save(str(f), t, dtypes, {k: v for k, v in m.items() if k != "moects.case_id"})
    r = subprocess.run([moects_bin, "verify", str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr == "moects verify: %s: moects.case_id: missing\n" % f, r.stderr


def test_verify_refuses_an_edited_reference(tmp_path, build_dir):
    """A file whose ref.<recipe> was edited after export is refused, naming the tensor, how many
    elements differ and the first; so is a ref.* tensor of a recipe the op does not have."""
    import subprocess
    cid = MOE[0]  # DeepSeek-V3 W4A16 EP64 contiguous: out [M, 7168], exact_v1 only
    assert moects.export(str(tmp_path), cid, tier="all") == 1
    f = tmp_path / (cid.replace("/", "__") + ".safetensors")
    t, m = st.load(str(f))
    t = {k: np.array(v) for k, v in t.items()}  # copies: the file is written over below
    dtypes = json.loads(m["moects.dtypes"])
    ref = t["ref.moe_gemm.exact_v1"]
    bad = dict(t)
    bad["ref.moe_gemm.exact_v1"] = ref.copy()
    bad["ref.moe_gemm.exact_v1"][2, 5] ^= 1  # one bit of element 2 * 7168 + 5
    bad["ref.moe_gemm.exact_v1"][3, 0] ^= 1
    st.save(str(f), bad, dtypes, m)
    moects_bin = os.path.join(build_dir, "bin", "moects")
    r = subprocess.run([moects_bin, "verify", str(tmp_path), "--bound", "24"], capture_output=True, text=True)
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.strip() == (
        "moects verify: %s: ref.moe_gemm.exact_v1: not the reference this moects %s computes for the case "
        "(2 of %d elements differ, the first at index %d; exported by moects %s)"
        % (f, m["moects.version"], ref.size, 2 * 7168 + 5, m["moects.version"])), r.stderr
    other = dict(t)
    other["ref.moe_gemm.fast_v9"] = other.pop("ref.moe_gemm.exact_v1")
    dtypes["ref.moe_gemm.fast_v9"] = dtypes.pop("ref.moe_gemm.exact_v1")
    st.save(str(f), other, dtypes, m)
    r = subprocess.run([moects_bin, "verify", str(tmp_path), "--bound", "24"], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.strip() == (
        "moects verify: %s: ref.moe_gemm.fast_v9: not a recipe of the case's op" % f), r.stderr


def test_verify_names_the_seeds_of_a_mixed_directory(tmp_path, build_dir):
    """Files exported with seeds 1 and 7 into one directory, each written back with its reference:
    both pass, each result keeps its own seed, and the summary and stderr say the seeds differ."""
    import subprocess
    a, b = "ep_gather/kimi-k3/tp8/t16", "ep_gather/deepseek-v3/tp8/t16"
    assert moects.export(str(tmp_path), a, tier="all", seed=1) == 1
    assert moects.export(str(tmp_path), b, tier="all", seed=7) == 1
    for cid in (a, b):
        f = cid.replace("/", "__")
        t, m = st.load(str(tmp_path / (f + ".safetensors")))
        st.save(str(tmp_path / (f + ".out.safetensors")), {"out": t["ref.ep_gather.fma_v1"]}, {"out": "BF16"})
    moects_bin = os.path.join(build_dir, "bin", "moects")
    r = subprocess.run([moects_bin, "verify", str(tmp_path), "--out", str(tmp_path / "rep")], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "the files hold seeds 1, 7" in r.stderr or "the files hold seeds 7, 1" in r.stderr, r.stderr
    with open(tmp_path / "rep" / "results.json") as fh:
        assert {x["case"]: x["seed"] for x in json.load(fh)["results"]} == {a: 1, b: 7}
    assert "files of seeds" in (tmp_path / "rep" / "summary.md").read_text()
