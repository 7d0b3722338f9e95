"""numpy_fused_moe.py: the whole MoE layer in numpy, as engines' torch reference layers write it
(DESIGN.md "The fused MoE layer", docs/fused_moe.md), for BF16 and MXFP4 (W4A16) weights, every
activation moects defines, expert biases, EP's expert_map and the router weight on the input:

    for each token t and valid slot j (expert e):
      g1  = bf16(x[t] @ W13[e]^T + b13[e])       rows [0, I) gate, [I, 2I) up (vLLM's order)
      a   = bf16(act(gate)) * up              (gpt-oss: (up' + 1) * bf16(g' sigmoid(alpha g')))
      m   = bf16(a)                           the intermediate GEMM2 reads
      y   = bf16((m @ W2[e]^T + b2[e]) * w)   the router weight in GEMM2's epilogue
    out[t] = bf16(sum over valid slots of y, FP32 in slot order)

It declares that recipe, vLLM's TritonExperts defaults with an FP32 router weight,
    fused_moe.layer_v1(w13=gate_up,g1=bf16,act=bf16,sig=div,mid=bf16,weight=gemm2,slot=bf16,
                       combine=f32_slots,fn=ulp1)
and the accumulation class of numpy's float32 matmul (BLAS sgemm: FP32, any order, 24 bits RNE):
a bounded claim, judged by the layer's enclosure (docs/fused_moe_enclosure.md, PASS_BOUNDED).
exp, tanh and erf are computed in float64 and rounded to float32: within one FP32 ulp of the
correctly rounded value (the float64 result is within 2^-52 relative of the true one, and one more
rounding to 24 bits adds at most half an ulp), hence fn=ulp1. Everything else is one float32
operation in the recipe's order, as numpy does float32 arithmetic (no fused multiply-add).

    moects run --kernel-py examples/numpy_fused_moe.py:kernel 'fused_moe*'

fused_moe(shape, args, stages) also fills stages (intermediates(shape)) with its exposed
intermediates, which case.check(out, intermediates=stages) holds to their enclosures stage by stage
(docs/fused_moe.md "Exposed intermediates").
"""
import math

import numpy as np

from numpy_ep_gather import bf16_to_f32, f32_to_bf16
from numpy_moe_gemm import _UE8M0, decode_e2m1

RECIPE = ("fused_moe.layer_v1(w13=gate_up,g1=bf16,act=bf16,sig=div,mid=bf16,weight=gemm2,slot=bf16,"
          "combine=f32_slots,fn=ulp1)")
_F = np.float32


def bf16_round(v):
    """float32 -> float32 rounded to BF16 (RNE, NaN kept)."""
    return bf16_to_f32(f32_to_bf16(np.asarray(v, dtype=_F)))


def _f64(fn, v):
    """fn (a float64 numpy ufunc or math function) of float32 v, rounded to float32 (within 1 ulp)."""
    with np.errstate(over="ignore", invalid="ignore"):
        if isinstance(fn, np.ufunc):
            return fn(np.asarray(v, dtype=np.float64)).astype(_F)
        return np.vectorize(fn, otypes=[np.float64])(np.asarray(v, dtype=np.float64)).astype(_F)


def weights(shape, args, which, e):
    """Local expert e's weights of W13 ("w13", [N1, H]) or W2 ("w2", [H, I]) as float32: BF16
    values, or MXFP4 (E2M1 codes with a UE8M0 scale per 32 along K) decoded exactly."""
    w = np.asarray(args[which])[e]
    if shape["format"] == "bf16":
        return bf16_to_f32(w)
    with np.errstate(invalid="ignore"):  # 0 x a NaN scale (0xFF): NaN, as the format says
        return decode_e2m1(w, w.shape[1] * 2) * np.repeat(_UE8M0[np.asarray(args[which + "_scale"])[e]], 32, axis=1)


def activation(shape, g, u):
    """The activation of gate g and up u (float32 [rows, I]), vLLM's forms in the recipe's order
    (ref/fused_moe_act.c names each source); the gate's activation rounded to BF16 (act=bf16)."""
    act, L, alpha = shape["activation"], _F(shape["act_limit"]), _F(shape["act_alpha"])
    one, half = _F(1.0), _F(0.5)
    with np.errstate(over="ignore", invalid="ignore"):
        if act == "relu2":
            m = np.where(g > 0, g, np.where(np.isnan(g), g, _F(0.0)))
            return bf16_round(m * m)
        if act in ("silu_clamp", "gpt_oss"):
            g = np.where(g > L, L, g)
            u = np.where(u > L, L, np.where(u < -L, -L, u))
        if act == "situ" and L > 0:  # u' = L tanh(u (1/L)), the reciprocal an FP32 division
            u = L * _f64(np.tanh, u * (one / L))
        if act == "gpt_oss":
            glu = g / (one + _f64(np.exp, -(g * alpha)))
            return (u + one) * bf16_round(glu)
        if act == "gelu_tanh":
            beta, kappa = _F(math.sqrt(2.0) * (2.0 / math.sqrt(math.pi)) * 0.5), _F(0.044715)
            inner = beta * (g + kappa * (g * g * g))
            ga = half * g * (one + _f64(np.tanh, inner))
        elif act == "gelu_erf":
            ga = g * half * (one + _f64(math.erf, g * _F(math.sqrt(0.5))))
        elif act == "situ":  # Kimi K3: a = act_alpha, (a tanh(g (1/a))) / (1 + exp(-g))
            ga = (alpha * _f64(np.tanh, g * (one / alpha))) / (one + _f64(np.exp, -g))
        else:  # silu, silu_clamp
            ga = g / (one + _f64(np.exp, -g))
        return bf16_round(ga) * u


def local_slots(shape, args):
    """[T, k] local expert of every slot, -1 where it is not valid (an id out of range, or one the
    expert_map leaves out)."""
    ids = np.asarray(args["topk_ids"]).astype(np.int64)
    E, Eg = shape["E"], shape["E_global"]
    if not shape["has_expert_map"]:
        return np.where((ids >= 0) & (ids < E), ids, -1)
    emap = np.asarray(args["expert_map"]).astype(np.int64)
    inside = (ids >= 0) & (ids < Eg)
    return np.where(inside, emap[np.clip(ids, 0, Eg - 1)], -1)


def supports(shape):
    if shape["format"] not in ("bf16", "mxfp4"):
        return False, "format: weight format %s not written in this example" % shape["format"]
    return True


def intermediates(shape):
    """Empty exposed intermediates of the layer, as moects_fused_moe_args names them (row t * k + j per
    slot): g1_out [T*k, N1] and act_out [T*k, I] float32, mid_out [T*k, I] float64, y_out [T*k, H]
    float32; NaN until fused_moe writes a valid slot's rows."""
    rows, I, H = shape["T"] * shape["k"], shape["I"], shape["H"]
    n1 = I if shape["activation"] == "relu2" else 2 * I
    return {"g1_out": np.full((rows, n1), np.nan, _F), "act_out": np.full((rows, I), np.nan, _F),
            "mid_out": np.full((rows, I), np.nan), "y_out": np.full((rows, H), np.nan, _F)}


def fused_moe(shape, args, stages=None, act=None):
    """args["out"] [T, H] (BF16 bits or FP32): the layer of the module docstring. stages (from
    intermediates(shape)), when given, receives each valid slot's GEMM1 output, activation, the
    intermediate and GEMM2's per-slot output. act: the activation (default activation(); a test
    hands in a wrong one)."""
    T, k, H, I = shape["T"], shape["k"], shape["H"], shape["I"]
    act = act or activation
    out = args["out"].reshape(T, H)
    x = bf16_to_f32(np.asarray(args["x"]).reshape(T, H))
    w = np.asarray(args["topk_weights"], dtype=_F).reshape(T, k)
    slot_e = local_slots(shape, args).reshape(T, k)
    b13, b2 = args["b13"], args["b2"]
    y = np.zeros((T, k, H), dtype=_F)
    with np.errstate(over="ignore", invalid="ignore"):
        for e in np.unique(slot_e[slot_e >= 0]):
            t, j = np.nonzero(slot_e == e)
            g1 = x[t] @ weights(shape, args, "w13", e).T
            if b13 is not None:
                g1 = g1 + np.asarray(b13)[e]
            g1 = bf16_round(g1)
            a = act(shape, g1[:, :I], g1[:, I:]) if shape["activation"] != "relu2" else act(shape, g1, None)
            v = bf16_round(a) @ weights(shape, args, "w2", e).T
            if b2 is not None:
                v = v + np.asarray(b2)[e]
            y[t, j] = bf16_round(v * w[t, j][:, None])
            if stages is not None:
                for name, val in (("g1_out", g1), ("act_out", a), ("mid_out", bf16_round(a)), ("y_out", y[t, j])):
                    stages[name][t * k + j] = val
        acc = np.zeros((T, H), dtype=_F)
        for j in range(k):  # FP32 in slot order, invalid slots skipped
            acc = np.where((slot_e[:, j] >= 0)[:, None], acc + y[:, j], acc)
    out[...] = f32_to_bf16(acc) if shape["out_dtype"] == "BF16" else acc


kernel = {"name": "numpy.fused_moe.vllm", "op": "fused_moe", "recipe": RECIPE,
          "bound": {"bits": 24, "truncation": False}, "supports": supports, "run": fused_moe}
