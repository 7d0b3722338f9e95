"""moects._worker: the Python side of `moects run --kernel-py MODULE:NAME`.

The runner starts this module in each worker process (fork + exec, before any CUDA initialisation):
    python -m moects._worker --rfd R --wfd W --kernel-py MODULE:NAME [--kernel-py ...]
It imports each MODULE, reads NAME (a kernel description, or a list of them: moects.kernel), builds
one moects_kernel descriptor per description with Python callbacks, and hands them to
moects_worker_serve, which runs the runner's tasks exactly as the C workers do. A Python exception
in run() is returned as an error, its text given by last_error() (the case's FAIL_CRASH reason).
    python -m moects._worker --describe --kernel-py MODULE:NAME ...
prints the descriptions as one line of JSON (for the runner's parent, which never imports them).
MODULE is a dotted module name or a path to a .py file; NAME an attribute name (dotted ok).
"""
import ctypes
import importlib
import importlib.util
import json
import os
import sys

from . import _lib
from .kernel import Callbacks, describe, descriptor, _bound, _tolerance, OPS, DEVICES

_alive = []  # descriptors and callbacks live as long as the process


def load(spec):
    """The Kernels named by SPEC = MODULE:NAME."""
    module, sep, name = spec.rpartition(":")
    if not sep or not module or not name:
        raise ValueError("expected MODULE:NAME")
    if module.endswith(".py") or os.sep in module:
        path = os.path.abspath(module)
        if not os.path.exists(path):
            raise FileNotFoundError("%s: no such file" % module)
        modname = "moects_kernel_py_" + os.path.splitext(os.path.basename(path))[0]
        s = importlib.util.spec_from_file_location(modname, path)
        mod = importlib.util.module_from_spec(s)
        sys.modules[modname] = mod
        sys.path.insert(0, os.path.dirname(path))
        s.loader.exec_module(mod)
    else:
        if "" not in sys.path and os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())
        mod = importlib.import_module(module)
    obj = mod
    for part in name.split("."):
        if not hasattr(obj, part):
            raise AttributeError("%s has no attribute %s" % (module, name))
        obj = getattr(obj, part)
    items = obj if isinstance(obj, (list, tuple)) else [obj]
    kernels = [describe(x) for x in items]
    for k in kernels:
        if k.run is None:
            raise ValueError("kernel %r: run: a callable run(shape, args) is required to run it" % (k.name,))
    return kernels


def load_all(specs):
    kernels = []
    for spec in specs:
        try:
            kernels += load(spec)
        except Exception as e:
            from .kernel import error_text
            sys.stderr.write("moects._worker: --kernel-py %s: %s\n" % (spec, error_text(e)))
            sys.exit(2)
    return kernels


def description(k):
    """A Kernel as the JSON object of --describe (the moects_kernel fields, enums as integers)."""
    bits, trunc, splits = _bound(k.bound)
    calc, ulp = _tolerance(k.tolerance)
    return {"name": k.name, "op": OPS[k.op], "device": DEVICES[k.device], "recipe": k.recipe,
            "tol": {"max_calc_diff": calc, "max_ulp": ulp},
            "acc": {"bits": bits, "truncation": trunc, "bf16_split_k": splits},
            "bug": k.bug, "batch_invariant": k.batch_invariant}


def parse(argv):
    opts = {"rfd": None, "wfd": None, "specs": [], "describe": False}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--describe":
            opts["describe"] = True
        elif a in ("--rfd", "--wfd", "--kernel-py") and i + 1 < len(argv):
            i += 1
            if a == "--kernel-py":
                opts["specs"].append(argv[i])
            else:
                opts[a[2:]] = int(argv[i])
        elif a == "--moects-worker" and i + 2 < len(argv):
            opts["rfd"], opts["wfd"] = int(argv[i + 1]), int(argv[i + 2])
            i += 2
        else:
            sys.stderr.write("moects._worker: unexpected argument %r\n" % a)
            sys.exit(2)
        i += 1
    if not opts["specs"] or (not opts["describe"] and (opts["rfd"] is None or opts["wfd"] is None)):
        sys.stderr.write("usage: python -m moects._worker (--rfd R --wfd W | --describe) "
                         "--kernel-py MODULE:NAME ...\n")
        sys.exit(2)
    return opts


def serve(rfd, wfd, kernels):
    """Hand kernels to moects_worker_serve; its return status."""
    L = _lib.lib()
    ptrs = (ctypes.POINTER(_lib.KernelStruct) * len(kernels))()
    for i, k in enumerate(kernels):
        cb = Callbacks(k)
        d = descriptor(k, (cb.c_supports, cb.c_run, cb.c_last_error))
        _alive.append((cb, d))
        ptrs[i] = ctypes.pointer(d)
    _alive.append(ptrs)
    return L.moects_worker_serve(rfd, wfd, ptrs, len(kernels))


def main(argv=None):
    opts = parse(sys.argv[1:] if argv is None else argv)
    kernels = load_all(opts["specs"])
    if opts["describe"]:
        sys.stdout.write(json.dumps([description(k) for k in kernels]) + "\n")
        return 0
    return serve(opts["rfd"], opts["wfd"], kernels)


if __name__ == "__main__":
    sys.exit(main())
