#!/usr/bin/env bash
# Hostile packs (written by tests/cli/packlib.py with Python's tarfile and
# python3-zstandard, not by dlm) are refused with a clear message, and
# nothing is installed: no store, no staging folder, no document. A pack
# written by packlib.py from the spec (no folder entries, PAX headers)
# unpacks. Also: --force keeps the old store when the install fails.
set -euo pipefail
. "$DLM_SRC/tests/cli/lib.sh"
PY=/usr/bin/python3
LIB="$DLM_SRC/tests/cli/packlib.py"
write_doc t.dlm 1
"$DLM" train t.dlm --max-steps 2 -q >/dev/null
"$DLM" pack t.dlm -q
SRC_HOME=$DLM_HOME

# refuse KIND PACK PATTERN [ENV...]: exit 1, message matches, nothing installed
refuse() {
    local kind=$1 pack=$2 pat=$3; shift 3
    local h="$T/h-$kind" o="$T/o-$kind"
    set +e
    env "$@" DLM_HOME="$h" "$DLM" -v unpack "$pack" --out "$o" 2> "err-$kind.txt" >/dev/null
    local rc=$?
    set -e
    [ $rc = 1 ] || fail "$kind: exit $rc, expected 1: $(cat "err-$kind.txt")"
    grep -q -- "$pat" "err-$kind.txt" || fail "$kind: message '$(cat "err-$kind.txt")' lacks '$pat'"
    [ ! -e "$h/store" ] || [ -z "$(ls -A "$h/store")" ] || fail "$kind: something was installed: $(ls -A "$h/store")"
    [ ! -e "$o/t.dlm" ] || fail "$kind: the document was written"
    [ ! -e /tmp/dlm-evil ] || fail "$kind: wrote outside the home"
}
mk() { $PY "$LIB" hostile "$1" t.dlm.pack "h-$1.pack"; }
for k in abs dotdot symlink hardlink device fifo dup big bomb tamper version toplevel nodoc notzstd window; do mk $k; done
refuse abs h-abs.pack "PackUnsafeMemberError: .*'/tmp/dlm-evil' refused: absolute path"
refuse dotdot h-dotdot.pack "PackUnsafeMemberError: .*refused: '.' or '..' in the path"
refuse symlink h-symlink.pack "PackUnsafeMemberError: .*store/link: links are refused"
refuse hardlink h-hardlink.pack "PackUnsafeMemberError: .*store/hl: links are refused"
refuse device h-device.pack "PackUnsafeMemberError: .*store/dev: devices, fifos"
refuse fifo h-fifo.pack "PackUnsafeMemberError: .*store/fifo: devices, fifos"
refuse dup h-dup.pack "PackDuplicateMemberError: .*store/manifest.json appears twice"
refuse big h-big.pack "PackTooLargeError: .*store/big.bin is 70000 bytes, over the 60000-byte limit" DLM_TEST_PACK_MAX_MEMBER=60000
refuse total t.dlm.pack "PackTooLargeError: .*add up to more than 50000 bytes" DLM_TEST_PACK_MAX_TOTAL=50000
refuse bomb h-bomb.pack "PackBombError: .*compression ratio past 100:1" DLM_TEST_PACK_RATIO_FLOOR=1000000 DLM_TEST_PACK_MAX_RATIO=100
refuse window h-window.pack "PackBombError: .*zstd window is over 512 MiB"
refuse tamper h-tamper.pack "PackIntegrityError: .*checksum mismatch for store/replay/index.json: expected [0-9a-f]\{12\}…, got [0-9a-f]\{12\}…"
refuse version h-version.pack "PackFormatVersionError: .*pack_format_version 2 is newer than this tool's supported version 1. Upgrade dlm."
refuse toplevel h-toplevel.pack "PackUnsafeMemberError: .*'evil.sh' refused: unexpected top-level file"
refuse nodoc h-nodoc.pack "PackIntegrityError: .*exactly one dlm/\*.dlm"
refuse notzstd h-notzstd.pack "PackCorruptError: .*not a zstd-compressed pack"
grep -q "^hint: a pack is the .dlm.pack file" err-notzstd.txt || fail "no hint for a file that is not a pack: $(cat err-notzstd.txt)"
size=$(stat -c %s t.dlm.pack)
head -c $((size / 2)) t.dlm.pack > half.pack
refuse truncated half.pack "PackTruncatedError: .*truncated"
head -c $((size - 20)) t.dlm.pack > end.pack
refuse truncated-end end.pack "PackTruncatedError: .*truncated"
cat t.dlm.pack t.dlm.pack > twice.pack
refuse trailing twice.pack "PackCorruptError: .*data after the end of the tar stream"
: > empty.pack
refuse empty empty.pack "PackCorruptError: .*empty file"
grep -q '^hint: ' err-tamper.txt || fail "no hint for a checksum mismatch"

# a pack written from the spec by Python unpacks, and its store works
$PY "$LIB" make t.dlm "$SRC_HOME/store/$ID" py.pack
export DLM_HOME="$T/hpy"
mkdir py
"$DLM" unpack py.pack --out py -q
cmp py/t.dlm t.dlm || fail "python pack: document differs"
for f in adapter/current.txt adapter/versions/v0001/adapter_model.safetensors replay/corpus.zst manifest.json; do
    cmp "$DLM_HOME/store/$ID/$f" "$SRC_HOME/store/$ID/$f" || fail "python pack: $f differs"
done
a=$("$DLM" prompt py/t.dlm "What is the capital of Spain?" --temp 0 -n 8)
b=$(DLM_HOME=$SRC_HOME "$DLM" prompt t.dlm "What is the capital of Spain?" --temp 0 -n 8)
[ "$a" = "$b" ] || fail "python pack: prompt differs"

# an existing store: refused without --force; with --force and a failing
# install (the document copy fails) the old store is put back untouched
set +e
"$DLM" unpack py.pack --out py 2> exists.txt; rc=$?
set -e
[ $rc = 1 ] && grep -q "PackTargetExistsError\|already exists" exists.txt || fail "existing store not refused: $(cat exists.txt)"
echo marker > "$DLM_HOME/store/$ID/marker"
mkdir py2
set +e
DLM_FAIL_WRITE=py2/t.dlm "$DLM" unpack py.pack --out py2 --force 2> force.txt; rc=$?
set -e
[ $rc = 1 ] || fail "--force with a failing write should fail"
[ -f "$DLM_HOME/store/$ID/marker" ] || fail "the old store was not restored: $(cat force.txt)"
grep -q "previous store was put back" force.txt || fail "no restore note: $(cat force.txt)"
[ "$(ls -A "$DLM_HOME/store")" = "$ID" ] || fail "leftovers: $(ls -A "$DLM_HOME/store")"
"$DLM" unpack py.pack --out py2 --force -q
[ ! -f "$DLM_HOME/store/$ID/marker" ] || fail "--force did not replace the store"
# an unpack killed part-way (kill -9: a dead pid's names, made here by
# hand): killed between moving the old store aside and installing the new
# one, the next unpack puts the old store back before anything else;
# killed after, it removes the replaced store and the staging folder
sh -c 'exit 0' & dead=$!
wait $dead
st="$DLM_HOME/store"
echo marker2 > "$st/$ID/marker"
mv "$st/$ID" "$st/$ID.old-$dead"
mkdir -p "$st/.unpack-$dead-0badcafe/store" && echo x > "$st/.unpack-$dead-0badcafe/store/junk"
set +e
"$DLM" unpack py.pack --out py2 2> swept.txt; rc=$?
set -e
[ $rc = 1 ] && grep -q "PackTargetExistsError" swept.txt || fail "the put-back store was not seen as existing: $(cat swept.txt)"
grep -q "died before installing its store; the previous store was put back at $st/$ID" swept.txt || fail "no put-back note: $(cat swept.txt)"
[ "$(cat "$st/$ID/marker")" = marker2 ] || fail "the old store was not put back"
[ "$(ls -A "$st")" = "$ID" ] || fail "leftovers after the sweep: $(ls -A "$st")"
cp -a "$st/$ID" "$st/$ID.old-$dead"
"$DLM" unpack py.pack --out py2 --force 2> swept2.txt > /dev/null
grep -q "removed $st/$ID.old-$dead, the store an unpack --force had replaced" swept2.txt || fail "no removal note: $(cat swept2.txt)"
[ "$(ls -A "$st")" = "$ID" ] || fail "leftovers after the second sweep: $(ls -A "$st")"
# a live unpack's names are left alone
sleep 30 & live=$!
mkdir "$st/.unpack-$live-0badcafe"
"$DLM" unpack py.pack --out py2 --force -q
[ -d "$st/.unpack-$live-0badcafe" ] || fail "a live unpack's staging folder was removed"
kill $live; wait $live 2>/dev/null || true
echo ok
