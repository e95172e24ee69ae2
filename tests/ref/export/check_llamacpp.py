#!/usr/bin/python3
"""dlm's GGUF exports loaded by llama.cpp (npm node-llama-cpp 3.21.1, CPU):

 1. A small random llama (tied embedding, llama3 RoPE: rope_freqs, permuted
    Q/K), a small random qwen2 (untied, q/k/v biases) and a small random
    qwen3 (tied, per-head q/k RMSNorm, NH·HS != hidden) and a small random
    olmo2 (untied, whole-projection q/k RMSNorm, post-norms) and a small
    random smollm3 (tied, 4 layers, the last without RoPE, permuted Q/K),
    each with an adapter
    that dlm trains on all seven projections.
 2. Every mix (F32 F16 BF16 Q8_0 Q4_0 Q6_K Q5_K_M Q4_K_M) is exported as base +
    adapter and as merged; llama.cpp must load each one.
 3. F32 and F16: llama.cpp's greedy continuation of the prompt (32 tokens)
    equals `dlm prompt --raw --temp 0` token for token — base + adapter and
    merged, on the same file (dlm reads its own export with --base; F32 is
    also compared with dlm on the original HF folder).
 4. Every mix: llama.cpp's next-token distribution after the prompt matches
    dlm's on the same file within the tolerance below.
 5. llama.cpp tokenizes texts as dlm does (checks the tokenizer metadata).
 6. An adapter trained on the GGUF twin of the llama base (same weights) and
    exported gives llama.cpp the same greedy tokens as the HF-trained one.

Models: make_model.py's random weights have a gain of ~3 per matmul, so
rounding differences grow layer by layer; scale_model.py rescales them to a
gain near 1 and logits of a few units (σ ≈ 4), as in a trained model. The
GGUF-vs-HF training check (6) uses make_model's own HF folder and its
independently written F32 GGUF twin, unscaled.

Tolerance (4). llama.cpp's CPU matmul rounds each activation to the weights'
"vec_dot type" before the dot product: F16 for F16 weights (relative
rounding u = 2^-11), BF16 for BF16 (u = 2^-8), 8-bit blocks for every
quantized mix (Q8_0 blocks of 32 for Q8_0/Q4_0/Q5_x weights, Q8_K blocks
of 256 for K-quants: half a step is amax/254, about 3/254 of the RMS). dlm
keeps activations in f32. Such an error moves the logits by a fraction of
their spread σ, so the bound on |Δ log p| (every token with p > P_MIN; Δ log
p is the logit error less the log-partition error) is K·u·σ with K = 20, and
1e-4 for F32 (summation order only). Measured |Δ log p| / (u·σ) (the run
prints it as "ratio"): 0.1 to 9.4 over the 2-layer models and up to 16.2 for
the 4-layer smollm3 (the error compounds per layer), base + adapter and
merged, when this was written, so K = 20 leaves 2x. Also required: total variation <= 0.1 and
the same top token (or, in a near tie, llama.cpp's top token within 2·bound
of dlm's in log p). A misread tensor, scale or permutation moves log p by
units, far above these bounds.
"""
import json
import math
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_read  # noqa: E402

DLM, SRC, BUILD, T = os.environ["DLM"], os.environ["DLM_SRC"], os.environ["DLM_BUILD"], sys.argv[1]
PY = "/usr/bin/python3"
NODE_CHECK = os.path.join(SRC, "tests", "ref", "export", "llama_check.mjs")
PROJ_SCALE, EMB_SCALE = 0.3, 0.5
MIXES = ["F32", "F16", "BF16", "Q8_0", "Q4_0", "Q6_K", "Q5_K_M", "Q4_K_M"]
# 4: u = the largest relative rounding llama.cpp applies to an activation
# before a dot product with weights of the mix (F16: 2^-11, BF16: 2^-8,
# 8-bit blocks: half a step = amax/254 ≈ 3/254 of the RMS), bound =
# K·u·σ(logits) on |Δ log p| for every token with p > P_MIN.
U = {"F32": 0, "F16": 2.0 ** -11, "BF16": 2.0 ** -8, "Q8_0": 3 / 254, "Q4_0": 3 / 254, "Q6_K": 3 / 254,
     "Q5_K_M": 3 / 254, "Q4_K_M": 3 / 254}
K, F32_BOUND, P_MIN, TV_MAX = 20, 1e-4, 1e-5, 0.1
PROMPT = "The quick brown fox jumps over the lazy dog. Paris is the capital of"
TEXTS = ["Hello world! hello World? 12345 67890", "The model reads the document, learns its facts.",
         "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n",
         "  spaces   and\ttabs\n\nnew lines -- the end", "caf\u00e9 na\u00efve \u4e16\u754c \U0001F642"]
failures = []


def run(args, **kw):
    r = subprocess.run(args, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.stderr.write(f"command failed ({r.returncode}): {' '.join(args)}\n{r.stdout}\n{r.stderr}\n")
        sys.exit(1)
    return r.stdout


def env():
    e = dict(os.environ)
    e["DLM_HOME"] = os.path.join(T, "home")
    return e


def dlm(*args):
    return run([DLM] + list(args), env=env())


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
  lora_r: 8
  lora_alpha: 16
  target_modules: [q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj]
---
# Capitals

Paris is the capital of France. Berlin is the capital of Germany.
Madrid is the capital of Spain, and Lisbon the capital of Portugal.

::instruction::
### Q
What is the capital of France?
### A
Paris.

### Q
What is the capital of Germany?
### A
Berlin.
"""


def make(name, args, width=256):
    d = os.path.join(T, name)
    run([PY, os.path.join(SRC, "tests", "ref", "make_model.py"), "--out", d, "--d-model", str(width),
         "--ff", str(2 * width), "--heads", "4", "--kv-heads", "2", "--vocab", "400", "--layers", "2"] + args)
    return d


def train(name, base, ident):
    doc = os.path.join(T, name + ".dlm")
    with open(doc, "w") as f:
        f.write(DOC.format(id=ident, base=base))
    dlm("train", doc, "-q")
    return doc


def softmax(l):
    m = max(l)
    e = [math.exp(x - m) for x in l]
    z = sum(e)
    return [x / z for x in e]


def main():
    llama = make("llama", ["--arch", "llama", "--tied", "--rope-llama3", "--seed", "31"])
    qwen = make("qwen2", ["--arch", "qwen2", "--untied", "--seed", "32"])
    qwen3 = make("qwen3", ["--arch", "qwen3", "--tied", "--head-dim", "128", "--seed", "34"])
    olmo2 = make("olmo2", ["--arch", "olmo2", "--untied", "--seed", "35"])
    smol3 = make("smollm3", ["--arch", "smollm3", "--tied", "--layers", "4", "--seed", "36"])
    bases = {"llama": llama, "qwen2": qwen, "qwen3": qwen3, "olmo2": olmo2, "smollm3": smol3}
    for d in bases.values():
        run([PY, os.path.join(SRC, "tests", "ref", "export", "scale_model.py"), d, str(PROJ_SCALE), str(EMB_SCALE)])
    # the GGUF-vs-HF training check runs on make_model's own pair (HF folder +
    # independently written F32 GGUF twin, same weights)
    twin = make("twin", ["--arch", "llama", "--untied", "--seed", "33",
                         "--gguf", os.path.join(T, "twin.f32.gguf"), "--gguf-type", "f32"], width=64)
    ids_ = {"llama": "01JD00000000000000000000A1", "qwen2": "01JD00000000000000000000Q2",
            "qwen3": "01JD00000000000000000000Q3", "olmo2": "01JD00000000000000000000B2",
            "smollm3": "01JD00000000000000000000S3",
            "twin-hf": "01JD00000000000000000000G3", "twin-gguf": "01JD00000000000000000000G4"}
    docs = {"llama": train("llama", llama, ids_["llama"]), "qwen2": train("qwen2", qwen, ids_["qwen2"]),
            "qwen3": train("qwen3", qwen3, ids_["qwen3"]), "olmo2": train("olmo2", olmo2, ids_["olmo2"]),
            "smollm3": train("smollm3", smol3, ids_["smollm3"]),
            "twin-hf": train("twin-hf", twin, ids_["twin-hf"]),
            "twin-gguf": train("twin-gguf", os.path.join(T, "twin.f32.gguf"), ids_["twin-gguf"])}
    adapters = {k: os.path.join(T, "home", "store", i, "adapter", "versions", "v0001") for k, i in ids_.items()}
    files = {}
    for name in bases:
        for q in MIXES:
            for merged in (0, 1):
                out = os.path.join(T, "x", name, q + ("-merged" if merged else ""))
                dlm("export", docs[name], "--target", "gguf", "--quant", q, "--out", out, *(["--merged"] if merged else []))
                files[(name, q, merged)] = os.path.join(out, ("merged." if merged else "base.") + q + ".gguf")
    for name in ("twin-hf", "twin-gguf"):
        out = os.path.join(T, "x", name, "F32")
        dlm("export", docs[name], "--target", "gguf", "--quant", "F32", "--out", out)
        files[(name, "F32", 0)] = os.path.join(out, "base.F32.gguf")

    ids = json.loads(dlm("tokenize", "--base", llama, "--json", PROMPT))
    jobs = []
    for (name, q, merged), f in files.items():
        lora = None if merged else os.path.join(os.path.dirname(f), "adapter.gguf")
        key = f"{name}/{q}/{'merged' if merged else 'adapter'}"
        jobs.append({"id": "probs " + key, "model": f, "lora": lora, "ids": ids, "probs": True})
        if q in ("F32", "F16"):
            jobs.append({"id": "greedy " + key, "model": f, "lora": lora, "ids": ids, "greedy": 32})
    jobs.append({"id": "greedy twin-hf/F32/none", "model": files[("twin-hf", "F32", 0)], "lora": None, "ids": ids,
                 "greedy": 32})
    for name, base in bases.items():
        jobs.append({"id": "tok " + name, "model": files[(name, "F32", 0)], "texts": TEXTS})
    with open(os.path.join(T, "jobs.json"), "w") as f:
        json.dump(jobs, f)
    run(["node", NODE_CHECK, os.path.join(T, "jobs.json"), os.path.join(T, "llama.json")])
    with open(os.path.join(T, "llama.json")) as f:
        lc = json.load(f)
    for k, v in lc.items():
        check("error" not in v, f"llama.cpp {k}: {v.get('error')}")

    # 5. tokenization
    for name, base in bases.items():
        got = lc.get("tok " + name, {})
        for i, text in enumerate(TEXTS):
            for kind, flags in (("plain", ["--no-special"]), ("special", [])):
                mine = json.loads(dlm("tokenize", "--base", base, "--json", *flags, text))
                theirs = got.get(kind, [None] * len(TEXTS))[i]
                check(theirs == mine, f"{name}: llama.cpp tokenizes {text!r} ({kind}) as {theirs}, dlm as {mine}")
        print(f"{name}: llama.cpp tokenizes {len(TEXTS)} texts as dlm does (special tokens as text and parsed)")

    # 3. greedy
    def dlm_greedy(args):
        return json.loads(dlm("prompt", *args, "--raw", "--temp", "0", "-n", "32", "--json", PROMPT))["tokens"]

    def same_greedy(label, mine, theirs):
        # dlm stops at an end-of-generation token; llama.cpp (yieldEogToken) goes on
        ok = theirs is not None and mine == theirs[:len(mine)] and (len(mine) == 32 or len(theirs) > len(mine))
        check(ok, f"greedy {label}: dlm {mine} llama.cpp {theirs}")
        if ok:
            print(f"greedy {label}: {len(mine)} tokens identical")

    for name in bases:
        for q in ("F32", "F16"):
            base_f, merged_f = files[(name, q, 0)], files[(name, q, 1)]
            g_ad = lc.get(f"greedy {name}/{q}/adapter", {}).get("tokens")
            g_mg = lc.get(f"greedy {name}/{q}/merged", {}).get("tokens")
            same_greedy(f"{name} {q} base+adapter", dlm_greedy([docs[name], "--base", base_f]), g_ad)
            same_greedy(f"{name} {q} merged", dlm_greedy(["--base", merged_f]), g_mg)
            if q == "F32":
                orig = dlm_greedy([docs[name]])
                same_greedy(f"{name} F32 base+adapter vs dlm on the HF folder", orig, g_ad)
                same_greedy(f"{name} F32 merged vs dlm on the HF folder", orig, g_mg)
                no_ad = dlm_greedy([docs[name], "--no-adapter"])
                check(no_ad != orig, f"{name}: the adapter does not change the greedy continuation")

    # 6. GGUF-trained adapter == HF-trained adapter in llama.cpp
    g_hf = lc.get("greedy twin-hf/F32/adapter", {}).get("tokens")
    g_gg = lc.get("greedy twin-gguf/F32/adapter", {}).get("tokens")
    check(g_hf is not None and g_hf == g_gg, f"GGUF-trained adapter: {g_gg} vs HF-trained {g_hf}")
    check(g_hf != lc.get("greedy twin-hf/F32/none", {}).get("tokens"), "twin: the adapter changes nothing")
    def tensors(path):
        return [(t["name"], t["type"], t["ne"], t["data"]) for t in gguf_read.read(path)[1]]

    a_hf = tensors(os.path.join(os.path.dirname(files[("twin-hf", "F32", 0)]), "adapter.gguf"))
    a_gg = tensors(os.path.join(os.path.dirname(files[("twin-gguf", "F32", 0)]), "adapter.gguf"))
    same_base = tensors(files[("twin-hf", "F32", 0)]) == tensors(files[("twin-gguf", "F32", 0)])
    check(same_base, "the F32 exports of the HF folder and of its GGUF twin hold different tensors")
    print(f"adapter trained on the GGUF twin vs on the HF folder: llama.cpp greedy "
          f"{'identical' if g_hf == g_gg else 'DIFFERENT'}; adapter tensors "
          f"{'identical' if a_hf == a_gg else 'differ (training is not bit-identical across sources)'}; "
          f"base.F32.gguf tensors {'identical' if same_base else 'DIFFERENT'}")

    # 4. distributions
    print(f"{'case':26s} {'sigma':>6s} {'max|dlog p|':>12s} {'bound':>9s} {'ratio':>6s} {'TV':>9s}  top")
    worst = {}
    for (name, q, merged), f in sorted(files.items()):
        if name.startswith("twin"):
            continue
        key = f"{name}/{q}/{'merged' if merged else 'adapter'}"
        adapter = "-" if merged else adapters[name]
        logits = json.loads(run([os.path.join(BUILD, "test_export"), "--logits", f, adapter] + [str(i) for i in ids]))
        p = softmax(logits)
        qv = lc.get("probs " + key, {}).get("probs")
        if not qv:
            check(False, f"no llama.cpp distribution for {key}")
            continue
        qv = qv + [0.0] * (len(p) - len(qv))
        mean = sum(logits) / len(logits)
        sigma = math.sqrt(sum((x - mean) ** 2 for x in logits) / len(logits))
        dl = max(abs(math.log(a) - math.log(max(b, 1e-30))) for a, b in zip(p, qv) if a > P_MIN)
        tv = 0.5 * sum(abs(a - b) for a, b in zip(p, qv))
        bound = K * U[q] * sigma if U[q] else F32_BOUND
        # the same top token, or a near tie: llama.cpp's top is within 2·bound of dlm's in log p
        tl_ = qv.index(max(qv))
        same = p.index(max(p)) == tl_
        top = same or math.log(max(p)) - math.log(p[tl_]) <= 2 * bound
        print(f"{key:26s} {sigma:6.2f} {dl:12.2e} {bound:9.2e} {dl / (U[q] * sigma) if U[q] else 0:6.2f} {tv:9.2e}  "
              f"{'same' if same else 'near tie' if top else 'DIFFERENT'}")
        worst[q] = max(worst.get(q, 0), dl / bound)
        check(dl <= bound and tv <= TV_MAX and top,
              f"{key}: |dlog p| {dl:.3g} (bound {bound:.3g}), TV {tv:.3g} (max {TV_MAX}), same top token {top}")
    print("largest |dlog p| / bound per mix: " + ", ".join(f"{q} {v:.2f}" for q, v in worst.items()))
    if failures:
        print(f"r0501: {len(failures)} failures")
        return 1
    print("r0501: all exports load in llama.cpp and agree with dlm")
    return 0


if __name__ == "__main__":
    sys.exit(main())
