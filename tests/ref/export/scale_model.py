#!/usr/bin/python3
"""Rescale the weights of an F32 HF model folder made by make_model.py, in
place: projection matrices (q/k/v/o, gate/up/down) by PROJ, the embedding
and lm_head by EMB. numpy only; safetensors read and written from the format
spec (8-byte header length, JSON header, raw little-endian data).

make_model.py draws N(0, 0.2²) projections, a gain of ~3 per matmul at width
256: errors of a few ulps grow layer by layer, so two implementations that
round activations differently (llama.cpp's 8-bit activations for quantized
weights) drift far apart on such a model. Scaled to a gain near 1 and logits
of a few units, the model behaves like a trained one, and the export checks
compare like with like.

usage: scale_model.py DIR PROJ EMB"""
import json
import os
import struct
import sys

import numpy as np


def main():
    d, proj, emb = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
    for fn in sorted(os.listdir(d)):
        if not fn.endswith(".safetensors"):
            continue
        p = os.path.join(d, fn)
        raw = open(p, "rb").read()
        (n,) = struct.unpack("<Q", raw[:8])
        hdr = json.loads(raw[8:8 + n])
        data = bytearray(raw[8 + n:])
        for name, t in hdr.items():
            if name == "__metadata__":
                continue
            if t["dtype"] != "F32":
                sys.exit(f"{name}: only F32 models can be rescaled")
            if name.endswith("proj.weight"):
                s = proj
            elif name in ("model.embed_tokens.weight", "lm_head.weight"):
                s = emb
            else:
                continue
            a, b = t["data_offsets"]
            x = np.frombuffer(bytes(data[a:b]), dtype="<f4") * np.float32(s)
            data[a:b] = x.astype("<f4").tobytes()
        with open(p, "wb") as f:
            f.write(raw[:8 + n])
            f.write(bytes(data))


if __name__ == "__main__":
    main()
