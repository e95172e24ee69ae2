#!/usr/bin/env bash
# No row is held out of training silently (issue 30 point 1). On the
# embedded base:
#   - a small document (4 Q/A pairs + a paragraph, fewer than 20 rows) with
#     training.val_frac unset trains on every row: the run says so, the
#     summary says "(no validation: every row trained)", the banner and
#     doctor --json have no held-out row;
#   - training.val_frac: 0.5 holds out the rows the spec's hash picks
#     (recomputed here in Python: u64_be(sha256(f"{seed}\0{sid}\0{k}")[:8])
#     < 0.5·2^64), and train, the run log's banner and doctor name each one
#     by file:line and question, with the key that changes it;
#   - a document of 24 rows with the key unset holds out 10% (the
#     original's split), named the same way; val_frac 0 turns it off;
#   - a one-row document whose row the 0.5 split takes trains it (said so);
#   - val_frac above 0.5 is a schema error with file:line.
set -euo pipefail
. "$DLM_SRC/tests/cli/lib.sh"
qa() { for i in $(seq "$1"); do printf '\n### Q\nWhat is %d plus %d?\n### A\n%d.\n' "$i" "$i" $((2 * i)); done; }
mk() { # mk FILE ID NPAIRS [VAL_FRAC]
    { printf -- '---\ndlm_id: %s\ndlm_version: 15\nbase_model: tiny\ntraining:\n  sequence_len: 64\n  micro_batch_size: 2\n' "$2"
      [ -z "${4:-}" ] || printf '  val_frac: %s\n' "$4"
      printf '  multi_turn: 0\n'   # item counts are the split's rows alone (t1141 counts conversations)
      printf -- '---\n# Notes\n\nParis is the capital of France and Berlin the capital of Germany.\n\n::instruction::\n'
      qa "$3"; } > "$1"
}
mk small.dlm 01JD0000000000000000000001 4
"$DLM" train small.dlm --max-steps 2 > out.txt 2> err.txt || fail "train small: $(cat err.txt)"
grep -q "^validation: none: the document has 5 rows (fewer than 20), every row trains; no validation loss, no early stopping" err.txt ||
    fail "no split line: $(cat err.txt)"
grep -q "^trained v0001: 2 steps, loss .* (no validation: every row trained)" out.txt || fail "summary: $(cat out.txt)"
"$DLM" doctor small.dlm --json > d.json
python3 - d.json "$DLM_HOME"/store/01JD0000000000000000000001/logs/train-*.jsonl <<'PY' || fail "small: a row held out"
import json, sys
d = json.load(open(sys.argv[1]))["document"]
b = json.loads(open(sys.argv[2]).readline())
assert d["val_items"] == 0 and b["val_items"] == 0 and b["train_items"] == 5, (d, b)
for v in (d["validation"], b["validation"]):
    assert v["held_out"] == [] and v["none"] == "small document" and v["rows"] == 5 and v["fraction"] == 0, v
PY

# val_frac 0.5: the hash's rows, each named
mk half.dlm 01JD0000000000000000000002 4 0.5
"$DLM" train half.dlm --max-steps 2 --json > half.json 2> err.txt || fail "train half: $(cat err.txt)"
"$DLM" doctor half.dlm > doctor.txt
"$DLM" doctor half.dlm --json > dh.json
"$DLM" show half.dlm --json > show.json
python3 - half.dlm err.txt doctor.txt dh.json half.json "$DLM_HOME"/store/01JD0000000000000000000002/logs/train-*.jsonl show.json <<'PY' || fail "val_frac 0.5"
import hashlib, json, re, sys
doc, err, doctor, dh, js, log, show = sys.argv[1:]
text = open(doc).read()
lines = text.split("\n")
# the section ids (checked against the original's in t0001); the split rule is recomputed here
secs = json.load(open(show))["sections"]
prose_sid, instr_sid = secs[0]["id"], secs[1]["id"]
assert [x["type"] for x in secs] == ["prose", "instruction"], secs
def is_val(sid, k):
    h = hashlib.sha256(b"%d\0%s\0%d" % (42, sid.encode(), k)).digest()[:8]
    return int.from_bytes(h, "big") < int(0.5 * 2**64)
want = []
if is_val(prose_sid, 0): want.append("prose")
qs = [(i + 1, l) for i, l in enumerate(lines) if l == "### Q"]
for k, (ln, _) in enumerate(qs):
    if is_val(instr_sid, k): want.append((ln, lines[ln]))
assert want, "the hash holds out nothing here: pick another document"
n = len(want)
e = open(err).read()
assert re.search(r"^validation: %d of 5 rows held out \(training.val_frac 0.5\): they are not trained$" % n, e, re.M), e
for w in want:
    if w == "prose":
        assert re.search(r'^  held out: half\.dlm:\d+: prose "Paris is the capital', e, re.M), e
    else:
        line = '  held out: half.dlm:%d: Q "%s"' % w
        assert line in e.splitlines(), (line, e)
        assert "  " + line in open(doctor).read().splitlines(), (line, open(doctor).read())
assert "  to train on every row: write training.val_frac: 0 in the frontmatter" in e, e
v = json.load(open(dh))["document"]["validation"]
b = json.loads(open(log).readline())["validation"]
assert v == b, (v, b)
got = [("prose" if h["kind"] == "prose" else (h["line"], h["text"])) for h in v["held_out"]]
assert sorted(map(str, got)) == sorted(map(str, want)), (got, want)
j = json.load(open(js))
assert j["held_out_rows"] == n and j["rows"] == 5 and j["val_frac"] == 0.5, j
print("ok: held out", want)
PY

# 24 rows, key unset: the original's 10%; val_frac 0: none
mk big.dlm 01JD0000000000000000000003 23
"$DLM" doctor big.dlm --json | python3 -c '
import json, sys
v = json.load(sys.stdin)["document"]["validation"]
assert v["fraction"] == 0.1 and v["rows"] == 24 and v["none"] is None and len(v["held_out"]) > 0, v
assert all(h["kind"] == "Q" or h["kind"] == "prose" for h in v["held_out"]), v' || fail "big: no 10% split"
mk big0.dlm 01JD0000000000000000000004 23 0
"$DLM" train big0.dlm --max-steps 1 2> err.txt > /dev/null || fail "train big0: $(cat err.txt)"
grep -q "^validation: none (training.val_frac: 0): every row trains; no validation loss, no early stopping" err.txt ||
    fail "val_frac 0: $(cat err.txt)"
grep -q "held out:" err.txt && fail "val_frac 0 held a row out: $(cat err.txt)"
# a one-row document whose row the 0.5 split takes: it trains, said as such
for w in alpha beta gamma delta epsilon zeta eta theta; do
    printf -- '---\ndlm_id: 01JD0000000000000000000006\ndlm_version: 15\nbase_model: tiny\ntraining:\n  val_frac: 0.5\n---\nThe %s fox.\n' "$w" > one.dlm
    sid=$("$DLM" show one.dlm --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["sections"][0]["id"])')
    python3 -c 'import hashlib,sys; h=hashlib.sha256(b"42\0%s\0000" % sys.argv[1].encode()).digest()[:8]
sys.exit(0 if int.from_bytes(h, "big") < int(0.5 * 2**64) else 1)' "$sid" && break
done
"$DLM" doctor one.dlm | grep -q "validation: none: all 1 rows fell into the 0.5 split, so every row trains" ||
    fail "all rows in the split: $("$DLM" doctor one.dlm)"
# out of range
mk bad.dlm 01JD0000000000000000000005 2 0.7
set +e; out=$("$DLM" show bad.dlm 2>&1); rc=$?; set -e
[ $rc -ne 0 ] && grep -q "bad.dlm:8:3: training.val_frac: Input should be less than or equal to 0.5" <<<"$out" || fail "range: $out"
echo ok
