"""results.py: results.json sets (what `moects run --out DIR` writes; gate, coverage and merge read
them unchanged) and safetensors export/verify, through libmoects."""
import ctypes
import os

from . import _lib
from .case import DEFAULT_SEED, CaseList, _Handle
from .kernel import describe, descriptor


class Results:
    """An ordered set of results (moects_resultset): add Judgements case-major, then write()."""

    def __init__(self, filter="", seed=DEFAULT_SEED, handle=None):
        h = handle if handle is not None else _lib.lib().moects_resultset_new(filter.encode(), int(seed))
        self._h = _Handle(_lib.check(h), "moects_resultset_free")

    @property
    def handle(self):
        return self._h.h

    def add(self, judgement):
        _lib.check(_lib.lib().moects_resultset_add(self.handle, judgement.handle))

    def __len__(self):
        return _lib.lib().moects_resultset_count(self.handle)

    def write(self, path):
        """Write results.json at path (temp file + rename; the directory is created)."""
        d = os.path.dirname(os.path.abspath(path))
        os.makedirs(d, exist_ok=True)
        _lib.check(_lib.lib().moects_resultset_write(self.handle, os.fsencode(path)))


def read(path):
    """A results.json as Results."""
    return Results(handle=_lib.check(_lib.lib().moects_resultset_read(os.fsencode(path))))


def export(out_dir, *globs, tier="smoke", config=None, tp=0, ep=0, root=None, seed=DEFAULT_SEED):
    """`moects export`: each selected case as OUT_DIR/<id with / as __>.safetensors (inputs,
    references, metadata). Returns the number of files written."""
    cl = CaseList(globs, tier, config, tp, ep, root)
    return _lib.check(_lib.lib().moects_export(cl.handle, int(seed), os.fsencode(out_dir)))


def verify(out_dir, kernel, results=None):
    """`moects verify`: judge each <file>.out.safetensors beside the exported files as kernel's
    output (its name and recipe, bound or tolerance). Returns (failing count, Results)."""
    res = results if results is not None else Results("verify " + str(out_dir))
    desc = descriptor(describe(kernel))
    n = _lib.check(_lib.lib().moects_verify(os.fsencode(out_dir), ctypes.byref(desc), res.handle))
    return n, res
