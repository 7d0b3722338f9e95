"""adapters.py: the layout adapters (docs/adapters.md): a case's tensors in an engine's layout and
back, each a named, versioned convention of libmoects (ref/layout.c, include/moects/moects.h).

    import moects
    c = moects.case("fused_moe.mxfp4/gpt-oss-20b/tp16/t4/smoke")
    a = c.inputs(layout=["w13.interleave1.v1", "scales.mxfp4.swizzle_128x4.v1"])   # gpt-oss's W13 order,
    # MXFP4 scales in the 128x4 tiles: a["w13"], a["w13_scale"], a["b13"] permuted, a["w13_scale"] and
    # a["w2_scale"] [E, tile bytes]; everything else as c.inputs() gives it

Two implementations of each adapter: `adapt()` calls libmoects (what case.inputs(layout=) uses), and
`forward_np()` / `inverse_np()` are a numpy twin written from the engines' own constructions
(DeepGEMM's stack of granules, vLLM's reshape/permute of the scale tiles), which the tests hold
bit for bit against the C one.

An adapter sees a tensor as its canonical (moects) layout [batch][rows][cols] of bytes:
- w13.*: rows = N1 = 2I rows of W13 ([gate | up] in moects: recipe w13=gate_up) of each expert;
- scales.*: linear block scales [batch][rows][K-blocks] <-> per batch the 128x4 tiles, padding 0xFF;
- fp4.*: packed E2M1 bytes (element 2j in the low nibble) <-> element 2j in the high nibble.
"""
import ctypes

import numpy as np

from . import _lib

PAD = 0xFF  # the scale tiles' padding (MOECTS_ADAPT_PAD): a NaN scale, which no kernel may read


def names():
    """The adapters libmoects registers, in its order."""
    L = _lib.lib()
    return [_lib.s(L.moects_adapter_name(i)) for i in range(L.moects_adapter_count())]


def conventions():
    """{name: one line naming the engine convention and the source it follows}."""
    L = _lib.lib()
    return {_lib.s(L.moects_adapter_name(i)): _lib.s(L.moects_adapter_convention(i))
            for i in range(L.moects_adapter_count())}


def kind(name):
    """"w13", "scales" or "fp4" (ValueError for a name that is none of the adapters)."""
    k = name.split(".", 1)[0]
    if k not in ("w13", "scales", "fp4") or name not in names():
        raise ValueError("adapter %r: no such adapter (%s)" % (name, ", ".join(names())))
    return k


def _bytes3(x, rows, cols):
    """x (any dtype, C order) as uint8 [batch, rows, cols] bytes."""
    b = np.ascontiguousarray(x).view(np.uint8).reshape(-1)
    return b.reshape(-1, rows, cols) if rows * cols else b.reshape(0, rows, cols)


def adapt(name, x, rows, cols, inverse=False):
    """libmoects's adapter `name` on the bytes of x seen as [batch][rows][cols] canonical bytes
    (forward) or as the forward's result (inverse): a new 1-D uint8 array of
    moects_adapter_bytes(name, inverse, batch, rows, cols) bytes. MoectsError on a bad shape."""
    L = _lib.lib()
    src = np.ascontiguousarray(x).view(np.uint8).reshape(-1)
    per = L.moects_adapter_bytes(name.encode(), int(not inverse), 1, rows, cols)
    batch = src.size // per if per > 0 else 0
    n = _lib.check(L.moects_adapter_bytes(name.encode(), int(inverse), batch, rows, cols))
    if per < 0 or batch * per != src.size:
        raise _lib.MoectsError("adapter %s: %d bytes are not [batch][%d][%d] (%s)" % (name, src.size, rows, cols,
                                                                                       _lib.errmsg()))
    out = np.empty(n, dtype=np.uint8)
    _lib.check(L.moects_adapt(name.encode(), int(inverse), batch, rows, cols, src.ctypes.data_as(ctypes.c_void_p),
                              src.size, out.ctypes.data_as(ctypes.c_void_p), out.size))
    return out


# ---- the numpy twin ----

def w13_perm(name, rows):
    """perm with engine[r] = canonical[perm[r]] for a W13 of `rows` = 2I rows under adapter name."""
    I = rows // 2
    can = np.arange(rows).reshape(2, I)  # [gate rows; up rows]
    if name == "w13.up_gate.v1":
        return np.concatenate([can[1], can[0]])
    if name == "w13.interleave1.v1":  # gpt-oss: x[..., ::2] gate, x[..., 1::2] linear
        return np.stack([can[0], can[1]], axis=1).reshape(-1)
    if name == "w13.interleave8.v1":  # DeepGEMM: [gate 0..7, up 0..7, gate 8..15, ...]
        if I % 8:
            raise ValueError("%s: I = %d is not a multiple of 8" % (name, I))
        return np.stack([can[0].reshape(-1, 8), can[1].reshape(-1, 8)], axis=1).reshape(-1)
    raise ValueError("%r: not a W13 adapter" % name)


def _tiles(b3):
    """[batch, rows, nkb] bytes -> [batch, tile bytes]: pad to 128 x 4 with PAD, then vLLM's
    reshape (batch, rows/128, 4, 32, nkb/4, 4) and permute (0, 1, 4, 3, 2, 5)."""
    B, R, K = b3.shape
    Rp, Kp = -(-R // 128) * 128, -(-K // 4) * 4
    p = np.full((B, Rp, Kp), PAD, dtype=np.uint8)
    p[:, :R, :K] = b3
    return p.reshape(B, Rp // 128, 4, 32, Kp // 4, 4).transpose(0, 1, 4, 3, 2, 5).reshape(B, -1)


def _untiles(t, rows, nkb):
    Rp, Kp = -(-rows // 128) * 128, -(-nkb // 4) * 4
    t = np.ascontiguousarray(t).view(np.uint8).reshape(-1, Rp // 128, Kp // 4, 32, 4, 4)
    return t.transpose(0, 1, 4, 3, 2, 5).reshape(-1, Rp, Kp)[:, :rows, :nkb]


def forward_np(name, x, rows, cols):
    """The numpy twin of adapt(name, x, rows, cols): a new 1-D uint8 array."""
    b3 = _bytes3(x, rows, cols)
    k = kind(name)
    if k == "w13":
        return np.ascontiguousarray(b3[:, w13_perm(name, rows), :]).reshape(-1)
    if k == "scales":
        return _tiles(b3).reshape(-1)
    return ((b3 >> 4) | (b3 << 4)).astype(np.uint8).reshape(-1)


def inverse_np(name, y, rows, cols):
    """The numpy twin of adapt(name, y, rows, cols, inverse=True): the canonical bytes, 1-D uint8."""
    k = kind(name)
    if k == "scales":
        return np.ascontiguousarray(_untiles(y, rows, cols)).reshape(-1)
    b3 = _bytes3(y, rows, cols)
    if k == "w13":
        out = np.empty_like(b3)
        out[:, w13_perm(name, rows), :] = b3
        return out.reshape(-1)
    return ((b3 >> 4) | (b3 << 4)).astype(np.uint8).reshape(-1)


# ---- a case's inputs in an engine layout ----

def _layer_names(layout):
    names_ = [layout] if isinstance(layout, str) else list(layout)
    kinds = [kind(n) for n in names_]
    for k in set(kinds):
        if kinds.count(k) > 1:
            raise ValueError("layout %s: two %s adapters" % (names_, k))
    # W13's rows first (its scales are permuted while linear), then the nibbles, then the tiles
    return sorted(names_, key=lambda n: ("w13", "fp4", "scales").index(kind(n)))


def _rows_of(arr, axis_len):
    """(rows, cols) of a per-expert tensor arr [E, axis_len, ...] as bytes: cols = one row's bytes."""
    return axis_len, arr.nbytes // (arr.shape[0] * axis_len) if arr.shape[0] and axis_len else 0


def _fused_w13(name, shape, t, inverse=False):
    if shape["activation"] == "relu2":
        raise ValueError("%s: relu2 has no gate: W13 has one order" % name)
    N1 = 2 * shape["I"]
    for key in ("w13", "w13_scale", "b13"):
        if t.get(key) is not None:
            rows, cols = _rows_of(t[key], N1)
            t[key] = adapt(name, t[key], rows, cols, inverse).view(t[key].dtype).reshape(t[key].shape)
    if t.get("w13_block_scale") is not None:  # FP8 block-128: scale rows are 128 W13 rows
        if name != "w13.up_gate.v1" or shape["I"] % 128:
            raise ValueError("%s: FP8 block-128 scales cover 128 rows of W13: only whole 128-row blocks "
                             "can move (w13.up_gate.v1 with I a multiple of 128)" % name)
        b = t["w13_block_scale"]
        t["w13_block_scale"] = adapt(name, b, N1 // 128, b.nbytes // (b.shape[0] * (N1 // 128)),
                                     inverse).view(b.dtype).reshape(b.shape)


def _fused_mx(name, shape, t, inverse=False):
    if shape["format"] != "mxfp4":
        raise ValueError("%s: the case's weights are %s, not MXFP4" % (name, shape["format"]))
    if kind(name) == "scales":
        if not name.startswith("scales.mxfp4."):
            raise ValueError("%s: the case's scales are MXFP4 (UE8M0 per 32)" % name)
        dims = {"w13_scale": (2 * shape["I"], shape["H"] // 32), "w2_scale": (shape["H"], shape["I"] // 32)}
        for key, (rows, nkb) in dims.items():
            s = t[key]
            E = s.shape[0]
            t[key] = adapt(name, s, rows, nkb, inverse).reshape((E, rows, nkb) if inverse else (E, -1))
    else:
        for key in ("w13", "w2"):
            c = t[key]
            t[key] = adapt(name, c, c.shape[1], c.shape[2], inverse).reshape(c.shape)


def convert(op, shape, inputs, layout, inverse=False):
    """A case's inputs (numpy arrays by name, as Case.inputs() gives them) with the tensors each
    adapter of layout (a name or a list of names, at most one of each kind) touches replaced by new
    read-only arrays in that engine layout; the rest are the same arrays. fused_moe only: w13.* move
    the rows of w13, w13_scale, b13 (and the FP8 block scales, by whole 128-row blocks), scales.mxfp4.*
    take w13_scale, w2_scale to [E, tile bytes], fp4.* swap the nibbles of w13, w2. ValueError for an
    adapter the case cannot take (relu2 has no gate; an MXFP4 adapter on BF16 weights). inverse: inputs
    are in that engine layout and come back in moects's (case_from_tensors of an engine's tensors)."""
    if op != "fused_moe":
        raise ValueError("layout: adapters apply to fused_moe cases (this case is %s)" % op)
    t = dict(inputs)
    names_ = _layer_names(layout)
    for name in reversed(names_) if inverse else names_:
        (_fused_w13 if kind(name) == "w13" else _fused_mx)(name, shape, t, inverse)
    for key, v in t.items():
        if isinstance(v, np.ndarray) and v is not inputs.get(key):
            v.flags.writeable = False
    return t
