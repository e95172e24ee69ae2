"""Compare a GGUF dlm wrote with the one llama.cpp's converter wrote from
the same checkpoint (r1901, r1902): every key the converter writes with the
same type and value (general.name and general.size_label, which name the
folder, aside; dlm may add tokenizer.ggml.add_bos_token/add_eos_token, which
it writes whenever the source states them), and every tensor with the same
name, shape, type and bytes.

  mm_compare.py LLAMA_SRC DLM.gguf CONVERTER.gguf
"""
import os, sys

sys.path.insert(0, os.path.join(sys.argv[1], "gguf-py"))
import numpy as np
from gguf import GGUFReader

ours, ref = GGUFReader(sys.argv[2]), GGUFReader(sys.argv[3])
SKIP = {"general.name", "general.size_label"}
EXTRA_OK = {"tokenizer.ggml.add_bos_token", "tokenizer.ggml.add_eos_token"}


def value(f):
    if not f.types:
        return None
    if f.types[0].name == "ARRAY":
        return (f.types[1].name, [bytes(f.parts[i]).hex() for i in f.data])
    return (f.types[0].name, bytes(f.parts[f.data[0]]).hex())


bad = []
ok_keys = {k for k in ref.fields if not k.startswith("GGUF.")} - SKIP
for k in sorted(ok_keys):
    if k not in ours.fields:
        bad.append(f"key {k} missing")
    elif value(ours.fields[k]) != value(ref.fields[k]):
        bad.append(f"key {k}: {str(value(ours.fields[k]))[:120]} != {str(value(ref.fields[k]))[:120]}")
for k in sorted(set(ours.fields) - set(ref.fields) - SKIP - EXTRA_OK):
    if not k.startswith("GGUF."):
        bad.append(f"key {k} is not written by the converter")
rt = {t.name: t for t in ref.tensors}
ot = {t.name: t for t in ours.tensors}
for n in sorted(set(rt) | set(ot)):
    if n not in ot or n not in rt:
        bad.append(f"tensor {n} only in {'the converter' if n in rt else 'dlm'}'s file")
        continue
    a, b = ot[n], rt[n]
    if list(a.shape) != list(b.shape) or a.tensor_type != b.tensor_type:
        bad.append(f"tensor {n}: {list(a.shape)} {a.tensor_type.name} != {list(b.shape)} {b.tensor_type.name}")
    elif bytes(np.asarray(a.data).tobytes()) != bytes(np.asarray(b.data).tobytes()):
        bad.append(f"tensor {n}: bytes differ")
print(f"mm_compare {os.path.basename(sys.argv[2])}: {len(ok_keys)} keys, {len(rt)} tensors compared, {len(bad)} differences")
for b in bad:
    print("  " + b)
sys.exit(1 if bad else 0)
