"""cpu.ep_gather.saxpy (one cblas_saxpy per slot into an FP32 row, judged by a tolerance) on the
numeric-adversaries family, with OpenBLAS's unfused saxpy kernel (OPENBLAS_CORETYPE=Prescott; the
H200 host's kernel is unfused too). Which cases fail is worked out in numpy, a second method: an
unfused FP32 mul-then-add chain over the valid slots, judged as the kernel declares (calc_diff <=
1e-4 over the finite pairs, and no NaN or Inf against another value). moects must fail exactly
those, and cases/known-findings.txt must name every one of them, so the run passes."""
import glob
import json
import os
import subprocess

import numpy as np

import moects
import numpy_ep_gather as ne
import safetensors_np as st

FAMILY = "ep_gather/regression/numeric-adversaries/*"


def unfused_saxpy(shape, t):
    """out[T, H] of an FP32 accumulator updated acc = fl(acc + fl(w * x)) slot by slot (no FMA)."""
    T, k, H = int(shape["T"]), int(shape["k"]), int(shape["H"])
    ids, w, rows = t["topk_ids"].reshape(T, k), t["topk_weights"].reshape(T, k), t["input_index"].reshape(T, k)
    valid = ne.valid_slots(shape, ids, t.get("expert_map"))
    x = ne.bf16_to_f32(t["x"]).reshape(-1, H)
    acc = np.zeros((T, H), dtype=np.float32)
    with np.errstate(all="ignore"):
        for j in range(k):
            v = np.nonzero(valid[:, j])[0]
            acc[v] = acc[v] + (x[rows[v, j]] * w[v, j][:, None]).astype(np.float32)
    return acc if shape["out_dtype"] == "F32" else ne.f32_to_bf16(acc)


def fails_tolerance(got, want, dtype, max_calc_diff=1e-4):
    """The tolerance verdict, from DESIGN.md "Verdicts": True when outside it."""
    bits = np.uint16 if dtype == "BF16" else np.uint32

    def value(x):  # float64, flat
        return (ne.bf16_to_f32(x) if dtype == "BF16" else np.asarray(x, dtype=np.float32)).astype(np.float64).ravel()

    g, w = value(got), value(want)
    differ = (np.asarray(got).view(bits) != np.asarray(want).view(bits)).ravel() & ~(np.isnan(g) & np.isnan(w))
    if np.any(differ & ~(np.isfinite(g) & np.isfinite(w))):
        return True  # a NaN or an Inf against another value: no bounded distance
    fin = np.isfinite(g) & np.isfinite(w)
    den = np.sum(g[fin] ** 2 + w[fin] ** 2)
    return den > 0 and np.sum((g[fin] - w[fin]) ** 2) / den > max_calc_diff


def predicted_failures(tmp_path):
    moects.export(str(tmp_path), FAMILY, tier="all")
    failing = set()
    for path in sorted(glob.glob(str(tmp_path / "*.safetensors"))):
        t, m = st.load(path)
        shape = json.loads(m["moects.shape"])
        if fails_tolerance(unfused_saxpy(shape, t), t["ref.ep_gather.exact_v1"], shape["out_dtype"]):
            failing.add(m["moects.case_id"])
    return failing


def run_saxpy(build_dir, out, *extra):
    env = dict(os.environ, OPENBLAS_CORETYPE="Prescott")
    r = subprocess.run([os.path.join(build_dir, "bin", "moects"), "run", FAMILY, "--kernel", "cpu.ep_gather.saxpy",
                        "--jobs", "2", "--out", str(out), *extra], capture_output=True, text=True, env=env)
    with open(out / "results.json") as fh:
        results = json.load(fh)["results"]
    return r, {x["case"] for x in results if x["verdict"].startswith("FAIL")}


def test_unfused_saxpy_fails_where_numpy_says_and_each_is_known(tmp_path, build_dir):
    want = predicted_failures(tmp_path / "export")
    # k6/bf16 by hand (token 5, column 30): 1.196e17 * -1.821e38 rounds to -Inf, the next slot's
    # +Inf makes NaN; exact_v1 is -2.553e22. The f32 ones: the same overflow in other columns.
    assert {"ep_gather/regression/numeric-adversaries/k6/adversarial/bf16",
            "ep_gather/regression/numeric-adversaries/k8/adversarial/f32"} <= want, want
    r, got = run_saxpy(build_dir, tmp_path / "unknown", "--known-findings", "/dev/null")
    assert r.returncode == 1 and got == want, (sorted(got), sorted(want), r.stderr[-400:])
    r, got = run_saxpy(build_dir, tmp_path / "known")
    assert r.returncode == 0 and got == want, r.stderr[-400:]
    assert "%d known findings" % len(want) in r.stderr, r.stderr[-400:]
