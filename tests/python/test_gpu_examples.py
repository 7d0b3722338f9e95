"""The Triton ep_gather example on a GPU (skipped without torch, triton or a CUDA device: CI): the gcd
policy passes bit-exactly under ep_gather.fma_v1; the min policy (the historical bug) fails Kimi K3's
width 3584 and passes DeepSeek-V3's 7168 (a multiple of 1024). tools/h200_python.sh runs the
whole smoke and full sets."""
import pytest

from conftest import needs

pytestmark = [needs("torch"), needs("triton")]


@pytest.fixture(autouse=True)
def _cuda():
    import torch
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")


def run_triton(case, policy):
    import triton_ep_gather as te
    a = case.args(device="cuda")
    te.ep_gather(a["x"], a["topk_ids"], a["topk_weights"], a["input_index"], a["expert_map"], a["out"], policy=policy)
    return a["out"]


@pytest.mark.moects("ep_gather/kimi-k3/tp8/*", "ep_gather/deepseek-v3/tp8/*", tier="smoke")
def test_gcd_policy_is_bit_exact(moects_case):
    moects_case.check(run_triton(moects_case, "gcd"), recipe="ep_gather.fma_v1", name="triton.ep_gather")


@pytest.mark.moects("ep_gather/kimi-k3/tp8/*", tier="smoke")
def test_min_policy_fails_3584(moects_case):
    with pytest.raises(AssertionError, match="not a multiple of BLOCK_D 1024"):
        run_triton(moects_case, "min")


@pytest.mark.moects("ep_gather/deepseek-v3/tp8/*", tier="smoke")
def test_min_policy_passes_7168(moects_case):
    moects_case.check(run_triton(moects_case, "min"), recipe="ep_gather.fma_v1", name="triton.mutant.ep_gather.block_min1024")
