#!/usr/bin/python3
"""dlm export --adapter-mix checked against references nobody here wrote:

 1. linear (exact): on a small random qwen2, two adapter versions (v0001 rank
    8, v0002 rank 4, different text) are each exported alone (the plain
    export, adapter.gguf), then mixed 0.7 / 0.3. llama.cpp (npm
    node-llama-cpp 3.21.1) loading the base with the two adapter GGUFs at
    scales 0.7 and 0.3 and loading the base with the linear mix alone give
    the same 32 greedy tokens and next-token distributions within 1e-4 in
    log p (F32 summation order only); the merged mix too.
 2. svd: numpy reads both PEFT folders (adapter_model.safetensors, parsed
    here from the format), forms ΔW = 0.7·s₁B₁A₁ + 0.3·s₂B₂A₂ per tensor
    in float64 with the full-matrix SVD, and checks
      - export_manifest.json's recorded relative Frobenius error equals
        √(Σ discarded σ²)/√(Σ σ²) for rank max(r) = 8 (1e-9 absolute),
      - the exported adapter's (alpha/rank)·B·A equals numpy's rank-8
        truncation (1e-5 relative Frobenius).
 3. Errors: a weight that is no number, a version that does not exist.
"""
import json
import math
import os
import struct
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_read  # noqa: E402

DLM, SRC, T = os.environ["DLM"], os.environ["DLM_SRC"], sys.argv[1]
PY = "/usr/bin/python3"
NODE_CHECK = os.path.join(SRC, "tests", "ref", "export", "llama_check.mjs")
PROMPT = "The quick brown fox jumps over the lazy dog. Paris is the capital of"
DID = "01JD00000000000000000000M1"
W = (0.7, 0.3)
failures = []


def run(args, ok=True):
    e = dict(os.environ)
    e["DLM_HOME"] = os.path.join(T, "home")
    r = subprocess.run(args, capture_output=True, text=True, env=e)
    if ok and r.returncode != 0:
        sys.stderr.write(f"command failed ({r.returncode}): {' '.join(args)}\n{r.stdout}\n{r.stderr}\n")
        sys.exit(1)
    return r


def check(ok, msg):
    if not ok:
        failures.append(msg)
        print("FAIL: " + msg)


DOC = """---
dlm_id: {id}
dlm_version: 15
base_model: {base}
training:
  sequence_len: 64
  num_epochs: 2
  learning_rate: 0.02
  micro_batch_size: 2
  grad_accum: 1
  seed: {seed}
  lora_r: {r}
  lora_alpha: {alpha}
  target_modules: [q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj]
---
{body}
"""
BODY1 = "# Capitals\n\nParis is the capital of France. Berlin is the capital of Germany.\n"
BODY2 = "# Rivers\n\nThe Seine flows through Paris. The Thames flows through London, the Tiber through Rome.\n"


def safetensors(path):
    b = open(path, "rb").read()
    n = struct.unpack_from("<Q", b, 0)[0]
    h = json.loads(b[8:8 + n])
    out = {}
    for k, v in h.items():
        if k == "__metadata__":
            continue
        s, e = v["data_offsets"]
        dt = {"F32": np.float32, "F16": np.float16}[v["dtype"]]
        out[k] = np.frombuffer(b[8 + n + s:8 + n + e], dtype=dt).astype(np.float64).reshape(v["shape"])
    return out


def peft(dirp):
    cfg = json.load(open(os.path.join(dirp, "adapter_config.json")))
    return cfg["lora_alpha"] / cfg["r"], safetensors(os.path.join(dirp, "adapter_model.safetensors"))


GG = {"q_proj": "attn_q", "k_proj": "attn_k", "v_proj": "attn_v", "o_proj": "attn_output", "gate_proj": "ffn_gate",
      "up_proj": "ffn_up", "down_proj": "ffn_down"}


def deltas(dirs):
    """{gguf tensor name: ΔW} of the weighted sum, in float64."""
    out = {}
    for w, d in zip(W, dirs):
        s, t = peft(d)
        for k, a in t.items():
            if ".lora_A." not in k:
                continue
            b = t[k.replace(".lora_A.", ".lora_B.")]
            parts = k.split(".")
            layer, mod = parts[parts.index("layers") + 1], parts[parts.index("layers") + 3]
            name = f"blk.{layer}.{GG[mod]}.weight"
            out[name] = out.get(name, 0) + w * s * (b @ a)
    return out


def main():
    base = os.path.join(T, "qwen2")
    run([PY, os.path.join(SRC, "tests", "ref", "make_model.py"), "--out", base, "--d-model", "128", "--ff", "256",
         "--heads", "4", "--kv-heads", "2", "--vocab", "400", "--layers", "2", "--arch", "qwen2", "--untied",
         "--seed", "41"])
    run([PY, os.path.join(SRC, "tests", "ref", "export", "scale_model.py"), base, "0.3", "0.5"])
    doc = os.path.join(T, "mix.dlm")
    single = {}
    for v, (r, alpha, seed, body) in enumerate(((8, 16, 1, BODY1), (4, 12, 2, BODY2)), 1):
        with open(doc, "w") as f:
            f.write(DOC.format(id=DID, base=base, r=r, alpha=alpha, seed=seed, body=body))
        run([DLM, "train", doc, "-q"] + (["--fresh"] if v > 1 else []))
        out = os.path.join(T, f"v{v}")
        run([DLM, "export", doc, "--target", "gguf", "--quant", "F32", "--out", out])
        single[v] = out
    vdir = [os.path.join(T, "home", "store", DID, "adapter", "versions", f"v000{v}") for v in (1, 2)]
    for v in (1, 2):
        check(os.path.isfile(os.path.join(vdir[v - 1], "adapter_model.safetensors")), f"v000{v} was not trained")
    mix = "v0001:0.7,v0002:0.3"
    outs = {}
    for method, merged in (("linear", 0), ("linear", 1), ("svd", 0)):
        o = os.path.join(T, f"{method}{'-merged' if merged else ''}")
        run([DLM, "export", doc, "--target", "gguf", "--quant", "F32", "--out", o, "--adapter-mix", mix,
             "--adapter-mix-method", method] + (["--merged"] if merged else []))
        outs[(method, merged)] = o

    # 1. llama.cpp: the two adapters at 0.7 / 0.3 against the mix alone
    ids = json.loads(run([DLM, "tokenize", "--base", base, "--json", PROMPT]).stdout)
    basef = os.path.join(single[1], "base.F32.gguf")
    pair = [{"path": os.path.join(single[1], "adapter.gguf"), "scale": W[0]},
            {"path": os.path.join(single[2], "adapter.gguf"), "scale": W[1]}]
    lin = os.path.join(outs[("linear", 0)], "adapter.gguf")
    merged = os.path.join(outs[("linear", 1)], "merged.F32.gguf")
    jobs = []
    for kind, extra in (("greedy", {"greedy": 32}), ("probs", {"probs": True})):
        jobs += [dict(id=f"{kind} pair", model=basef, loras=pair, ids=ids, **extra),
                 dict(id=f"{kind} linear", model=basef, lora=lin, ids=ids, **extra),
                 dict(id=f"{kind} merged", model=merged, lora=None, ids=ids, **extra),
                 dict(id=f"{kind} v1", model=basef, lora=pair[0]["path"], ids=ids, **extra)]
    with open(os.path.join(T, "jobs.json"), "w") as f:
        json.dump(jobs, f)
    r = subprocess.run(["node", NODE_CHECK, os.path.join(T, "jobs.json"), os.path.join(T, "out.json")],
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.stderr.write(r.stdout + r.stderr)
        return 1
    lc = json.load(open(os.path.join(T, "out.json")))
    for k, v in lc.items():
        check("error" not in v, f"llama.cpp {k}: {v.get('error')}")
    g = {k: lc.get(f"greedy {k}", {}).get("tokens") for k in ("pair", "linear", "merged", "v1")}
    print(f"greedy pair   {g['pair']}\ngreedy linear {g['linear']}\ngreedy merged {g['merged']}")
    check(g["pair"] is not None and g["pair"] == g["linear"], "the linear mix's greedy tokens differ from the pair's")
    check(g["pair"] == g["merged"], "the merged linear mix's greedy tokens differ from the pair's")
    lp = {k: np.log(np.maximum(np.array(lc[f"probs {k}"]["probs"]), 1e-300)) for k in ("pair", "linear", "merged", "v1")}
    pp = np.array(lc["probs pair"]["probs"])
    sel = pp > 1e-5
    for k in ("linear", "merged"):
        d = float(np.max(np.abs(lp[k][sel] - lp["pair"][sel])))
        print(f"max |Δ log p| pair vs {k}: {d:.2e}")
        check(d <= 1e-4, f"{k}: |Δ log p| {d} > 1e-4 against the two adapters at 0.7/0.3")
    dv1 = float(np.max(np.abs(lp["v1"][sel] - lp["pair"][sel])))
    print(f"max |Δ log p| pair vs v0001 alone: {dv1:.2e} (the mix must matter)")
    check(dv1 > 1e-3, "the mix is indistinguishable from v0001 alone: the test cannot see a wrong mix")

    # 2. svd against numpy
    man = json.load(open(os.path.join(outs[("svd", 0)], "export_manifest.json")))
    rec = man["adapter_mix"]["svd_relative_frobenius_error"]
    check(man["adapter_mix"]["rank"] == 8, f"svd rank {man['adapter_mix']['rank']}, want max(8, 4) = 8")
    kv, ts = gguf_read.read(os.path.join(outs[("svd", 0)], "adapter.gguf"))
    alpha = kv["adapter.lora.alpha"][1]
    tens = {t["name"]: np.frombuffer(t["data"], dtype=np.float32).astype(np.float64).reshape(t["ne"][1], t["ne"][0])
            for t in ts}
    dw = deltas(vdir)
    check(set(rec) == set(dw), f"recorded tensors {sorted(rec)} != {sorted(dw)}")
    worst_e = worst_f = 0.0
    for name, d in sorted(dw.items()):
        u, s, vt = np.linalg.svd(d, full_matrices=False)
        want = math.sqrt(float(np.sum(s[8:] ** 2)) / float(np.sum(s ** 2)))
        got = rec.get(name, -1)
        worst_e = max(worst_e, abs(got - want))
        check(abs(got - want) <= 1e-9, f"{name}: recorded error {got}, numpy {want}")
        trunc = (u[:, :8] * s[:8]) @ vt[:8]
        a, b = tens[name + ".lora_a"], tens[name + ".lora_b"]
        mine = (alpha / a.shape[0]) * (b @ a)
        fe = float(np.linalg.norm(mine - trunc) / np.linalg.norm(trunc))
        worst_f = max(worst_f, fe)
        check(fe <= 1e-5, f"{name}: exported rank-8 product differs from numpy's truncation by {fe}")
    print(f"svd: {len(dw)} tensors, recorded errors {min(rec.values()):.4f}..{max(rec.values()):.4f}; "
          f"max |recorded − numpy| {worst_e:.1e}; max factor error {worst_f:.1e}")
    check(max(rec.values()) > 1e-3, "no tensor lost anything: the svd check is vacuous")

    # 3. errors
    for spec, want in (("v0001:x", "is not a number"), ("v0009:1", "is no adapter"), ("v0001", "SOURCE:WEIGHT")):
        r = run([DLM, "export", doc, "--target", "gguf", "--quant", "F32", "--out", os.path.join(T, "bad"),
                 "--adapter-mix", spec], ok=False)
        check(r.returncode != 0 and want in r.stderr and "hint:" in r.stderr,
              f"--adapter-mix {spec}: rc {r.returncode}, stderr {r.stderr!r}")
    if failures:
        print(f"{len(failures)} failure(s)")
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
