"""The Triton fused MoE layer (examples/triton_fused_moe.py, both conventions and their gate/up-swapped
mutants) through the pytest plugin and through `moects run --kernel-py`, with the same verdicts.

Where it runs: on CUDA (torch, triton and a GPU), or on CPU under Triton's interpreter when
MOECTS_TRITON_INTERPRET=1 (this file sets TRITON_INTERPRET=1 before the example's kernels are
defined; about 2 minutes per route on 2 cores); skipped otherwise (CI), with the reason. The cases:
the ids listed in $MOECTS_CASES_FILE (tools/h200_triton_layer.sh: every BF16 smoke case), else the
four below.

The expected verdicts follow from the kernels' declarations, not from a run: a kernel refuses a
case whose activation is not its convention's (UNSUPPORTED); an honest kernel lies inside its
recipe's enclosure (PASS_BOUNDED); a mutant reading gate and up the other way round is outside it
(FAIL_MISMATCH) unless no slot of the case is on this rank (no-local: every output is +0, which the
bug cannot reach)."""
import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT, needs

INTERP = os.environ.get("MOECTS_TRITON_INTERPRET") == "1"
if INTERP:
    os.environ["TRITON_INTERPRET"] = "1"  # before triton_fused_moe's @triton.jit run

try:
    import triton_fused_moe as tf
except ImportError:  # no torch or triton: every test below is skipped by its marker
    tf = None

pytestmark = [needs("torch"), needs("triton")]

SMOKE = ["fused_moe.bf16/qwen3-30b-a3b/tp16/t4/smoke",             # silu, [gate | up]
         "fused_moe.bf16/qwen3-30b-a3b/ep8/t2/smoke-adversarial",  # expert_map; GEMM1 outputs past limits
         "fused_moe.bf16/qwen3-30b-a3b/ep8/t4/smoke-no-local",     # no slot on this rank
         "fused_moe.bf16/gpt-oss-20b/tp16/t4/smoke-adversarial"]   # swigluoai, biases, both clamps
if os.environ.get("MOECTS_CASES_FILE"):
    with open(os.environ["MOECTS_CASES_FILE"]) as f:
        IDS = [line.split()[0] for line in f if line.strip() and not line.startswith("#")]
else:
    IDS = SMOKE
ROUTE_PYTEST = {}  # (kernel, case) -> verdict of the in-process route, compared by the kernel_py test


# The activations each kernel takes (the example's presets: vLLM's silu, silu_clamp and relu2;
# gpt-oss's swigluoai); the vLLM mutant refuses relu2, which has no up half to swap ("scope").
TAKES = {"triton.fused_moe.vllm": ("silu", "silu_clamp", "relu2"), "triton.fused_moe.gpt_oss": ("gpt_oss",),
         "triton.mutant.fused_moe.vllm.gate_up_swapped": ("silu", "silu_clamp"),
         "triton.mutant.fused_moe.gpt_oss.gate_up_swapped": ("gpt_oss",)}

KERNELS = {k["name"]: k for k in tf.kernels} if tf else {}
assert not tf or set(KERNELS) == set(TAKES), sorted(KERNELS)


def expected(name, case):
    s = case.shape
    if s["format"] != "bf16" or s["activation"] not in TAKES[name]:
        return "UNSUPPORTED"
    if ".mutant." not in name or s["T"] == 0 or "no-local" in case.id:  # no slot computed: the bug is out of reach
        return "PASS_BOUNDED"
    return "FAIL_MISMATCH"


@pytest.fixture(autouse=True)
def _device():
    if INTERP:
        return
    import torch
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device (MOECTS_TRITON_INTERPRET=1 runs it on CPU under Triton's interpreter)")


def _route(case, kname):
    k = KERNELS[kname]
    why = k["supports"](case.shape)
    if why is not True:
        case.outcome("UNSUPPORTED", why[1], kernel=k)
        got = "UNSUPPORTED"
    else:
        a = case.args(device="torch" if INTERP else "cuda")
        k["run"](case.shape, a)
        j = case.judge(a["out"], kernel=k)
        got = j.verdict
        assert got == expected(kname, case), j.text
    ROUTE_PYTEST[(kname, case.id)] = got
    assert got == expected(kname, case)


# One test per kernel (not a parametrize over kernels: the plugin's case objects are shared by a
# marker's parametrizations, and --moects-results would keep only the last kernel's verdicts).
@pytest.mark.moects(*IDS, tier="all", kernel=KERNELS.get("triton.fused_moe.vllm"))
def test_pytest_route_vllm(moects_case):
    _route(moects_case, "triton.fused_moe.vllm")


@pytest.mark.moects(*IDS, tier="all", kernel=KERNELS.get("triton.fused_moe.gpt_oss"))
def test_pytest_route_gpt_oss(moects_case):
    _route(moects_case, "triton.fused_moe.gpt_oss")


@pytest.mark.moects(*IDS, tier="all", kernel=KERNELS.get("triton.mutant.fused_moe.vllm.gate_up_swapped"))
def test_pytest_route_vllm_swapped(moects_case):
    _route(moects_case, "triton.mutant.fused_moe.vllm.gate_up_swapped")


@pytest.mark.moects(*IDS, tier="all", kernel=KERNELS.get("triton.mutant.fused_moe.gpt_oss.gate_up_swapped"))
def test_pytest_route_gpt_oss_swapped(moects_case):
    _route(moects_case, "triton.mutant.fused_moe.gpt_oss.gate_up_swapped")


def test_kernel_py_route(build_dir, tmp_path):
    import moects
    env = dict(os.environ, MOECTS_PYTHON=os.environ.get("MOECTS_PYTHON", sys.executable))
    r = subprocess.run([os.path.join(build_dir, "bin", "moects"), "run", "--kernel-py",
                        os.path.join(ROOT, "examples", "triton_fused_moe.py") + ":kernels", "--out", str(tmp_path)]
                       + IDS, capture_output=True, text=True, env=env, timeout=1800)
    assert r.returncode == 0, r.stderr[-3000:]
    with open(tmp_path / "results.json") as f:
        got = {(x["kernel"], x["case"]): x["verdict"] for x in json.load(f)["results"]}
    for c in moects.cases(*IDS, tier="all"):
        for name in KERNELS:
            assert got[(name, c.id)] == expected(name, c), (name, c.id, got[(name, c.id)])
            if (name, c.id) in ROUTE_PYTEST:  # the pytest route ran in this session: the same verdict
                assert ROUTE_PYTEST[(name, c.id)] == got[(name, c.id)], (name, c.id)
