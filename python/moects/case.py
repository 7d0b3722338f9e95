"""case.py: cases of the registry (or of a raw config.json), their deterministic inputs, and the
judging of an output, all through libmoects (include/moects/moects.h): no numerics here.

    import moects
    for case in moects.cases("ep_gather/kimi-k3/*", tier="smoke"):
        args = case.args()                      # inputs + a poisoned "out", numpy arrays
        my_kernel(case.shape, args)
        case.check(args["out"], recipe="ep_gather.fma_v1")   # AssertionError with the TAP's diagnostics

moe_route: args() adds "topk_ids" and "topk_weights", views of "out" (ids rows, then weights rows);
check() takes "out", or (topk_ids, topk_weights), or a dict holding those two.
"""
import ctypes
import json

from . import _lib, _tensors
from .kernel import Kernel, describe, descriptor

DEFAULT_SEED = 1  # MOECTS_DEFAULT_SEED, the seed of `moects run`

# What an output holds before a kernel runs (a NaN of the output type, as the runner's poison):
# an element the kernel leaves unwritten does not compare equal to a number.
_POISON = {"BF16": 0x7FA5, "F32": 0x7FA5A5A5}


class _Handle:
    """Owns one libmoects handle; frees it with its *_free function when collected."""

    def __init__(self, h, free):
        self.h, self._free = h, free

    def __del__(self):
        if self.h:
            getattr(_lib.lib(), self._free)(self.h)
            self.h = None


class Judgement:
    """A verdict with its diagnostics (one result of a run): verdict, passed (True, False, or None
    for UNSUPPORTED/SKIP), text (the TAP's YAML diagnostics block), record (the results.json
    object)."""

    def __init__(self, handle, case_id):
        self._h = _Handle(handle, "moects_judgement_free")
        L = _lib.lib()
        self.case_id = case_id
        self.verdict = _lib.s(L.moects_judgement_verdict(handle))
        p = L.moects_judgement_passed(handle)
        self.passed = None if p < 0 else bool(p)
        self.text = _lib.s(L.moects_judgement_text(handle)) or ""
        self.kernel = None  # the Kernel judged (set by Case.judge and Case.outcome)
        self.source = None  # the description object it was made from (a marker's or check()'s kernel=)

    @property
    def handle(self):
        return self._h.h

    def repro(self, program=None, extra=None):
        """The command that reproduces this result alone (moects_judgement_repro): PROGRAM run --kernel K
        --seed S --out reports/repro/ID EXTRA CASE, program None: "moects"; extra: options before CASE,
        shell-quoted (" --kernel-py '/abs/test_mine.py:kernel'"). It becomes the repro line of text too.
        None from a libmoects too old to have the call."""
        fn = getattr(_lib.lib(), "moects_judgement_repro", None)
        if fn is None:
            return None
        cmd = _lib.s(_lib.check(fn(self.handle, program.encode() if program else None,
                                   extra.encode() if extra else None)))
        self.text = _lib.s(_lib.lib().moects_judgement_text(self.handle)) or ""
        return cmd

    @property
    def record(self):
        return json.loads(_lib.s(_lib.lib().moects_judgement_json(self.handle)))

    def __repr__(self):
        return "<%s %s>" % (self.case_id, self.verdict)


class CaseList:
    """An ordered selection of cases (moects_cases_select)."""

    def __init__(self, globs=(), tier="smoke", config=None, tp=0, ep=0, root=None):
        L = _lib.lib()
        tiers = ",".join(tier) if isinstance(tier, (list, tuple)) else tier
        enc = [g.encode() for g in globs]
        arr = (ctypes.c_char_p * max(len(enc), 1))(*enc)
        h = L.moects_cases_select(root.encode() if root else None, str(config).encode() if config else None,
                                  int(tp), int(ep), tiers.encode() if tiers else None, arr, len(enc))
        self._h = _Handle(_lib.check(h), "moects_caselist_free")

    @property
    def handle(self):
        return self._h.h

    def __len__(self):
        return _lib.lib().moects_caselist_count(self.handle)

    def cases(self, seed=DEFAULT_SEED):
        return [Case(self, i, seed) for i in range(len(self))]


class Case:
    """One case: id, op, info (the case's JSON: model, layout, tiers, source, shape), shape (dict),
    seed; inputs built by libmoects on first use and kept until release()."""

    def __init__(self, caselist, index, seed=DEFAULT_SEED):
        L = _lib.lib()
        self._list = caselist
        self.index = index
        self.seed = seed
        self.id = _lib.s(_lib.check(L.moects_case_id(caselist.handle, index)))
        self.op = _lib.s(L.moects_case_op(caselist.handle, index))
        self.info = json.loads(_lib.s(L.moects_case_json(caselist.handle, index)))
        self.kernel = None  # a default kernel description for check() (the pytest marker sets it)
        self.kernel_source = None  # the object that description was made from (the marker's kernel=)
        self.repro_lines = None  # fn(case, judgement) -> lines a failed check() adds (the pytest plugin's)
        self.judgements = []
        self._data = None
        self._margins = []  # (base, pad) of each empty_output(): judge() checks their canary margins

    def __repr__(self):
        return "Case(%r)" % self.id

    # ---- inputs ----
    def _built(self):
        if self._data is None:
            h = _lib.lib().moects_casedata_build(self._list.handle, self.index, self.seed)
            self._data = _Handle(_lib.check(h), "moects_casedata_free")
            self.info = json.loads(_lib.s(_lib.lib().moects_casedata_json(h)))
        return self._data.h

    @property
    def shape(self):
        """The op's shape as a dict (C field names; M_sum, moe_gemm's M, filled in once inputs are built)."""
        if -1 in (self.info["shape"].get("M_sum"), self.info["shape"].get("M") if self.op == "moe_gemm" else None):
            self._built()
        return self.info["shape"]

    def release(self):
        """Free the inputs and references (arrays over them must not be used after this)."""
        self._data = None
        self._margins = []

    def _infos(self):
        L = _lib.lib()
        d = self._built()
        infos = []
        for j in range(L.moects_casedata_ninputs(d)):
            t = _lib.TensorInfo()
            _lib.check(L.moects_casedata_input(d, j, ctypes.byref(t)))
            infos.append(t)
        return infos

    def inputs(self, device="cpu", layout=None):
        """The input tensors by name in the kernel ABI's order: numpy arrays over the library's
        buffers (device "cpu", zero copy, read them only) or torch tensors (a "cuda" device gets a
        copy on the GPU; "torch" gives zero-copy CPU tensors). BF16 is uint16 bits in numpy and
        torch.bfloat16 in torch. An absent expert_map is None, and so is a moe_gemm tensor the case's
        format or row layout has none of (its pointer in moects_moe_gemm_args is NULL). fp4_gemm adds
        "alpha" (and NVFP4 its "gs_a", "gs_b") as floats.
        layout: an adapter name or a list of them (moects.adapters, docs/adapters.md; fused_moe): the
        tensors they touch come in that engine layout (new read-only arrays, W13 rows reordered, scale
        tiles, nibbles swapped), the others as without it."""
        out, dtypes = {}, {}
        for t in self._infos():
            name = t.name.decode()
            if _tensors.absent(t):
                out[name] = None
                continue
            arr = _tensors.host_array(t, self._data)
            if device == "cpu":
                arr.flags.writeable = False  # a kernel writing into an input raises at the write
            out[name], dtypes[name] = arr, t.dtype.decode()
        if layout:
            from . import adapters
            out = adapters.convert(self.op, self.shape, out, layout)
        if device != "cpu":
            for name, arr in out.items():
                if arr is not None:  # an adapted tensor (read-only, new) is copied for torch
                    arr = arr if arr.flags.writeable else arr.copy()
                    out[name] = _tensors.to_torch(arr, dtypes[name], "cpu" if device == "torch" else device)
        for name in ("alpha", "gs_a", "gs_b"):
            v = ctypes.c_double()
            if _lib.lib().moects_casedata_scalar(self._built(), name.encode(), ctypes.byref(v)) == 0:
                out[name] = v.value
        return out

    def output_info(self):
        t = _lib.TensorInfo()
        _lib.check(_lib.lib().moects_casedata_output(self._built(), ctypes.byref(t)))
        return t

    def empty_output(self, device="cpu"):
        """A fresh output of the case's dtype and dims, filled with a NaN pattern (poison) so that
        an element the kernel does not write fails the comparison, between margins of canary bytes
        (at least 128 rows each side): judge() of this output finds a write into them
        (FAIL_OOB_WRITE). A write farther out, or through a raw pointer into other memory, is not
        seen here: `moects run --kernel-py` puts guard pages there and runs each call apart."""
        t = self.output_info()
        out, base, pad = _tensors.guarded_output(_tensors.dims(t), t.dtype.decode(), _POISON[t.dtype.decode()],
                                                 device)
        self._margins.append((base, pad))
        return out

    def args(self, device="cpu", layout=None):
        """inputs(device, layout) plus "out": empty_output(device); moe_route adds "topk_ids" [T, k] int32
        and "topk_weights" [T, k] F32, views of "out" (its ids rows, then its weights rows), as
        moects_moe_route_args has them."""
        a = self.inputs(device, layout)
        a["out"] = self.empty_output(device)
        if self.op == "moe_route":
            a["topk_ids"], a["topk_weights"] = _tensors.route_views(a["out"])
        return a

    def reference(self, recipe=None):
        """The bit-exact reference output under recipe (None: the op's exact_v1), a read-only numpy view."""
        t = _lib.TensorInfo()
        _lib.check(_lib.lib().moects_casedata_reference(self._built(), recipe.encode() if recipe else None,
                                                        ctypes.byref(t)))
        ref = _tensors.host_array(t, self._data)
        ref.flags.writeable = False
        return ref

    # ---- judging ----
    def _kernel(self, kernel, recipe, bound, tolerance, name):
        base = describe(kernel) if kernel is not None else self.kernel
        if recipe is None and bound is None and tolerance is None:
            if base is None:
                raise ValueError("%s: check(): declare what the output is judged by: kernel=, recipe=, "
                                 "bound= or tolerance= (or the pytest marker's kernel=)" % self.id)
            return base
        return Kernel(name or (base.name if base else "python"), self.op, recipe=recipe, bound=bound,
                      tolerance=tolerance, device=base.device if base else "cpu")

    def stages(self):
        """The intermediates a kernel of this case's op may expose, in the op's order, as
        {name: (dtype, dims)}: fused_moe's "g1_out" [T*k, N1] F32, "act_out" [T*k, I] F32, "mid_out"
        [T*k, I] F64, "y_out" [T*k, H] F32 (moects_fused_moe_args; docs/fused_moe.md "Exposed
        intermediates"); {} for an op without any."""
        L, out = _lib.lib(), {}
        for j in range(_lib.check(L.moects_casedata_nstages(self._built()))):
            t = _lib.TensorInfo()
            _lib.check(L.moects_casedata_stage(self._built(), j, ctypes.byref(t)))
            out[t.name.decode()] = (t.dtype.decode(), _tensors.dims(t))
        return out

    def _stage_ptrs(self, intermediates):
        """intermediates {name: values} as moects_judge_stages takes them: (a ctypes array of host
        addresses in the op's stage order, NULL where not given; the arrays that keep them alive)."""
        known = self.stages()
        bad = sorted(set(intermediates) - set(known))
        if bad:
            raise ValueError("%s: intermediates: %s not among %s" % (self.id, ", ".join(bad), ", ".join(known) or "none"))
        ptrs, keep = (ctypes.c_void_p * max(len(known), 1))(), []
        for j, (name, (dtype, dims)) in enumerate(known.items()):
            if intermediates.get(name) is None:
                continue
            try:
                arr, ptrs[j] = _tensors.as_host_values(intermediates[name], dtype, dims)
            except ValueError as e:
                raise ValueError("%s: intermediates[%r]: %s" % (self.id, name, e)) from None
            keep.append(arr)
        return ptrs, len(known), keep

    def judge(self, out, kernel=None, recipe=None, bound=None, tolerance=None, name=None, intermediates=None):
        """Judge out (numpy array, torch tensor on any device, or a buffer of the output's bytes)
        exactly as `moects run` does; returns the Judgement (recorded in self.judgements). moe_route:
        out may also be (topk_ids, topk_weights) or a dict holding those two (args() itself).
        intermediates: the kernel's exposed stages by name (stages(): fused_moe's g1_out, act_out,
        mid_out, y_out, any subset, values of any float dtype and the stage's size), judged by the C
        side's stage rule (moects_judge_stages, the runner's): an exact claim's failure names the first
        stage off the exact reference; a bounded claim's stages are held to their enclosures (a failure
        names the first stage outside, its element and interval) and its GEMM stages to the
        accumulation check, which can fail a passing output."""
        k = self._kernel(kernel, recipe, bound, tolerance, name)
        if self.op == "moe_route":
            if isinstance(out, dict):
                out = (out["topk_ids"], out["topk_weights"])
            if isinstance(out, (tuple, list)):
                if len(out) != 2:
                    raise ValueError("%s: a moe_route output is out, or (topk_ids, topk_weights)" % self.id)
                out = _tensors.route_pack(*out)
        for base, pad in self._margins:
            where = _tensors.margin_write(out, base, pad)
            if where:
                return self.outcome("FAIL_OOB_WRITE", "out: " + where, kernel=k)
        arr, addr, nbytes = _tensors.as_host_bytes(out)
        desc = descriptor(k)
        if intermediates:
            ptrs, n, keep = self._stage_ptrs(intermediates)
            h = _lib.lib().moects_judge_stages(self._built(), ctypes.byref(desc), addr, nbytes, ptrs, n)
        else:
            h = _lib.lib().moects_judge(self._built(), ctypes.byref(desc), addr, nbytes)
        return self._keep(Judgement(_lib.check(h), self.id), k, kernel)

    def _keep(self, j, k, given):
        j.kernel = k
        j.source = given if given is not None else self.kernel_source if k is self.kernel else None
        self.judgements.append(j)
        return j

    def check(self, out, kernel=None, recipe=None, bound=None, tolerance=None, name=None, intermediates=None):
        """judge(), then raise AssertionError carrying the TAP's diagnostics unless it passed."""
        __tracebackhide__ = True  # pytest: the failure points at the test's line, not at this one
        j = self.judge(out, kernel, recipe, bound, tolerance, name, intermediates)
        if not j.passed:
            lines = self.repro_lines(self, j) if self.repro_lines else []
            raise AssertionError("%s: %s\n%s%s" % (self.id, j.verdict, j.text, "".join(l + "\n" for l in lines)))
        return j

    def outcome(self, verdict, reason, kernel=None, name=None):
        """Record a verdict without an output: "FAIL_CRASH" (the kernel raised), "UNSUPPORTED"
        (it refused the shape) or "SKIP" (no device), with a one-line reason."""
        k = describe(kernel) if kernel is not None else self.kernel
        if k is None:
            k = Kernel(name or "python", self.op, **({"recipe": "fused_moe.layer_v1"} if self.op == "fused_moe"
                                                     else {"recipe": "moe_route.v1"} if self.op == "moe_route"
                                                     else {"tolerance": (0.0, 0)}))
        desc = descriptor(k)
        h = _lib.lib().moects_judge_outcome(self._built(), ctypes.byref(desc), verdict.encode(),
                                            reason.encode("utf-8", "replace"))
        return self._keep(Judgement(_lib.check(h), self.id), k, kernel)


def cases(*globs, tier="smoke", config=None, tp=0, ep=0, root=None, seed=DEFAULT_SEED):
    """The cases matching globs (fnmatch on ids; none: all) in tier ("smoke", "full", "large",
    "all", or a list of them), from the registry under root (None: the library's default) or
    derived from one config (a cases/models/NAME.json or a raw Hugging Face config.json; tp/ep keep
    one layout). Registry order, as `moects list` prints."""
    return CaseList(globs, tier, config, tp, ep, root).cases(seed)


def case(case_id, seed=DEFAULT_SEED, root=None):
    """One case by its id (any tier)."""
    found = CaseList([case_id], "all", root=root).cases(seed)
    if not found:
        raise KeyError("no case %r in the registry" % case_id)
    return found[0]
