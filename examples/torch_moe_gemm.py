"""torch_moe_gemm.py: the grouped MoE GEMM over all local experts in PyTorch on the GPU, as serving
engines' unfused paths run it on Hopper: per expert, the weights dequantized and one GEMM over that
expert's rows, in every moe_gemm format and row layout (DESIGN.md "Grouped MoE GEMM").

  W4A16 with MXFP4 weights (alpha = 1), BF16 output: the weights dequantized to BF16 (E2M1 x UE8M0
    has 2 significant bits: exact) and a BF16 GEMM on the tensor cores (torch.matmul, cuBLAS), with
    BF16 reduced-precision reductions off, so the FP32 accumulator is rounded once, to the output.
  Otherwise (NVFP4 weights' alpha, W4A8, FP4 x FP4, FP32 output): both operands dequantized to FP32
    (exact: E4M3 x UE8M0 has 4 significant bits), FP32 GEMM with TF32 off, times alpha[e] in FP32.

It declares the accumulation class that covers both (24 bits, truncating: Hopper's tensor cores
truncate their FP32 sums; cuBLAS SGEMM's round-to-nearest sums lie within it) and moects judges each
element against its bound (PASS_BOUNDED). Expected to fail the full tier's adversarial cases (UE8M0
codes >= 253: dequantized values past the format's range, NaN where exact_v1 is +-Inf), as the C
dequantizing kernels do; W4A8 with FP32 activation scales is refused (a rounded dequantization).

    moects run --kernel-py examples/torch_moe_gemm.py:kernel 'moe_gemm*'
"""
import torch

from torch_fp4_gemm import decode_e2m1, decode_e4m3, decode_ue8m0, scale_index


def dequant_fp4(codes, scales, rows, K, fmt, swizzled):
    """[rows, ceil(K/2)] E2M1 codes and the block scales of fmt (MXFP4: UE8M0 per 32, NVFP4: E4M3 per
    16), in `scales` (one expert's or row group's bytes) -> [rows, K] float32."""
    g = 16 if fmt == "nvfp4" else 32
    s = scales.reshape(-1)[scale_index(rows, (K + g - 1) // g, swizzled, codes.device)]
    s = decode_e4m3(s) if fmt == "nvfp4" else decode_ue8m0(s)
    return decode_e2m1(codes.reshape(rows, -1), K) * s.repeat_interleave(g, dim=1)[:, :K]


def row_groups(shape, args):
    """Per expert, the indices of its rows among A's rows (masked: of [E * max_m])."""
    E, M = shape["E"], shape["M"]
    if shape["rows"] == "contiguous":
        ex = args["m_indices"].long()
        return [torch.nonzero(ex == e).flatten() for e in range(E)]
    if shape["rows"] == "masked":
        n = args["masked_m"].tolist()
        return [e * M + torch.arange(n[e], device=args["a"].device) for e in range(E)]
    off = args["expert_offsets"].tolist()
    return [torch.arange(off[e], off[e + 1], device=args["a"].device) for e in range(E)]


def dequant_a(shape, args, rows):
    """A's rows as float32 [len(rows), K] (W4A16: BF16 as is)."""
    K, fmt = shape["K"], shape["format"]
    a = args["a"].reshape(-1, args["a"].shape[-1])
    if fmt == "w4a16":
        return a[rows]
    if fmt == "w4a8":
        sa = args["sa"].reshape(a.shape[0], -1)[rows]
        return decode_e4m3(a[rows]) * decode_ue8m0(sa).repeat_interleave(shape["a_scale_block"], dim=1)[:, :K]
    swz = shape["scale_layout"] == "swizzled_128x4" and shape["rows"] != "offsets"
    groups = shape["E"] if shape["rows"] == "masked" else 1
    per = a.shape[0] // groups
    sa = args["sa"].reshape(groups, -1)
    out = torch.empty((len(rows), K), dtype=torch.float32, device=a.device)
    for g in range(groups):
        sel = (rows // per) == g
        if bool(sel.any()):
            full = dequant_fp4(a[g * per:(g + 1) * per], sa[g], per, K, shape["b_format"], swz)
            out[sel] = full[rows[sel] - g * per]
    return out


def supports(shape):
    if shape["format"] == "w4a8" and shape["a_scale_f32"]:
        return False, "format: W4A8 with FP32 activation scales (a rounded dequantization)"
    return True


def moe_gemm(shape, args):
    """args["out"] [rows, N] (masked [E, max_m, N]) = alpha[e] * deq(A) @ deq(B[e])^T per expert."""
    E, N, K = shape["E"], shape["N"], shape["K"]
    swz = shape["scale_layout"] == "swizzled_128x4"
    out = args["out"].reshape(-1, N)
    sb = args["sb"].reshape(E, -1)
    alpha = args["alpha"].tolist()
    bf16 = shape["format"] == "w4a16" and shape["out_dtype"] == "BF16"
    saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    try:
        for e, rows in enumerate(row_groups(shape, args)):
            if rows.numel() == 0:
                continue
            w = dequant_fp4(args["b"][e], sb[e], N, K, shape["b_format"], swz)
            a = dequant_a(shape, args, rows)
            if bf16 and alpha[e] == 1.0:  # one rounding: FP32 accumulator -> BF16 output
                out[rows] = torch.matmul(a, w.to(torch.bfloat16).T)
            else:
                d = torch.matmul(a.float(), w.T) * torch.tensor(alpha[e], dtype=torch.float32, device=w.device)
                out[rows] = d.to(out.dtype)
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = saved


kernel = {"name": "torch.moe_gemm.dequant_matmul", "op": "moe_gemm", "device": "cuda",
          "bound": {"bits": 24, "truncation": True}, "supports": supports, "run": moe_gemm}
