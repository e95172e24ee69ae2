"""Minimal GGUF v3 writer for dlm's tests (numpy only), following
docs/reference/formats.md §4: little-endian header, typed key/values, tensor infos with
sequential offsets padded to the alignment, zero padding, tensor data.

Written from the spec, independently of the C reader it tests. Supports the
tensor types the tests need: F32, F16, BF16, Q8_0 (llama.cpp's reference
quantizer, docs/reference/formats.md §6.3) and raw pre-packed blocks for any other type."""
import struct

import numpy as np

GGUF_U8, GGUF_I8, GGUF_U16, GGUF_I16, GGUF_U32, GGUF_I32, GGUF_F32, GGUF_BOOL, \
    GGUF_STR, GGUF_ARR, GGUF_U64, GGUF_I64, GGUF_F64 = range(13)

T_F32, T_F16, T_Q4_0, T_Q8_0, T_Q4_K, T_Q5_K, T_Q6_K, T_BF16 = 0, 1, 2, 8, 12, 13, 14, 30
BLOCK = {0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34),
         12: (256, 144), 13: (256, 176), 14: (256, 210), 30: (1, 2)}

_SCALAR = {GGUF_U8: "<B", GGUF_I8: "<b", GGUF_U16: "<H", GGUF_I16: "<h", GGUF_U32: "<I",
           GGUF_I32: "<i", GGUF_F32: "<f", GGUF_BOOL: "<?", GGUF_U64: "<Q", GGUF_I64: "<q",
           GGUF_F64: "<d"}


def _str(s):
    b = s.encode("utf-8") if isinstance(s, str) else bytes(s)
    return struct.pack("<Q", len(b)) + b


def _value(vtype, v, elem=None):
    if vtype == GGUF_STR:
        return _str(v)
    if vtype == GGUF_ARR:
        out = struct.pack("<IQ", elem, len(v))
        if elem == GGUF_STR:
            return out + b"".join(_str(x) for x in v)
        return out + b"".join(struct.pack(_SCALAR[elem], x) for x in v)
    return struct.pack(_SCALAR[vtype], v)


def f32_to_bf16_bits(x):
    """ggml's fp32 -> bf16: round to nearest even, NaN -> quiet."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(np.asarray(x, dtype=np.float32))
    r[nan] = ((u[nan] >> 16) | 64).astype(np.uint16)
    return r


def bf16_bits_to_f32(b):
    return (np.asarray(b, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def quantize_q8_0(x):
    """docs/reference/formats.md §6.3 Q8_0 on rows of x (last dim a multiple of 32):
    amax/127 in f32, qs = roundf(x * (1/d)) (half away from zero), d as fp16."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    blocks = x.reshape(-1, 32)
    amax = np.max(np.abs(blocks), axis=1).astype(np.float32)
    d = (amax / np.float32(127)).astype(np.float32)
    idv = np.where(d != 0, np.float32(1) / np.where(d != 0, d, np.float32(1)), np.float32(0)).astype(np.float32)
    v = (blocks * idv[:, None]).astype(np.float32).astype(np.float64)
    q = (np.sign(v) * np.floor(np.abs(v) + 0.5)).astype(np.int8)
    out = np.zeros((blocks.shape[0], 34), dtype=np.uint8)
    out[:, 0:2] = d.astype(np.float16).view(np.uint8).reshape(-1, 2)
    out[:, 2:] = q.view(np.uint8)
    return out.tobytes()


def pattern_bytes(rows, ne0, ttype):
    """Stand-in blocks for a quantized type the tests cannot quantize: row r
    (HF order) holds bytes (7r + j) & 0xff, so a reader can check that it
    kept the type, the row size and (after Q/K un-permutation) the row order.
    Returns an array [rows, row_bytes] of uint8."""
    be, bb = BLOCK[ttype]
    rb = ne0 // be * bb
    r = np.arange(rows, dtype=np.int64)[:, None]
    j = np.arange(rb, dtype=np.int64)[None, :]
    return ((7 * r + j) & 0xFF).astype(np.uint8)


def tensor_bytes(x, ttype):
    """Encode float array x (torch order) as ggml type ttype."""
    if ttype == T_F32:
        return np.ascontiguousarray(x, dtype=np.float32).tobytes()
    if ttype == T_F16:
        return np.ascontiguousarray(x, dtype=np.float32).astype(np.float16).tobytes()
    if ttype == T_BF16:
        return f32_to_bf16_bits(x).tobytes()
    if ttype == T_Q8_0:
        return quantize_q8_0(x)
    raise ValueError("unsupported tensor type %d" % ttype)


def write_gguf(path, kvs, tensors, alignment=32, version=3):
    """kvs: list of (key, vtype, value[, elem_type]); tensors: list of
    (name, ggml_type, ne (ggml order), data bytes)."""
    out = bytearray(b"GGUF")
    out += struct.pack("<IQQ", version, len(tensors), len(kvs))
    for kv in kvs:
        key, vtype, val = kv[0], kv[1], kv[2]
        out += _str(key) + struct.pack("<I", vtype) + _value(vtype, val, kv[3] if len(kv) > 3 else None)
    offset = 0
    for name, ttype, ne, data in tensors:
        be, bb = BLOCK[ttype]
        assert ne[0] % be == 0, name
        nbytes = ne[0] // be * bb
        for d in ne[1:]:
            nbytes *= d
        assert nbytes == len(data), (name, nbytes, len(data))
        out += _str(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne)
        out += struct.pack("<IQ", ttype, offset)
        offset += (nbytes + alignment - 1) // alignment * alignment
    if tensors:
        out += b"\0" * ((-len(out)) % alignment)
    for _, _, _, data in tensors:
        out += data
        out += b"\0" * ((-len(data)) % alignment)
    with open(path, "wb") as f:
        f.write(out)


def permute_qk(w, n_head):
    """llama-arch Q/K row permutation (docs/reference/formats.md §4.6): rows of each head
    [2][hd/2] -> [hd/2][2]. Works for weights [rows, cols] and biases [rows]."""
    rows = w.shape[0]
    hd = rows // n_head
    rest = w.shape[1:]
    return (w.reshape(n_head, 2, hd // 2, *rest).swapaxes(1, 2).reshape(rows, *rest))
