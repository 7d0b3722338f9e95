"""The fused MoE layer from Python: a case's shape and tensors (by hand from the model's config),
examples/numpy_fused_moe.py within its layer recipe's enclosure on every smoke fused_moe case under
`moects run --kernel-py`, the same judgement in process through case.check(), two bugs users
make in such a layer (tests/python/fused_mutants.py), each caught, and a layer wrong in one stage
named by that stage through case.check(out, intermediates=...)."""
import json
import os
import subprocess

import numpy as np
import pytest

import fused_mutants as fm
import moects
import numpy_fused_moe as nf
from conftest import ROOT

MUTANTS = os.path.join(ROOT, "tests", "python", "fused_mutants.py")
BOUND = nf.kernel["bound"]


def test_fused_moe_shape_and_tensors():
    # gpt-oss-20b (config.json): hidden_size 2880, intermediate_size 2880, num_local_experts 32,
    # experts_per_token 4, swiglu_limit 7.0, alpha 1.702 (its modeling code), biases on both GEMMs.
    # TP16: I = 2880 / 16 = 180 per rank, every expert local.
    c = moects.case("fused_moe.bf16/gpt-oss-20b/tp16/t4/smoke")
    s, a = c.shape, c.args()
    assert (s["T"], s["k"], s["H"], s["I"], s["E"], s["E_global"]) == (4, 4, 2880, 180, 32, 32)
    assert (s["activation"], s["has_bias"], s["format"], s["has_expert_map"]) == ("gpt_oss", True, "bf16", False)
    assert s["act_limit"] == 7.0 and s["act_alpha"] == np.float32(1.702)
    assert a["x"].dtype == np.uint16 and a["x"].shape == (4, 2880)               # BF16 bits
    assert a["topk_ids"].shape == (4, 4) and a["topk_weights"].dtype == np.float32
    assert a["w13"].shape == (32, 360, 2880) and a["w2"].shape == (32, 2880, 180)  # N1 = 2I gated
    assert a["b13"].shape == (32, 360) and a["b2"].shape == (32, 2880)
    assert a["w13_scale"] is None and a["expert_map"] is None and a["out"].shape == (4, 2880)


def test_numpy_fused_moe_and_its_mutants(build_dir, tmp_path):
    r = subprocess.run([os.path.join(build_dir, "bin", "moects"), "run", "--kernel-py",
                        MUTANTS + ":all_kernels", "--kernel", "numpy.*", "--out", str(tmp_path), "fused_moe*"],
                       capture_output=True, text=True, timeout=1500)
    assert r.returncode == 0, r.stderr[-3000:]  # the honest kernel passes, both mutants are caught
    with open(tmp_path / "results.json") as f:
        res = {(x["kernel"], x["case"]): x["verdict"] for x in json.load(f)["results"]}
    cases = list(moects.cases("fused_moe*"))
    assert len(cases) >= 60
    caught = {"swapped_halves": 0, "bf16_combine": 0}
    for c in cases:
        v = res[("numpy.fused_moe.vllm", c.id)]
        if c.id.startswith("fused_moe.fp8_128/"):  # W8A8 needs mid=fp8_128: the BF16 recipe is refused
            assert v == "UNSUPPORTED", (c.id, v)
            continue
        if c.shape["format"] not in ("bf16", "mxfp4"):  # the example writes these two formats only
            assert v == "UNSUPPORTED", (c.id, v)
            continue
        assert v == "PASS_BOUNDED", (c.id, v)
        for m in caught:
            caught[m] += res[("numpy.mutant.fused_moe." + m, c.id)].startswith("FAIL")
    assert caught["swapped_halves"] >= 2 and caught["bf16_combine"] >= 2, caught


def test_case_check_in_process():
    # the same judgement as the runner's, from a test's own code: the layer's output passes its
    # recipe's enclosure; an all-zero output (what a tolerance test lets through) fails it
    c = moects.case("fused_moe.bf16/qwen3-30b-a3b/ep8/t2/smoke")
    args = c.args()
    nf.fused_moe(c.shape, args)
    assert c.judge(args["out"], recipe=nf.RECIPE, bound=BOUND).verdict == "PASS_BOUNDED"
    c.check(args["out"], recipe=nf.RECIPE, bound=BOUND)
    with pytest.raises(AssertionError):
        c.check(np.zeros_like(args["out"]), recipe=nf.RECIPE, bound=BOUND)
    with pytest.raises(ValueError):  # a layer is judged by its recipe: a tolerance is refused
        c.check(args["out"], recipe=nf.RECIPE, tolerance=(1e-2, 4))


def test_case_check_names_the_stage():
    # qwen3-30b-a3b's layer (silu, BF16 weights, EP8). Its intermediates, handed to check(), are held
    # to their stage enclosures and GEMM1's and GEMM2's to the accumulation check (the C side's rule,
    # moects_judge_stages): the honest layer passes with each GEMM stage's RMS noted. act_on_up
    # computes GEMM1 with the honest code, so g1_out is inside its enclosure, and its activation is
    # act(u) * g where act(g) * u is declared: the first stage outside its enclosure is act (by the
    # bug's definition; the output fails too).
    c = moects.case("fused_moe.bf16/qwen3-30b-a3b/ep8/t2/smoke")
    assert list(c.stages()) == ["g1_out", "act_out", "mid_out", "y_out"]
    assert c.stages()["mid_out"] == ("F64", (c.shape["T"] * c.shape["k"], c.shape["I"]))
    args, st = c.args(), nf.intermediates(c.shape)
    nf.fused_moe(c.shape, args, st)
    j = c.check(args["out"], recipe=nf.RECIPE, bound=BOUND, intermediates=st)
    assert "accumulation check of the stages (RMS): gemm1 " in j.text and ", gemm2 " in j.text, j.text
    args, st = c.args(), nf.intermediates(c.shape)
    fm.act_on_up(c.shape, args, st)
    with pytest.raises(AssertionError) as e:
        c.check(args["out"], recipe=nf.RECIPE, bound=BOUND, intermediates=st)
    assert "first stage outside its enclosure: act, slot (t " in str(e.value), str(e.value)
    with pytest.raises(ValueError):  # a stage the op does not have
        c.check(args["out"], recipe=nf.RECIPE, bound=BOUND, intermediates={"h_out": st["g1_out"]})
