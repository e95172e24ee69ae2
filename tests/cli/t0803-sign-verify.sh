#!/usr/bin/env bash
# Signing and verify, against Debian's minisign both ways:
#   dlm keygen's keys work in minisign (sign and verify); dlm's provenance
#   signature verifies with `minisign -V`; a key made by `minisign -G -W`
#   signs packs in dlm; a signature made by `minisign -S` (prehashed and
#   legacy) verifies in dlm. Every verify exit code: 0 verified, 1 missing /
#   broken (unsigned, adapter swapped), 2 untrusted signer, 3 bad signature.
set -euo pipefail
. "$DLM_SRC/tests/cli/lib.sh"
PY=/usr/bin/python3
LIB="$DLM_SRC/tests/cli/packlib.py"
command -v minisign >/dev/null || fail "minisign is not installed (scripts/deps.sh)"
write_doc t.dlm 1
"$DLM" train t.dlm --max-steps 2 -q >/dev/null

# verify EXPECTED_RC PACK [ARGS...]
verify() {
    local want=$1; shift
    set +e; "$DLM" -v verify "$@" > v.out 2> v.err; local rc=$?; set -e
    [ $rc = "$want" ] || fail "verify $*: exit $rc, expected $want: $(cat v.out v.err)"
}

# keygen: 0600 secret, refuses to overwrite, keys work in minisign
"$DLM" keygen -q
[ "$(stat -c %a "$DLM_HOME/minisign.key")" = 600 ] || fail "secret key mode $(stat -c %a "$DLM_HOME/minisign.key")"
set +e; "$DLM" keygen 2> kg.err; rc=$?; set -e
[ $rc = 1 ] && grep -q "already exists" kg.err || fail "keygen overwrote a key"
echo "some bytes" > msg.txt
minisign -S -s "$DLM_HOME/minisign.key" -m msg.txt -x msg.minisig >/dev/null || fail "minisign cannot sign with dlm's key"
minisign -V -p "$DLM_HOME/minisign.pub" -m msg.txt -x msg.minisig >/dev/null || fail "minisign rejects dlm's public key"

# unsigned pack: exit 1
"$DLM" pack t.dlm --out unsigned.pack -q
verify 1 unsigned.pack
grep -q "not signed" v.err || fail "unsigned: $(cat v.err)"

# dlm signs, minisign verifies the provenance signature
"$DLM" pack t.dlm --sign --out signed.pack -q
$PY "$LIB" payload signed.pack payload.bin payload.minisig claimed.pub
minisign -V -p "$DLM_HOME/minisign.pub" -m payload.bin -x payload.minisig > mv.out || fail "minisign -V rejects dlm's signature"
grep -q "Signature and comment signature verified" mv.out || fail "minisign: $(cat mv.out)"
minisign -V -p claimed.pub -m payload.bin -x payload.minisig >/dev/null || fail "signer_public_key is not the key"

# untrusted (2), trust on first use (0, key recorded), then trusted (0)
verify 2 signed.pack
grep -q "UntrustedSignerError" v.err || fail "untrusted: $(cat v.err)"
verify 0 signed.pack --trust-on-first-use
ls "$DLM_HOME"/trusted-keys/*.pub >/dev/null || fail "no key recorded"
verify 0 signed.pack
grep -q "^verified: " v.out || fail "$(cat v.out)"

# broken claims: a swapped adapter (checksums fixed) → 1; a changed
# signed field (checksums fixed) → 3; a checksum mismatch → 1
$PY "$LIB" swap-adapter signed.pack swapped.pack
verify 1 swapped.pack
grep -q "ProvenanceMismatchError" v.err || fail "swap: $(cat v.err)"
$PY "$LIB" tamper-prov signed.pack tampered.pack signed_at 2020-01-01T00:00:00
verify 3 tampered.pack
grep -q "BadSignatureError" v.err || fail "tamper: $(cat v.err)"
$PY "$LIB" hostile tamper signed.pack damaged.pack
verify 1 damaged.pack
grep -q "checksum mismatch" v.err || fail "damaged: $(cat v.err)"

# minisign signs, dlm verifies: minisign's signature (prehashed and legacy)
# over the same payload, with minisign's key, put into provenance.json
minisign -G -W -p ms.pub -s ms.key >/dev/null
minisign -S -s ms.key -m payload.bin -x ms.minisig -t "made by minisign" >/dev/null
$PY "$LIB" resign signed.pack ms-signed.pack ms.minisig ms.pub
verify 2 ms-signed.pack
id=$(sed -n 's/.*minisign public key //p' ms.pub)
cp ms.pub "$DLM_HOME/trusted-keys/$id.pub"
verify 0 ms-signed.pack
minisign -S -l -s ms.key -m payload.bin -x legacy.minisig >/dev/null
$PY "$LIB" resign signed.pack legacy.pack legacy.minisig ms.pub
verify 0 legacy.pack
# a trusted key file with the signer's id but another key → 3
"$DLM" keygen --dir other -q
$PY - "$DLM_HOME/trusted-keys/$id.pub" other/minisign.pub <<'PY'
import base64, sys
a, b = (open(p).read().splitlines() for p in sys.argv[1:])
ra, rb = base64.b64decode(a[1]), base64.b64decode(b[1])
open(sys.argv[1], "w").write(a[0] + "\n" + base64.b64encode(ra[:10] + rb[10:]).decode() + "\n")
PY
verify 3 ms-signed.pack
rm "$DLM_HOME/trusted-keys/$id.pub"

# a key made by minisign -G -W signs packs in dlm
export DLM_HOME2="$T/home2"
mkdir -p "$DLM_HOME2"
cp -a "$DLM_HOME/store" "$DLM_HOME2/"
cp ms.key "$DLM_HOME2/minisign.key"
"$DLM" --home "$DLM_HOME2" pack t.dlm --sign --out ms-key.pack -q
$PY "$LIB" payload ms-key.pack p2.bin p2.minisig
minisign -V -p ms.pub -m p2.bin -x p2.minisig >/dev/null || fail "minisign rejects a signature by its own key through dlm"
# a password-protected minisign key is refused with a hint (minisign's own
# `-G` would spend ~30 s of CPU and 1 GiB in scrypt: the kdf field "Sc" of
# its documented format is what marks a key as encrypted)
$PY - ms.key "$DLM_HOME2/minisign.key" <<'PY'
import base64, sys
lines = open(sys.argv[1]).read().splitlines()
raw = bytearray(base64.b64decode(lines[1]))
raw[2:4] = b"Sc"
open(sys.argv[2], "w").write(lines[0] + "\n" + base64.b64encode(bytes(raw)).decode() + "\n")
PY
set +e; "$DLM" --home "$DLM_HOME2" -v pack t.dlm --sign --out enc.pack 2> enc.err; rc=$?; set -e
[ $rc = 1 ] && grep -q "KeyEncryptedError" enc.err && grep -q "minisign -G -W" enc.err || fail "encrypted key: $(cat enc.err)"
echo ok
