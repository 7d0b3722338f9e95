"""kernel.py: a Python kernel's description and its moects_kernel descriptor (include/moects/moects_kernel.h).

A description is a `Kernel`, a dict, or any object with these attributes (DESIGN.md "Kernels from
Python"):
    name       unique dotted name, e.g. "triton.ep_gather"
    op         "ep_gather", "fp4_gemm", "moe_gemm", "fused_moe" or "moe_route"
    device     "cpu" (run gets numpy arrays over host memory) or "cuda" (torch tensors over device
               memory, launched on the runner's stream); default "cpu"
    recipe     the exact recipe it claims ("ep_gather.fma_v1", "fp4_gemm.blockwise_v1", ...; fused_moe: its
               layer recipe, "fused_moe.layer_v1(w13=up_gate,mid=fp8_token,...)", ref/moects_layer.h,
               required, with a bound too when its GEMMs sum in any order: judged by the enclosure;
               moe_route: "moe_route.v1(ties=..,slots=..,fn=..,sum=..,norm=..,renorm=..)", required,
               its keys those of ref/moects_route.h (ROUTE_KEYS; fn other than cr or sum=any is a
               bounded claim, judged by the enclosure; norm=recip / renorm=recip are vLLM's
               reciprocals, exact), no bound or tolerance), or
    bound      its accumulation class: bits (24 for FP32 accumulation), or (bits, truncation), or
               {"bits": 24, "truncation": False}, with "bf16_split_k": N where K may be split into at
               most N pieces whose FP32 partials are added in BF16 (torch's default
               allow_bf16_reduced_precision_reduction; docs/python.md): judged per element
               against its proven bound and the accumulation check, or
    tolerance  (max_calc_diff, max_ulp) or {"max_calc_diff": .., "max_ulp": ..} against exact_v1
    bug        mutants only: the one known bug, one line
    batch_invariant  optional, default False: True when each output row depends only on its own
               token's (moe_gemm: its own row's) inputs and the weights; fused_moe and moe_gemm cases
               then also run it on the same rows inside a larger batch, and any bit that moves is
               FAIL_BATCH_VARIANT (MOECTS_KERNEL_BATCH_INVARIANT, DESIGN.md "Batch invariance")
    supports   optional supports(shape) -> True to take the shape; False, a reason string or
               (False, reason) to refuse it (UNSUPPORTED, a coverage gap)
    run        run(shape, args): shape is the case's shape dict (moects_case_json "shape"), args the
               tensors by name (inputs and "out", plus "alpha" for fp4_gemm; moe_gemm: those of
               moects_moe_gemm_args, None for one the format or row layout has none of; fused_moe: those
               of moects_fused_moe_args, None for absent scales, biases and expert_map; moe_route:
               "logits" [T, E] (F32, or BF16 bits), "bias" [E] F32 or None, and the outputs of
               moects_moe_route_args, "topk_ids" [T, k] int32 and "topk_weights" [T, k] F32: views
               of "out", the one [2T, k] buffer, ids rows then weights rows); writes args["out"]
               (an output returned instead, anything but None or an int, is FAIL_CRASH).
"""
import ctypes
import json
import numbers
import os
import sys
import traceback

from . import _lib, _tensors

OPS = {"ep_gather": 1, "fp4_gemm": 2, "moe_gemm": 3, "fused_moe": 4, "moe_route": 5}
# moe_route.v1's keys and their values, the first the default (ref/moe_route.c's KEYS, docs/moe_route.md)
ROUTE_KEYS = {"ties": ("low", "any"), "slots": ("sorted", "any"), "fn": ("cr", "ulp1", "ulp2", "ulp4", "ulp8"),
              "sum": ("ordered", "any"), "norm": ("div", "recip"), "renorm": ("div", "recip")}
DEVICES = {"cpu": 0, "cuda": 1}
_FIELDS = ("name", "op", "device", "recipe", "bound", "tolerance", "bug", "supports", "run", "batch_invariant")


class Kernel:
    """A Python kernel's description (see the module docstring for the fields)."""

    def __init__(self, name, op, run=None, device="cpu", recipe=None, bound=None, tolerance=None, bug=None,
                 supports=None, batch_invariant=False):
        self.name, self.op, self.run, self.device = name, op, run, device
        self.recipe, self.bound, self.tolerance, self.bug, self.supports = recipe, bound, tolerance, bug, supports
        self.batch_invariant = batch_invariant
        self._check()

    def _check(self):
        where = "kernel %r" % (self.name,)
        if not isinstance(self.name, str) or not self.name:
            raise ValueError("kernel description: name: a non-empty string is required")
        if self.op not in OPS:
            raise ValueError("%s: op: %r, expected one of %s" % (where, self.op, ", ".join(OPS)))
        if self.device not in DEVICES:
            raise ValueError("%s: device: %r, expected cpu or cuda" % (where, self.device))
        if not (self.recipe or self.bound is not None or self.tolerance is not None):
            raise ValueError("%s: declare a recipe, a bound (accumulation bits) or a tolerance" % where)
        if self.recipe is not None and (not isinstance(self.recipe, str) or not self.recipe.startswith(self.op + ".")):
            raise ValueError("%s: recipe: %r, expected a %s.* recipe name" % (where, self.recipe, self.op))
        if self.op == "fused_moe":  # a layer recipe, exact or with its accumulation class (bounded)
            if not self.recipe or self.tolerance is not None:
                raise ValueError("%s: fused_moe: declare a layer recipe (\"fused_moe.layer_v1(...)\"), exact or "
                                 "with a bound (its GEMMs' accumulation class); no tolerance" % where)
        elif self.op == "moe_route":  # the recipe's own keys say exact or bounded (fn=, sum=)
            if not self.recipe or self.bound is not None or self.tolerance is not None:
                raise ValueError("%s: moe_route: declare a recipe (\"moe_route.v1(ties=..,slots=..,fn=..,sum=..,"
                                 "norm=..,renorm=..)\"; a fast exp or sums in any order are its fn= and sum= "
                                 "keys), no bound or tolerance" % where)
            try:
                route_recipe(self.recipe)
            except ValueError as e:
                raise ValueError("%s: %s" % (where, e)) from None
        elif self.recipe and (self.bound is not None or self.tolerance is not None):
            raise ValueError("%s: recipe with a bound or tolerance: declare one judgement (a recipe, or a bound "
                             "with an optional fallback tolerance)" % where)
        if self.bug is not None and not isinstance(self.bug, str):  # else a crash in each worker
            raise ValueError("%s: bug: %r: a string, the mutant's one known bug in one line" % (where, self.bug))
        if not isinstance(self.batch_invariant, bool):
            raise ValueError("%s: batch_invariant: %r: True or False" % (where, self.batch_invariant))
        for f in ("run", "supports"):
            if getattr(self, f) is not None and not callable(getattr(self, f)):
                raise ValueError("%s: %s: %r is not callable" % (where, f, getattr(self, f)))
        try:
            _bound(self.bound), _tolerance(self.tolerance)
        except ValueError as e:
            raise ValueError("%s: %s" % (where, e)) from None

    def __repr__(self):
        return "Kernel(%r, op=%r, device=%r)" % (self.name, self.op, self.device)


def describe(obj):
    """A Kernel from a Kernel, a dict or an object with the description's attributes."""
    if isinstance(obj, Kernel):
        return obj
    if not isinstance(obj, dict) and not (hasattr(obj, "name") and hasattr(obj, "op")):
        raise ValueError("kernel description: a moects.Kernel, a dict or an object with name, op and run "
                         "attributes, not %s" % type(obj).__name__)
    if isinstance(obj, dict):
        unknown = sorted(set(obj) - set(_FIELDS))
        if unknown:
            raise ValueError("kernel %r: unknown field %s (known: %s)" % (obj.get("name"), unknown[0],
                                                                          ", ".join(_FIELDS)))
        fields = dict(obj)
    else:
        fields = {f: getattr(obj, f) for f in _FIELDS if getattr(obj, f, None) is not None}
    if fields.get("name") is None:  # a field error, not Kernel()'s TypeError
        raise ValueError("kernel description: name: missing (a non-empty string is required)")
    if fields.get("op") is None:
        raise ValueError("kernel %r: op: missing, expected one of %s" % (fields["name"], ", ".join(OPS)))
    return Kernel(**fields)


def route_recipe(s):
    """The keys of a moe_route recipe string "moe_route.v1[(key=value,...)]" as a dict over ROUTE_KEYS
    (defaults filled in); ValueError naming the key or value that is not one, as the judge
    (ref/moe_route.c, moects__route_recipe_parse) would refuse it."""
    head, sep, rest = s.partition("(")
    if head != "moe_route.v1" or (sep and not rest.endswith(")")):
        raise ValueError("recipe %r: expected moe_route.v1 or moe_route.v1(key=value,...)" % (s,))
    keys = {k: v[0] for k, v in ROUTE_KEYS.items()}
    for pair in rest[:-1].split(",") if sep and rest != ")" else ():
        k, eq, v = pair.partition("=")
        if k not in ROUTE_KEYS:
            raise ValueError("recipe %r: %r is not a route recipe key (%s)" % (s, k, ", ".join(ROUTE_KEYS)))
        if not eq or v not in ROUTE_KEYS[k]:
            raise ValueError("recipe %r: %s=%s: %s is one of %s" % (s, k, v, k, "|".join(ROUTE_KEYS[k])))
        keys[k] = v
    return keys


def _np_bool(x):
    return type(x).__module__ == "numpy" and type(x).__name__ in ("bool", "bool_")


def _integer(x):
    return isinstance(x, numbers.Integral) and not isinstance(x, bool) and not _np_bool(x)


def _bound(b):
    """(bits, truncation, bf16_split_k) of a bound: bits, (bits, truncation) or {"bits": ..,
    "truncation": .., "bf16_split_k": ..}, with bits the accumulator's significand bits (24 for FP32),
    truncation a bool and bf16_split_k 0 or the most K pieces whose partials are added in BF16 (2..256;
    torch's default allow_bf16_reduced_precision_reduction). ValueError otherwise."""
    if b is None:
        return 0, 0, 0
    splits = 0
    if isinstance(b, dict):
        if set(b) - {"bits", "truncation", "bf16_split_k"} or "bits" not in b:
            raise ValueError("bound: %r: the keys are \"bits\", \"truncation\" and \"bf16_split_k\"" % (b,))
        bits, trunc, splits = b["bits"], b.get("truncation", False), b.get("bf16_split_k", 0)
    elif isinstance(b, (tuple, list)) and len(b) == 2:
        bits, trunc = b
    else:
        bits, trunc = b, False
    if not _integer(bits) or not 2 <= bits <= 64:
        raise ValueError("bound: bits %r: an integer 2..64, the accumulator's significand bits (24 for FP32), "
                         "given as bits, (bits, truncation) or {\"bits\": .., \"truncation\": ..}" % (bits,))
    if not isinstance(trunc, bool) and not _np_bool(trunc):
        raise ValueError("bound: truncation %r: True (truncating sums, as tensor cores) or False (round to "
                         "nearest)" % (trunc,))
    if not _integer(splits) or not (splits == 0 or 2 <= splits <= 256):
        raise ValueError("bound: bf16_split_k %r: 0 (none) or an integer 2..256, the most K pieces whose FP32 "
                         "partials are added in BF16" % (splits,))
    return int(bits), int(bool(trunc)), int(splits)


def _tolerance(t):
    """(max_calc_diff, max_ulp) of a tolerance: (calc_diff, ulp) or {"max_calc_diff": .., "max_ulp": ..}
    (max_ulp optional there: any). ValueError otherwise."""
    if t is None:
        return 0.0, 0
    if isinstance(t, dict):
        if set(t) - {"max_calc_diff", "max_ulp"} or "max_calc_diff" not in t:
            raise ValueError("tolerance: %r: the keys are \"max_calc_diff\" and \"max_ulp\"" % (t,))
        calc, ulp = t["max_calc_diff"], t.get("max_ulp", 0xFFFFFFFF)
    elif isinstance(t, (tuple, list)) and len(t) == 2:
        calc, ulp = t
    else:
        raise ValueError("tolerance: %r: (max_calc_diff, max_ulp) or {\"max_calc_diff\": .., \"max_ulp\": ..}" % (t,))
    if not isinstance(calc, numbers.Real) or isinstance(calc, bool) or not 0 <= calc < float("inf"):
        raise ValueError("tolerance: max_calc_diff %r: a finite number >= 0" % (calc,))
    if not _integer(ulp) or not 0 <= ulp <= 0xFFFFFFFF:
        raise ValueError("tolerance: max_ulp %r: an integer 0..4294967295" % (ulp,))
    return float(calc), int(ulp)


def descriptor(k, callbacks=None):
    """The ctypes moects_kernel of Kernel k. callbacks: (supports, run, last_error) ctypes function
    objects, or None for a descriptor used only to judge (moects_judge, moects_verify)."""
    d = _lib.KernelStruct()
    d.abi_version = _lib.KERNEL_ABI_VERSION
    d.name = k.name.encode()
    d.op = OPS[k.op]
    d.device = DEVICES[k.device]
    d.recipe = k.recipe.encode() if k.recipe else None
    d.tol.max_calc_diff, d.tol.max_ulp = _tolerance(k.tolerance)
    d.bug = k.bug.encode() if k.bug else None
    d.acc.bits, d.acc.truncation, d.split_k.max_splits = _bound(k.bound)
    d.split_k.dtype = 1 if d.split_k.max_splits else 0  # MOECTS_BF16
    d.flags = _lib.KERNEL_BATCH_INVARIANT if k.batch_invariant else 0
    if callbacks:
        d.supports, d.run, d.last_error = callbacks
    return d


def error_text(e):
    """An exception as one line: 'Type: message (at file:line in function)' with the innermost frame
    outside this package (its path relative to the current folder when inside it), long messages cut
    in the middle (a Triton compile error's last line says what is wrong)."""
    msg = " ".join(str(e).split())
    if len(msg) > 600:
        msg = msg[:200] + " ... " + msg[-380:]
    text = "%s: %s" % (type(e).__name__, msg) if msg else type(e).__name__
    here = os.path.dirname(os.path.abspath(__file__))
    frames = [f for f in traceback.extract_tb(e.__traceback__) if os.path.dirname(os.path.abspath(f.filename)) != here]
    if frames:  # the innermost frame outside this package: the kernel's own line
        f = frames[-1]
        rel = os.path.relpath(f.filename)  # inside the run's folder: no machine path in the reports
        text += " (at %s:%d in %s)" % (f.filename if rel.startswith("..") else rel, f.lineno, f.name)
    return text


class _FP4Args(ctypes.Structure):
    """moects_fp4_gemm_args: four pointers, then alpha (include/moects/moects_types.h)."""
    _fields_ = [("a", ctypes.c_void_p), ("b", ctypes.c_void_p), ("sa", ctypes.c_void_p),
                ("sb", ctypes.c_void_p), ("alpha", ctypes.c_float), ("d", ctypes.c_void_p)]


def task_shape():
    """The shape dict of the task in flight (inside a runner's supports()/run())."""
    return json.loads(_lib.s(_lib.lib().moects_task_json()) or "{}").get("shape", {})


def task_args(k, args_ptr):
    """The tensors of the task in flight, by name: numpy arrays (cpu) or torch tensors (cuda)."""
    L = _lib.lib()
    out = {}
    j = 0
    while True:
        info = _lib.TensorInfo()
        if L.moects_task_tensor(j, ctypes.byref(info)) != 0:
            break
        name = info.name.decode()
        out[name] = None if _tensors.absent(info) else _tensor(k, info)
        j += 1
    info = _lib.TensorInfo()
    _lib.check(L.moects_task_tensor(-1, ctypes.byref(info)))
    out["out"] = _tensor(k, info)
    if k.op == "moe_route":
        out["topk_ids"], out["topk_weights"] = _tensors.route_views(out["out"])
    if k.op == "fp4_gemm" and args_ptr:
        out["alpha"] = float(_FP4Args.from_address(args_ptr).alpha)
    return out


def _tensor(k, info):
    if k.device == "cuda":
        return _tensors.device_tensor(info)
    return _tensors.host_array(info, None)


def _release_torch_cache():
    """Hand the blocks torch's caching allocator keeps after a kernel freed them back to CUDA: the
    runner counts device memory still held after run() as kept (its worker is replaced), and a torch
    kernel's freed temporaries would otherwise look kept on every case."""
    import torch
    if torch.cuda.is_initialized():
        torch.cuda.empty_cache()


def _truth(x):
    return x if isinstance(x, bool) else bool(x) if _np_bool(x) else None


def _refusal(r):
    """None when supports() returned True (or (True, ...)); else the reason it refused: its text, or
    what was wrong with what it returned."""
    first = r[0] if isinstance(r, tuple) and r else r
    if _truth(first) is True:
        return None
    if isinstance(r, str):
        return r
    if _truth(first) is False:
        return r[1] if isinstance(r, tuple) and len(r) > 1 and isinstance(r[1], str) else "refused by supports()"
    return "supports() returned %.80r (expected True, False, a reason string or (False, reason))" % (r,)


def _returned(r):
    """None when run() returned None or an int status; else why what it returned is wrong (an output
    returned instead of written into args["out"] would leave "out" as poisoned)."""
    if r is None or isinstance(r, numbers.Integral):
        return None
    t = type(r)
    what = t.__qualname__ if t.__module__ == "builtins" else "%s.%s" % (t.__module__, t.__qualname__)
    shape = getattr(r, "shape", None)
    what += " of shape %s" % (tuple(shape),) if isinstance(shape, tuple) else " (%.60r)" % (r,)
    return "run(shape, args) returned a %s: the output must be written into args[\"out\"] (e.g. args[\"out\"][...] = " \
           "result), not returned" % what


class Callbacks:
    """The C callbacks of one Python kernel under `moects run --kernel-py` (kept alive with it)."""

    def __init__(self, k):
        self.k = k
        self.err = ctypes.create_string_buffer(b"")
        self.c_supports = _lib.SUPPORTS_FN(self.supports)
        self.c_run = _lib.RUN_FN(self.run)
        self.c_last_error = _lib.LAST_ERROR_FN(self.last_error)

    def supports(self, shape_ptr, why, why_len):
        if self.k.supports is None:
            return 1
        try:
            r = self.k.supports(task_shape())
        except Exception as e:  # a broken supports() refuses with its error (never a pass)
            r = "supports() raised " + error_text(e)
        reason = _refusal(r)
        if reason is None:
            return 1
        if why and why_len:
            b = str(reason).encode("utf-8", "replace")[:why_len - 1]
            ctypes.memmove(why, b + b"\0", len(b) + 1)
        return 0

    def run(self, shape_ptr, args_ptr, stream):
        try:
            args = task_args(self.k, args_ptr)
            shape = task_shape()
            if self.k.device == "cuda" and stream:
                import torch
                with torch.cuda.stream(torch.cuda.ExternalStream(stream)):
                    r = self.k.run(shape, args)
            else:
                r = self.k.run(shape, args)
            if self.k.device == "cuda" and "torch" in sys.modules:
                _release_torch_cache()
            wrong = _returned(r)
            if wrong:
                self.err = ctypes.create_string_buffer(wrong.encode("utf-8", "replace"))
                return 1
            return 0
        except BaseException as e:  # SystemExit, KeyboardInterrupt too: the case's verdict
            self.err = ctypes.create_string_buffer(error_text(e).encode("utf-8", "replace"))
            return 1

    def last_error(self):
        return ctypes.addressof(self.err)
