"""triton_ep_gather.py: a Triton ep_gather (the MoE combine), written for moects after the algorithm
the serving engines publish (vLLM's and SGLang's `ep_gather` in their DeepGEMM MoE paths), with its
block-size policy as a parameter, to show what moects catches.

Algorithm: a 2-D grid, one program per (column block of BLOCK_D columns, token stride). A program
walks its tokens; for each token it sums, over the k slots in ascending order, x[input_index[t, j],
block] * topk_weights[t, j] in FP32 for the valid slots (id >= 0; with an expert map, id inside the
map and mapped to a local expert), and stores the sum rounded to the output type. The multiply-add
is an explicit tl.fma, so the kernel meets ep_gather.fma_v1 bit for bit.

BLOCK_D policy (the historical bug, DESIGN.md): the engines chose BLOCK_D = min(H, 1024) and asserted
H % BLOCK_D == 0, which crashed at start-up on Kimi K3 at TP=8 (latent width 3584). The fix is
BLOCK_D = gcd(H, 1024), the largest power-of-two divisor of H capped at 1024: every H then tiles
exactly. `policy="min"` reproduces the bug: an assertion when H > 1024 is not a multiple of 1024, and
a Triton compile error ("arange's range must be a power of 2") when H < 1024 is not a power of two.

Unlike the engines' kernel, this one checks an id against the map's length before reading the map
(a stale id must not read outside it), and addresses rows in 64 bits (M_sum * H may pass 2^31).

    moects run --kernel-py examples/triton_ep_gather.py:kernel_gcd 'ep_gather/*'
    moects run --kernel-py examples/triton_ep_gather.py:kernel_min 'ep_gather/*'   # fails 3584, 2880
"""
import math

import torch
import triton
import triton.language as tl


@triton.jit
def _ep_gather_kernel(x_ptr, ids_ptr, w_ptr, index_ptr, map_ptr, out_ptr, T, H, E_global,
                      TOPK: tl.constexpr, HAS_MAP: tl.constexpr, OUT_BF16: tl.constexpr, BLOCK_D: tl.constexpr):
    block = tl.program_id(0).to(tl.int64)
    cols = block * BLOCK_D + tl.arange(0, BLOCK_D)
    for t in range(tl.program_id(1), T, tl.num_programs(1)):
        t64 = tl.cast(t, tl.int64)  # 64-bit offsets: M_sum * H may pass 2^31
        acc = tl.zeros([BLOCK_D], dtype=tl.float32)
        for j in range(TOPK):
            slot = t64 * TOPK + j
            eid = tl.load(ids_ptr + slot).to(tl.int64)
            valid = eid >= 0
            if HAS_MAP:
                inside = valid & (eid < E_global)
                local = tl.load(map_ptr + tl.where(inside, eid, 0), mask=inside, other=-1)
                valid = inside & (local >= 0)
            if valid:
                row = tl.load(index_ptr + slot).to(tl.int64)
                w = tl.load(w_ptr + slot)
                v = tl.load(x_ptr + row * H + cols).to(tl.float32)
                acc = tl.fma(v, tl.broadcast_to(w, [BLOCK_D]), acc)
        if OUT_BF16:  # round to nearest even, said explicitly (the recipe's bf16_rne)
            tl.store(out_ptr + t64 * H + cols, acc.to(tl.bfloat16, fp_downcast_rounding="rtne"))
        else:
            tl.store(out_ptr + t64 * H + cols, acc)


def block_d(H, policy):
    """BLOCK_D for width H: "gcd" gcd(H, 1024) (the fix), "min" min(H, 1024) (the bug)."""
    if policy == "gcd":
        return math.gcd(H, 1024)
    if policy == "min":
        return min(H, 1024)
    raise ValueError("policy: %r, expected 'gcd' or 'min'" % (policy,))


def ep_gather(x, topk_ids, topk_weights, input_index, expert_map, out, policy="gcd"):
    """out[T, H] = sum over valid slots of x[input_index] * topk_weights, FP32 fma chain, rounded to
    out's dtype. x [M_sum, H] bf16, topk_ids [T, k] int32/int64, topk_weights [T, k] fp32,
    input_index [T, k] int32, expert_map [E_global] int32 or None, out [T, H] bf16 or fp32 (CUDA)."""
    T, k = topk_ids.shape
    H = out.shape[1]
    BLOCK_D = block_d(H, policy)
    assert H % BLOCK_D == 0, "hidden size %d is not a multiple of BLOCK_D %d" % (H, BLOCK_D)
    has_map = expert_map is not None
    # Empty tensors (T = 0, or no rows) have no address Triton accepts: a 1-element stand-in, never read.
    # The grid keeps one token program even for T = 0 (its loop runs no token), so the kernel is
    # compiled for every shape, as the engines' launch compiles it.
    ptrs = [t if t.numel() else torch.zeros(1, dtype=t.dtype, device=out.device)
            for t in (x, topk_ids, topk_weights, input_index, expert_map if has_map else topk_ids, out)]
    grid = (H // BLOCK_D, max(1, min(T, 1024)))
    _ep_gather_kernel[grid](*ptrs, T, H, expert_map.numel() if has_map else 0, TOPK=k, HAS_MAP=has_map,
                            OUT_BF16=out.dtype == torch.bfloat16,
                            BLOCK_D=BLOCK_D, num_warps=2 if BLOCK_D <= 256 else 4)
    return out


def _run(policy):
    def run(shape, args):
        ep_gather(args["x"], args["topk_ids"], args["topk_weights"], args["input_index"], args["expert_map"],
                  args["out"], policy=policy)
    return run


kernel_gcd = {"name": "triton.ep_gather", "op": "ep_gather", "device": "cuda", "recipe": "ep_gather.fma_v1",
              "run": _run("gcd")}
kernel_min = {"name": "triton.mutant.ep_gather.block_min1024", "op": "ep_gather", "device": "cuda",
              "recipe": "ep_gather.fma_v1", "run": _run("min"),
              "bug": "BLOCK_D = min(H, 1024): asserts when H > 1024 is not a multiple of 1024, fails to compile "
                     "when H < 1024 is not a power of two (the Kimi K3 TP=8 start-up crash)"}
kernels = [kernel_gcd, kernel_min]
