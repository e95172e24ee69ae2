#!/usr/bin/env bash
# dlm export --skip-ollama (a stand-in ollama on PATH is never run; the
# Modelfile and the next steps are written) and the --adapter-mix flags'
# usage errors; a mix of one version at weight 1 with either method gives
# dlm the same greedy tokens as the plain export (the exact checks against
# llama.cpp and numpy are tests/ref/r0504).
set -euo pipefail
. "$DLM_SRC/tests/cli/lib.sh"
write_doc doc.dlm 2
S="$DLM_HOME/store/$ID"
py() { /usr/bin/python3 -c "$@"; }
"$DLM" train doc.dlm -q >/dev/null

mkdir -p bin
cat > bin/ollama <<'SH'
#!/bin/sh
echo "$*" >> "$OLLAMA_LOG"
exit 0
SH
chmod +x bin/ollama
export OLLAMA_LOG="$T/ollama.log"
out=$(PATH="$T/bin:$PATH" "$DLM" export doc.dlm --quant F32 --skip-ollama)
[ ! -e "$OLLAMA_LOG" ] || fail "--skip-ollama ran ollama: $(cat "$OLLAMA_LOG")"
[ -f "$S/exports/F32/Modelfile" ] || fail "no Modelfile"
grep -q "ollama skipped (--skip-ollama)" <<<"$out" && grep -q "ollama create doc:v0001" <<<"$out" || fail "next steps: $out"
usage() {
    set +e; out=$("$DLM" export doc.dlm "$@" 2>&1); rc=$?; set -e
    [ $rc -eq 2 ] || fail "$* should be a usage error (2), got $rc: $out"
}
usage --target gguf --skip-ollama
usage --adapter-mix-method svd
usage --adapter-mix v0001:1 --adapter-mix-method cubic

set +e; out=$("$DLM" export doc.dlm --target gguf --adapter-mix v0001:0.5,nope:0.5 2>&1); rc=$?; set -e
[ $rc -eq 1 ] && grep -q "'nope' is no adapter" <<<"$out" && grep -q "hint:" <<<"$out" || fail "missing source: $rc $out"

ref=$("$DLM" prompt doc.dlm --raw --temp 0 -n 16 --json "The quick brown fox" | py "import json,sys; print(json.load(sys.stdin)['tokens'])")
for m in linear svd; do
    out=$("$DLM" export doc.dlm --target gguf --quant F32 --merged --out "$T/$m" --adapter-mix v0001:1 --adapter-mix-method $m)
    grep -q "a $m mix of 1 adapters" <<<"$out" || fail "summary: $out"
    got=$("$DLM" prompt --base "$T/$m/merged.F32.gguf" --raw --temp 0 -n 16 --json "The quick brown fox" | py "import json,sys; print(json.load(sys.stdin)['tokens'])")
    [ "$got" = "$ref" ] || fail "$m mix of v0001 alone generates $got, the adapter $ref"
done
py "
import json
m = json.load(open('$T/svd/export_manifest.json'))['adapter_mix']
assert m['method'] == 'svd' and m['adapters'][0]['source'] == 'v0001' and m['adapters'][0]['weight'] == 1.0, m
assert all(v < 1e-6 for v in m['svd_relative_frobenius_error'].values()), m
" || fail "manifest adapter_mix"
echo ok
