#!/usr/bin/env bash
# dlm synth with a stand-in OpenAI-compatible server (a python3 http.server)
# that answers with noisy JSON: prose around it, ``` fences, trailing
# commas, items that are not pairs, near-duplicates. The pairs staged must
# be exactly those a Python reading of the replies keeps (the rules of
# spec §8 with difflib.SequenceMatcher for the 0.95 dedup, written here
# independently of dlm); apply writes auto-synth sections (v15 marker,
# checked by a regex of §1.5); revert restores the document byte for byte;
# a cli: teacher gets its JSON on stdin; every exit code.
. "$(dirname "$0")/lib.sh"
PY=${PYTHON:-python3}
cat > s.dlm <<DOC
---
dlm_id: $ID
dlm_version: 15
base_model: tiny
---
# Capitals

Paris is the capital of France. Rome is the capital of Italy.

::instruction::
### Q
What is the capital of France?
### A
Paris.

::instruction::
### Q
Placeholder
### A
Placeholder.
::prose::
# Rivers

The Seine flows through Paris. The Tiber flows through Rome.
DOC
cp s.dlm orig.dlm
cat > r1.txt <<'R'
Sure! Here are the pairs you asked for:
```json
[
  {"question": "What is the capital of Italy?", "answer": "Rome."},
  {"question": "what is the capital of  ITALY?", "answer": "Rome, of course."},
  {"question": "Which city is the capital of France?", "answer": "Paris."},
  {"question": "", "answer": "an empty question"},
  "not a pair",
  {"question": "Where is Madrid?", "answer": 5},
  {"question": "What is the capital of France?", "answer": "Paris!"},
  {"question": "Is Rome in Italy?", "answer": "Yes, Rome is in Italy.",},
  {"question": "Is Rome in Italy!", "answer": "Yes, Rome is in Italy."},
]
```
Let me know if you need more.
R
cat > r2.txt <<'R'
{"pairs": [
  {"question": "Which river flows through Paris?", "answer": "The Seine."},
  {"question": "Which river flows through Rome?", "answer": "The Tiber."},
  {"q": "short keys", "a": "are accepted too"},
  {"question": "What is the capital of Italy?", "answer": "Rome."},
  {"question": "Which river flows through Pariss?", "answer": "The Seine."},
]}
R
$PY "$DLM_SRC/tests/cli/helpers/openai_standin.py" req.log r1.txt r2.txt > port.txt &
srv=$!
trap 'kill $srv 2>/dev/null; rm -rf "$T"' EXIT
for _ in $(seq 600); do [ -s port.txt ] && break; sleep 0.1; done
port=$(cat port.txt)
[ -n "$port" ] || fail "the stand-in server did not start"
URL=openai:http://127.0.0.1:$port

# dry run: nothing staged, nothing written
"$DLM" synth instructions s.dlm --teacher "$URL" --per-section 10 --dry-run > dry.txt
cmp -s s.dlm orig.dlm || fail "a dry run changed the document"
"$DLM" synth list s.dlm --json | $PY -c 'import json,sys; j=json.load(sys.stdin); assert j["pending"] == [] and j["written"] == [], j'
# stage
: > req.log
OPENAI_API_KEY=sk-test "$DLM" synth instructions s.dlm --teacher "$URL/v1" --per-section 10 --model tiny-teacher > stage.txt
"$DLM" show s.dlm --json > show.json
id=$(sed -n 's/^dlm_id: //p' s.dlm)
$PY - "$DLM_HOME/store/$id/synth/pending.json" s.dlm r1.txt r2.txt req.log show.json <<'P'
import difflib, json, re, sys
pend, doc, r1, r2, log, show = sys.argv[1:]
norm = lambda s: " ".join(s.strip().lower().split())
def pairs_of(reply):
    # the first JSON array holding an object, trailing commas dropped
    t = re.sub(r",(\s*[\]}])", r"\1", reply)
    for i, c in enumerate(t):
        if c != "[": continue
        try: v, _ = json.JSONDecoder().raw_decode(t[i:])
        except ValueError: continue
        if isinstance(v, list) and any(isinstance(x, dict) for x in v): break
    else: return []
    out = []
    for x in v:
        if not isinstance(x, dict): continue
        q, a = x.get("question", x.get("q")), x.get("answer", x.get("a"))
        if isinstance(q, str) and isinstance(a, str) and q.strip() and a.strip(): out.append((q.strip(), a.strip()))
    return out
def dup(p, o):
    return norm(p[0]) == norm(o[0]) or \
        difflib.SequenceMatcher(None, norm(p[0]) + "\n" + norm(p[1]), norm(o[0]) + "\n" + norm(o[1])).ratio() > 0.95
text = open(doc).read()
have = [(q.strip(), a.strip()) for q, a in re.findall(r"^### Q\n(.*?)\n### A\n(.*?)(?=\n### Q|\n::|\Z)", text, re.S | re.M)]
prose = [s["id"] for s in json.load(open(show))["sections"] if s["type"] == "prose"]
assert len(prose) == 2, prose
want, kept = [], []
for sec, reply in zip(prose, [open(r1).read(), open(r2).read()]):
    for p in pairs_of(reply):
        if any(dup(p, o) for o in have + kept): continue
        kept.append(p); want.append({"question": p[0], "answer": p[1], "source_section_id": sec})
got = [{k: x[k] for k in ("question", "answer", "source_section_id")} for x in json.load(open(pend))["items"]]
assert got == want, "staged:\n%s\nexpected:\n%s" % (json.dumps(got, indent=1), json.dumps(want, indent=1))
assert len(want) == 6, want
reqs = [json.loads(l) for l in open(log)]
assert len(reqs) == 2 and all(r["path"] == "/v1/chat/completions" and r["auth"] == "Bearer sk-test" for r in reqs), reqs
b = reqs[0]["body"]
assert b["model"] == "tiny-teacher" and b["temperature"] == 0.0 and b["max_tokens"] == 512, b
assert [m["role"] for m in b["messages"]] == ["system", "user"] and "Paris is the capital" in b["messages"][1]["content"]
assert "The Seine flows" in reqs[1]["body"]["messages"][1]["content"]
print("ok: %d staged pairs equal the Python reading" % len(got))
P
grep -q "^synth: 2 requests, 11 pairs parsed, 3 not pairs, 5 near-duplicates" stage.txt || fail "summary: $(cat stage.txt)"
cmp -s s.dlm orig.dlm || fail "staging changed the document"
# apply the staged pairs: six auto-synth sections with the v15 marker
"$DLM" synth apply s.dlm | grep "wrote 6 auto-synth sections" >/dev/null || fail "apply"
$PY - s.dlm orig.dlm <<'P'
import re, sys
t, o = open(sys.argv[1]).read(), open(sys.argv[2]).read()
assert t.startswith(o), "apply must only append"
m = re.findall(r'^::instruction::\n<!-- dlm-auto-synth: synth_teacher="([^"\n]+)" synth_strategy="(extraction)" '
               r'synth_at="(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)" source_section_id="([0-9a-f]{16})" -->\n### Q\n', t[len(o):], re.M)
assert len(m) == 6 and all(x[0].startswith("openai:http://127.0.0.1:") for x in m), m
P
"$DLM" synth list s.dlm --json | $PY -c 'import json,sys; j=json.load(sys.stdin); assert j["pending"] == [] and len(j["written"]) == 6, j'
"$DLM" synth list s.dlm > list.txt
grep -q "^pending (.*/synth/pending.json): 0$" list.txt && grep -q "^written (auto-synth sections in s.dlm): 6$" list.txt &&
    [ "$(grep -cE '^  line [0-9]+  [0-9a-f]{16}  extraction from [0-9a-f]+$' list.txt)" = 6 ] || fail "synth list: $(cat list.txt)"
rc=0; "$DLM" synth apply s.dlm >/dev/null || rc=$?; [ $rc = 2 ] || fail "apply with nothing staged: rc $rc"
"$DLM" synth revert s.dlm | grep "removed 6 auto-synth sections" >/dev/null || fail "revert"
cmp s.dlm orig.dlm || fail "revert did not restore the document byte for byte"
rc=0; "$DLM" synth revert s.dlm >/dev/null || rc=$?; [ $rc = 2 ] || fail "revert with nothing: rc $rc"
# --apply at once, then revert: byte for byte again
"$DLM" synth instructions s.dlm --teacher "$URL" --apply -q > /dev/null
[ "$(grep -c '^<!-- dlm-auto-synth:' s.dlm)" = 6 ] || fail "--apply with --per-section 3: $(grep -c dlm-auto-synth s.dlm) sections"
"$DLM" synth revert s.dlm > /dev/null && cmp -s s.dlm orig.dlm || fail "revert after --apply"
# a cli: teacher gets {"system", "prompt", ...} on stdin
cat > teacher.sh <<'SH'
#!/bin/sh
{ cat; echo; } >> teacher-in.jsonl
echo 'Here: [{"question": "What flows through Rome?", "answer": "The Tiber."}]'
SH
chmod +x teacher.sh
"$DLM" synth instructions s.dlm --teacher "cli:./teacher.sh" --max-pairs 1 --json > cli.json
$PY - cli.json teacher-in.jsonl <<'P'
import json, sys
j = json.load(open(sys.argv[1]))
assert [p["question"] for p in j["pairs"]] == ["What flows through Rome?"] and j["mode"] == "staged", j
ins = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
assert len(ins) == 2 and {"system", "prompt", "max_new_tokens", "temperature", "top_p", "seed"} <= set(ins[0]), ins
P
# --strategy both asks twice per section; --filter none keeps the near-duplicates; --filter judge
# keeps the answers a cli: judge scores above an empty answer (here: answers naming Rome)
: > req.log
"$DLM" synth instructions s.dlm --teacher "$URL" --strategy both --filter none --per-section 10 --json > both.json
$PY - both.json req.log <<'P'
import json, sys
j = json.load(open(sys.argv[1])); reqs = [json.loads(l) for l in open(sys.argv[2])]
assert len(reqs) == 4 and j["requests"] == 4, (len(reqs), j["requests"])
assert [p["synth_strategy"] for p in j["pairs"]].count("expansion") > 0 and j["duplicates"] == 0, j
assert "expand" in reqs[1]["body"]["messages"][1]["content"], reqs[1]
P
cat > rome.sh <<'SH'
#!/bin/sh
case "$(cat)" in *'"candidate": "'*Rome*|*'"candidate":"'*Rome*) echo '{"score": 1}' ;; *) echo '{"score": 0}' ;; esac
SH
chmod +x rome.sh
"$DLM" synth instructions s.dlm --teacher "$URL" --per-section 10 --filter judge --judge "cli:$T/rome.sh" --json > judged.json
$PY -c 'import json,sys; j=json.load(open(sys.argv[1])); a=[p["answer"] for p in j["pairs"]]; assert a and all("Rome" in x for x in a) and j["judged_out"] > 0, j' judged.json
# nothing new → 2; a teacher that fails → 1; bad flags → 2
echo '[{"question": "What is the capital of France?", "answer": "Paris."}]' > dup.txt
rc=0; "$DLM" synth instructions s.dlm --teacher "cli:cat $T/dup.txt" > out.txt || rc=$?
[ $rc = 2 ] && grep -q "nothing new" out.txt || fail "only duplicates: rc $rc $(cat out.txt)"
rc=0; "$DLM" synth instructions s.dlm --teacher "cli:exit 3" 2> err.txt || rc=$?
[ $rc = 1 ] && grep -q "exited with status 3" err.txt || fail "failing teacher: rc $rc $(cat err.txt)"
rc=0; "$DLM" synth instructions s.dlm --teacher openai:http://127.0.0.1:1 2> err.txt || rc=$?
[ $rc = 1 ] && grep -q "^hint:" err.txt || fail "no server: rc $rc $(cat err.txt)"
rc=0; "$DLM" synth instructions s.dlm --teacher self 2> err.txt || rc=$?
[ $rc = 1 ] && grep -q "needs a trained adapter" err.txt || fail "self without adapter: rc $rc $(cat err.txt)"
rc=0; "$DLM" synth instructions s.dlm --teacher gpt5 2> err.txt || rc=$?
[ $rc = 1 ] && grep -q "unknown teacher" err.txt || fail "unknown teacher: rc $rc"
for args in "instructions s.dlm --strategy sideways" "instructions s.dlm --apply --dry-run" "frob s.dlm" \
            "instructions s.dlm --filter judge" "instructions s.dlm --per-section 0" "instructions"; do
    rc=0; "$DLM" synth $args >/dev/null 2>&1 || rc=$?
    [ $rc = 2 ] || fail "usage '$args': rc $rc"
done
echo ok
