#!/bin/bash
# r1902: `dlm export` of an audio-language base (export/mm_export.h) on a
# small random Qwen2-Audio checkpoint built by transformers 5.23 from a
# config, with a PEFT 0.21 LoRA adapter (tests/ref/export/vl_fixture.py):
#  - the default export is the original's HF audio snapshot
#    (exports/hf-audio-snapshot), which loads with transformers + PEFT;
#  - --target gguf: the language GGUF (qwen2) and the mmproj (projector
#    qwen2a: the Whisper encoder + projector) equal what llama.cpp's
#    convert_hf_to_gguf.py (+ --mmproj) writes, F32 and F16;
#  - llama-mtmd-cli --audio on base + adapter.gguf + mmproj prints exactly
#    the bytes of transformers' greedy generate with the adapter (16 tokens)
#    for a 29.99 s clip (750 audio tokens on both sides);
#  - `dlm prompt --audio`: its greedy tokens for
#    the same prompt are transformers' too (the adapter under dlm's names);
#  - --target ollama is refused (Ollama takes no audio).
set -eu
: "${DLM:?}" "${DLM_SRC:?}"
venv=$("$DLM_SRC/scripts/ref-venv.sh" orig) || {
    if [ "${DLM_REF_SKIP:-}" = "1" ]; then echo "skip: the orig reference venv (torch, transformers, peft) is unavailable"; exit 77; fi
    exit 1
}
mtmd_bin=$("$DLM_SRC/bench/build-llama.sh" llama-mtmd-cli) || {
    if [ "${DLM_REF_SKIP:-}" = "1" ]; then echo "skip: llama-mtmd-cli cannot be built"; exit 77; fi
    exit 1
}
llama=$(dirname "$(dirname "$(dirname "$mtmd_bin")")")
py="$venv/bin/python"
dir=$(mktemp -d "${TMPDIR:-/tmp}/dlm-r1902.XXXXXX")
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
export DLM_HOME="$dir/home"
ID=01JD0000000000000000000000
"$py" "$DLM_SRC/tests/ref/export/vl_fixture.py" "$dir/a" qwen2audio 2>/dev/null | grep vl_fixture
printf -- '---\ndlm_id: %s\ndlm_version: 15\nbase_model: %s\n---\n# Clips\n\nProse.\n' "$ID" "$dir/a/base" > "$dir/a.dlm"
S="$DLM_HOME/store/$ID"
mkdir -p "$S/adapter/versions/v0001"
cp "$dir/a/adapter/adapter_config.json" "$dir/a/adapter/adapter_model.safetensors" "$S/adapter/versions/v0001/"
echo adapter/versions/v0001 > "$S/adapter/current.txt"
printf '{"dlm_id": "%s", "base_model": "./base"}\n' "$ID" > "$S/manifest.json"   # the fields manifest_load requires
E="$S/exports"

"$DLM" export "$dir/a.dlm" | grep -q "Qwen2-Audio HF snapshot" || fail "the default export is not the audio snapshot"
"$py" "$DLM_SRC/tests/ref/export/snapshot_check.py" "$dir/a" "$E/hf-audio-snapshot" qwen2audio 2>/dev/null
# the GGUF pair from the adapter as dlm trains it (its names)
cp "$dir/a/adapter_dlm/adapter_config.json" "$dir/a/adapter_dlm/adapter_model.safetensors" "$S/adapter/versions/v0001/"
for quant in F32 F16; do
    "$DLM" export "$dir/a.dlm" --target gguf --quant $quant > /dev/null
    o=$(echo $quant | tr A-Z a-z)
    "$py" "$DLM_SRC/tests/ref/export/convert_ref.py" "$llama" qwen2 "$dir/a/base" --outtype $o --outfile "$dir/conv-lang-$o.gguf" >/dev/null 2>&1
    "$py" "$DLM_SRC/tests/ref/export/convert_ref.py" "$llama" qwen2 "$dir/a/base" --mmproj --outtype $o --outfile "$dir/conv-mm-$o.gguf" >/dev/null 2>&1
    "$py" "$DLM_SRC/tests/ref/export/mm_compare.py" "$llama" "$E/$quant/base.$quant.gguf" "$dir/conv-lang-$o.gguf"
    "$py" "$DLM_SRC/tests/ref/export/mm_compare.py" "$llama" "$E/$quant/mmproj.$quant.gguf" "$dir/conv-mm-$o.gguf"
done
# llama-mtmd-cli's greedy answer; a run whose stdout comes back short (its
# asynchronous logger loses lines at exit now and then) is run again
for try in 1 2 3 4 5; do
    "$mtmd_bin" -m "$E/F32/base.F32.gguf" --lora "$E/F32/adapter.gguf" --mmproj "$E/F32/mmproj.F32.gguf" --audio "$dir/a/clip.wav" \
        -p "Describe it." --chat-template chatml --temp 0 -n 16 -t 2 --no-warmup > "$dir/out.txt" 2> "$dir/out.log" ||
        { tail -20 "$dir/out.log" >&2; fail "llama-mtmd-cli failed"; }
    "$py" - "$dir/out.txt" "$dir/a/ref_text.bin" <<'PY' && break || [ $? = 2 ] || fail "llama-mtmd-cli printed other bytes than transformers' greedy tokens"
import sys
out, ref = open(sys.argv[1], "rb").read(), open(sys.argv[2], "rb").read()
got = out[1:].rstrip(b"\n") if out.startswith(b"\n") else out.rstrip(b"\n")
ok = got == ref and len(ref) > 8
print(f"  audio: {got!r} {'==' if ok else '!='} {ref!r}")
sys.exit(0 if ok else 2 if len(got) < len(ref) else 1)
PY
    [ $try = 5 ] && fail "llama-mtmd-cli's stdout came back short 5 times"
done
# dlm's own answer (`dlm prompt --audio`): the query holds the
# one placeholder, so the prompt is the one transformers and mtmd were given
if "$DLM" prompt --help 2>&1 | grep -q -- '--audio'; then
    "$DLM" prompt "$dir/a.dlm" --audio "$dir/a/clip.wav" --temp 0 --max-tokens 16 --json \
        $'<|im_start|>user\n<|audio_bos|><|AUDIO|><|audio_eos|>Describe it.<|im_end|>\n<|im_start|>assistant\n' > "$dir/prompt.json"
    "$py" - "$dir/prompt.json" "$dir/a/ref_tokens.txt" "$dir/a/prompt_ids.txt" <<'PY' || fail "dlm prompt --audio --temp 0 differs from transformers"
import json, sys
j = json.load(open(sys.argv[1]))
ref, pids = [int(x) for x in open(sys.argv[2]).read().split()], [int(x) for x in open(sys.argv[3]).read().split()]
print(f"  dlm prompt --audio: prompt {'==' if j['prompt_tokens'] == pids else '!='} ({len(pids)} ids), tokens {j['tokens']} vs {ref}")
sys.exit(0 if j["tokens"] == ref and j["prompt_tokens"] == pids else 1)
PY
else
    fail "dlm prompt has no --audio"
fi
if "$DLM" export "$dir/a.dlm" --target ollama 2> "$dir/err"; then fail "--target ollama was accepted for an audio base"; fi
grep -q "Ollama takes no audio input" "$dir/err" || fail "$(cat "$dir/err")"
echo "r1902: ok"
