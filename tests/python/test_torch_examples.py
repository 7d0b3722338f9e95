"""The PyTorch FP4 GEMM example (dequantize, then matmul) on the CPU, judged by its declared
accumulation bound (or, in a moects without bounded verdicts, its fallback tolerance); and torch
tensors as check() inputs. Skipped without torch (CI)."""
import numpy as np
import pytest

from conftest import needs

pytestmark = needs("torch")


@pytest.mark.moects("fp4_gemm.mxfp4/dbrx/tp8/gemm1/m16", "fp4_gemm.nvfp4/dbrx/tp8/gemm1/m16", tier="all")
def test_dequant_matmul_within_its_bound(moects_case):
    import torch_fp4_gemm as tf
    a = moects_case.args(device="torch")
    tf.fp4_gemm(moects_case.shape, a)
    assert moects_case.check(a["out"], kernel=tf.kernel).verdict in ("PASS_BOUNDED", "PASS_TOLERANCE")


def test_bfloat16_tensor_is_checked_bit_for_bit():
    import torch
    import moects
    c = moects.case("ep_gather/kimi-k3/tp8/t16")
    ref = c.reference("ep_gather.fma_v1")
    t = torch.from_numpy(ref.view(np.int16).copy()).view(torch.bfloat16)
    assert c.check(t, recipe="ep_gather.fma_v1").verdict == "PASS_EXACT"
    assert c.inputs(device="torch")["x"].dtype == torch.bfloat16
