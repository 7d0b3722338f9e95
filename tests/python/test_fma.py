"""The numpy ep_gather's arithmetic (examples/numpy_ep_gather.py): fma_f32 is fmaf, bf16 rounding is
RNE. Expected values are worked out by hand, or come from the C library's fmaf (a second method)."""
import ctypes
import ctypes.util

import numpy as np

import numpy_ep_gather as ne


def test_fma_is_exact_where_double_rounding_is_not():
    # a*b = 3 + 2^-22 + 2^-23 is a float32 tie; c = -2^-80 puts the exact sum just below it:
    # fmaf gives 3 + 2^-22, float32(float64 sum) rounds the tie to the even 3 + 2^-21.
    a, b, c = np.float32(3), np.float32(1 + 2.0 ** -23), np.float32(-2.0 ** -80)
    assert ne.fma_f32(a, b, c) == np.float32(3 + 2.0 ** -22)
    assert np.float32(np.float64(a) * np.float64(b) + np.float64(c)) == np.float32(3 + 2.0 ** -21)


def test_fma_matches_libm_fmaf():
    libm = ctypes.CDLL(ctypes.util.find_library("m"))
    libm.fmaf.restype = ctypes.c_float
    libm.fmaf.argtypes = [ctypes.c_float] * 3
    rng = np.random.default_rng(7)
    n = 20000
    bits = rng.integers(0, 2 ** 32, size=(3, n), dtype=np.uint64).astype(np.uint32)
    a, b, c = (x.view(np.float32) for x in bits)  # every class: NaN, Inf, subnormals, zeros
    a2 = rng.standard_normal(n).astype(np.float32)
    b2 = rng.standard_normal(n).astype(np.float32)
    c2 = -(a2.astype(np.float64) * b2).astype(np.float32)  # cancellation
    e = rng.integers(-150, -100, size=n)  # results near and in float32's subnormal range
    a3 = np.ldexp(rng.standard_normal(n), e // 2).astype(np.float32)
    b3 = np.ldexp(rng.standard_normal(n), e - e // 2).astype(np.float32)
    c3 = np.ldexp(rng.standard_normal(n), -140).astype(np.float32)
    for x, y, z in ((a, b, c), (a2, b2, c2), (a3, b3, c3)):
        got = ne.fma_f32(x, y, z)
        want = np.array([libm.fmaf(float(p), float(q), float(r)) for p, q, r in zip(x, y, z)], dtype=np.float32)
        both_nan = np.isnan(got) & np.isnan(want)
        assert np.array_equal(got.view(np.uint32)[~both_nan], want.view(np.uint32)[~both_nan])


def test_bf16_round_to_nearest_even():
    f = np.array([1.0, 1 + 2.0 ** -8, 1 + 3 * 2.0 ** -8, 1 + 2.0 ** -8 + 2.0 ** -20, -0.0, np.inf, np.nan],
                 dtype=np.float32)
    # 1 + 2^-8 is the tie between 1 (0x3F80, even) and 1 + 2^-7 (0x3F81): even wins;
    # 1 + 3*2^-8 ties between 0x3F81 and 0x3F82: even 0x3F82; above a tie rounds up.
    assert ne.f32_to_bf16(f)[:6].tolist() == [0x3F80, 0x3F80, 0x3F82, 0x3F81, 0x8000, 0x7F80]
    assert ne.f32_to_bf16(f)[6] & 0x7FFF > 0x7F80  # NaN stays NaN
    assert ne.bf16_to_f32(np.array([0x3F80, 0xC040], dtype=np.uint16)).tolist() == [1.0, -3.0]
