#!/usr/bin/env bash
# dlm api over raw HTTP (curl, python3 sockets) on the embedded base: the
# SSE framing, every 4xx path with its OpenAI-style error object, a client
# that stalls mid-body or disconnects mid-stream (its slot is freed at
# once and the server keeps serving), the queue limit (429), the API key,
# and SIGTERM finishing a request in flight.
set -euo pipefail
. "$DLM_SRC/tests/cli/lib.sh"
pid=
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; rm -rf "$T"' EXIT
serve() {   # serve ARGS...: start the server, URL in $url
    : > url.txt
    "$DLM" api --base tiny --port 0 "$@" > url.txt 2> serve.err &
    pid=$!
    for _ in $(seq 600); do [ -s url.txt ] && break; sleep 0.1; done
    url=$(cat url.txt); url=${url%/}
    [ -n "$url" ] || fail "server did not start: $(cat serve.err)"
}
stop() { kill -TERM $pid; wait $pid || fail "server exit status $?"; pid=; }
# post PATH BODY: prints "STATUS BODY"
post() { curl -s -o body.json -w '%{http_code}' "$url$1" -H 'Content-Type: application/json' --data-binary "$2"; }
# expect_err STATUS PARAM|- CODE|- PATH BODY
expect_err() {
    st=$(post "$4" "$5")
    [ "$st" = "$1" ] || fail "$5: status $st, expected $1: $(cat body.json)"
    python3 - "$2" "$3" <<'PY' || fail "$5: bad error object: $(cat body.json)"
import json, sys
e = json.load(open("body.json"))["error"]
assert set(e) == {"message", "type", "param", "code"}, e
assert e["message"] and e["type"], e
want_param, want_code = sys.argv[1], sys.argv[2]
assert e["param"] == (None if want_param == "-" else want_param), e
assert e["code"] == (None if want_code == "-" else want_code), e
PY
}
health() { curl -s "$url/health" | python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])"; }

serve --parallel 2 --queue 0 --max-body 4 --ctx 64 --timeout 2
QM='{"messages":[{"role":"user","content":"What is the capital of France?"}]'
Q="$QM"',"temperature":0,"max_tokens":12'

# --- SSE framing, as the spec of server-sent events and OpenAI's stream say
curl -sN "$url/v1/chat/completions" -d "$Q"',"stream":true}' > sse.txt
python3 - <<'PY' || fail "SSE framing: $(cat sse.txt)"
import json
raw = open("sse.txt", "rb").read().decode()
assert raw.endswith("data: [DONE]\n\n"), raw[-40:]
events = raw.split("\n\n")[:-1]
assert len(events) >= 3, events
for ev in events:
    assert ev.startswith("data: ") and "\n" not in ev, repr(ev)
chunks = [json.loads(ev[6:]) for ev in events[:-1]]
assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
assert all(c["object"] == "chat.completion.chunk" and c["id"] == chunks[0]["id"] for c in chunks)
assert chunks[-1]["choices"][0]["finish_reason"] in ("stop", "length")
assert all(c["choices"][0]["finish_reason"] is None for c in chunks[:-1])
PY
# the streamed text is the whole answer's text; the prompt came from the cache
post /v1/chat/completions "$Q}" > /dev/null
python3 - <<'PY' || fail "streamed text differs from the whole answer: $(cat body.json)"
import json
body = json.load(open("body.json"))
whole = body["choices"][0]["message"]["content"]
u = body["usage"]
assert u["prompt_tokens_details"]["cached_tokens"] == u["prompt_tokens"] - 1, u
raw = open("sse.txt").read().split("\n\n")[:-2]
text = "".join(json.loads(e[6:])["choices"][0]["delta"].get("content") or "" for e in raw)
assert text == whole, (text, whole)
PY
# stop strings cut the text (and are not part of it)
post /v1/chat/completions "$Q"',"stop":[" of"]}' > /dev/null
python3 -c 'import json; c=json.load(open("body.json"))["choices"][0]; assert c["message"]["content"]=="The capital" and c["finish_reason"]=="stop", c' ||
    fail "stop string: $(cat body.json)"

# --- bad input: a clear 4xx, OpenAI's error object
expect_err 400 - - /v1/chat/completions '{"messages": [}'
expect_err 400 - - /v1/chat/completions '[1, 2]'
expect_err 400 messages - /v1/chat/completions '{"model":"tiny"}'
expect_err 400 temperature - /v1/chat/completions "$QM"',"temperature":"hot"}'
expect_err 400 temperature - /v1/chat/completions "$QM"',"temperature":9}'
expect_err 400 max_tokens - /v1/chat/completions "$QM"',"max_tokens":1.5}'
expect_err 400 stream - /v1/chat/completions "$Q"',"stream":"yes"}'
expect_err 400 'messages[0]' - /v1/chat/completions '{"messages":[{"role":"tool","content":"x"}]}'
expect_err 400 'messages[0].content' - /v1/chat/completions '{"messages":[{"role":"user","content":7}]}'
expect_err 400 n - /v1/chat/completions "$Q"',"n":3}'
expect_err 400 prompt - /v1/completions '{"prompt":["a","b"]}'
expect_err 404 model model_not_found /v1/chat/completions "$Q"',"model":"gpt-4"}'
long=$(python3 -c 'print("word " * 1000)')
expect_err 413 - request_too_large /v1/completions "{\"prompt\":\"$long\"}"
expect_err 400 prompt context_length_exceeded /v1/completions '{"prompt":"one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty"}'
st=$(curl -s -o body.json -w '%{http_code}' "$url/v1/chat/completions")
[ "$st" = 405 ] || fail "GET on a POST endpoint: $st"
st=$(curl -s -o body.json -w '%{http_code}' "$url/v2/nothing")
[ "$st" = 404 ] || fail "unknown path: $st"
curl -s "$url/" > page.html; grep -q '<title>dlm chat</title>' page.html || fail "no chat page at /"

# --- a client that stalls mid-body is dropped after --timeout; others are served meanwhile
python3 - "$url" <<'PY' &
import socket, sys, time, urllib.parse
u = urllib.parse.urlparse(sys.argv[1])
s = socket.create_connection((u.hostname, u.port))
s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"pro")
t = time.time()
s.settimeout(10)
data = s.recv(100)          # the server closes the idle connection
assert time.time() - t < 8, "stalled client not dropped"
PY
stall=$!
st=$(post /v1/chat/completions "$Q}")
[ "$st" = 200 ] || fail "not served while a client stalls: $st"
wait $stall || fail "a stalled client kept its connection"

# --- disconnect mid-stream frees the slot at once (each step is slowed to 50 ms)
stop
DLM_TEST_API_STEP_MS=50 serve --parallel 1 --queue 0 --ctx 512
python3 - "$url" <<'PY' || fail "mid-stream disconnect"
import json, socket, sys, time, urllib.parse, urllib.request
u = urllib.parse.urlparse(sys.argv[1])
body = json.dumps({"prompt": "Once upon a time", "max_tokens": 400, "stream": True, "temperature": 0}).encode()
s = socket.create_connection((u.hostname, u.port))
s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
buf = b""
while b"data: " not in buf:
    buf += s.recv(4096)
s.close()                     # gone after the first event; 400 tokens would take 20 s
t = time.time()
while True:
    h = json.load(urllib.request.urlopen(sys.argv[1] + "/health"))
    if h["slots_processing"] == 0:
        break
    assert time.time() - t < 3, "slot still busy after the client left"
    time.sleep(0.05)
PY
# the same for a whole (non-streamed) answer
python3 - "$url" <<'PY' || fail "disconnect while waiting for a whole answer"
import json, socket, sys, time, urllib.parse, urllib.request
u = urllib.parse.urlparse(sys.argv[1])
body = json.dumps({"prompt": "Once upon a time", "max_tokens": 400, "temperature": 0}).encode()
s = socket.create_connection((u.hostname, u.port))
s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
time.sleep(0.5)
s.close()
t = time.time()
while json.load(urllib.request.urlopen(sys.argv[1] + "/health"))["slots_processing"]:
    assert time.time() - t < 3, "slot still busy after the client left"
    time.sleep(0.05)
PY

# --- queue full: one slot, no queue → the second request gets 429
curl -sN "$url/v1/completions" -d '{"prompt":"Once upon a time","max_tokens":60,"stream":true}' > first.txt &
first=$!
for _ in $(seq 50); do [ "$(health slots_processing)" = 1 ] && break; sleep 0.05; done
expect_err 429 - queue_full /v1/completions '{"prompt":"Hello","max_tokens":2}'
# --- SIGTERM finishes the request in flight, then exits 0
kill -TERM $pid
wait $first
grep -q '^data: \[DONE\]$' first.txt || fail "in-flight stream cut by SIGTERM: $(tail -3 first.txt)"
wait $pid || fail "exit status $? after SIGTERM"
pid=

# --- continuous batching: a short request joins a running stream and leaves before it ends
DLM_TEST_API_STEP_MS=30 serve --parallel 2
python3 - "$url" <<'PY' || fail "a request did not join the running batch"
import json, socket, sys, threading, time, urllib.parse, urllib.request
u = urllib.parse.urlparse(sys.argv[1])
body = json.dumps({"prompt": "Once upon a time", "max_tokens": 80, "stream": True, "temperature": 0}).encode()
s = socket.create_connection((u.hostname, u.port))
s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
buf = b""
while b"data: " not in buf:
    buf += s.recv(4096)
req = urllib.request.Request(sys.argv[1] + "/v1/completions", json.dumps(
    {"prompt": "Hello there", "max_tokens": 3, "temperature": 0}).encode(), {"Content-Type": "application/json"})
short = json.load(urllib.request.urlopen(req))
assert short["usage"]["completion_tokens"] >= 1, short
h = json.load(urllib.request.urlopen(sys.argv[1] + "/health"))
assert h["slots_processing"] == 1, ("the long stream should still be decoding", h)
s.settimeout(30)
while b"data: [DONE]" not in buf:
    chunk = s.recv(65536)
    assert chunk, "stream cut"
    buf += chunk
PY
stop

# --- API key
serve --api-key sekrit
st=$(curl -s -o body.json -w '%{http_code}' "$url/v1/models")
[ "$st" = 401 ] || fail "no key: $st"
st=$(curl -s -o body.json -w '%{http_code}' -H 'Authorization: Bearer sekrit' "$url/v1/models")
[ "$st" = 200 ] || fail "with the key: $st"
st=$(curl -s -o /dev/null -w '%{http_code}' "$url/health")
[ "$st" = 200 ] || fail "/health needs no key: $st"
# binds 127.0.0.1 by default
case "$url" in http://127.0.0.1:*) ;; *) fail "default bind: $url" ;; esac
stop
echo ok
