"""A small GGUF v3 reader for the export checks (numpy only), written from
docs/reference/formats.md §4.1: little-endian header, typed key/values, tensor infos, data
aligned to general.alignment (default 32). Independent of dlm's C reader.

read(path) -> (kvs, tensors): kvs maps key -> (type, value) in file order;
tensors is a list of dicts {name, type, ne, offset, nbytes, data (bytes)} in
file order."""
import struct

# (block elements, bytes per block) of the ggml types dlm writes
BLOCK = {0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34),
         12: (256, 144), 13: (256, 176), 14: (256, 210), 30: (1, 2)}
TYPE_NAMES = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 6: "Q5_0", 7: "Q5_1", 8: "Q8_0", 12: "Q4_K",
              13: "Q5_K", 14: "Q6_K", 30: "BF16"}
_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


class _R:
    def __init__(self, b):
        self.b, self.p = b, 0

    def take(self, fmt):
        v = struct.unpack_from(fmt, self.b, self.p)
        self.p += struct.calcsize(fmt)
        return v[0]

    def string(self):
        n = self.take("<Q")
        s = self.b[self.p:self.p + n]
        self.p += n
        return s.decode("utf-8", errors="surrogateescape")

    def value(self, t):
        if t == 8:
            return self.string()
        if t == 9:
            et, n = self.take("<I"), self.take("<Q")
            return [self.value(et) for _ in range(n)]
        return self.take(_SCALAR[t])


def read(path):
    b = open(path, "rb").read()
    r = _R(b)
    if b[:4] != b"GGUF":
        raise ValueError(f"{path}: not a GGUF file")
    r.p = 4
    version, n_t, n_kv = r.take("<I"), r.take("<Q"), r.take("<Q")
    if version != 3:
        raise ValueError(f"{path}: GGUF version {version}")
    kvs = {}
    for _ in range(n_kv):
        k = r.string()
        t = r.take("<I")
        kvs[k] = (t, r.value(t))
    tensors = []
    for _ in range(n_t):
        name = r.string()
        nd = r.take("<I")
        ne = [r.take("<Q") for _ in range(nd)]
        ty, off = r.take("<I"), r.take("<Q")
        be, bb = BLOCK[ty]
        rows = 1
        for x in ne[1:]:
            rows *= x
        tensors.append({"name": name, "type": ty, "ne": ne, "offset": off, "nbytes": ne[0] // be * bb * rows})
    align = kvs.get("general.alignment", (4, 32))[1]
    start = (r.p + align - 1) // align * align
    for t in tensors:
        t["data"] = b[start + t["offset"]:start + t["offset"] + t["nbytes"]]
    return kvs, tensors
