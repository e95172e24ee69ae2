#!/usr/bin/env bash
# r1004: the official openai npm client (7.59.0) drives `dlm api` on a
# document with named adapters and a trained gate (tests/cli/helpers/
# styles_doc.py, 4 epochs on the embedded base). /v1/models lists the
# document (the default mix), DOC@NAME per trained adapter and the base; at
# temperature 0, chat and completions (whole and streamed) of DOC@sql and
# DOC@tone equal `dlm prompt --adapter NAME` (and --raw); the default model
# equals `dlm prompt --adapter-mix` with the gate's mean weights (read from a
# static_mean `dlm export`), and with --gate off `dlm prompt --gate off`;
# `dlm api --adapter tone` serves tone as DOC.
: "${DLM_SRC:?}"
NAME=r1004 NODE_MODULE=openai
. "$DLM_SRC/tests/ref/api/lib.sh"
ID=01JD0000000000000000001004
Q="List all users."
RAW="SELECT"
N=12
python3 "$DLM_SRC/tests/cli/helpers/styles_doc.py" doc.dlm $ID 4
"$DLM" train doc.dlm -q > /dev/null 2>&1 || fail "train"

strip() { python3 -c 'import sys; sys.stdout.write(sys.stdin.read()[:-1])'; }
check() {   # check MODEL PROMPT_FLAGS...: the client's answers vs dlm prompt's
    local m=$1
    shift
    node "$DLM_SRC/tests/ref/api/openai_client.cjs" "$url" "$Q" "$RAW" $N "$m" > "out-$m.json" || fail "openai client ($m)"
    "$DLM" prompt doc.dlm "$Q" --temp 0 -n $N "$@" 2>/dev/null | strip > chat.ref
    "$DLM" prompt doc.dlm --raw "$RAW" --temp 0 -n $N "$@" 2>/dev/null | strip > raw.ref
    python3 - "out-$m.json" chat.ref raw.ref "$m" <<'PY' || fail "$m answers differ from dlm prompt"
import json, sys
out = json.load(open(sys.argv[1]))
chat, raw, model = open(sys.argv[2]).read(), open(sys.argv[3]).read(), sys.argv[4]
assert out["model"] == model
for k, ref in (("chat", chat), ("chat_stream", chat), ("completion", raw), ("completion_stream", raw)):
    assert out[k] == ref, (model, k, out[k], ref)
PY
    cp chat.ref "chat-$m.ref"
}

# the static_mean weights, exactly (export_manifest.json keeps the doubles)
"$DLM" export doc.dlm --target gguf --quant F32 -q > /dev/null 2>&1 || fail "export"
MIX=$(python3 -c '
import json, sys
m = json.load(open(sys.argv[1]))
assert m["gate_mode"] == "static_mean"
print(",".join("%s:%r" % (a["source"], a["weight"]) for a in m["adapter_mix"]["adapters"]))' \
    "$DLM_HOME/store/$ID/exports/F32/export_manifest.json")

serve --parallel 2 doc.dlm
grep -q "dlm api: model doc is the gate (mean): sql" serve.err || fail "no default-mix line: $(cat serve.err)"
curl -s "${url}v1/models" | python3 -c 'import json,sys; ids=[m["id"] for m in json.load(sys.stdin)["data"]]; assert ids == ["doc", "doc@sql", "doc@tone", "tiny"], ids' ||
    fail "model ids"
check doc@sql --adapter sql
check doc@tone --adapter tone
cmp -s chat-doc@sql.ref chat-doc@tone.ref && fail "sql and tone answer alike: the check proves nothing"
check doc --adapter-mix "$MIX"
stop
serve --parallel 2 doc.dlm --gate off
grep -q "dlm api: model doc is the mix: sql 0.500, tone 0.500" serve.err || fail "--gate off: $(cat serve.err)"
check doc --gate off
stop
serve --parallel 2 doc.dlm --adapter tone
check doc --adapter tone
stop
echo "r1004: ok"
