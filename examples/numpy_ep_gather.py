"""numpy_ep_gather.py: a CPU ep_gather in numpy that meets ep_gather.fma_v1 bit for bit.

The recipe (DESIGN.md "ep_gather"): for each token t and column d, over its valid slots j in
ascending order, acc = fmaf((float)x[input_index[t][j]][d], w[t][j], acc), then out = bf16_rne(acc)
(or acc itself for an FP32 output); a token with no valid slot gets +0.0.

numpy has no fused multiply-add, and "compute in float64, then round to float32" is NOT fmaf: the
float64 sum is rounded twice. Counterexample (worked by hand): a = 3, b = 1 + 2^-23, c = -2^-80.
a*b = 3 + 2^-22 + 2^-23 lies exactly half-way between the floats 3 + 2^-22 and 3 + 2^-21; c puts
the exact sum just below the half-way point, so fmaf gives 3 + 2^-22. In float64, a*b + c rounds to
a*b (c is below half an ulp), and float32(a*b) is a tie that rounds to the even 3 + 2^-21. Wrong.

fma_f32 below is exact instead (proof in its docstring): the float64 product is exact, TwoSum gives
the sum's rounding error exactly, which turns the float64 sum into its round-to-odd value, and one
round-to-nearest-even from a round-to-odd value with at least two more bits equals the correctly
rounded result (Boldo and Melquiond, "Emulation of FMA and correctly rounded sums: proved algorithms
using rounding to odd", IEEE Trans. Computers 57(4), 2008, Theorem 1).

Run it under moects:
    moects run --kernel-py examples/numpy_ep_gather.py:kernel 'ep_gather/*'
"""
import numpy as np

_TO_POS = np.float64(np.inf)
_TO_NEG = np.float64(-np.inf)


def fma_f32(a, b, c):
    """fmaf(a, b, c) elementwise for float32 arrays (broadcasting), correctly rounded (RNE).

    Proof of exactness, for finite a, b, c:
    1. p = float64(a) * float64(b) is exact: two 24-bit significands give at most 48 bits, and
       |p| lies in [2^-298, 2^256] or is 0, inside float64's normal range.
    2. s = fl64(p + c) and err = TwoSum(p, c) satisfy s + err = p + c exactly (Knuth's TwoSum is
       exact when nothing overflows; |s| < 2^257 here). p + c is a multiple of 2^-298, so a
       non-zero sum is a normal float64.
    3. err != 0 means p + c is not a float64; s is then one of its two float64 neighbours. The
       round-to-odd value is the neighbour whose last significand bit is 1: s itself if odd, else
       nextafter(s) toward err.
    4. RNE to 24 bits (float32, including its subnormals, where fewer bits are kept) of the
       53-bit round-to-odd value equals RNE of the exact p + c, as 53 >= 24 + 2 (Boldo-Melquiond).
       float32 overflow agrees too: the half-way point 2^128 - 2^103 is a float64 with an even
       last bit, so round-to-odd keeps each side of it.
    Non-finite p or c (Inf, NaN inputs): s already is the IEEE result (NaN for Inf*0 or Inf-Inf),
    and is converted as is. Signed zeros follow IEEE addition in both formats alike.
    """
    with np.errstate(invalid="ignore", over="ignore"):
        a64 = np.asarray(a, dtype=np.float32).astype(np.float64)
        b64 = np.asarray(b, dtype=np.float32).astype(np.float64)
        c64 = np.asarray(c, dtype=np.float32).astype(np.float64)
        p = a64 * b64
        s = p + c64
        bv = s - p
        err = (p - (s - bv)) + (c64 - bv)
        even = (s.view(np.int64) & 1) == 0
        fix = np.isfinite(s) & (err != 0) & even
        s = np.where(fix, np.nextafter(s, np.where(err > 0, _TO_POS, _TO_NEG)), s)
        return np.asarray(s).astype(np.float32)


def bf16_to_f32(bits):
    """bf16 bit patterns (uint16) to float32: the upper half of the float32 word."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16(x):
    """float32 to bf16 bit patterns, round to nearest even; NaN stays NaN (quiet bit set)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounded = ((u + np.uint32(0x7FFF) + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = (u & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    return np.where(nan, ((u >> 16) | 0x40).astype(np.uint16), rounded)


def valid_slots(shape, ids, expert_map):
    """[T, k] bool: slot (t, j) is valid (DESIGN.md: id >= 0; with a map, id < E_global and
    expert_map[id] >= 0)."""
    ids = ids.astype(np.int64)
    valid = ids >= 0
    if shape.get("has_expert_map"):
        valid &= ids < shape["E_global"]
        mapped = np.asarray(expert_map)[np.where(valid, ids, 0)] if ids.size else ids
        valid &= mapped >= 0
    return valid


def ep_gather(shape, args):
    """out[T, H] = bf16_rne(fma chain over valid slots) per ep_gather.fma_v1, into args["out"].

    shape: the case's shape dict (T, k, M_sum, H, E_global, has_expert_map, out_dtype);
    args: numpy arrays x [M_sum, H] uint16 (bf16 bits), topk_ids [T, k] int32/int64,
    topk_weights [T, k] float32, input_index [T, k] int32, expert_map [E_global] int32 or None,
    out [T, H] uint16 (bf16 bits) or float32, written in place.
    """
    T, k, H = int(shape["T"]), int(shape["k"]), int(shape["H"])
    x = np.asarray(args["x"]).reshape(-1, H) if H else None
    ids = np.asarray(args["topk_ids"]).reshape(T, k)
    w = np.asarray(args["topk_weights"]).reshape(T, k)
    rows = np.asarray(args["input_index"]).reshape(T, k)
    valid = valid_slots(shape, ids, args.get("expert_map"))
    out = np.asarray(args["out"]).reshape(T, H)
    step = max(1, (1 << 21) // max(H, 1))  # tokens per chunk: bounded temporaries on huge cases
    for t0 in range(0, T, step):
        t1 = min(T, t0 + step)
        acc = np.zeros((t1 - t0, H), dtype=np.float32)
        for j in range(k):
            v = np.nonzero(valid[t0:t1, j])[0]
            if v.size and H:
                acc[v] = fma_f32(bf16_to_f32(x[rows[t0 + v, j]]), w[t0 + v, j][:, None], acc[v])
        out[t0:t1] = acc if out.dtype == np.float32 else f32_to_bf16(acc)


kernel = {
    "name": "py.numpy.ep_gather",
    "op": "ep_gather",
    "device": "cpu",
    "recipe": "ep_gather.fma_v1",
    "run": ep_gather,
}
