"""moects: judge MoE kernels (ep_gather, FP4 GEMMs) against bit-exact references, from Python.

A Python package over libmoects (ctypes, no compiled extension; pip bundles the library): cases and their
deterministic inputs as numpy arrays or torch tensors, `case.check(out)` with the runner's verdicts
and diagnostics, results.json for `moects gate`/`coverage`/`merge`, a pytest plugin
(`@pytest.mark.moects(...)`, fixture `moects_case`), and the worker behind
`moects run --kernel-py MODULE:NAME`; an engine's own tensors as a local case (`case_from_tensors`,
the `@capture` decorator). DESIGN.md "Kernels from Python, and from any language".
"""
from ._lib import MoectsError
from .capture import CaseRefused, capture, case_from_tensors
from .case import DEFAULT_SEED, Case, CaseList, Judgement, case, cases
from .kernel import Kernel, describe
from .results import Results, export, read, verify

__version__ = "0.1"
__all__ = ["MoectsError", "CaseRefused", "capture", "case_from_tensors", "DEFAULT_SEED", "Case", "CaseList",
           "Judgement", "case", "cases", "Kernel", "describe", "Results", "export", "read", "verify",
           "library_version"]


def library_version():
    """The loaded libmoects's version string."""
    from . import _lib
    return _lib.s(_lib.lib().moects_version())
