#!/usr/bin/env python3
"""An independent reference of 8-bit AdamW with block-wise dynamic
quantization, written from Dettmers et al., "8-bit Optimizers via Block-wise
Quantization" (ICLR 2022, arXiv 2110.02861) and the bitsandbytes
documentation of Adam8bit (min_8bit_size = 4096), not from dlm's code.

  python3 adamw8_ref.py DIR

writes DIR/*.bin (raw little-endian arrays) and DIR/meta.txt; dlm's
`test_adamw8 --ref DIR` runs its kernels on the same inputs and compares
(tests/ref/r0406-adamw8-ref.sh).

From the paper ("Background" and "8-bit optimizers"):
  * dynamic tree quantization: a sign bit (signed map only), a run of zero
    bits giving the decimal exponent (10^0 .. 10^-6), an indicator bit,
    then linear fraction bits; with 8 bits and up to 7 exponent bits the
    fraction of exponent e has (signed) 2^e or (unsigned: the sign bit is a
    fraction bit too) 2^(e+1) intervals of [0.1, 1]; a code is the middle of
    its interval.  0 and 1 complete the 256 values.
  * block-wise quantization: blocks of B = 2048 values, N_b = max|T_b|,
    each value stored as argmin_j |Q_j - T/N_b| (the nearest code).
  * 8-bit optimizer: dequantize the state, do the 32-bit update, quantize the
    new state; the first Adam state uses the signed map, the second the
    unsigned one.
  * the update itself is bitsandbytes' Adam form:
      p += -lr*sqrt(1-b2^t)/(1-b1^t) * m / (sqrt(v) + eps*sqrt(1-b2^t))
    followed by decoupled weight decay p *= 1 - lr*wd.
"""
import os
import sys

import numpy as np

F = np.float32
BLOCK = 2048


def dynamic_map(signed):
    vals = [0.0, 1.0]
    for e in range(7):                       # exponent 10^(e-6)
        n = 2 ** e if signed else 2 ** (e + 1)
        scale = [1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0][e]
        for k in range(n):
            a = 0.1 + 0.9 * k / n
            b = 0.1 + 0.9 * (k + 1) / n
            mid = (a + b) / 2.0 * scale
            vals.append(mid)
            if signed:
                vals.append(-mid)
    assert len(vals) == 256
    return np.array(sorted(np.float32(v) for v in vals), dtype=F)


def bnb_torch_map(signed):
    """bitsandbytes' construction as its docs show it: torch.linspace in f32."""
    import torch
    data = []
    for i in range(7):
        items = 2 ** i + 1 if signed else 2 ** (i + 1) + 1
        b = torch.linspace(0.1, 1, items)
        means = (b[:-1] + b[1:]) / 2.0
        data += (10 ** (-6 + i) * means).tolist()
        if signed:
            data += (-10 ** (-6 + i) * means).tolist()
    data += [0, 1.0]
    return np.array(sorted(data), dtype=F)


def encode(x, qmap, signed):
    """nearest code to each x (x already divided by absmax); the first of
    equal distances; the first moment keeps its sign (a negative value that
    lands on 0 takes the next code below, as bitsandbytes' kernel does)."""
    d = np.abs(x.astype(np.float64)[:, None] - qmap.astype(np.float64)[None, :])
    c = np.argmin(d, axis=1)
    if signed:
        fix = (x < 0) & (qmap[c] >= 0)
        c = np.where(fix, c - 1, c)
    return c.astype(np.uint8)


def quantize(x, qmap, signed):
    n = x.size
    nb = (n + BLOCK - 1) // BLOCK
    codes = np.zeros(n, np.uint8)
    absmax = np.zeros(nb, F)
    zero = int(np.nonzero(qmap == 0)[0][0])
    for b in range(nb):
        blk = x[b * BLOCK:(b + 1) * BLOCK]
        a = F(np.max(np.abs(blk)))
        absmax[b] = a
        codes[b * BLOCK:(b + 1) * BLOCK] = encode(blk / a, qmap, signed) if a > 0 else zero
    return codes, absmax


def dequantize(codes, absmax, qmap):
    return (qmap[codes] * np.repeat(absmax, BLOCK)[:codes.size]).astype(F)


def scalars(lr, b1, b2, eps, wd, t):
    c1 = 1.0 - b1 ** t
    c2 = (1.0 - b2 ** t) ** 0.5
    return dict(b1=F(b1), omb1=F(1.0 - b1), b2=F(b2), omb2=F(1.0 - b2), step=F(-lr * c2 / c1),
                epsc=F(eps * c2), decay=F(1.0 - lr * wd) if wd > 0 else F(1.0))


def update(p, g, m, v, s):
    m = (m * s["b1"] + s["omb1"] * g).astype(F)
    v = (v * s["b2"] + (s["omb2"] * g) * g).astype(F)
    p = ((p + s["step"] * (m / (np.sqrt(v) + s["epsc"]))) * s["decay"]).astype(F)
    return p, m, v


def adamw8_step(p, g, st, s, q1, q2):
    m = dequantize(st["c1"], st["a1"], q1)
    v = dequantize(st["c2"], st["a2"], q2)
    p, m, v = update(p, g, m, v, s)
    st["c1"], st["a1"] = quantize(m, q1, True)
    st["c2"], st["a2"] = quantize(v, q2, False)
    return p


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(20211005)
    q1, q2 = dynamic_map(True), dynamic_map(False)
    # the map: 256 ascending values, [-1, 1] / [0, 1], 0 and 1 present
    for q, lo in ((q1, -1.0), (q2, 0.0)):
        assert q.size == 256 and np.all(np.diff(q) > 0) and q[0] >= lo and q[-1] == 1.0 and 0.0 in q
    assert np.sum(q1 < 0) == 127 and q1[127] == 0.0 and q2[0] == 0.0
    # and bitsandbytes' f32 construction of the same map is within two ulps
    try:
        for q, signed in ((q1, True), (q2, False)):
            t = bnb_torch_map(signed)
            ulps = np.abs(t.view(np.int32).astype(np.int64) - q.view(np.int32).astype(np.int64))
            assert ulps.max() <= 2, ulps.max()
            print(f"map signed={signed}: {int(np.sum(ulps > 0))} of 256 values differ, by at most {int(ulps.max())} ulp, from bitsandbytes' f32 table")
    except ImportError:
        print("torch missing: bitsandbytes' f32 map not compared")
    q1.tofile(f"{out}/map_signed.bin")
    q2.tofile(f"{out}/map_unsigned.bin")

    # quantize / dequantize random tensors (3 full blocks and a partial one)
    nq = 3 * BLOCK + 777
    xs = (rng.standard_normal(nq) * np.exp(rng.uniform(-12, 2, nq))).astype(F)
    xs[BLOCK:2 * BLOCK] = 0                      # a block of zeros
    xs[5] = q1[200] * F(np.max(np.abs(xs[:BLOCK])))  # values near codes
    xu = np.abs(xs)
    cs, as_ = quantize(xs, q1, True)
    cu, au = quantize(xu, q2, False)
    for name, arr in (("q_xs", xs), ("q_cs", cs), ("q_as", as_), ("q_ds", dequantize(cs, as_, q1)),
                      ("q_xu", xu), ("q_cu", cu), ("q_au", au), ("q_du", dequantize(cu, au, q2))):
        arr.tofile(f"{out}/{name}.bin")

    # 10 steps of 8-bit AdamW on random params and gradients
    n, steps = 4 * BLOCK + 1808, 10
    lr, b1, b2, eps, wd = 1e-3, 0.9, 0.999, 1e-8, 0.01
    p = (rng.standard_normal(n) * 0.05).astype(F)
    gs = (rng.standard_normal((steps, n)) * np.exp(rng.uniform(-8, 0, (steps, 1)))).astype(F)
    gs[:, 2 * BLOCK:3 * BLOCK] *= F(1e-4)            # one block of small gradients
    gs[3, 3 * BLOCK:4 * BLOCK] = 0                   # a step where a block sees no gradient
    nb = (n + BLOCK - 1) // BLOCK
    st = {"c1": np.full(n, 127, np.uint8), "c2": np.zeros(n, np.uint8), "a1": np.zeros(nb, F), "a2": np.zeros(nb, F)}
    p.tofile(f"{out}/o_p0.bin")
    gs.tofile(f"{out}/o_g.bin")
    ps, c1s, c2s, a1s, a2s = [], [], [], [], []
    for t in range(1, steps + 1):
        p = adamw8_step(p, gs[t - 1], st, scalars(lr, b1, b2, eps, wd, t), q1, q2)
        ps.append(p.copy()); c1s.append(st["c1"].copy()); c2s.append(st["c2"].copy())
        a1s.append(st["a1"].copy()); a2s.append(st["a2"].copy())
    for name, arr in (("o_p", ps), ("o_c1", c1s), ("o_c2", c2s), ("o_a1", a1s), ("o_a2", a2s)):
        np.stack(arr).tofile(f"{out}/{name}.bin")

    # a tensor under min_8bit_size: f32 moments, the same update
    ns = 1000
    p = (rng.standard_normal(ns) * 0.05).astype(F)
    g = (rng.standard_normal((steps, ns)) * 1e-2).astype(F)
    p.tofile(f"{out}/s_p0.bin")
    g.tofile(f"{out}/s_g.bin")
    m = np.zeros(ns, F); v = np.zeros(ns, F)
    for t in range(1, steps + 1):
        p, m, v = update(p, g[t - 1], m, v, scalars(lr, b1, b2, eps, wd, t))
    p.tofile(f"{out}/s_p.bin")

    with open(f"{out}/meta.txt", "w") as f:
        f.write(f"nq {nq}\nn {n}\nsteps {steps}\nns {ns}\nlr {lr!r}\nb1 {b1!r}\nb2 {b2!r}\neps {eps!r}\nwd {wd!r}\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
