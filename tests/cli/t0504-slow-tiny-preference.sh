#!/usr/bin/env bash
# Preference behaviour on the embedded base `tiny`: a document first teaches
# plain answers (SFT), then preference triples prefer one style (answers that
# end with a citation). After the DPO phase the chosen-minus-rejected
# completion log-prob margin (measured by test_pref's margin tool with the
# pairs rendered as the phase renders them) has grown on the training pairs
# and on held-out pairs of the same style that were never trained, and a
# greedy answer to a held-out prompt moves toward the cited style. DPO
# (beta 0.1, lr 5e-4, 4 epochs) narrows the margin; ORPO (alpha 0.1, lr
# 2e-3, 8 epochs), whose NLL term trains the chosen answers directly, turns
# it positive on held-out pairs and greedy held-out answers end in " [1]".
. "$(dirname "$0")/lib.sh"
gguf="$DLM_SRC/models/tiny.gguf"
[ -f "$gguf" ] || fail "models/tiny.gguf is missing (make tiny-base)"
unset DLM_TINY
cite=" [1]"
mkdocs() { # ID PREFERENCE-YAML
python3 - "$DLM_SRC/tools/tiny/qa.txt" "$cite" "$1" "$2" <<'PY'
import sys
qa, q = [], None
for line in open(sys.argv[1]):
    line = line.rstrip("\n")
    if line.startswith("Q: "): q = line[3:]
    elif line.startswith("A: ") and q: qa.append((q, line[3:])); q = None
cite = sys.argv[2]
train, held = qa[0:24:2], qa[1:24:2]   # interleaved: same topics, different prompts
head = """---
dlm_id: %s
dlm_version: 15
base_model: tiny
training:
  lora_r: 16
  lora_alpha: 32
  lora_dropout: 0.0
  sequence_len: 128
  learning_rate: 0.002
  num_epochs: 3
  micro_batch_size: 2
  grad_accum: 1
  preference:
%s
---
""" % (sys.argv[3], sys.argv[4])
def pref(pairs):
    return "".join(f"### Prompt\n{a}\n### Chosen\n{b}{cite}\n### Rejected\n{b}\n\n" for a, b in pairs)
with open("t.dlm", "w") as f:
    f.write(head + "::instruction::\n" + "".join(f"### Q\n{a}\n### A\n{b}\n\n" for a, b in train))
    f.write("::preference::\n" + pref(train))
with open("held.dlm", "w") as f:
    f.write(head + "::preference::\n" + pref(held))
with open("held_prompt.txt", "w") as f:
    f.write(held[0][0])
PY
}
mkdocs 01JDPREF000000000000000000 "    hyperparams: {beta: 0.1, learning_rate: 0.0005, num_epochs: 4}"
store="$DLM_HOME/store/01JDPREF000000000000000000/adapter/versions"
margin() { DLM_PREF_MARGIN_DOC=$1 DLM_PREF_MARGIN_MODEL="$gguf" DLM_PREF_MARGIN_ADAPTER=$2 "$DLM_BUILD/test_pref"; }

"$DLM" train t.dlm --phase sft -q > /dev/null 2>&1 || fail "SFT"
"$DLM" prompt t.dlm "$(cat held_prompt.txt)" --temp 0 -n 40 > before.txt
"$DLM" train t.dlm --phase preference > dpo.txt 2>&1 || { cat dpo.txt; fail "DPO"; }
"$DLM" prompt t.dlm "$(cat held_prompt.txt)" --temp 0 -n 40 > after.txt
tb=$(margin t.dlm "$store/v0001"); ta=$(margin t.dlm "$store/v0002")
hb=$(margin held.dlm "$store/v0001"); ha=$(margin held.dlm "$store/v0002")
echo "training pairs: after SFT $tb; after DPO $ta"
echo "held-out pairs: after SFT $hb; after DPO $ha"
echo "held-out prompt: $(cat held_prompt.txt)"
echo "  after SFT: $(cat before.txt)"
echo "  after DPO: $(cat after.txt)"
tail -1 dpo.txt
m() { echo "$1" | awk '{print $2}'; }
awk -v a="$(m "$ta")" -v b="$(m "$tb")" 'BEGIN{exit !(a > b + 1)}' || fail "training margin did not grow: $tb -> $ta"
awk -v a="$(m "$ha")" -v b="$(m "$hb")" 'BEGIN{exit !(a > b + 1)}' || fail "held-out margin did not grow: $hb -> $ha"

# ORPO: the cited style wins on held-out pairs and in greedy answers
mkdocs 01JDPREF000000000000000001 "    method: orpo
    hyperparams: {alpha: 0.1, learning_rate: 0.002, num_epochs: 8}"
store="$DLM_HOME/store/01JDPREF000000000000000001/adapter/versions"
"$DLM" train t.dlm -q > orpo.txt 2>&1 || { cat orpo.txt; fail "SFT + ORPO"; }
tb=$(margin t.dlm "$store/v0001"); ta=$(margin t.dlm "$store/v0002")
hb=$(margin held.dlm "$store/v0001"); ha=$(margin held.dlm "$store/v0002")
echo "ORPO training pairs: after SFT $tb; after ORPO $ta"
echo "ORPO held-out pairs: after SFT $hb; after ORPO $ha"
awk -v a="$(m "$ha")" 'BEGIN{exit !(a > 0)}' || fail "ORPO: held-out margin not positive: $ha"
cited=0
for q in "What is the capital of Italy?" "What is the capital of Germany?" "What is the capital of England?"; do
    got=$("$DLM" prompt t.dlm "$q" --temp 0 -n 30)
    echo "  ORPO greedy: $q -> $got"
    case "$got" in *"[1]"*) cited=$((cited + 1)) ;; esac
done
[ $cited -ge 2 ] || fail "ORPO: only $cited of 3 held-out greedy answers end with the citation"
echo ok
