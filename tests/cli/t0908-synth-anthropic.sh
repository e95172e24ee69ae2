#!/usr/bin/env bash
# dlm synth --teacher anthropic:MODEL (the original's spelling) against a
# stand-in for Anthropic's Messages API written from its public docs
# (helpers/anthropic_standin.py: it refuses what the API refuses). Checked:
# the request (POST /v1/messages at ANTHROPIC_BASE_URL, x-api-key from
# ANTHROPIC_API_KEY, anthropic-version 2023-06-01, body model / max_tokens
# / system / messages, temperature / top_p only when given), the reply's
# text blocks joined and the pairs written into the document with the
# teacher in their marker, the SDK's retry policy (429 retried after
# retry-after-ms, at most 2 retries), and the errors: no key, 401, 429
# three times, 429 with a long retry-after, 529, a model that refuses
# temperature, a reply that is not JSON, an oversized reply, --model,
# a bad base URL. The key never appears in any output.
. "$(dirname "$0")/lib.sh"
PY=${PYTHON:-python3}
KEY=sk-ant-test-secret-0123456789
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
::prose::
# Rivers

The Seine flows through Paris.
DOC
cp s.dlm orig.dlm
cat > reply.txt <<'R'
[{"question": "What is the capital of Italy?", "answer": "Rome."},
 {"question": "Which river flows through Paris?", "answer": "The Seine."}]
--SPLIT--
(second text block, after a tool_use block)
R
: > script.txt
$PY "$DLM_SRC/tests/cli/helpers/anthropic_standin.py" req.log reply.txt script.txt > port.txt &
srv=$!
trap 'kill $srv 2>/dev/null; rm -rf "$T"' EXIT
for _ in $(seq 600); do [ -s port.txt ] && break; sleep 0.1; done
port=$(cat port.txt)
[ -n "$port" ] || fail "the stand-in server did not start"
export ANTHROPIC_BASE_URL=http://127.0.0.1:$port/
unset ANTHROPIC_API_KEY OPENAI_API_KEY
synth() { "$DLM" synth instructions s.dlm --teacher anthropic:claude-test "$@"; }

# --- a run: the first request is rate-limited and retried ----------------------
echo 429 > script.txt
: > req.log
ANTHROPIC_API_KEY=$KEY synth --per-section 2 --max-new-tokens 300 --temp 0.3 --top-p 0.9 --apply > out.txt 2> err.txt ||
    fail "anthropic synth: $(cat err.txt)"
$PY - <<'PYEOF' || fail "requests: $(cat req.log)"
import json
reqs = [json.loads(l) for l in open("req.log")]
# 2 prose sections, the first asked twice (429, then the retry)
assert len(reqs) == 3, len(reqs)
assert reqs[0]["body"] == reqs[1]["body"], "the retry is the same request"
for r in reqs:
    assert r["path"] == "/v1/messages", r["path"]
    assert r["x-api-key"] == "sk-ant-test-secret-0123456789" and r["authorization"] is None, r
    assert r["anthropic-version"] == "2023-06-01" and r["content-type"] == "application/json", r
    b = r["body"]
    assert sorted(b) == ["max_tokens", "messages", "model", "system", "temperature", "top_p"], sorted(b)
    assert b["model"] == "claude-test" and b["max_tokens"] == 300, b
    assert abs(b["temperature"] - 0.3) < 1e-9 and abs(b["top_p"] - 0.9) < 1e-9, b
    assert b["system"].startswith("You write training data from a document."), b["system"]
    [m] = b["messages"]
    assert m["role"] == "user" and m["content"].startswith("Write 2 question/answer pairs"), m
assert "Paris is the capital of France." in reqs[0]["body"]["messages"][0]["content"]
assert "The Seine flows through Paris." in reqs[2]["body"]["messages"][0]["content"]
PYEOF
grep -c '^::instruction::$' s.dlm | grep -qx 3 || fail "written sections: $(cat s.dlm)"
grep -q 'synth_teacher="anthropic:claude-test"' s.dlm || fail "marker: $(cat s.dlm)"
grep -q '^What is the capital of Italy?$' s.dlm && grep -q '^The Seine\.$' s.dlm || fail "pairs: $(cat s.dlm)"
"$DLM" synth revert s.dlm > /dev/null && cmp -s s.dlm orig.dlm || fail "revert"
# without --temp / --top-p no sampling parameter is sent (the model's own)
: > req.log
ANTHROPIC_API_KEY=$KEY synth --dry-run > out.txt 2> err.txt || fail "no --temp: $(cat err.txt)"
$PY -c '
import json
for l in open("req.log"):
    b = json.loads(l)["body"]
    assert sorted(b) == ["max_tokens", "messages", "model", "system"] and b["max_tokens"] == 512, b' || fail "default body: $(cat req.log)"

# --- errors --------------------------------------------------------------------
check() {   # check RC PATTERN [HINT]: the last run's exit code and message
    [ "$rc" = "$1" ] && grep -q -- "$2" err.txt || fail "want rc $1 and '$2': rc $rc $(cat err.txt)"
    [ -z "${3:-}" ] || grep -q "^hint: .*$3" err.txt || fail "hint '$3': $(cat err.txt)"
    ! grep -q "$KEY" err.txt out.txt || fail "the key was printed"
}
rc=0; synth > out.txt 2> err.txt || rc=$?
check 1 "teacher anthropic:claude-test needs ANTHROPIC_API_KEY set" "the environment only"
: > req.log
echo 401 > script.txt
rc=0; ANTHROPIC_API_KEY=$KEY synth > out.txt 2> err.txt || rc=$?
check 1 "HTTP 401 authentication_error: invalid x-api-key" "check ANTHROPIC_API_KEY"
[ "$(wc -l < req.log)" = 1 ] || fail "401 was retried: $(wc -l < req.log)"
: > req.log
printf '429\n429\n429\n' > script.txt
rc=0; ANTHROPIC_API_KEY=$KEY synth > out.txt 2> err.txt || rc=$?
check 1 "HTTP 429 rate_limit_error" "still refused after 2 retries"
[ "$(wc -l < req.log)" = 3 ] || fail "429: $(wc -l < req.log) requests, want 3 (2 retries)"
printf '429-long\n' > script.txt
rc=0; ANTHROPIC_API_KEY=$KEY synth > out.txt 2> err.txt || rc=$?
check 1 "HTTP 429, and the API asks to wait 3600 s before retrying" "run synth again later"
rc=0; ANTHROPIC_API_KEY=$KEY "$DLM" synth instructions s.dlm --teacher anthropic:claude-notemp-1 --temp 0.5 > out.txt 2> err.txt || rc=$?
check 1 "HTTP 400 invalid_request_error: \`temperature\` is deprecated for this model." "run without --temp / --top-p"
printf '529\n529\n529\n' > script.txt
rc=0; ANTHROPIC_API_KEY=$KEY synth > out.txt 2> err.txt || rc=$?
check 1 "HTTP 529 overloaded_error: Overloaded" "retries"
echo malformed > script.txt
rc=0; ANTHROPIC_API_KEY=$KEY synth > out.txt 2> err.txt || rc=$?
check 1 "the reply is not JSON"
echo big > script.txt
rc=0; ANTHROPIC_API_KEY=$KEY synth > out.txt 2> err.txt || rc=$?
check 1 "the reply is larger than 4194304 bytes"
: > script.txt
rc=0; ANTHROPIC_API_KEY=$KEY synth --model other > out.txt 2> err.txt || rc=$?
check 2 "--model is for openai:URL"
rc=0; ANTHROPIC_API_KEY=$KEY synth --seed 7 > out.txt 2> err.txt || rc=$?
check 2 "--seed: Anthropic's Messages API takes no seed"
rc=0; ANTHROPIC_API_KEY=$KEY ANTHROPIC_BASE_URL=ftp://x "$DLM" synth instructions s.dlm --teacher anthropic:m > out.txt 2> err.txt || rc=$?
check 1 "ANTHROPIC_BASE_URL must be an http:// or https:// URL"
rc=0; ANTHROPIC_API_KEY=$KEY "$DLM" synth instructions s.dlm --teacher anthropic: > out.txt 2> err.txt || rc=$?
check 1 "teacher anthropic: needs a model name"
cmp -s s.dlm orig.dlm || fail "a failed run changed the document"
# nothing was staged by the failures
"$DLM" synth list s.dlm --json | $PY -c 'import json,sys; j=json.load(sys.stdin); assert j["pending"] == [] and j["written"] == [], j'
echo ok
