#!/usr/bin/env bash
# r0501: the embedded base's tokenizer is a real HF tokenizer. HF tokenizers
# (the Rust library through npm @anush008/tokenizers) loading the shipped
# models/tiny-tokenizer/tokenizer.json gives, line for line on
# tests/ref/tok/corpus.txt, the ids dlm gets from the GGUF metadata of
# models/tiny.gguf (default mode and --no-special), and HF's decode of
# those ids gives the text back.
set -euo pipefail
: "${DLM:?}" "${DLM_SRC:?}" "${DLM_BUILD:?}"
ref=$DLM_SRC/tests/ref
skip() {
    if [ "${DLM_REF_SKIP:-}" = "1" ]; then echo "r0501: skipped: $1"; exit 77; fi
    echo "r0501: FAILED: $1 (run scripts/ref-deps.sh)" >&2; exit 1
}
command -v node >/dev/null || skip "node is not installed"
[ -d "$ref/node_modules/@anush008/tokenizers" ] || skip "npm reference packages are not installed"
gguf=${TINY_GGUF:-$DLM_SRC/models/tiny.gguf}
tk=${TINY_TOKENIZER:-$DLM_SRC/models/tiny-tokenizer/tokenizer.json}
[ -f "$gguf" ] && [ -f "$tk" ] || { echo "r0501: FAILED: $gguf or $tk missing (make tiny-base)" >&2; exit 1; }

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
corpus=$ref/tok/corpus.txt
# ChatML turns as the chat template renders them, too
{ cat "$corpus"; printf '%s\n' '<|im_start|>system' 'You are a tutor.<|im_end|>' \
    '<|im_start|>user' 'What is 2 + 2?<|im_end|><|im_start|>assistant' '2 plus 2 is 4.<|im_end|><|endoftext|>'; } > "$out/corpus.txt"
fail=0
mkdir "$out/hf"
node "$ref/tok/hf_tok.js" all "$tk" "$out/corpus.txt" "$out/hf" default --no-special
for mode in default --no-special; do
    flag=$mode; [ "$mode" = default ] && flag=
    "$DLM" tokenize --lines --tokenizer "$gguf" $flag - < "$out/corpus.txt" > "$out/dlm$mode.jsonl"
    node "$ref/tok/compare.js" "tiny $mode (HF tokenizer.json vs dlm GGUF)" "$out/corpus.txt" \
        "$out/hf/$mode.jsonl" "$out/dlm$mode.jsonl" || fail=1
done
node "$ref/tok/hf_tok.js" decode "$tk" "$out/dlmdefault.jsonl" "$out/dec.jsonl"
node "$ref/tok/compare.js" "tiny HF decode(dlm ids) == x" "$out/corpus.txt" - "$out/dec.jsonl" || fail=1
[ $fail = 0 ] || { echo "r0501: FAILED" >&2; exit 1; }
echo "r0501: ok ($(wc -l < "$out/corpus.txt") lines)"
