#!/usr/bin/env bash
# Named adapters (training.adapters, spec §3.9) on the embedded tiny base:
#   dlm train trains each adapter, in declaration order, into its own tree
#   adapter/<name>/{current.txt,versions/vNNNN,dlm.lock,replay}; the flat tree
#   stays empty; each adapter has its own LoRA config;
#   --adapter NAME trains one and leaves the other's bytes untouched;
#   threads 1 vs 2 and "one adapter alone" vs "all" give the same bytes;
#   (t1002: kill -9/--resume per adapter, the errors, prompt/export by name)
set -euo pipefail
. "$DLM_SRC/tests/cli/lib.sh"
. "$DLM_SRC/tests/cli/helpers/adapters_doc.sh"

out=$("$DLM" train doc.dlm --max-steps 8 --threads 2 2>&1)
grep -q "adapter tone (1/2)" <<<"$out" && grep -q "adapter sql (2/2)" <<<"$out" || fail "declaration order: $out"
for a in tone sql; do
    [ -f "$S/adapter/$a/versions/v0001/adapter_model.safetensors" ] || fail "no $a v0001"
    [ "$(cat "$S/adapter/$a/current.txt")" = "adapter/$a/versions/v0001" ] || fail "$a current.txt: $(cat "$S/adapter/$a/current.txt")"
    [ -f "$S/adapter/$a/dlm.lock" ] || fail "no $a lock record"
    [ -d "$S/adapter/$a/replay" ] || fail "no $a replay corpus"
done
[ ! -e "$S/adapter/current.txt" ] && [ -z "$(ls "$S/adapter/versions")" ] || fail "the flat tree was written"
python3 - "$S" <<'PY'
import json, sys
s = sys.argv[1]
cfg = {a: json.load(open(f"{s}/adapter/{a}/versions/v0001/adapter_config.json")) for a in ("tone", "sql")}
assert (cfg["tone"]["r"], cfg["tone"]["lora_alpha"]) == (4, 16), cfg["tone"]
assert (cfg["sql"]["r"], cfg["sql"]["lora_alpha"]) == (8, 8), cfg["sql"]
runs = json.load(open(f"{s}/manifest.json"))["training_runs"]
assert [r["adapter_name"] for r in runs] == ["tone", "sql"], runs
PY
t1=$(sha tone v0001); s1=$(sha sql v0001); tone_tree=$(tree_sha tone)

# --adapter sql with one thread: sql v0002 = v0001 bytes; tone untouched
"$DLM" train doc.dlm --adapter sql --max-steps 8 --threads 1 -q >/dev/null
[ "$(sha sql v0002)" = "$s1" ] || fail "threads 1 vs 2 changed the sql adapter"
[ "$(tree_sha tone)" = "$tone_tree" ] || fail "--adapter sql changed adapter/tone"
[ ! -e "$S/adapter/tone/versions/v0002" ] || fail "tone got a version"
# the run record names the adapter it trained (dlm lsp's dlm/trainingProgress reads it)
python3 -c "import json,sys; h=json.load(open(sys.argv[1])); assert h['adapter_name']=='sql', h" "$S/run/heartbeat.json" ||
    fail "heartbeat adapter_name: $(cat "$S/run/heartbeat.json")"

# one adapter alone in a fresh store = the same adapter trained after the other
DLM_HOME="$T/home2" "$DLM" train doc.dlm --adapter sql --max-steps 8 -q >/dev/null
[ "$(sha256sum "$T/home2/store/$ID/adapter/sql/versions/v0001/adapter_model.safetensors" | cut -c1-64)" = "$s1" ] ||
    fail "sql alone differs from sql trained after tone"
[ ! -e "$T/home2/store/$ID/adapter/tone" ] || fail "--adapter sql created adapter/tone"

echo ok
