#!/bin/bash
# r0909: dlm's anthropic: teacher against Anthropic's Python SDK 1.17 (the
# client the original's AnthropicTeacher calls; the last 1.x, which speaks
# API version 2023-06-01 with x-api-key, as dlm does), both talking to the
# Messages API stand-in (tests/cli/helpers/anthropic_standin.py). The SDK
# parses the stand-in's answers (content blocks, usage) and its errors into
# its own exception classes, so the stand-in answers as the API does; the
# request dlm sends for a synth ask equals the one the SDK sends for the
# original's payload (model, system, messages, max_tokens; temperature and
# top_p, which the SDK no longer takes as arguments, through extra_body)
# as JSON, with the same x-api-key and
# anthropic-version headers; and the retry policy is the same: how many
# requests each makes for 429 x3, 529 x3, 429 then success, 429 with
# x-should-retry: false, and 401.
set -eu
: "${DLM_SRC:?}" "${DLM_BUILD:?}"
venv=$("$DLM_SRC/scripts/ref-venv.sh" anthropic) || {
    if [ "${DLM_REF_SKIP:-}" = "1" ]; then echo "skip: the anthropic reference venv is unavailable"; exit 77; fi
    exit 1
}
py="$venv/bin/python"
DLM=${DLM:-$DLM_BUILD/dlm}
T=$(mktemp -d "${TMPDIR:-/tmp}/dlm-r0909.XXXXXX")
srv=""
trap '[ -n "$srv" ] && kill $srv 2>/dev/null; rm -rf "$T"' EXIT
cd "$T"
export DLM_HOME="$T/home"
cat > s.dlm <<'DOC'
---
dlm_id: 01JD0000000000000000000000
dlm_version: 15
base_model: tiny
---
Paris is the capital of France.
DOC
printf '[{"question": "What is the capital of France?", "answer": "Paris."}]\n--SPLIT--\nsecond block\n' > reply.txt
: > script.txt
"$py" "$DLM_SRC/tests/cli/helpers/anthropic_standin.py" req.log reply.txt script.txt > port.txt &
srv=$!
for _ in $(seq 600); do [ -s port.txt ] && break; sleep 0.1; done
export ANTHROPIC_BASE_URL="http://127.0.0.1:$(cat port.txt)" ANTHROPIC_API_KEY=sk-ant-r0909
dlm_synth() { "$DLM" -v synth instructions s.dlm --teacher anthropic:claude-test --per-section 2 --max-new-tokens 300 \
    --temp 0.3 --top-p 0.9 --dry-run > out.txt 2> err.txt; }
# 1. one ask: dlm's request, then the SDK's with the original's payload for the same prompts
: > req.log
dlm_synth || { cat err.txt >&2; exit 1; }
mv req.log dlm.log
"$py" - <<'PY'
import json, anthropic
ask = next(json.loads(l[len("synth: ask: "):]) for l in open("err.txt") if l.startswith("synth: ask: "))
dlm_reply = next(json.loads(l[len("synth: reply: "):]) for l in open("err.txt") if l.startswith("synth: reply: "))
c = anthropic.Anthropic()          # ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL from the environment, as the original
# AnthropicTeacher.generate's payload
m = c.messages.create(model="claude-test", system=ask["system"], messages=[{"role": "user", "content": ask["user"]}],
                      max_tokens=300, extra_body={"temperature": 0.3, "top_p": 0.9})
texts = [b.text.strip() for b in m.content if b.type == "text" and b.text.strip()]
# the original's _extract_anthropic_text joins the stripped text blocks with newlines
assert "\n".join(texts) == dlm_reply.strip(), (texts, dlm_reply)
assert m.usage.input_tokens == 10 and m.usage.output_tokens == 20 and m.stop_reason == "end_turn", m
sdk = json.loads(open("req.log").read().splitlines()[0])
mine = json.loads(open("dlm.log").read().splitlines()[0])
for k in ("path", "x-api-key", "anthropic-version", "content-type"):
    assert sdk[k] == mine[k], (k, sdk[k], mine[k])
assert sdk["body"] == mine["body"], (sdk["body"], mine["body"])
print("r0909: dlm's request equals the SDK's (path, x-api-key, anthropic-version, body); replies agree")
PY
# 2. retries: the number of requests for each script
count() { wc -l < req.log | tr -d ' '; }
for sc in "429 429 429" "529 529 529" "429" "429-noretry" "401"; do
    printf '%s\n' $sc > script.txt; : > req.log
    dlm_synth || true
    n_dlm=$(count)
    printf '%s\n' $sc > script.txt; : > req.log
    "$py" - <<'PY' || true
import anthropic
try:
    anthropic.Anthropic().messages.create(model="claude-test", system="s", messages=[{"role": "user", "content": "u"}],
                                          max_tokens=10)
except anthropic.APIStatusError as ex:
    print("r0909: SDK raised %s (HTTP %d)" % (type(ex).__name__, ex.status_code))
PY
    n_sdk=$(count)
    [ "$n_dlm" = "$n_sdk" ] || { echo "r0909: '$sc': dlm sent $n_dlm requests, the SDK $n_sdk" >&2; exit 1; }
    echo "r0909: '$sc': $n_dlm requests from each"
done
echo "r0909: ok"
