"""The layout adapters from Python (python/moects/adapters.py, docs/adapters.md): libmoects's C
adapters and the numpy twin agree bit for bit and round-trip on random tensors of every registered
model's fused_moe shapes; the twin's scale tiles match offsets worked by hand from the cuBLAS
formula; and a layer case judged through the adapters (inputs in an engine layout, a numpy layer
kernel that reads that layout) gets the verdict, and the bits, of the same case judged directly."""
import os

import numpy as np
import pytest

import moects
import numpy_fused_moe as nf
from conftest import ROOT
from moects import adapters as A
from numpy_ep_gather import bf16_to_f32, f32_to_bf16
from numpy_moe_gemm import _UE8M0

NAMES = ["w13.up_gate.v1", "w13.interleave1.v1", "w13.interleave8.v1", "scales.nvfp4.swizzle_128x4.v1",
         "scales.mxfp4.swizzle_128x4.v1", "fp4.hi_first.v1"]


def test_registry_and_docs():
    assert A.names() == NAMES
    with open(os.path.join(ROOT, "docs", "adapters.md")) as f:
        doc = f.read()
    for name, conv in A.conventions().items():
        assert name in doc and len(conv) > 20, name
    with pytest.raises(ValueError):
        A.kind("w13.interleave1")  # a name without its version is no adapter


def _shapes():
    """(E, H, I, gated) of every registered model's fused_moe cases, each once, and the models."""
    seen, models = set(), set()
    for c in moects.cases("fused_moe*", tier="all"):
        s = c.info["shape"]
        seen.add((s["E"], s["H"], s["I"], s["activation"] != "relu2"))
        models.add(c.info["model"])
    return sorted(seen), models


def _both(name, x, rows, cols):
    """C forward == numpy forward, and each inverse gives x back, bit for bit."""
    y = A.adapt(name, x, rows, cols)
    assert np.array_equal(y, A.forward_np(name, x, rows, cols)), (name, rows, cols)
    back = x.view(np.uint8).reshape(-1)
    assert np.array_equal(A.adapt(name, y, rows, cols, inverse=True), back), (name, rows, cols)
    assert np.array_equal(A.inverse_np(name, y, rows, cols), back), (name, rows, cols)


def test_round_trip_every_registered_shape():
    rng = np.random.default_rng(29)
    shapes, models = _shapes()
    assert len(models) == len(os.listdir(os.path.join(ROOT, "cases", "models")))
    done = set()
    for (E, H, I, gated) in shapes:
        N1 = 2 * I if gated else I
        byte = lambda *d: rng.integers(0, 256, size=d, dtype=np.uint8)
        code_cols = min((H + 1) // 2, (1 << 16) // N1 + 1)  # one expert's codes, their first columns
        for name in NAMES:
            k = A.kind(name)
            if k == "w13" and gated and not (name == "w13.interleave8.v1" and I % 8):
                _both(name, rng.standard_normal((E, N1)).astype(np.float32), N1, 4)  # b13 of all experts
            if (name, H, I) in done or (k == "w13" and not gated):
                continue
            done.add((name, H, I))
            if k == "w13" and name == "w13.interleave8.v1" and I % 8:
                with pytest.raises(moects.MoectsError):
                    A.adapt(name, byte(N1, 4), N1, 4)
                continue
            if k == "scales":
                blk = 16 if ".nvfp4." in name else 32
                _both(name, byte(N1, -(-H // blk)), N1, -(-H // blk))  # W13's scales, one expert
                _both(name, byte(H, -(-I // blk)), H, -(-I // blk))    # W2's
            else:
                _both(name, byte(N1, code_cols), N1, code_cols)
                if k == "w13":
                    _both(name, byte(N1, -(-H // 32)), N1, -(-H // 32))


def test_numpy_tiles_by_hand():
    # 130 rows x 5 K-blocks; offsets ((r / 128) * 2 + kb / 4) * 512 + (r % 32) * 16 + ((r / 32) % 4) * 4
    # + kb % 4 worked by hand (cuBLAS "1D Block Scaling Factors Layout")
    lin = (np.arange(130 * 5) % 251).astype(np.uint8).reshape(130, 5)
    t = A.forward_np("scales.mxfp4.swizzle_128x4.v1", lin, 130, 5)
    assert t.size == 2048
    for r, kb, off in [(0, 0, 0), (1, 0, 16), (32, 0, 4), (33, 3, 23), (64, 1, 9), (127, 3, 511), (0, 4, 512),
                       (127, 4, 1020), (128, 0, 1024), (129, 4, 1552)]:
        assert t[off] == lin[r, kb], (r, kb, off)
    assert t[513] == 0xFF and t[1056] == 0xFF  # K-block 5 of row 0, row 130: padding, a NaN scale


# ---- a layer judged through the adapters ----

_E2M1 = np.array([0, .5, 1, 1.5, 2, 3, 4, 6, -0., -.5, -1, -1.5, -2, -3, -4, -6], dtype=np.float32)


def _engine_weights(shape, args, which, e):
    """Expert e's W13 / W2 as float32 read in the engine layout: BF16 as is; MXFP4 codes with element
    2j in the high nibble, UE8M0 scales in the 128x4 tiles (the tile offset formula, per expert)."""
    w = np.asarray(args[which])[e]
    if shape["format"] == "bf16":
        return bf16_to_f32(w)
    rows, K = w.shape[0], 2 * w.shape[1]
    codes = np.stack([w >> 4, w & 0xF], axis=-1).reshape(rows, K)
    r, kb = np.meshgrid(np.arange(rows), np.arange(K // 32), indexing="ij")
    off = ((r // 128) * (-(-(K // 32) // 4)) + kb // 4) * 512 + (r % 32) * 16 + ((r // 32) % 4) * 4 + kb % 4
    scales = np.asarray(args[which + "_scale"])[e][off]
    with np.errstate(invalid="ignore"):
        return _E2M1[codes] * np.repeat(_UE8M0[scales], 32, axis=1)


def engine_fused(shape, args, order="interleave1"):
    """numpy_fused_moe's layer, reading W13 in gpt-oss's interleaved order (gate even rows, up odd)
    or DeepGEMM's granules of 8, and MXFP4 weights in the engine layout above."""
    T, k, H, I = shape["T"], shape["k"], shape["H"], shape["I"]
    x = bf16_to_f32(np.asarray(args["x"]).reshape(T, H))
    w = np.asarray(args["topk_weights"], dtype=np.float32).reshape(T, k)
    slot_e = nf.local_slots(shape, args).reshape(T, k)
    gate_rows = (np.arange(I) * 2 if order == "interleave1" else
                 16 * (np.arange(I) // 8) + np.arange(I) % 8 if order == "interleave8" else np.arange(I))
    up_rows = gate_rows + (1 if order == "interleave1" else 8 if order == "interleave8" else I)
    y = np.zeros((T, k, H), dtype=np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        for e in np.unique(slot_e[slot_e >= 0]):
            t, j = np.nonzero(slot_e == e)
            g1 = x[t] @ _engine_weights(shape, args, "w13", e).T
            if args["b13"] is not None:
                g1 = g1 + np.asarray(args["b13"])[e]
            g1 = nf.bf16_round(g1)
            a = nf.activation(shape, g1[:, gate_rows], g1[:, up_rows])
            v = nf.bf16_round(a) @ _engine_weights(shape, args, "w2", e).T
            if args["b2"] is not None:
                v = v + np.asarray(args["b2"])[e]
            y[t, j] = nf.bf16_round(v * w[t, j][:, None])
        acc = np.zeros((T, H), dtype=np.float32)
        for j in range(k):
            acc = np.where((slot_e[:, j] >= 0)[:, None], acc + y[:, j], acc)
    args["out"][...] = (f32_to_bf16(acc) if shape["out_dtype"] == "BF16" else acc).reshape(args["out"].shape)


LAYOUTS = {  # case -> (W13 order the engine kernel reads, the layout its inputs come in)
    "fused_moe.bf16/gpt-oss-20b/tp16/t4/smoke": ("interleave1", ["w13.interleave1.v1"]),
    "fused_moe.bf16/gpt-oss-20b/tp16/t4/smoke-adversarial": ("interleave1", ["w13.interleave1.v1"]),
    "fused_moe.mxfp4/qwen3-235b-a22b/tp16/t2/smoke": (
        "interleave1", ["w13.interleave1.v1", "scales.mxfp4.swizzle_128x4.v1", "fp4.hi_first.v1"]),
    "fused_moe.mxfp4/deepseek-v3/tp16/t1/smoke-adversarial": (
        "interleave8", ["fp4.hi_first.v1", "scales.mxfp4.swizzle_128x4.v1", "w13.interleave8.v1"]),
}


@pytest.mark.parametrize("case_id", sorted(LAYOUTS))
def test_layer_through_adapters_same_verdict(case_id):
    c = moects.case(case_id)
    order, layout = LAYOUTS[case_id]
    direct = c.args()
    nf.fused_moe(c.shape, direct)
    want = c.judge(direct["out"], recipe=nf.RECIPE, bound=nf.kernel["bound"])
    eng = c.args(layout=layout)
    engine_fused(c.shape, eng, order)
    got = c.judge(eng["out"], recipe=nf.RECIPE, bound=nf.kernel["bound"])
    assert (got.verdict, want.verdict) == ("PASS_BOUNDED", "PASS_BOUNDED"), (got.text, want.text)
    assert np.array_equal(eng["out"].view(np.uint8), direct["out"].view(np.uint8))  # the same bits
    if c.shape["format"] == "bf16":  # the engine kernel on inputs left in moects' layout: wrong rows, caught
        plain = c.args()
        engine_fused(c.shape, plain, order)
        assert c.judge(plain["out"], recipe=nf.RECIPE, bound=nf.kernel["bound"]).verdict.startswith("FAIL")


def test_layout_errors():
    c = moects.case("fused_moe.bf16/gpt-oss-20b/tp16/t4/smoke")
    with pytest.raises(ValueError):  # BF16 weights have no MXFP4 scales
        c.inputs(layout="scales.mxfp4.swizzle_128x4.v1")
    with pytest.raises(ValueError):  # two W13 orders at once
        c.inputs(layout=["w13.up_gate.v1", "w13.interleave1.v1"])
    with pytest.raises(moects.MoectsError):  # gpt-oss-20b on tp16: I = 180, not a multiple of 8
        c.inputs(layout="w13.interleave8.v1")
