"""bad_kernels.py: Python kernels that fail in the ways the runner must isolate or name, each only on cases
with T >= 2 (a T = 1 case runs the honest numpy ep_gather), for `moects run --kernel-py` and the
pytest plugin's tests (tests/python/test_kernel_py.py)."""
import os
import signal
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples"))
import numpy_ep_gather  # noqa: E402


def _bad(action):
    def run(shape, args):
        if shape["T"] >= 2:
            action()
        numpy_ep_gather.ep_gather(shape, args)
    return run


def _raise():
    raise ValueError("boom from the python kernel")


def _kill():
    os.kill(os.getpid(), signal.SIGKILL)


def _hang():
    while True:
        time.sleep(60)


def _returns(shape, args):
    if shape["T"] >= 2:  # a result of its own, returned; args["out"] left as the runner filled it
        return np.zeros((3, 5), np.float32)
    numpy_ep_gather.ep_gather(shape, args)


def _kernel(name, bug, action):
    return {"name": name, "op": "ep_gather", "device": "cpu", "recipe": "ep_gather.fma_v1", "bug": bug,
            "run": _bad(action)}


raises = _kernel("py.mutant.raise", "raises ValueError when T >= 2", _raise)
kills = _kernel("py.mutant.kill", "kills its own process (SIGKILL) when T >= 2", _kill)
aborts = _kernel("py.mutant.abort", "calls os.abort() when T >= 2", os.abort)
hangs = _kernel("py.mutant.hang", "never returns when T >= 2", _hang)
returns = dict(_kernel("py.mutant.returns", "returns an array instead of writing args[\"out\"] when T >= 2", None),
               run=_returns)
all_bad = [raises, kills, aborts, hangs, returns]
