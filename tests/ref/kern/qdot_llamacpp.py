#!/usr/bin/python3
"""dlm's integer decode dots vs llama.cpp's own: the activation rounding
(quantize_row_q8_K_ref / quantize_row_q8_0_ref in libggml-base.so) byte for
byte, and the dot products (ggml_vec_dot_<type>_q8_<K|0>_generic in
libggml-cpu-x64.so: plain C, any x86-64) against dlm's AVX512-VNNI kernels
through test_qdot's tool mode. Weights are made by llama.cpp's own
quantizers, so nothing here comes from dlm but the answers.

usage: qdot_llamacpp.py LIBDIR TEST_QDOT
"""
import ctypes
import os
import subprocess
import sys
import tempfile

import numpy as np

# type: (weight quantizer, bytes per 32/256 block, block elems, x format, vec_dot)
TYPES = {
    "Q8_0": ("quantize_row_q8_0_ref", 34, 32, "q8_0", "ggml_vec_dot_q8_0_q8_0_generic"),
    "Q4_0": ("quantize_row_q4_0_ref", 18, 32, "q8_0", "ggml_vec_dot_q4_0_q8_0_generic"),
    "Q5_0": ("quantize_row_q5_0_ref", 22, 32, "q8_0", "ggml_vec_dot_q5_0_q8_0_generic"),
    "Q4_1": ("quantize_row_q4_1_ref", 20, 32, "q8_1", "ggml_vec_dot_q4_1_q8_1_generic"),
    "Q5_1": ("quantize_row_q5_1_ref", 24, 32, "q8_1", "ggml_vec_dot_q5_1_q8_1_generic"),
    "Q4_K": ("quantize_row_q4_K_ref", 144, 256, "q8_K", "ggml_vec_dot_q4_K_q8_K_generic"),
    "Q5_K": ("quantize_row_q5_K_ref", 176, 256, "q8_K", "ggml_vec_dot_q5_K_q8_K_generic"),
    "Q6_K": ("quantize_row_q6_K_ref", 210, 256, "q8_K", "ggml_vec_dot_q6_K_q8_K_generic"),
}
XFMT = {"q8_0": ("quantize_row_q8_0_ref", 34, 32), "q8_1": ("quantize_row_q8_1_ref", 36, 32),
        "q8_K": ("quantize_row_q8_K_ref", 292, 256)}


def dequant_x(fmt, raw, K):
    """x as llama.cpp's block format means it: d · qs per element."""
    _, bb, be = XFMT[fmt]
    out = np.zeros(K)
    for b in range(K // be):
        blk = raw[b * bb:(b + 1) * bb]
        if fmt in ("q8_0", "q8_1"):
            d = float(np.frombuffer(blk[:2], dtype=np.float16)[0])
            qs = np.frombuffer(blk[bb - 32:bb], dtype=np.int8)
        else:
            d = float(np.frombuffer(blk[:4], dtype=np.float32)[0])
            qs = np.frombuffer(blk[4:260], dtype=np.int8)
        out[b * be:(b + 1) * be] = d * qs.astype(np.float64)
    return out


ROW = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
VEC_DOT = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t,
           ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]


def cfn(lib, name, argtypes):
    """A C function of lib with its prototype (void result)."""
    f = getattr(lib, name)
    f.restype = None
    f.argtypes = argtypes
    return f


def main():
    if len(sys.argv) != 3:
        sys.stderr.write(__doc__)
        return 2
    libdir, tool = sys.argv[1], sys.argv[2]
    base = ctypes.CDLL(os.path.join(libdir, "libggml-base.so"), mode=ctypes.RTLD_GLOBAL)
    cpu = ctypes.CDLL(os.path.join(libdir, "libggml-cpu-x64.so"))
    cpu.ggml_cpu_init()         # fills the fp16 table the baseline build converts with
    deq = {t: "dequantize_row_" + t.lower().replace("_k", "_K") for t in TYPES}
    rng = np.random.default_rng(20261201)
    fails = total = 0
    worst = 0.0
    with tempfile.TemporaryDirectory() as td:
        wpath, xpath, qpath, ypath = (os.path.join(td, n) for n in ("w.bin", "x.f32", "xq.bin", "y.f32"))
        for t, (wq, bb, be, xfmt, vdot) in TYPES.items():
            for K in ([32, 96, 224, 576, 896, 1536] if be == 32 else [256, 1536, 4864]):
                for pattern in ("normal", "outliers", "tiny", "zeros"):
                    rows = 24
                    w = (rng.standard_normal((rows, K)) * 0.05).astype(np.float32)
                    x = rng.standard_normal(K).astype(np.float32)
                    if pattern == "outliers":
                        x[::97] *= 60.0
                    elif pattern == "tiny":
                        x *= 1e-6
                    elif pattern == "zeros":
                        x[: min(K, 256)] = 0.0
                    wb = np.zeros(rows * (K // be) * bb, dtype=np.uint8)
                    cfn(base, wq, ROW)(w.ctypes.data, wb.ctypes.data, rows * K)
                    wb.tofile(wpath)
                    x.tofile(xpath)
                    # llama.cpp's rounding of x
                    xq_name, xbb, xbe = XFMT[xfmt]
                    xq = np.zeros(K // xbe * xbb, dtype=np.uint8)
                    cfn(base, xq_name, ROW)(x.ctypes.data, xq.ctypes.data, K)
                    r = subprocess.run([tool, "--tool", t, str(K), wpath, xpath, qpath, ypath], capture_output=True)
                    total += 1
                    if r.returncode != 0:
                        fails += 1
                        print(f"FAIL {t} K={K} {pattern}: tool rc {r.returncode}: {r.stderr.decode()[:200]}")
                        continue
                    got_q = open(qpath, "rb").read()
                    if got_q != xq.tobytes():
                        fails += 1
                        print(f"MISMATCH {t} K={K} {pattern}: int8 x differs from {xq_name}")
                        continue
                    got_y = np.fromfile(ypath, dtype=np.float32)
                    vd, dq = cfn(cpu, vdot, VEC_DOT), cfn(base, deq[t], ROW)
                    xd = dequant_x(xfmt, xq.tobytes(), K)
                    row_b = K // be * bb
                    bad = 0
                    for o in range(rows):
                        s = ctypes.c_float(0.0)
                        wrow = wb[o * row_b:(o + 1) * row_b]
                        vd(K, ctypes.byref(s), 0, wrow.ctypes.data, 0, xq.ctypes.data, 0, 1)
                        wd = np.zeros(K, dtype=np.float32)
                        dq(wrow.ctypes.data, wd.ctypes.data, K)
                        mag = float(np.abs(wd.astype(np.float64) * xd).sum()) + 1e-30
                        err = abs(float(got_y[o]) - s.value) / mag
                        worst = max(worst, err)
                        if err > 4e-6:
                            bad += 1
                            if bad <= 2:
                                print(f"  {t} K={K} {pattern} row {o}: dlm {got_y[o]:.9g} llama.cpp {s.value:.9g} (Σ|w·x| {mag:.3g})")
                    if bad:
                        fails += 1
                        print(f"MISMATCH {t} K={K} {pattern}: {bad}/{rows} dots off")
    print(f"r0304: {total - fails}/{total} cases match llama.cpp (int8 x byte-identical; "
          f"worst dot difference {worst:.2e} of Σ|w·x|)")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
