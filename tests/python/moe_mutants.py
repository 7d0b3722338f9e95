"""Grouped MoE GEMM bugs as users make them, one each, over examples/numpy_moe_gemm.py: moects must
catch each on the cases where it changes the output and pass it where it cannot (tests/python/
test_moe_examples.py works out which from the inputs)."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples"))
import numpy_moe_gemm as nm  # noqa: E402


def one_alpha(shape, args):
    """Expert 0's alpha for every expert (NVFP4 global scales differ per expert)."""
    a = dict(args, alpha=np.full(shape["E"], np.asarray(args["alpha"])[0], dtype=np.float32))
    nm.moe_gemm(shape, a)


def expert0_scales(shape, args):
    """Expert 0's weight scales for every expert (the per-expert scale stride left out)."""
    sb = np.asarray(args["sb"]).reshape(shape["E"], -1)
    nm.moe_gemm(shape, dict(args, sb=np.broadcast_to(sb[0], sb.shape)))


def swizzle_as_linear(shape, args):
    """128x4-swizzled scales read as linear [rows][nkb]."""
    nm.moe_gemm(dict(shape, scale_layout="linear"), args)


def offsets_shifted(shape, args):
    """expert_offsets read one row late: expert e takes rows [off[e] + 1, off[e+1] + 1) (clipped)."""
    def groups(s, a):
        return [r[r + 1 < a["out"].reshape(-1, s["N"]).shape[0]] + 1 for r in nm.row_groups(s, a)]
    nm.moe_gemm(shape, args, groups if shape["rows"] == "offsets" else nm.row_groups)


def masked_cumsum(shape, args):
    """Masked rows placed at the running count (expert e at sum(masked_m[:e])), not at e * max_m."""
    def groups(s, a):
        n = np.asarray(a["masked_m"]).astype(int)
        return [int(n[:e].sum()) + np.arange(n[e]) for e in range(s["E"])]
    nm.moe_gemm(shape, args, groups if shape["rows"] == "masked" else nm.row_groups)


def offsets_left(shape, args):
    """A row's expert by searchsorted(expert_offsets, row, side="left") - 1: each expert's first row
    goes to the expert before it (row 0 to index -1, the last expert)."""
    def groups(s, a):
        off = np.asarray(a["expert_offsets"]).astype(int)
        rows = np.arange(off[-1])
        e = np.searchsorted(off, rows, side="left") - 1
        return [rows[(e % s["E"]) == x] for x in range(s["E"])]
    nm.moe_gemm(shape, args, groups if shape["rows"] == "offsets" else nm.row_groups)


def fp16_acc(shape, args):
    """Accumulation in float16: each 16-wide K slice's FP32 product added to an FP16 accumulator."""
    E, N, K = shape["E"], shape["N"], shape["K"]
    out = args["out"].reshape(-1, N)
    sb = np.asarray(args["sb"]).reshape(E, -1)
    for e, rows in enumerate(nm.row_groups(shape, args)):
        if len(rows) == 0:
            continue
        w = nm.dequant_fp4(args["b"][e], sb[e], N, K, shape["b_format"], shape["scale_layout"] == "swizzled_128x4")
        a = nm.dequant_a(shape, args, rows)
        acc = np.zeros((len(rows), N), dtype=np.float16)
        with np.errstate(over="ignore", invalid="ignore"):
            for k0 in range(0, K, 16):
                acc = (acc.astype(np.float32) + a[:, k0:k0 + 16] @ w[:, k0:k0 + 16].T).astype(np.float16)
            d = acc.astype(np.float32) * np.asarray(args["alpha"], dtype=np.float32)[e]
        out[rows] = nm.f32_to_bf16(d) if shape["out_dtype"] == "BF16" else d


def row_past_end(shape, args):
    """Each expert also writes its last row's result one row further (a row loop bound off by one,
    after every expert's own rows are written): harmless over padding, wrong over the next expert."""
    nm.moe_gemm(shape, args)
    out = args["out"].reshape(-1, shape["N"])
    for rows in nm.row_groups(shape, args):
        if len(rows) and rows[-1] + 1 < out.shape[0]:
            out[rows[-1] + 1] = out[rows[-1]]


def _mutant(f):
    return {"name": "numpy.mutant.moe_gemm." + f.__name__, "op": "moe_gemm", "bound": 24,
            "supports": nm.supports, "run": f, "bug": " ".join(f.__doc__.split())}


MUTANTS = [one_alpha, expert0_scales, swizzle_as_linear, offsets_shifted, masked_cumsum, offsets_left, fp16_acc,
           row_past_end]
all_kernels = [nm.kernel] + [_mutant(f) for f in MUTANTS]
