#!/usr/bin/env bash
# pack → unpack round trip, checked by tools dlm did not write:
#   init → train (v0001, v0002) → pack (twice: same bytes) → GNU tar lists and
#   extracts it (sha256sum -c checks CHECKSUMS.sha256; files equal the store's)
#   → Python's tarfile checks the normalised headers, the order and
#   content_sha256 from the spec → remove the store → unpack into a fresh home
#   → the .dlm is byte-identical, `prompt --temp 0` prints the same text, and
#   training on from either store (replay included, and --continue) gives the
#   same adapter bytes.
set -euo pipefail
. "$DLM_SRC/tests/cli/lib.sh"
PY=/usr/bin/python3     # Debian's, with python3-zstandard
write_doc t.dlm 1
"$DLM" train t.dlm --max-steps 2 -q >/dev/null
"$DLM" train t.dlm --max-steps 2 -q >/dev/null
S="$DLM_HOME/store/$ID"
[ "$(cat "$S/adapter/current.txt")" = "adapter/versions/v0002" ] || fail "expected two versions"
want=$("$DLM" prompt t.dlm "What is the capital of France?" --temp 0 -n 12)
"$DLM" pack t.dlm -q
[ -f t.dlm.pack ] || fail "no t.dlm.pack next to the document"
"$DLM" pack t.dlm --out again.pack -q
cmp t.dlm.pack again.pack || fail "packing the same store twice gave different bytes"

# refusals on the packing side: executable files, links; a held lock
chmod +x "$S/replay/index.json"
set +e; "$DLM" -v pack t.dlm --out bad.pack 2> exe.txt; rc=$?; set -e
[ $rc = 1 ] && grep -q "PackExecutableFileError: .*replay/index.json: executable file" exe.txt || fail "exec: $(cat exe.txt)"
chmod -x "$S/replay/index.json"
ln -s /etc/passwd "$S/replay/link"
set +e; "$DLM" -v pack t.dlm --out bad.pack 2> ln.txt; rc=$?; set -e
[ $rc = 1 ] && grep -q "PackUnsupportedFileError: .*symbolic link" ln.txt || fail "link: $(cat ln.txt)"
rm "$S/replay/link"
[ ! -e bad.pack ] || fail "a refused pack left a file"
DLM_TEST_HOLD_LOCK_MS=3000 "$DLM" pack t.dlm --out held.pack -q & held=$!
for i in $(seq 600); do grep -q '^kernel-lock$' "$S/.lock" 2>/dev/null && break; sleep 0.05; done
set +e; "$DLM" pack t.dlm --out other.pack 2> lock.txt; rc=$?; set -e
wait $held
[ $rc = 1 ] && grep -q "already locked by PID $held" lock.txt || fail "pack did not take the store lock: $(cat lock.txt)"
cmp held.pack t.dlm.pack || fail "the pack made under the lock differs"

# --include-*: a base the registry does not call redistributable needs
# --i-am-the-licensee; a local-path base (this fixture) cannot be installed
# on another machine, so --include-base refuses it (hub bases: t0806); the
# flags add their folders and set the header
set +e; "$DLM" -v pack t.dlm --include-base --out b.pack 2> base.txt; rc=$?; set -e
[ $rc = 1 ] && grep -q "BaseLicenseRefusedError: .*does not allow redistribution" base.txt || fail "base: $(cat base.txt)"
set +e; "$DLM" -v pack t.dlm --include-base --i-am-the-licensee https://example.com/lic --out b.pack 2> base.txt; rc=$?
set -e
[ $rc = 1 ] && grep -q "BaseNotPackableError: .*is a local path" base.txt && grep -q "^hint: " base.txt \
    || fail "path base: $(cat base.txt)"
[ ! -e b.pack ] || fail "a refused --include-base left a pack"
"$DLM" pack t.dlm --include-logs --include-exports --out full.pack -q
tar --zstd -tf full.pack > full.txt
grep -q '^store/logs/train-' full.txt || fail "--include-logs did not pack logs/"
! grep -q '^store/cache/' full.txt || fail "cache/ packed without --include-base"
tar --zstd -xOf full.pack PACK_HEADER.json > hdr.json
grep -q '"content_type": "no-base"' hdr.json && grep -q '"licensee_acceptance_url": null' hdr.json \
    || fail "header: $(cat hdr.json)"

# GNU tar (Debian) lists and extracts it
tar --zstd -tf t.dlm.pack > list.txt
grep -qx 'PACK_HEADER.json' list.txt && grep -qx 'manifest.json' list.txt && grep -qx 'CHECKSUMS.sha256' list.txt \
    && grep -qx 'provenance.json' list.txt && grep -qx 'dlm/t.dlm' list.txt \
    && grep -qx 'store/adapter/versions/v0002/adapter_model.safetensors' list.txt || fail "missing members: $(cat list.txt)"
! grep -Eq '^store/(logs|exports|cache|run|tokenized-cache)/|^store/\.lock$' list.txt || fail "excluded folders were packed"
mkdir x && tar --zstd -xf t.dlm.pack -C x
(cd x && sha256sum --quiet -c CHECKSUMS.sha256) || fail "GNU sha256sum rejects CHECKSUMS.sha256"
cmp x/dlm/t.dlm t.dlm || fail "the packed document differs"
(cd x/store && find . -type f | sort) > packed.txt
(cd "$S" && find . -type f -not -path './logs/*' -not -path './exports/*' -not -path './cache/*' -not -path './run/*' -not -path './tokenized-cache/*' \
    -not -name .lock | sort) > store.txt
diff store.txt packed.txt || fail "packed files differ from the store's"
while read -r f; do cmp "x/store/$f" "$S/$f" || fail "$f differs"; done < packed.txt

# Python's tarfile + zstandard: headers, order, manifest, from the spec
$PY - t.dlm.pack <<'PY'
import hashlib, io, json, sys, tarfile, zstandard
raw = open(sys.argv[1], "rb").read()
data = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(raw)).read()
tf = tarfile.open(fileobj=io.BytesIO(data))
ms = tf.getmembers()
names = [m.name.rstrip("/") for m in ms]
assert names == sorted(names), names
files = {}
for m in ms:
    assert m.mtime == 0 and m.uid == 0 and m.gid == 0 and m.uname == "" and m.gname == "", (m.name, m.mtime, m.uname)
    assert m.isdir() or m.isfile(), m.name
    assert m.mode == (0o755 if m.isdir() else 0o644), (m.name, oct(m.mode))
    if m.isfile():
        files[m.name] = tf.extractfile(m).read()
hdr = json.loads(files["PACK_HEADER.json"])
assert hdr["pack_format_version"] == 1 and hdr["content_type"] == "minimal", hdr
man = json.loads(files["manifest.json"])
content = sorted(n for n in files if n.startswith(("dlm/", "store/")))
assert sorted(man["entries"]) == content
assert all(man["entries"][n] == len(files[n]) for n in content)
h = hashlib.sha256()
for n in content:
    h.update(("%s\n%s\n" % (n, hashlib.sha256(files[n]).hexdigest())).encode())
assert man["content_sha256"] == h.hexdigest(), "content_sha256"
assert man["adapter_version"] == 2 and man["dlm_id"] == "01JD0000000000000000000000"
lines = ["%s  %s\n" % (hashlib.sha256(files[n]).hexdigest(), n) for n in sorted(files) if n not in ("CHECKSUMS.sha256", "manifest.json")]
assert files["CHECKSUMS.sha256"].decode() == "".join(lines)
prov = json.loads(files["provenance.json"])
assert prov["adapter_sha256"] == hashlib.sha256(files["store/adapter/versions/v0002/adapter_model.safetensors"]).hexdigest()
assert prov["corpus_root_sha256"] == hashlib.sha256(files["dlm/t.dlm"]).hexdigest()
assert prov["signature"] is None
PY

# a fresh home: the store goes, the document goes, the pack brings both back
cp -a "$S" saved-store
mv t.dlm orig.dlm
rm -rf "$DLM_HOME"
export DLM_HOME="$T/home2"
mkdir out
"$DLM" unpack t.dlm.pack --out out -q
cmp out/t.dlm orig.dlm || fail "the unpacked .dlm is not byte-identical"
S2="$DLM_HOME/store/$ID"
got=$("$DLM" prompt out/t.dlm "What is the capital of France?" --temp 0 -n 12)
[ "$got" = "$want" ] || fail "prompt after unpack: '$got' != '$want'"
# an unpacked store has no leftover staging folder next to it
[ "$(ls -A "$DLM_HOME/store")" = "$ID" ] || fail "leftovers in the store folder: $(ls -A "$DLM_HOME/store")"

# training goes on identically from the original and the unpacked store
mkdir a && cp orig.dlm a/t.dlm
"$DLM" --home "$T/homeA" unpack t.dlm.pack --out a --force -q
rm -rf "$T/homeA/store/$ID" && cp -a saved-store "$T/homeA/store/$ID"
"$DLM" --home "$T/homeA" train a/t.dlm --max-steps 2 -q >/dev/null
"$DLM" train out/t.dlm --max-steps 2 -q >/dev/null
cmp "$T/homeA/store/$ID/adapter/versions/v0003/adapter_model.safetensors" "$S2/adapter/versions/v0003/adapter_model.safetensors" \
    || fail "training on after unpack is not identical (replay/state lost?)"
"$DLM" --home "$T/homeA" train a/t.dlm --continue --max-steps 3 -q >/dev/null
"$DLM" train out/t.dlm --continue --max-steps 3 -q >/dev/null
va=$(cat "$T/homeA/store/$ID/adapter/current.txt"); vb=$(cat "$S2/adapter/current.txt")
[ "$va" = "$vb" ] || fail "resume: $va vs $vb"
cmp "$T/homeA/store/$ID/$va/adapter_model.safetensors" "$S2/$vb/adapter_model.safetensors" || fail "--resume differs after unpack"
echo ok
