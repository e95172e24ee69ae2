#!/usr/bin/env bash
# The synth loop on tiny: a prose-only document is trained (prose alone),
# then grown with `synth instructions --apply` and trained again; recall is
# measured on held-out questions about the prose (worded differently from
# anything in the document; an answer counts when it contains the fact).
# Two teachers: `self` (the document's own adapter — tiny cannot write JSON,
# so it is expected to give no pairs: exit 2, document unchanged) and a
# rule-based cli: teacher (one question per sentence), standing in for a
# model that can. The numbers are printed, not asserted: tiny may be too
# small to gain. Asserted: the mechanics (exit codes, markers, revert).
. "$(dirname "$0")/lib.sh"
PY=${PYTHON:-python3}
cat > town.dlm <<DOC
---
dlm_id: $ID
dlm_version: 15
base_model: tiny
training:
  learning_rate: 0.004
  num_epochs: 60
  lora_dropout: 0.0
---
# The town of Aldmere

Aldmere is a fishing town on the north coast. The mayor of Aldmere is Rosa
Vance. The bridge of Aldmere is made of red stone. The market of Aldmere
opens on Tuesday. The lighthouse keeper of Aldmere is Tomas.
DOC
cp town.dlm orig.dlm
cat > heldout.txt <<'Q'
Who is the mayor of Aldmere?	rosa vance
What is the bridge of Aldmere made of?	red stone
On which day does the market of Aldmere open?	tuesday
Who keeps the lighthouse of Aldmere?	tomas
Where is Aldmere?	north coast
Q
recall() {
    local hit=0 n=0 q want got
    while IFS=$'\t' read -r q want; do
        got=$("$DLM" prompt town.dlm "$q" --temp 0 -n 24 | tr 'A-Z' 'a-z')
        n=$((n + 1))
        case "$got" in *"$want"*) hit=$((hit + 1)) ;; esac
        echo "    $q → $got" >&2
    done < heldout.txt
    echo "$hit/$n"
}
"$DLM" train town.dlm -q > /dev/null
r_prose=$(recall)
# teacher self: tiny's adapter does not answer in JSON
rc=0; "$DLM" synth instructions town.dlm --teacher self --apply --max-new-tokens 128 > self.txt 2>&1 || rc=$?
[ $rc = 0 ] || [ $rc = 2 ] || fail "synth self: rc $rc $(cat self.txt)"
n_self=$(grep -c '^<!-- dlm-auto-synth:' town.dlm || true)
[ $rc = 0 ] || cmp -s town.dlm orig.dlm || fail "synth self with nothing to add changed the document"
if [ "$n_self" != 0 ]; then "$DLM" synth revert town.dlm > /dev/null; fi
cmp -s town.dlm orig.dlm || fail "revert after synth self"
# a rule-based teacher: each "X is Y." sentence becomes "What is X?" / the sentence
cat > teacher.py <<'PY'
import json, re, sys
req = json.load(sys.stdin)
text = req["prompt"].split("Text:\n", 1)[1]
body = " ".join(l for l in text.splitlines() if not l.startswith("#"))
out = []
for s in re.split(r"(?<=\.)\s+", body.strip()):
    for verb in (" is made of ", " opens on ", " is "):
        if verb in s:
            subj = s.split(verb, 1)[0]
            q = {" is made of ": "What is %s made of?", " opens on ": "When does %s open?", " is ": "What is %s?"}[verb]
            out.append({"question": q % (subj[0].lower() + subj[1:]), "answer": s})
            break
print("Here you go:\n```json\n" + json.dumps(out, indent=1) + "\n```")
PY
"$DLM" synth instructions town.dlm --teacher "cli:$PY $T/teacher.py" --per-section 10 --apply > cli.txt
n_cli=$(grep -c '^<!-- dlm-auto-synth: synth_teacher="cli:' town.dlm)
[ "$n_cli" = 5 ] || fail "the rule-based teacher gave $n_cli pairs: $(cat cli.txt)"
"$DLM" train town.dlm -q > /dev/null
r_synth=$(recall)
echo "recall on 5 held-out questions: prose alone $r_prose; teacher self: $n_self pairs; prose + $n_cli synthesized pairs $r_synth"
"$DLM" synth revert town.dlm > /dev/null
cmp town.dlm orig.dlm || fail "revert"
echo ok
