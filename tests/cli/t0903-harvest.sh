#!/usr/bin/env bash
# dlm harvest from sway-style reports: the failing probes with a prompt and
# a reference (and enough confidence) become `### Q !probe` instruction
# sections with the auto-harvest marker; pairs already in the document are
# skipped; --revert gives back the document byte for byte; every exit code.
# The expected additions are computed by a Python reading of the report
# written from spec §8, and the written sections are read back by a regex
# over the file (spec §1.5/§1.6), not through dlm.
. "$(dirname "$0")/lib.sh"
PY=${PYTHON:-python3}
write_doc h.dlm
cp h.dlm orig.dlm
cat > rep.json <<'J'
{"schema_version": 1, "sway_version": "0.4", "adapter_id": "v0001", "probes": [
 {"name": "capital-italy", "kind": "section_internalization", "verdict": "fail", "score": 0.1,
  "evidence": {"prompt": "What is the capital of Italy?", "reference": "Rome.", "confidence": 0.9}},
 {"name": "passes", "verdict": "pass", "evidence": {"prompt": "Q", "reference": "A"}},
 {"name": "warned", "verdict": "warn", "evidence": {"prompt": "Q2", "reference": "A2"}},
 {"name": "low-confidence", "verdict": "fail",
  "evidence": {"prompt": "What is the capital of Austria?", "reference": "Vienna.", "confidence": 0.3}},
 {"name": "already-there", "verdict": "fail",
  "evidence": {"prompt": "  What is the capital of France?\n", "reference": "Paris."}},
 {"name": "twice", "verdict": "fail", "evidence": {"prompt": "What is the capital of Italy?", "reference": "Rome."}},
 {"name": "multi line", "verdict": "fail",
  "evidence": {"prompt": "Name two rivers\nof Europe.", "reference": "The Rhine\n\nand the Danube."}},
 "not an object",
 {"name": "no-evidence", "verdict": "pass"}
]}
J
cat > expect.py <<'P'
import json, sys
r = json.load(open(sys.argv[1])); minc = float(sys.argv[2]); doc = open(sys.argv[3]).read()
seen, out = set(), []
for p in r["probes"]:
    if not isinstance(p, dict) or p.get("verdict") != "fail": continue
    ev = p.get("evidence") or {}
    q, a = ev["prompt"].strip(), ev["reference"].strip()
    if float(ev.get("confidence", 1.0)) < minc: continue
    if (q, a) in seen or ("### Q\n%s\n### A\n%s\n" % (q, a)) in doc: continue
    seen.add((q, a)); out.append((p["name"], q, a))
print(json.dumps(out))
P
cat > written.py <<'P'
import json, re, sys
t = open(sys.argv[1]).read()
out = []
for m in re.finditer(r'^::instruction::\n<!-- dlm-auto-harvest: source="([^"\n]*)" -->\n### Q !probe\n(.*?)\n### A\n(.*?)(?=\n::|\Z)', t, re.S | re.M):
    out.append((m.group(1).split("/", 1)[1], m.group(2).strip(), m.group(3).strip()))
    assert m.group(1).startswith(sys.argv[2] + "/"), m.group(1)
print(json.dumps(out))
P
# dry run: plan printed, nothing written
"$DLM" harvest h.dlm --sway-json rep.json --min-confidence 0.5 > plan.txt
cmp -s h.dlm orig.dlm || fail "a dry run changed the document"
grep -q "^harvest plan: 2 add, 2 skip" plan.txt || fail "plan: $(cat plan.txt)"
# apply
"$DLM" harvest h.dlm --sway-json rep.json --min-confidence 0.5 --apply --tag sway > apply.txt
want=$($PY expect.py rep.json 0.5 orig.dlm)
got=$($PY written.py h.dlm sway)
[ "$want" = "$got" ] || fail "harvested sections: want $want, got $got"
"$DLM" show h.dlm --json | $PY -c '
import json, sys
s = json.load(sys.stdin)["sections"]
h = [x for x in s if x.get("auto_harvest") or "harvest" in json.dumps(x)]
assert len(h) == 2, s'
# the document still trains-parses and the old sections keep their ids
$PY - orig.dlm h.dlm "$DLM" <<'P'
import json, subprocess, sys
ids = lambda p: [x["id"] for x in json.loads(subprocess.check_output([sys.argv[3], "show", p, "--json"]))["sections"]]
a, b = ids(sys.argv[1]), ids(sys.argv[2])
assert b[:len(a)] == a and len(b) == len(a) + 2, (a, b)
P
# the same report again: nothing left to harvest → 2
rc=0; "$DLM" harvest h.dlm --sway-json rep.json --min-confidence 0.5 --apply >/dev/null || rc=$?
[ $rc = 2 ] || fail "a second harvest: rc $rc, want 2"
# revert: byte for byte
"$DLM" harvest h.dlm --revert | grep "removed 2 auto-harvested sections" >/dev/null || fail "revert"
cmp h.dlm orig.dlm || fail "revert did not restore the document byte for byte"
rc=0; "$DLM" harvest h.dlm --revert >/dev/null || rc=$?; [ $rc = 2 ] || fail "revert with nothing: rc $rc"
# strict (default): a failing probe without a reference is an error naming it; --lax skips it
echo '{"schema_version": 1, "probes": [{"name": "noref", "verdict": "fail", "evidence": {"prompt": "Q?"}},
 {"name": "ok", "verdict": "fail", "evidence": {"prompt": "What is 2+2?", "reference": "4."}}]}' > noref.json
rc=0; "$DLM" harvest h.dlm --sway-json noref.json 2> err.txt || rc=$?
[ $rc = 1 ] && grep -q "noref" err.txt && grep -q "^hint: --lax" err.txt || fail "strict: rc $rc $(cat err.txt)"
"$DLM" harvest h.dlm --sway-json noref.json --lax --apply 2> err.txt > out.txt || fail "lax: $(cat err.txt)"
grep -q "warning: probe 'noref'" err.txt && grep -q "^harvest plan: 1 add" out.txt || fail "lax: $(cat err.txt out.txt)"
"$DLM" harvest h.dlm --revert > /dev/null && cmp -s h.dlm orig.dlm || fail "revert after lax"
# nothing failing → 2; malformed reports → 1 with the reason
echo '{"schema_version": 1, "probes": [{"name": "a", "verdict": "pass"}]}' > pass.json
rc=0; "$DLM" harvest h.dlm --sway-json pass.json > out.txt || rc=$?
[ $rc = 2 ] && grep -q "nothing to harvest" out.txt || fail "all pass: rc $rc"
for bad in '[1, 2]' '{"probes": []}' '{"schema_version": 2, "probes": []}' '{"schema_version": 1}' '{"schema_version": 1, "probes": [' ; do
    echo "$bad" > bad.json
    rc=0; "$DLM" harvest h.dlm --sway-json bad.json 2> err.txt || rc=$?
    [ $rc = 1 ] && grep -q "bad.json" err.txt || fail "report $bad: rc $rc $(cat err.txt)"
done
rc=0; "$DLM" harvest h.dlm --sway-json missing.json 2>/dev/null || rc=$?; [ $rc = 1 ] || fail "missing report: rc $rc"
# usage errors → 2
for args in "" "--strict --lax --sway-json rep.json" "--revert --apply" "--sway-json rep.json --min-confidence 2"; do
    rc=0; "$DLM" harvest h.dlm $args 2>/dev/null >/dev/null || rc=$?
    [ $rc = 2 ] || fail "usage '$args': rc $rc"
done
cmp -s h.dlm orig.dlm || fail "failed harvests changed the document"
echo ok
