"""The grouped MoE GEMM examples on a GPU (skipped without torch, triton or a CUDA device: CI): the
PyTorch dequantize-then-matmul kernel (every format and row layout) and the fused Triton W4A16 kernel
(MXFP4 weights) within their declared bounds (24 bits, truncating) on the smoke moe_gemm cases;
tools/h200_python.sh (step moe) runs them under `moects run --kernel-py` too."""
import pytest

from conftest import needs

pytestmark = [needs("torch"), needs("triton")]


@pytest.fixture(autouse=True)
def _cuda():
    import torch
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")


@pytest.mark.moects("moe_gemm*", tier="smoke")
def test_torch_dequant_matmul_within_its_bound(moects_case):
    import torch_moe_gemm as tm
    if tm.supports(moects_case.shape) is not True:
        pytest.skip("refused: W4A8 with FP32 activation scales")
    a = moects_case.args(device="cuda")
    tm.moe_gemm(moects_case.shape, a)
    assert moects_case.check(a["out"], kernel=tm.kernel).verdict == "PASS_BOUNDED"


@pytest.mark.moects("moe_gemm.w4a16*", tier="smoke")
def test_triton_w4a16_within_its_bound(moects_case):
    import triton_moe_w4a16 as tw
    if tw.supports(moects_case.shape) is not True:
        pytest.skip("refused: %s" % (tw.supports(moects_case.shape)[1],))
    a = moects_case.args(device="cuda")
    tw.moe_w4a16(moects_case.shape, a)
    assert moects_case.check(a["out"], kernel=tw.kernel).verdict == "PASS_BOUNDED"


@pytest.mark.moects("moe_gemm.w4a16/deepseek-v3/tp8/offsets/gemm2/t128", tier="full")
def test_triton_straddling_tile_is_caught(moects_case):
    # DeepSeek-V3 TP8: all 256 experts local; 128 tokens x topk 8 rows spread over them, unpadded, so
    # every 64-row tile spans several experts
    import triton_moe_w4a16 as tw
    a = moects_case.args(device="cuda")
    tw.moe_w4a16(moects_case.shape, a, straddle=True)
    assert moects_case.judge(a["out"], kernel=tw.mutant_straddle).verdict == "FAIL_MISMATCH"
