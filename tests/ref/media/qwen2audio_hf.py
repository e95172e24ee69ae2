"""Reference for dlm's Qwen2-Audio encoder (r1502): transformers 5.23's
Qwen2AudioForConditionalGeneration on a small random config (no download,
every encoder and projector parameter random, the position table as the
model builds it), run as Qwen2AudioModel.forward runs the tower: the
feature attention mask's lengths, the bidirectional key mask, the audio
tower, the projector, the first audio_output_lengths rows. Inputs: the
Whisper log-mel features (128 bins) of espeak-ng speech (a short clip) and
of a full 30 s synthetic signal. Writes into DIR: q2a.safetensors,
config.json, preprocessor_config.json,
mel.f32 [2][128][3000], nmel.txt, out0.f32, out1.f32."""
import math, os, sys, wave

import numpy as np
import torch
from safetensors.torch import save_file
from transformers import Qwen2AudioConfig, WhisperFeatureExtractor
from transformers.masking_utils import create_bidirectional_mask
from transformers.models.qwen2_audio.modeling_qwen2_audio import Qwen2AudioForConditionalGeneration

out = sys.argv[1]
torch.manual_seed(1502)
cfg = Qwen2AudioConfig(
    audio_config=dict(d_model=32, encoder_layers=2, encoder_attention_heads=4, encoder_ffn_dim=48, num_mel_bins=128,
                      max_source_positions=1500),
    text_config=dict(hidden_size=40, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                     num_key_value_heads=1, vocab_size=300),
    audio_token_id=299)
cfg._attn_implementation = "eager"
cfg.audio_config._attn_implementation = "eager"
model = Qwen2AudioForConditionalGeneration(cfg).eval()
sd = {}
with torch.no_grad():
    for name, p in model.named_parameters():
        if "audio_tower" in name or "multi_modal_projector" in name:
            if "embed_positions" not in name:
                ln = "norm" in name and name.endswith("weight")
                p.copy_(torch.randn_like(p) * (0.5 if p.ndim == 1 else 0.1) + (1.0 if ln else 0.0))
            sd[name] = p.detach().contiguous().clone()
save_file(sd, os.path.join(out, "q2a.safetensors"))
model.config.save_pretrained(out)            # config.json: dlm reads the encoder's shape from it
fe = WhisperFeatureExtractor(feature_size=128)
fe.save_pretrained(out)                      # preprocessor_config.json: and the features' from this
w = wave.open(os.path.join(out, "speech16k.wav"))
assert w.getframerate() == 16000 and w.getsampwidth() == 2 and w.getnchannels() == 1
speech = np.frombuffer(w.readframes(w.getnframes()), "<i2").astype(np.float32) / 32768
t = np.arange(30 * 16000) / 16000
synth = (0.3 * np.sin(2 * math.pi * 330 * t) * np.sin(2 * math.pi * 0.7 * t)).astype(np.float32)
f = fe([speech, synth], sampling_rate=16000, return_attention_mask=True, return_tensors="pt")
feats, fmask = f["input_features"].float(), f["attention_mask"]
m = model.model
with torch.no_grad():
    feat_len, out_len = m.audio_tower._get_feat_extract_output_lengths(fmask.sum(-1))
    B, _, T = feats.shape
    L = (T - 2) // 2 + 1
    mask2d = (torch.arange(L)[None, :] < feat_len[:, None]).long()
    amask = create_bidirectional_mask(config=m.audio_tower.config, inputs_embeds=torch.zeros(B, L, 1), attention_mask=mask2d)
    hs = m.audio_tower(feats, attention_mask=amask).last_hidden_state
    proj = m.multi_modal_projector(hs)
feats.numpy().astype(np.float32).tofile(os.path.join(out, "mel.f32"))
with open(os.path.join(out, "nmel.txt"), "w") as fh:
    for i in range(B):
        fh.write("%d %d\n" % (int(fmask[i].sum()), int(out_len[i])))
        proj[i, : int(out_len[i])].numpy().astype(np.float32).tofile(os.path.join(out, "out%d.f32" % i))
print("qwen2audio_hf: mel frames %s, audio tokens %s, max|out| %.3g, e.g. %s" % (
    fmask.sum(-1).tolist(), out_len.tolist(), proj.abs().max(), sorted(sd)[0]))
