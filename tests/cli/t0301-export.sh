#!/usr/bin/env bash
# dlm export end to end on the fixture base (qwen2-f32): nothing trained →
# "no current adapter"; gguf / ollama / llama-server targets and their
# files; export_manifest.json (sha256 and size of every artifact); the store
# manifest's exports; an unchanged base reused after its sha256 check (and
# rewritten when it was tampered with); --merged; ollama create + smoke with
# a stand-in `ollama` on PATH; two exports at once both recorded.
set -euo pipefail
. "$DLM_SRC/tests/cli/lib.sh"
write_doc doc.dlm 2
S="$DLM_HOME/store/$ID"
py() { /usr/bin/python3 -c "$@"; }
noollama() { env PATH=/usr/bin:/bin "$@"; }   # no ollama anywhere on PATH

# nothing trained yet
set +e
out=$("$DLM" export doc.dlm 2>&1); rc=$?
set -e
[ $rc -eq 1 ] || fail "export without an adapter should exit 1, got $rc"
grep -q "no current adapter" <<<"$out" || fail "no 'no current adapter': $out"
grep -q "hint: .*dlm train doc.dlm" <<<"$out" || fail "no 'dlm train' hint: $out"

"$DLM" train doc.dlm -q >/dev/null

# gguf target: GGUF files and the manifest only
out=$("$DLM" export doc.dlm --target gguf --quant Q8_0)
X="$S/exports/Q8_0"
for f in base.Q8_0.gguf adapter.gguf export_manifest.json; do [ -f "$X/$f" ] || fail "missing $f"; done
[ ! -e "$X/Modelfile" ] || fail "gguf target wrote a Modelfile"
grep -q "exported Q8_0 (adapter v0001" <<<"$out" || fail "summary: $out"
py "
import json, hashlib, os, sys
d = '$X'
m = json.load(open(os.path.join(d, 'export_manifest.json')))
assert m['target'] == 'gguf' and m['quant'] == 'Q8_0' and m['merged'] is False and m['adapter_version'] == 1, m
assert m['reused_base'] is False and m['pre_tokenizer'] == 'gpt-2', m
paths = sorted(a['path'] for a in m['artifacts'])
assert paths == ['adapter.gguf', 'base.Q8_0.gguf'], paths
for a in m['artifacts']:
    b = open(os.path.join(d, a['path']), 'rb').read()
    assert a['sha256'] == hashlib.sha256(b).hexdigest() and a['size_bytes'] == len(b), a
s = json.load(open('$S/manifest.json'))
e = s['exports'][-1]
assert e['quant'] == 'Q8_0' and e['target'] == 'gguf' and e['ollama_name'] is None, e
assert e['base_gguf_sha256'] == [a['sha256'] for a in m['artifacts'] if a['path'] == 'base.Q8_0.gguf'][0], e
assert e['adapter_gguf_sha256'] == [a['sha256'] for a in m['artifacts'] if a['path'] == 'adapter.gguf'][0], e
" || fail "export_manifest.json / store manifest"
[ "$(head -c 4 "$X/base.Q8_0.gguf")" = GGUF ] || fail "no GGUF magic"

# unchanged base: reused after the sha256 check
before=$(stat -c %Y.%i "$X/base.Q8_0.gguf")
out=$("$DLM" export doc.dlm --target gguf --quant Q8_0 2>&1)
grep -q "base reused" <<<"$out" || fail "second export did not reuse the base: $out"
[ "$(stat -c %Y.%i "$X/base.Q8_0.gguf")" = "$before" ] || fail "reused base was rewritten"
py "import json; assert json.load(open('$X/export_manifest.json'))['reused_base'] is True" || fail "reused_base"
# tampered base: the sha256 check catches it and the file is written again
py "
f = open('$X/base.Q8_0.gguf', 'r+b'); f.seek(-1, 2); b = f.read(1); f.seek(-1, 2); f.write(bytes([b[0] ^ 0xFF]))
"
out=$("$DLM" export doc.dlm --target gguf --quant Q8_0 2>&1)
grep -q "changed since the last export" <<<"$out" || fail "tampering not noticed: $out"
grep -q "base reused" <<<"$out" && fail "tampered base reused"
py "
import json, hashlib
m = json.load(open('$X/export_manifest.json'))
a = [a for a in m['artifacts'] if a['path'] == 'base.Q8_0.gguf'][0]
assert a['sha256'] == hashlib.sha256(open('$X/base.Q8_0.gguf', 'rb').read()).hexdigest()
" || fail "rewritten base does not match its manifest"

# ollama target, ollama not installed: Modelfile + the commands to run
out=$(noollama "$DLM" export doc.dlm --quant F16)
X="$S/exports/F16"
grep -q "ollama is not installed" <<<"$out" || fail "no ollama hint: $out"
grep -q "ollama create doc:v0001 -f Modelfile" <<<"$out" || fail "no create command: $out"
grep -q "template drift check: 5 conversations" <<<"$out" || fail "no drift check: $out"
mf="$X/Modelfile"
grep -qx "FROM ./base.F16.gguf" "$mf" || fail "FROM"
grep -qx "ADAPTER ./adapter.gguf" "$mf" || fail "ADAPTER"
grep -q '^TEMPLATE """{{- range .Messages }}<|im_start|>{{ .Role }}$' "$mf" || fail "TEMPLATE"
[ "$(grep -c '^PARAMETER stop ' "$mf")" = 3 ] || fail "stops: $(grep stop "$mf")"
grep -qx 'PARAMETER stop "<|im_end|>"' "$mf" || fail "stop <|im_end|>"
grep -qx 'PARAMETER temperature 0.7' "$mf" || fail "temperature"
grep -qx 'PARAMETER top_p 0.9' "$mf" || fail "top_p"
grep -qx 'PARAMETER num_ctx 96' "$mf" || fail "num_ctx = min(sequence_len, context)"
grep -qx '# quant: F16' "$mf" || fail "header"
grep -q '^SYSTEM' "$mf" && fail "SYSTEM without a system_prompt (chatml has no default)"
py "import json; m = json.load(open('$X/export_manifest.json')); assert m['ollama_name'] == 'doc:v0001' and m['template_drift_checked'] == 5, m" || fail "manifest ollama"

# a system prompt and export defaults from the document
sed -i 's/^training:/system_prompt: "You answer like a pirate."\nexport:\n  default_quant: Q6_K\n  default_temperature: 0.3\n  default_top_p: 0.5\ntraining:/' doc.dlm
noollama "$DLM" export doc.dlm --name me/pirate:v1 >/dev/null
mf="$S/exports/Q6_K/Modelfile"
[ -f "$mf" ] || fail "export.default_quant Q6_K not used"
grep -qx 'SYSTEM """You answer like a pirate."""' "$mf" || fail "SYSTEM: $(grep SYSTEM "$mf")"
grep -qx 'PARAMETER temperature 0.3' "$mf" && grep -qx 'PARAMETER top_p 0.5' "$mf" || fail "document defaults"
# a system prompt a Modelfile cannot quote ("""): refused with the line to change
cp doc.dlm pirate.dlm
sed -i 's/^system_prompt: .*/system_prompt: "Say \\"\\"\\"arr\\"\\"\\"."/' doc.dlm
set +e; out=$(noollama "$DLM" export doc.dlm --quant Q8_0 2>&1); rc=$?; set -e
[ $rc = 1 ] && grep -q "the SYSTEM contains three double quotes in a row" <<<"$out" &&
    grep -q '^hint: remove the """ from the document'"'"'s system_prompt' <<<"$out" || fail "SYSTEM with \"\"\": rc $rc: $out"
cp pirate.dlm doc.dlm

# stand-in ollama: create and the smoke prompt are run in the export folder
mkdir -p bin
cat > bin/ollama <<'SH'
#!/bin/sh
echo "$PWD $*" >> "$OLLAMA_LOG"
case "$1" in
  --version) echo "ollama version is 0.9.9" ;;
  create) [ -f Modelfile ] || exit 3; echo "success" ;;
  run) printf '\nAhoy there.\nsecond line\n' ;;
esac
SH
chmod +x bin/ollama
export OLLAMA_LOG="$T/ollama.log"
out=$(PATH="$T/bin:$PATH" "$DLM" export doc.dlm --quant Q8_0 --name my-model:v1)
grep -q "ollama: created my-model:v1; smoke: Ahoy there." <<<"$out" || fail "ollama path: $out"
grep -q "exports/Q8_0 create my-model:v1 -f Modelfile" "$OLLAMA_LOG" || fail "create not run in the export dir: $(cat "$OLLAMA_LOG")"
grep -q "run my-model:v1 Hello." "$OLLAMA_LOG" || fail "no smoke run"
py "
import json
e = json.load(open('$S/manifest.json'))['exports'][-1]
assert e['ollama_name'] == 'my-model:v1' and e['ollama_version'] == '0.9.9' and e['smoke_output_first_line'] == 'Ahoy there.', e
" || fail "store manifest ollama fields"
# a failing smoke is an error (the model was created)
sed -i 's/  run) .*/  run) exit 5 ;;/' bin/ollama
set +e
out=$(PATH="$T/bin:$PATH" "$DLM" export doc.dlm --quant Q8_0 --name my-model:v1 2>&1); rc=$?
set -e
[ $rc -eq 1 ] && grep -q "smoke prompt failed" <<<"$out" || fail "failing smoke: rc $rc $out"
PATH="$T/bin:$PATH" "$DLM" export doc.dlm --quant Q8_0 --name my-model:v1 --no-smoke >/dev/null || fail "--no-smoke"

# llama-server target: the Jinja template and a launch script
"$DLM" export doc.dlm --target llama-server --quant Q4_K_M --out "$T/ls" >/dev/null
py "
import json
want = json.load(open('$FIXTURE_QWEN/tokenizer_config.json'))['chat_template']
assert open('$T/ls/chat-template.jinja').read() == want
" || fail "chat-template.jinja is not the base's template"
[ -x "$T/ls/llama-server_launch.sh" ] || fail "launch script not executable"
sh -n "$T/ls/llama-server_launch.sh" || fail "launch script syntax"
grep -q 'exec llama-server --model ./base.Q4_K_M.gguf --lora ./adapter.gguf --jinja --chat-template-file ./chat-template.jinja --ctx-size 96' \
    "$T/ls/llama-server_launch.sh" || fail "launch script: $(cat "$T/ls/llama-server_launch.sh")"
[ ! -e "$S/exports/Q4_K_M" ] || fail "--out still wrote into the store"

# merged: one GGUF, no ADAPTER
noollama "$DLM" export doc.dlm --quant F32 --merged --out "$T/m" >/dev/null
[ -f "$T/m/merged.F32.gguf" ] && [ ! -e "$T/m/adapter.gguf" ] || fail "merged files: $(ls "$T/m")"
grep -q '^ADAPTER' "$T/m/Modelfile" && fail "merged Modelfile has ADAPTER"
grep -qx 'FROM ./merged.F32.gguf' "$T/m/Modelfile" || fail "merged FROM"
grep -qx '# merged: True' "$T/m/Modelfile" || fail "merged header"
# dlm reads its merged export: same greedy tokens as base + adapter
a=$("$DLM" prompt doc.dlm --raw --temp 0 -n 16 --json "The quick brown fox" | py "import json,sys; print(json.load(sys.stdin)['tokens'])")
b=$("$DLM" prompt --base "$T/m/merged.F32.gguf" --raw --temp 0 -n 16 --json "The quick brown fox" | py "import json,sys; print(json.load(sys.stdin)['tokens'])")
[ "$a" = "$b" ] || fail "merged export generates $b, base + adapter $a"

# two exports at once (the first holds the store lock a while): both recorded
n0=$(py "import json; print(len(json.load(open('$S/manifest.json'))['exports']))")
DLM_TEST_HOLD_LOCK_MS=1500 "$DLM" export doc.dlm --target gguf --quant BF16 -q &
p1=$!
sleep 0.3
"$DLM" export doc.dlm --target gguf --quant Q4_0 -q || fail "second concurrent export failed"
wait $p1 || fail "first concurrent export failed"
n1=$(py "import json; print(len(json.load(open('$S/manifest.json'))['exports']))")
[ $((n1 - n0)) -eq 2 ] || fail "concurrent exports recorded $((n1 - n0)) entries"
echo "ok"
