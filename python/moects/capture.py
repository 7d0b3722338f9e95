"""capture.py: an engine's own tensors as a moects case (issue 32): `case_from_tensors` and the
`@capture` decorator.

The tensors (numpy arrays, or torch tensors on any device: read through `.detach().cpu()` and
`.numpy()`, bfloat16 through an int16 view) go, under the op's export names and layouts, into one
safetensors file with the case's metadata, and that file through libmoects's `moects_case_add`:
the same checks and store as `moects case add FILE`, none done here. A refused input raises
CaseRefused with libmoects's one line ("FILE: TENSOR: the rule broken"). The case's shape is read
off the tensors (`shape=` overrides a field); the reference is moects's own, never the engine's.

    import moects
    cid = moects.case_from_tensors("ep_gather", x=x, topk_ids=ids, topk_weights=w,
                                   input_index=idx, expert_map=emap)
    moects.case(cid, tier="local")             # judged like a registry case; `moects run ID`

An engine's layout (W13 order, scale tiles, nibble order) is the adapters' business: `layout=NAME`
(fused_moe) turns the tensors back into moects's layouts with moects.adapters.convert(..., inverse=True).
"""
import ctypes
import functools
import json
import os
import sys
import tempfile

from . import _lib
from .case import DEFAULT_SEED

# numpy dtype name -> safetensors dtype; BF16 travels as uint16 bits (the package's convention).
_ST_DTYPE = {"uint16": "BF16", "int16": "BF16", "float32": "F32", "int32": "I32", "int64": "I64",
             "uint8": "U8", "int8": "I8", "float16": "F16", "float64": "F64", "bool": "BOOL",
             "uint32": "U32", "uint64": "U64"}


class CaseRefused(_lib.MoectsError, ValueError):
    """`case add` refused the tensors: str(e) is its one line naming the file, tensor and rule."""


def to_numpy(v):
    """A numpy array of v's bytes in C order: numpy as is; a torch tensor (or anything with
    .detach().cpu().numpy()) moved to the host, bfloat16 as its uint16 bits and float8/float4 types
    as their bytes."""
    import numpy as np
    if hasattr(v, "detach"):
        t = v.detach().cpu()
        kind = str(getattr(t, "dtype", ""))
        if kind.endswith("bfloat16"):
            t = _view(t, "int16")
        elif "float8" in kind or "float4" in kind:
            t = _view(t, "uint8")
        a = np.asarray(t.contiguous().numpy() if hasattr(t, "contiguous") else t.numpy())
        return a.view(np.uint16) if kind.endswith("bfloat16") else a
    return np.asarray(v)


def _view(t, name):
    """t.view(torch.<name>), or a numpy dtype for a stand-in tensor where torch is not installed."""
    try:
        import torch
        return t.view(getattr(torch, name))
    except ImportError:
        import numpy as np
        return t.view(np.dtype(name))


def _write_safetensors(path, arrays, meta):
    """arrays (name -> C-order numpy array) and meta (str -> str) as a safetensors file at path: an
    8-byte little-endian header length, the JSON header padded to 8 bytes, then the data in order."""
    import numpy as np
    header, off = {}, 0
    for name, a in arrays.items():
        dt = _ST_DTYPE.get(a.dtype.name)
        if dt is None:
            raise CaseRefused("%s: dtype %s: not a safetensors dtype moects reads" % (name, a.dtype.name))
        header[name] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [off, off + a.nbytes]}
        off += a.nbytes
    header["__metadata__"] = meta
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little") + h)
        for a in arrays.values():
            f.write(memoryview(np.ascontiguousarray(a)).cast("B"))


def _dims(arrays, name, ndim, field):
    """The dims of tensor name, which must be there with ndim dims to read the case's field from."""
    a = arrays.get(name)
    if a is None or a.ndim != ndim:
        raise CaseRefused("%s: %s, want %d dims (the case's %s is read from it)"
                          % (name, "missing" if a is None else "shape %s" % list(a.shape), ndim, field))
    return a.shape


def _ep_split(emap):
    """(ep_size, ep_rank) whose contiguous split (cases/ep_split.c) gives the map's local experts:
    n = its entries >= 0, first = the lowest such expert; (1, 0) when none fits."""
    import numpy as np
    E, local = len(emap), np.flatnonzero(np.asarray(emap) >= 0)
    for size in range(1, E + 1):
        base, rem = divmod(E, size)
        for rank in range(size):
            n, first = base + (rank < rem), rank * base + min(rank, rem)
            if n == len(local) and (n == 0 or first == local[0]):
                return size, rank
    return 1, 0


def _ep_gather_shape(t, out_dtype):
    """ep_gather's shape (moects_ep_gather_shape) from x [M_sum, H], topk_ids [T, k], expert_map."""
    T, k = _dims(t, "topk_ids", 2, "T, k")
    M_sum, H = _dims(t, "x", 2, "H")
    emap = t.get("expert_map")
    size, rank = _ep_split(emap) if emap is not None else (1, 0)
    shape = {"T": T, "k": k, "M_sum": M_sum, "H": H, "id_dtype": _ST_DTYPE.get(t["topk_ids"].dtype.name, "?"),
             "out_dtype": out_dtype, "has_expert_map": emap is not None, "ep_size": size, "ep_rank": rank,
             "routing": "uniform"}
    if emap is not None:
        shape["E_global"] = len(emap)
    return shape


def _fp4_gemm_shape(t, out_dtype, scalars):
    """fp4_gemm's shape (moects_fp4_gemm_shape) from a [M, K/2], b [N, K/2] and A's scales sa: linear
    [M, K-blocks] (a block of 16 along K: NVFP4, of 32: MXFP4), or swizzled bytes (the 128x4 tiles
    of DESIGN.md "Scale layouts": rows to 128, K-blocks to 4), NVFP4 when gs_a is given and both fit."""
    M, half = _dims(t, "a", 2, "M, K")
    N = _dims(t, "b", 2, "N")[0]
    sa = t.get("sa")
    linear = sa is not None and sa.ndim == 2
    if linear:
        nv = sa.shape[1] * 16 >= 2 * half > sa.shape[1] * 16 - 16
    else:
        tiles = [-(-M // 128) * 128 * -(-(-(-2 * half // b)) // 4) * 4 for b in (16, 32)]
        size = sa.size if sa is not None else -1
        nv = size == tiles[0] and (size != tiles[1] or "gs_a" in scalars)
    return {"M": M, "N": N, "K": 2 * half, "format": "nvfp4" if nv else "mxfp4",
            "scale_layout": "linear" if linear else "swizzled_128x4", "out_dtype": out_dtype, "gemm": "captured"}


def _moe_route_shape(t, outputs):
    """moe_route's shape from logits [T, E] and bias, k from the router's outputs when given (topk_ids
    or topk_weights [T, k]); the router's method, k, groups, renormalize and scale come from shape=."""
    T, E = _dims(t, "logits", 2, "T, E")
    sh = {"T": T, "E": E, "has_bias": t.get("bias") is not None,
          "logits_dtype": _ST_DTYPE.get(t["logits"].dtype.name, "?"), "n_group": 1, "topk_group": 1}
    for o in outputs:
        sh["k"] = _dims(outputs, o, 2, "k")[1]
    return sh


def _ep_split_n(emap, E):
    """(ep_size, ep_rank) for a fused_moe map: the contiguous split that gives its local experts
    (_ep_split), else one whose rank holds E experts (the generator's count; the map itself is what
    the reference reads), else (1, 0), which the case's build refuses with a line."""
    size, rank = _ep_split(emap)
    base = len(emap)
    for sz in range(2, base + 1) if size == 1 else ():
        for r in range(sz):
            if base // sz + (r < base % sz) == E:
                return sz, r
    return size, rank


def _fused_moe_shape(t, out_dtype):
    """fused_moe's shape (moects_fused_moe_shape) from x [T, H], topk_ids [T, k], w13 [E, N1, H'] and
    w2 [E, H, I'] (BF16 as uint16; uint8 codes: FP8 block-128 beside w13_block_scale, else MXFP4
    with two codes a byte), b13 (biases) and expert_map (E_global and the EP split). The activation
    and its constants are not in the tensors: shape= gives them (default silu, no limit or alpha)."""
    T, H = _dims(t, "x", 2, "T, H")
    k = _dims(t, "topk_ids", 2, "k")[1]
    E = _dims(t, "w13", 3, "E")[0]
    fmt = "bf16" if t["w13"].dtype.itemsize == 2 else "fp8_128" if "w13_block_scale" in t else "mxfp4"
    inter = _dims(t, "w2", 3, "I")[2] * (2 if fmt == "mxfp4" else 1)
    emap = t.get("expert_map")
    size, rank = _ep_split_n(emap, E) if emap is not None else (1, 0)
    return {"T": T, "k": k, "H": H, "I": inter, "E": E, "E_global": len(emap) if emap is not None else E,
            "has_expert_map": emap is not None, "format": fmt, "activation": "silu", "act_limit": 0.0,
            "act_alpha": 0.0, "has_bias": t.get("b13") is not None, "out_dtype": out_dtype, "ep_size": size,
            "ep_rank": rank, "routing": "uniform"}


def _align(mi):
    """The largest of 128, 64, .., 1 that the rows of m_indices come in: each tile of that many rows
    one expert's (or padding, -1)."""
    import numpy as np
    for a in (128, 64, 32, 16, 8, 4, 2, 1):
        if len(mi) % a == 0:
            tiles = np.asarray(mi).reshape(-1, a)
            top = tiles.max(axis=1, keepdims=True)
            if np.all((tiles == top) | (tiles == -1)):
                return a
    return 1


def _moe_gemm_shape(t, out_dtype, scalars):
    """moe_gemm's shape (moects_moe_gemm_shape) from b [E, N, K/2], a ([M, ..] or masked [E, max_m, ..]:
    BF16 W4A16, K/2 bytes FP4 x FP4, K bytes W4A8), sb (linear [E, N, K-blocks]: a block of 16 along
    K NVFP4, of 32 MXFP4; or swizzled bytes [E, ..], NVFP4 when gs_b is given and both fit), sa (W4A8:
    its block and FP32 or UE8M0) and the row tensor that is there: m_indices (contiguous, its align
    read off the rows), masked_m or expert_offsets. The rows per expert are the row tensor's."""
    E, N, half = _dims(t, "b", 3, "E, N, K")
    K = 2 * half
    rows = next((r for n, r in (("m_indices", "contiguous"), ("masked_m", "masked"), ("expert_offsets", "offsets"))
                 if t.get(n) is not None), None)
    if rows is None:
        raise CaseRefused("m_indices, masked_m, expert_offsets: missing (one gives the rows per expert)")
    a = _dims(t, "a", 3 if rows == "masked" else 2, "M")
    sb, sa = t.get("sb"), t.get("sa")
    linear = sb is not None and sb.ndim == 3
    if linear:
        nv = sb.shape[2] * 16 >= K > sb.shape[2] * 16 - 16
    else:
        size = [-(-N // 128) * 128 * -(-(-(-K // b)) // 4) * 4 for b in (16, 32)]
        per = sb.size // E if sb is not None else -1
        nv = per == size[0] and (per != size[1] or "gs_b" in t or "gs_b" in scalars)
    kind = "w4a16" if t["a"].dtype.itemsize == 2 else "w4a8" if a[-1] == K else ("nvfp4" if nv else "mxfp4")
    block = K // sa.shape[-1] if kind == "w4a8" and sa is not None and sa.shape[-1] else 0
    return {"E": E, "M": a[1] if rows == "masked" else a[0], "N": N, "K": K, "format": kind,
            "b_format": "nvfp4" if nv else "mxfp4", "rows": rows,
            "align": _align(t["m_indices"]) if rows == "contiguous" else 1,
            "a_scale_block": 128 if block > 64 else 32 if block else 0,
            "a_scale_f32": kind == "w4a8" and sa is not None and sa.dtype.name == "float32",
            "scale_layout": "linear" if linear else "swizzled_128x4", "out_dtype": out_dtype, "gemm": "captured"}


def _case_json(op, arrays, scalars, out_dtype, data, shape, outputs=None):
    """moects.case of the file: {"id", "op", "data", "shape"}, the shape read off the tensors with the
    caller's shape= fields over it."""
    if op == "ep_gather":
        sh = _ep_gather_shape(arrays, out_dtype)
    elif op == "fp4_gemm":
        sh = _fp4_gemm_shape(arrays, out_dtype, scalars)
    elif op == "moe_route":
        sh = _moe_route_shape(arrays, outputs or {})
    elif op == "fused_moe":
        sh = _fused_moe_shape(arrays, out_dtype)
    elif op == "moe_gemm":
        sh = _moe_gemm_shape(arrays, out_dtype, scalars)
    else:
        sh = {}  # an op without a shape of its own: libmoects says which it takes
    sh.update(shape or {})
    if op == "ep_gather" and "E_global" not in sh:
        raise CaseRefused("ep_gather without expert_map: give shape={'E_global': N}, the model's routed experts")
    prefix = op + ("." + sh["format"] if op in ("fp4_gemm", "moe_gemm", "fused_moe") else "")
    return {"id": prefix + "/captured", "op": op, "data": data, "shape": sh}


def case_from_tensors(op, recipe=None, cases_dir=None, *, name=None, layout=None, shape=None, seed=DEFAULT_SEED,
                      data="exact", **tensors):
    """Store an engine's inputs of op (every op `moects case add` takes: "ep_gather", "fp4_gemm",
    "moe_gemm", "fused_moe", "moe_route") as a local case and return its id,
    "<op>[.<format>]/local/[name-]<16 hex digits>" (the same tensors give the same id; a second
    call finds the case there).

    tensors: the op's inputs by their export names (moects.h moects_casedata_input: ep_gather x,
    topk_ids, topk_weights, input_index, expert_map; fp4_gemm a, b, sa, sb; moe_gemm a, sa, b, sb,
    alpha, gs_a, gs_b and one of m_indices, masked_m, expert_offsets, which gives the rows per expert;
    fused_moe x, topk_ids, topk_weights, expert_map, w13, w13_scale (FP8: w13_block_scale), w2,
    w2_scale, b13, b2, mid_global_scale (left out: ones, read only by an NVFP4 intermediate);
    moe_route logits, bias, its outputs topk_ids or topk_weights giving k only), numpy arrays or torch
    tensors, BF16 as bfloat16 or uint16 bits; None for an input the case has none of. A number is a
    scalar (fp4_gemm alpha, gs_a, gs_b); a string `activation` is the fused layer's (moects's names,
    or vLLM's gelu, swigluoai, relu2_no_mul); other strings are left out. `out` (the engine's output buffer) gives the output dtype and
    is not stored. recipe: the recipe the case is judged under (None: the op's first). cases_dir:
    the user case folder (None: $MOECTS_CASES_DIR, else <root>/cases/local). name: a label in the id.
    layout: the tensors' engine layout (adapter names, docs/adapters.md; fused_moe). shape: fields over the shape read
    from the tensors (ep_gather without a map needs E_global; routing "stale-ids" or "neg-ids" lets
    ids outside [0, E_global) through; moe_route needs the model's method, k, n_group, topk_group,
    renormalize, scale; fused_moe takes its activation's act_limit and act_alpha from here; moe_gemm
    its align where the rows do not tell it). seed: the generator's seed of the case's other facts.
    Raises CaseRefused with libmoects's one line when the op's contract refuses a tensor; nothing is
    written then. DESIGN.md "Local cases", issue 32."""
    out = tensors.pop("out", None)
    facts = {k: _ACTIVATIONS.get(v, v) for k, v in tensors.items() if k in _SHAPE_FACTS and isinstance(v, str)}
    shape = dict(facts, **(shape or {}))
    tensors = {k: v for k, v in tensors.items() if not isinstance(v, str)}  # flags and names are not inputs
    outputs = {k: to_numpy(tensors.pop(k)) for k in ("topk_ids", "topk_weights")
               if op == "moe_route" and tensors.get(k) is not None}  # the router's outputs: k
    scalars = {k: float(v) for k, v in tensors.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    arrays = {k: to_numpy(v) for k, v in tensors.items() if v is not None and k not in scalars}
    out_dtype = _ST_DTYPE.get(to_numpy(out).dtype.name, "?") if out is not None else "BF16"
    if op == "fused_moe" and arrays.get("mid_global_scale") is None and getattr(arrays.get("w13"), "ndim", 0) == 3:
        import numpy as np  # read only by a recipe with an NVFP4 intermediate; an engine's own, when it has one
        arrays["mid_global_scale"] = np.ones(arrays["w13"].shape[0], np.float32)
    case = _case_json(op, arrays, scalars, out_dtype, data, shape, outputs)
    if layout is not None:  # the shape reads no tensor an adapter reshapes (the scales)
        from . import adapters
        arrays = adapters.convert(op, case["shape"], arrays, layout, inverse=True)
    meta = {"moects.case": json.dumps(case),
            "moects.seed": str(int(seed)), "moects.scalars": json.dumps(scalars)}
    if recipe:
        meta["moects.recipe"] = recipe
    fn = getattr(_lib.lib(), "moects_case_add", None)
    if fn is None:
        raise _lib.MoectsError("%s: no moects_case_add (a libmoects older than case_from_tensors)" % _lib.path())
    fn.restype, fn.argtypes = ctypes.c_int, [ctypes.c_char_p] * 3 + [ctypes.c_char_p, ctypes.c_size_t]
    with tempfile.TemporaryDirectory(prefix="moects-capture-") as tmp:
        path = os.path.join(tmp, "%s-%s.safetensors" % (op, name or "captured"))
        _write_safetensors(path, arrays, meta)
        buf = ctypes.create_string_buffer(256)
        rc = fn(os.fsencode(path), os.fsencode(cases_dir) if cases_dir else None, name.encode() if name else None,
                buf, len(buf))
    if rc < 0:
        raise CaseRefused(_lib.errmsg())
    return buf.value.decode()


def capture(op, cases_dir=None, argmap=None, limit=1, when=None, **options):
    """A decorator saving the calls of an engine function as local cases of op, then calling it
    unchanged (its result returned as it is; a refused capture warns and does not stop the call).

    argmap: the function's parameter name -> the op's export name (a name missing from it is kept;
    one mapped to None is left out; arguments without a shape are left out, but for the op's scalars),
    or a callable(args dict) -> tensors dict. limit: the first N
    calls are saved (None: every call when holds). when: a predicate on the bound arguments (a dict
    by parameter name); only calls where it holds count toward limit. options go to
    case_from_tensors (recipe, name, layout, shape, seed). The ids saved are the wrapper's `.cases`.
    """
    import inspect
    import warnings

    def wrap(fn):
        sig = inspect.signature(fn)

        @functools.wraps(fn)
        def call(*args, **kwargs):
            if limit is None or len(call.cases) + len(call.refused) < limit:
                bound = sig.bind(*args, **kwargs)
                bound.apply_defaults()
                got = dict(bound.arguments)
                if when is None or when(got):
                    try:
                        call.cases.append(case_from_tensors(op, cases_dir=cases_dir, **_mapped(got, argmap),
                                                            **options))
                    except CaseRefused as e:  # the engine's call goes on: a capture is a by-product
                        warnings.warn("moects.capture(%s) of %s: %s" % (op, fn.__name__, e), stacklevel=2)
                        call.refused.append(str(e))
            return fn(*args, **kwargs)

        call.cases, call.refused = [], []
        return call
    return wrap


_SCALARS = ("alpha", "gs_a", "gs_b")  # fp4_gemm's scalars (moects_casedata_scalar)
_SHAPE_FACTS = ("activation",)  # a fused_moe call's string argument that is a fact of the case's shape
# vLLM's fused_moe activation names (vllm/model_executor/layers/fused_moe) -> moects's (docs/fused_moe.md):
# "gelu" is gelu_and_mul, the erf GELU; "swigluoai" gpt-oss's clamped SwiGLU; "relu2_no_mul" relu(x)^2
_ACTIVATIONS = {"gelu": "gelu_erf", "swigluoai": "gpt_oss", "relu2_no_mul": "relu2"}


def _mapped(args, argmap):
    """The call's arguments under the op's names (argmap as capture() says): its tensors (anything
    with a shape) and the op's scalars; flags, strings and None are not inputs."""
    if callable(argmap):
        return argmap(args)
    m, out = argmap or {}, {}
    for k, v in args.items():
        n = m.get(k, k)
        number = isinstance(v, (int, float)) and not isinstance(v, bool)
        if n is not None and (hasattr(v, "shape") or (number and n in _SCALARS) or
                              (isinstance(v, str) and n in _SHAPE_FACTS)):
            out[n] = v
    return out
