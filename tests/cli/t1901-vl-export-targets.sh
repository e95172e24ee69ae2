#!/usr/bin/env bash
# dlm export on vision- and audio-language bases (export/mm_export.h), with
# config-only checkpoints (no weights: the HF snapshot copies files and needs
# none; tests/ref/r1901 and r1902 check the weights' exports against
# transformers, PEFT and llama.cpp):
#  - PaliGemma's default export is the original's HF snapshot: adapter/
#    (the version folder's files, byte for byte), processor/ (the base's
#    processor and tokenizer files, nothing else), snapshot_manifest.json with
#    the original's keys and PaliGemma's plan (<image> x 256 at 224), README.md;
#    a second export replaces it; the store's manifest.json records it;
#  - bad cases, each a clear error with a hint and nothing written under
#    exports/: targets that cannot carry the tower (vllm, mlx-serve,
#    llama-server), PaliGemma as GGUF, Qwen2-Audio for Ollama, GGUF-only
#    options with --target hf-snapshot, --adapter-mix, a base folder without
#    its image processor, no trained adapter, hf-snapshot on a text base,
#    a Qwen2-VL GGUF pair without weights.
. "$(dirname "$0")/lib.sh"
mkbase() {   # DIR ARCH MODEL_TYPE
    mkdir -p "$1"
    cat > "$1/config.json" <<CFG
{"architectures": ["$2"], "model_type": "$3",
 "text_config": {"hidden_size": 64, "num_hidden_layers": 2, "vocab_size": 320, "num_attention_heads": 4},
 "vision_config": {"image_size": 224, "patch_size": 14}, "audio_config": {"max_source_positions": 1500}}
CFG
    cp "$FIXTURE_QWEN/tokenizer.json" "$FIXTURE_QWEN/tokenizer_config.json" "$1/"
    echo '{"image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5], "sampling_rate": 16000}' > "$1/preprocessor_config.json"
}
mkdoc() {   # FILE BASE
    printf -- '---\ndlm_id: %s\ndlm_version: 15\nbase_model: %s\n---\n# Notes\n\nProse.\n' "$ID" "$2" > "$1"
}
S="$DLM_HOME/store/$ID"
train_fake() {   # a trained version: what the snapshot copies
    mkdir -p "$S/adapter/versions/v0001"
    echo '{"r": 4, "lora_alpha": 8, "peft_type": "LORA"}' > "$S/adapter/versions/v0001/adapter_config.json"
    printf 'weights' > "$S/adapter/versions/v0001/adapter_model.safetensors"
    echo adapter/versions/v0001 > "$S/adapter/current.txt"
    printf '{"dlm_id": "%s", "base_model": "./base"}\n' "$ID" > "$S/manifest.json"   # the fields manifest_load requires
}
refused() {   # WHAT MESSAGE ARGS...: fails with MESSAGE and a hint, writes nothing
    local what=$1 msg=$2; shift 2
    rm -rf "$S/exports"
    if "$DLM" export "$@" > out.txt 2> err.txt; then fail "$what was accepted: $(cat out.txt)"; fi
    grep -qF -- "$msg" err.txt || fail "$what: $(cat err.txt)"
    grep -q '^hint: ' err.txt || fail "$what: no hint: $(cat err.txt)"
    [ -z "$(ls -A "$S/exports" 2>/dev/null)" ] || fail "$what wrote $(find "$S/exports")"   # (the store's skeleton has an empty exports/)
}

mkbase pg PaliGemmaForConditionalGeneration paligemma
mkdoc pg.dlm ./pg
refused "an untrained document" "no current adapter" pg.dlm
train_fake
"$DLM" export pg.dlm > out.txt
grep -q "exported the PaliGemma HF snapshot (adapter v0001, 5 files)" out.txt || fail "$(cat out.txt)"
X="$S/exports/hf-snapshot"
[ "$(ls "$X")" = "$(printf 'README.md\nadapter\nprocessor\nsnapshot_manifest.json')" ] || fail "snapshot: $(ls "$X")"
[ "$(ls "$X/processor")" = "$(printf 'preprocessor_config.json\ntokenizer.json\ntokenizer_config.json')" ] || fail "processor/: $(ls "$X/processor")"
cmp "$X/adapter/adapter_model.safetensors" "$S/adapter/versions/v0001/adapter_model.safetensors" || fail "adapter bytes"
python3 - "$X" <<'PY' || fail "snapshot_manifest.json"
import hashlib, json, os, sys
d = sys.argv[1]
m = json.load(open(os.path.join(d, "snapshot_manifest.json")))
want = {"export_target", "created_at", "created_by", "base_model_hf_id", "base_model_revision", "base_model_architecture",
        "modality", "image_token", "num_image_tokens", "target_size", "adapter_version", "adapter_name", "rationale", "artifacts"}
assert set(m) == want, set(m) ^ want
assert (m["export_target"], m["modality"], m["image_token"], m["num_image_tokens"], m["target_size"]) == \
    ("hf_snapshot", "vision-language", "<image>", 256, [224, 224]), m
assert m["base_model_architecture"] == "PaliGemmaForConditionalGeneration" and m["adapter_version"] == 1
assert m["adapter_name"] is None and m["base_model_revision"] is None and m["base_model_hf_id"] == "./pg"
assert len(m["created_at"]) == 19 and m["created_at"][10] == "T"
assert [a["path"] for a in m["artifacts"]] == ["adapter/adapter_config.json", "adapter/adapter_model.safetensors",
    "processor/preprocessor_config.json", "processor/tokenizer.json", "processor/tokenizer_config.json"]
for a in m["artifacts"]:
    b = open(os.path.join(d, a["path"]), "rb").read()
    assert hashlib.sha256(b).hexdigest() == a["sha256"] and len(b) == a["size_bytes"]
PY
grep -q 'PeftModel.from_pretrained(base, "./adapter")' "$X/README.md" || fail "README: $(cat "$X/README.md")"
python3 -c "
import json; x = json.load(open('$S/manifest.json'))['exports']
assert len(x) == 1 and (x[0]['target'], x[0]['quant'], x[0]['merged'], x[0]['base_gguf_sha256']) == ('hf-snapshot', 'HF', False, None), x
" || fail "the store's exports record"
# a second export replaces the first (a new version's files, no leftovers)
echo 'v2' > "$S/adapter/versions/v0001/extra.txt"
"$DLM" export pg.dlm --target hf-snapshot > /dev/null
[ -f "$X/adapter/extra.txt" ] && [ -z "$(ls -A "$S/exports" | grep -v '^hf-snapshot$')" ] || fail "re-export: $(ls -A "$S/exports")"
rm "$S/adapter/versions/v0001/extra.txt"

refused "vllm" "--target vllm cannot carry the vision tower of a PaliGemma base" pg.dlm --target vllm
refused "mlx-serve" "--target mlx-serve cannot carry" pg.dlm --target mlx-serve
refused "llama-server" "--target llama-server cannot carry" pg.dlm --target llama-server
refused "PaliGemma as GGUF" "llama.cpp cannot run PaliGemma" pg.dlm --target gguf
refused "PaliGemma for Ollama" "llama.cpp cannot run PaliGemma" pg.dlm --target ollama
refused "--quant with the snapshot" "--quant does not apply to the HF snapshot" pg.dlm --target hf-snapshot --quant Q8_0
refused "--merged with the snapshot" "--merged does not apply to the HF snapshot" pg.dlm --merged
refused "--adapter-mix" "--adapter-mix is not built for PaliGemma bases" pg.dlm --adapter-mix v0001:1
rm pg/preprocessor_config.json
refused "no image processor" "has no preprocessor_config.json (the image processor)" pg.dlm

mkbase au Qwen2AudioForConditionalGeneration qwen2_audio
mkdoc au.dlm ./au
refused "audio for Ollama" "Ollama takes no audio input" au.dlm --target ollama
"$DLM" export au.dlm > out.txt
grep -q "exported the Qwen2-Audio HF snapshot" out.txt && [ -f "$S/exports/hf-audio-snapshot/snapshot_manifest.json" ] || fail "$(cat out.txt)"
python3 -c "
import json,sys; m=json.load(open('$S/exports/hf-audio-snapshot/snapshot_manifest.json'))
assert (m['modality'], m['audio_token'], m['num_audio_tokens'], m['sample_rate'], m['max_length_seconds']) == ('audio-language', '<|AUDIO|>', 750, 16000, 30.0), m
assert 'image_token' not in m" || fail "audio manifest"
# Qwen2-VL without weights: the GGUF pair names what is missing
mkbase vl Qwen2VLForConditionalGeneration qwen2_vl
mkdoc vl.dlm ./vl
rm -rf "$S/exports"
if "$DLM" export vl.dlm --target gguf 2> err.txt; then fail "a weightless Qwen2-VL exported"; fi
grep -q "safetensors" err.txt || fail "$(cat err.txt)"
[ ! -e "$S/exports/Q4_K_M" ] || fail "a failed export left $(ls "$S/exports")"
# a text base has no snapshot target
write_doc text.dlm
if "$DLM" export text.dlm --target hf-snapshot 2> err.txt; then fail "hf-snapshot on a text base"; fi
grep -q "is for vision- and audio-language bases" err.txt || fail "$(cat err.txt)"
echo "t1901: ok"
