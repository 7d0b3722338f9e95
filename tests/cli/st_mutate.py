"""st_mutate.py: one malformed variant of a safetensors case file, for tests/cli/localcase.sh.

    python3 st_mutate.py IN OUT MUTATION

MUTATION: truncated, dtype (x BF16 -> F16), id_range (topk_ids[0] = E_global + 5), idx_range
(the first input_index that reads x = M_sum), map_range (expert_map[0] = 1000), scale_nan (sa[0] = 0xff), shape (x's dims
swapped), case_shape (moects.case's shape.H + 1), duplicate (the header names x twice), offsets (the
header's data_offsets of the first tensor end 2 bytes later), missing (topk_weights dropped), extra
(a tensor "bogus" added), flip_scale (sa[0] + 1: still a valid scale), header_len (the header length
past the file's end); fused_moe: w13_rows (W13 [E, N1, H'] as [E, N1 / 2, 2 H']), w13_scale_nan
(w13_scale[0] = 0xff); moe_gemm: m_index_range (m_indices[0] = E + 3), sb_nan (sb[0] = 0xff). Standard library only: the safetensors layout is 8 bytes of little-endian
header length, the JSON header, the data."""
import json
import struct
import sys


def read(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    return json.loads(b[8:8 + n]), bytearray(b[8 + n:])


def write(path, h, data, raw_header=None):
    t = (raw_header if raw_header is not None else json.dumps(h)).encode()
    t += b" " * ((8 - len(t) % 8) % 8)
    open(path, "wb").write(struct.pack("<Q", len(t)) + t + bytes(data))


def put(h, data, name, i, fmt, v):
    off = h[name]["data_offsets"][0] + i * struct.calcsize(fmt)
    struct.pack_into("<" + fmt, data, off, v)


def main():
    src, dst, m = sys.argv[1:4]
    h, data = read(src)
    case = json.loads(h["__metadata__"]["moects.case"])
    sh = case["shape"]
    raw = None
    if m == "truncated":
        open(dst, "wb").write(open(src, "rb").read()[:-100])
        return
    if m == "dtype":
        h["x"]["dtype"] = "F16"
    elif m == "id_range":
        put(h, data, "topk_ids", 0, "i" if h["topk_ids"]["dtype"] == "I32" else "q", sh["E_global"] + 5)
    elif m == "idx_range":  # the first slot that reads a row of x (the others hold INT32_MAX)
        b, e = h["input_index"]["data_offsets"]
        i = next(i for i in range((e - b) // 4) if struct.unpack_from("<i", data, b + 4 * i)[0] != 2**31 - 1)
        put(h, data, "input_index", i, "i", sh["M_sum"])
    elif m == "map_range":
        put(h, data, "expert_map", 0, "i", 1000)
    elif m == "w13_rows":  # fused_moe: W13 [E, N1, H'] read as [E, N1 / 2, 2 H'] (the same bytes)
        E, n1, hc = h["w13"]["shape"]
        h["w13"]["shape"] = [E, n1 // 2, 2 * hc]
    elif m == "w13_scale_nan":  # fused_moe MXFP4: UE8M0 0xFF
        data[h["w13_scale"]["data_offsets"][0]] = 0xFF
    elif m == "m_index_range":  # moe_gemm contiguous: m_indices[0] = E + 3
        put(h, data, "m_indices", 0, "i", sh["E"] + 3)
    elif m == "sb_nan":  # moe_gemm: expert 0's first B scale (row 0, block 0 in either layout) 0xFF
        data[h["sb"]["data_offsets"][0]] = 0xFF
    elif m in ("scale_nan", "flip_scale"):
        off = h["sa"]["data_offsets"][0]
        data[off] = 0xFF if m == "scale_nan" else (data[off] + 1 if data[off] < 0xFE else data[off] - 1)
    elif m == "shape":
        h["x"]["shape"] = h["x"]["shape"][::-1]
    elif m == "case_shape":
        sh["H"] += 1
        h["__metadata__"]["moects.case"] = json.dumps(case)
    elif m == "duplicate":
        body = json.dumps(h)
        raw = body[:-1] + ', "x": ' + json.dumps(h["x"]) + "}"
    elif m == "offsets":
        first = min((k for k in h if k != "__metadata__"), key=lambda k: h[k]["data_offsets"][0])
        h[first]["data_offsets"][1] += 2
    elif m == "missing":
        b, e = h.pop("topk_weights")["data_offsets"]
        del data[b:e]
        for k, v in h.items():
            if k != "__metadata__" and v["data_offsets"][0] >= e:
                v["data_offsets"] = [v["data_offsets"][0] - (e - b), v["data_offsets"][1] - (e - b)]
    elif m == "extra":
        h["bogus"] = {"dtype": "U8", "shape": [4], "data_offsets": [len(data), len(data) + 4]}
        data += b"\0\0\0\0"
    elif m == "header_len":
        b = open(src, "rb").read()
        open(dst, "wb").write(struct.pack("<Q", len(b)) + b[8:])
        return
    else:
        sys.exit("st_mutate: unknown mutation " + m)
    write(dst, h, data, raw)


main()
