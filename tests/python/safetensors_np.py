"""safetensors_np.py: a minimal reader and writer of the safetensors format in numpy, written from
the published format (an 8-byte little-endian header length, a JSON header naming each tensor's
dtype, shape and [begin, end) byte offsets into the data that follows, optional "__metadata__" of
strings), independent of the C writer it checks."""
import json
import struct

import numpy as np

DTYPES = {"BF16": np.uint16, "F32": np.float32, "I32": np.int32, "I64": np.int64, "U8": np.uint8}


def load(path):
    """(tensors by name as read-only numpy arrays mapped from the file (BF16 as uint16 bits),
    metadata dict)."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n).decode("utf-8"))
    meta = header.pop("__metadata__", {})
    out = {}
    for name, t in header.items():
        b, e = t["data_offsets"]
        dt = np.dtype(DTYPES[t["dtype"]]).newbyteorder("<")
        assert e - b == dt.itemsize * int(np.prod(t["shape"], dtype=np.int64)), name
        out[name] = np.memmap(path, dtype=dt, mode="r", offset=8 + n + b, shape=tuple(t["shape"])) if e > b else \
            np.zeros(t["shape"], dtype=dt)
    return out, meta


def save(path, tensors, dtypes, metadata=None):
    """Write tensors (name -> numpy array) with their safetensors dtype names (name -> "BF16" ...)."""
    header, chunks, off = {}, [], 0
    for name, arr in tensors.items():
        raw = np.ascontiguousarray(arr).astype(np.dtype(DTYPES[dtypes[name]]).newbyteorder("<")).tobytes()
        header[name] = {"dtype": dtypes[name], "shape": list(arr.shape), "data_offsets": [off, off + len(raw)]}
        chunks.append(raw)
        off += len(raw)
    if metadata:
        header["__metadata__"] = metadata
    h = json.dumps(header).encode("utf-8")
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(chunks))
