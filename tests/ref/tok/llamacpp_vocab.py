#!/usr/bin/env python3
"""llama.cpp's published tokenizer test vectors against dlm (tests/ref/r0103).

    llamacpp_vocab.py DLM DIR NAME...

DIR holds, for each NAME (qwen2, llama-bpe, gpt-2, llama-spm, phi-3), llama.cpp's
models/ggml-vocab-NAME.gguf (a vocabulary-only GGUF) and its .inp/.out
pair, as llama.cpp's tests/test-tokenizer-0 reads them: the inputs split on
"\\n__ggml_vocab_test__\\n", one output line of space-separated ids each.
llama.cpp tokenizes them without BOS and without parsing special tokens,
so dlm runs `tokenize --tokenizer X.gguf --json --no-special -` on each
input, fed verbatim on standard input. Exit 1 on any difference."""
import json
import subprocess
import sys

dlm, d, names = sys.argv[1], sys.argv[2], sys.argv[3:]
bad = total = 0
for name in names:
    base = f"{d}/ggml-vocab-{name}.gguf"
    inp = open(base + ".inp", encoding="utf-8", newline="").read().split("\n__ggml_vocab_test__\n")
    if inp and inp[-1] == "":
        inp.pop()
    out = open(base + ".out", encoding="utf-8", newline="").read().split("\n")
    if out and out[-1] == "":
        out.pop()
    if len(inp) != len(out):
        sys.exit(f"r0103: {name}: {len(inp)} inputs but {len(out)} outputs")
    ok = 0
    for text, want in zip(inp, out):
        want = [int(x) for x in want.split()]
        r = subprocess.run([dlm, "tokenize", "--tokenizer", base, "--json", "--no-special", "-"],
                           input=text.encode("utf-8"), capture_output=True)
        if r.returncode != 0:
            print(f"r0103: {name}: dlm failed on {text!r}: {r.stderr.decode(errors='replace').strip()}")
            bad += 1
            continue
        got = json.loads(r.stdout)
        got = got["ids"] if isinstance(got, dict) else got
        if got == want:
            ok += 1
        else:
            bad += 1
            print(f"r0103: {name}: {text!r}: llama.cpp {want} dlm {got}")
    total += len(inp)
    print(f"r0103: {name}: {ok}/{len(inp)} llama.cpp vectors identical")
sys.exit(1 if bad else 0)
