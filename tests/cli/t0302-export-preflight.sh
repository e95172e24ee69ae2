#!/usr/bin/env bash
# dlm export refusals: usage errors (exit 2), the preflight (unknown
# pre-tokenizer hash with its fix, vocab larger than the embedding, no chat
# template unless --no-template), merge safety for an adapter trained on a
# quantized base (refused, then --dequantize), and a failed write leaving no
# partial file behind.
set -euo pipefail
. "$DLM_SRC/tests/cli/lib.sh"
expect() { # rc pattern cmd...
    local want=$1 pat=$2; shift 2
    set +e
    out=$("$@" 2>&1); rc=$?
    set -e
    [ $rc -eq "$want" ] || fail "'$*' exited $rc, expected $want: $out"
    grep -q -- "$pat" <<<"$out" || fail "'$*' does not say '$pat': $out"
}

# usage errors
write_doc doc.dlm 2
expect 2 "export needs a PATH" "$DLM" export
expect 2 "unknown export target 'coreml'" "$DLM" export doc.dlm --target coreml
expect 2 "unknown --quant 'Q3_K_M'" "$DLM" export doc.dlm --quant Q3_K_M
expect 2 "only applies with --merged" "$DLM" export doc.dlm --dequantize
expect 2 "applies to --target ollama" "$DLM" export doc.dlm --target gguf --name x
"$DLM" train doc.dlm -q >/dev/null
expect 2 "not a valid Ollama model name" "$DLM" export doc.dlm --name "bad name"
expect 1 "is not one of gpt-2" "$DLM" export doc.dlm --target gguf --pre-tokenizer gpt2

# a failed write leaves neither the file nor a temp file
DLM_FAIL_WRITE=base.Q8_0.gguf expect 1 "cannot write" "$DLM" export doc.dlm --target gguf --quant Q8_0
[ -z "$(ls "$DLM_HOME/store/$ID/exports/Q8_0")" ] || fail "files left after a failed write: $(ls "$DLM_HOME/store/$ID/exports/Q8_0")"

# a base copy whose tokenizer files we can break
base() { rm -rf "$T/$1"; cp -r "$FIXTURE_QWEN" "$T/$1"; }
doc_on() { # file id base
    sed -e "s|^dlm_id: .*|dlm_id: $2|" -e "s|^base_model: .*|base_model: $3|" doc.dlm > "$1"
}

# pre-tokenizer llama.cpp cannot name (ByteLevel with add_prefix_space)
base pre
/usr/bin/python3 - "$T/pre/tokenizer.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
t["pre_tokenizer"]["add_prefix_space"] = True
json.dump(t, open(sys.argv[1], "w"))
PY
doc_on pre.dlm 01JD0000000000000000000PRE "$T/pre"
"$DLM" train pre.dlm -q >/dev/null
expect 1 "preflight: unknown pre-tokenizer hash" "$DLM" export pre.dlm --target gguf
grep -q "hint: .*--pre-tokenizer NAME" <<<"$out" || fail "no --pre-tokenizer hint: $out"
"$DLM" export pre.dlm --target gguf --pre-tokenizer gpt-2 -q || fail "--pre-tokenizer gpt-2"

# vocabulary larger than the embedding
base vocab
doc_on vocab.dlm 01JD000000000000000000V0CA "$T/vocab"
"$DLM" train vocab.dlm -q >/dev/null
/usr/bin/python3 - "$T/vocab/tokenizer.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
t["added_tokens"].append({"id": 330, "content": "<|extra|>", "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": True})
json.dump(t, open(sys.argv[1], "w"))
PY
expect 1 "preflight: vocab mismatch: the tokenizer has 331 tokens but the embedding has 320 rows" \
    "$DLM" export vocab.dlm --target gguf

# no chat template: refused unless --no-template
base notmpl
/usr/bin/python3 - "$T/notmpl/tokenizer_config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
del c["chat_template"]
json.dump(c, open(sys.argv[1], "w"))
PY
doc_on notmpl.dlm 01JD0000000000000000000N0T "$T/notmpl"
sed -i '/^::instruction::/,$d' notmpl.dlm   # prose only: Q/A needs a chat template to train
"$DLM" train notmpl.dlm -q >/dev/null
expect 1 "preflight: the base has no chat template" env PATH=/usr/bin:/bin "$DLM" export notmpl.dlm
grep -q "hint: --no-template" <<<"$out" || fail "no --no-template hint: $out"
env PATH=/usr/bin:/bin "$DLM" export notmpl.dlm --no-template -q >/dev/null || fail "--no-template"
mf="$DLM_HOME/store/01JD0000000000000000000N0T/exports/Q4_K_M/Modelfile"
grep -q TEMPLATE "$mf" && fail "--no-template wrote a TEMPLATE"
grep -q '^PARAMETER stop "<|im_end|>"' "$mf" || fail "the tokenizer's end tokens are still stops"

# an adapter trained on a quantized base (Q8_0 GGUF): merge refused, --dequantize allowed
doc_on q.dlm 01JD00000000000000000000QQ "$DLM_SRC/tests/ref/model/fixtures/llama-bf16.q8_0.gguf"
"$DLM" train q.dlm -q >/dev/null
grep -q '"use_qlora": true' "$DLM_HOME/store/01JD00000000000000000000QQ/adapter/versions/v0001/training_run.json" ||
    fail "training_run.json does not record the quantized base"
expect 1 "merge refused: adapter was trained on a quantized base" "$DLM" export q.dlm --target gguf --merged
grep -q "hint: --dequantize" <<<"$out" || fail "no --dequantize hint: $out"
"$DLM" export q.dlm --target gguf --merged --dequantize -q || fail "--merged --dequantize"
"$DLM" export q.dlm --target gguf -q || fail "unmerged export of a QLoRA adapter"
[ -f "$DLM_HOME/store/01JD00000000000000000000QQ/exports/Q4_K_M/merged.Q4_K_M.gguf" ] || fail "no merged file"
/usr/bin/python3 -c "
import json
m = json.load(open('$DLM_HOME/store/01JD00000000000000000000QQ/exports/Q4_K_M/export_manifest.json'))
assert m['merged'] is False and m['dequantized'] is False
" || fail "manifest after the QLoRA export"
echo ok
