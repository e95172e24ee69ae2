#!/usr/bin/env bash
# Issue 30, point 9: a question asked after earlier turns is answered as it
# is alone. The tutor template on the embedded base, trained with its own
# settings: each of its three questions asked alone and as turn 2, 3 and 4
# of a conversation through `dlm api` (what the chat page and the repl send:
# the whole conversation, the earlier answers being the model's own), greedy,
# must give the same answer (tests/cli/helpers/multiturn_check.py). Trained
# with training.multi_turn: 0 (single-turn rows only, as before) the same
# check must find answers that differ (7 of 9 did), so the check measures
# what the conversation rows change.
. "$(dirname "$0")/lib.sh"
CHECK="$DLM_SRC/tests/cli/helpers/multiturn_check.py"
"$DLM" init tutor.dlm --template tutor -q
out=$("$DLM" train tutor.dlm 2>&1) || fail "train: $out"
python3 "$CHECK" "$DLM" tutor.dlm > on.txt || fail "multi-turn answers differ: $(cat on.txt)"
grep -q "^0 of 9 answers" on.txt || fail "$(cat on.txt)"
# training_run.json records the rows: one per pair (default multi_turn 1)
run=$(ls -d "$DLM_HOME"/store/*/adapter/versions/v0001)/training_run.json
python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))["multi_turn"]; assert m=={"rows_per_pair":1,"rows":3,"shortened":0}, m' "$run" ||
    fail "training_run.json: $(cat "$run")"
# the same document without conversation rows
mkdir off && sed 's/^  lora_dropout: 0.0$/  lora_dropout: 0.0\n  multi_turn: 0/' tutor.dlm |
    sed 's/^dlm_id: .*/dlm_id: 01JD0000000000000000000001/' > off/tutor.dlm
grep -q "multi_turn: 0" off/tutor.dlm || fail "could not set multi_turn: 0"
out=$("$DLM" train off/tutor.dlm 2>&1) || fail "train multi_turn 0: $out"
python3 "$CHECK" "$DLM" off/tutor.dlm --expect-fail > off.txt ||
    fail "without multi-turn rows every answer matched; the check proves nothing: $(cat off.txt)"
echo "with multi_turn 1: $(tail -1 on.txt); with 0: $(tail -1 off.txt)"
