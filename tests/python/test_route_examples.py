"""Routing from Python: the shape and tensors a moe_route kernel gets (checked by hand against the
model's config), examples/numpy_moe_route.py exact on every smoke moe_route case under `moects run
--kernel-py`, two routing bugs (tests/python/route_mutants.py) each caught on exactly the cases where
their output differs from the example's, and case.check in process; the recipe's other keys from
Python: vLLM's reciprocals (norm=recip,renorm=recip) exact, numpy's float32 exp under fn=ulp4 bounded,
sums in reverse order caught under the exact recipe and admitted under sum=any."""
import json
import os
import re
import subprocess

import numpy as np
import pytest

import moects
from conftest import ROOT

MUTANTS = os.path.join(ROOT, "tests", "python", "route_mutants.py")


def test_route_shape_and_tensors():
    # DeepSeek-V3 (config.json): n_routed_experts 256, num_experts_per_tok 8, scoring_func sigmoid,
    # n_group 8, topk_group 4, routed_scaling_factor 2.5, norm_topk_prob true, topk_method noaux_tc
    # (an e_score_correction_bias [256]).
    c = moects.case("moe_route/deepseek-v3/t16")
    s, a = c.shape, c.args()
    assert (s["T"], s["E"], s["k"], s["method"], s["n_group"], s["topk_group"], s["renormalize"], s["scale"],
            s["has_bias"], s["logits_dtype"]) == (16, 256, 8, "sigmoid", 8, 4, True, 2.5, True, "F32")
    assert a["logits"].dtype == np.float32 and a["logits"].shape == (16, 256)
    assert a["bias"].dtype == np.float32 and a["bias"].shape == (256,)
    assert a["out"].shape == (32, 8)  # one buffer: the ids' rows, then the weights' rows
    assert a["topk_ids"].dtype == np.int32 and a["topk_ids"].shape == (16, 8)
    assert a["topk_weights"].dtype == np.float32 and a["topk_weights"].shape == (16, 8)
    a["topk_ids"][3, 5] = 7  # views of out, as moects_moe_route_args points into it
    a["topk_weights"][3, 5] = 0.5
    assert a["out"][:16].view(np.int32)[3, 5] == 7 and a["out"][16 + 3, 5] == 0.5
    # Mixtral 8x7B: num_local_experts 8, num_experts_per_tok 2, softmax, no bias; gpt-oss-20b: 32
    # experts, top-4, softmax over the selected logits; Llama 4 Scout: 16 experts, top-1
    for cid, want in (("moe_route/mixtral-8x7b/t16", (8, 2, "softmax", False)),
                      ("moe_route/gpt-oss-20b/t16", (32, 4, "topk_softmax", False)),
                      ("moe_route/llama-4-scout/t16", (16, 1, "llama4", False))):
        c = moects.case(cid)
        s = c.shape
        assert (s["E"], s["k"], s["method"], s["has_bias"]) == want, cid
        assert c.args()["bias"] is None


def test_route_kernel_declares_its_recipe():
    moects.Kernel("x", "moe_route", recipe="moe_route.v1(ties=any,slots=any)")
    moects.Kernel("x", "moe_route", recipe="moe_route.v1(fn=ulp4,sum=any,norm=recip,renorm=recip)")
    for bad in (dict(bound=24), dict(tolerance=(0.0, 1)), dict(recipe="moe_route.v1", bound=24)):
        with pytest.raises(ValueError, match="moe_route"):
            moects.Kernel("x", "moe_route", **bad)
    # keys and values the judge would refuse (ref/moe_route.c), refused when the kernel is described
    for bad, what in (("moe_route.v1(fn=ulp3)", "fn is one of cr|ulp1|ulp2|ulp4|ulp8"),
                      ("moe_route.v1(norm=mul)", "norm is one of div|recip"),
                      ("moe_route.v1(order=any)", "not a route recipe key"),
                      ("moe_route.v1(fn=ulp4", "expected moe_route.v1")):
        with pytest.raises(ValueError, match=re.escape(what)):
            moects.Kernel("x", "moe_route", recipe=bad)


def _out(kernel, case):
    a = case.args()
    kernel["run"](case.shape, a)
    return np.array(a["out"])  # a copy: the bits the runner judges


def _defined(case):
    """Rows whose logits hold no NaN: the others have no defined result and are not judged."""
    x = case.args()["logits"]
    nan = np.isnan(x) if x.dtype == np.float32 else (x.view(np.uint16) & 0x7FFF) > 0x7F80
    return ~nan.any(axis=1)


def test_numpy_route_and_its_mutants(build_dir, tmp_path):
    import numpy_moe_route as nr
    import route_mutants as rm
    r = subprocess.run([os.path.join(build_dir, "bin", "moects"), "run", "--kernel-py", MUTANTS + ":all_kernels",
                        "--tier", "smoke", "--out", str(tmp_path), "moe_route*"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]  # the example passes, each mutant caught
    with open(tmp_path / "results.json") as f:
        res = {(x["kernel"], x["case"]): x["verdict"] for x in json.load(f)["results"]}
    cases = moects.cases("moe_route*", tier="smoke")
    assert len(cases) == 42  # 21 models with a router: t16 and t40/smoke-adversarial each
    caught = {m["name"]: [] for m in rm.mutants}
    tied = []
    for c in cases:
        assert res[(nr.kernel["name"], c.id)] == "PASS_EXACT", c.id
        honest = _out(nr.kernel, c)
        # ties high, declared ties=any: PASS_TIE exactly where it chose other ids than the example
        ok = _defined(c)
        other = not np.array_equal(_out(rm.ties_any, c)[:c.shape["T"]][ok], honest[:c.shape["T"]][ok])
        assert res[(rm.ties_any["name"], c.id)] == ("PASS_TIE" if other else "PASS_EXACT"), c.id
        tied += [c.id] * other
        for m in rm.mutants:  # caught exactly where its bits differ from the example's
            changes = not np.array_equal(_out(m, c).view(np.uint32), honest.view(np.uint32))
            assert res[(m["name"], c.id)] == ("FAIL_MISMATCH" if changes else "PASS_EXACT"), (m["name"], c.id)
            if changes:
                caught[m["name"]].append(c.id)
        c.release()
    assert all(len(v) >= 2 for v in caught.values()), {k: len(v) for k, v in caught.items()}
    assert len(tied) >= 2 and all(cid.endswith("smoke-adversarial") for cid in tied), tied
    # ties are broken high only where a row ties: the adversarial cases' rows of equal values
    assert all(cid.endswith("smoke-adversarial") for cid in caught["numpy.mutant.moe_route.ties_high"])
    # softmax routers only
    assert all(moects.case(cid).shape["method"] == "softmax" for cid in caught["numpy.mutant.moe_route.softmax_after_topk"])


def test_check_in_process():
    import numpy_moe_route as nr
    import route_mutants as rm
    ties = 0
    for c in moects.cases("moe_route*", tier="smoke"):
        a = c.args()
        nr.run(c.shape, a)
        assert c.check(a["out"], recipe="moe_route.v1").verdict == "PASS_EXACT"
        assert c.check((a["topk_ids"], a["topk_weights"]), kernel=nr.kernel).verdict == "PASS_EXACT"
        assert c.check(a, recipe="moe_route.v1(ties=low,slots=sorted)").verdict == "PASS_EXACT"
        ids, w = a["topk_ids"].copy(), a["topk_weights"].copy()
        # a weight one ulp off
        w1 = w.copy()
        w1[0, 0] = np.nextafter(w1[0, 0], np.float32(np.inf))
        j = c.judge((ids, w1), recipe="moe_route.v1")
        assert j.verdict == "FAIL_MISMATCH" and "a weight not the recipe's bits" in j.text, (c.id, j.text)
        with pytest.raises(AssertionError, match="FAIL_MISMATCH"):
            c.check((ids, w1), recipe="moe_route.v1")
        if c.shape["k"] > 1:  # slots reversed: wrong under slots=sorted, the same set under slots=any
            assert c.judge((ids[:, ::-1], w[:, ::-1]), recipe="moe_route.v1").verdict == "FAIL_MISMATCH"
            assert c.judge((ids[:, ::-1], w[:, ::-1]), recipe="moe_route.v1(slots=any)").verdict == "PASS_EXACT"
        # ties broken high, slots in the canonical order: another top-k of the same scores, PASS_TIE
        # under ties=any (the kernel's own declaration), FAIL_MISMATCH under ties=low
        b = c.args()
        rm.ties_any["run"](c.shape, b)
        v = c.judge(b["out"], kernel=rm.ties_any).verdict
        ok = _defined(c)
        if not np.array_equal(b["topk_ids"][ok], ids[ok]):
            assert v == "PASS_TIE", c.id
            assert c.judge(b["out"], recipe="moe_route.v1").verdict == "FAIL_MISMATCH", c.id
            ties += 1
        else:
            assert v == "PASS_EXACT", c.id
        c.release()
    assert ties >= 2


def test_exp_f32_is_correctly_rounded():
    import numpy_moe_route as nr
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.uniform(-103, 88, 4000), rng.uniform(-9, 9, 4000)]).astype(np.float32)
    x = np.concatenate([x, np.float32([0, -0.0, 88.72283, 88.72284, -87.33655, -103.97208, -103.97209])])
    got = nr.exp_f32(x)
    want = np.float32([nr.exp_exact(float(v)) for v in x])
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
    assert nr.exp_f32(np.float32([-np.inf, np.inf])).tolist() == [0.0, np.inf]
    assert np.isnan(nr.exp_f32(np.float32([np.nan]))[0])


def _differs(a, b, case):
    """Whether outputs a and b (ids rows, then weights rows) differ in a row with a defined result."""
    T, ok = case.shape["T"], _defined(case)
    a, b = a.view(np.uint32), b.view(np.uint32)
    return not (np.array_equal(a[:T][ok], b[:T][ok]) and np.array_equal(a[T:][ok], b[T:][ok]))


def test_route_recipe_keys_from_python(build_dir, tmp_path):
    import numpy_moe_route as nr
    import route_mutants as rm
    r = subprocess.run([os.path.join(build_dir, "bin", "moects"), "run", "--kernel-py",
                        os.path.join(ROOT, "examples", "numpy_moe_route.py") + ":kernels", "--tier", "smoke",
                        "--out", str(tmp_path), "moe_route*"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    n = {"vllm_differs": 0, "fast_bounded": 0, "fast_differs": 0, "reversed_caught": 0}
    for c in moects.cases("moe_route*", tier="smoke"):
        exact = _out(nr.kernel, c)
        # vLLM's reciprocals: exact under their keys, caught under the dividing recipe where a bit moves
        out = _out(nr.kernel_vllm, c)
        assert c.judge(out, kernel=nr.kernel_vllm).verdict == "PASS_EXACT", c.id
        if _differs(out, exact, c):
            n["vllm_differs"] += 1
            assert c.judge(out, recipe="moe_route.v1").verdict == "FAIL_MISMATCH", c.id
        # numpy's float32 exp declared fn=ulp4: within the enclosure (a tie within it on near-tie rows)
        out = _out(nr.kernel_fast, c)
        v = c.judge(out, kernel=nr.kernel_fast).verdict
        assert v == "PASS_BOUNDED" or (v == "PASS_TIE" and c.id.endswith("smoke-adversarial")), (c.id, v)
        n["fast_bounded"] += v == "PASS_BOUNDED"
        if _differs(out, exact, c):
            n["fast_differs"] += 1
            assert c.judge(out, recipe="moe_route.v1").verdict == "FAIL_MISMATCH", c.id
        # sums in reverse order: caught under the exact recipe exactly where a bit moves, admitted as
        # sum=any
        out = _out(rm.sum_reversed, c)
        moved = _differs(out, exact, c)
        assert c.judge(out, kernel=rm.sum_reversed).verdict == ("FAIL_MISMATCH" if moved else "PASS_EXACT"), c.id
        assert c.judge(out, kernel=rm.sum_any).verdict in ("PASS_BOUNDED", "PASS_TIE"), c.id
        n["reversed_caught"] += moved
        c.release()
    # the keys are not no-ops on the smoke cases: each changes bits on several
    assert n["vllm_differs"] >= 2 and n["fast_differs"] >= 2 and n["reversed_caught"] >= 2, n
    assert n["fast_bounded"] >= 30, n


def test_numpy_exp_is_within_ulp4():
    """kernel_fast's claim: numpy's float32 exp within 4 floats (ordered bit patterns) of the
    correctly rounded value, on the arguments a softmax or sigmoid router takes."""
    import numpy_moe_route as nr
    rng = np.random.default_rng(2)
    x = np.concatenate([rng.uniform(-103, 88, 20000), rng.uniform(-9, 0, 20000)]).astype(np.float32)
    got, want = nr.fast_exp(x).view(np.int32).astype(np.int64), nr.exp_f32(x).view(np.int32).astype(np.int64)
    assert np.abs(got - want).max() <= 4
