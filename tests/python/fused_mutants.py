"""Fused MoE layer bugs as users make them, one each, over examples/numpy_fused_moe.py (the layer's
recipe and bound declared unchanged): tests/python/test_fused_examples.py runs them under
`moects run --kernel-py` and expects each caught, and act_on_up with its exposed intermediates,
named by the stage it breaks."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples"))
import numpy_fused_moe as nf  # noqa: E402
from numpy_ep_gather import f32_to_bf16  # noqa: E402


def swapped_halves(shape, args):
    """Bug: W13 read as [up | gate] while the weights are [gate | up]."""
    w13 = np.asarray(args["w13"])
    n1 = w13.shape[1]
    args = dict(args, w13=np.concatenate([w13[:, n1 // 2:], w13[:, :n1 // 2]], axis=1))
    if args.get("w13_scale") is not None:
        sc = np.asarray(args["w13_scale"])
        args["w13_scale"] = np.concatenate([sc[:, n1 // 2:], sc[:, :n1 // 2]], axis=1)
    if args.get("b13") is not None:
        b = np.asarray(args["b13"])
        args["b13"] = np.concatenate([b[:, n1 // 2:], b[:, :n1 // 2]], axis=1)
    nf.fused_moe(shape, args)


def bf16_combine(shape, args):
    """Bug: the combine's running sum rounded to BF16 after each slot, the FP32 one declared."""
    T, k, H = shape["T"], shape["k"], shape["H"]
    per_slot = []
    for j in range(k):  # each slot's y alone: the layer with every other slot made invalid
        ids = np.array(args["topk_ids"]).reshape(T, k)
        keep = np.full_like(ids, -1)
        keep[:, j] = ids[:, j]
        one = dict(args, topk_ids=keep, out=np.zeros((T, H), dtype=np.float32))
        nf.fused_moe(dict(shape, out_dtype="F32"), one)
        per_slot.append(one["out"])
    acc = np.zeros((T, H), dtype=np.float32)
    for y in per_slot:
        acc = nf.bf16_round(acc + y)
    args["out"].reshape(T, H)[...] = f32_to_bf16(acc) if shape["out_dtype"] == "BF16" else acc


def act_on_up(shape, args, stages=None):
    """Bug: the gate's activation applied to the up half and multiplied by the gate (act(u) * g):
    GEMM1 as the honest layer's, the activation's output wrong."""
    nf.fused_moe(shape, args, stages, act=lambda s, g, u: nf.activation(s, u, g))


def _mutant(name, run, bug):
    return dict(nf.kernel, name="numpy.mutant.fused_moe." + name, run=run, bug=bug)


all_kernels = [nf.kernel, _mutant("swapped_halves", swapped_halves, swapped_halves.__doc__.strip()),
               _mutant("bf16_combine", bf16_combine, bf16_combine.__doc__.strip())]
