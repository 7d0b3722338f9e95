"""_lib.py: finds and loads libmoects (include/moects/moects.h, API version 1) and declares its functions
for ctypes. Only this module touches ctypes prototypes; the rest of the package calls `lib()`.

Where the library is looked for, first found wins:
1. $MOECTS_LIB (a file path; the runner sets it for `--kernel-py` workers), an override;
2. the copy `pip install ./python` bundles in the package (moects/_native/lib);
3. the checkout this package sits in (python/moects -> ../../build/lib, PYTHONPATH=python), then
   build/lib under the current directory and its parents;
4. an installed prefix: `pkg-config --variable=libdir moects`, sys.prefix/lib, /usr/local/lib,
   /usr/lib, then ctypes.util.find_library("moects").
"""
import ctypes
import ctypes.util
import os
import subprocess
import sys
from ctypes import (CFUNCTYPE, POINTER, Structure, c_char_p, c_double, c_int, c_long, c_size_t,
                    c_uint32, c_uint64, c_void_p)

API_VERSION = 1
_SONAMES = ("libmoects.so.0", "libmoects.so", "libmoects.dylib")


class MoectsError(RuntimeError):
    """An error libmoects reported (its one-line message names the file and field)."""


class TensorInfo(Structure):
    """moects_tensor_info."""
    _fields_ = [("name", c_char_p), ("dtype", c_char_p), ("ndim", c_int), ("dims", ctypes.c_int64 * 4),
                ("data", c_void_p), ("bytes", c_size_t)]


class Tolerance(Structure):
    """moects_tolerance (include/moects/moects_kernel.h)."""
    _fields_ = [("max_calc_diff", c_double), ("max_ulp", c_uint32)]


class Accumulation(Structure):
    """moects_accumulation (include/moects/moects_kernel.h, ABI 2)."""
    _fields_ = [("bits", c_uint32), ("truncation", c_int)]


class SplitK(Structure):
    """moects_split_k (include/moects/moects_kernel.h, ABI 3): max_splits, dtype (1: BF16)."""
    _fields_ = [("max_splits", c_uint32), ("dtype", c_int)]


SUPPORTS_FN = CFUNCTYPE(c_int, c_void_p, c_void_p, c_size_t)
RUN_FN = CFUNCTYPE(c_int, c_void_p, c_void_p, c_void_p)
LAST_ERROR_FN = CFUNCTYPE(c_void_p)  # returns a const char* we keep alive


class KernelStruct(Structure):
    """moects_kernel, ABI version 4 (include/moects/moects_kernel.h): enums are C ints; flags bit 1:
    MOECTS_KERNEL_BATCH_INVARIANT."""
    _fields_ = [("abi_version", c_uint32), ("name", c_char_p), ("op", c_int), ("device", c_int),
                ("recipe", c_char_p), ("tol", Tolerance), ("bug", c_char_p), ("supports", SUPPORTS_FN),
                ("run", RUN_FN), ("acc", Accumulation), ("last_error", LAST_ERROR_FN),
                ("split_k", SplitK), ("flags", c_uint32)]


KERNEL_ABI_VERSION = 4
KERNEL_BATCH_INVARIANT = 1  # MOECTS_KERNEL_BATCH_INVARIANT

_H = c_void_p  # every opaque handle
_PROTOS = {
    "moects_version": (c_char_p, []),
    "moects_api_version": (c_int, []),
    "moects_errmsg": (c_char_p, []),
    "moects_default_root": (c_char_p, []),
    "moects_cases_select": (_H, [c_char_p, c_char_p, c_int, c_int, c_char_p, POINTER(c_char_p), c_size_t]),
    "moects_caselist_free": (None, [_H]),
    "moects_caselist_count": (c_size_t, [_H]),
    "moects_caselist_find": (c_long, [_H, c_char_p]),
    "moects_case_id": (c_char_p, [_H, c_size_t]),
    "moects_case_op": (c_char_p, [_H, c_size_t]),
    "moects_case_json": (c_char_p, [_H, c_size_t]),
    "moects_casedata_build": (_H, [_H, c_size_t, c_uint64]),
    "moects_casedata_free": (None, [_H]),
    "moects_casedata_id": (c_char_p, [_H]),
    "moects_casedata_json": (c_char_p, [_H]),
    "moects_casedata_seed": (c_uint64, [_H]),
    "moects_casedata_ninputs": (c_int, [_H]),
    "moects_casedata_input": (c_int, [_H, c_int, POINTER(TensorInfo)]),
    "moects_casedata_output": (c_int, [_H, POINTER(TensorInfo)]),
    "moects_casedata_scalar": (c_int, [_H, c_char_p, POINTER(c_double)]),
    "moects_casedata_reference": (c_int, [_H, c_char_p, POINTER(TensorInfo)]),
    "moects_judge": (_H, [_H, POINTER(KernelStruct), c_void_p, c_size_t]),
    "moects_judge_outcome": (_H, [_H, POINTER(KernelStruct), c_char_p, c_char_p]),
    "moects_judge_stages": (_H, [_H, POINTER(KernelStruct), c_void_p, c_size_t, POINTER(c_void_p), c_int]),
    "moects_casedata_nstages": (c_int, [_H]),
    "moects_casedata_stage": (c_int, [_H, c_int, POINTER(TensorInfo)]),
    "moects_judgement_free": (None, [_H]),
    "moects_judgement_verdict": (c_char_p, [_H]),
    "moects_judgement_passed": (c_int, [_H]),
    "moects_judgement_text": (c_char_p, [_H]),
    "moects_judgement_json": (c_char_p, [_H]),
    "moects_judgement_repro": (c_char_p, [_H, c_char_p, c_char_p]),
    "moects_resultset_new": (_H, [c_char_p, c_uint64]),
    "moects_resultset_free": (None, [_H]),
    "moects_resultset_add": (c_int, [_H, _H]),
    "moects_resultset_count": (c_size_t, [_H]),
    "moects_resultset_write": (c_int, [_H, c_char_p]),
    "moects_resultset_read": (_H, [c_char_p]),
    "moects_export": (c_long, [_H, c_uint64, c_char_p]),
    "moects_verify": (c_long, [c_char_p, POINTER(KernelStruct), _H]),
    "moects_task_json": (c_char_p, []),
    "moects_task_tensor": (c_int, [c_int, POINTER(TensorInfo)]),
    "moects_task_stream": (c_void_p, []),
    "moects_adapter_count": (c_size_t, []),
    "moects_adapter_name": (c_char_p, [c_size_t]),
    "moects_adapter_convention": (c_char_p, [c_size_t]),
    "moects_adapter_bytes": (ctypes.c_int64, [c_char_p, c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64]),
    "moects_adapt": (c_int, [c_char_p, c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, c_void_p, c_size_t,
                             c_void_p, c_size_t]),
    "moects_worker_serve": (c_int, [c_int, c_int, POINTER(POINTER(KernelStruct)), c_size_t]),
}

_lib = None
_path = None


_HERE = os.path.dirname(os.path.abspath(__file__))
NATIVE = os.path.join(_HERE, "_native")  # what pip bundles: bin/moects, lib/libmoects.so.0, share/moects


def _checkout_dirs():
    """build/lib of the checkout this package sits in (python/moects of a tree with CMakeLists.txt),
    then build/lib under the current directory and each of its parents."""
    root = os.path.dirname(os.path.dirname(_HERE))
    out = [os.path.join(root, "build", "lib")] if os.path.exists(os.path.join(root, "CMakeLists.txt")) else []
    d = os.getcwd()
    while True:
        out.append(os.path.join(d, "build", "lib"))
        parent = os.path.dirname(d)
        if parent == d:
            break
        d = parent
    return out


def _prefix_dirs():
    dirs = []
    try:
        r = subprocess.run(["pkg-config", "--variable=libdir", "moects"], capture_output=True, text=True,
                           timeout=10)
        if r.returncode == 0 and r.stdout.strip():
            dirs.append(r.stdout.strip())
    except (OSError, subprocess.SubprocessError):
        pass
    dirs += [os.path.join(sys.prefix, "lib"), "/usr/local/lib", "/usr/lib"]
    return dirs


def candidates():
    """The paths tried, in order (the first existing one is loaded)."""
    env = os.environ.get("MOECTS_LIB")
    if env:
        return [env]
    dirs = [os.path.join(NATIVE, "lib")] + _checkout_dirs() + _prefix_dirs()
    paths = [os.path.join(d, n) for d in dirs for n in _SONAMES]
    found = ctypes.util.find_library("moects")
    if found:
        paths.append(found)
    return paths


def _declare(h):
    for name, (res, args) in _PROTOS.items():
        fn = getattr(h, name, None)
        if fn is None:
            continue  # an older library: calls to it fail with AttributeError at use
        fn.restype = res
        fn.argtypes = args


def lib():
    """The loaded libmoects (ctypes.CDLL), loaded on first use. Raises MoectsError naming the
    paths tried when none loads, or when its API version is not API_VERSION."""
    global _lib, _path
    if _lib is not None:
        return _lib
    tried = []
    for p in candidates():
        if os.sep in p and not os.path.exists(p):
            tried.append(p)
            continue
        try:
            h = ctypes.CDLL(p)
        except OSError as e:
            tried.append("%s (%s)" % (p, e))
            continue
        _declare(h)
        v = h.moects_api_version()
        if v != API_VERSION:
            raise MoectsError("%s: API version %d, this package speaks %d" % (p, v, API_VERSION))
        _lib, _path = h, p
        return h
    raise MoectsError(_not_found(tried))


def _not_found(tried):
    """The one line saying where libmoects was looked for (the folders, in order) and what to do."""
    env = os.environ.get("MOECTS_LIB")
    if env:
        why = tried[0].partition(" (")[2].rstrip(")") if tried and " (" in tried[0] else "no such file"
        return "libmoects not loaded from $MOECTS_LIB=%s: %s (point it at a libmoects.so.0, or unset it)" % (env, why)
    dirs, errors = [], []
    for t in tried:
        p, _, why = t.partition(" (")
        d = os.path.dirname(p) if os.sep in p else p
        if d not in dirs:
            dirs.append(d)
        if why:
            errors.append(t)
    cwd = os.path.join(os.getcwd(), "build", "lib")
    shown = [d for d in dirs if not (d.endswith(os.path.join("build", "lib")) and cwd.startswith(d[:-9]) and d != cwd)]
    where = ", ".join("%s (current directory's parents too)" % d if d == cwd else d for d in shown)
    return ("libmoects not found (looked in %s%s). pip install ./python from a moects checkout bundles it; "
            "or build the checkout (cmake --build build), or set MOECTS_LIB=/path/to/libmoects.so.0"
            % (where, "; " + "; ".join(errors[:2]) if errors else ""))


def path():
    """The path of the loaded library."""
    lib()
    return _path


def errmsg():
    return (lib().moects_errmsg() or b"").decode("utf-8", "replace")


def check(ok):
    """Raise MoectsError(moects_errmsg()) unless ok (a non-NULL handle, or 0 from an int call)."""
    if (ok is None) or (ok is False) or (isinstance(ok, int) and not isinstance(ok, bool) and ok < 0):
        raise MoectsError(errmsg() or "libmoects call failed")
    return ok


def s(b):
    """A library string (bytes or None) as str."""
    return None if b is None else b.decode("utf-8", "replace")
