"""Kernel descriptions a user gets wrong are refused when loaded, with one line naming the field (a
bound given as a string once became 2 bits, truncating, and passed a broken kernel); supports()
returning something that is not an answer refuses with what it returned; a recipe the case's format
does not have is the kernel's claim, said so; repro lines name a kernel file by its absolute path.
Under `moects run --kernel-py`, the one line a user sees for each."""
import os
import subprocess
import sys
import types

import numpy as np
import pytest

from conftest import ROOT
from moects.kernel import _refusal, describe

GOOD = {"name": "py.k", "op": "moe_gemm", "run": lambda shape, args: None}
KERNEL = ('kernel = {%s"name": "py.k", "op": "ep_gather", "recipe": "ep_gather.fma_v1", '
          '"run": lambda shape, args: None}\n')


def run_kernel_py(build_dir, tmp_path, source, env=None, args=()):
    """`moects run --kernel-py FILE:kernel` on one ep_gather case, FILE written from source; (spec,
    completed process). The worker's Python is this one, with the checkout's package."""
    f = tmp_path / "k.py"
    f.write_text(source)
    spec = "%s:kernel" % f
    env = env or dict(os.environ, MOECTS_PYTHON=sys.executable, PYTHONPATH=os.path.join(ROOT, "python"))
    r = subprocess.run([os.path.join(build_dir, "bin", "moects"), "run", *args, "--kernel-py", spec, "--kernel", "py.*",
                        "--out", str(tmp_path / "out"), "ep_gather/kimi-k3/ep64/t1"], capture_output=True, text=True,
                       env=env, cwd=str(tmp_path), timeout=600)
    return spec, r


def describe_failed(spec, error):
    """moects run's one line when the description of spec is refused with error."""
    return ("moects run: --kernel-py: %s -m moects._worker --describe failed (exit 2): moects._worker: --kernel-py "
            "%s: ValueError: %s\n" % (sys.executable, spec, error))


@pytest.mark.parametrize("extra, words", [
    ({"bound": "24"}, "bound: bits '24': an integer 2..64"),
    ({"bound": 1}, "bound: bits 1"),
    ({"bound": ("24", "rne")}, "bound: bits '24'"),
    ({"bound": 24.0}, "bound: bits 24.0"),
    ({"bound": True}, "bound: bits True"),
    ({"bound": 65}, "bound: bits 65"),
    ({"bound": -3}, "bound: bits -3"),
    ({"bound": (24, "yes")}, "bound: truncation 'yes'"),
    ({"bound": {"bits": 24, "trunc": True}}, "the keys are \"bits\", \"truncation\" and \"bf16_split_k\""),
    ({"bound": {"bits": 24, "bf16_split_k": 1}}, "bound: bf16_split_k 1: 0 (none) or an integer 2..256"),
    ({"bound": {"bits": 24, "bf16_split_k": 257}}, "bound: bf16_split_k 257"),
    ({"bound": {"bits": 24, "bf16_split_k": "132"}}, "bound: bf16_split_k '132'"),
    ({"tolerance": "14"}, "tolerance: '14'"),
    ({"tolerance": "1e-5,4"}, "tolerance: '1e-5,4'"),
    ({"tolerance": (float("inf"), 4)}, "max_calc_diff inf"),
    ({"tolerance": (1e-5, 4.5)}, "max_ulp 4.5"),
    ({"recipe": "moe_gemm.blockwise_v1", "bound": 24}, "recipe with a bound or tolerance"),
    ({"recipe": "ep_gather.fma_v1"}, "expected a moe_gemm.* recipe name"),
    ({"bound": 24, "run": 5}, "run: 5 is not callable"),
    ({"bound": 24, "supports": "no"}, "supports: 'no' is not callable"),
    ({"bound": 24, "bug": 5}, "bug: 5: a string, the mutant's one known bug in one line"),
    ({"bound": 24, "bug": ["off by one"]}, "bug: ['off by one']: a string"),
])
def test_bad_description_names_the_field(extra, words):
    with pytest.raises(ValueError) as e:
        describe(dict(GOOD, **extra))
    assert str(e.value).startswith("kernel 'py.k': ") and words in str(e.value), str(e.value)


def test_bug_not_a_string_refused_when_loaded(build_dir, tmp_path):
    spec, r = run_kernel_py(build_dir, tmp_path, KERNEL % '"bug": 5, ')
    assert r.returncode == 2 and r.stderr == describe_failed(
        spec, "kernel 'py.k': bug: 5: a string, the mutant's one known bug in one line"), r.stderr


@pytest.mark.parametrize("desc, message", [
    ({"op": "moe_gemm", "bound": 24}, "kernel description: name: missing (a non-empty string is required)"),
    ({"name": None, "op": "moe_gemm", "bound": 24},
     "kernel description: name: missing (a non-empty string is required)"),
    ({"name": "py.k", "bound": 24}, "kernel 'py.k': op: missing, expected one of ep_gather, fp4_gemm, moe_gemm, fused_moe, moe_route"),
    (types.SimpleNamespace(name="py.k", op=None, bound=24),
     "kernel 'py.k': op: missing, expected one of ep_gather, fp4_gemm, moe_gemm, fused_moe, moe_route"),
])
def test_missing_field_is_named(desc, message):
    with pytest.raises(ValueError) as e:
        describe(desc)
    assert str(e.value) == message


def test_missing_name_and_run_refused_when_loaded(build_dir, tmp_path):
    spec, r = run_kernel_py(build_dir, tmp_path, 'kernel = {"op": "ep_gather", "recipe": "ep_gather.fma_v1"}\n')
    assert r.returncode == 2 and r.stderr == describe_failed(
        spec, "kernel description: name: missing (a non-empty string is required)"), r.stderr
    spec, r = run_kernel_py(build_dir, tmp_path, 'kernel = {"name": "py.k", "op": "ep_gather", '
                                                 '"recipe": "ep_gather.fma_v1"}\n')
    assert r.returncode == 2 and r.stderr == describe_failed(
        spec, "kernel 'py.k': run: a callable run(shape, args) is required to run it"), r.stderr


def test_duplicate_names_say_where_from(build_dir, tmp_path):
    spec, r = run_kernel_py(build_dir, tmp_path, KERNEL % "" + "kernel = [kernel, dict(kernel)]\n")
    assert r.returncode == 2 and r.stderr == (
        "moects run: kernel py.k: registered twice, both by --kernel-py %s\n" % spec), r.stderr
    spec, r = run_kernel_py(build_dir, tmp_path, (KERNEL % "").replace('"py.k"', '"cpu.ep_gather"'))
    assert r.returncode == 2 and r.stderr == (
        "moects run: kernel cpu.ep_gather: registered twice: built in and by --kernel-py %s\n" % spec), r.stderr
    lib = os.path.join(build_dir, "lib", "libmoects_plugin_example.so")
    spec, r = run_kernel_py(build_dir, tmp_path, (KERNEL % "").replace('"py.k"', '"plugin.ep_gather"'),
                            args=("--kernel-lib", lib))
    assert r.returncode == 2 and r.stderr == (
        "moects run: kernel plugin.ep_gather: registered twice: by --kernel-lib %s and by --kernel-py %s\n"
        % (lib, spec)), r.stderr


def test_no_package_names_the_ways_to_get_it(build_dir, tmp_path):
    env = dict(os.environ, MOECTS_PYTHON=sys.executable, PYTHONPATH="", PYTHONNOUSERSITE="1")
    if subprocess.run([sys.executable, "-c", "import moects"], env=env, cwd=str(tmp_path),
                      capture_output=True).returncode == 0:
        pytest.skip("%s imports moects without PYTHONPATH (installed)" % sys.executable)
    spec, r = run_kernel_py(build_dir, tmp_path, KERNEL % "", env=env)
    py, src = sys.executable, ROOT
    assert r.returncode == 2 and r.stderr == (
        "moects run: --kernel-py: %s -m moects._worker --describe failed (exit 1): %s: Error while finding module "
        "specification for 'moects._worker' (ModuleNotFoundError: No module named 'moects'); %s cannot import the "
        "moects package: set PYTHONPATH=%s/python, or MOECTS_PYTHON to a Python that has it (pip install %s/python "
        "in a venv, then MOECTS_PYTHON=VENV/bin/python)\n" % (py, py, py, src, src)), r.stderr


def test_good_descriptions():
    for extra in ({"bound": 24}, {"bound": (24, True)}, {"bound": {"bits": 24}}, {"bound": (np.int64(24), np.True_)},
                  {"bound": 24, "tolerance": (1e-5, 0xFFFFFFFF)}, {"tolerance": {"max_calc_diff": 1e-3}},
                  {"recipe": "moe_gemm.exact_v1"}, {"bound": {"bits": 24, "truncation": True, "bf16_split_k": 132}}):
        describe(dict(GOOD, **extra))
    with pytest.raises(ValueError, match="not int"):
        describe(17)


def test_supports_answers():
    for r in (True, np.True_, (True, "ignored")):
        assert _refusal(r) is None, r
    assert _refusal(False) == _refusal(np.False_) == _refusal((False,)) == "refused by supports()"
    assert _refusal("too big") == _refusal((False, "too big")) == "too big"
    for r in (None, 42, [1, 2]):
        assert _refusal(r) == "supports() returned %r (expected True, False, a reason string or (False, reason))" % (r,)


CLAIM = '''
import sys
sys.path.insert(0, %r)
import numpy_moe_gemm as nm
kernel = {"name": "py.claims_blockwise", "op": "moe_gemm", "recipe": "moe_gemm.blockwise_v1", "run": nm.moe_gemm}
'''


def test_w4a16_blockwise_claim_and_repro(build_dir, tmp_path):
    from conftest import ROOT
    (tmp_path / "claim.py").write_text(CLAIM % os.path.join(ROOT, "examples"))
    case = "moe_gemm.w4a16/deepseek-v3/ep64/contiguous/gemm2/t16"
    r = subprocess.run([os.path.join(build_dir, "bin", "moects"), "run", "--kernel-py", "claim.py:kernel", "--kernel",
                        "py.*", "--out", str(tmp_path / "out"), case], capture_output=True, text=True, cwd=tmp_path,
                       timeout=600)
    assert r.returncode == 1, r.stderr
    assert ("reason: \"the kernel claims moe_gemm.blockwise_v1, which W4A16 does not have (BF16 x E2M1 block "
            "partials are not exact): declare a bound (or refuse W4A16 cases)\"") in r.stdout, r.stdout
    # the file inside the run's folder: named relative to it (docs/usage.md)
    assert "--kernel-py './claim.py:kernel'" in r.stdout, r.stdout


def test_bf16_split_k_reaches_the_judge():
    """A declared split-K BF16 class is what the judge applies (results.json's recipe names it), and
    the exact result passes under it."""
    import moects
    c = moects.case("fp4_gemm.mxfp4/regression/n-not-128/n100/k2688/m5")
    k = {"name": "py.split", "op": "fp4_gemm", "bound": {"bits": 24, "truncation": True, "bf16_split_k": 132}}
    j = c.judge(c.reference("fp4_gemm.exact_v1"), kernel=k)
    assert j.verdict == "PASS_BOUNDED", j.text
    assert j.record["recipe"] == "fp4_gemm.exact_v1+bound(p=24,trunc,bf16-split-k<=132)"
