#!/usr/bin/python3
"""dlm's quantizers vs llama.cpp's own: calls quantize_row_*_ref and
dequantize_row_* in the libggml-base.so that the npm package
@node-llama-cpp/linux-x64 ships (pinned in tests/ref/package.json), through
ctypes, on the input patterns of quant_ref.py, and compares bytes / float
bits with dlm's test_quant tool mode.

usage: quant_llamacpp.py LIBGGML_BASE TOOL
"""
import ctypes
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import quant_ref  # noqa: E402  (patterns and block sizes)

FUNCS = {
    "Q8_0": ("quantize_row_q8_0_ref", "dequantize_row_q8_0"),
    "Q4_0": ("quantize_row_q4_0_ref", "dequantize_row_q4_0"),
    "Q5_0": ("quantize_row_q5_0_ref", "dequantize_row_q5_0"),
    "Q4_K": ("quantize_row_q4_K_ref", "dequantize_row_q4_K"),
    "Q5_K": ("quantize_row_q5_K_ref", "dequantize_row_q5_K"),
    "Q6_K": ("quantize_row_q6_K_ref", "dequantize_row_q6_K"),
    "F16": ("ggml_fp32_to_fp16_row", "ggml_fp16_to_fp32_row"),
    "BF16": ("ggml_fp32_to_bf16_row_ref", "ggml_bf16_to_fp32_row"),
}


def main():
    if len(sys.argv) != 3:
        sys.stderr.write(__doc__)
        return 2
    lib = ctypes.CDLL(sys.argv[1])
    tool = sys.argv[2]
    fails = total = 0
    with tempfile.TemporaryDirectory() as td:
        inp, outp, deq = (os.path.join(td, n) for n in ("in.f32", "out.bin", "deq.f32"))
        for name, x in quant_ref.lcg_patterns() + quant_ref.random_patterns():
            xa = np.ascontiguousarray(np.asarray(x, dtype=np.float32))
            xa.tofile(inp)
            n = xa.size
            for t, (qf, df) in FUNCS.items():
                be, bb = quant_ref.BLOCK[t]
                want = np.zeros(n // be * bb, dtype=np.uint8)
                q = getattr(lib, qf)
                q.restype = None
                q.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
                q(xa.ctypes.data, want.ctypes.data, n)
                r = subprocess.run([tool, "--quantize", t, inp, outp], capture_output=True)
                total += 1
                got = open(outp, "rb").read() if r.returncode == 0 else b""
                if got != want.tobytes():
                    fails += 1
                    print(f"MISMATCH quantize {t} pattern={name} (rc {r.returncode})")
                    continue
                wantf = np.zeros(n, dtype=np.float32)
                d = getattr(lib, df)
                d.restype = None
                d.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
                d(want.ctypes.data, wantf.ctypes.data, n)
                r = subprocess.run([tool, "--dequantize", t, outp, deq], capture_output=True)
                total += 1
                gotf = np.fromfile(deq, dtype=np.float32) if r.returncode == 0 else np.zeros(0, np.float32)
                if gotf.shape != wantf.shape or not np.array_equal(gotf.view(np.uint32), wantf.view(np.uint32)):
                    fails += 1
                    print(f"MISMATCH dequantize {t} pattern={name}")
    print(f"quant_llamacpp: {total - fails}/{total} comparisons identical to llama.cpp")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
