#!/usr/bin/env bash
# r0801: the official openai npm client (7.59.0) drives `dlm api` on the
# embedded base: models list, chat completions whole and streamed,
# completions whole and streamed, typed 4xx errors. At temperature 0 every
# answer equals `dlm prompt --temp 0` for the same messages (chat) or text
# (--raw), with and without a document's system prompt, and for a trained
# document: its current adapter, an older version and the bare base.
: "${DLM_SRC:?}"
NAME=r0801 NODE_MODULE=openai
. "$DLM_SRC/tests/ref/api/lib.sh"
Q="What is the capital of France?"
RAW="Once upon a time"
N=24

check() {   # check OUT.json CHAT_REF RAW_REF MODEL
    python3 - "$@" <<'PY'
import json, sys
out = json.load(open(sys.argv[1]))
chat_ref, raw_ref, model = open(sys.argv[2]).read(), open(sys.argv[3]).read(), sys.argv[4]
def eq(a, b, what):
    if a != b:
        sys.exit(f"{what}: {a!r} != {b!r}")
assert model in out["models"], out["models"]
eq(out["chat"], chat_ref, "chat vs dlm prompt --temp 0")
eq(out["chat_stream"], chat_ref, "streamed chat vs dlm prompt --temp 0")
eq(out["completion"], raw_ref, "completion vs dlm prompt --raw --temp 0")
eq(out["completion_stream"], raw_ref, "streamed completion vs dlm prompt --raw --temp 0")
for k in ("prompt_tokens", "completion_tokens", "total_tokens"):
    eq(out["chat_stream_usage"][k], out["chat_usage"][k], "usage streamed vs whole")
# the streamed request repeats the whole one's prompt: all but its last token come from the cache
eq(out["chat_stream_usage"]["prompt_tokens_details"]["cached_tokens"], out["chat_usage"]["prompt_tokens"] - 1, "cached_tokens")
eq(out["chat_stream_finish"], out["chat_finish"], "finish_reason streamed vs whole")
eq(out["completion_finish"], "length" if out["completion_usage"]["completion_tokens"] == 24 else "stop", "finish_reason")
eq(out["unknown_model_code"], "model_not_found", "unknown model code")
eq(out["n2_param"], "n", "n=2 param")
PY
}

# 1. a bare base
serve --parallel 3 --base tiny
node "$DLM_SRC/tests/ref/api/openai_client.cjs" "$url" "$Q" "$RAW" $N > out1.json || fail "openai client (base)"
"$DLM" prompt --base tiny "$Q" --temp 0 -n $N | python3 -c 'import sys; sys.stdout.write(sys.stdin.read()[:-1])' > chat1.ref
"$DLM" prompt --base tiny --raw "$RAW" --temp 0 -n $N | python3 -c 'import sys; sys.stdout.write(sys.stdin.read()[:-1])' > raw1.ref
check out1.json chat1.ref raw1.ref tiny || fail "base answers differ"
stop

# 2. a document with a system prompt and no trained adapter yet
cat > d.dlm <<'DOC'
---
dlm_id: 01JD0000000000000000000701
dlm_version: 15
base_model: tiny
system_prompt: You are a geography tutor. Answer in one short sentence.
---
# Notes

Paris is the capital of France.
DOC
serve --parallel 3 d.dlm
grep -q "note: no trained adapter yet; answering with the base" serve.err || fail "no 'no trained adapter' note: $(cat serve.err)"
node "$DLM_SRC/tests/ref/api/openai_client.cjs" "$url" "$Q" "$RAW" $N > out2.json || fail "openai client (document)"
"$DLM" prompt d.dlm "$Q" --temp 0 -n $N 2>/dev/null | python3 -c 'import sys; sys.stdout.write(sys.stdin.read()[:-1])' > chat2.ref
"$DLM" prompt d.dlm --raw "$RAW" --temp 0 -n $N 2>/dev/null | python3 -c 'import sys; sys.stdout.write(sys.stdin.read()[:-1])' > raw2.ref
check out2.json chat2.ref raw2.ref tiny || fail "document answers differ"
cmp -s chat1.ref chat2.ref && fail "the system prompt changed nothing"
stop

# 3. trained twice: the adapters are served as NAME, NAME@vNNNN, and the base
cat >> d.dlm <<'DOC'

::instruction::
### Q
What is the capital of France?
### A
Paris.
DOC
sed -i 's/^system_prompt: .*/&\ntraining:\n  sequence_len: 64\n  num_epochs: 2\n  learning_rate: 0.01/' d.dlm
"$DLM" train d.dlm -q > /dev/null || fail "train v0001"
"$DLM" train d.dlm -q --fresh > /dev/null 2>&1 || "$DLM" train d.dlm -q > /dev/null || fail "train v0002"
serve --parallel 3 d.dlm
grep -q "note: no trained adapter" serve.err && fail "note printed for a trained document"
curl -s "${url}v1/models" | python3 -c 'import json,sys; ids=[m["id"] for m in json.load(sys.stdin)["data"]]; assert ids == ["d", "d@v0002", "d@v0001", "tiny"], ids' ||
    fail "model ids"
for m in d d@v0001 tiny; do
    node "$DLM_SRC/tests/ref/api/openai_client.cjs" "$url" "$Q" "$RAW" $N "$m" > "out3-$m.json" || fail "openai client ($m)"
done
"$DLM" prompt d.dlm "$Q" --temp 0 -n $N | python3 -c 'import sys; sys.stdout.write(sys.stdin.read()[:-1])' > chat3.ref
"$DLM" prompt d.dlm --raw "$RAW" --temp 0 -n $N | python3 -c 'import sys; sys.stdout.write(sys.stdin.read()[:-1])' > raw3.ref
check out3-d.json chat3.ref raw3.ref d || fail "current adapter answers differ from dlm prompt"
"$DLM" prompt d.dlm "$Q" --temp 0 -n $N --no-adapter | python3 -c 'import sys; sys.stdout.write(sys.stdin.read()[:-1])' > chat3b.ref
"$DLM" prompt d.dlm --raw "$RAW" --temp 0 -n $N --no-adapter | python3 -c 'import sys; sys.stdout.write(sys.stdin.read()[:-1])' > raw3b.ref
check out3-tiny.json chat3b.ref raw3b.ref tiny || fail "base answers differ from dlm prompt --no-adapter"
# v0001 is served from its own adapter: dlm prompt answers with it once v0001 is current again
python3 - "$DLM_HOME" <<'PY'
import glob, os, sys
p = glob.glob(os.path.join(sys.argv[1], "store", "*", "adapter", "current.txt"))[0]
open(p, "w").write("adapter/versions/v0001\n")
PY
"$DLM" prompt d.dlm "$Q" --temp 0 -n $N | python3 -c 'import sys; sys.stdout.write(sys.stdin.read()[:-1])' > chat3c.ref
"$DLM" prompt d.dlm --raw "$RAW" --temp 0 -n $N | python3 -c 'import sys; sys.stdout.write(sys.stdin.read()[:-1])' > raw3c.ref
check out3-d@v0001.json chat3c.ref raw3c.ref d@v0001 || fail "v0001 answers differ from dlm prompt on v0001"
stop
echo "r0801: ok"
