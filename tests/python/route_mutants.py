"""Routing bugs users make, as Python kernels over examples/numpy_moe_route.py (each differs from it
in one place and declares the exact recipe it no longer meets), with the honest kernels (the example,
and one that breaks ties high and says so: ties=any):
    moects run --kernel-py tests/python/route_mutants.py:all_kernels --tier smoke 'moe_route*'"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples"))
import numpy_moe_route as nr  # noqa: E402


def select_ties_high(shape, sel):
    """The selection with equal scores going to the higher id (and equal groups to the higher group):
    the honest selection of the reversed row, its ids mapped back."""
    return shape["E"] - 1 - nr.select(shape, sel[::-1].copy())


def select_ties_high_canonical(shape, sel):
    """Ties high (another top-k of the same scores), the set then in the canonical selection order
    (score descending, id ascending): the order the recipe sums the weights in."""
    ids = select_ties_high(shape, sel)
    return ids[np.lexsort((ids, -sel[ids]))]


def weights_softmax_after_topk(shape, x, score, ids):
    """softmax: the weights a softmax over the k selected logits (gpt-oss's order) instead of the
    selected p renormalized (and never scaled)."""
    if shape["method"] != "softmax":
        return nr.weights(shape, x, score, ids)
    return nr.weights(dict(shape, method="topk_softmax"), x, score, ids)


def _kernel(name, bug, **kw):
    def run(shape, args):
        ids, w = nr.route(shape, args["logits"], args["bias"], **kw)
        args["topk_ids"][...] = ids
        args["topk_weights"][...] = w
    return {"name": "numpy.mutant.moe_route." + name, "op": "moe_route", "recipe": "moe_route.v1", "bug": bug,
            "run": run}


MUTANTS = {
    "ties_high": dict(bug="equal selection scores go to the higher id while declaring ties=low",
                      select=select_ties_high),
    "softmax_after_topk": dict(bug="softmax routers weigh by a softmax over the k selected logits, not the "
                               "renormalized p", weights=weights_softmax_after_topk),
}
mutants = [_kernel(n, **m) for n, m in MUTANTS.items()]


def _run_ties_any(shape, args):
    ids, w = nr.route(shape, args["logits"], args["bias"], select=select_ties_high_canonical)
    args["topk_ids"][...] = ids
    args["topk_weights"][...] = w


ties_any = {"name": "numpy.moe_route.ties_high", "op": "moe_route", "recipe": "moe_route.v1(ties=any,slots=sorted)",
            "run": _run_ties_any}
all_kernels = [nr.kernel, ties_any] + mutants


def reversed_sum(a):
    """The FP32 sum over the last axis, the last column first."""
    return nr.seq_sum(a[..., ::-1])


# Every sum (softmax denominator, renormalization) in reverse order: wrong under the exact recipe
# (sum=ordered), admissible under sum=any (a bounded claim). Not in all_kernels: test_route_examples.py
# judges it under both declarations.
sum_reversed = {"name": "numpy.mutant.moe_route.sum_reversed", "op": "moe_route", "recipe": "moe_route.v1",
                "bug": "sums the softmax denominator and the renormalization in reverse order while declaring "
                       "the exact order (sum=ordered)", "run": nr.runner(total=reversed_sum)}
sum_any = dict(sum_reversed, name="numpy.moe_route.sum_any", recipe="moe_route.v1(sum=any)", bug=None)
