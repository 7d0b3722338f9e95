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


def _mutant(f):
    return {"name": "numpy.mutant.moe_gemm." + f.__name__, "op": "moe_gemm", "bound": 24,
            "supports": nm.supports, "run": f, "bug": " ".join(f.__doc__.split())}


MUTANTS = [one_alpha, expert0_scales, swizzle_as_linear, offsets_shifted]
all_kernels = [nm.kernel] + [_mutant(f) for f in MUTANTS]
