#!/bin/sh
# Install the npm packages the reference tests compare against, pinned
# exactly in tests/ref/package.json (HF tokenizers, @huggingface/jinja,
# node-llama-cpp). Test-time only: dlm never runs them. Idempotent and fast
# when nothing changed. With DLM_REF_SKIP=1 it does nothing.
set -eu
[ "${DLM_REF_SKIP:-}" = "1" ] && exit 0
cd "$(dirname "$0")/../tests/ref"
[ -f package.json ] || exit 0
stamp=node_modules/.dlm-stamp
want=$(cat package.json package-lock.json 2>/dev/null | sha256sum | cut -c1-16)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    exit 0
fi
echo "ref-deps: installing npm reference packages (tests/ref/package.json)"
if [ -f package-lock.json ]; then
    npm ci --no-audit --no-fund --loglevel=error
else
    npm install --no-audit --no-fund --loglevel=error
fi
want=$(cat package.json package-lock.json 2>/dev/null | sha256sum | cut -c1-16)
echo "$want" > "$stamp"
