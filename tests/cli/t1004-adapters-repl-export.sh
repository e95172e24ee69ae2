#!/usr/bin/env bash
# Named adapters in `dlm repl` and in `dlm export` without --adapter (issue 17),
# on the two-style document of tests/cli/helpers/styles_doc.py (4 epochs):
#   repl: --adapter NAME, the gate (default), --gate off and --adapter-mix
#   answer a first turn exactly as `dlm prompt` with the same flags; /adapter
#   NAME|mix switches; an undeclared name and a bad --gate are refused.
#   export of the gated document without --adapter/--adapter-mix: the mix of
#   the gate's mean weights over the document's questions (the original's
#   static_mean), checked against the mean, computed here, of the gate's
#   per-prompt weights (`dlm prompt --json`); export_manifest.json says
#   gate_mode static_mean; a cold-start gate exports 1/N as gate_mode uniform.
set -euo pipefail
. "$DLM_SRC/tests/cli/lib.sh"
/usr/bin/python3 "$DLM_SRC/tests/cli/helpers/styles_doc.py" doc.dlm "$ID" 4
"$DLM" train doc.dlm -q > /dev/null 2>&1 || fail "train"
Q="List all users."
first_turn() { printf '%s\n' "$Q" | "$DLM" repl doc.dlm --temp 0 -n 12 "$@" 2>/dev/null | sed -n 2p; }
same=0
for flags in "--adapter sql" "--adapter tone" "" "--gate off" "--adapter-mix sql:0.3,tone:0.7"; do
    # shellcheck disable=SC2086
    want=$("$DLM" prompt doc.dlm "$Q" --temp 0 -n 12 $flags 2>/dev/null)
    # shellcheck disable=SC2086
    got=$(first_turn $flags)
    [ "$got" = "$want" ] || fail "repl $flags answered '$got', dlm prompt '$want'"
    [ -n "$flags" ] && [ "$want" = "$("$DLM" prompt doc.dlm "$Q" --temp 0 -n 12 --no-adapter 2>/dev/null)" ] && same=$((same + 1))
done
[ "$("$DLM" prompt doc.dlm "$Q" --temp 0 -n 12 --adapter sql 2>/dev/null)" != \
  "$("$DLM" prompt doc.dlm "$Q" --temp 0 -n 12 --adapter tone 2>/dev/null)" ] || fail "sql and tone answer alike: the check proves nothing"
[ $same -lt 4 ] || fail "every adapter answers as the base"
# /adapter switches (with /clear the next turn is a first turn again)
out=$(printf '%s\n/adapter tone\n/clear\n%s\n/adapter mix\n/clear\n%s\n/adapter\n' "$Q" "$Q" "$Q" |
      "$DLM" repl doc.dlm --temp 0 -n 12 2>/dev/null)
[ "$(sed -n 5p <<<"$out")" = "$("$DLM" prompt doc.dlm "$Q" --temp 0 -n 12 --adapter tone 2>/dev/null)" ] || fail "/adapter tone: $out"
[ "$(sed -n 8p <<<"$out")" = "$("$DLM" prompt doc.dlm "$Q" --temp 0 -n 12 2>/dev/null)" ] || fail "/adapter mix (the gate again): $out"
grep -q "^adapter: tone v0001$" <<<"$out" || fail "no /adapter tone line: $out"
[ "$(tail -1 <<<"$out")" = "adapter: mix" ] || fail "/adapter mix: $out"
set +e
out=$("$DLM" repl doc.dlm --adapter nope </dev/null 2>&1); rc=$?
set -e
[ $rc -eq 1 ] && grep -q "UnknownAdapterError: adapter 'nope' not declared (declared: \['sql', 'tone'\])" <<<"$out" || fail "--adapter nope: $rc $out"
set +e
out=$("$DLM" repl doc.dlm --gate maybe </dev/null 2>&1); rc=$?
set -e
[ $rc -eq 2 ] || fail "--gate maybe: $rc $out"

# export: the gate's mean weights over the document's own questions
out=$("$DLM" export doc.dlm --target gguf --quant F32 2>&1) || fail "export: $out"
grep -q "substituting the learned gate's mean weights for --adapter-mix (gate_mode=static_mean)" <<<"$out" || fail "no substitution note: $out"
grep -q "training.gate: the mix is the gate's mean weights" <<<"$out" || fail "no gate line: $out"
/usr/bin/python3 -c "
import sys; sys.path.insert(0, '$DLM_SRC/tests/cli/helpers'); import styles_doc as s
print('\n'.join(q for q, _ in s.SQL + s.TONE))" | nl | while read -r i q; do
    "$DLM" prompt doc.dlm "$q" -n 1 --temp 0 --json 2>/dev/null > "w$i.json"
done
/usr/bin/python3 - "$DLM_HOME/store/$ID/exports/F32/export_manifest.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
js = [json.load(open(f"w{i}.json")) for i in range(1, 11)]
assert all(j["gate"] == "auto" for j in js)
rows = [j["adapter_weights"] for j in js]
mean = {k: sum(r[k] for r in rows) / len(rows) for k in ("sql", "tone")}
assert m["gate_mode"] == "static_mean", m.get("gate_mode")
mix = {a["source"]: a["weight"] for a in m["adapter_mix"]["adapters"]}
assert m["adapter_mix"]["method"] == "linear"
for k in mean:
    assert abs(mix[k] - mean[k]) < 1e-6, (mix, mean)
print("static_mean weights", mix)
PY
# a cold-start gate: 1/N, gate_mode uniform
sed -i 's/cold_start_floor: 4/cold_start_floor: 7/' doc.dlm
"$DLM" train doc.dlm -q --max-steps 1 > /dev/null 2>&1 || fail "train (cold gate)"
out=$("$DLM" export doc.dlm --target gguf --quant F32 2>&1) || fail "export (cold gate): $out"
grep -q "gate_mode=uniform): sql:0.5,tone:0.5" <<<"$out" || fail "cold gate export: $out"
grep -q '"gate_mode": "uniform"' "$DLM_HOME/store/$ID/exports/F32/export_manifest.json" || fail "manifest gate_mode uniform"
# --adapter still exports one adapter, without gate_mode
"$DLM" export doc.dlm --target gguf --quant F32 --adapter sql -q > /dev/null 2>&1 || fail "export --adapter sql"
grep -q gate_mode "$DLM_HOME/store/$ID/exports/sql/F32/export_manifest.json" && fail "gate_mode on a one-adapter export"
echo ok
