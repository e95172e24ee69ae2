#!/usr/bin/env bash
# r0802: the chat page of `dlm api` in headless Chromium (Debian chromium,
# npm playwright-core 1.65.1): two questions typed into the page, answers
# streamed into it equal the API's own answers for the same conversation
# (fetched with curl), nothing is fetched from anywhere but the server, and
# a screenshot is kept as a test artifact in the build folder.
: "${DLM_SRC:?}" "${DLM_BUILD:?}"
NAME=r0802 NODE_MODULE=playwright-core
. "$DLM_SRC/tests/ref/api/lib.sh"
[ -x /usr/bin/chromium ] || skip_or_fail "chromium is not installed (scripts/deps.sh)"
serve --base tiny
mkdir -p "$DLM_BUILD/test-artifacts"
shot="$DLM_BUILD/test-artifacts/r0802-chat-page.png"
Q1="What is the capital of France?"
Q2="And of Germany?"
HOME="$T" node "$DLM_SRC/tests/ref/api/chat_page.cjs" "$url" "$shot" "$Q1" "$Q2" > page.json || fail "the page run"
[ -s "$shot" ] || fail "no screenshot"
python3 - "$url" "$Q1" "$Q2" <<'PY' || fail "page vs API: $(cat page.json)"
import json, subprocess, sys
url, q1, q2 = sys.argv[1:]
page = json.load(open("page.json"))
assert not page["foreign"], page["foreign"]
assert not page["errors"], page["errors"]
assert all(page["grew"]), page["grew"]
def api(messages):
    body = json.dumps({"model": page["model"], "messages": messages, "temperature": 0, "max_tokens": 24})
    out = subprocess.run(["curl", "-s", url + "v1/chat/completions", "-d", body], capture_output=True, check=True).stdout
    return json.loads(out)["choices"][0]["message"]["content"]
a1 = api([{"role": "user", "content": q1}])
a2 = api([{"role": "user", "content": q1}, {"role": "assistant", "content": a1}, {"role": "user", "content": q2}])
assert page["answers"] == [a1, a2], (page["answers"], [a1, a2])
PY
kill -TERM $pid; wait $pid; pid=
echo "r0802: ok (screenshot: $shot)"
