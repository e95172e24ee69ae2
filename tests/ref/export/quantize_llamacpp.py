#!/usr/bin/python3
"""dlm's quantized exports vs llama.cpp's own llama-quantize.

llama_model_quantize (libllama from the npm package @node-llama-cpp/linux-x64,
pinned in tests/ref/package.json, called through ctypes) turns dlm's F32
export of a model into each mix; dlm exports the same model to that mix
directly from its source (F32, BF16 or F16 weights). Without an imatrix
llama.cpp quantizes with the reference algorithms dlm implements, so the two
files must hold the same tensors in the same order with the same types and
the same bytes: this checks the per-tensor type rules (output / tied
embedding rule, attn_v and ffn_down bumps, %256 fallbacks to Q5_0 / Q5_1 /
Q8_0 / F16), the tensor order, and the quantizers end to end. A merged export
is checked the same way (W + s·B·A then quantized, vs llama-quantize of the
merged F32 file). Finally dlm's Q4_1 / Q5_1 quantizers (the Q5_K fallback)
are compared with quantize_row_q4_1_ref / quantize_row_q5_1_ref of
libggml-base byte for byte.

usage: quantize_llamacpp.py BINS_DIR TMP"""
import ctypes
import glob
import json
import os
import struct
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_read  # noqa: E402

SRC, BUILD = os.environ["DLM_SRC"], os.environ["DLM_BUILD"]
TOOL = os.path.join(BUILD, "test_export")
FTYPE = {"Q4_K_M": 15, "Q5_K_M": 17, "Q6_K": 18, "Q8_0": 7, "Q4_0": 2, "F16": 1, "BF16": 32}
fails = []


def run(args):
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"failed: {' '.join(args)}\n{r.stdout}{r.stderr}")
    return r.stdout


class Quantizer:
    """llama_model_quantize with default params but ftype and one thread.
    The params struct is only touched at its first two fields (nthread,
    ftype: stable across llama.cpp versions); the rest is the library's own
    defaults, returned into a buffer larger than any version's struct."""

    def __init__(self, bins):
        lib = glob.glob(os.path.join(bins, "libllama*.so"))
        if not lib:
            sys.exit(f"no libllama in {bins}")
        self.lib = ctypes.CDLL(lib[0])

        class P(ctypes.Structure):
            _fields_ = [("raw", ctypes.c_uint8 * 1024)]
        self.P = P
        self.lib.llama_model_quantize_default_params.restype = P
        self.lib.llama_model_quantize.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(P)]
        self.lib.llama_model_quantize.restype = ctypes.c_uint32
        cb = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)
        self.quiet = cb(lambda level, text, user: None)
        self.lib.llama_log_set(self.quiet, None)

    def __call__(self, src, dst, ftype):
        p = self.lib.llama_model_quantize_default_params()
        struct.pack_into("<ii", p.raw, 0, 1, ftype)
        return self.lib.llama_model_quantize(src.encode(), dst.encode(), ctypes.byref(p))


def compare(label, mine, theirs):
    kv_a, ta = gguf_read.read(mine)
    kv_b, tb = gguf_read.read(theirs)
    bad = []
    if [t["name"] for t in ta] != [t["name"] for t in tb]:
        bad.append("tensor order differs: %s vs %s" % ([t["name"] for t in ta][:6], [t["name"] for t in tb][:6]))
    byname = {t["name"]: t for t in tb}
    types = {}
    for t in ta:
        u = byname.get(t["name"])
        if not u:
            bad.append(f"{t['name']} missing in llama.cpp's file")
            continue
        if (t["type"], t["ne"]) != (u["type"], u["ne"]):
            bad.append(f"{t['name']}: dlm {gguf_read.TYPE_NAMES.get(t['type'])} {t['ne']}, "
                       f"llama.cpp {gguf_read.TYPE_NAMES.get(u['type'])} {u['ne']}")
        elif t["data"] != u["data"]:
            bad.append(f"{t['name']} ({gguf_read.TYPE_NAMES.get(t['type'])}): bytes differ")
        n = gguf_read.TYPE_NAMES.get(t["type"], str(t["type"]))
        types[n] = types.get(n, 0) + 1
    for k in ("general.file_type", "general.quantization_version"):
        if kv_a.get(k) != kv_b.get(k):
            bad.append(f"{k}: dlm {kv_a.get(k)} llama.cpp {kv_b.get(k)}")
    for k, v in kv_b.items():  # llama-quantize copies every key of its input
        if k.startswith("tokenizer.") and kv_a.get(k) != v:
            bad.append(f"{k} differs")
    if bad:
        fails.append(label)
        print(f"FAIL {label}: " + "; ".join(bad[:8]))
    else:
        print(f"{label}: {len(ta)} tensors identical to llama-quantize ({', '.join(f'{v} {k}' for k, v in sorted(types.items()))})")


def write_peft(model_dir, out, rank=4, alpha=8, seed=5):
    """A PEFT LoRA adapter on every projection with random A and B."""
    cfg = json.load(open(os.path.join(model_dir, "config.json")))
    c, f, L = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    nh, kvh = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = c // nh
    dims = {"q_proj": (c, nh * hd), "k_proj": (c, kvh * hd), "v_proj": (c, kvh * hd), "o_proj": (nh * hd, c),
            "gate_proj": (c, f), "up_proj": (c, f), "down_proj": (f, c)}
    rng = np.random.RandomState(seed)
    items = []
    for il in range(L):
        for m, (i, o) in dims.items():
            blk = "self_attn" if m in ("q_proj", "k_proj", "v_proj", "o_proj") else "mlp"
            base = f"base_model.model.model.layers.{il}.{blk}.{m}"
            items.append((base + ".lora_A.weight", (rng.standard_normal((rank, i)) * 0.1).astype("<f4")))
            items.append((base + ".lora_B.weight", (rng.standard_normal((o, rank)) * 0.1).astype("<f4")))
    os.makedirs(out, exist_ok=True)
    hdr, off, blobs = {"__metadata__": {"format": "pt"}}, 0, []
    for name, a in items:
        b = a.tobytes()
        hdr[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * ((-len(h)) % 8)
    with open(os.path.join(out, "adapter_model.safetensors"), "wb") as fo:
        fo.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
    json.dump({"peft_type": "LORA", "r": rank, "lora_alpha": alpha, "lora_dropout": 0.0,
               "target_modules": list(dims), "use_dora": False, "use_rslora": False},
              open(os.path.join(out, "adapter_config.json"), "w"))


def check_q41_q51(bins, tmp):
    lib = ctypes.CDLL(os.path.join(bins, "libggml-base.so"))
    rng = np.random.RandomState(7)
    pats = {"gauss": rng.standard_normal(4096), "uniform": rng.uniform(-3, 7, 4096), "zeros": np.zeros(256),
            "const": np.full(256, 0.37), "ramp": np.arange(256) / 7.0 - 11, "spikes": np.where(np.arange(512) % 37, 0.01, 90.0),
            "tiny": rng.standard_normal(512) * 1e-6, "negative": -np.abs(rng.standard_normal(512)) - 5}
    for t, fn, bb in (("Q4_1", "quantize_row_q4_1_ref", 20), ("Q5_1", "quantize_row_q5_1_ref", 24)):
        f = getattr(lib, fn)
        f.restype = None
        f.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
        ok = 0
        for name, x in pats.items():
            x = np.ascontiguousarray(x, dtype=np.float32)
            want = np.zeros(x.size // 32 * bb, dtype=np.uint8)
            f(x.ctypes.data, want.ctypes.data, x.size)
            x.tofile(os.path.join(tmp, "x.f32"))
            run([TOOL, "--quantize", t, os.path.join(tmp, "x.f32"), os.path.join(tmp, "q.bin")])
            got = open(os.path.join(tmp, "q.bin"), "rb").read()
            if got == want.tobytes():
                ok += 1
            else:
                fails.append(f"{t} {name}")
                print(f"FAIL {t} pattern {name}: bytes differ from {fn}")
        print(f"{t}: {ok}/{len(pats)} patterns identical to ggml's {fn}")


def main():
    bins, tmp = sys.argv[1], sys.argv[2]
    q = Quantizer(bins)
    mk = [sys.executable, os.path.join(SRC, "tests", "ref", "make_model.py")]
    models = {
        # K-quant widths, 8 layers (use_more_bits picks 0 3 6 7), bf16 source
        "llama-8L-bf16": (["--arch", "llama", "--untied", "--dtype", "bf16", "--d-model", "256", "--ff", "256",
                           "--heads", "4", "--kv-heads", "2", "--vocab", "400", "--layers", "8", "--seed", "41"],
                          ["Q4_K_M", "Q5_K_M", "Q6_K", "Q8_0", "Q4_0", "F16", "BF16"]),
        # widths of 64: every fallback (Q5_0, Q5_1, Q8_0), tied embedding
        "qwen2-64-tied": (["--arch", "qwen2", "--tied", "--d-model", "64", "--ff", "256", "--heads", "4",
                           "--kv-heads", "2", "--vocab", "320", "--layers", "4", "--seed", "42"],
                          ["Q4_K_M", "Q5_K_M", "Q6_K", "Q8_0", "Q4_0"]),
        # width 48 fits no block of 32 after the fallback: F16 (f16 source)
        "llama-48-f16": (["--arch", "llama", "--tied", "--dtype", "f16", "--d-model", "48", "--ff", "96",
                          "--heads", "4", "--kv-heads", "2", "--vocab", "320", "--layers", "3", "--seed", "43"],
                         ["Q4_K_M", "Q5_K_M", "Q6_K"]),
    }
    for name, (args, mixes) in models.items():
        d = os.path.join(tmp, name)
        run(mk + ["--out", d] + args)
        f32 = os.path.join(tmp, name + ".F32.gguf")
        run([TOOL, "--export", d, "F32", f32])
        for mix in mixes:
            mine, theirs = os.path.join(tmp, f"{name}.{mix}.dlm.gguf"), os.path.join(tmp, f"{name}.{mix}.llama.gguf")
            run([TOOL, "--export", d, mix, mine])
            rc = q(f32, theirs, FTYPE[mix])
            if rc:
                fails.append(f"{name} {mix}")
                print(f"FAIL {name} {mix}: llama_model_quantize returned {rc}")
                continue
            compare(f"{name} {mix}", mine, theirs)
    # merged: W + s·B·A, then the mix
    d = os.path.join(tmp, "llama-8L-bf16")
    ad = os.path.join(tmp, "peft")
    write_peft(d, ad)
    f32 = os.path.join(tmp, "merged.F32.gguf")
    run([TOOL, "--export", d, "F32", f32, ad])
    for mix in ("Q4_K_M", "Q8_0"):
        mine, theirs = os.path.join(tmp, f"merged.{mix}.dlm.gguf"), os.path.join(tmp, f"merged.{mix}.llama.gguf")
        run([TOOL, "--export", d, mix, mine, ad])
        if q(f32, theirs, FTYPE[mix]):
            fails.append(f"merged {mix}")
            continue
        compare(f"llama-8L-bf16 merged {mix}", mine, theirs)
    check_q41_q51(bins, tmp)
    if fails:
        print(f"r0502: FAILED: {len(fails)} ({', '.join(fails)})")
        return 1
    print("r0502: every mix identical to llama.cpp's llama-quantize")
    return 0


if __name__ == "__main__":
    sys.exit(main())
