"""_tensors.py: libmoects tensors (moects_tensor_info) as numpy arrays or torch tensors, no copies.

Host memory becomes a numpy array over the library's buffer (its `base` keeps the owning handle
alive); CUDA device memory (a `--kernel-py` task of a CUDA kernel) becomes a torch tensor through
__cuda_array_interface__. BF16 has no numpy dtype: numpy gets its bit patterns as uint16, torch gets
torch.bfloat16 (a view of int16, the same bits). numpy and torch are imported only when used.
"""
import ctypes

# safetensors dtype name -> (numpy dtype name, __cuda_array_interface__ typestr, bytes)
DTYPES = {"BF16": ("uint16", "<i2", 2), "F32": ("float32", "<f4", 4), "I32": ("int32", "<i4", 4),
          "I64": ("int64", "<i8", 8), "U8": ("uint8", "|u1", 1), "F64": ("float64", "<f8", 8)}


def absent(info):
    """Whether the case has no such tensor (run() gets None): ep_gather without an expert_map, or a
    moe_gemm tensor of another format or row layout (described with ndim 0)."""
    return info.ndim == 0 or (info.name == b"expert_map" and info.bytes == 0)


def dims(info):
    return tuple(int(info.dims[i]) for i in range(info.ndim))


def host_array(info, owner):
    """numpy view of host tensor info (data owned by `owner`, kept alive by the array's base)."""
    import numpy as np
    dt = np.dtype(DTYPES[info.dtype.decode()][0])
    shape = dims(info)
    if not info.data or info.bytes == 0:
        return np.zeros(shape, dtype=dt)
    raw = (ctypes.c_char * info.bytes).from_address(info.data)
    raw._moects_owner = owner  # the ctypes object (the array's base) keeps the handle alive
    return np.frombuffer(raw, dtype=dt, count=info.bytes // dt.itemsize).reshape(shape)


class _CudaBuffer:
    """An object exposing device memory through __cuda_array_interface__ (version 3)."""

    def __init__(self, ptr, shape, typestr):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (ptr, False),
                                         "strides": None, "version": 3, "stream": None}


def torch_dtype(name):
    import torch
    return {"BF16": torch.bfloat16, "F32": torch.float32, "I32": torch.int32, "I64": torch.int64,
            "U8": torch.uint8}[name]


def device_tensor(info):
    """torch tensor over CUDA device memory described by info (zero copy; BF16 as bfloat16)."""
    import torch
    name = info.dtype.decode()
    shape = dims(info)
    if not info.data or info.bytes == 0:
        return torch.empty(shape, dtype=torch_dtype(name), device="cuda")
    t = torch.as_tensor(_CudaBuffer(int(info.data), shape, DTYPES[name][1]), device="cuda")
    return t.view(torch.bfloat16) if name == "BF16" else t


def to_torch(arr, dtype_name, device):
    """A numpy array (host, the library's bytes) as a torch tensor on device (a copy when device
    is not "cpu"; BF16 bits become torch.bfloat16)."""
    import torch
    t = torch.from_numpy(arr.view("int16") if dtype_name == "BF16" else arr)
    if dtype_name == "BF16":
        t = t.view(torch.bfloat16)
    return t if device == "cpu" else t.to(device)


CANARY = 0xC3  # the bytes around an output from guarded_output


def guarded_output(shape, dtype_name, poison, device):
    """An output of shape filled with poison, inside a larger buffer whose margins (4 KiB, and at
    least 128 rows of the output's last dimension, each side) hold CANARY: (output, base, pad), base
    the whole buffer (numpy uint8, or a torch uint8 tensor on device) and pad the margin in bytes."""
    import numpy as np
    dt = np.dtype(DTYPES[dtype_name][0])
    n = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
    row = (shape[-1] if shape else 1) * dt.itemsize
    pad = -(-max(4096, 128 * row) // 4096) * 4096
    base = np.full(2 * pad + n, CANARY, dtype=np.uint8)
    base[pad:pad + n].view("uint%d" % (8 * dt.itemsize))[:] = poison  # the bit pattern
    if device == "cpu":
        return base[pad:pad + n].view(dt).reshape(shape), base, pad
    import torch
    tb = torch.from_numpy(base)
    tb = tb if device == "torch" else tb.to(device)
    out = tb[pad:pad + n].view(torch_dtype(dtype_name)).view(shape)
    return out, tb, pad


def margin_write(out, base, pad):
    """For an output from guarded_output: "write before the start (byte offset -i)" or "write after
    the end (byte offset +i)" for the written margin byte nearest the output, or None when both
    margins hold CANARY, or when out is not that output (another array or tensor)."""
    import numpy as np
    is_torch = type(base).__module__.startswith("torch")

    def address(x):
        return x.data_ptr() if is_torch else x.__array_interface__["data"][0]

    def written(margin):  # indices of margin bytes that are no longer CANARY
        hits = margin != CANARY
        return hits.nonzero().cpu().numpy().reshape(-1) if is_torch else np.flatnonzero(hits)

    if address(out) != address(base) + pad:
        return None
    n = base.shape[0] - 2 * pad
    lo, hi = written(base[:pad]), written(base[pad + n:])
    if len(lo):
        return "write before the start (byte offset -%d)" % (pad - int(lo[-1]))
    if len(hi):
        return "write after the end (byte offset +%d)" % int(hi[0])
    return None


def as_host_bytes(out):
    """An output (numpy array, torch tensor on any device, or a buffer) as a C-contiguous numpy
    array in host memory, with its address and size. Returns (array, address, nbytes)."""
    import numpy as np
    mod = type(out).__module__
    if mod.startswith("torch"):
        import torch
        t = out.detach()
        if t.dtype == torch.bfloat16:
            t = t.view(torch.int16)
        arr = t.contiguous().cpu().numpy()
    else:
        arr = np.ascontiguousarray(out)
    return arr, arr.ctypes.data, arr.nbytes


def as_host_values(x, dtype_name, shape):
    """An exposed intermediate (numpy array, torch tensor on any device, or a nested list) as a
    C-contiguous numpy array of dtype_name ("F32" or "F64") and shape, in host memory: its values
    converted (a torch bfloat16 by value, not by bits). Returns (array, address). ValueError when
    its element count is not shape's."""
    import numpy as np
    if type(x).__module__.startswith("torch"):
        x = x.detach().to("cpu").double().numpy()
    arr = np.ascontiguousarray(np.asarray(x), dtype=DTYPES[dtype_name][0])
    n = int(np.prod(shape, dtype=np.int64))
    if arr.size != n:
        raise ValueError("%d elements, %s wants %d (%s)" % (arr.size, "x".join(map(str, shape)), n, dtype_name))
    arr = arr.reshape(shape)
    return arr, arr.ctypes.data


def route_views(out):
    """moe_route's output (one [2T, k] F32 buffer: the ids' rows, then the weights') as the two
    tensors of moects_moe_route_args: (topk_ids [T, k] int32, topk_weights [T, k] float32), views
    of out's memory (numpy arrays or torch tensors alike)."""
    T = out.shape[0] // 2
    if type(out).__module__.startswith("torch"):
        import torch
        return out[:T].view(torch.int32), out[T:]
    return out[:T].view("int32"), out[T:]


def route_pack(ids, weights):
    """topk_ids [T, k] and topk_weights [T, k] (numpy arrays, torch tensors on any device, or
    sequences) as moe_route's one output buffer: a host numpy float32 [2T, k] array holding the ids'
    int32 bits, then the weights' FP32 bits."""
    import numpy as np

    def host(x, dt):
        if type(x).__module__.startswith("torch"):
            x = x.detach().cpu().numpy()
        return np.asarray(x, dtype=dt)

    i, w = host(ids, np.int32), host(weights, np.float32)
    if i.ndim != 2 or i.shape != w.shape:
        raise ValueError("moe_route output: topk_ids %s and topk_weights %s: two [T, k] arrays of one shape"
                         % (i.shape, w.shape))
    return np.concatenate([i.view(np.float32), w])
