"""numpy_moe_route.py: a CPU router (moe_route) in numpy that meets moe_route.v1 bit for bit, every
method the op defines (docs/moe_route.md, ref/moects_route.h):

    softmax       p = softmax(x) (max-subtracted, the sum in index order); select on p (+ bias);
                  w = p [/ sum of the k p] * scale                  (Mixtral, Qwen3, DBRX, Grok-1, ERNIE 4.5)
    topk_softmax  top-k on x; w = exp(x_j - x_0) / their sum         (gpt-oss)
    sigmoid       s = 1 / (1 + exp(-x)); select on s (+ bias), groups ranked by the sum of their top 2
                  (with a bias; else their max), the topk_group best kept; w = s [/ (sum + 1e-20)] * scale
                                                                     (DeepSeek-V3 noaux_tc, Kimi, GLM, Nemotron)
    llama4        top-1 on x; w = sigmoid(x)                         (Llama 4)

Every operation is an FP32 numpy operation (IEEE round to nearest even), in the reference's order;
sums over the experts or slots run one column at a time (np.sum would sum pairwise). Equal selection
scores go to the lower id (a stable argsort of the negated scores), slots in selection order: the
exact recipe "moe_route.v1" (= ties=low,slots=sorted).

The one operation numpy has no FP32 equivalent of is the reference's correctly rounded expf
(ref/crmath.c). "exp in float64, then round to float32" is not correctly rounded by construction: the
float64 result carries its own error (and a second rounding), so when e^x lies closer to a float32
rounding boundary than that error, the two roundings can disagree. (An exhaustive scan of every
float32 x in (-104, 89) with numpy 1.24's float64 exp found no such x: 52 lie within 2^-48 of a
boundary, all still rounded right. That is this libm's accuracy on these arguments, not a proof.)
exp_f32 below detects the arguments near a boundary and computes them by an exact method instead,
which makes it correctly rounded for any float64 exp within 2^-40 (proof in its docstring).

Two more kernels declare the recipe's other keys (docs/moe_route.md "The recipe a kernel declares"):
kernel_vllm divides as vLLM's topkGating does (csrc/libtorch_stable/moe/topk_softmax_kernels.cu):
p = e * (1 / S), and after the top-k w = v * (scale / sum), the scale folded in; it declares
moe_route.v1(norm=recip,renorm=recip), an exact recipe (PASS_EXACT). kernel_fast takes numpy's own
float32 exp (its AVX2/AVX512F loops, within 2.52 ulp of e^x per numpy 1.18's release notes, else the C
library's expf) in place of exp_f32, and declares moe_route.v1(fn=ulp4): exp within 4 floats of the
correctly rounded value, a bounded claim judged by the enclosure (PASS_BOUNDED).

Run them under moects:
    moects run --kernel-py examples/numpy_moe_route.py:kernels 'moe_route*'
"""
import decimal
import math
from fractions import Fraction

import numpy as np

# The assumed relative error of numpy's float64 exp: |np.exp(x) - e^x| <= _EXP64_ERR * e^x. Any libm
# or numpy SIMD exp is within a few float64 ulps (2^-52 relative each); 2^-40 leaves a factor 2^12.
_EXP64_ERR = 2.0 ** -40
_F32_MAX = np.float32(np.finfo(np.float32).max)


def round_f32(q):
    """The float32 nearest the exact rational q >= 0 (a Fraction), ties to even, as a Python float
    (inf past the overflow threshold, float32 subnormals included). Exact: integer arithmetic."""
    if q == 0:
        return 0.0
    n, d = q.numerator, q.denominator
    e = n.bit_length() - d.bit_length()  # 2^e <= q < 2^(e+2)
    if q < Fraction(2) ** e:
        e -= 1
    elif q >= Fraction(2) ** (e + 1):
        e += 1
    u = max(e - 23, -149)  # the float32 ulp at q: 24 significand bits, or the subnormals' 2^-149
    m = q / Fraction(2) ** u
    i = m.numerator // m.denominator
    r = m - i
    if r > Fraction(1, 2) or (r == Fraction(1, 2) and i % 2 == 1):
        i += 1
    v = Fraction(i) * Fraction(2) ** u
    return math.inf if v >= Fraction(2) ** 128 else float(v)  # a float32 value: exact in float64


def exp_exact(x):
    """expf(x) correctly rounded (RNE) for one float32 value x, by Ziv's method with Python's decimal.

    Decimal(x) is x exactly; Decimal.exp() is correctly rounded to the context's precision p digits
    (the decimal module's documented guarantee), so |d - e^x| <= half a unit in d's last digit <=
    10^(1-p) |d|: e^x lies in [d - err, d + err] with err = 10^(1-p) |d|. When both ends round to one
    float32, so does e^x (rounding is monotone); else p doubles. This ends: for a float32 x != 0, e^x
    is transcendental (Lindemann-Weierstrass), never a rounding boundary (a rational), so some p
    separates it from them. Outside (-104, 89) no arithmetic is needed: e^-104 < 2^-150, half the least
    subnormal, rounds to +0; e^89 > 2^128 overflows to inf."""
    if math.isnan(x):
        return x
    if x == 0:
        return 1.0
    if x <= -104:
        return 0.0
    if x >= 89:
        return math.inf
    p = 40
    while True:
        with decimal.localcontext() as ctx:
            ctx.prec = p
            d = Fraction(decimal.Decimal(x).exp())
        err = d * Fraction(1, 10 ** (p - 1))
        lo, hi = round_f32(d - err), round_f32(d + err)
        if lo == hi:
            return lo
        p *= 2


def exp_f32(x):
    """expf elementwise, correctly rounded (RNE), for a float32 array: the reference's moects_cr_expf.

    Proof. Let t = e^x (exact), y = np.exp(float64(x)) and r = float32(y) (one RNE of y). By assumption
    |y - t| <= 2^-40 t (_EXP64_ERR). r's float32 neighbours lo < r < hi give the rounding boundaries
    m_lo = (lo + r) / 2 and m_hi = (r + hi) / 2 (exact in float64: 25 significand bits), and every real
    in the open interval (m_lo, m_hi) rounds to r. y lies in [m_lo, m_hi] (r rounds y). If moreover
    |y - m| > 2^-39 y for both boundaries m, then t, which is within 2^-40 t < 2^-39 y of y, lies on
    y's side of both: inside (m_lo, m_hi), so float32(t) = r, the correctly rounded result. (The
    distances |y - m| are computed exactly when they are small: Sterbenz.) Every other element -- one
    within 2^-39 of a boundary, or where r is 0, the largest float32 or inf, whose boundary past
    float32's range the neighbours do not give -- is computed by exp_exact. For a float32 argument the
    near-boundary case is rare (about one element in 2^14) but real. Special values: exp(-inf) = +0,
    exp(+inf) = inf, exp(NaN) = NaN, as np.exp gives them."""
    x = np.asarray(x, dtype=np.float32)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        y = np.exp(x.astype(np.float64))
        r = y.astype(np.float32)
        r64 = r.astype(np.float64)
        m_lo = (np.nextafter(r, np.float32(-np.inf)).astype(np.float64) + r64) / 2
        m_hi = (np.nextafter(r, np.float32(np.inf)).astype(np.float64) + r64) / 2
        near = (np.abs(y - m_lo) <= 2 * _EXP64_ERR * y) | (np.abs(y - m_hi) <= 2 * _EXP64_ERR * y)
        hard = np.isfinite(x) & (near | (r == 0) | (r >= _F32_MAX))
    out = r.copy()
    for i in zip(*np.nonzero(hard)):
        out[i] = np.float32(exp_exact(float(x[i])))
    return out


def sigmoid_f32(x, exp=exp_f32):
    """1 / (1 + exp(-x)) in FP32, three roundings (exp, add, divide), as ref/moects_route.h."""
    with np.errstate(over="ignore"):
        t = exp(-np.asarray(x, dtype=np.float32))
        return np.float32(1.0) / (np.float32(1.0) + t)


def fast_exp(x):
    """numpy's float32 exp (not correctly rounded): a fast exp, declared fn=ulp4."""
    with np.errstate(over="ignore", under="ignore"):
        return np.exp(np.asarray(x, dtype=np.float32))


F32_1E_20 = np.float32(round_f32(Fraction(1, 10 ** 20)))  # the C literal 1e-20f (one rounding of 10^-20)


def logits_f32(shape, logits):
    """The logits [T, E] as float32 (BF16 bits widened: exact)."""
    x = np.asarray(logits)
    if shape["logits_dtype"] == "BF16":
        return (x.astype(np.uint32) << 16).view(np.float32)
    return x.astype(np.float32)


def seq_sum(a):
    """Sum over the last axis, one column at a time in index order (FP32): [..., n] -> [...]."""
    s = np.zeros(a.shape[:-1], dtype=np.float32)
    for j in range(a.shape[-1]):
        s = s + a[..., j]
    return s


def scores(shape, x, bias, exp=exp_f32, recip=False, total=seq_sum):
    """(score, sel) [T, E]: the method's score (softmax p; sigmoid and llama4 s = sigmoid(x); the
    logits for topk_softmax, unused) and the selection score (score + bias; the logits for
    topk_softmax and llama4). recip: softmax's p = e * (1 / S) (norm=recip), else e / S; total: the
    FP32 sum over the last axis."""
    method = shape["method"]
    if method == "softmax":
        m = x.max(axis=1, keepdims=True)
        e = exp(x - m)
        S = total(e)[:, None]
        score = e * (np.float32(1.0) / S) if recip else e / S
    elif method == "sigmoid":
        score = sigmoid_f32(x, exp)
    elif method == "llama4":  # select on the logits, weigh by their sigmoid
        return sigmoid_f32(x, exp), x
    else:  # topk_softmax: select on the logits, weigh by a softmax over the k (weights())
        return x, x
    sel = score + bias if bias is not None else score
    return score, sel


def select(shape, sel):
    """The k ids [k] of one row's selection scores sel [E], in selection order: the topk_group best
    groups (sum of the top 2 with a bias, else the max; equal: the lower group), then the k best of
    their experts, a higher score first, equal scores by the lower id."""
    E, k, G = shape["E"], shape["k"], shape["n_group"]
    cand = np.arange(E)
    if G > 1:
        top2 = -np.sort(-sel.reshape(G, E // G), axis=1)[:, :2]
        gs = top2[:, 0] + top2[:, 1] if shape["has_bias"] else top2[:, 0]
        keep = np.argsort(-gs, kind="stable")[:shape["topk_group"]]
        cand = (np.sort(keep)[:, None] * (E // G) + np.arange(E // G)).reshape(-1)
    return cand[np.argsort(-sel[cand], kind="stable")[:k]]


def weights(shape, x, score, ids, exp=exp_f32, recip=False, total=seq_sum):
    """The weights [T, k] of ids [T, k], sums over the slots in slot order (FP32). recip: a division
    after the top-k is w * (c / sum), c the scale (softmax, sigmoid) or 1 (renorm=recip, vLLM's
    `scale /= denom; output *= scale`), else w / sum, then * scale."""
    method = shape["method"]
    scale = np.float32(shape["scale"])  # the shape's scale is a float32 value (in a double)
    if method == "topk_softmax":
        xs = np.take_along_axis(x, ids, axis=1)
        w = exp(xs - xs[:, :1])
    else:
        w = np.take_along_axis(score, ids, axis=1)
    s = total(w)
    if method == "sigmoid" and shape["renormalize"]:
        s = s + F32_1E_20
    scaled = method in ("softmax", "sigmoid")
    if method == "topk_softmax" or (shape["renormalize"] and method != "llama4"):
        if recip:
            return w * ((scale if scaled else np.float32(1.0)) / s)[:, None]
        w = w / s[:, None]
    return w * scale if scaled else w


def route(shape, logits, bias, select=select, weights=weights, **arith):
    """(topk_ids [T, k] int32, topk_weights [T, k] float32) of the logits (and bias). arith: exp=,
    recip= and total= for scores() and weights() (the exact recipe without)."""
    x = logits_f32(shape, logits)
    b = None if bias is None else np.asarray(bias, dtype=np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        score, sel = scores(shape, x, b, **arith)
        ids = np.array([select(shape, sel[t]) for t in range(shape["T"])], dtype=np.int64).reshape(shape["T"],
                                                                                                 shape["k"])
        w = weights(shape, x, score, ids, **arith)
    return ids.astype(np.int32), w.astype(np.float32)


def runner(**arith):
    """A kernel's run(shape, args) routing with arith (route()'s exp=, recip=, total=)."""
    def run(shape, args):
        ids, w = route(shape, args["logits"], args["bias"], **arith)
        args["topk_ids"][...] = ids
        args["topk_weights"][...] = w
    return run


run = runner()
kernel = {"name": "numpy.moe_route", "op": "moe_route", "recipe": "moe_route.v1(ties=low,slots=sorted)",
          "batch_invariant": True, "run": run}
# vLLM's reciprocals (norm=recip, renorm=recip): exact, PASS_EXACT
kernel_vllm = {"name": "numpy.moe_route.vllm", "op": "moe_route", "recipe": "moe_route.v1(norm=recip,renorm=recip)",
               "batch_invariant": True, "run": runner(recip=True)}
# numpy's float32 exp, declared fn=ulp4: a bounded claim, PASS_BOUNDED
kernel_fast = {"name": "numpy.moe_route.fast", "op": "moe_route", "recipe": "moe_route.v1(fn=ulp4)",
               "batch_invariant": True, "run": runner(exp=fast_exp)}
kernels = [kernel, kernel_vllm, kernel_fast]
