#!/usr/bin/env bash
# A copied .dlm shares its store (same dlm_id): issue 30 point 5.
#   - `cp a.dlm b.dlm; dlm train b.dlm` is refused (SharedStoreError naming
#     both files, hint: dlm init --from, --same-store); a's store is
#     untouched (no v0002, its manifest's source_path still a.dlm);
#   - --same-store trains into the shared store on purpose (a note, the
#     owner stays a.dlm); synth/preference staging and apply on the copy
#     are refused too (they stage in the store);
#   - `dlm init --from a.dlm c.dlm` writes a's bytes with only the dlm_id
#     changed (checked byte for byte in Python) and a store of its own; c
#     trains without touching a's store; `dlm init --from b.dlm b.dlm`
#     gives the copy its own id in place;
#   - a moved document (its old path gone) trains, says so, and becomes the
#     store's source_path.
set -euo pipefail
. "$DLM_SRC/tests/cli/lib.sh"
write_tiny_doc a.dlm
sed -i 's/num_epochs: 30/num_epochs: 1/' a.dlm
S="$DLM_HOME/store/$ID"
TR=$(cd "$T" && pwd -P)   # the real path the manifest records
"$DLM" train a.dlm -q > /dev/null
cp a.dlm b.dlm
echo "Lisbon is the capital of Portugal." >> b.dlm
set +e; out=$("$DLM" train b.dlm 2>&1); rc=$?; set -e
[ $rc -eq 1 ] || fail "the copy trained: rc $rc: $out"
grep -q "^dlm: error: .*b.dlm has the dlm_id of $TR/a.dlm ($ID): the two share one store" <<<"$out" || fail "no error: $out"
grep -q "^hint: give b.dlm a store of its own (a new dlm_id, the content kept): dlm init --from b.dlm b.dlm; or write into the shared store on purpose with --same-store" <<<"$out" ||
    fail "no hint: $out"
[ "$(cat "$S/adapter/current.txt")" = "adapter/versions/v0001" ] || fail "the copy wrote into a's store"
src() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["source_path"])' "$1/manifest.json"; }
[ "$(src "$S")" = "$TR/a.dlm" ] || fail "source_path: $(src "$S")"
# --same-store: on purpose
out=$("$DLM" train b.dlm --same-store 2>&1) || fail "--same-store: $out"
grep -q "note: b.dlm shares the store of $TR/a.dlm (dlm_id $ID; --same-store)" <<<"$out" || fail "no note: $out"
[ "$(cat "$S/adapter/current.txt")" = "adapter/versions/v0002" ] && [ "$(src "$S")" = "$TR/a.dlm" ] || fail "--same-store"
# synth / preference staging and apply write into the store too: refused for the copy
for c in "synth apply" "preference apply"; do
    set +e; out=$("$DLM" $c b.dlm 2>&1); rc=$?; set -e
    [ $rc -eq 1 ] && grep -q "SharedStoreError: b.dlm has the dlm_id of" <<<"$out" &&
        grep -q "^hint: give b.dlm a store of its own (a new dlm_id, the content kept): dlm init --from b.dlm b.dlm$" <<<"$out" ||
        fail "$c on the copy: rc $rc: $out"
done
set +e; "$DLM" synth apply a.dlm > /dev/null 2>&1; rc=$?; set -e
[ $rc -eq 2 ] || fail "synth apply on the owner: rc $rc (nothing staged is 2)"
# init --from: a's bytes, a new id, a store of its own
out=$("$DLM" init --from a.dlm c.dlm) || fail "init --from: $out"
python3 - a.dlm c.dlm "$ID" <<'PY' || fail "init --from changed more than the id"
import re, sys
a, c, old = open(sys.argv[1], "rb").read(), open(sys.argv[2], "rb").read(), sys.argv[3].encode()
new = re.search(rb"^dlm_id: ([0-9A-HJKMNP-TV-Z]{26})$", c, re.M).group(1)
assert new != old and len(a) == len(c) and a.replace(old, new) == c, (a, c)
PY
cid=$(sed -n 's/^dlm_id: //p' c.dlm)
grep -q "^dlm_id: $cid (was $ID)" <<<"$out" || fail "init --from output: $out"
[ "$(src "$DLM_HOME/store/$cid")" = "$TR/c.dlm" ] || fail "c's store"
"$DLM" train c.dlm -q > /dev/null || fail "c did not train"
[ "$(cat "$DLM_HOME/store/$cid/adapter/current.txt")" = "adapter/versions/v0001" ] || fail "c's v0001"
[ "$(cat "$S/adapter/current.txt")" = "adapter/versions/v0002" ] || fail "c touched a's store"
set +e; out=$("$DLM" init --from a.dlm c.dlm 2>&1); rc=$?; set -e
[ $rc -ne 0 ] && grep -q "c.dlm already exists" <<<"$out" || fail "init --from over an existing file: $out"
# the copy gets its own id in place, keeping its edit
"$DLM" init --from b.dlm b.dlm -q
grep -q "^Lisbon is the capital of Portugal.$" b.dlm && ! grep -q "^dlm_id: $ID$" b.dlm || fail "in place: $(head -3 b.dlm)"
"$DLM" train b.dlm -q > /dev/null || fail "the re-id'd copy did not train"
# a moved document: accepted, said, recorded
mv a.dlm moved.dlm
out=$("$DLM" train moved.dlm 2>&1) || fail "moved: $out"
grep -q "note: $TR/moved.dlm is now the store's document (it was $TR/a.dlm, which no longer exists)" <<<"$out" || fail "no move note: $out"
[ "$(src "$S")" = "$TR/moved.dlm" ] && [ "$(cat "$S/adapter/current.txt")" = "adapter/versions/v0003" ] || fail "moved: $(src "$S")"
echo ok
