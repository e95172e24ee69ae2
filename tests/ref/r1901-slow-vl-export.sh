#!/bin/bash
# r1901: `dlm export` of vision-language bases (export/mm_export.h) on small
# random Qwen2-VL and PaliGemma checkpoints built by transformers 5.23 from a
# config, with a PEFT 0.21 LoRA adapter (tests/ref/export/vl_fixture.py):
#  - the language GGUF and the mmproj equal what llama.cpp's own
#    convert_hf_to_gguf.py (+ --mmproj) writes from the same folder, key for
#    key and tensor for tensor (F32 and F16);
#  - llama-mtmd-cli (built from node-llama-cpp's llama.cpp by
#    bench/build-llama.sh, cached in ~/.cache/dlm-bench) on base + adapter.gguf
#    + mmproj, and on the merged GGUF + mmproj, prints for an image exactly
#    the bytes of transformers' greedy generate with the PEFT adapter (16
#    tokens);
#  - `dlm prompt --image`: its greedy tokens for the
#    same prompt are transformers' too (the adapter under dlm's names);
#  - the HF snapshot loads with transformers + PEFT (snapshot_check.py), for
#    both bases; PaliGemma exports the snapshot by default and refuses GGUF.
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
dir=$(mktemp -d "${TMPDIR:-/tmp}/dlm-r1901.XXXXXX")
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
export DLM_HOME="$dir/home"
ID=01JD0000000000000000000000
# store KIND [ADAPTER]: a document on $dir/KIND/base whose store's current adapter is $dir/KIND/ADAPTER
store() {
    printf -- '---\ndlm_id: %s\ndlm_version: 15\nbase_model: %s\n---\n# Images\n\nProse.\n' "$ID" "$dir/$1/base" > "$dir/$1.dlm"
    S="$DLM_HOME/store/$ID"
    rm -rf "$S"
    mkdir -p "$S/adapter/versions/v0001"
    cp "$dir/$1/${2:-adapter}/adapter_config.json" "$dir/$1/${2:-adapter}/adapter_model.safetensors" "$S/adapter/versions/v0001/"
    echo adapter/versions/v0001 > "$S/adapter/current.txt"
    printf '{"dlm_id": "%s", "base_model": "./base"}\n' "$ID" > "$S/manifest.json"   # the fields manifest_load requires
}
# mtmd OUT REF ARGS...: llama-mtmd-cli's greedy answer (16 tokens) must be
# REF's bytes (it prints "\n", the tokens, then newlines). Its asynchronous
# logger (common/log.cpp) now and then loses lines of stdout at exit in this
# llama.cpp version: a run that prints fewer bytes is run again (up to 5
# times); a run that prints other bytes fails at once.
mtmd() {
    local out=$1 ref=$2 try; shift 2
    for try in 1 2 3 4 5; do
        "$mtmd_bin" "$@" -p "Describe it." --chat-template chatml --temp 0 -n 16 -t 2 --no-warmup > "$out" 2> "$out.log" ||
            { tail -20 "$out.log" >&2; fail "llama-mtmd-cli failed"; }
        "$py" - "$out" "$ref" <<'PY' && return 0 || [ $? = 2 ] || fail "llama-mtmd-cli printed other bytes than transformers' greedy tokens ($out)"
import sys
out, ref = open(sys.argv[1], "rb").read(), open(sys.argv[2], "rb").read()
got = out[1:].rstrip(b"\n") if out.startswith(b"\n") else out.rstrip(b"\n")
ok = got == ref and len(ref) > 8
print(f"  {sys.argv[1].rsplit('/', 1)[-1]}: {got!r} {'==' if ok else '!='} {ref!r}")
sys.exit(0 if ok else 2 if len(got) < len(ref) else 1)
PY
        echo "  (llama-mtmd-cli's stdout came back short; again)"
    done
    fail "llama-mtmd-cli's stdout came back short 5 times ($out)"
}

"$py" "$DLM_SRC/tests/ref/export/vl_fixture.py" "$dir/q" qwen2vl 2>/dev/null | grep vl_fixture
store q adapter_dlm   # the adapter as dlm trains it (its names)
E="$DLM_HOME/store/$ID/exports"
for quant in F32 F16; do
    "$DLM" export "$dir/q.dlm" --target gguf --quant $quant
    o=$(echo $quant | tr A-Z a-z)
    "$py" "$DLM_SRC/tests/ref/export/convert_ref.py" "$llama" qwen2 "$dir/q/base" --outtype $o --outfile "$dir/conv-lang-$o.gguf" >/dev/null 2>&1
    "$py" "$DLM_SRC/tests/ref/export/convert_ref.py" "$llama" qwen2 "$dir/q/base" --mmproj --outtype $o --outfile "$dir/conv-mm-$o.gguf" >/dev/null 2>&1
    "$py" "$DLM_SRC/tests/ref/export/mm_compare.py" "$llama" "$E/$quant/base.$quant.gguf" "$dir/conv-lang-$o.gguf"
    "$py" "$DLM_SRC/tests/ref/export/mm_compare.py" "$llama" "$E/$quant/mmproj.$quant.gguf" "$dir/conv-mm-$o.gguf"
done
"$py" - "$DLM_HOME/store/$ID/manifest.json" "$E/F32" <<'PY' || fail "the store's exports records"
import hashlib, json, sys
x = json.load(open(sys.argv[1]))["exports"]
sha = lambda f: hashlib.sha256(open(f"{sys.argv[2]}/{f}", "rb").read()).hexdigest()
assert [(r["target"], r["quant"]) for r in x] == [("gguf", "F32"), ("gguf", "F16")], x
assert x[0]["base_gguf_sha256"] == sha("base.F32.gguf") and x[0]["adapter_gguf_sha256"] == sha("adapter.gguf"), x[0]
PY
mtmd "$dir/lora.txt" "$dir/q/ref_text.bin" -m "$E/F32/base.F32.gguf" --lora "$E/F32/adapter.gguf" --mmproj "$E/F32/mmproj.F32.gguf" --image "$dir/q/img.png"
"$DLM" export "$dir/q.dlm" --target gguf --quant F32 --merged --out "$dir/merged"
[ -f "$dir/merged/merged.F32.gguf" ] && [ ! -e "$dir/merged/adapter.gguf" ] || fail "--merged wrote $(ls "$dir/merged")"
# the merged GGUF against PEFT's merge_and_unload()
mtmd "$dir/merged.txt" "$dir/q/ref_text_merged.bin" -m "$dir/merged/merged.F32.gguf" --mmproj "$dir/merged/mmproj.F32.gguf" --image "$dir/q/img.png"
# the default target: the pair and a Modelfile with the projector as a second FROM
"$DLM" export "$dir/q.dlm" --quant F16 --out "$dir/ollama" > "$dir/ollama.out"
grep -q '^FROM ./base.F16.gguf$' "$dir/ollama/Modelfile" && grep -q '^FROM ./mmproj.F16.gguf$' "$dir/ollama/Modelfile" &&
    grep -q '^ADAPTER ./adapter.gguf$' "$dir/ollama/Modelfile" || fail "Modelfile: $(cat "$dir/ollama/Modelfile")"
# dlm's own answer to the same prompt (`dlm prompt --image`):
# the same 16 tokens as transformers and llama-mtmd-cli
if "$DLM" prompt --help 2>&1 | grep -q -- '--image'; then
    "$DLM" prompt "$dir/q.dlm" "Describe it." --image "$dir/q/img.png" --temp 0 --max-tokens 16 --json > "$dir/prompt.json"
    "$py" - "$dir/prompt.json" "$dir/q/ref_tokens.txt" "$dir/q/prompt_ids.txt" <<'PY' || fail "dlm prompt --image --temp 0 differs from transformers"
import json, sys
j = json.load(open(sys.argv[1]))
ref, pids = [int(x) for x in open(sys.argv[2]).read().split()], [int(x) for x in open(sys.argv[3]).read().split()]
print(f"  dlm prompt --image: prompt {'==' if j['prompt_tokens'] == pids else '!='}, tokens {j['tokens']} vs {ref}")
sys.exit(0 if j["tokens"] == ref and j["prompt_tokens"] == pids else 1)
PY
else
    fail "dlm prompt has no --image"
fi
store q   # PEFT's own adapter folder: the snapshot must load it
"$DLM" export "$dir/q.dlm" --target hf-snapshot
"$py" "$DLM_SRC/tests/ref/export/snapshot_check.py" "$dir/q" "$E/hf-snapshot" qwen2vl 2>/dev/null

"$py" "$DLM_SRC/tests/ref/export/vl_fixture.py" "$dir/p" paligemma 2>/dev/null | grep vl_fixture
store p
"$DLM" export "$dir/p.dlm" | grep -q "PaliGemma HF snapshot" || fail "PaliGemma's default export is not the snapshot"
"$py" "$DLM_SRC/tests/ref/export/snapshot_check.py" "$dir/p" "$E/hf-snapshot" paligemma 2>/dev/null
if "$DLM" export "$dir/p.dlm" --target gguf 2> "$dir/err"; then fail "PaliGemma --target gguf was accepted"; fi
grep -q "llama.cpp cannot run PaliGemma" "$dir/err" && grep -q "hint: use --target hf-snapshot" "$dir/err" || fail "$(cat "$dir/err")"
echo "r1901: ok"
