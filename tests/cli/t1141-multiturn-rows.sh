#!/usr/bin/env bash
# training.multi_turn (issue 30, point 9), the quick part: the key acts (the
# dataset `dlm doctor` and `dlm train` build has one conversation row per
# Q/A pair by default, three with multi_turn: 3, none with 0, and none for a
# document with a single pair; training_run.json records them), and is
# refused out of range with file:line. The answers it buys are measured by
# t1140-slow-multiturn-tutor.
. "$(dirname "$0")/lib.sh"
items() { "$DLM" doctor "$1" --json | python3 -c 'import json,sys; d=json.load(sys.stdin)["document"]; print(d["train_items"])'; }
cat > a.dlm <<DOC
---
dlm_id: $ID
dlm_version: 15
base_model: tiny
training:
  sequence_len: 128
  num_epochs: 2
---
Paris is the capital of France.

::instruction::
### Q
What is the capital of France?
### A
Paris.

### Q
What is the capital of Germany?
### A
Berlin.

### Q
What is the capital of Spain?
### A
Madrid.

### Q
What is the capital of Italy?
### A
Rome.
DOC
n1=$(items a.dlm)
sed 's/^training:$/training:\n  multi_turn: 0/' a.dlm > b.dlm && n0=$(items b.dlm)
sed 's/^training:$/training:\n  multi_turn: 3/' a.dlm > c.dlm && n3=$(items c.dlm)
# 1 prose row + 4 pairs, all trained (a document under 20 rows holds none
# out, docs/training.md): a conversation row per pair, three with multi_turn 3
[ "$n0" = 5 ] && [ "$n1" = 9 ] && [ "$n3" = 17 ] ||
    fail "train items: multi_turn 0 $n0, 1 $n1, 3 $n3"
# a single pair has no other pair to ask before it
write_tiny_doc d.dlm
sed 's/^training:$/training:\n  multi_turn: 0/' d.dlm > e.dlm
[ "$(items d.dlm)" = "$(items e.dlm)" ] || fail "one pair: conversation rows appeared"
# out of range: the schema's error at the key
sed 's/^training:$/training:\n  multi_turn: 9/' a.dlm > bad.dlm
rc=0; "$DLM" show bad.dlm > err.txt 2>&1 || rc=$?
[ $rc != 0 ] && grep -q "bad.dlm:[0-9]*:[0-9]*: training.multi_turn: Input should be less than or equal to 8" err.txt ||
    fail "multi_turn: 9: rc $rc $(cat err.txt)"
# the run records its conversation rows. (Determinism across thread counts
# and an exact resume with the rows in: t0201, whose document has three
# pairs and the default multi_turn.)
"$DLM" train a.dlm -q --max-steps 2 > /dev/null || fail "train"
python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))["multi_turn"]; assert m=={"rows_per_pair":1,"rows":4,"shortened":0}, m' \
    "$DLM_HOME/store/$ID/adapter/versions/v0001/training_run.json" || fail "training_run.json has no multi_turn record"
