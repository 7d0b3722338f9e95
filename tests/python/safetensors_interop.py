"""safetensors_interop.py MOECTS WORKDIR: moects export / verify against the reference Python
implementation of safetensors (the `safetensors` package: serialize_file / deserialize, which handle
BF16 as raw bytes). Checked independently of moects's own reader and writer:
- every file moects writes is read by safetensors, tensor shapes agree with the case's metadata and
  byte counts with dtype x shape;
- outputs written by safetensors (the exported reference copied as "out") verify as PASS_EXACT,
  one flipped bit is one FAIL_MISMATCH, a wrong shape is FAIL_CRASH naming the tensor;
- malformed files (header past the end, a hole, an overlap, an unknown dtype, a duplicate key) are
  refused with one line naming the file and the field, exit 2.
"""
import ctypes
import json
import os
import shutil
import struct
import subprocess
import sys

from safetensors import deserialize, serialize_file

try:  # safetensors >= 0.8: raw tensors as TensorSpec (numpy has no bfloat16); before: dicts of bytes
    from safetensors import TensorSpec
except ImportError:
    TensorSpec = None
NUMPY_NAMES = {"BF16": "bfloat16", "F32": "float32", "I32": "int32", "I64": "int64", "U8": "uint8"}


def save_raw(path, name, dtype, shape, data, metadata=None):
    """One tensor of raw little-endian bytes written by the reference implementation."""
    if TensorSpec is None:
        serialize_file({name: {"dtype": dtype, "shape": shape, "data": data}}, path, metadata=metadata)
        return
    buf = ctypes.create_string_buffer(bytes(data), max(len(data), 1))
    spec = TensorSpec(dtype=NUMPY_NAMES[dtype], shape=shape, data_ptr=ctypes.addressof(buf), data_len=len(data))
    serialize_file({name: spec}, path, metadata=metadata)

MOECTS, WORK = sys.argv[1], sys.argv[2]
SIZES = {"BF16": 2, "F32": 4, "I32": 4, "I64": 8, "U8": 1}
CASES = ["ep_gather/regression/block-divides-h/h100/t64", "ep_gather/regression/block-divides-h/h3/t64",
         "fp4_gemm.mxfp4/dbrx/tp8/gemm2/m16", "fp4_gemm.mxfp4/dbrx/tp8/gemm2/m16/swizzled"]


def moects(*args, expect=None):
    p = subprocess.run([MOECTS, *args], capture_output=True, text=True)
    if expect is not None and p.returncode != expect:
        sys.exit(f"moects {' '.join(args)}: exit {p.returncode}, expected {expect}\n{p.stdout}\n{p.stderr}")
    return p


def read(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    meta = json.loads(raw[8:8 + n]).get("__metadata__", {})
    return dict(deserialize(raw)), meta


def check_export(d):
    files = sorted(f for f in os.listdir(d) if f.endswith(".safetensors"))
    assert len(files) == len(CASES), files
    for f in files:
        tensors, meta = read(os.path.join(d, f))
        shape = json.loads(meta["moects.shape"])
        dtypes = json.loads(meta["moects.dtypes"])
        for name, t in tensors.items():
            n = 1
            for s in t["shape"]:
                n *= s
            assert len(t["data"]) == n * SIZES[t["dtype"]], (f, name)
            assert dtypes[name] == t["dtype"], (f, name)
        if meta["moects.op"] == "ep_gather":
            assert tensors["x"]["shape"] == [shape["M_sum"], shape["H"]], f
            assert tensors["topk_ids"]["shape"] == [shape["T"], shape["k"]], f
            out = [shape["T"], shape["H"]]
        else:
            assert tensors["a"]["shape"][0] == shape["M"] and tensors["b"]["shape"][0] == shape["N"], f
            assert tensors["a"]["shape"][1] == (shape["K"] + 1) // 2, f
            out = [shape["M"], shape["N"]]
        assert json.loads(meta["moects.out"])["shape"] == out, f
        assert ("ref." + meta["moects.recipe"]) in tensors, f
    return files


def write_outputs(d, files, flip=None, reshape=None):
    for f in files:
        tensors, meta = read(os.path.join(d, f))
        ref = tensors["ref." + meta["moects.recipe"]]
        data, shape = bytearray(ref["data"]), list(ref["shape"])
        if f == flip:
            data[0] ^= 1
        if f == reshape:
            shape = [shape[1], shape[0]]
        save_raw(os.path.join(d, f[:-len(".safetensors")] + ".out.safetensors"), "out", ref["dtype"], shape,
                 bytes(data), metadata={"writer": "safetensors " + getattr(sys.modules["safetensors"], "__version__", "?")})


def verdicts(d):
    with open(os.path.join(d, "results.json")) as f:
        return {r["case"]: r for r in json.load(f)["results"]}


def malformed(d):
    def raw(header, data):
        h = json.dumps(header).encode()
        return struct.pack("<Q", len(h)) + h + data

    t = {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}
    bad = {
        "length": (struct.pack("<Q", 1 << 40) + b"{}", "header length"),
        "hole": (raw({"a": {**t, "data_offsets": [4, 8]}}, b"\0" * 8), "a.data_offsets"),
        "overlap": (raw({"a": t, "b": {**t, "data_offsets": [0, 4]}}, b"\0" * 4), "data_offsets"),
        "dtype": (raw({"a": {**t, "dtype": "F33"}}, b"\0" * 4), "a.dtype"),
        "size": (raw({"a": {**t, "shape": [2]}}, b"\0" * 4), "a.data_offsets"),
        "duplicate": (struct.pack("<Q", 2 * len(json.dumps({"a": t})) + 1) + (json.dumps({"a": t})[:-1] + ", "
                      + json.dumps({"a": t})[1:]).encode()[:2 * len(json.dumps({"a": t})) + 1] + b"\0" * 4, "header"),
    }
    for name, (blob, field) in bad.items():
        sub = os.path.join(d, "bad-" + name)
        os.makedirs(sub)
        path = os.path.join(sub, "x.safetensors")
        with open(path, "wb") as f:
            f.write(blob)
        p = moects("verify", sub, expect=2)
        line = p.stderr.strip()
        assert "\n" not in line and path in line and field in line, (name, line)


def main():
    shutil.rmtree(WORK, ignore_errors=True)
    d = os.path.join(WORK, "cases")
    moects("export", *CASES, "--out", d, expect=0)
    files = check_export(d)
    write_outputs(d, files)
    moects("verify", d, expect=0)
    v = verdicts(d)
    assert all(r["verdict"] == "PASS_EXACT" for r in v.values()), v
    write_outputs(d, files, flip=files[0], reshape=files[1])
    p = moects("verify", d, expect=1)
    v = verdicts(d)
    by_file = {f: v[read(os.path.join(d, f))[1]["moects.case_id"]] for f in files}
    assert by_file[files[0]]["verdict"] == "FAIL_MISMATCH" and by_file[files[0]]["mismatches"] == 1, by_file[files[0]]
    assert by_file[files[1]]["verdict"] == "FAIL_CRASH" and "out:" in by_file[files[1]]["reason"], by_file[files[1]]
    assert all(by_file[f]["verdict"] == "PASS_EXACT" for f in files[2:]), by_file
    assert "not ok" in p.stdout
    malformed(WORK)
    print("safetensors interop: ok")


main()
