# A random llama-shaped base from the fixture's config (no download), saved
# with save_pretrained into an HF cache snapshot under the id and revision of
# the original's registry key smollm2-135m, with the fixture's ChatML
# tokenizer. A wide init so greedy answers are not one token repeated.
import json, os, shutil, sys, torch
from transformers import LlamaConfig, LlamaForCausalLM
src, hf_home = sys.argv[1:]
from dlm.base_models.registry import BASE_MODELS
spec = BASE_MODELS["smollm2-135m"]
rd = os.path.join(hf_home, "hub", "models--" + spec.hf_id.replace("/", "--"))
dst = os.path.join(rd, "snapshots", spec.revision)
os.makedirs(os.path.join(rd, "refs"), exist_ok=True)
open(os.path.join(rd, "refs", "main"), "w").write(spec.revision)
c = json.load(open(os.path.join(src, "config.json")))
for k in ("transformers_version", "rope_scaling"): c.pop(k, None)
c.update(torch_dtype="float32", hidden_size=64, intermediate_size=128, initializer_range=0.2)
torch.manual_seed(0)
m = LlamaForCausalLM(LlamaConfig(**c)).to(torch.float32)
m.save_pretrained(dst, safe_serialization=True)
for f in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
    shutil.copy(os.path.join(src, f), os.path.join(dst, f))
print(spec.revision)
