"""Fixtures for the vision/audio export tests (r1901, r1902).

  vl_fixture.py OUT qwen2vl|paligemma|qwen2audio

Builds a small random base of the kind from a config (no download), with
the qwen2-f32 fixture's byte-level BPE tokenizer plus the kind's special
tokens, saved as an HF folder the way transformers saves it (OUT/base:
config.json, model.safetensors, the processor's files), and a PEFT LoRA
adapter on the language model's q/k/v/o with random nonzero B (OUT/adapter;
OUT/adapter_dlm: the same under dlm's names).
Weights are drawn larger than the initializer's so that greedy decoding has
clear margins. For qwen2vl it also writes OUT/img.png (112x84, random
pixels: aligned to 28, so neither transformers nor llama.cpp resizes it)
and OUT/ref_tokens.txt: transformers' greedy generate (16 new tokens) of
base + adapter on the prompt llama-mtmd-cli builds with --chat-template
chatml (no BOS, the image between <|vision_start|> and <|vision_end|>,
then "Describe it."), and OUT/prompt_ids.txt, those prompt ids.
"""
import json, os, shutil, sys

import numpy as np
import torch
from PIL import Image

out, kind = sys.argv[1], sys.argv[2]
here = os.path.dirname(os.path.abspath(__file__))
fixture = os.path.join(here, "..", "model", "fixtures", "qwen2-f32")
torch.manual_seed(1901)
np.random.seed(1901)
base, adir = os.path.join(out, "base"), os.path.join(out, "adapter")
os.makedirs(base, exist_ok=True)

from transformers import AutoTokenizer
from peft import LoraConfig, get_peft_model

tok = AutoTokenizer.from_pretrained(fixture)
specials = {"qwen2vl": ["<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>"],
            "paligemma": ["<image>"],
            "qwen2audio": ["<|audio_bos|>", "<|audio_eos|>", "<|AUDIO|>"]}[kind]
tok.add_special_tokens({"additional_special_tokens": specials})
ids = {s: tok.convert_tokens_to_ids(s) for s in specials}
V = len(tok)   # every id a token, so llama.cpp prints each one


def randomize(model, std):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name or "ln_" in name or name.endswith("layer_norm.weight"):
                p.copy_(1.0 + 0.1 * torch.randn_like(p) if name.endswith("weight") else 0.1 * torch.randn_like(p))
            else:
                p.copy_(torch.randn_like(p) * std)


def write_ref(new, tag=""):
    """ref_tokens<tag>.txt, and ref_text<tag>.bin: the bytes llama-mtmd-cli prints for them."""
    # llama-mtmd-cli stops at an end-of-generation token and prints the
    # others' bytes (specials as their text): the same here
    eog = {tok.convert_tokens_to_ids("<|im_end|>"), tok.convert_tokens_to_ids("<|endoftext|>")}
    cut = next((i for i, t in enumerate(new) if t in eog), len(new))
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))   # GPT-2's byte-to-unicode table
    cs, k = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + k)
            k += 1
    inv = {chr(c): b for b, c in zip(bs, cs)}
    text = b""
    for t in new[:cut]:
        piece = tok.convert_ids_to_tokens(t)
        text += piece.encode() if t >= 317 else bytes(inv[ch] for ch in piece)
    with open(os.path.join(out, f"ref_tokens{tag}.txt"), "w") as f:
        f.write(" ".join(map(str, new)) + "\n")
    with open(os.path.join(out, f"ref_text{tag}.bin"), "wb") as f:
        f.write(text)


if kind == "qwen2vl":
    from transformers import Qwen2VLConfig, Qwen2VLForConditionalGeneration
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil
    cfg = Qwen2VLConfig(
        text_config=dict(vocab_size=V, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, rms_norm_eps=1e-6, max_position_embeddings=2048,
                         rope_scaling={"type": "mrope", "mrope_section": [2, 3, 3]},
                         bos_token_id=tok.convert_tokens_to_ids("<|endoftext|>"), eos_token_id=tok.convert_tokens_to_ids("<|im_end|>")),
        vision_config=dict(depth=3, embed_dim=32, hidden_size=64, num_heads=2, mlp_ratio=2, patch_size=14,
                           spatial_merge_size=2, temporal_patch_size=2),
        image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"])
    cfg._attn_implementation = "eager"
    model = Qwen2VLForConditionalGeneration(cfg).eval()
    randomize(model, 0.15)
    proc = Qwen2VLImageProcessorPil()
    target = ["q_proj", "k_proj", "v_proj", "o_proj"]
elif kind == "paligemma":
    from transformers import PaliGemmaConfig, PaliGemmaForConditionalGeneration, PaliGemmaProcessor, SiglipImageProcessor
    cfg = PaliGemmaConfig(
        text_config=dict(model_type="gemma", vocab_size=V, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=1, head_dim=16),
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                           image_size=28, patch_size=14, projection_dim=64),
        image_token_index=ids["<image>"], projection_dim=64)
    model = PaliGemmaForConditionalGeneration(cfg).eval()
    randomize(model, 0.15)
    proc = SiglipImageProcessor(size={"height": 28, "width": 28})
    target = r".*language_model.*\.(q_proj|k_proj|v_proj|o_proj)"
else:
    from transformers import Qwen2AudioConfig, Qwen2AudioForConditionalGeneration, Qwen2AudioProcessor, WhisperFeatureExtractor
    cfg = Qwen2AudioConfig(
        text_config=dict(model_type="qwen2", vocab_size=V, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2),
        audio_config=dict(d_model=32, encoder_layers=3, encoder_attention_heads=2, encoder_ffn_dim=64, num_mel_bins=128,
                          max_source_positions=1500),
        audio_token_index=ids["<|AUDIO|>"])
    model = Qwen2AudioForConditionalGeneration(cfg).eval()
    randomize(model, 0.15)
    proc = WhisperFeatureExtractor(feature_size=128)
    target = r".*language_model.*\.(q_proj|k_proj|v_proj|o_proj)"

model.save_pretrained(base)
# the processor's parts (the Processor classes want torchvision's video
# processor, which the venv does not have); what a hub checkpoint ships
proc.save_pretrained(base)
tok.save_pretrained(base)
# transformers 5 writes the chat template to chat_template.jinja; the hub's
# checkpoints (Qwen2-VL-2B-Instruct, Qwen2-Audio-7B-Instruct) also carry it in
# tokenizer_config.json, where dlm's tokenizer reads it: the same here
tc_path = os.path.join(base, "tokenizer_config.json")
tc = json.load(open(tc_path))
tc["chat_template"] = tok.chat_template
json.dump(tc, open(tc_path, "w"), indent=2)

lcfg = LoraConfig(r=4, lora_alpha=8, target_modules=target, lora_dropout=0.0)
peft_model = get_peft_model(model, lcfg)
with torch.no_grad():
    for name, p in peft_model.named_parameters():
        if "lora_" in name:
            p.copy_(torch.randn_like(p) * 0.3)
peft_model.save_pretrained(adir)
peft_model.eval()
# the same adapter under the names dlm's trainer writes for these bases (the
# hub layout's: base_model.model.model.layers.N..., not transformers 5's
# model.language_model.layers.N...): OUT/adapter_dlm
from safetensors.torch import load_file, save_file
os.makedirs(adir + "_dlm", exist_ok=True)
acfg = json.load(open(os.path.join(adir, "adapter_config.json")))
acfg["target_modules"] = ["q_proj", "k_proj", "v_proj", "o_proj"]   # dlm's form (a list; the pairs are the same)
json.dump(acfg, open(os.path.join(adir + "_dlm", "adapter_config.json"), "w"), indent=2)
sd = load_file(os.path.join(adir, "adapter_model.safetensors"))
save_file({k.replace("model.language_model.layers.", "model.layers.").replace("language_model.model.layers.", "model.layers."): v
           for k, v in sd.items()}, os.path.join(adir + "_dlm", "adapter_model.safetensors"), metadata={"format": "pt"})

if kind == "qwen2vl":
    rng = np.random.default_rng(1901)
    img = Image.fromarray(rng.integers(0, 256, size=(84, 112, 3), dtype=np.uint8), "RGB")
    img.save(os.path.join(out, "img.png"))
    pix = proc(images=[img], return_tensors="pt")
    grid = pix["image_grid_thw"]
    n_img = int(grid.prod()) // 4
    text = ("<|im_start|>user\n<|vision_start|>" + "<|image_pad|>" * n_img +
            "<|vision_end|>Describe it.<|im_end|>\n<|im_start|>assistant\n")
    input_ids = tok(text, return_tensors="pt", add_special_tokens=False)["input_ids"]
    kw = dict(input_ids=input_ids, attention_mask=torch.ones_like(input_ids), pixel_values=pix["pixel_values"],
              image_grid_thw=grid, max_new_tokens=16, do_sample=False, eos_token_id=None, pad_token_id=0,
              # M-RoPE needs to know which ids are image tokens (the processor's output)
              mm_token_type_ids=(input_ids == ids["<|image_pad|>"]).int(), output_scores=True,
              return_dict_in_generate=True)
    with torch.no_grad():
        gen = peft_model.generate(**kw)
    new = gen.sequences[0, input_ids.shape[1]:].tolist()
    write_ref(new)
    margins = [float(x.topk(2).values[0, 0] - x.topk(2).values[0, 1]) for x in gen.scores]
    # the merged weights W + s·B·A (PEFT's merge_and_unload): the reference of --merged
    with torch.no_grad():
        merged = peft_model.merge_and_unload()
        gm = merged.generate(**kw)
    write_ref(gm.sequences[0, input_ids.shape[1]:].tolist(), "_merged")
    print("vl_fixture: top-2 logit margins", " ".join(f"{x:.3f}" for x in margins))
    with open(os.path.join(out, "prompt_ids.txt"), "w") as f:
        f.write(" ".join(map(str, input_ids[0].tolist())) + "\n")
    print(f"vl_fixture: grid {grid.tolist()}, {n_img} image tokens, greedy {new}")
if kind == "qwen2audio":
    # 479,800 samples at 16 kHz (16-bit PCM), 25 ms short of 30 s: transformers
    # pads it to 30 s and its mask keeps 2999 frames (750 audio tokens);
    # llama.cpp's mtmd appends 30 s of zeros and encodes the first 3000-frame
    # window only when the clip is under 479,840 samples, also 750 tokens
    # (a full 30 s clip gives it a second, silent window)
    import wave
    rng = np.random.default_rng(1902)
    t = np.arange(479800) / 16000.0
    sig = 0.3 * np.sin(2 * np.pi * 440 * t) * (1 + np.sin(2 * np.pi * 0.5 * t)) / 2 + 0.05 * rng.standard_normal(t.size)
    pcm = np.clip(np.round(sig * 32767), -32768, 32767).astype("<i2")
    with wave.open(os.path.join(out, "clip.wav"), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(pcm.tobytes())
    audio = pcm.astype(np.float32) / 32768.0
    feats = proc(audio, sampling_rate=16000, return_attention_mask=True, padding="max_length", return_tensors="pt")
    n_aud = 750
    text = ("<|im_start|>user\n<|audio_bos|>" + "<|AUDIO|>" * n_aud +
            "<|audio_eos|>Describe it.<|im_end|>\n<|im_start|>assistant\n")
    input_ids = tok(text, return_tensors="pt", add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        gen = peft_model.generate(input_ids=input_ids, attention_mask=torch.ones_like(input_ids),
                                  input_features=feats["input_features"], feature_attention_mask=feats["attention_mask"],
                                  max_new_tokens=16, do_sample=False, eos_token_id=None, pad_token_id=0)
    # (no mm_token_type_ids: Qwen2-Audio's positions are 1-D)
    new = gen[0, input_ids.shape[1]:].tolist()
    write_ref(new)
    with open(os.path.join(out, "prompt_ids.txt"), "w") as f:
        f.write(" ".join(map(str, input_ids[0].tolist())) + "\n")
    print(f"vl_fixture: {n_aud} audio tokens, greedy {new}")
print("vl_fixture: wrote", sorted(os.listdir(base)), sorted(os.listdir(adir)))
