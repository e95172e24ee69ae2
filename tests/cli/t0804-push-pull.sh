#!/usr/bin/env bash
# push and pull: to and from a folder, and over HTTPS to a loopback server
# (tests/cli/share_server.py: Python's http.server + ssl, self-signed cert
# made by openssl). The detached .minisig that push --sign writes verifies
# with Debian's minisign; pull reports verified / unverified / unsigned and
# refuses a bad signature with nothing installed. HTTPS push and pull show
# their progress (a line per transfer once the test lowers the threshold).
set -euo pipefail
. "$DLM_SRC/tests/cli/lib.sh"
PY=/usr/bin/python3
write_doc t.dlm 1
"$DLM" train t.dlm --max-steps 2 -q >/dev/null
"$DLM" keygen -q
ME=$DLM_HOME

# folder transport, signed
"$DLM" push t.dlm --to shared --sign -q
[ -f shared/t.dlm.pack ] && [ -f shared/t.dlm.pack.minisig ] || fail "push did not write the pack and its signature"
minisign -V -p "$ME/minisign.pub" -m shared/t.dlm.pack >/dev/null || fail "minisign rejects push's .minisig"
export DLM_HOME="$T/friend"
"$DLM" pull shared/t.dlm.pack --out got > pull1.out 2> pull1.err
grep -q "unverified" pull1.out && grep -q "warning: unverified signature" pull1.err || fail "untrusted: $(cat pull1.out pull1.err)"
cmp got/t.dlm t.dlm || fail "pulled document differs"
mkdir -p "$DLM_HOME/trusted-keys" && cp "$ME/minisign.pub" "$DLM_HOME/trusted-keys/friend.pub"
"$DLM" pull shared/t.dlm.pack --out got --force > pull2.out
grep -q "signature: verified" pull2.out || fail "trusted: $(cat pull2.out)"
"$DLM" verify shared/t.dlm.pack -q || fail "the pushed pack's provenance does not verify"
# a pack altered after signing: refused, nothing installed
cp shared/t.dlm.pack bad.dlm.pack && cp shared/t.dlm.pack.minisig bad.dlm.pack.minisig
printf 'x' >> bad.dlm.pack
mkdir -p "$T/h3/trusted-keys"; cp "$ME/minisign.pub" "$T/h3/trusted-keys/"
set +e; DLM_HOME="$T/h3" "$DLM" -v pull bad.dlm.pack --out h3out 2> bad.err; rc=$?; set -e
[ $rc = 1 ] && grep -q "BadSignatureError" bad.err || fail "altered pack with a trusted key: exit $rc $(cat bad.err)"
[ ! -e "$T/h3/store/$ID" ] && [ ! -e h3out/t.dlm ] || fail "an altered pack was installed"
# unsigned push of a pack file replaces a stale signature
export DLM_HOME=$ME
"$DLM" pack t.dlm --out plain.dlm.pack -q
cp shared/t.dlm.pack.minisig shared/plain.dlm.pack.minisig
DLM_TEST_PROGRESS_MIN_S=0 "$DLM" push plain.dlm.pack --to shared > fpush.out 2> fpush.err
# a folder push streams the pack (a pack with its base is gigabytes) and shows its copy
grep -Eq "^dlm: copying plain.dlm.pack: [0-9.]+ [KMG]?i?B in .*/s\)$" fpush.err || fail "no copy progress: $(cat fpush.err)"
cmp plain.dlm.pack shared/plain.dlm.pack || fail "the folder push changed the pack's bytes"
[ ! -e shared/plain.dlm.pack.minisig ] || fail "a stale signature was left next to an unsigned pack"
DLM_HOME="$T/h4" "$DLM" pull shared/plain.dlm.pack --out h4out > h4.out
grep -q "signature: none" h4.out || fail "unsigned not reported"
# destinations that are refused
for d in peer://127.0.0.1:7337/x http://127.0.0.1:1/p; do   # hf: is t0808
    set +e; "$DLM" push t.dlm --to "$d" 2> d.err; rc=$?; set -e
    [ $rc = 1 ] && grep -q "PushDestinationError\|refused\|not supported" d.err || fail "push --to $d: $(cat d.err)"
done

# HTTPS, loopback, self-signed
openssl req -x509 -newkey rsa:2048 -nodes -keyout key.pem -out cert.pem -days 1 -subj /CN=127.0.0.1 \
    -addext subjectAltName=IP:127.0.0.1 2>/dev/null
$PY "$DLM_SRC/tests/cli/share_server.py" cert.pem key.pem "Bearer s3cret" port.txt & srv=$!
trap 'kill $srv 2>/dev/null; rm -rf "$T"' EXIT
for i in $(seq 600); do [ -s port.txt ] && break; sleep 0.1; done
URL="https://127.0.0.1:$(cat port.txt)/packs/t.dlm.pack"
export DLM_SHARE_CA_BUNDLE="$T/cert.pem"
set +e; DLM_SHARE_AUTH="Bearer wrong" "$DLM" push t.dlm --to "$URL" 2> auth.err; rc=$?; set -e
[ $rc = 1 ] && grep -q "HTTP 401" auth.err || fail "wrong auth: $(cat auth.err)"
set +e; DLM_SHARE_CA_BUNDLE= DLM_SHARE_AUTH="Bearer s3cret" "$DLM" push t.dlm --to "$URL" 2> ca.err; rc=$?; set -e
[ $rc = 1 ] && grep -qi "certificate" ca.err || fail "a self-signed server was trusted without its CA: $(cat ca.err)"
DLM_TEST_PROGRESS_MIN_S=0 DLM_SHARE_AUTH="Bearer s3cret" "$DLM" push t.dlm --to "$URL" --sign > push.out 2> push.err
grep -q "HTTP 201" push.out || fail "push: $(cat push.out)"
# progress (issue 30): the upload's line, with the threshold lowered for the test
grep -Eq "^dlm: uploading pack: [0-9.]+ [KMG]?i?B in .*/s\)$" push.err || fail "no upload progress: $(cat push.err)"
export DLM_HOME="$T/h5"
mkdir -p "$DLM_HOME/trusted-keys" && cp "$ME/minisign.pub" "$DLM_HOME/trusted-keys/"
DLM_TEST_PROGRESS_MIN_S=0 "$DLM" pull "$URL" --out h5out > pull5.out 2> pull5.err
grep -q "signature: verified" pull5.out || fail "https pull: $(cat pull5.out)"
grep -Eq "^dlm: downloading pack: [0-9.]+ [KMG]?i?B in .*/s\)$" pull5.err || fail "no download progress: $(cat pull5.err)"
cmp h5out/t.dlm t.dlm || fail "https pull: document differs"
set +e; "$DLM" pull "https://127.0.0.1:$(cat port.txt)/packs/none.dlm.pack" 2> nf.err; rc=$?; set -e
[ $rc = 1 ] && grep -q "HTTP 404" nf.err || fail "missing pack: $(cat nf.err)"
set +e; "$DLM" pull "http://127.0.0.1:$(cat port.txt)/packs/t.dlm.pack" 2> http.err; rc=$?; set -e
[ $rc = 1 ] && grep -q "plain http is refused" http.err || fail "http: $(cat http.err)"
echo ok
