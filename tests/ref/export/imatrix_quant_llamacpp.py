#!/usr/bin/python3
"""dlm's importance-weighted quantizers vs llama.cpp's ggml_quantize_chunk.

ggml_quantize_chunk(type, src, dst, start, nrows, n_per_row, imatrix) of the
libggml-base.so in the npm package @node-llama-cpp/linux-x64 (pinned in
tests/ref/package.json), called through ctypes, is what llama-quantize runs
for every tensor; given an imatrix it takes quantize_row_*_impl with
quant_weights. dlm's kern_quant_row_w (through `test_imatrix --quantize`)
must give the same bytes for every type llama.cpp weights (Q4_0 Q4_1 Q5_0
Q5_1 Q4_K Q5_K Q6_K) and for Q8_0 (which ignores it), on several weight
patterns, with several importance vectors (random, with zero columns, one
dominant column, constant) and without one.

usage: imatrix_quant_llamacpp.py LIBGGML_BASE TEST_IMATRIX TMP"""
import ctypes
import os
import subprocess
import sys

import numpy as np

TYPES = {"Q4_0": 2, "Q4_1": 3, "Q5_0": 6, "Q5_1": 7, "Q8_0": 8, "Q4_K": 12, "Q5_K": 13, "Q6_K": 14}


def main():
    lib_path, tool, tmp = sys.argv[1:4]
    lib = ctypes.CDLL(lib_path)
    qc = lib.ggml_quantize_chunk
    qc.restype = ctypes.c_size_t
    qc.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                   ctypes.c_void_p]
    rng = np.random.RandomState(11)
    npr = 512
    rows = 6
    weights = {
        "gauss": rng.standard_normal((rows, npr)),
        "heavy": rng.standard_t(2, (rows, npr)),
        "skewed": rng.uniform(-1, 5, (rows, npr)),
        "sparse": np.where(rng.uniform(size=(rows, npr)) < 0.9, 0.0, rng.standard_normal((rows, npr))),
        "tiny": rng.standard_normal((rows, npr)) * 1e-5,
        "zeros": np.zeros((rows, npr)),
    }
    qws = {
        "none": None,
        "random": rng.gamma(0.6, 2.0, npr),
        "zero-cols": np.where(np.arange(npr) % 5 == 0, 0.0, rng.uniform(0.1, 3, npr)),
        "dominant": np.where(np.arange(npr) == 77, 1e4, 1e-3),
        "ones": np.ones(npr),
    }
    fails, ok = [], 0
    for wname, w in weights.items():
        x = np.ascontiguousarray(w, dtype=np.float32)
        xp = os.path.join(tmp, "x.f32")
        x.tofile(xp)
        for qname, qw in qws.items():
            qarr = None if qw is None else np.ascontiguousarray(qw, dtype=np.float32)
            qp = os.path.join(tmp, "qw.f32")
            if qarr is not None:
                qarr.tofile(qp)
            out = os.path.join(tmp, "q")
            args = [tool, "--quantize", ",".join(TYPES), str(npr), xp, out] + ([] if qarr is None else [qp])
            r = subprocess.run(args, capture_output=True, text=True)
            if r.returncode:
                fails.append(f"{wname} {qname}: tool failed {r.returncode} {r.stderr.strip()}")
                continue
            for tname, tid in TYPES.items():
                want = np.zeros(rows * npr * 2, dtype=np.uint8)
                n = qc(tid, x.ctypes.data, want.ctypes.data, 0, rows, npr, None if qarr is None else qarr.ctypes.data)
                got = open(out + "." + tname, "rb").read()
                if got != want[:n].tobytes():
                    bb = {2: 18, 3: 20, 6: 22, 7: 24, 8: 34, 12: 144, 13: 176, 14: 210}[tid]
                    first = next((i for i in range(min(len(got), n)) if got[i] != want[i]), None)
                    fails.append(f"{tname} {wname} imatrix={qname}: {len(got)} vs {n} bytes, first difference in "
                                 f"block {None if first is None else first // bb}")
                else:
                    ok += 1
    total = len(weights) * len(qws) * len(TYPES)
    for f in fails[:20]:
        print("FAIL", f)
    print(f"{ok}/{total} (type, weights, imatrix) cases byte-identical to ggml_quantize_chunk")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
