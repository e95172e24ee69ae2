#!/usr/bin/env bash
# dlm export --target ollama writes a TEMPLATE for Gemma 2 and Mistral
# bases (Gemma 2 was refused before: dlm's Go-template subset could not
# single out the first user turn, which carries the system prompt).
#  1. A shrunk random Gemma 2 (make_model.py: the real config fields, small
#     dimensions) at the registry row's pinned commit, with
#     google/gemma-2-2b-it's own chat_template (tests/ref/chat, llama.cpp's
#     models/templates copy); init, train --max-steps 2, export with no
#     ollama on PATH. Checked: the Modelfile's TEMPLATE, stops and SYSTEM;
#     the export's drift check ran against the base's template; and, when Go
#     and python3-jinja2 are there, the TEMPLATE rendered by Go's
#     text/template (as the Ollama server feeds it,
#     tests/ref/export/gotmpl_render.go) equals the Jinja template rendered
#     by jinja2 (BOS aside, which llama.cpp adds) for conversations without
#     a system message (Gemma 2's template raises on one).
#  2. A shrunk random Mistral with Mixtral-8x7B-Instruct-v0.1's template
#     (tests/ref/chat): detected as the mistral dialect, trained, prompted
#     (the prompt's ids are those of jinja2's rendering of the template),
#     exported with its TEMPLATE, which Go renders as jinja2 renders the
#     template, system prompt included.
set -euo pipefail
. "$DLM_SRC/tests/cli/lib.sh"
py=/usr/bin/python3
"$py" -c 'import numpy' 2>/dev/null || { echo "t0307: skipped: $py has no numpy"; exit 77; }
export HF_HUB_CACHE="$T/hub" HF_HUB_OFFLINE=1
key=gemma-2-2b-it repo=google/gemma-2-2b-it rev=299a8560bedf22ed1c72a8a11e7dce4a7f9f51f8
rdir="$HF_HUB_CACHE/models--${repo/\//--}"
snap="$rdir/snapshots/$rev"
"$py" "$DLM_SRC/tests/ref/make_model.py" --out "$snap" --arch gemma2 --tied --vocab 400 --d-model 64 --ff 96 \
    --layers 2 --head-dim 32 --sliding-window 8 --seed 61 >/dev/null
cp "$DLM_SRC/tests/ref/chat/gemma-2-2b-it.jinja" "$T/g2.jinja"
# make_model's tokenizer carries ChatML's three specials: they become
# Gemma's <start_of_turn>, <end_of_turn> (EOS) and <bos> (added in front,
# add_bos_token as Gemma's tokenizer_config says)
"$py" - "$snap" "$T/g2.jinja" <<'PY'
import json, os, sys
d = sys.argv[1]
for f in ("tokenizer.json", "tokenizer_config.json"):
    p = os.path.join(d, f)
    s = open(p).read()
    for a, b in (("<|im_start|>", "<start_of_turn>"), ("<|im_end|>", "<end_of_turn>"), ("<|endoftext|>", "<bos>")):
        s = s.replace(json.dumps(a)[1:-1], b)
    open(p, "w").write(s)
p = os.path.join(d, "tokenizer_config.json")
c = json.load(open(p))
c.update(chat_template=open(sys.argv[2]).read(), bos_token="<bos>", eos_token="<end_of_turn>", add_bos_token=True)
json.dump(c, open(p, "w"), indent=2)
PY
mkdir -p "$rdir/.no_exist/$rev"
: > "$rdir/.no_exist/$rev/special_tokens_map.json"
: > "$rdir/.no_exist/$rev/chat_template.jinja"

"$DLM" init g.dlm --base "$key" --i-accept-license -q
# a system prompt in the frontmatter, and a Q/A section
"$py" - g.dlm <<'PY'
import sys
p = sys.argv[1]
s = open(p).read()
head, sep, rest = s.partition("\n---\n")
open(p, "w").write(head + "\nsystem_prompt: Answer in one word." + sep + rest +
                   "\n::instruction::\n### Q\nWhat is the capital of France?\n### A\nParis.\n")
PY
"$DLM" train g.dlm --max-steps 2 -q >/dev/null
out=$(env PATH=/usr/bin:/bin "$DLM" export g.dlm --target ollama --quant Q8_0 --name g2-test 2>&1) ||
    fail "export refused: $out"
grep -q "template drift check: 5 conversations give the same tokens" <<<"$out" || fail "no drift check: $out"
mf=$(find "$DLM_HOME/store" -path '*exports/Q8_0/Modelfile' | head -1)
[ -f "$mf" ] || fail "no Modelfile: $out"
"$py" - "$mf" "$T/tmpl.gotmpl" <<'PY' || fail "Modelfile"
import re, sys
m = open(sys.argv[1]).read()
t = re.search(r'^TEMPLATE """(.*?)"""$', m, re.S | re.M)
assert t, m
tmpl = t.group(1)
assert "<start_of_turn>" in tmpl and "$.System" in tmpl and tmpl.endswith("<start_of_turn>model\n"), tmpl
stops = re.findall(r'^PARAMETER stop "(.*)"$', m, re.M)
assert stops[:3] == ["<end_of_turn>", "<eos>", "<start_of_turn>"], stops
assert "<|im_end|>" not in m, m
assert re.search(r'^SYSTEM """Answer in one word\."""$', m, re.M), m
open(sys.argv[2], "w").write(tmpl)
PY
echo "t0307: gemma2 Modelfile with TEMPLATE, stops and SYSTEM; the export's drift check passed"

have_ref=0
if command -v go >/dev/null && "$py" -c 'import jinja2' 2>/dev/null; then
    have_ref=1
    GOCACHE="$T/gocache" GOPATH="$T/gopath" GO111MODULE=off GOFLAGS= \
        go build -o "$T/gotmpl" "$DLM_SRC/tests/ref/export/gotmpl_render.go"
    cat > "$T/convs.json" <<'JSON'
[{"system": null, "messages": [{"role": "user", "content": "What is the capital of France?"}]},
 {"system": null, "messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"},
                               {"role": "user", "content": "Tell me a joke."}]}]
JSON
    "$T/gotmpl" "$T/tmpl.gotmpl" "$T/convs.json" > "$T/go.json"
    "$py" - "$T/g2.jinja" "$T/convs.json" "$T/go.json" <<'PY' || fail "Go TEMPLATE vs Jinja"
import json, sys
import jinja2
def raise_exception(msg):
    raise jinja2.exceptions.TemplateError(msg)
env = jinja2.Environment()
env.globals["raise_exception"] = raise_exception
t = env.from_string(open(sys.argv[1]).read())
convs, go = json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
for c, g in zip(convs, go):
    j = t.render(messages=c["messages"], add_generation_prompt=True, bos_token="<bos>", eos_token="<eos>")
    assert j == "<bos>" + g, (j, g)
print(f"t0307: Go renders the TEMPLATE as jinja2 renders gemma-2-2b-it's template ({len(go)} conversations)")
PY
else
    echo "t0307: go or python3-jinja2 missing: the TEMPLATE is not rendered"
fi

# 2. Mistral v1: make_model's ChatML specials become <s> (BOS), </s> (EOS), <unk>
"$py" "$DLM_SRC/tests/ref/make_model.py" --out "$T/mis" --arch mistral --vocab 400 --d-model 64 --ff 96 \
    --layers 2 --seed 7 >/dev/null
"$py" - "$T/mis" "$DLM_SRC/tests/ref/chat/mixtral-8x7b-instruct-v0.1.jinja" <<'PY'
import json, os, sys
d = sys.argv[1]
for f in ("tokenizer.json", "tokenizer_config.json"):
    p = os.path.join(d, f)
    s = open(p).read()
    for a, b in (("<|im_start|>", "<unk>"), ("<|im_end|>", "</s>"), ("<|endoftext|>", "<s>")):
        s = s.replace(json.dumps(a)[1:-1], b)
    open(p, "w").write(s)
p = os.path.join(d, "tokenizer_config.json")
c = json.load(open(p))
c.update(chat_template=open(sys.argv[2]).read(), bos_token="<s>", eos_token="</s>", add_bos_token=True)
json.dump(c, open(p, "w"), indent=2)
PY
write_doc m.dlm 1 "$T/mis"
sed -i 's/^base_model: .*/&\nsystem_prompt: Answer in one word./' m.dlm
"$DLM" train m.dlm --max-steps 2 -q >/dev/null
"$DLM" prompt m.dlm --temp 0 -n 4 --json "What is the capital of France?" > p.json
out=$(env PATH=/usr/bin:/bin "$DLM" export m.dlm --target ollama --quant Q8_0 --name mis-test 2>&1) ||
    fail "mistral export refused: $out"
grep -q "template drift check: 5 conversations give the same tokens" <<<"$out" || fail "no drift check: $out"
mf="$DLM_HOME/store/$ID/exports/Q8_0/Modelfile"
"$py" - "$mf" "$T/mis.gotmpl" <<'PY' || fail "mistral Modelfile"
import re, sys
m = open(sys.argv[1]).read()
t = re.search(r'^TEMPLATE """(.*?)"""$', m, re.S | re.M)
assert t and " [INST] " in t.group(1), m
stops = re.findall(r'^PARAMETER stop "(.*)"$', m, re.M)
assert stops[:3] == ["</s>", "[/INST]", "[INST]"], stops
open(sys.argv[2], "w").write(t.group(1))
PY
if [ $have_ref = 1 ]; then
    cat > "$T/mconvs.json" <<'JSON'
[{"system": "Answer in one word.", "messages": [{"role": "user", "content": "What is the capital of France?"}]},
 {"system": "Be kind.", "messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"},
                                     {"role": "user", "content": "Tell me a joke."}]},
 {"system": null, "messages": [{"role": "user", "content": "Hi"}]}]
JSON
    "$T/gotmpl" "$T/mis.gotmpl" "$T/mconvs.json" > "$T/mgo.json"
    "$py" - "$DLM_SRC/tests/ref/chat/mixtral-8x7b-instruct-v0.1.jinja" "$T/mconvs.json" "$T/mgo.json" "$T/first.txt" <<'PY' ||
import json, sys
import jinja2
def raise_exception(msg):
    raise jinja2.exceptions.TemplateError(msg)
env = jinja2.Environment()
env.globals["raise_exception"] = raise_exception
t = env.from_string(open(sys.argv[1]).read())
convs, go = json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
for k, (c, g) in enumerate(zip(convs, go)):
    msgs = ([{"role": "system", "content": c["system"]}] if c["system"] else []) + c["messages"]
    j = t.render(messages=msgs, add_generation_prompt=True, bos_token="<s>", eos_token="</s>")
    assert j == "<s>" + g, (j, g)
    if k == 0:
        open(sys.argv[4], "w").write(j)
print(f"t0307: Go renders the mistral TEMPLATE as jinja2 renders Mixtral's template ({len(go)} conversations)")
PY
        fail "mistral: Go TEMPLATE vs Jinja"
    # the prompt dlm ran is the template's rendering, tokenized
    want=$("$DLM" tokenize --tokenizer "$T/mis/tokenizer.json" --json < "$T/first.txt" |
           "$py" -c 'import json, sys; print(json.load(sys.stdin))')
    got=$("$py" -c 'import json, sys; print(json.load(open(sys.argv[1]))["prompt_tokens"])' p.json)
    [ "$want" = "$got" ] || fail "mistral prompt: $got, the template's rendering gives $want"
    echo "t0307: mistral: train, prompt (the template's rendering, $(wc -c < "$T/first.txt") bytes) and export ok"
fi
echo ok
