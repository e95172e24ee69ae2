#!/usr/bin/env bash
# training.gate on the embedded tiny base: two adapters with different
# answer styles (SQL vs polite chat), six tagged Q&A sections each.
#   dlm train trains both, then the gate (adapter/_gate/gate_config.json with
#   the spec's keys + gate.safetensors); the gate's bytes are the same for 1
#   and 2 threads; held-out prompts of each style are routed to their adapter
#   (`dlm prompt --json` adapter_weights); --gate off gives equal weights;
#   a cold start (cold_start_floor above the prompts) writes mode "uniform";
#   --gate without a gate is a usage error; show/doctor report the gate mode.
set -euo pipefail
. "$DLM_SRC/tests/cli/lib.sh"
S="$DLM_HOME/store/$ID"
mkdoc() { # FILE FLOOR
    /usr/bin/python3 - "$1" "$2" "$ID" <<'PY'
import sys
path, floor, did = sys.argv[1], sys.argv[2], sys.argv[3]
sql = [("List all users.", "SELECT * FROM users;"), ("Count the orders.", "SELECT COUNT(*) FROM orders;"),
       ("Show the ten newest posts.", "SELECT * FROM posts ORDER BY created DESC LIMIT 10;"),
       ("Find customers in Paris.", "SELECT * FROM customers WHERE city = 'Paris';"),
       ("Delete expired sessions.", "DELETE FROM sessions WHERE expires < NOW();"),
       ("Sum the invoice totals.", "SELECT SUM(total) FROM invoices;")]
tone = [("How are you today?", "Very well, thank you kindly!"), ("Can you help me, please?", "Of course, with pleasure."),
        ("Thanks for your time!", "You are most welcome, dear friend."), ("Good morning!", "A lovely morning to you too!"),
        ("I feel a bit sad.", "I am so sorry; I am here for you."), ("What a nice day.", "It truly is, and you make it nicer.")]
out = ["---", f"dlm_id: {did}", "dlm_version: 15", "base_model: tiny", "training:", "  sequence_len: 64",
       "  micro_batch_size: 4", "  grad_accum: 1", "  adapters:", "    sql: {lora_r: 4}", "    tone: {lora_r: 4}",
       "  gate:", "    enabled: true", "    steps: 150", "    lr: 0.003", f"    cold_start_floor: {floor}", "---"]
for tag, rows in (("sql", sql), ("tone", tone)):
    for q, a in rows:
        out += [f"::instruction#{tag}::", "### Q", q, "### A", a, ""]
open(path, "w").write("\n".join(out) + "\n")
PY
}
mkdoc doc.dlm 4
out=$("$DLM" train doc.dlm --max-steps 2 --threads 2 2>&1)
grep -q "gate: trained, 12 prompt(s) (sql 6, tone 6)" <<<"$out" || fail "no gate line: $out"
/usr/bin/python3 - "$S/adapter/_gate/gate_config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
assert c == {"input_dim": 256, "hidden_proj_dim": 64, "adapter_names": ["sql", "tone"], "mode": "trained",
             "entropy_lambda": 0.01}, c
PY
"$DLM" show doc.dlm --json | /usr/bin/python3 -c '
import json, sys
g = json.load(sys.stdin)["gate"]; assert g["enabled"] is True and g["mode"] == "trained", g'
"$DLM" doctor doc.dlm --json | /usr/bin/python3 -c '
import json, sys
g = json.load(sys.stdin)["document"]["gate"]; assert g["mode"] == "trained", g'
g1=$(sha256sum "$S/adapter/_gate/gate.safetensors" | cut -c1-64)
"$DLM" train doc.dlm --max-steps 2 --threads 1 -q >/dev/null
[ "$(sha256sum "$S/adapter/_gate/gate.safetensors" | cut -c1-64)" = "$g1" ] || fail "gate bytes differ for 1 vs 2 threads"
# held-out prompts: the style's adapter gets the larger weight
ok=0
for p in "sql|Select the names of all employees." "sql|Count the rows in the products table." \
         "sql|Update the price of every book." "tone|Hello, how is your family?" \
         "tone|Thank you so much for the flowers!" "tone|Have a wonderful evening, friend."; do
    want=${p%%|*}
    got=$("$DLM" prompt doc.dlm "${p#*|}" --temp 0 -n 1 --json 2>/dev/null |
          /usr/bin/python3 -c 'import json,sys; w=json.load(sys.stdin)["adapter_weights"]; print(max(w, key=w.get))')
    [ "$got" = "$want" ] && ok=$((ok + 1))
done
echo "gate routing accuracy on held-out prompts: $ok/6"
[ $ok -ge 5 ] || fail "the gate routed only $ok/6 held-out prompts to their adapter"
"$DLM" prompt doc.dlm "List all users." --gate off --temp 0 -n 1 --json 2>/dev/null | /usr/bin/python3 -c '
import json, sys
j = json.load(sys.stdin); assert j["adapter_weights"] == {"sql": 0.5, "tone": 0.5} and j["gate"] == "off", j'
# cold start: fewer than cold_start_floor prompts per adapter → uniform, no weights file
mkdoc cold.dlm 7
out=$("$DLM" train cold.dlm --same-store --max-steps 1 2>&1)
grep -q "gate: uniform (cold start)" <<<"$out" || fail "no cold start: $out"
grep -q '"mode": "uniform"' "$S/adapter/_gate/gate_config.json" || fail "gate_config.json is not uniform"
[ ! -e "$S/adapter/_gate/gate.safetensors" ] || fail "a uniform gate left gate.safetensors"
"$DLM" show cold.dlm | grep "^  gate  *enabled (uniform)" >/dev/null || fail "show does not say the gate is uniform"
"$DLM" prompt cold.dlm "List all users." --temp 0 -n 1 --json 2>/dev/null | /usr/bin/python3 -c '
import json, sys
j = json.load(sys.stdin); assert j["adapter_weights"] == {"sql": 0.5, "tone": 0.5} and j["gate"] == "auto", j'
# --gate needs a gate
sed '/^  gate:/,/cold_start_floor/d' doc.dlm > nogate.dlm
set +e
out=$("$DLM" prompt nogate.dlm "hi" --gate auto 2>&1); rc=$?
set -e
[ $rc -eq 2 ] || fail "--gate without training.gate should be a usage error, got $rc: $out"
echo ok
