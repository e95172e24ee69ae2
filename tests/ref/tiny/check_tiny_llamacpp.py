#!/usr/bin/env python3
"""llama.cpp's side of the embedded base (tests/ref/r0602).

    check_tiny_llamacpp.py DLM GGUF CORPUS WORKDIR

models/tiny.gguf is loaded by llama.cpp (npm node-llama-cpp 3.21.1 through
tests/ref/export/llama_check.mjs), which then
  * tokenizes every corpus line (plus ChatML turns) as `dlm tokenize --lines`
    does on the same file, with special tokens parsed and as plain text;
  * continues a few raw prompts greedily exactly as `dlm prompt --raw
    --temp 0` does (the first 12 tokens; dlm stops at an end-of-generation
    token, llama.cpp goes on).
Exit status 1 on any difference, with the first few printed."""
import json
import os
import subprocess
import sys

DLM, GGUF, CORPUS, WORK = sys.argv[1:5]
HERE = os.path.dirname(os.path.abspath(__file__))
CHECK = os.path.join(HERE, "..", "export", "llama_check.mjs")
PROMPTS = ["The", "It was a", "Call me", "The President of the United States"]
N = 12


def run(args, stdin=None):
    r = subprocess.run(args, input=stdin, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"r0602: {' '.join(args[:3])} failed ({r.returncode}): {r.stderr.strip()[:800]}")
    return r.stdout


# split on \n only: the corpus has lone \r (and dlm --lines splits on \n)
texts = open(CORPUS, encoding="utf-8", newline="").read().split("\n")
if texts and texts[-1] == "":
    texts.pop()
texts += ["<|im_start|>user What is 2 + 2?<|im_end|><|im_start|>assistant 2 plus 2 is 4.<|im_end|>"]
src = "\n".join(texts) + "\n"
mine = {}
for mode, flag in (("special", []), ("plain", ["--no-special"])):
    out = run([DLM, "tokenize", "--lines", "--tokenizer", GGUF, *flag, "-"], stdin=src)
    mine[mode] = [json.loads(l) for l in out.split("\n") if l.strip()]

jobs = [{"id": "tok", "model": GGUF, "texts": texts}]
greedy = {}
for i, p in enumerate(PROMPTS):
    ids = json.loads(run([DLM, "tokenize", "--tokenizer", GGUF, "--json", p]))
    ids = ids["ids"] if isinstance(ids, dict) else ids
    jobs.append({"id": f"g{i}", "model": GGUF, "lora": None, "ids": ids, "greedy": N})
    greedy[i] = json.loads(run([DLM, "prompt", "--base", GGUF, "--raw", "--temp", "0", "-n", str(N), "--json", p]))["tokens"]

jp, op = os.path.join(WORK, "jobs.json"), os.path.join(WORK, "out.json")
json.dump(jobs, open(jp, "w"))
subprocess.run(["node", CHECK, jp, op], check=True)
lc = json.load(open(op))
bad = 0
if "error" in lc.get("tok", {}):
    sys.exit(f"r0602: llama.cpp could not load {GGUF}: {lc['tok']['error']}")
for mode in ("special", "plain"):
    theirs = lc["tok"][mode]
    if len(theirs) != len(mine[mode]):
        sys.exit(f"r0602: {mode}: {len(theirs)} lines from llama.cpp, {len(mine[mode])} from dlm")
    diff = [i for i in range(len(texts)) if theirs[i] != mine[mode][i]]
    for i in diff[:5]:
        print(f"r0602: {mode} line {i + 1} {texts[i][:60]!r}: llama.cpp {theirs[i][:20]} dlm {mine[mode][i][:20]}")
    print(f"r0602: tokenization ({mode}): {len(texts) - len(diff)}/{len(texts)} lines identical")
    bad += len(diff)
for i, p in enumerate(PROMPTS):
    theirs = lc.get(f"g{i}", {}).get("tokens")
    m = greedy[i]
    ok = theirs is not None and m == theirs[:len(m)] and (len(m) == N or len(theirs) > len(m))
    print(f"r0602: greedy {p!r}: {'identical' if ok else 'DIFFERENT'} (dlm {m}, llama.cpp {theirs})")
    bad += not ok
sys.exit(1 if bad else 0)
