#!/usr/bin/env bash
# The template gallery: `dlm templates list` carries the original gallery's
# nine names with the spec's meta fields, the embedded copy equals
# templates/, and the first half of the templates (by index order) learn on
# tiny with their own settings: init → train → prompt --temp 0 gives the
# trained answers back (tests/cli/helpers/template_check.py).
# t0902 trains the second half, so ctest -j runs the two halves in parallel.
. "$(dirname "$0")/lib.sh"
PY=${PYTHON:-python3}
"$DLM" templates list --json > list.json
$PY - list.json <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))["templates"]
names = [x["name"] for x in t]
gallery = {"changelog", "coding-tutor", "domain-kb", "meeting-notes-summarizer", "personal-assistant",
           "regex-buddy", "shell-one-liner", "tool-use-example", "writing-partner"}
assert gallery <= set(names), gallery - set(names)
assert {"default", "tutor", "notes"} <= set(names)
keys = {"name", "title", "domain_tags", "recommended_base", "expected_steps", "expected_duration", "summary", "sample_prompts"}
for x in t:
    assert set(x) == keys, (x["name"], set(x) ^ keys)
    assert x["sample_prompts"] and isinstance(x["expected_steps"], int) and x["domain_tags"]
PY
# the binary's embedded copy is the generator's output for templates/
$PY "$DLM_SRC/scripts/gen-templates.py" | cmp -s - "$DLM_SRC/src/doc/templates_data.c" ||
    fail "src/doc/templates_data.c is stale: run scripts/gen-templates.py > src/doc/templates_data.c"
rc=0; DLM_TEMPLATES=/nonexistent "$DLM" templates list >/dev/null 2>&1 || rc=$?
[ $rc = 1 ] || fail "a DLM_TEMPLATES without templates must fail (rc $rc)"
rc=0; "$DLM" init bad.dlm --template no-such-thing 2>err.txt || rc=$?
[ $rc = 2 ] && grep -q "unknown template 'no-such-thing'" err.txt || fail "unknown template: rc $rc $(cat err.txt)"
[ ! -e bad.dlm ] || fail "an unknown template wrote a file"
rc=0; "$DLM" templates frobnicate >/dev/null 2>&1 || rc=$?
[ $rc = 2 ] || fail "templates frobnicate must be a usage error (rc $rc)"

half=${TEMPLATE_HALF:-0}
i=0
for name in $($PY -c 'import json,sys; print(" ".join(x["name"] for x in json.load(open(sys.argv[1]))["templates"]))' list.json); do
    i=$((i + 1))
    [ $((i % 2)) = "$half" ] && continue
    "$DLM" init "$name.dlm" --template "$name" -q
    out=$("$DLM" train "$name.dlm" 2>&1) || fail "$name: train failed: $out"
    meta=$($PY -c 'import json,sys; print(json.dumps([x for x in json.load(open(sys.argv[1]))["templates"] if x["name"] == sys.argv[2]][0]))' list.json "$name")
    $PY "$DLM_SRC/tests/cli/helpers/template_check.py" "$DLM" "$name.dlm" "$meta" "$out" || fail "$name did not learn"
done
