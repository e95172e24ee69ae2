#!/usr/bin/python3
"""Turn a small random Qwen2 folder written by tests/ref/make_model.py
(--arch qwen2 --dtype f32, one shard) into a small random Qwen2-Audio
checkpoint, numpy only:

- the tokenizer gains <|AUDIO|>, <|audio_bos|>, <|audio_eos|> as added
  special tokens after the others (Qwen2-Audio's ids are likewise past the
  text vocabulary), and the embedding and LM head three random rows;
- a random Whisper-style audio tower (conv1, conv2, the sinusoid position
  table Whisper uses, encoder layers, layer_norm) and projector;
- config.json becomes a Qwen2AudioConfig: audio_config, text_config (the
  Qwen2 config), audio_token_index;
- the tensors named as hub checkpoints name them (--layout hub:
  audio_tower.*, multi_modal_projector.*, language_model.model.*,
  language_model.lm_head.*) or as transformers 5 saves them (--layout v5:
  model.audio_tower.*, model.multi_modal_projector.*,
  model.language_model.*, lm_head.*);
- preprocessor_config.json: WhisperFeatureExtractor with 128 bins.

  make_qwen2audio.py DIR [--layout hub|v5] [--d-model 32] [--layers 2]
                         [--heads 4] [--ffn 48] [--seed S]
"""
import argparse
import json
import math
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from make_model import write_safetensors  # noqa: E402

AUDIO_SPECIALS = ["<|AUDIO|>", "<|audio_bos|>", "<|audio_eos|>"]


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        hdr = json.loads(f.read(n))
        data = f.read()
    out = {}
    for k, v in hdr.items():
        if k == "__metadata__":
            continue
        assert v["dtype"] == "F32", (k, v["dtype"])
        a, b = v["data_offsets"]
        out[k] = np.frombuffer(data[a:b], dtype="<f4").reshape(v["shape"]).copy()
    return out


def sinusoids(length, channels, max_timescale=10000):
    """Whisper's position table (transformers' sinusoids())."""
    inc = np.log(max_timescale) / (channels // 2 - 1)
    inv = np.exp(-inc * np.arange(channels // 2, dtype=np.float32)).astype(np.float32)
    t = np.arange(length, dtype=np.float32)[:, None] * inv[None, :]
    return np.concatenate([np.sin(t), np.cos(t)], axis=1).astype(np.float32)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--layout", choices=["hub", "v5"], default="hub")
    ap.add_argument("--d-model", type=int, default=32)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--ffn", type=int, default=48)
    ap.add_argument("--seed", type=int, default=1700)
    a = ap.parse_args()
    d = a.dir
    rng = np.random.RandomState(a.seed)
    w = read_safetensors(os.path.join(d, "model.safetensors"))
    tcfg = json.load(open(os.path.join(d, "config.json")))
    V, C = w["model.embed_tokens.weight"].shape
    # three more specials, three more rows
    tok = json.load(open(os.path.join(d, "tokenizer.json"), encoding="utf-8"))
    tk = json.load(open(os.path.join(d, "tokenizer_config.json"), encoding="utf-8"))
    for k, s in enumerate(AUDIO_SPECIALS):
        e = {"id": V + k, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": False, "special": True}
        tok["added_tokens"].append(e)
        tk["added_tokens_decoder"][str(V + k)] = {x: e[x] for x in ("content", "lstrip", "normalized", "rstrip",
                                                                    "single_word", "special")}
    json.dump(tok, open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8"), indent=2, ensure_ascii=False)
    json.dump(tk, open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8"), indent=2,
              ensure_ascii=False, sort_keys=True)
    w["model.embed_tokens.weight"] = np.concatenate(
        [w["model.embed_tokens.weight"], (rng.standard_normal((3, C)) * 0.5).astype(np.float32)])
    if "lm_head.weight" in w:
        w["lm_head.weight"] = np.concatenate(
            [w["lm_head.weight"], (rng.standard_normal((3, C)) * 0.2).astype(np.float32)])
    V += 3
    tcfg["vocab_size"] = V
    D, F, M, P = a.d_model, a.ffn, 128, 1500

    def r(*shape, s=0.1, mean=0.0):
        return (rng.standard_normal(shape) * s + mean).astype(np.float32)

    tw = {"conv1.weight": r(D, M, 3), "conv1.bias": r(D, s=0.1), "conv2.weight": r(D, D, 3, s=0.1),
          "conv2.bias": r(D, s=0.1), "embed_positions.weight": sinusoids(P, D)}
    for i in range(a.layers):
        p = "layers.%d." % i
        tw.update({p + "self_attn_layer_norm.weight": r(D, s=0.1, mean=1), p + "self_attn_layer_norm.bias": r(D),
                   p + "self_attn.q_proj.weight": r(D, D, s=0.2), p + "self_attn.q_proj.bias": r(D),
                   p + "self_attn.k_proj.weight": r(D, D, s=0.2),
                   p + "self_attn.v_proj.weight": r(D, D, s=0.2), p + "self_attn.v_proj.bias": r(D),
                   p + "self_attn.out_proj.weight": r(D, D, s=0.2), p + "self_attn.out_proj.bias": r(D),
                   p + "final_layer_norm.weight": r(D, s=0.1, mean=1), p + "final_layer_norm.bias": r(D),
                   p + "fc1.weight": r(F, D, s=0.2), p + "fc1.bias": r(F), p + "fc2.weight": r(D, F, s=0.2),
                   p + "fc2.bias": r(D)})
    tw.update({"layer_norm.weight": r(D, s=0.1, mean=1), "layer_norm.bias": r(D)})
    pw = {"linear.weight": r(C, D, s=0.3), "linear.bias": r(C, s=0.1)}
    if a.layout == "hub":
        pt, pp, pm, ph = "audio_tower.", "multi_modal_projector.", "language_model.model.", "language_model.lm_head."
    else:
        pt, pp, pm, ph = "model.audio_tower.", "model.multi_modal_projector.", "model.language_model.", "lm_head."
    out = {}
    for k, v in tw.items():
        out[pt + k] = v
    for k, v in pw.items():
        out[pp + k] = v
    for k, v in w.items():
        out[(pm + k[6:]) if k.startswith("model.") else (ph + k[8:])] = v
    items = [(k, "f32", v.shape, np.ascontiguousarray(v, dtype=np.float32).tobytes()) for k, v in sorted(out.items())]
    write_safetensors(os.path.join(d, "model.safetensors"), items, {"format": "pt"})
    tcfg.pop("architectures", None)
    tcfg["model_type"] = "qwen2"
    dt = tcfg.pop("torch_dtype", None) or tcfg.pop("dtype", None) or "float32"
    cfg = {
        "architectures": ["Qwen2AudioForConditionalGeneration"], "model_type": "qwen2_audio",
        "audio_config": {"model_type": "qwen2_audio_encoder", "d_model": D, "encoder_layers": a.layers,
                         "encoder_attention_heads": a.heads, "encoder_ffn_dim": F, "num_mel_bins": M,
                         "max_source_positions": P, "activation_function": "gelu", "dropout": 0.0,
                         "attention_dropout": 0.0, "activation_dropout": 0.0, "scale_embedding": False},
        "text_config": tcfg, "audio_token_index": V - 3, "vocab_size": V, "torch_dtype": dt,
        "transformers_version": "4.45.0",
    }
    json.dump(cfg, open(os.path.join(d, "config.json"), "w"), indent=2, sort_keys=True)
    pre = {"chunk_length": 30, "feature_extractor_type": "WhisperFeatureExtractor", "feature_size": M,
           "hop_length": 160, "n_fft": 400, "n_samples": 480000, "nb_max_frames": 3000, "padding_side": "right",
           "padding_value": 0.0, "processor_class": "Qwen2AudioProcessor", "return_attention_mask": True,
           "sampling_rate": 16000}
    json.dump(pre, open(os.path.join(d, "preprocessor_config.json"), "w"), indent=2, sort_keys=True)
    print("make_qwen2audio: %s layout, vocab %d (<|AUDIO|> = %d), encoder d %d x %d layers, text width %d" % (
        a.layout, V, V - 3, D, a.layers, C))


if __name__ == "__main__":
    main()
