#!/usr/bin/env bash
# init → show → migrate in a fresh DLM_HOME.
set -euo pipefail
: "${DLM:?DLM must point at the dlm binary}"
PY=/usr/bin/python3
export DLM_HOME=$(mktemp -d)
w=$(mktemp -d)
trap 'rm -rf "$DLM_HOME" "$w"' EXIT
cd "$w"
fail() { echo "FAIL: $*" >&2; exit 1; }

# --- init -------------------------------------------------------------------
"$DLM" init notes/a.dlm > out.txt
grep -q '^init: wrote notes/a.dlm (template default, base tiny)$' out.txt || fail "init output: $(cat out.txt)"
id=$(sed -n 's/^dlm_id: //p' notes/a.dlm)
[[ "$id" =~ ^[0-9A-HJKMNP-TV-Z]{26}$ ]] || fail "bad dlm_id '$id'"
grep -qx 'dlm_version: 15' notes/a.dlm || fail "scaffold is not dlm_version 15"
store="$DLM_HOME/store/$id"
for d in adapter/versions logs exports; do [ -d "$store/$d" ] || fail "missing $store/$d"; done
[ ! -e "$store/.lock" ] || fail "init left its lock behind"
$PY - "$store/manifest.json" "$id" "$w/notes/a.dlm" <<'PYEOF'
import json, sys
m = json.load(open(sys.argv[1]))
assert m["dlm_id"] == sys.argv[2] and m["schema_version"] == 1 and m["base_model"] == "tiny", m
assert m["adapter_version"] == 0 and m["training_runs"] == [] and m["license_acceptance"] is None, m
assert m["source_path"] == sys.argv[3], m["source_path"]
text = open(sys.argv[1]).read()
assert text == json.dumps(m, sort_keys=True, indent=2, ensure_ascii=False) + "\n", "manifest is not Python-formatted"
PYEOF

# refuses to overwrite; --force overwrites
if "$DLM" init notes/a.dlm 2> err.txt; then fail "init overwrote an existing file"; fi
grep -q "dlm: error: notes/a.dlm already exists" err.txt || fail "$(cat err.txt)"
grep -q -- "--force" err.txt || fail "no --force hint"
"$DLM" init notes/a.dlm --force --template tutor --base qwen2.5-1.5b > /dev/null
grep -qx 'base_model: qwen2.5-1.5b' notes/a.dlm || fail "template/base not applied"
id2=$(sed -n 's/^dlm_id: //p' notes/a.dlm)
[ "$id2" != "$id" ] || fail "--force kept the old dlm_id"
id=$id2

# templates
"$DLM" init --list-templates | grep '^coding-tutor ' >/dev/null || fail "no coding-tutor template"
"$DLM" init --list-templates --json | $PY -c 'import json,sys; t=json.load(sys.stdin)["templates"]; assert {"tutor","coding-tutor","notes"} <= {x["name"] for x in t}'
set +e
"$DLM" init x.dlm --template nope 2> err.txt; rc=$?
set -e
[ $rc -eq 2 ] || fail "unknown template exit $rc"
grep -q "unknown template 'nope'" err.txt || fail "$(cat err.txt)"

# bases: unknown, vision, gated
if "$DLM" init x.dlm --base qwen2.5-1.5 2> err.txt; then fail "unknown base accepted"; fi
grep -q "unknown base model 'qwen2.5-1.5'" err.txt && grep -q "did you mean 'qwen2.5-1.5b'" err.txt || fail "$(cat err.txt)"
if "$DLM" init x.dlm --base mistral-small-3.1-24b-instruct 2> err.txt; then fail "vision base accepted"; fi
grep -q "mistral-small-3.1-24b-instruct is a vision-language base; dlm trains text bases, Qwen2-VL, PaliGemma and Qwen2-Audio only" err.txt || fail "$(cat err.txt)"
# every text row's architecture runs now (phi3 the last): init takes phi-3.5-mini
# (the refusal of a row dlm could not run is checked in tests/unit/test_hub.c)
"$DLM" init phi.dlm --base phi-3.5-mini > /dev/null 2> err.txt || fail "phi-3.5-mini refused: $(cat err.txt)"
grep -q "^base_model: phi-3.5-mini$" phi.dlm || fail "$(cat phi.dlm)"
if "$DLM" init x.dlm --base llama-3.2-1b 2> err.txt; then fail "gated base accepted without flag"; fi
grep -q "meta-llama/Llama-3.2-1B-Instruct requires license acceptance" err.txt || fail "$(cat err.txt)"
[ ! -e x.dlm ] || fail "a refused init wrote the document"
"$DLM" init gated.dlm --base llama-3.2-1b --i-accept-license > /dev/null
gid=$(sed -n 's/^dlm_id: //p' gated.dlm)
$PY -c 'import json,sys; l=json.load(open(sys.argv[1]))["license_acceptance"]; assert l["via"]=="cli_flag" and l["license_spdx"]=="Other" and "llama" in l["license_url"], l' "$DLM_HOME/store/$gid/manifest.json"
"$DLM" init hf.dlm --base hf:Qwen/Qwen2.5-Coder-7B-Instruct@main > /dev/null
grep -qx 'base_model: hf:Qwen/Qwen2.5-Coder-7B-Instruct@main' hf.dlm || fail "hf base not written"

# --- show ----------------------------------------------------------------------
"$DLM" show notes/a.dlm --json > show.json
$PY - show.json "$id" <<'PYEOF'
import json, sys
s = json.load(open(sys.argv[1]))
fm = s["frontmatter"]
assert fm["dlm_id"] == sys.argv[2] and fm["dlm_version"] == 15 and fm["base_model"] == "qwen2.5-1.5b"
t = fm["training"]
assert t["lora_r"] == 8 and t["target_modules"] == "auto" and t["preference"]["hyperparams"]["learning_rate"] == 5e-06
assert fm["export"]["default_quant"] == "Q4_K_M" and fm["system_prompt"].startswith("You are a patient tutor")
secs = s["sections"]
assert [x["type"] for x in secs] == ["prose", "instruction"], secs
lines = open("notes/a.dlm").read().split("\n")
assert secs[0]["line"] == lines.index("# The water cycle") + 1 and secs[0]["adapter"] is None and len(secs[0]["id"]) == 16
assert secs[1]["pairs"] == 3 and secs[1]["line"] == lines.index("::instruction::") + 1, secs[1]
st = s["store"]
assert st["initialized"] is True and st["adapter_version"] == 0 and st["versions"] == []
assert st["training_runs"] == {"count": 0, "last": None} and st["exports"] == 0 and st["lock"] is None
assert st["size_bytes"] > 0 and st["path"].endswith(sys.argv[2])
PYEOF
"$DLM" show notes/a.dlm > show.txt
grep -q "^  dlm_id       $id" show.txt || fail "human show: $(head -5 show.txt)"
grep -q "3 Q/A pairs" show.txt || fail "human show lacks pair count"

# --- migrate ---------------------------------------------------------------------
cat > old.dlm <<'DOC'
---
# kept comment
dlm_id: 01HZX3K4M5N6P7Q8R9S0T1V2W3
dlm_version: 3
base_model: smollm2-135m
---

Old prose.

::instruction::
### Q
q
### A
a
DOC
cp old.dlm orig.dlm
"$DLM" show old.dlm --json | $PY -c 'import json,sys; s=json.load(sys.stdin); assert s["source_version"]==3 and s["frontmatter"]["dlm_version"]==15 and s["store"]["initialized"] is False'
ids_before=$("$DLM" show old.dlm --json | $PY -c 'import json,sys; print(" ".join(x["id"] for x in json.load(sys.stdin)["sections"]))')
"$DLM" migrate old.dlm --dry-run > dry.txt
grep -q '^dry-run: old.dlm would migrate v3 → v4' dry.txt || fail "$(cat dry.txt)"
cmp -s old.dlm orig.dlm || fail "--dry-run wrote the file"
[ ! -e old.dlm.bak ] || fail "--dry-run wrote a backup"
"$DLM" migrate old.dlm > mig.txt
grep -q '^migrated: old.dlm v3 → v4 .* → v15$' mig.txt || fail "$(cat mig.txt)"
cmp -s old.dlm.bak orig.dlm || fail "backup differs from the original"
grep -qx 'dlm_version: 15' old.dlm && grep -qx '# kept comment' old.dlm || fail "migrated text: $(cat old.dlm)"
ids_after=$("$DLM" show old.dlm --json | $PY -c 'import json,sys; print(" ".join(x["id"] for x in json.load(sys.stdin)["sections"]))')
[ "$ids_before" = "$ids_after" ] || fail "migration changed section ids"
"$DLM" migrate old.dlm | grep 'already at v15 (no migrations needed)' >/dev/null || fail "second migrate"
cp orig.dlm nb.dlm
"$DLM" migrate nb.dlm --no-backup > /dev/null
[ ! -e nb.dlm.bak ] || fail "--no-backup wrote a backup"
ls -a "$w" "$w/notes" | grep -q '\.tmp\.' && fail "temp files left behind"
echo "t0001 ok"
