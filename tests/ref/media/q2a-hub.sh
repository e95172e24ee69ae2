#!/usr/bin/env bash
# q2a-hub.sh HUB_CACHE [hub|v5] [make_model args...]: a small random
# Qwen2-Audio (tests/ref/make_model.py's qwen2 + make_qwen2audio.py) as the
# registry row qwen2-audio-7b-instruct's pinned snapshot in an HF cache, so
# that `--base qwen2-audio-7b-instruct` resolves offline to it. Prints the
# snapshot's folder.
set -euo pipefail
hub=$1 layout=${2:-hub}
shift $(( $# > 1 ? 2 : 1 ))
repo=Qwen/Qwen2-Audio-7B-Instruct rev=0a095220c30b7b31434169c3086508ef3ea5bf0a
rdir="$hub/models--${repo/\//--}"
snap="$rdir/snapshots/$rev"
here=$(cd "$(dirname "$0")" && pwd)
/usr/bin/python3 "$here/../make_model.py" --out "$snap" --arch qwen2 --untied --vocab 400 --d-model 64 --ff 96 \
    --layers 2 --heads 4 --kv-heads 2 --seed 1701 "$@" >/dev/null
/usr/bin/python3 "$here/make_qwen2audio.py" "$snap" --layout "$layout" >/dev/null
mkdir -p "$rdir/refs" "$rdir/.no_exist/$rev"
echo "$rev" > "$rdir/refs/main"
for f in special_tokens_map.json chat_template.jinja added_tokens.json; do : > "$rdir/.no_exist/$rev/$f"; done
echo "$snap"
