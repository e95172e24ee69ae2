#!/usr/bin/python3
"""dlm's importance matrix and calibrated exports vs PyTorch and llama.cpp.

1. The imatrix: dlm (`test_imatrix --collect`: chunks of the token file,
   each from position 0 with its first token replaced by BOS) against an
   independent PyTorch computation: tests/ref/engine/torch_ref.py's
   HF-convention forward run chunk by chunk under a TorchFunctionMode that
   catches every `x @ W.T` of a model weight and sums x² per input column in
   float64 (router and experts of mixtral included: rows routed to expert e
   count for e). Sums within 1e-5 relative per tensor (1e-4 per column),
   counts exact; the same for a
   merged LoRA adapter (forward mode 'lora'); and the file's names and
   shapes are llama.cpp's (in_sum2 {ncols, nmat}, counts {1, nmat}).
2. The calibrated export: llama_model_quantize of libllama (npm
   @node-llama-cpp/linux-x64, ctypes) given dlm's F32 export and, through
   llama_model_quantize_params.imatrix, the importance tools/quantize
   derives from dlm's imatrix.gguf (in_sum2 / counts per matrix, 1 for a
   matrix without rows), must write the same tensors as `dlm export` with
   that imatrix: K-quant mixes, the %256 fallbacks (Q5_0 / Q5_1 weighted
   too), mixtral's stacked experts, a merged adapter.

llama.cpp's own imatrix collector (tools/imatrix) is a program, not part of
the prebuilt libraries, so the collection is checked against PyTorch only.

usage: imatrix_ref.py BINS_DIR TMP"""
import ctypes
import glob
import json
import os
import subprocess
import sys

import numpy as np
import torch
from torch.overrides import TorchFunctionMode

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "engine"))
import gguf_read  # noqa: E402
import torch_infer  # noqa: E402
import torch_ref as R  # noqa: E402
from quantize_llamacpp import Quantizer, compare, fails, run, write_peft  # noqa: E402

SRC, BUILD = os.environ["DLM_SRC"], os.environ["DLM_BUILD"]
TOOL = os.path.join(BUILD, "test_imatrix")
EXPORT = os.path.join(BUILD, "test_export")
FTYPE = {"Q4_K_M": 15, "Q5_K_M": 17, "Q6_K": 18}
DENSE = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
         "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
         "mlp.down_proj": "ffn_down"}
EXPERT = {"w1": "gate", "w3": "up", "w2": "down"}


def gguf_name(hf):
    """(GGUF weight name, expert index or None) of an HF weight name."""
    p = hf.split(".")
    layer = int(p[2])
    rest = ".".join(p[3:-1])
    if rest in DENSE:
        return f"blk.{layer}.{DENSE[rest]}.weight", None
    if rest == "block_sparse_moe.gate":
        return f"blk.{layer}.ffn_gate_inp.weight", None
    if rest.startswith("block_sparse_moe.experts."):
        return f"blk.{layer}.ffn_{EXPERT[p[-2]]}_exps.weight", int(p[5])
    return None, None


class Catch(TorchFunctionMode):
    """Sums x² of every x @ W.T where W is a model weight (found by its storage)."""

    def __init__(self, weights, n_expert):
        super().__init__()
        self.by_ptr = {}
        for k, v in weights.items():
            if v.dim() == 2 and k.startswith("model.layers."):
                name, ex = gguf_name(k)
                if name:
                    self.by_ptr[v.data_ptr()] = (name, ex, v.shape[1])
        self.n_expert = n_expert
        self.sums, self.counts = {}, {}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if getattr(func, "__name__", "") in ("matmul", "__matmul__") and len(args) == 2:
            x, w = args
            hit = self.by_ptr.get(w.data_ptr()) if isinstance(w, torch.Tensor) and w.dim() == 2 else None
            if hit and w.shape[0] == hit[2] and x.shape[-1] == hit[2]:
                name, ex, cols = hit
                rows = x.detach().reshape(-1, cols).double()
                nmat = self.n_expert if ex is not None else 1
                s = self.sums.setdefault(name, np.zeros((nmat, cols)))
                c = self.counts.setdefault(name, np.zeros(nmat))
                s[ex or 0] += (rows * rows).sum(0).numpy()
                c[ex or 0] += rows.shape[0]
        return func(*args, **kwargs)


def torch_imatrix(model_dir, tokens, chunk, bos, peft=None):
    c, W = torch_infer.load(model_dir)
    P, mode, s = {}, "base", 1.0
    if peft:
        P = torch_infer.st_read(os.path.join(peft, "adapter_model.safetensors"))
        ac = json.load(open(os.path.join(peft, "adapter_config.json")))
        mode, s = "lora", ac["lora_alpha"] / ac["r"]
    catch = Catch(W, c.E)
    with torch.no_grad():
        for i in range(len(tokens) // chunk):
            t = list(tokens[i * chunk:(i + 1) * chunk])
            t[0] = bos
            tt = torch.tensor([t], dtype=torch.int32)
            pos = torch.arange(chunk, dtype=torch.int32)[None]
            with catch:
                R.forward(c, W, P, mode, s, tt, pos, torch.zeros(1, chunk, dtype=torch.int32))
    return catch.sums, catch.counts


def check_imatrix(label, path, sums, counts):
    kv, ts = gguf_read.read(path)
    got = {}
    for t in ts:
        a = np.frombuffer(t["data"], dtype="<f4")
        if t["type"] != 0:
            fails.append(f"{label}: {t['name']} not F32")
        base, kind = t["name"].rsplit(".", 1)
        got.setdefault(base, {})[kind] = (a, t["ne"])
    bad, worst, worst_col = [], 0.0, 0.0
    if sorted(got) != sorted(sums):
        bad.append(f"weights differ: dlm {sorted(set(got) - set(sums))[:4]} torch {sorted(set(sums) - set(got))[:4]}")
    for name in sorted(set(got) & set(sums)):
        (s, sne), (c, cne) = got[name]["in_sum2"], got[name]["counts"]
        want_s, want_c = sums[name], counts[name]
        nmat, cols = want_s.shape
        if sne != [cols, nmat] or cne != [1, nmat]:
            bad.append(f"{name}: shapes {sne} {cne}, want [{cols}, {nmat}] [1, {nmat}]")
            continue
        if not np.array_equal(c.astype(np.float64), want_c):
            bad.append(f"{name}: counts {c} vs {want_c}")
        # per tensor (‖Δ‖/‖ref‖ of each matrix's sums) within 1e-5; per column within 1e-4 (the two forwards
        # sum their matmuls in different orders, and a deep layer's inputs carry ~1e-6 of that)
        d = s.reshape(nmat, cols) - want_s
        rel = float(max(np.linalg.norm(d[k]) / max(np.linalg.norm(want_s[k]), 1e-30) for k in range(nmat)))
        col = float((np.abs(d) / np.maximum(np.abs(want_s), 1e-30)).max())
        worst, worst_col = max(worst, rel), max(worst_col, col)
        if rel > 1e-5 or col > 1e-4:
            bad.append(f"{name}: in_sum2 relative error {rel:.3g} (tensor), {col:.3g} (column)")
    if bad:
        fails.append(label)
        print(f"FAIL {label}: " + "; ".join(bad[:6]))
    else:
        print(f"{label}: {len(got)} weights, in_sum2 within {worst:.2g} relative of PyTorch per tensor "
              f"({worst_col:.2g} per column), counts equal "
              f"({kv['imatrix.chunk_count'][1]} chunks of {kv['imatrix.chunk_size'][1]})")


class ImQuantizer(Quantizer):
    """llama_model_quantize with params.imatrix: llama_model_imatrix_data
    {name, data, size} entries ended by a NULL name (include/llama.h); the
    pointer sits after nthread, ftype, two ggml types and six bools."""

    class Entry(ctypes.Structure):
        _fields_ = [("name", ctypes.c_char_p), ("data", ctypes.POINTER(ctypes.c_float)), ("size", ctypes.c_size_t)]

    def quantize(self, src, dst, ftype, imatrix_path):
        kv, ts = gguf_read.read(imatrix_path)
        pairs = {}
        for t in ts:
            base, kind = t["name"].rsplit(".", 1)
            pairs.setdefault(base, {})[kind] = np.frombuffer(t["data"], dtype="<f4")
        keep = []
        arr = (self.Entry * (len(pairs) + 1))()
        for i, (name, d) in enumerate(sorted(pairs.items())):
            s, c = d["in_sum2"], d["counts"]
            ne0 = s.size // c.size
            e = np.empty(s.size, dtype=np.float32)
            for j in range(c.size):   # tools/quantize: sums / counts, 1 where a matrix has no rows
                cnt = np.float32(np.int64(np.round(c[j])))
                e[j * ne0:(j + 1) * ne0] = s[j * ne0:(j + 1) * ne0] / cnt if cnt > 0 else 1.0
            keep.append(e)
            arr[i].name = name.encode()
            arr[i].data = e.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
            arr[i].size = e.size
        arr[len(pairs)].name = None
        p = self.lib.llama_model_quantize_default_params()
        raw = bytes(p.raw)
        assert raw[17] == 1 and int.from_bytes(raw[24:32], "little") == 0, "unexpected quantize params layout"
        import struct
        struct.pack_into("<ii", p.raw, 0, 1, ftype)
        struct.pack_into("<Q", p.raw, 24, ctypes.addressof(arr))
        rc = self.lib.llama_model_quantize(src.encode(), dst.encode(), ctypes.byref(p))
        del keep
        return rc


def main():
    bins, tmp = sys.argv[1], sys.argv[2]
    mk = [sys.executable, os.path.join(SRC, "tests", "ref", "make_model.py")]
    q = ImQuantizer(bins)
    models = {
        # K-quant widths (256), 4 layers, bf16 source
        "llama-256": (["--arch", "llama", "--untied", "--dtype", "bf16", "--d-model", "256", "--ff", "512", "--heads", "4",
                       "--kv-heads", "2", "--vocab", "300", "--layers", "4", "--seed", "61"], ["Q4_K_M", "Q6_K"]),
        # widths of 64: Q5_0 / Q5_1 / Q8_0 fallbacks, tied
        "qwen2-64": (["--arch", "qwen2", "--tied", "--d-model", "64", "--ff", "256", "--heads", "4", "--kv-heads", "2",
                      "--vocab", "320", "--layers", "2", "--seed", "62"], ["Q4_K_M", "Q5_K_M"]),
        # mixtral: router and 4 experts (top 2) stacked as ffn_*_exps, 256 wide
        "mixtral-256": (["--arch", "mixtral", "--untied", "--d-model", "256", "--ff", "256", "--heads", "4",
                         "--kv-heads", "2", "--vocab", "300", "--layers", "2", "--experts", "4", "--experts-used", "2",
                         "--seed", "63"], ["Q4_K_M"]),
    }
    rng = np.random.RandomState(5)
    chunk, bos = 64, 1
    for name, (args, mixes) in models.items():
        d = os.path.join(tmp, name)
        run(mk + ["--out", d] + args)
        vocab = json.load(open(os.path.join(d, "config.json")))["vocab_size"]
        toks = rng.randint(2, vocab, size=3 * chunk + 17).astype("<i4")   # 3 chunks, 17 tokens left over
        tp = os.path.join(tmp, name + ".tok")
        toks.tofile(tp)
        im = os.path.join(tmp, name + ".imatrix.gguf")
        run([TOOL, "--collect", d, tp, str(chunk), "256", str(bos), im])
        sums, counts = torch_imatrix(d, toks, chunk, bos)
        check_imatrix(f"{name} imatrix", im, sums, counts)
        f32 = os.path.join(tmp, name + ".F32.gguf")
        run([EXPORT, "--export", d, "F32", f32])
        for mix in mixes:
            mine, theirs = os.path.join(tmp, f"{name}.{mix}.dlm.gguf"), os.path.join(tmp, f"{name}.{mix}.llama.gguf")
            run([TOOL, "--export", d, mix, im, mine])
            rc = q.quantize(f32, theirs, FTYPE[mix], im)
            if rc:
                fails.append(f"{name} {mix}")
                print(f"FAIL {name} {mix}: llama_model_quantize returned {rc}")
                continue
            compare(f"{name} {mix} + imatrix", mine, theirs)
            plain = os.path.join(tmp, f"{name}.{mix}.plain.gguf")
            run([TOOL, "--export", d, mix, "-", plain])
            if open(plain, "rb").read() == open(mine, "rb").read():
                fails.append(f"{name} {mix} plain")
                print(f"FAIL {name} {mix}: the imatrix changed nothing")
    # merged adapter: the imatrix of base + adapter, then the merged mix
    d = os.path.join(tmp, "llama-256")
    ad = os.path.join(tmp, "peft")
    write_peft(d, ad, rank=4, alpha=8, seed=9)
    toks = np.fromfile(os.path.join(tmp, "llama-256.tok"), dtype="<i4")
    im = os.path.join(tmp, "merged.imatrix.gguf")
    run([TOOL, "--collect", d, os.path.join(tmp, "llama-256.tok"), str(chunk), "256", str(bos), im, ad])
    sums, counts = torch_imatrix(d, toks, chunk, bos, peft=ad)
    check_imatrix("llama-256 merged imatrix", im, sums, counts)
    f32 = os.path.join(tmp, "merged.F32.gguf")
    run([EXPORT, "--export", d, "F32", f32, ad])
    mine, theirs = os.path.join(tmp, "merged.Q4_K_M.dlm.gguf"), os.path.join(tmp, "merged.Q4_K_M.llama.gguf")
    run([TOOL, "--export", d, "Q4_K_M", im, mine, ad])
    if q.quantize(f32, theirs, FTYPE["Q4_K_M"], im):
        fails.append("merged Q4_K_M")
    else:
        compare("llama-256 merged Q4_K_M + imatrix", mine, theirs)
    if fails:
        print(f"r0506: FAILED: {len(fails)} ({', '.join(fails)})")
        return 1
    print("r0506: the imatrix equals PyTorch's; every calibrated export equals llama-quantize with it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
