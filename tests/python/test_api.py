"""The package over libmoects: case selection, shapes, inputs, check() and its diagnostics, errors.
Expected values come from the registry's model files, DESIGN.md's tensor layouts, or are worked out
by hand (a one-bit change of a bf16 value is 1 ULP)."""
import json
import os
import subprocess

import numpy as np
import pytest

import moects
from conftest import ROOT

KIMI = "ep_gather/kimi-k3/tp8/t16"


def test_selection_is_the_clis(build_dir):
    out = subprocess.run([os.path.join(build_dir, "bin", "moects"), "list", "ep_gather/kimi-k3/*", "--tier", "smoke"],
                         check=True, capture_output=True, text=True).stdout
    assert [c.id for c in moects.cases("ep_gather/kimi-k3/*", tier="smoke")] == [l.split()[0] for l in out.splitlines()]


def test_shape_comes_from_the_model_file():
    with open(os.path.join(ROOT, "cases", "models", "kimi-k3.json")) as f:
        model = json.load(f)
    c = moects.case(KIMI)
    assert (c.id, c.op) == (KIMI, "ep_gather")
    assert c.shape["H"] == model["latent_size"] == 3584  # ep_gather runs at the latent width
    assert c.shape["k"] == model["experts_per_token"] and c.shape["T"] == 16
    assert c.shape["M_sum"] > 0  # filled in once the inputs are built


def test_inputs_have_the_abi_layout():
    c = moects.case(KIMI)
    a = c.inputs()
    s = c.shape
    assert list(a) == ["x", "topk_ids", "topk_weights", "input_index", "expert_map"]
    assert a["x"].shape == (s["M_sum"], s["H"]) and a["x"].dtype == np.uint16
    assert a["topk_ids"].shape == (s["T"], s["k"]) and a["topk_ids"].dtype == np.int32
    assert a["topk_weights"].dtype == np.float32 and a["input_index"].dtype == np.int32
    assert a["expert_map"] is None  # tp8: no expert parallelism, no map
    out = c.empty_output()
    assert out.shape == (s["T"], s["H"]) and out.dtype == np.uint16
    assert np.all((out & 0x7FFF) > 0x7F80)  # poisoned with NaN


def test_same_seed_same_bytes_other_seed_other_bytes():
    x1 = moects.case(KIMI).inputs()["x"].copy()
    x2 = moects.case(KIMI).inputs()["x"]
    x3 = moects.case(KIMI, seed=2).inputs()["x"]
    assert np.array_equal(x1, x2) and not np.array_equal(x1, x3)


def test_check_passes_the_reference_and_names_a_flipped_bit():
    c = moects.case(KIMI)
    ref = c.reference("ep_gather.fma_v1").copy()
    assert c.check(ref, recipe="ep_gather.fma_v1").verdict == "PASS_EXACT"
    i = int(np.flatnonzero((ref & 0x7FFF) != 0)[0])  # a non-zero element: its last bit flipped is 1 ULP away
    bad = ref.copy()
    bad.reshape(-1)[i] ^= 1
    with pytest.raises(AssertionError) as e:
        c.check(bad, recipe="ep_gather.fma_v1", name="py.test.flipped")
    text = str(e.value)
    assert "FAIL_MISMATCH" in text and "mismatches: 1" in text and "max_ulp: 1" in text
    assert "py.test.flipped" in text and KIMI in text
    assert c.judgements[-1].record["verdict"] == "FAIL_MISMATCH"


def test_check_needs_a_declaration():
    c = moects.case(KIMI)
    with pytest.raises(ValueError, match="declare"):
        c.check(c.reference("ep_gather.fma_v1"))


def test_errors_name_the_field():
    with pytest.raises(moects.MoectsError, match="tier"):
        moects.cases("ep_gather/*", tier="smok")
    with pytest.raises(KeyError):
        moects.case("ep_gather/no-such-model/tp1/t1")
    with pytest.raises(ValueError, match="op"):
        moects.Kernel("x", "ep_gatherr", recipe="ep_gather.fma_v1")


def test_raw_config_selection():
    cfg = os.path.join(ROOT, "cases", "sources", "hf-configs", "moonshotai--Kimi-K3.config.json")
    cs = moects.cases("ep_gather/*", config=cfg, tp=8, tier="all")
    assert cs and all("/tp8/" in c.id for c in cs) and all(c.info["shape"]["H"] == 3584 for c in cs)


def test_inputs_are_read_only_and_output_margins_are_checked():
    """In-process (the pytest route): an input written raises at the write; a write just past the
    output's end or just before its start is FAIL_OOB_WRITE naming side and byte offset, as the
    runner's guards do (the margins' canary bytes, not the output's poison, changed)."""
    import ctypes
    c = moects.case("ep_gather/kimi-k3/tp8/t16")
    a = c.args()
    with pytest.raises(ValueError, match="read-only"):
        a["x"][0, 0] = 1
    with pytest.raises(ValueError, match="read-only"):
        c.reference("ep_gather.fma_v1")[0, 0] = 1
    ref = c.reference("ep_gather.fma_v1")
    out = c.empty_output()
    out[...] = ref
    assert c.judge(out, recipe="ep_gather.fma_v1").verdict == "PASS_EXACT"
    ctypes.memmove(out.ctypes.data + out.nbytes + 6, b"\x01\x00", 2)  # one BF16 element, 3 past the end
    j = c.judge(out, recipe="ep_gather.fma_v1")
    assert (j.verdict, j.record["reason"]) == ("FAIL_OOB_WRITE", "out: write after the end (byte offset +6)"), j.text
    out = c.empty_output()
    out[...] = ref
    ctypes.memmove(out.ctypes.data - 3, b"\x00", 1)
    j = c.judge(out, recipe="ep_gather.fma_v1")
    assert (j.verdict, j.record["reason"]) == ("FAIL_OOB_WRITE", "out: write before the start (byte offset -3)"), j.text


@pytest.mark.parametrize("globs, tier", [
    ((), None), ((), "all"), (("*",), "full"), (("ep_gather/kimi-k3/tp8/t128",), None),
    (("ep_gather/kimi-k3/tp8/t128", "fp4_gemm.mxfp4/kimi-k3/*"), None), (("moe_gemm*",), "smoke,full"),
    (("fp4_gemm.*/regression/*",), "large"),
])
def test_cli_and_library_select_the_same_ids(build_dir, globs, tier):
    """One selection rule (cases/select.c): `moects list WORDS` and moects.cases(WORDS) give the same
    ids, in the same order, on the whole registry (an exact id outside the default tier included)."""
    argv = [os.path.join(build_dir, "bin", "moects"), "list", *globs] + (["--tier", tier] if tier else [])
    out = subprocess.run(argv, capture_output=True, text=True)
    cli = out.stdout.split() if out.returncode == 0 else []
    assert [c.id for c in moects.cases(*globs, tier=tier)] == cli, out.stderr
