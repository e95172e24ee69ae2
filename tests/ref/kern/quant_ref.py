#!/usr/bin/python3
"""Independent reference for dlm's quantizers (docs/reference/formats.md §4.3, §6.3).

Written from the algorithm description of llama.cpp's quantize_row_*_ref
(Q8_0, Q4_0, Q5_0, Q4_K, Q5_K, Q6_K) and dequantize_row_*, in numpy float32
scalar arithmetic: every operation is an explicit float32 op in the order
the description gives (no fused multiply-add, no pairwise sums), so the
bytes must match dlm's C bit for bit.

usage:
  quant_ref.py check TOOL     run TOOL --quantize/--dequantize on many input
                              patterns and compare bytes and floats exactly
  quant_ref.py hashes         sha256 of the expected bytes of the closed-form
                              patterns embedded in tests/unit/test_quant.c
"""
import hashlib
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np

F = np.float32
QK_K = 256
TYPES = ["Q8_0", "Q4_0", "Q5_0", "Q4_K", "Q5_K", "Q6_K", "F16", "BF16"]
BLOCK = {"Q8_0": (32, 34), "Q4_0": (32, 18), "Q5_0": (32, 22), "Q4_K": (256, 144),
         "Q5_K": (256, 176), "Q6_K": (256, 210), "F16": (1, 2), "BF16": (1, 2)}

np.seterr(all="ignore")


def f16_bits(x):
    """IEEE binary16 round-to-nearest-even (numpy's own conversion)."""
    return int(np.array([F(x)], dtype=np.float32).astype(np.float16).view(np.uint16)[0])


def f16_val(h):
    return F(np.array([h], dtype=np.uint16).view(np.float16).astype(np.float32)[0])


def bf16_bits(x):
    u = int(np.array([F(x)], dtype=np.float32).view(np.uint32)[0])
    if (u & 0x7FFFFFFF) > 0x7F800000:
        return (u >> 16) | 64
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF


def nearest_int(f):
    """ggml's trick: add 1.5*2^23 in float32, read the low mantissa bits."""
    val = F(f) + F(12582912.0)
    i = int(np.array([val], dtype=np.float32).view(np.int32)[0])
    return (i & 0x007FFFFF) - 0x00400000


def roundf(f):
    """C roundf: halves away from zero (done in double, exact for floats)."""
    d = float(f)
    r = np.floor(abs(d) + 0.5)
    return -r if d < 0 else r


def trunc_i8(f):
    """(int8_t) of a float in range: truncation toward zero."""
    return int(float(f))


def clamp(v, lo, hi):
    return lo if v < lo else hi if v > hi else v


# ---- Q8_0 / Q4_0 / Q5_0 -----------------------------------------------------------

def q8_0(x):
    out = bytearray()
    for b in range(0, len(x), 32):
        xb = x[b:b + 32]
        amax = F(0)
        for v in xb:
            a = F(abs(v))
            amax = amax if amax > a else a
        d = amax / F(127)
        idv = F(1) / d if d != 0 else F(0)
        out += struct.pack("<H", f16_bits(d))
        out += bytes((int(roundf(F(v) * idv)) & 0xFF) for v in xb)
    return bytes(out)


def signed_max(xb):
    amax, mx = F(0), F(0)
    for v in xb:
        if amax < F(abs(v)):
            amax, mx = F(abs(v)), F(v)
    return mx


def q4_0(x):
    out = bytearray()
    for b in range(0, len(x), 32):
        xb = x[b:b + 32]
        d = signed_max(xb) / F(-8)
        idv = F(1) / d if d != 0 else F(0)
        out += struct.pack("<H", f16_bits(d))
        for j in range(16):
            xi0 = min(15, trunc_i8(F(xb[j]) * idv + F(8.5)))
            xi1 = min(15, trunc_i8(F(xb[16 + j]) * idv + F(8.5)))
            out.append(((xi0 & 0xFF) | (xi1 << 4)) & 0xFF)
    return bytes(out)


def q5_0(x):
    out = bytearray()
    for b in range(0, len(x), 32):
        xb = x[b:b + 32]
        d = signed_max(xb) / F(-16)
        idv = F(1) / d if d != 0 else F(0)
        qh, qs = 0, bytearray()
        for j in range(16):
            xi0 = min(31, trunc_i8(F(xb[j]) * idv + F(16.5))) & 0xFF
            xi1 = min(31, trunc_i8(F(xb[16 + j]) * idv + F(16.5))) & 0xFF
            qs.append((xi0 & 0x0F) | ((xi1 & 0x0F) << 4))
            qh |= ((xi0 & 0x10) >> 4) << j
            qh |= ((xi1 & 0x10) >> 4) << (j + 16)
        out += struct.pack("<HI", f16_bits(d), qh) + qs
    return bytes(out)


# ---- K-quants ---------------------------------------------------------------------

def make_qkx2_quants(n, nmax, x, w, rmin, rdelta, nstep):
    """Returns (scale, the_min, L)."""
    mn, mx = F(x[0]), F(x[0])
    sum_w = F(w[0])
    sum_x = sum_w * F(x[0])
    for i in range(1, n):
        if x[i] < mn:
            mn = F(x[i])
        if x[i] > mx:
            mx = F(x[i])
        sum_w = sum_w + F(w[i])
        sum_x = sum_x + F(w[i]) * F(x[i])
    if mn > 0:
        mn = F(0)
    if mx == mn:
        return F(0), -mn, [0] * n
    iscale = F(nmax) / (mx - mn)
    scale = F(1) / iscale
    best_error = F(0)
    L = [0] * n
    for i in range(n):
        L[i] = clamp(nearest_int(iscale * (F(x[i]) - mn)), 0, nmax)
        diff = scale * F(L[i]) + mn - F(x[i])
        best_error = best_error + F(w[i]) * (diff * diff)
    for st in range(nstep + 1):
        iscale = (F(rmin) + F(rdelta) * F(st) + F(nmax)) / (mx - mn)
        sum_l = sum_l2 = sum_xl = F(0)
        laux = [0] * n
        for i in range(n):
            l = clamp(nearest_int(iscale * (F(x[i]) - mn)), 0, nmax)
            laux[i] = l
            wl = F(w[i]) * F(l)
            sum_l = sum_l + wl
            sum_l2 = sum_l2 + wl * F(l)
            sum_xl = sum_xl + wl * F(x[i])
        D = sum_w * sum_l2 - sum_l * sum_l
        if D > 0:
            this_scale = (sum_w * sum_xl - sum_x * sum_l) / D
            this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D
            if this_min > 0:
                this_min = F(0)
                this_scale = sum_xl / sum_l2
            cur_error = F(0)
            for i in range(n):
                diff = this_scale * F(laux[i]) + this_min - F(x[i])
                cur_error = cur_error + F(w[i]) * (diff * diff)
            if cur_error < best_error:
                L = laux
                best_error = cur_error
                scale = this_scale
                mn = this_min
    return scale, -mn, L


def get_scale_min_k4(j, s):
    if j < 4:
        return s[j] & 63, s[j + 4] & 63
    return (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4), (s[j + 4] >> 4) | ((s[j] >> 6) << 4)


def kx_block(x, nmax, rmin, nstep):
    """Shared Q4_K/Q5_K body: returns (d bits, dmin bits, scales12, L)."""
    L = [0] * 256
    scales, mins = [F(0)] * 8, [F(0)] * 8
    max_scale = max_min = F(0)
    for j in range(8):
        xs = x[32 * j:32 * j + 32]
        sum_x2 = F(0)
        for v in xs:
            sum_x2 = sum_x2 + F(v) * F(v)
        av_x = F(np.sqrt(sum_x2 / F(32)))
        w = [av_x + F(abs(v)) for v in xs]
        sc, mi, Lj = make_qkx2_quants(32, nmax, xs, w, rmin, 0.1, nstep)
        scales[j], mins[j] = sc, mi
        L[32 * j:32 * j + 32] = Lj
        if sc > max_scale:
            max_scale = sc
        if mi > max_min:
            max_min = mi
    inv_scale = F(63) / max_scale if max_scale > 0 else F(0)
    inv_min = F(63) / max_min if max_min > 0 else F(0)
    s = [0] * 12
    for j in range(8):
        ls = min(63, nearest_int(inv_scale * scales[j]) & 0xFF)
        lm = min(63, nearest_int(inv_min * mins[j]) & 0xFF)
        if j < 4:
            s[j], s[j + 4] = ls, lm
        else:
            s[j + 4] = (ls & 0xF) | ((lm & 0xF) << 4)
            s[j - 4] |= (ls >> 4) << 6
            s[j] |= (lm >> 4) << 6
    dh, dmh = f16_bits(max_scale / F(63)), f16_bits(max_min / F(63))
    for j in range(8):
        sc, m = get_scale_min_k4(j, s)
        d = f16_val(dh) * F(sc)
        if d == 0:
            continue
        dm = f16_val(dmh) * F(m)
        for ii in range(32):
            L[32 * j + ii] = clamp(nearest_int((F(x[32 * j + ii]) + dm) / d), 0, nmax)
    return dh, dmh, bytes(s), L


def q4_k(x):
    out = bytearray()
    for b in range(0, len(x), 256):
        dh, dmh, s, L = kx_block(x[b:b + 256], 15, -1.0, 20)
        qs = bytearray()
        for j in range(0, 256, 64):
            qs += bytes(L[j + l] | (L[j + l + 32] << 4) for l in range(32))
        out += struct.pack("<HH", dh, dmh) + s + qs
    return bytes(out)


def q5_k(x):
    out = bytearray()
    for b in range(0, len(x), 256):
        dh, dmh, s, L = kx_block(x[b:b + 256], 31, -0.5, 15)
        qh, ql = [0] * 32, bytearray()
        m1, m2 = 1, 2
        for n in range(0, 256, 64):
            for j in range(32):
                l1, l2 = L[n + j], L[n + j + 32]
                if l1 > 15:
                    l1 -= 16
                    qh[j] |= m1
                if l2 > 15:
                    l2 -= 16
                    qh[j] |= m2
                ql.append(l1 | (l2 << 4))
            m1 <<= 2
            m2 <<= 2
        out += struct.pack("<HH", dh, dmh) + s + bytes(qh) + ql
    return bytes(out)


def make_qx_quants(n, nmax, x):
    """rmse_type 1 (weights x²), no quant weights. Returns (scale, L)."""
    mx = amax = F(0)
    for v in x:
        ax = F(abs(v))
        if ax > amax:
            amax, mx = ax, F(v)
    if amax < F(1e-15):
        return F(0), [0] * n
    iscale = F(-nmax) / mx
    sumlx = suml2 = F(0)
    L = [0] * n
    for i in range(n):
        l = clamp(nearest_int(iscale * F(x[i])), -nmax, nmax - 1)
        L[i] = l + nmax
        w = F(x[i]) * F(x[i])
        sumlx = sumlx + w * F(x[i]) * F(l)
        suml2 = suml2 + w * F(l) * F(l)
    scale = sumlx / suml2 if suml2 != 0 else F(0)
    best = scale * sumlx
    for st in range(-9, 10):
        if st == 0:
            continue
        iscale = -(F(nmax) + F(0.1) * F(st)) / mx
        sumlx = suml2 = F(0)
        for i in range(n):
            l = clamp(nearest_int(iscale * F(x[i])), -nmax, nmax - 1)
            w = F(x[i]) * F(x[i])
            sumlx = sumlx + w * F(x[i]) * F(l)
            suml2 = suml2 + w * F(l) * F(l)
        if suml2 > 0 and sumlx * sumlx > best * suml2:
            for i in range(n):
                L[i] = nmax + clamp(nearest_int(iscale * F(x[i])), -nmax, nmax - 1)
            scale = sumlx / suml2
            best = scale * sumlx
    return scale, L


def q6_k(x):
    out = bytearray()
    for b in range(0, len(x), 256):
        xb = x[b:b + 256]
        L = [0] * 256
        scales = [F(0)] * 16
        max_scale = max_abs = F(0)
        for ib in range(16):
            sc, Lb = make_qx_quants(16, 32, xb[16 * ib:16 * ib + 16])
            scales[ib] = sc
            L[16 * ib:16 * ib + 16] = Lb
            if F(abs(sc)) > max_abs:
                max_abs, max_scale = F(abs(sc)), sc
        if max_abs < F(1e-15):
            out += bytes(210)
            continue
        iscale = F(-128) / max_scale
        dh = f16_bits(F(1) / iscale)
        sc8 = [min(127, nearest_int(iscale * scales[ib])) for ib in range(16)]
        for j in range(16):
            d = f16_val(dh) * F(sc8[j])
            if d == 0:
                continue
            for ii in range(16):
                L[16 * j + ii] = clamp(nearest_int(F(xb[16 * j + ii]) / d), -32, 31) + 32
        ql, qh = bytearray(128), bytearray(64)
        for half in range(2):
            j = 128 * half
            for l in range(32):
                q1, q2, q3, q4 = L[j + l] & 0xF, L[j + l + 32] & 0xF, L[j + l + 64] & 0xF, L[j + l + 96] & 0xF
                ql[64 * half + l] = q1 | (q3 << 4)
                ql[64 * half + l + 32] = q2 | (q4 << 4)
                qh[32 * half + l] = ((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) |
                                     ((L[j + l + 64] >> 4) << 4) | ((L[j + l + 96] >> 4) << 6))
        out += ql + qh + bytes(v & 0xFF for v in sc8) + struct.pack("<H", dh)
    return bytes(out)


def quantize(t, x):
    x = [F(v) for v in np.asarray(x, dtype=np.float32)]
    if t == "F16":
        return b"".join(struct.pack("<H", f16_bits(v)) for v in x)
    if t == "BF16":
        return b"".join(struct.pack("<H", bf16_bits(v)) for v in x)
    return {"Q8_0": q8_0, "Q4_0": q4_0, "Q5_0": q5_0, "Q4_K": q4_k, "Q5_K": q5_k, "Q6_K": q6_k}[t](x)


# ---- dequantization (ggml's dequantize_row_*) --------------------------------------------

def dequantize(t, data):
    y = []
    if t == "F16":
        return [f16_val(struct.unpack_from("<H", data, i)[0]) for i in range(0, len(data), 2)]
    if t == "BF16":
        return [F(np.array([struct.unpack_from("<H", data, i)[0] << 16], dtype=np.uint32).view(np.float32)[0])
                for i in range(0, len(data), 2)]
    be, bb = BLOCK[t]
    for off in range(0, len(data), bb):
        b = data[off:off + bb]
        if t == "Q8_0":
            d = f16_val(struct.unpack_from("<H", b)[0])
            y += [F(struct.unpack_from("b", b, 2 + j)[0]) * d for j in range(32)]
        elif t == "Q4_0":
            d = f16_val(struct.unpack_from("<H", b)[0])
            lo = [F((b[2 + j] & 0xF) - 8) * d for j in range(16)]
            hi = [F((b[2 + j] >> 4) - 8) * d for j in range(16)]
            y += lo + hi
        elif t == "Q5_0":
            d = f16_val(struct.unpack_from("<H", b)[0])
            qh = struct.unpack_from("<I", b, 2)[0]
            lo = [F(((b[6 + j] & 0xF) | (((qh >> j) & 1) << 4)) - 16) * d for j in range(16)]
            hi = [F(((b[6 + j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - 16) * d for j in range(16)]
            y += lo + hi
        elif t in ("Q4_K", "Q5_K"):
            d, mn = f16_val(struct.unpack_from("<H", b)[0]), f16_val(struct.unpack_from("<H", b, 2)[0])
            s = b[4:16]
            qh = b[16:48] if t == "Q5_K" else None
            q = b[48:176] if t == "Q5_K" else b[16:144]
            for c in range(4):
                sc1, m1 = get_scale_min_k4(2 * c, s)
                sc2, m2 = get_scale_min_k4(2 * c + 1, s)
                d1, mm1, d2, mm2 = d * F(sc1), mn * F(m1), d * F(sc2), mn * F(m2)
                for l in range(32):
                    v = q[32 * c + l] & 0xF
                    if qh is not None and qh[l] & (1 << (2 * c)):
                        v += 16
                    y.append(d1 * F(v) - mm1)
                for l in range(32):
                    v = q[32 * c + l] >> 4
                    if qh is not None and qh[l] & (2 << (2 * c)):
                        v += 16
                    y.append(d2 * F(v) - mm2)
        elif t == "Q6_K":
            d = f16_val(struct.unpack_from("<H", b, 208)[0])
            out = [F(0)] * 256
            for half in range(2):
                ql, qh = b[64 * half:64 * half + 64], b[128 + 32 * half:128 + 32 * half + 32]
                sc = [struct.unpack_from("b", b, 192 + 8 * half + i)[0] for i in range(8)]
                for l in range(32):
                    isc = l // 16
                    q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32
                    q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32
                    q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32
                    q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32
                    base = 128 * half
                    out[base + l] = d * F(sc[isc]) * F(q1)
                    out[base + l + 32] = d * F(sc[isc + 2]) * F(q2)
                    out[base + l + 64] = d * F(sc[isc + 4]) * F(q3)
                    out[base + l + 96] = d * F(sc[isc + 6]) * F(q4)
            y += out
    return y


# ---- input patterns ------------------------------------------------------------------------

def lcg_patterns():
    """The closed-form patterns of tests/unit/test_quant.c (exact float32
    values from integer arithmetic, so C and Python build the same input)."""
    M64 = (1 << 64) - 1
    s = 12345

    def nxt():
        nonlocal s
        s = (s * 6364136223846793005 + 1442695040888963407) & M64
        return s

    n = 512
    uni = [F((int(nxt() >> 40) - (1 << 23)) / F(1 << 22)) for _ in range(n)]
    gau = []
    for _ in range(n):
        v = sum(int(nxt() >> 42) for _ in range(4)) - 2 * (1 << 22)
        gau.append(F(F(v) / F(1 << 22)))
    out = [F(F(v) * F(0.01)) for v in gau]
    out[7] = F(50.0)
    out[300] = F(-31.5)
    tiny = [F(F(v) * F(1e-6)) for v in gau]
    mixed = [F((1 if i % 2 else -1) * (i % 17) / 8.0) for i in range(n)]
    return [("uniform", uni), ("gauss", gau), ("zeros", [F(0)] * n), ("const", [F(0.3)] * n),
            ("outlier", out), ("tiny", tiny), ("mixed", mixed)]


def random_patterns():
    rng = np.random.default_rng(20240611)
    n = 512
    pats = [
        ("normal", rng.standard_normal(n)),
        ("normal_0.02", rng.standard_normal(n) * 0.02),
        ("const_neg", np.full(n, -1.7)),
        ("outlier_normal", np.concatenate([rng.standard_normal(100) * 0.01, [25.0], rng.standard_normal(n - 101) * 0.01])),
        ("tiny_normal", rng.standard_normal(n) * 1e-7),
        ("subnormal_scale", rng.standard_normal(n) * 1e-30),
        ("mixed_exp", np.where(np.arange(n) % 2 == 0, 1, -1) * np.exp(rng.standard_normal(n) * 2)),
        ("uniform", rng.uniform(-1, 1, n)),
        ("integers", rng.integers(-8, 8, n).astype(np.float64)),
        ("large", rng.standard_normal(n) * 1000),
        ("half_blocks_zero", np.concatenate([np.zeros(128), rng.standard_normal(128), np.zeros(256)])),
        ("positive_only", np.abs(rng.standard_normal(n))),
        ("negative_only", -np.abs(rng.standard_normal(n))),
        ("ties", np.round(rng.standard_normal(n) * 4) / 4),
    ]
    return [(name, [F(v) for v in np.asarray(x, dtype=np.float32)]) for name, x in pats]


def run_tool(tool, args):
    r = subprocess.run([tool] + args, capture_output=True)
    if r.returncode != 0:
        sys.stderr.write(r.stdout.decode() + r.stderr.decode())
        raise SystemExit(f"tool failed: {tool} {' '.join(args)}")


def check(tool):
    fails = total = 0
    with tempfile.TemporaryDirectory() as td:
        inp, outp, deq = os.path.join(td, "in.f32"), os.path.join(td, "out.bin"), os.path.join(td, "deq.f32")
        for name, x in lcg_patterns() + random_patterns():
            np.asarray(x, dtype=np.float32).tofile(inp)
            for t in TYPES:
                total += 1
                want = quantize(t, x)
                run_tool(tool, ["--quantize", t, inp, outp])
                got = open(outp, "rb").read()
                if got != want:
                    fails += 1
                    be, bb = BLOCK[t]
                    first = next(i for i in range(min(len(got), len(want))) if got[i] != want[i]) \
                        if len(got) == len(want) else -1
                    print(f"MISMATCH {t} pattern={name}: {len(got)} vs {len(want)} bytes, first diff at byte "
                          f"{first} (block {first // bb if first >= 0 else '?'})")
                    continue
                # dequantize the same bytes on both sides: floats must match bit for bit
                total += 1
                run_tool(tool, ["--dequantize", t, outp, deq])
                gotf = np.fromfile(deq, dtype=np.float32)
                wantf = np.asarray(dequantize(t, want), dtype=np.float32)
                if gotf.shape != wantf.shape or not np.array_equal(gotf.view(np.uint32), wantf.view(np.uint32)):
                    fails += 1
                    print(f"MISMATCH dequant {t} pattern={name}")
    print(f"quant_ref: {total - fails}/{total} comparisons identical")
    return 1 if fails else 0


def hashes():
    for name, x in lcg_patterns():
        line = []
        for t in TYPES:
            line.append(f'"{hashlib.sha256(quantize(t, x)).hexdigest()}"')
        print(f"    {{\"{name}\", {{{', '.join(line)}}}}},")


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "check":
        sys.exit(check(sys.argv[2]))
    if len(sys.argv) == 2 and sys.argv[1] == "hashes":
        hashes()
        sys.exit(0)
    sys.stderr.write(__doc__)
    sys.exit(2)
