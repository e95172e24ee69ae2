#!/bin/bash
# Reference check of the HF downloader against a local hub stand-in
# (tests/ref/model/hub_server.py on 127.0.0.1, random port) serving a model
# made by make_model.py: fresh download into the cache (refs, blobs named by
# sha256 / git sha1, relative snapshot symlinks, .no_exist markers), the
# bytes equal the source, relative and absolute (CDN) redirects, a transfer
# cut mid-way resumed with Range (in-process retry and across runs), a
# server that ignores Range, offline mode, gated repos with and without
# HF_TOKEN, a corrupted transfer refused by sha256, and falling back to the
# cache when the server is gone. The downloaded model then loads.
set -eu
: "${DLM_SRC:?}" "${DLM_BUILD:?}"
PY=/usr/bin/python3
if ! "$PY" -c 'import numpy' 2>/dev/null; then
    [ "${DLM_REF_SKIP:-}" = "1" ] && exit 77
    echo "r0201: $PY with numpy is required" >&2
    exit 1
fi
T=$(mktemp -d)
srv=""
cleanup() { [ -n "$srv" ] && kill "$srv" 2>/dev/null; wait 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT
hub=$DLM_BUILD/test_hub
fail=0
ok() { echo "r0201: ok: $*"; }
bad() { echo "r0201: FAIL: $*" >&2; fail=1; }

# fixture repository: a tiny f32 llama (model.safetensors ~ 600 KB) + GGUF twin
"$PY" "$DLM_SRC/tests/ref/make_model.py" --out "$T/repo" --arch llama --dtype f32 --d-model 128 --ff 256 \
    --vocab 512 --gguf "$T/twin.gguf" --gguf-type f32 >/dev/null
size=$(stat -c %s "$T/repo/model.safetensors")
sha=$(sha256sum "$T/repo/model.safetensors" | cut -c1-64)

"$PY" "$DLM_SRC/tests/ref/model/hub_server.py" --port-file "$T/port" --log "$T/log" \
    --repo "org/tiny=$T/repo,cut=200000" \
    --repo "org/again=$T/repo,cut=150000" \
    --repo "org/norange=$T/repo,cut=100000,norange" \
    --repo "org/gated=$T/repo,gated" \
    --repo "org/corrupt=$T/repo,corrupt" &
srv=$!
for _ in $(seq 600); do [ -f "$T/port" ] && break; sleep 0.05; done   # up to 30 s on a loaded machine
[ -f "$T/port" ] || { echo "r0201: server did not start" >&2; exit 1; }
export HF_ENDPOINT="http://127.0.0.1:$(cat "$T/port")"
export HF_HUB_CACHE="$T/cache"
export DLM_HUB_BACKOFF_MS=20
unset HF_TOKEN HUGGING_FACE_HUB_TOKEN HF_HUB_OFFLINE TRANSFORMERS_OFFLINE HF_HOME

# 1. a whole model, with one in-process resume after the cut at 200000 bytes
snap=$("$hub" snapshot org/tiny main 2>"$T/err1") || { cat "$T/err1" >&2; bad "snapshot org/tiny"; }
commit=$(printf 'org/tiny' | sha1sum | cut -c1-40)
rd=$T/cache/models--org--tiny
[ "$snap" = "$rd/snapshots/$commit" ] && ok "snapshot path" || bad "snapshot path '$snap'"
[ "$(cat "$rd/refs/main")" = "$commit" ] && ok "refs/main" || bad "refs/main"
[ "$(readlink "$rd/snapshots/$commit/model.safetensors")" = "../../blobs/$sha" ] && ok "relative symlink to blobs/<sha256>" \
    || bad "symlink $(readlink "$rd/snapshots/$commit/model.safetensors")"
for f in config.json tokenizer.json tokenizer_config.json generation_config.json model.safetensors; do
    cmp -s "$T/repo/$f" "$snap/$f" || bad "$f differs from the source"
done
ok "downloaded bytes equal the source"
cfg_etag=$(printf 'blob %d\0' "$(stat -c %s "$T/repo/config.json")" | cat - "$T/repo/config.json" | sha1sum | cut -c1-40)
[ -f "$rd/blobs/$cfg_etag" ] && ok "small file stored under its git sha1" || bad "config.json blob name"
[ -f "$rd/.no_exist/$commit/special_tokens_map.json" ] && ok ".no_exist marker" || bad ".no_exist marker"
ls "$rd/blobs" | grep -q incomplete && bad "leftover .incomplete"
grep -q "range=bytes=200000-" "$T/log" && ok "cut transfer resumed with Range" || bad "no Range resume in the log"
grep -q "^HEAD /org/tiny/resolve/main/config.json" "$T/log" && \
    grep -q "^HEAD /org/tiny/resolve/$commit/config.json" "$T/log" && ok "relative redirect followed" \
    || bad "relative redirect"
grep -q "^GET /cdn/$sha" "$T/log" && ok "absolute redirect to the CDN" || bad "CDN redirect"
(cd "$DLM_SRC" && "$DLM_BUILD/test_model_load" "$snap" "$T/twin.gguf") >"$T/load.log" 2>&1 \
    && ok "downloaded model loads and matches its GGUF twin" || { tail "$T/load.log" >&2; bad "load snapshot"; }

# 2. second run: all cached, no download
n_before=$(grep -c '^GET' "$T/log")
"$hub" snapshot org/tiny main >/dev/null 2>&1 || bad "cached snapshot"
[ "$(grep -c '^GET' "$T/log")" = "$n_before" ] && ok "cached snapshot downloads nothing" || bad "re-downloaded"

# 3. interrupted run (no retries) leaves .incomplete; the next run resumes it
if DLM_HUB_RETRIES=0 "$hub" get org/again main model.safetensors >/dev/null 2>"$T/err3"; then
    bad "cut transfer without retries succeeded"
else
    inc=$T/cache/models--org--again/blobs/$sha.incomplete
    [ "$(stat -c %s "$inc" 2>/dev/null)" = 150000 ] && ok "partial file kept ($(stat -c %s "$inc") bytes)" || bad "no partial file"
fi
p=$("$hub" get org/again main model.safetensors 2>/dev/null) && cmp -s "$p" "$T/repo/model.safetensors" \
    && grep -q "range=bytes=150000-" "$T/log" && ok "resumed across runs" || bad "resume across runs"

# 4. a server that ignores Range: restart from 0, still the right bytes
p=$("$hub" get org/norange main model.safetensors 2>/dev/null) && cmp -s "$p" "$T/repo/model.safetensors" \
    && ok "200 instead of 206 restarts cleanly" || bad "norange"

# 5. offline
p=$(HF_HUB_OFFLINE=1 "$hub" get org/tiny main config.json 2>/dev/null) && [ -f "$p" ] && ok "offline cache hit" || bad "offline hit"
if HF_HUB_OFFLINE=1 "$hub" get org/gated main config.json >/dev/null 2>"$T/err5"; then bad "offline miss succeeded"; fi
grep -q "HF_HUB_OFFLINE=1 forbids downloading" "$T/err5" && ok "offline miss refused" || { cat "$T/err5" >&2; bad "offline message"; }

# 6. gated repositories
if "$hub" get org/gated main config.json >/dev/null 2>"$T/err6"; then bad "gated without token succeeded"; fi
grep -q "org/gated requires accepting its licence on huggingface.co and HF_TOKEN set" "$T/err6" \
    && ok "gated refusal with licence hint" || { cat "$T/err6" >&2; bad "gated message"; }
if HF_TOKEN=hf_wrong "$hub" get org/gated main config.json >/dev/null 2>"$T/err6b"; then bad "wrong token accepted"; fi
grep -q "GatedRepoError" "$T/err6b" && ok "wrong token refused" || bad "wrong token message"
p=$(HF_TOKEN=hf_dlm_test "$hub" get org/gated main model.safetensors 2>/dev/null) && cmp -s "$p" "$T/repo/model.safetensors" \
    && ok "gated download with HF_TOKEN" || bad "gated with token"

# 7. corruption in transit is caught by the sha256
if "$hub" get org/corrupt main model.safetensors >/dev/null 2>"$T/err7"; then bad "corrupt blob accepted"; fi
grep -q "IntegrityError" "$T/err7" && ok "sha256 mismatch refused" || { cat "$T/err7" >&2; bad "integrity message"; }
ls "$T/cache/models--org--corrupt/blobs" 2>/dev/null | grep -q . && bad "corrupt blob left in the cache"

# 8. missing file, unknown repo, unknown revision
rc=0; "$hub" get org/tiny main nope.json >/dev/null 2>&1 || rc=$?
[ $rc = 3 ] && [ -f "$rd/.no_exist/$commit/nope.json" ] && ok "missing file → not found + marker" || bad "missing file rc=$rc"
"$hub" get org/unknown main config.json >/dev/null 2>"$T/err8" || true
grep -q RepoNotFoundError "$T/err8" && ok "unknown repo" || bad "unknown repo"
"$hub" get org/tiny v9 config.json >/dev/null 2>"$T/err8b" || true
grep -q RevisionNotFoundError "$T/err8b" && ok "unknown revision" || bad "unknown revision"

# 9. a base spec hf:org/name@rev resolves to the same cached snapshot
p=$("$hub" base "hf:org/tiny@main" 2>/dev/null) && [ "$p" = "$snap" ] && ok "hf:org/tiny@main resolves to the snapshot" \
    || bad "base hf: spec ('$p')"

# 10. server gone: a branch still resolves from the cache
kill "$srv"; wait "$srv" 2>/dev/null || true; srv=""
p=$(DLM_HUB_RETRIES=0 "$hub" get org/tiny main config.json 2>/dev/null) && [ -f "$p" ] && ok "cache fallback without server" \
    || bad "cache fallback"

[ $fail = 0 ] && echo "r0201: all hub checks passed"
exit $fail
