#!/usr/bin/python3
"""dlm's int8 prefill (kern_matmul_infer, src/kern/qmm.c) vs llama.cpp's
own numerics: N rows of x rounded by llama.cpp (quantize_row_q8_K_ref /
quantize_row_q8_0_ref / _q8_1_ref in libggml-base.so), every (row of W,
row of x) dotted by ggml_vec_dot_<type>_q8_<K|0|1>_generic (plain C) on
weights made by llama.cpp's quantizers; dlm's outputs, through test_qmm's
tool mode, must match within r0304's tolerance (4e-6 of Σ|w·x|).

usage: qmm_llamacpp.py LIBDIR TEST_QMM
"""
import ctypes
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from qdot_llamacpp import TYPES, XFMT, ROW, VEC_DOT, cfn, dequant_x  # noqa: E402


def main():
    if len(sys.argv) != 3:
        sys.stderr.write(__doc__)
        return 2
    libdir, tool = sys.argv[1], sys.argv[2]
    base = ctypes.CDLL(os.path.join(libdir, "libggml-base.so"), mode=ctypes.RTLD_GLOBAL)
    cpu = ctypes.CDLL(os.path.join(libdir, "libggml-cpu-x64.so"))
    cpu.ggml_cpu_init()
    deq = {t: "dequantize_row_" + t.lower().replace("_k", "_K") for t in TYPES}
    rng = np.random.default_rng(20261205)
    fails = total = 0
    worst = 0.0
    isa = "?"
    with tempfile.TemporaryDirectory() as td:
        wpath, xpath, ypath = (os.path.join(td, n) for n in ("w.bin", "x.f32", "y.f32"))
        for t, (wq, bb, be, xfmt, vdot) in TYPES.items():
            for K, N in ([(96, 5), (1536, 9)] if be == 32 else [(256, 6), (2304, 9)]):
                rows = 37                       # not a multiple of the 32-row panel
                w = (rng.standard_normal((rows, K)) * 0.05).astype(np.float32)
                x = rng.standard_normal((N, K)).astype(np.float32)
                x[1, ::97] *= 60.0              # outliers
                x[2] *= 1e-6                    # tiny
                x[3, : min(K, 256)] = 0.0       # zero blocks
                wb = np.zeros(rows * (K // be) * bb, dtype=np.uint8)
                cfn(base, wq, ROW)(w.ctypes.data, wb.ctypes.data, rows * K)
                wb.tofile(wpath)
                x.tofile(xpath)
                r = subprocess.run([tool, "--tool", t, str(K), str(N), wpath, xpath, ypath], capture_output=True)
                total += 1
                if r.returncode != 0:
                    fails += 1
                    print(f"FAIL {t} K={K}: tool rc {r.returncode}: {r.stderr.decode()[:200]}")
                    continue
                isa = r.stdout.decode().strip()
                got = np.fromfile(ypath, dtype=np.float32).reshape(N, rows)
                xq_name, xbb, xbe = XFMT[xfmt]
                vd, dq = cfn(cpu, vdot, VEC_DOT), cfn(base, deq[t], ROW)
                row_b = K // be * bb
                wd = np.zeros((rows, K), dtype=np.float32)
                for o in range(rows):
                    dq(wb[o * row_b:].ctypes.data, wd[o].ctypes.data, K)
                bad = 0
                for n in range(N):
                    xn = np.ascontiguousarray(x[n])
                    xq = np.zeros(K // xbe * xbb, dtype=np.uint8)
                    cfn(base, xq_name, ROW)(xn.ctypes.data, xq.ctypes.data, K)
                    xd = dequant_x(xfmt, xq.tobytes(), K)
                    for o in range(rows):
                        s = ctypes.c_float(0.0)
                        wrow = wb[o * row_b:(o + 1) * row_b]
                        vd(K, ctypes.byref(s), 0, wrow.ctypes.data, 0, xq.ctypes.data, 0, 1)
                        mag = float(np.abs(wd[o].astype(np.float64) * xd).sum()) + 1e-30
                        err = abs(float(got[n, o]) - s.value) / mag
                        worst = max(worst, err)
                        if err > 4e-6:
                            bad += 1
                            if bad <= 2:
                                print(f"  {t} K={K} x row {n} w row {o}: dlm {got[n, o]:.9g} llama.cpp {s.value:.9g}")
                if bad:
                    fails += 1
                    print(f"MISMATCH {t} K={K} N={N}: {bad}/{rows * N} outputs off")
    print(f"r0430: {total - fails}/{total} cases match llama.cpp ({isa}; worst difference {worst:.2e} of Σ|w·x|)")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
