"""triton_fused_moe.py: the fused MoE layer (op fused_moe, BF16 weights) in Triton, written for moects
after the algorithm the engines publish (vLLM's fused_experts: moe_align_block_size, fused_moe_kernel
twice, the activation, moe_sum; triton_kernels' matmul_ogs with swiglu fused in GEMM1's epilogue),
with its conventions as parameters, to be judged against the layer recipe it declares.

    align     the valid slots (t, j) sorted by local expert (ascending slot within an expert), each
              expert's run padded to BLOCK_M with the sentinel T*k (vLLM's moe_align_block_size,
              here in torch: sorted_ids, one expert per block, num_tokens_post_padded)
    GEMM1     per block of BLOCK_M sorted slots and BLOCK_N intermediate columns i: x[t] . W13[e]
              over H with tl.dot (FP32 accumulator), the gate row and the up row of column i read as
              the convention's W13 order says; epilogue: + b13, BF16 rounding (g1=bf16) or not, the
              activation (silu, silu_clamp, relu2; gpt-oss's swigluoai), its gate part rounded to
              BF16 (act=bf16) or not, the intermediate rounded to BF16, stored at row t*k + j
    GEMM2     per block: mid[t*k + j] . W2[e] over I with tl.dot; epilogue: + b2, times the router
              weight (FP32, or rounded to BF16 first: wdtype=bf16), rounded to BF16 (slot=bf16),
              stored at row t*k + j (vLLM's MUL_ROUTED_WEIGHT)
    combine   out[t] = sum over the valid slots in slot order, FP32 from +0, then the output dtype
              (vLLM's moe_sum; invalid slots are skipped, not added as zeros)

Conventions (make_kernel's parameters; the two presets): `vllm` W13 [gate | up], GEMM1 output and
silu(g) rounded to BF16, sigmoid as g / (1 + exp(-g)), FP32 router weight (vLLM's TritonExperts);
`gpt_oss` W13 rows interleaved (2i gate, 2i + 1 up), swigluoai (g' = min(g, 7), u' = clamp(u, -7,
7), (u' + 1) * g' * (1 / (1 + exp(-1.702 g')))) in FP32 without BF16 roundings before the
intermediate, BF16 router weight (gpt-oss's layer as moects' cpu.fused_moe.gpt_oss states it).
Every such choice is a key of the layer recipe the kernel declares (docs/fused_moe.md).

The claim is bounded: tl.dot sums on the tensor cores in an order nobody specifies, so each kernel
declares its recipe with the accumulation class {"bits": 24, "truncation": True} and is judged by the
layer's enclosure (PASS_BOUNDED). exp is libdevice's expf (within 2 ulps, CUDA's guide), hence
fn=ulp2; divisions are tl.math.div_rn (Triton's `/` may be approximate), clamps are tl.where (a NaN
gate stays NaN, as the recipe says; tl.minimum would return the limit), BF16 rounding is done on the
bits (RNE, NaN kept quiet) and kernels are compiled with enable_fp_fusion=False: every other operation
is the recipe's own FP32 operation. The tiles do not depend on the batch, so each output row depends
only on its token: batch_invariant.

Triton's interpreter (TRITON_INTERPRET=1, CPU, torch CPU tensors) runs the same kernels: there the
kernel descriptions say device "cpu" (numpy inputs, shared with torch without a copy), exp is numpy's
float64 exp rounded to FP32 (within 1 ulp), and the dot operands are BF16 values widened exactly to
FP32 (the interpreter's BF16 tl.dot multiplies the bit patterns as integers and its BF16 casts
truncate; this example never casts to BF16). The sums are then numpy float32 matmuls: inside the
declared class too.

    moects run --kernel-py examples/triton_fused_moe.py:kernels 'fused_moe.bf16/*'
    TRITON_INTERPRET=1 moects run --kernel-py examples/triton_fused_moe.py:kernels \\
        'fused_moe.bf16/qwen3-30b-a3b/tp16/t4/smoke'          # on CPU, minutes

`kernels` holds both conventions and two mutants: gate and up swapped inside GEMM1 (each convention's
order read the other way round), which moects must catch.
"""
import os

import torch
import triton
import triton.language as tl

try:  # libdevice's expf on CUDA; the interpreter cannot call it
    from triton.language.extra import libdevice
except ImportError:  # pragma: no cover
    libdevice = None

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
DEVICE = "cpu" if INTERPRET else "cuda"
# Tiles: decode-sized M blocks as vLLM's configs for small batches; under the interpreter wider N and
# K tiles (each program is Python there: fewer, larger numpy operations)
BLOCK_M = 16
BLOCK_N, BLOCK_K = (128, 256) if INTERPRET else (64, 64)
BLOCK_N2 = 512 if INTERPRET else 64  # GEMM2's N (H) tile
BLOCK_H = 1024  # the combine's columns per program

W13_ORDERS = {"gate_up": 0, "up_gate": 1, "interleave1": 2, "interleave8": 3}
ACTS = {"silu": 0, "silu_clamp": 1, "gpt_oss": 2, "relu2": 3}


@triton.jit
def _bf16_bits(v):
    """FP32 -> its BF16 bit pattern (int32 0..0xFFFF), round to nearest even, a NaN kept (quiet)."""
    u = v.to(tl.uint32, bitcast=True)
    r = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    r = tl.where(v != v, (u >> 16) | 0x40, r)
    return r.to(tl.int32)


@triton.jit
def _from_bf16(b):
    """BF16 bit patterns (int16 or int32) -> FP32 values, exactly."""
    return ((b.to(tl.int32) & 0xFFFF) << 16).to(tl.float32, bitcast=True)


@triton.jit
def _bf16_round(v):
    return _from_bf16(_bf16_bits(v))


@triton.jit
def _exp(x, INTERP: tl.constexpr):
    if INTERP:
        return tl.exp(x.to(tl.float64)).to(tl.float32)
    return libdevice.exp(x)


@triton.jit
def _sig_mul(x, z, SIG_RCP: tl.constexpr, INTERP: tl.constexpr):
    """x * sigmoid(z): x / (1 + exp(-z)) (sig=div) or x * (1 / (1 + exp(-z))) (sig=rcp)."""
    d = 1.0 + _exp(-z, INTERP)
    if SIG_RCP:
        return x * tl.math.div_rn(tl.full(d.shape, 1.0, tl.float32), d)
    return tl.math.div_rn(x, d)


@triton.jit
def _gemm1_act(x_ptr, w13_ptr, b13_ptr, mid_ptr, sorted_ptr, bexp_ptr, npost_ptr, H, I, N1, NSLOTS, L, ALPHA,
               TOPK: tl.constexpr, W13: tl.constexpr, SWAP: tl.constexpr, ACT: tl.constexpr,
               HAS_BIAS: tl.constexpr, G1_BF16: tl.constexpr, ACT_BF16: tl.constexpr, SIG_RCP: tl.constexpr,
               MMA_BF16: tl.constexpr, INTERP: tl.constexpr,
               BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    if pid_m * BM >= tl.load(npost_ptr):
        return
    slot = tl.load(sorted_ptr + pid_m * BM + tl.arange(0, BM))
    rmask = slot < NSLOTS
    tok = (slot // TOPK).to(tl.int64)
    e = tl.load(bexp_ptr + pid_m).to(tl.int64)
    i = pid_n * BN + tl.arange(0, BN)
    imask = i < I
    if W13 == 0:
        gate, up = i, I + i
    elif W13 == 1:
        gate, up = I + i, i
    elif W13 == 2:
        gate, up = 2 * i, 2 * i + 1
    else:
        gate = 16 * (i // 8) + i % 8
        up = gate + 8
    if ACT == 3:  # relu2: W13 is the gate alone, N1 = I
        gate = i
    if SWAP:  # the mutant's bug: the two halves read the other way round
        gate, up = up, gate
    wbase = w13_ptr + e * N1 * H
    acc_g = tl.zeros((BM, BN), dtype=tl.float32)
    acc_u = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, H, BK):
        kk = k0 + tl.arange(0, BK)
        kmask = kk < H
        wmask = kmask[:, None] & imask[None, :]
        a = tl.load(x_ptr + tok[:, None] * H + kk[None, :], mask=rmask[:, None] & kmask[None, :], other=0)
        wg = tl.load(wbase + gate[None, :].to(tl.int64) * H + kk[:, None], mask=wmask, other=0)
        if ACT != 3:
            wu = tl.load(wbase + up[None, :].to(tl.int64) * H + kk[:, None], mask=wmask, other=0)
        # the dot operands: bfloat16 on the GPU; in the interpreter the BF16 values widened to FP32
        # exactly (its BF16 tl.dot multiplies bit patterns), written inline (each nested jit call
        # costs the interpreter a re-patch of triton.language)
        if MMA_BF16:
            a = a.to(tl.bfloat16, bitcast=True)
            wg = wg.to(tl.bfloat16, bitcast=True)
            if ACT != 3:
                wu = wu.to(tl.bfloat16, bitcast=True)
        else:
            a = ((a.to(tl.int32) & 0xFFFF) << 16).to(tl.float32, bitcast=True)
            wg = ((wg.to(tl.int32) & 0xFFFF) << 16).to(tl.float32, bitcast=True)
            if ACT != 3:
                wu = ((wu.to(tl.int32) & 0xFFFF) << 16).to(tl.float32, bitcast=True)
        acc_g = tl.dot(a, wg, acc_g)
        if ACT != 3:
            acc_u = tl.dot(a, wu, acc_u)
    g, u = acc_g, acc_u
    if HAS_BIAS:
        g = g + tl.load(b13_ptr + e * N1 + gate, mask=imask, other=0.0)[None, :]
        if ACT != 3:
            u = u + tl.load(b13_ptr + e * N1 + up, mask=imask, other=0.0)[None, :]
    if G1_BF16:
        g = _bf16_round(g)
        u = _bf16_round(u)
    if ACT == 3:  # relu2: m = max(g, 0) keeping NaN, m * m
        m = tl.where(g > 0.0, g, tl.where(g != g, g, 0.0))
        a_out = m * m
        if ACT_BF16:
            a_out = _bf16_round(a_out)
    else:
        if ACT == 1 or ACT == 2:  # g' = min(g, L), u' = clamp(u, -L, L); NaN stays NaN
            g = tl.where(g > L, L, g)
            u = tl.where(u > L, L, tl.where(u < -L, -L, u))
        if ACT == 2:  # swigluoai: (u' + 1) * g' sigmoid(alpha g')
            glu = _sig_mul(g, g * ALPHA, SIG_RCP, INTERP)
            if ACT_BF16:
                glu = _bf16_round(glu)
            a_out = (u + 1.0) * glu
        else:  # silu(g) * u
            ga = _sig_mul(g, g, SIG_RCP, INTERP)
            if ACT_BF16:
                ga = _bf16_round(ga)
            a_out = ga * u
    dst = mid_ptr + slot[:, None].to(tl.int64) * I + i[None, :]
    tl.store(dst, _bf16_bits(a_out).to(tl.int16), mask=rmask[:, None] & imask[None, :])


@triton.jit
def _gemm2_weight(mid_ptr, w2_ptr, b2_ptr, w_ptr, y_ptr, sorted_ptr, bexp_ptr, npost_ptr, H, I, NSLOTS,
                  HAS_BIAS: tl.constexpr, W_BF16: tl.constexpr, MMA_BF16: tl.constexpr,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    if pid_m * BM >= tl.load(npost_ptr):
        return
    slot = tl.load(sorted_ptr + pid_m * BM + tl.arange(0, BM))
    rmask = slot < NSLOTS
    row = slot.to(tl.int64)
    e = tl.load(bexp_ptr + pid_m).to(tl.int64)
    h = pid_n * BN + tl.arange(0, BN)
    hmask = h < H
    wbase = w2_ptr + e * H * I
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, I, BK):
        kk = k0 + tl.arange(0, BK)
        kmask = kk < I
        a = tl.load(mid_ptr + row[:, None] * I + kk[None, :], mask=rmask[:, None] & kmask[None, :], other=0)
        b = tl.load(wbase + h[None, :].to(tl.int64) * I + kk[:, None], mask=kmask[:, None] & hmask[None, :],
                    other=0)
        if MMA_BF16:
            a = a.to(tl.bfloat16, bitcast=True)
            b = b.to(tl.bfloat16, bitcast=True)
        else:
            a = ((a.to(tl.int32) & 0xFFFF) << 16).to(tl.float32, bitcast=True)
            b = ((b.to(tl.int32) & 0xFFFF) << 16).to(tl.float32, bitcast=True)
        acc = tl.dot(a, b, acc)
    if HAS_BIAS:
        acc = acc + tl.load(b2_ptr + e * H + h, mask=hmask, other=0.0)[None, :]
    w = tl.load(w_ptr + row, mask=rmask, other=0.0)
    if W_BF16:
        w = _bf16_round(w)
    y = acc * w[:, None]
    tl.store(y_ptr + row[:, None] * H + h[None, :], _bf16_bits(y).to(tl.int16),
             mask=rmask[:, None] & hmask[None, :])


@triton.jit
def _combine(y_ptr, slot_e_ptr, out_ptr, H, TOPK: tl.constexpr, OUT_BF16: tl.constexpr, BH: tl.constexpr):
    t = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1) * BH + tl.arange(0, BH)
    hmask = h < H
    acc = tl.zeros((BH,), dtype=tl.float32)
    for j in range(TOPK):
        valid = tl.load(slot_e_ptr + t * TOPK + j + tl.zeros((BH,), dtype=tl.int64)) >= 0  # as a row: a mask
        v = _from_bf16(tl.load(y_ptr + (t * TOPK + j) * H + h, mask=hmask & valid, other=0))
        acc = tl.where(valid, acc + v, acc)
    if OUT_BF16:
        tl.store(out_ptr + t * H + h, _bf16_bits(acc).to(tl.int16), mask=hmask)
    else:
        tl.store(out_ptr + t * H + h, acc, mask=hmask)


def _torch(a):
    """A kernel argument as a torch tensor without a copy: BF16 (numpy uint16 bits, or
    torch.bfloat16) as int16, anything else as it is."""
    if a is None or isinstance(a, torch.Tensor):
        return a.view(torch.int16) if a is not None and a.dtype == torch.bfloat16 else a
    if a.dtype.name == "uint16":
        a = a.view("int16")
    return torch.from_numpy(a)  # a read-only input stays read: the kernels only write "out"


def local_slots(shape, ids, emap):
    """int32 [T*k]: the local expert of each slot, -1 where the slot is not valid (an id outside
    [0, E) without a map; outside [0, E_global) or mapped to -1 with one)."""
    ids = ids.reshape(-1).long()
    if emap is None:
        return torch.where((ids >= 0) & (ids < shape["E"]), ids, -1).to(torch.int32)
    inside = (ids >= 0) & (ids < shape["E_global"])
    return torch.where(inside, emap.long()[ids.clamp(0, shape["E_global"] - 1)], -1).to(torch.int32)


def align(slot_e, E, block_m):
    """vLLM's moe_align_block_size on slot_e [T*k] (local experts, -1 invalid): sorted_ids (valid
    slots by expert, ascending within one, each expert's run padded to block_m with T*k),
    block_expert (the expert of each block of block_m) and num_tokens_post_padded ([1] int32)."""
    n, dev = slot_e.numel(), slot_e.device
    valid = slot_e >= 0
    counts = torch.bincount(slot_e[valid].long(), minlength=E)
    padded = (counts + block_m - 1) // block_m * block_m
    start = torch.cumsum(padded, 0) - padded
    total = int(padded.sum())
    key = torch.where(valid, slot_e.long(), E)
    order = torch.sort(key, stable=True).indices[:int(valid.sum())]
    e_of = slot_e.long()[order]
    rank = torch.arange(order.numel(), device=dev) - (torch.cumsum(counts, 0) - counts)[e_of]
    sorted_ids = torch.full((max(total, block_m),), n, dtype=torch.int32, device=dev)
    sorted_ids[start[e_of] + rank] = order.to(torch.int32)
    block_expert = torch.repeat_interleave(torch.arange(E, device=dev, dtype=torch.int32), padded // block_m)
    if block_expert.numel() == 0:
        block_expert = torch.zeros(1, dtype=torch.int32, device=dev)
    return sorted_ids, block_expert, torch.tensor([total], dtype=torch.int32, device=dev)


def fused_moe(shape, args, conv, swap=False):
    """args["out"] [T, H] (BF16 or FP32) = the layer under convention conv (make_kernel's dict)."""
    T, k, H, I, E = shape["T"], shape["k"], shape["H"], shape["I"], shape["E"]
    out = _torch(args["out"])
    if T == 0 or H == 0:
        return
    x, w13, w2 = _torch(args["x"]), _torch(args["w13"]), _torch(args["w2"])
    ids, w = _torch(args["topk_ids"]), _torch(args["topk_weights"])
    emap = _torch(args["expert_map"]) if shape["has_expert_map"] else None
    b13, b2 = _torch(args["b13"]), _torch(args["b2"])
    dev = x.device
    act = ACTS[shape["activation"]]
    N1 = I if act == ACTS["relu2"] else 2 * I
    slot_e = local_slots(shape, ids, emap)
    sorted_ids, block_expert, npost = align(slot_e, E, BLOCK_M)
    ys = torch.empty((T * k, H), dtype=torch.int16, device=dev)
    has_bias = bool(shape["has_bias"])
    dummy = torch.zeros(1, dtype=torch.float32, device=dev)
    opts = {} if INTERPRET else {"enable_fp_fusion": False}
    if int(npost) > 0:
        mid = torch.empty((T * k, I), dtype=torch.int16, device=dev)
        mblocks = sorted_ids.numel() // BLOCK_M
        _gemm1_act[(mblocks, triton.cdiv(I, BLOCK_N))](
            x, w13, b13 if has_bias else dummy, mid, sorted_ids, block_expert, npost, H, I, N1, T * k,
            float(shape["act_limit"]), float(shape["act_alpha"]), TOPK=k, W13=W13_ORDERS[conv["w13"]],
            SWAP=swap, ACT=act, HAS_BIAS=has_bias, G1_BF16=conv["g1"] == "bf16", ACT_BF16=conv["act"] == "bf16",
            SIG_RCP=conv["sig"] == "rcp", MMA_BF16=not INTERPRET, INTERP=INTERPRET,
            BM=BLOCK_M, BN=BLOCK_N, BK=BLOCK_K, **opts)
        _gemm2_weight[(mblocks, triton.cdiv(H, BLOCK_N2))](
            mid, w2, b2 if has_bias else dummy, w.reshape(-1), ys, sorted_ids, block_expert, npost, H, I, T * k,
            HAS_BIAS=has_bias, W_BF16=conv["wdtype"] == "bf16", MMA_BF16=not INTERPRET,
            BM=BLOCK_M, BN=BLOCK_N2, BK=BLOCK_K, **opts)
    _combine[(T, triton.cdiv(H, BLOCK_H))](ys, slot_e, out, H, TOPK=k, OUT_BF16=out.dtype == torch.int16,
                                           BH=BLOCK_H, **opts)


def recipe(conv):
    """The layer recipe string of convention conv."""
    return ("fused_moe.layer_v1(w13=%s,g1=%s,act=%s,sig=%s,mid=bf16,weight=gemm2,wdtype=%s,slot=bf16,"
            "combine=f32_slots,fn=ulp2)" % (conv["w13"], conv["g1"], conv["act"], conv["sig"], conv["wdtype"]))


def make_kernel(name, w13="gate_up", g1="bf16", act="bf16", sig="div", wdtype="f32",
                activations=("silu", "silu_clamp", "relu2"), swap=False, bug=None):
    """A kernel description for one convention: W13's order (gate_up, up_gate, interleave1,
    interleave8), GEMM1's output rounded to BF16 or not (g1), the gate's activation rounded to BF16 or
    not (act), the sigmoid's form (sig div or rcp), the router weight FP32 or BF16 (wdtype), and the
    model activations it takes (others are refused). swap: the mutant's bug (gate and up swapped)."""
    conv = {"w13": w13, "g1": g1, "act": act, "sig": sig, "wdtype": wdtype, "activations": tuple(activations)}
    assert w13 in W13_ORDERS and g1 in ("bf16", "f32") and act in ("bf16", "f32") and sig in ("div", "rcp")
    assert wdtype in ("f32", "bf16") and all(a in ACTS for a in activations)

    def supports(shape):
        if shape["format"] != "bf16":
            return False, "format: BF16 weights only (this example has no MXFP4 or FP8 dequantization)"
        if shape["activation"] not in conv["activations"]:
            return False, "activation: %s is not one of this convention's (%s)" % (
                shape["activation"], ", ".join(conv["activations"]))
        if shape["I"] == 0:
            return False, "shape: I = 0 (no intermediate) is not written in this example"
        if swap and shape["activation"] == "relu2":
            return False, "scope: relu2 has no up half to swap with the gate"
        return True

    def run(shape, args):
        fused_moe(shape, args, conv, swap=swap)

    d = {"name": name, "op": "fused_moe", "device": DEVICE, "recipe": recipe(conv),
         "bound": {"bits": 24, "truncation": True}, "batch_invariant": True, "supports": supports, "run": run}
    if bug:
        d["bug"] = bug
    return d


# vLLM's TritonExperts (BF16): [gate | up], silu / silu_clamp / relu2, BF16 roundings, FP32 weight
VLLM = dict(w13="gate_up", g1="bf16", act="bf16", sig="div", wdtype="f32", activations=("silu", "silu_clamp", "relu2"))
# gpt-oss: rows interleaved, swigluoai in FP32 with sigmoid as a reciprocal, BF16 router weight
GPT_OSS = dict(w13="interleave1", g1="f32", act="f32", sig="rcp", wdtype="bf16", activations=("gpt_oss",))

kernel_vllm = make_kernel("triton.fused_moe.vllm", **VLLM)
kernel_gpt_oss = make_kernel("triton.fused_moe.gpt_oss", **GPT_OSS)
mutant_vllm_swapped = make_kernel("triton.mutant.fused_moe.vllm.gate_up_swapped", swap=True,
                                  bug="GEMM1 reads W13's [gate | up] halves as [up | gate]", **VLLM)
mutant_gpt_oss_swapped = make_kernel("triton.mutant.fused_moe.gpt_oss.gate_up_swapped", swap=True,
                                     bug="GEMM1 reads interleaved W13 rows 2i as up and 2i + 1 as gate", **GPT_OSS)
kernels = [kernel_vllm, kernel_gpt_oss, mutant_vllm_swapped, mutant_gpt_oss_swapped]
