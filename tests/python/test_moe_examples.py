"""The grouped MoE GEMM from Python: the shape and tensors a moe_gemm kernel gets (by hand from the
model's config), examples/numpy_moe_gemm.py within its declared bound on every smoke moe_gemm case
under `moects run --kernel-py`, and seven bugs users make (tests/python/moe_mutants.py), each caught on
exactly the cases where the inputs say it changes the output."""
import json
import os
import subprocess

import numpy as np

import moects
from conftest import ROOT

MUTANTS = os.path.join(ROOT, "tests", "python", "moe_mutants.py")


def test_moe_gemm_shape_and_tensors():
    # DeepSeek-V3 (config.json): 256 routed experts, hidden 7168, moe_intermediate_size 2048. EP64:
    # 4 local experts; gemm2 (down projection): N = hidden, K = moe_intermediate_size.
    c = moects.case("moe_gemm.w4a16/deepseek-v3/ep64/contiguous/gemm2/t16")
    a = c.args()
    s = c.shape
    assert (s["E"], s["N"], s["K"], s["format"], s["b_format"], s["rows"], s["align"]) == \
        (4, 7168, 2048, "w4a16", "mxfp4", "contiguous", 128)
    ex = a["m_indices"]
    counts = [int((ex == e).sum()) for e in range(4)]
    assert s["M"] == sum((n + 127) // 128 * 128 for n in counts) == ex.shape[0]  # groups padded to 128
    assert a["a"].dtype == np.uint16 and a["a"].shape == (s["M"], 2048)        # BF16 bits
    assert a["b"].shape == (4, 7168, 1024) and a["sb"].shape == (4, 7168, 64)  # E2M1 pairs, K/32 scales
    assert a["alpha"].tolist() == [1.0] * 4 and a["out"].shape == (s["M"], 7168)
    assert all(a[k] is None for k in ("sa", "gs_a", "gs_b", "masked_m", "expert_offsets"))
    # Kimi K2: 384 experts, EP64: 6 local; masked rows: A [E, max_m, K], W4A8: E4M3 bytes, UE8M0 per 128
    c = moects.case("moe_gemm.w4a8/kimi-k2/ep64/masked/gemm2/t16")
    a, s = c.args(), c.shape
    assert (s["E"], s["rows"], s["format"], s["a_scale_block"]) == (6, "masked", "w4a8", 128)
    assert a["a"].shape == (6, s["M"], s["K"]) and a["sa"].shape == (6, s["M"], s["K"] // 128)
    assert a["masked_m"].shape == (6,) and a["out"].shape == (6, s["M"], s["N"])


def same_row(case, r):
    """Whether the reference's row r + 1 holds row r's bits (then copying r over it changes nothing)."""
    ref = np.asarray(case.reference()).reshape(-1, case.shape["N"])
    return np.array_equal(ref[r].view(np.uint8), ref[r + 1].view(np.uint8))


def triggers(case):
    """{mutant: whether its bug changes this case's output}, from the inputs alone."""
    s, a = case.shape, case.args()
    import numpy_moe_gemm as nm
    rows = nm.row_groups(s, a)
    used = [e for e in range(s["E"]) if len(rows[e])]
    sb = np.asarray(a["sb"]).reshape(s["E"], -1)
    n = np.asarray(a["masked_m"]).astype(int) if s["rows"] == "masked" else None
    off = np.asarray(a["expert_offsets"]).astype(int) if s["rows"] == "offsets" else None
    valid = set(int(r) for g in rows for r in g)
    return {"one_alpha": any(a["alpha"][e] != a["alpha"][0] for e in used),
            "expert0_scales": any(e > 0 and not np.array_equal(sb[e], sb[0]) for e in used),
            "swizzle_as_linear": s["scale_layout"] == "swizzled_128x4" and bool(used),
            "offsets_shifted": s["rows"] == "offsets" and bool(used),
            # an expert after an empty one starts elsewhere than at e * max_m
            "masked_cumsum": n is not None and any(n[:e].sum() != e * s["M"] for e in used),
            # an expert's first row goes to the expert before the first offset equal to its own
            "offsets_left": off is not None and any((int(np.argmax(off == off[e])) - 1) % s["E"] != e for e in used),
            # FP16 partial sums (11 bits) miss a 24-bit bound by far on F32 outputs; on BF16 ones the
            # bound can hide them, the accumulation check cannot once K >= 64 (K/16 >= 4 slices: an
            # 11-bit running sum errs by some 0.1 BF16 ULP or more, against sigma of a 24-bit one,
            # some 2^-24 K of the result); at K 32 two MXFP4 slices may sum exactly in FP16
            "fp16_acc": bool(used) if s["out_dtype"] == "F32" or s["K"] >= 64 else None,
            # the row after an expert's last is another expert's compared row (no padding between), and
            # not already equal to it (same bits: a copy changes nothing)
            "row_past_end": any(len(rows[e]) and rows[e][-1] + 1 in valid and
                                not same_row(case, rows[e][-1]) for e in used)}


def test_numpy_moe_gemm_and_its_mutants(build_dir, tmp_path):
    r = subprocess.run([os.path.join(build_dir, "bin", "moects"), "run", "--kernel-py", MUTANTS + ":all_kernels",
                        "--kernel", "numpy.*", "--out", str(tmp_path), "moe_gemm*"],
                       capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, r.stderr[-3000:]  # the honest kernel passes, every mutant is caught
    with open(tmp_path / "results.json") as f:
        results = json.load(f)["results"]
    res = {(x["kernel"], x["case"]): x["verdict"] for x in results}
    hashed = {x["case"]: set(x.get("input_xxh64", {})) for x in results}
    reasons = {x["case"]: x["reason"] for x in results if x["kernel"] == "numpy.moe_gemm.dequant_matmul"}
    cases = list(moects.cases("moe_gemm*"))
    # 23 models, 25 regressions; moe-layouts: 4 formats x 3 rows x 2 outputs + 6 W4A16-NVFP4 + 4 formats x 2 no-padding
    assert len(cases) == 48 + 38
    caught = {m: 0 for m in ("one_alpha", "expert0_scales", "swizzle_as_linear", "offsets_shifted", "masked_cumsum",
                             "offsets_left", "fp16_acc", "row_past_end")}
    for c in cases:
        assert res[("numpy.moe_gemm.dequant_matmul", c.id)] == "PASS_BOUNDED", c.id
        # input hashes name the case's tensors: W4A16 has no A scales (once hashed as "(null)")
        assert "a" in hashed[c.id] and hashed[c.id] <= set(c.args()) - {"out"}, (c.id, hashed[c.id])
        assert ("sa" in hashed[c.id]) == (c.shape["format"] != "w4a16"), (c.id, hashed[c.id])
        # a case whose experts hold no row compares nothing, and its pass says so
        import numpy_moe_gemm as nm
        empty = not any(len(g) for g in nm.row_groups(c.shape, c.args()))
        assert reasons[c.id].startswith("nothing compared: no expert holds a row") == empty, (c.id, reasons[c.id])
        for m, changes in triggers(c).items():
            v = res[("numpy.mutant.moe_gemm." + m, c.id)]
            if changes is None:  # not worked out: either verdict
                assert v in ("FAIL_MISMATCH", "PASS_BOUNDED"), (m, c.id, v)
                continue
            assert (v == "FAIL_MISMATCH") if changes else (v == "PASS_BOUNDED"), (m, c.id, v)
            caught[m] += changes
        c.release()
    assert all(caught.values()), caught
