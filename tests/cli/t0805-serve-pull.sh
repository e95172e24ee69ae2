#!/usr/bin/env bash
# dlm serve on loopback, checked with dlm pull and with curl (Debian's):
# a valid token downloads the pack (pull installs it: same document, same
# store files), a bad or expired token gets 403, another dlm_id 404, a
# POST 405, and requests past --rate-limit 429 (pull says so).
set -euo pipefail
. "$DLM_SRC/tests/cli/lib.sh"
write_doc t.dlm 1
set +e; "$DLM" serve t.dlm 2> untrained.err; rc=$?; set -e
[ $rc = 1 ] && grep -q "no store\|no trained adapter" untrained.err || fail "untrained: exit $rc $(cat untrained.err)"
"$DLM" train t.dlm --max-steps 2 -q >/dev/null
set +e; "$DLM" serve t.dlm --public 2> pub.err; rc=$?; set -e
[ $rc = 2 ] && grep -q "i-know-this-is-public" pub.err || fail "--public alone: exit $rc"
ME=$DLM_HOME
pids=""
trap 'for p in $pids; do kill $p 2>/dev/null; done; rm -rf "$T"' EXIT
# start_serve OUTFILE ARGS...: the peer:// URL into OUTFILE
start_serve() {
    local out=$1; shift
    "$DLM" serve t.dlm --port 0 "$@" > "$out" 2> "$out.err" & pids="$pids $!"
    for i in $(seq 600); do [ -s "$out" ] && break; sleep 0.1; done
    [ -s "$out" ] || fail "serve printed no URL: $(cat "$out.err")"
}
code() { curl -s -o /dev/null -w '%{http_code}' "$@"; }

start_serve url.txt --rate-limit 4
URL=$(cat url.txt)
[[ "$URL" =~ ^peer://127\.0\.0\.1:[0-9]+/${ID}\?token=[A-Za-z0-9_-]+$ ]] || fail "URL shape: $URL"
HTTP="http://${URL#peer://}"
HOSTPORT=${URL#peer://}; HOSTPORT=${HOSTPORT%%/*}
TOKEN=${URL#*token=}

# valid: pull installs it (request 1 of 4)
export DLM_HOME="$T/friend"
"$DLM" pull "$URL" --out got > pull.out
grep -q "signature: none" pull.out || fail "$(cat pull.out)"
cmp got/t.dlm t.dlm || fail "pulled document differs"
cmp "$DLM_HOME/store/$ID/adapter/versions/v0001/adapter_model.safetensors" \
    "$ME/store/$ID/adapter/versions/v0001/adapter_model.safetensors" || fail "pulled adapter differs"
# curl sees the same pack bytes that dlm pack makes of this store
DLM_HOME=$ME "$DLM" pack t.dlm --out local.pack -q
curl -s -o served.pack "$HTTP"                                  # request 2
cmp served.pack local.pack || fail "served bytes differ from dlm pack's"
# bad token, other id, wrong method: no token use counted
[ "$(code "http://$HOSTPORT/$ID?token=AAAA")" = 403 ] || fail "bad token not 403"
[ "$(code "http://$HOSTPORT/$ID")" = 403 ] || fail "missing token not 403"
bad=$(echo "$TOKEN" | tr 'A-Za-z' 'B-ZAb-za')
[ "$(code "http://$HOSTPORT/$ID?token=$bad")" = 403 ] || fail "altered token not 403"
[ "$(code "http://$HOSTPORT/01JD0000000000000000000001?token=$TOKEN")" = 404 ] || fail "unknown id not 404"
[ "$(code -X POST "$HTTP")" = 405 ] || fail "POST not 405"
# rate limit: requests 3 and 4 pass, the 5th is 429 with Retry-After
[ "$(code "$HTTP")" = 200 ] && [ "$(code "$HTTP")" = 200 ] || fail "requests under the limit refused"
[ "$(code "$HTTP")" = 429 ] || fail "past --rate-limit not 429"
curl -s -D hdr.txt -o /dev/null "$HTTP"
grep -qi '^Retry-After: 60' hdr.txt || fail "no Retry-After: $(cat hdr.txt)"
set +e; "$DLM" -v pull "$URL" --out got2 2> rl.err; rc=$?; set -e
[ $rc = 1 ] && grep -q "PeerRateLimitError.*429" rl.err || fail "pull past the limit: $(cat rl.err)"
[ ! -e got2/t.dlm ] || fail "rate-limited pull installed something"
# the URL never shows the token in messages
! grep -q "$TOKEN" rl.err || fail "the token leaked into an error message"

# expired: a 0.02-minute token
export DLM_HOME=$ME
start_serve url2.txt --token-ttl-minutes 0.02
URL2=$(cat url2.txt)
sleep 3    # 0.02 min = 1.2 s, the expiry rounds up to a whole second
[ "$(code "http://${URL2#peer://}")" = 403 ] || fail "expired token not 403"
set +e; DLM_HOME="$T/h3" "$DLM" -v pull "$URL2" --out got3 2> exp.err; rc=$?; set -e
[ $rc = 1 ] && grep -q "PeerTokenError.*expired (HTTP 403)" exp.err || fail "expired pull: $(cat exp.err)"
[ ! -e "$T/h3/store/$ID" ] || fail "expired pull installed a store"
# concurrency: with --max-concurrency 1, a second download while a slow
# first one runs gets 429 (16 MiB of random bytes: more than loopback
# socket buffers hold, so the first download really is still running)
mkdir -p "$ME/store/$ID/blobs"
head -c 16777216 /dev/urandom > "$ME/store/$ID/blobs/big.bin"
start_serve url3.txt --max-concurrency 1 --rate-limit 1000
H3="http://$(cat url3.txt | sed 's|^peer://||')"
# probe only once the slow download holds the slot (its first bytes have
# arrived): a probe sent earlier can win the slot itself, and the slow
# download then gets the 429 and leaves (CI saw that race under load)
curl -s --limit-rate 200k -o slow.bin "$H3" & slow=$!
for i in $(seq 120); do [ -s slow.bin ] && break; sleep 0.25; done
[ -s slow.bin ] || fail "the slow download did not start"
for i in $(seq 40); do c=$(code "$H3"); [ "$c" = 429 ] && break; sleep 0.25; done
kill $slow 2>/dev/null || true
wait $slow 2>/dev/null || true
[ "$c" = 429 ] || fail "a second concurrent download got $c, expected 429"
# the server sees the first client leave at its next write: up to 30 s on a loaded machine
for i in $(seq 120); do c=$(code "$H3"); [ "$c" = 200 ] && break; sleep 0.25; done
[ "$c" = 200 ] || fail "the slot was not released after the first download ended"

# malformed peer URLs
set +e; "$DLM" pull "peer://127.0.0.1/$ID" 2> pu.err; rc=$?; set -e
[ $rc = 1 ] && grep -q "peer://HOST:PORT" pu.err || fail "bad peer URL: $(cat pu.err)"
echo ok
