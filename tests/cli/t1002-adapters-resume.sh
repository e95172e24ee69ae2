#!/usr/bin/env bash
# Named adapters on the embedded tiny base (the document of t1001):
#   kill -9 after a checkpoint of one adapter, then --resume: the bytes of
#   the uninterrupted run, in that adapter's tree, the other's untouched;
#   --adapter of an undeclared name and an undeclared `#name` suffix stop
#   with UnknownAdapterError (the suffix at its file:line);
#   prompt --adapter and export --adapter by name; show/doctor (--json) list
#   the adapters with their routed sections and versions; the preference
#   phase trains only the adapter its sections route to.
set -euo pipefail
. "$DLM_SRC/tests/cli/lib.sh"
. "$DLM_SRC/tests/cli/helpers/adapters_doc.sh"

"$DLM" train doc.dlm --max-steps 8 -q >/dev/null
t1=$(sha tone v0001)

# kill -9 after the step-4 checkpoint of tone, then --resume: the bytes of v0001
sql_tree=$(tree_sha sql)
set +e
DLM_TEST_CRASH_AFTER_STEP=4 "$DLM" train doc.dlm --adapter tone --max-steps 8 -q >/dev/null 2>&1
rc=$?
set -e
[ $rc -ne 0 ] || fail "the crash hook did not kill the run"
ls "$S/adapter/tone/checkpoints" | grep -q step-000004 || fail "no tone checkpoint at step 4"
[ ! -e "$S/adapter/checkpoints" ] || fail "a checkpoint went into the flat tree"
"$DLM" train doc.dlm --adapter tone --max-steps 8 --resume -q >/dev/null
[ "$(sha tone v0002)" = "$t1" ] || fail "resumed tone differs from the uninterrupted run"
[ ! -d "$S/adapter/tone/checkpoints" ] || fail "tone checkpoints left after the commit"
[ "$(tree_sha sql)" = "$sql_tree" ] || fail "resuming tone changed adapter/sql"

# errors
set +e
out=$("$DLM" train doc.dlm --adapter nope 2>&1); rc=$?
set -e
[ $rc -eq 1 ] && grep -q "UnknownAdapterError: adapter 'nope' not declared (declared: \['sql', 'tone'\])" <<<"$out" ||
    fail "--adapter nope ($rc): $out"
sed 's/::instruction#sql::/::instruction#sqll::/' doc.dlm > bad.dlm
set +e
out=$("$DLM" train bad.dlm 2>&1); rc=$?
set -e
line=$(grep -n '::instruction#sqll::' bad.dlm | cut -d: -f1)
[ $rc -eq 1 ] && grep -q "bad.dlm:$line:1: section at line $line routes to adapter '#sqll' which is not declared" <<<"$out" ||
    fail "undeclared suffix ($rc): $out"

# inference by name
"$DLM" prompt doc.dlm "List all users." --adapter sql --temp 0 -n 4 --json | python3 -c '
import json, sys; j = json.load(sys.stdin); assert j["adapter_version"] == 1 and len(j["tokens"]) >= 1, j'
set +e
out=$("$DLM" export doc.dlm --target gguf --quant F32 2>&1); rc=$?
set -e
[ $rc -eq 2 ] && grep -q "declares named adapters" <<<"$out" || fail "export without --adapter ($rc): $out"
"$DLM" export doc.dlm --target gguf --quant F32 --adapter sql -q >/dev/null
python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); assert m["adapter_name"]=="sql" and m["adapter_version"]==1, m' \
    "$S/exports/sql/F32/export_manifest.json"
# show / doctor list the adapters, their routed sections and versions
"$DLM" show doc.dlm --json | python3 -c '
import json, sys
a = json.load(sys.stdin)["adapters"]
assert [(x["name"], x["lora_r"], x["sections"], x["current_version"], x["versions"]) for x in a] == \
    [("tone", 4, 3, 2, [1, 2]), ("sql", 8, 2, 1, [1])], a'
"$DLM" show doc.dlm | grep "^  tone .*current v0002 (2 versions on disk)" >/dev/null || fail "show does not list tone"
"$DLM" doctor doc.dlm --json | python3 -c '
import json, sys
a = json.load(sys.stdin)["document"]["adapters"]
assert [x["name"] for x in a] == ["tone", "sql"], a'
# the preference phase follows the routing: only the adapter a
# ::preference#sql:: section routes to gets a DPO version
cat > pref.dlm <<DOC
---
dlm_id: 01JD0000000000000000000PRF
dlm_version: 15
base_model: tiny
training:
  sequence_len: 64
  micro_batch_size: 2
  grad_accum: 1
  adapters: {tone: {lora_r: 4}, sql: {lora_r: 4}}
---
Shared prose.

::instruction#sql::
### Q
List all users.
### A
SELECT * FROM users;

::preference#sql::
### Prompt
Count users.
### Chosen
SELECT COUNT(*) FROM users;
### Rejected
count them yourself
DOC
out=$("$DLM" train pref.dlm --max-steps 1 2>&1)
P="$DLM_HOME/store/01JD0000000000000000000PRF/adapter"
grep -q "adapter sql: trained v0001 (sft: .*and v0002 (dpo" <<<"$out" || fail "sql preference phase: $out"
[ -d "$P/sql/versions/v0002" ] && [ ! -e "$P/tone/versions/v0002" ] || fail "preference versions: $(ls "$P"/*/versions)"
echo ok
