"""numpy_moe_gemm.py: a CPU grouped MoE GEMM in numpy, "dequantize, then one GEMM per expert", as
engines' reference and fallback paths write it, for all four moe_gemm formats (DESIGN.md "Grouped MoE
GEMM"): W4A16 (BF16 activations x MXFP4 or NVFP4 weights), W4A8 (E4M3 activations with UE8M0 scales
x MXFP4 weights), MXFP4 x MXFP4 and NVFP4 x NVFP4; rows contiguous (m_indices, -1 = padding), masked
([E, max_m, K], masked_m) or by offsets (expert_offsets[E+1]); scales linear or 128x4-swizzled.

    D[r, :] = out_rne(alpha[e] * (deq(A[r, :]) @ deq(B[e])^T)),  e = the expert of row r

Every dequantized value is exact in FP32 (E2M1 has 2 significant bits, E4M3 4, BF16 8, a UE8M0 or
E4M3 scale 1 or 4) while it stays in FP32's range, so the only roundings are the FP32 GEMM's
additions (numpy float32 matmul: BLAS sgemm, any order), the alpha multiply and the output rounding:
it declares that accumulation class (24 bits, round to nearest even) and moects judges each element
against its proven bound (PASS_BOUNDED). Expected to fail the full tier's adversarial cases, where
UE8M0 codes >= 253 push dequantized values past FP32 (Inf * 0, Inf - Inf: NaN where exact_v1 is
+-Inf), as cpu.moe_gemm.dequant_sgemm does. W4A8 with FP32 activation scales is refused (E4M3 x an
FP32 scale is a rounded product the class does not declare).

    moects run --kernel-py examples/numpy_moe_gemm.py:kernel 'moe_gemm*'
"""
import numpy as np

from numpy_ep_gather import bf16_to_f32, f32_to_bf16

_E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0],
                 dtype=np.float32)


def _ue8m0_table():
    """UE8M0 code x -> 2^(x - 127) (OCP MX v1.0 sec. 5.4), 0xFF NaN; 2^-127 is an FP32 subnormal."""
    v = np.ldexp(np.float32(1.0), np.arange(255) - 127).astype(np.float32)
    return np.append(v, np.float32(np.nan))


def _e4m3_table():
    """E4M3 code -> value (OCP FP8 E4M3: bias 7, subnormals m * 2^-9, 0x7F and 0xFF NaN)."""
    x = np.arange(256)
    e, m = (x >> 3) & 0xF, (x & 7).astype(np.float64)
    v = np.where(e == 0, m * 2.0 ** -9, (1.0 + m / 8.0) * np.exp2(e - 7.0))
    v = np.where((x & 0x7F) == 0x7F, np.nan, v)
    return np.where(x & 0x80, -v, v).astype(np.float32)


_UE8M0, _E4M3 = _ue8m0_table(), _e4m3_table()


def decode_e2m1(codes, K):
    """[..., ceil(K/2)] uint8 codes (element 2j in the low nibble) -> [..., K] float32."""
    pairs = np.stack([codes & 0xF, codes >> 4], axis=-1).reshape(codes.shape[:-1] + (-1,))
    return _E2M1[pairs[..., :K]]


def scale_index(rows, nkb, swizzled):
    """[rows, nkb] byte offsets of each (row, K-block) scale: linear, or the cuBLASLt/CUTLASS 128x4
    swizzle of a [ceil(rows/128)*128, ceil(nkb/4)*4] layout."""
    r = np.arange(rows)[:, None]
    kb = np.arange(nkb)[None, :]
    if not swizzled:
        return r * nkb + kb
    return ((r // 128) * ((nkb + 3) // 4) + kb // 4) * 512 + (r % 32) * 16 + ((r // 32) % 4) * 4 + kb % 4


def dequant_fp4(codes, scales, rows, K, fmt, swizzled):
    """[rows, ceil(K/2)] E2M1 codes with the block scales of fmt (MXFP4: UE8M0 per 32 along K, NVFP4:
    E4M3 per 16), laid out in `scales` (bytes of one expert or row group) -> [rows, K] float32."""
    g = 16 if fmt == "nvfp4" else 32
    nkb = (K + g - 1) // g
    s = np.asarray(scales).reshape(-1)[scale_index(rows, nkb, swizzled)]
    s = (_E4M3 if fmt == "nvfp4" else _UE8M0)[s]
    return decode_e2m1(np.asarray(codes).reshape(rows, -1), K) * np.repeat(s, g, axis=1)[:, :K]


def row_groups(shape, args):
    """Per expert e, (the rows of A it owns as indices into A's rows [rows, K], flattened for masked)."""
    E, M = shape["E"], shape["M"]
    if shape["rows"] == "contiguous":
        ex = np.asarray(args["m_indices"])
        return [np.nonzero(ex == e)[0] for e in range(E)]
    if shape["rows"] == "masked":
        return [e * M + np.arange(int(n)) for e, n in enumerate(np.asarray(args["masked_m"]))]
    off = np.asarray(args["expert_offsets"])
    return [np.arange(int(off[e]), int(off[e + 1])) for e in range(E)]


def dequant_a(shape, args, rows):
    """A's rows (indices into [rows_total, K]) as float32 [len(rows), K]."""
    K, fmt = shape["K"], shape["format"]
    a = np.asarray(args["a"]).reshape(-1, np.asarray(args["a"]).shape[-1])
    if fmt == "w4a16":
        return bf16_to_f32(a[rows])
    if fmt == "w4a8":
        blk = shape["a_scale_block"]
        sa = np.asarray(args["sa"]).reshape(a.shape[0], -1)[rows]
        return _E4M3[a[rows]] * np.repeat(_UE8M0[sa], blk, axis=1)[:, :K]
    # FP4 x FP4: A's scales in scale_layout (offsets rows: linear), per expert block when masked
    swz = shape["scale_layout"] == "swizzled_128x4" and shape["rows"] != "offsets"
    groups = shape["E"] if shape["rows"] == "masked" else 1
    per = a.shape[0] // groups
    sa = np.asarray(args["sa"]).reshape(groups, -1)
    out = np.empty((len(rows), K), dtype=np.float32)
    for gi in range(groups):
        sel = (rows // per) == gi
        if sel.any():
            full = dequant_fp4(a[gi * per:(gi + 1) * per], sa[gi], per, K, shape["b_format"], swz)
            out[sel] = full[rows[sel] - gi * per]
    return out


def supports(shape):
    if shape["format"] == "w4a8" and shape["a_scale_f32"]:
        return False, "format: W4A8 with FP32 activation scales (a rounded dequantization)"
    return True


def moe_gemm(shape, args, groups=row_groups):
    """args["out"] [rows, N] (masked [E, max_m, N]), BF16 bits or FP32: D as in the module docstring.
    groups(shape, args): each expert's rows (row_groups)."""
    E, N, K = shape["E"], shape["N"], shape["K"]
    swz = shape["scale_layout"] == "swizzled_128x4"
    out = args["out"].reshape(-1, N)
    sb = np.asarray(args["sb"]).reshape(E, -1)
    alpha = np.asarray(args["alpha"], dtype=np.float32)
    for e, rows in enumerate(groups(shape, args)):
        if len(rows) == 0:
            continue
        w = dequant_fp4(args["b"][e], sb[e], N, K, shape["b_format"], swz)
        d = (dequant_a(shape, args, rows) @ w.T) * alpha[e]
        out[rows] = f32_to_bf16(d) if shape["out_dtype"] == "BF16" else d


kernel = {"name": "numpy.moe_gemm.dequant_matmul", "op": "moe_gemm", "bound": {"bits": 24, "truncation": False},
          "supports": supports, "run": moe_gemm}
