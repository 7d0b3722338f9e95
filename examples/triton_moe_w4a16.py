"""triton_moe_w4a16.py: a fused W4A16 grouped MoE GEMM in Triton, in the shape of the Triton fused-MoE
kernels serving engines run on Hopper for MXFP4 weights: BF16 activations, E2M1 weight codes with
UE8M0 block scales (32 along K) dequantized to BF16 in registers inside the K loop, tl.dot on the
tensor cores with an FP32 accumulator, rounded once to the BF16 output (alpha is 1 for MXFP4).

Rows: the host turns the row layout (contiguous m_indices, masked_m or expert_offsets) into tiles of
at most BLOCK_M rows of one expert (e, first row, end), as engines' align-block-size step does; the
grid is (tiles, N / BLOCK_N). Scales linear [N][K/32] or 128x4-swizzled. Dequantization is exact
(E2M1 x UE8M0 has 2 significant bits; the scale is built from its bits, not exp2, so 2^-127 and NaN
for 0xFF are exact too). It declares its accumulation class (24 bits, truncating: the tensor cores'
FP32 sums) and moects judges each element against its bound (PASS_BOUNDED). Other formats, NVFP4
weights (alpha != 1) and an FP32 output are refused (UNSUPPORTED: a coverage gap, reported).

    moects run --kernel-py examples/triton_moe_w4a16.py:kernels --kernel 'triton.*' 'moe_gemm.w4a16*'

`kernels` adds a mutant, a tile straddling two experts (offsets rows), which moects must catch.
"""
import torch
import triton
import triton.language as tl

BLOCK_M, BLOCK_N, BLOCK_K = 64, 64, 64


@triton.jit
def _w4a16_moe(a_ptr, b_ptr, sb_ptr, out_ptr, tiles_ptr, N, K, NKB, SB_E,
               SWIZZLED: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    t = tl.program_id(0)
    e = tl.load(tiles_ptr + 3 * t).to(tl.int64)
    r0 = tl.load(tiles_ptr + 3 * t + 1)
    r1 = tl.load(tiles_ptr + 3 * t + 2)
    rm = r0 + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    mmask, nmask = rm < r1, rn < N
    kb2 = (K + 1) // 2
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        rk = k0 + tl.arange(0, BK)
        kmask = rk < K
        a = tl.load(a_ptr + rm[:, None].to(tl.int64) * K + rk[None, :], mask=mmask[:, None] & kmask[None, :], other=0.0)
        wmask = nmask[:, None] & kmask[None, :]
        byte = tl.load(b_ptr + e * N * kb2 + rn[:, None].to(tl.int64) * kb2 + rk[None, :] // 2, mask=wmask, other=0)
        code = (byte.to(tl.int32) >> ((rk[None, :] % 2) * 4)) & 0xF
        mag, mant = code & 7, code & 1
        twice = tl.where((mag >> 1) == 0, mant, (2 + mant) << tl.maximum((mag >> 1) - 1, 0))  # 2 * |E2M1 value|
        val = twice.to(tl.float32) * 0.5
        val = tl.where((code & 8) != 0, -val, val)
        kb = rk[None, :] // 32
        n = rn[:, None]
        if SWIZZLED:
            so = ((n // 128) * ((NKB + 3) // 4) + kb // 4) * 512 + (n % 32) * 16 + ((n // 32) % 4) * 4 + kb % 4
        else:
            so = n * NKB + kb
        sc = tl.load(sb_ptr + e * SB_E + so, mask=wmask, other=127).to(tl.int32)
        bits = tl.where(sc == 0, 0x00400000, tl.where(sc == 255, 0x7FC00000, sc << 23))  # 2^(sc-127), NaN
        w = (val * bits.to(tl.float32, bitcast=True)).to(tl.bfloat16)
        acc = tl.dot(a, tl.trans(w), acc)
    o = out_ptr + rm[:, None].to(tl.int64) * N + rn[None, :]
    tl.store(o, acc.to(tl.bfloat16), mask=mmask[:, None] & nmask[None, :])


def expert_ranges(shape, args):
    """Per expert, its rows as one range [r0, r1) of A's rows (masked: of [E * max_m])."""
    E, M = shape["E"], shape["M"]
    if shape["rows"] == "masked":
        return [(e * M, e * M + n) for e, n in enumerate(args["masked_m"].tolist())]
    if shape["rows"] == "offsets":
        off = args["expert_offsets"].tolist()
        return [(off[e], off[e + 1]) for e in range(E)]
    ex = args["m_indices"].long()
    out = []
    for e in range(E):
        rows = torch.nonzero(ex == e).flatten()
        out.append((int(rows[0]), int(rows[-1]) + 1) if rows.numel() else (0, 0))
    return out


def tiles(shape, args, straddle=False):
    """int32 [T, 3]: (expert, first row, end) of each tile of at most BLOCK_M rows of one expert.
    straddle (the mutant's bug): unpadded (offsets) rows cut every BLOCK_M rows whatever the expert,
    each tile computed with its first row's expert."""
    ranges = expert_ranges(shape, args)
    if straddle and shape["rows"] == "offsets":
        end = ranges[-1][1]
        t = [(next(e for e, (r0, r1) in enumerate(ranges) if r0 <= s < r1), s, min(s + BLOCK_M, end))
             for s in range(0, end, BLOCK_M)]
    else:
        t = [(e, s, min(s + BLOCK_M, r1)) for e, (r0, r1) in enumerate(ranges) for s in range(r0, r1, BLOCK_M)]
    return torch.tensor(t, dtype=torch.int32, device=args["a"].device).reshape(-1, 3)


def supports(shape):
    if shape["format"] != "w4a16" or shape["b_format"] != "mxfp4":
        return False, "format: W4A16 with MXFP4 weights only (this kernel has no other dequantization)"
    if shape["out_dtype"] != "BF16":
        return False, "format: BF16 output only"
    return True


def moe_w4a16(shape, args, straddle=False):
    """args["out"] [rows, N] BF16 (masked [E, max_m, N]) = A @ deq(B[e])^T per expert (alpha = 1)."""
    E, N, K = shape["E"], shape["N"], shape["K"]
    tl_tiles = tiles(shape, args, straddle)
    if tl_tiles.shape[0] == 0 or N == 0:
        return
    nkb = (K + 31) // 32
    grid = (tl_tiles.shape[0], triton.cdiv(N, BLOCK_N))
    _w4a16_moe[grid](args["a"], args["b"], args["sb"], args["out"], tl_tiles, N, K, nkb,
                     args["sb"].numel() // E, SWIZZLED=shape["scale_layout"] == "swizzled_128x4",
                     BM=BLOCK_M, BN=BLOCK_N, BK=BLOCK_K)


kernel = {"name": "triton.moe_gemm.w4a16", "op": "moe_gemm", "device": "cuda",
          "bound": {"bits": 24, "truncation": True}, "supports": supports, "run": moe_w4a16}
# The bug engines' tile mapping has had: a tile straddling two experts (offsets rows, unpadded).
mutant_straddle = dict(kernel, name="triton.mutant.moe_gemm.w4a16.straddle",
                       bug="BLOCK_M tiles over unpadded rows whatever the expert, each with its first row's expert",
                       run=lambda shape, args: moe_w4a16(shape, args, straddle=True))
kernels = [kernel, mutant_straddle]
