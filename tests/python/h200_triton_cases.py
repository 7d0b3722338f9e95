"""The Triton ep_gather example (both BLOCK_D policies) through the pytest plugin on the case ids
listed in $MOECTS_CASES_FILE (tools/h200_python.sh writes it: the smoke ep_gather cases and the
full-tier kimi-k3, deepseek-v3 and gpt-oss ones). Not collected by default (no test_ prefix); needs
torch, triton and a CUDA device."""
import os

import pytest

import triton_ep_gather as te

with open(os.environ["MOECTS_CASES_FILE"]) as f:
    IDS = [line.split()[0] for line in f if line.strip() and not line.startswith("#")]


def run(case, kernel):
    a = case.args(device="cuda")
    kernel["run"](case.shape, a)
    case.check(a["out"])


@pytest.mark.moects(*IDS, tier="all", kernel=te.kernel_gcd)
def test_gcd(moects_case):
    run(moects_case, te.kernel_gcd)


@pytest.mark.moects(*IDS, tier="all", kernel=te.kernel_min)
def test_min(moects_case):
    run(moects_case, te.kernel_min)
