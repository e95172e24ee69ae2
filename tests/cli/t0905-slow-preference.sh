#!/usr/bin/env bash
# dlm preference mine|apply|revert|list on tiny with a cli: judge script
# (the original's interface: {"prompt", "candidate"} on stdin, {"score": N}
# on stdout). The judge here logs every candidate it scores; Python then
# recomputes, from that log alone, which pair the spec's rule picks for
# each prompt (the largest score margin among distinct answers whose
# difflib ratio is <= 0.95, margin >= threshold) and compares with what
# was staged. apply writes auto-mined sections (§1.5 marker, regex-checked),
# train --no-mined leaves them out, revert restores the file byte for byte;
# every exit code.
. "$(dirname "$0")/lib.sh"
PY=${PYTHON:-python3}
write_doc m.dlm 3 tiny
cp m.dlm orig.dlm
rc=0; "$DLM" preference mine m.dlm 2> err.txt || rc=$?
[ $rc = 1 ] && grep -q "no training run" err.txt && grep -q "^hint: train first" err.txt || fail "untrained: rc $rc $(cat err.txt)"
"$DLM" train m.dlm -q > /dev/null
cat > judge.py <<'PY'
import json, sys
j = json.load(sys.stdin)
c = j["candidate"]
with open(sys.argv[1], "a") as f: f.write(json.dumps(j) + "\n")
# a deterministic score: the share of letters among the characters
print(json.dumps({"score": sum(ch.isalpha() for ch in c) / max(1, len(c)), "reasoning": "letters"}))
PY
"$DLM" preference mine m.dlm --judge "cli:$PY $T/judge.py $T/judged.jsonl" --samples 4 --temp 1.5 --threshold 0.01 > mine.txt
id=$(sed -n 's/^dlm_id: //p' m.dlm)
$PY - "$DLM_HOME/store/$id/preference/pending.json" judged.jsonl <<'P'
import difflib, json, sys
items = json.load(open(sys.argv[1]))["items"]
judged = [json.loads(l) for l in open(sys.argv[2])]
score = lambda c: sum(ch.isalpha() for ch in c) / max(1, len(c))
by_prompt = {}
for j in judged: by_prompt.setdefault(j["prompt"], []).append(j["candidate"])
want = []
for p, cands in by_prompt.items():
    best = None
    for i, a in enumerate(cands):
        for b in cands[i + 1:]:
            if difflib.SequenceMatcher(None, a, b).ratio() > 0.95 or score(a) == score(b): continue
            c, r = (a, b) if score(a) > score(b) else (b, a)
            if best is None or score(c) - score(r) > best[0]: best = (score(c) - score(r), c, r)
    if best and best[0] >= 0.01: want.append((p, best[1], best[2]))
got = [(x["prompt"], x["chosen"], x["rejected"]) for x in items]
assert got == want, (got, want)
assert len(by_prompt) == 3, by_prompt.keys()
for x in items:
    assert x["judge_score_chosen"] == score(x["chosen"]) and x["judge_score_rejected"] == score(x["rejected"]), x
    assert x["mined_run_id"] == 1 and x["judge_name"].startswith("cli:") and x["mined_at"].endswith("Z"), x
print("ok: %d triples mined as the rule picks them" % len(items))
P
n=$($PY -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["items"]))' "$DLM_HOME/store/$id/preference/pending.json")
[ "$n" -ge 1 ] || fail "nothing mined"
cmp -s m.dlm orig.dlm || fail "staging changed the document"
"$DLM" preference list m.dlm --json | $PY -c "import json,sys; j=json.load(sys.stdin); assert len(j['pending']) == $n and j['written'] == [], j"
"$DLM" preference list m.dlm > list.txt
grep -q "^pending (.*/preference/pending.json): $n$" list.txt && grep -q "^  1\. ." list.txt &&
    grep -q "^written (auto-mined sections in m.dlm): 0$" list.txt || fail "preference list: $(cat list.txt)"
"$DLM" preference apply m.dlm | grep "wrote $n auto-mined section" >/dev/null || fail "apply"
$PY - m.dlm orig.dlm "$n" <<'P'
import re, sys
t, o, n = open(sys.argv[1]).read(), open(sys.argv[2]).read(), int(sys.argv[3])
assert t.startswith(o)
m = re.findall(r'^::preference::\n<!-- dlm-auto-mined: judge_name="cli:[^"\n]*" judge_score_chosen="(-?[\d.e-]+)" '
               r'judge_score_rejected="(-?[\d.e-]+)" mined_at="\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ" mined_run_id="1" -->\n'
               r'### Prompt\n.*?\n### Chosen\n.*?\n### Rejected\n', t[len(o):], re.M | re.S)
assert len(m) == n and all(float(c) > float(r) for c, r in m), m
P
"$DLM" train m.dlm --max-steps 1 --fresh > t1.txt 2>&1
grep -q "(dpo: " t1.txt || fail "train does not train the mined triples: $(cat t1.txt)"
"$DLM" train m.dlm --max-steps 1 --fresh --no-mined > t2.txt 2>&1
grep -q "dpo" t2.txt && fail "--no-mined kept the mined triples: $(cat t2.txt)"
"$DLM" preference revert m.dlm | grep "removed $n auto-mined" >/dev/null || fail "revert"
cmp m.dlm orig.dlm || fail "revert did not restore the document byte for byte"
# exit codes
rc=0; "$DLM" preference revert m.dlm > /dev/null || rc=$?; [ $rc = 2 ] || fail "revert with nothing: rc $rc"
rc=0; "$DLM" preference apply m.dlm > /dev/null || rc=$?; [ $rc = 2 ] || fail "apply with nothing staged: rc $rc"
rc=0; "$DLM" preference mine m.dlm --threshold 5 -q > out.txt || rc=$?
[ $rc = 2 ] && grep -q "nothing to add" out.txt || fail "nothing above the margin: rc $rc"
rc=0; "$DLM" preference mine m.dlm --judge "cli:echo nonsense" -q 2> err.txt || rc=$?
[ $rc = 1 ] && grep -q "must print a JSON object" err.txt || fail "bad judge output: rc $rc $(cat err.txt)"
rc=0; "$DLM" preference mine m.dlm --judge "cli:exit 4" -q 2> err.txt || rc=$?
[ $rc = 1 ] && grep -q "exited 4" err.txt || fail "failing judge: rc $rc $(cat err.txt)"
rc=0; "$DLM" preference mine m.dlm --judge bogus -q 2> err.txt || rc=$?
[ $rc = 1 ] && grep -q "unknown judge .bogus." err.txt && grep -q "^hint:" err.txt || fail "unknown judge: rc $rc"
for args in "mine m.dlm --samples 1" "mine m.dlm --adapter tone" "mine m.dlm --top-p 0" "frob m.dlm" "mine"; do
    rc=0; "$DLM" preference $args >/dev/null 2>&1 || rc=$?
    [ $rc = 2 ] || fail "usage '$args': rc $rc"
done
cmp -s m.dlm orig.dlm || fail "failed runs changed the document"
echo ok
