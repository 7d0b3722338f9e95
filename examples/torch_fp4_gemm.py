"""torch_fp4_gemm.py: a PyTorch "dequantize, then matmul" FP4 GEMM (MXFP4 and NVFP4, NT layout), the
way many users first write one, under moects. It claims no exact recipe: it declares its
accumulation class instead (FP32 accumulation, round to nearest, any order: torch.matmul on FP32
with TF32 off), so moects judges each output element against its own proven bound (PASS_BOUNDED).

Dequantization (DESIGN.md "Number formats"): E2M1 codes, element 2j in the low nibble and 2j+1 in
the high one, decode to 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives; MXFP4 scales are UE8M0
(2^(x-127), 0xFF NaN) per 32 elements along K, NVFP4 scales E4M3 per 16 (bias 7, 0x7F/0xFF NaN,
subnormals m * 2^-9), in the linear [rows][nkb] layout or the cuBLASLt/CUTLASS 128x4 swizzle.
D = out_rne(alpha * (A * sA) @ (B * sB)^T). Known weakness (shared with the C dequant kernels): a
dequantized value past the FP32 range (UE8M0 codes >= 253 with large elements) becomes Inf.

    moects run --kernel-py examples/torch_fp4_gemm.py:kernel 'fp4_gemm/*'

The BF16 variants (`bf16_kernels`, CUDA, BF16 outputs) show how torch's matmul flags map to a
declared class (docs/python.md "torch's flags"): the same BF16 x BF16 GEMM (torch.addmm, alpha
applied by cuBLAS to the FP32 accumulator) under allow_bf16_reduced_precision_reduction = True
(torch's default: cuBLASLt may add split-K partials in BF16) declares {"bf16_split_k": 132} and
passes; under False it declares plain FP32 accumulation and passes; under True while declaring
plain FP32 it is a mutant the accumulation check catches (issue 25's 10 cases):

    moects run --kernel-py examples/torch_fp4_gemm.py:bf16_kernels --kernel 'torch.*' \
        'fp4_gemm.*/regression/n-not-128/*'
"""
import torch

_E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]


def decode_e2m1(codes, K):
    """[rows, ceil(K/2)] uint8 -> [rows, K] float32."""
    table = torch.tensor(_E2M1, dtype=torch.float32, device=codes.device)
    c = codes.to(torch.int64)
    pairs = torch.stack([c & 0xF, c >> 4], dim=-1).reshape(codes.shape[0], -1)
    return table[pairs[:, :K]]


def decode_ue8m0(x):
    v = torch.ldexp(torch.ones_like(x, dtype=torch.float32), x.to(torch.int32) - 127)
    return torch.where(x == 0xFF, torch.full_like(v, float("nan")), v)


def decode_e4m3(x):
    x = x.to(torch.int32)
    e, m = (x >> 3) & 0xF, (x & 7).to(torch.float32)
    normal = torch.ldexp(1.0 + m / 8.0, e - 7)
    v = torch.where(e == 0, torch.ldexp(m, torch.full_like(e, -9)), normal)
    v = torch.where((x & 0x7F) == 0x7F, torch.full_like(v, float("nan")), v)
    return torch.where((x & 0x80) != 0, -v, v)


def scale_index(rows, nkb, swizzled, device):
    """[rows, nkb] int64 byte offsets of each (row, K-block) scale."""
    r = torch.arange(rows, device=device).unsqueeze(1)
    kb = torch.arange(nkb, device=device).unsqueeze(0)
    if not swizzled:
        return r * nkb + kb
    return ((r // 128) * ((nkb + 3) // 4) + kb // 4) * 512 + (r % 32) * 16 + ((r // 32) % 4) * 4 + kb % 4


def dequantize(codes, scales, rows, K, fmt, swizzled):
    g = 16 if fmt == "nvfp4" else 32
    nkb = (K + g - 1) // g
    vals = decode_e2m1(codes, K)
    s = scales.reshape(-1)[scale_index(rows, nkb, swizzled, codes.device)]
    s = decode_e4m3(s) if fmt == "nvfp4" else decode_ue8m0(s)
    return vals * s.repeat_interleave(g, dim=1)[:, :K]


def fp4_gemm(shape, args):
    """d [M, N] = alpha * dequant(a) @ dequant(b)^T, FP32 accumulation, written to args["out"]."""
    M, N, K = shape["M"], shape["N"], shape["K"]
    swz = shape["scale_layout"] == "swizzled_128x4"
    a = dequantize(args["a"], args["sa"], M, K, shape["format"], swz)
    b = dequantize(args["b"], args["sb"], N, K, shape["format"], swz)
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False  # FP32 products and sums, as declared
    try:
        d = (a @ b.T) * torch.tensor(args.get("alpha", 1.0), dtype=torch.float32)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev
    args["out"].copy_(d.to(args["out"].dtype))


# bound: FP32 accumulation (24 bits, round to nearest, any order). tolerance: used only by a moects
# without bounded verdicts (as the C dequant kernels declare: calc_diff 1e-5, any ULP distance).
kernel = {"name": "torch.fp4_gemm.dequant_matmul", "op": "fp4_gemm", "device": "cuda",
          "bound": {"bits": 24, "truncation": False}, "tolerance": (1e-5, 0xFFFFFFFF), "run": fp4_gemm}


def fp4_gemm_bf16(shape, args, reduced):
    """d [M, N] BF16 = rnd(alpha * dequant(a) @ dequant(b)^T): BF16 operands (the dequantized values
    are exact in BF16: at most 6 significant bits, FP32's exponent range), FP32 accumulation by cuBLAS
    with alpha in its epilogue, allow_bf16_reduced_precision_reduction = reduced."""
    M, N, K = shape["M"], shape["N"], shape["K"]
    swz = shape["scale_layout"] == "swizzled_128x4"
    a = dequantize(args["a"], args["sa"], M, K, shape["format"], swz).to(torch.bfloat16)
    b = dequantize(args["b"], args["sb"], N, K, shape["format"], swz).to(torch.bfloat16)
    m = torch.backends.cuda.matmul
    prev = m.allow_bf16_reduced_precision_reduction
    m.allow_bf16_reduced_precision_reduction = reduced
    try:
        zero = torch.zeros((M, N), dtype=torch.bfloat16, device=a.device)
        d = torch.addmm(zero, a, b.T, beta=0.0, alpha=float(args.get("alpha", 1.0)))
    finally:
        m.allow_bf16_reduced_precision_reduction = prev
    args["out"].copy_(d)


def bf16_only(shape):
    return shape["out_dtype"].lower() == "bf16" or "torch.addmm on BF16 operands gives a BF16 output"


# cuBLASLt's split-K on an H200 cut K into at most 132 pieces (its SM count) wherever
# tools/h200_check.sh logged torch's and cuBLAS's choices; a larger count would need a larger
# declaration (the bound grows as gamma(splits - 1, 2^-8)).
H200_SPLITS = 132
bf16_kernels = [
    {"name": "torch.fp4_gemm.bf16_matmul", "op": "fp4_gemm", "device": "cuda", "supports": bf16_only,
     "bound": {"bits": 24, "truncation": True, "bf16_split_k": H200_SPLITS},
     "run": lambda shape, args: fp4_gemm_bf16(shape, args, True)},
    {"name": "torch.fp4_gemm.bf16_matmul_fp32_reduction", "op": "fp4_gemm", "device": "cuda",
     "supports": bf16_only, "bound": {"bits": 24, "truncation": True},
     "run": lambda shape, args: fp4_gemm_bf16(shape, args, False)},
    {"name": "torch.mutant.fp4_gemm.bf16_reduction_undeclared", "op": "fp4_gemm", "device": "cuda",
     "supports": bf16_only, "bound": {"bits": 24, "truncation": True},
     "bug": "torch's default allow_bf16_reduced_precision_reduction (split-K partials added in BF16) while "
            "declaring FP32 accumulation",
     "run": lambda shape, args: fp4_gemm_bf16(shape, args, True)},
]
