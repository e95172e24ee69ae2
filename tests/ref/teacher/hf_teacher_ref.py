"""The original's HF teacher (document-language-model 0.10.0,
dlm/synth/teachers.py HfTeacher + dlm/inference/generate.py), restated with
transformers: the system and user prompts flattened, rendered as one user
message through the tokenizer's chat template (the raw text when it has
none), tokenized, generated greedily, decoded without special tokens.
Compares with what `dlm -v synth --teacher hf:MODEL` logged (its "synth:
ask:" and "teacher tokens:" lines and the reply text).

    hf_teacher_ref.py MODEL_DIR DLM_STDERR MAX_NEW_TOKENS"""
import json, sys

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

model_dir, log, max_new = sys.argv[1], sys.argv[2], int(sys.argv[3])
asks, toks, replies = [], [], []
for line in open(log, encoding="utf-8"):
    if line.startswith("synth: ask: "):
        asks.append(json.loads(line[len("synth: ask: "):]))
    elif line.startswith("dlm: debug: teacher tokens: "):
        toks.append(json.loads(line[len("dlm: debug: teacher tokens: "):]))
    elif line.startswith("synth: reply: "):
        replies.append(json.loads(line[len("synth: reply: "):]))
assert asks and len(asks) == len(toks) == len(replies), (len(asks), len(toks), len(replies))

tok = AutoTokenizer.from_pretrained(model_dir)
model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()


def flatten(system, user):  # teachers._flatten_teacher_prompt
    system, user = system.strip(), user.strip()
    if system and user:
        return f"System:\n{system}\n\nUser:\n{user}\n\nAssistant:\n"
    return user if user else system


for ask, t, reply in zip(asks, toks, replies):
    prompt = flatten(ask["system"], ask["user"])
    if getattr(tok, "chat_template", None):  # generate.format_chat_prompt
        prompt = tok.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False,
                                         add_generation_prompt=True)
    inputs = tok(prompt, return_tensors="pt")
    ids = inputs["input_ids"][0].tolist()
    assert ids == t["prompt_ids"], f"prompt ids differ:\n transformers {ids}\n dlm {t['prompt_ids']}"
    with torch.inference_mode():
        out = model.generate(**inputs, max_new_tokens=max_new, do_sample=False, num_beams=1,
                             pad_token_id=tok.pad_token_id)
    want = out[0, len(ids):].tolist()
    got = t["reply_ids"]
    if t["stopped_by"] >= 0:
        # dlm leaves its stop token out; transformers keeps the eos it stopped at
        assert want[:len(got)] == got and len(want) > len(got) and want[len(got)] == t["stopped_by"], (got, want)
        want = want[:len(got) + 1]
    else:
        assert got == want, f"greedy tokens differ:\n transformers {want}\n dlm {got}"
    text = tok.decode(out[0, len(ids):len(ids) + len(want)], skip_special_tokens=True)
    # a random model may emit the byte 0: dlm's replies are C strings, cut there
    text = text.split("\x00")[0]
    assert text == reply, f"reply text differs: transformers {text!r} dlm {reply!r}"
    print(f"hf teacher: {len(ids)} prompt tokens and {len(got)} greedy tokens equal, reply text equal")
