#!/usr/bin/env bash
# Issue 30 point 6: every long step shows progress (util/progress.h), and the
# base is hashed once per file content.
#   - with the threshold lowered to 0 (DLM_TEST_PROGRESS_MIN_S, test-only),
#     stderr not a terminal: one line per step when it ends, for reading a
#     base that is not in the page cache (and nothing once it is), hashing
#     each weights file for dlm.lock, the importance matrix,
#     writing/quantizing the GGUF, packing and unpacking
#   - -q: none of them
#   - the terminal bar (DLM_TEST_PROGRESS_BAR=1 draws it into a file): redrawn
#     in place with done/total, rate and ETA, then "done in"
#   - the digest cache: a second train, and a train of another document on
#     the same base, read the digests from <home>/cache/weights.json instead
#     of the files (-v says "not re-read"; no hashing line)
set -euo pipefail
. "$DLM_SRC/tests/cli/lib.sh"
export DLM_TEST_PROGRESS_MIN_S=0
write_doc doc.dlm 1
S="$DLM_HOME/store/$ID"
shards="model-00001-of-00002.safetensors model-00002-of-00002.safetensors"

"$DLM" -v train doc.dlm > /dev/null 2> t1.txt || fail "train: $(tail -5 t1.txt)"
for f in $shards; do
    n=$(stat -c %s "$FIXTURE_QWEN/$f")
    grep -Eq "^dlm: hashing $f: .* in .*/s\)$" t1.txt || fail "no hashing line for $f: $(grep hashing t1.txt)"
    grep -q "base sha256: .* of $FIXTURE_QWEN/$f hashed ($n bytes read)" t1.txt ||
        fail "$f not hashed on the first start: $(grep 'base sha256' t1.txt)"
done
py() { /usr/bin/python3 -c "$@"; }
py "
import json
c = json.load(open('$DLM_HOME/cache/weights.json'))
assert len(c) == 2 and all(k.startswith('$FIXTURE_QWEN/model-0000') for k in c), c
" || fail "digest cache: $(cat "$DLM_HOME/cache/weights.json")"

# the second start of the same document, and another document on that base:
# the digests come from the cache, the files are not read again
"$DLM" -v train doc.dlm > /dev/null 2> t2.txt
sed "s/^dlm_id: .*/dlm_id: 01JD0000000000000000001123/" doc.dlm > other.dlm
"$DLM" -v train other.dlm > /dev/null 2> t3.txt
for t in t2.txt t3.txt; do
    grep -q "^dlm: hashing" $t && fail "$t: the base was hashed again: $(grep hashing $t)"
    for f in $shards; do
        grep -q "base sha256: .* of $FIXTURE_QWEN/$f from $DLM_HOME/cache/weights.json (not re-read)" $t ||
            fail "$t: $f: $(grep 'base sha256' $t)"
    done
done
# export: the importance matrix and the GGUF writes
"$DLM" export doc.dlm --target gguf --quant Q4_K_M > /dev/null 2> ex.txt || fail "export: $(cat ex.txt)"
grep -Eq "^dlm: importance matrix: 1 chunks in .*chunks/s\)$" ex.txt || fail "no imatrix line: $(cat ex.txt)"
ntens=$(py "import struct; print(struct.unpack('<4sIQ', open('$S/exports/Q4_K_M/base.Q4_K_M.gguf','rb').read(16))[2])")
grep -Eq "^dlm: writing base.Q4_K_M.gguf: $ntens tensors in .*tensors/s\)$" ex.txt || fail "no GGUF line: $(cat ex.txt)"

# pack and unpack
"$DLM" pack doc.dlm --out d.pack 2> pk.txt > /dev/null || fail "pack: $(cat pk.txt)"
grep -Eq "^dlm: packing \(zstd\): .* in .*/s\)$" pk.txt || fail "no packing line: $(cat pk.txt)"
DLM_HOME="$T/home2" "$DLM" unpack d.pack --out un 2> up.txt > /dev/null || fail "unpack: $(cat up.txt)"
grep -Eq "^dlm: unpacking: [0-9.]+ [KMG]?i?B in .*/s\)$" up.txt ||
    fail "no unpacking line: $(cat up.txt)"

# -q: nothing

# reading a base that is not in the page cache: a private copy, written
# back and dropped from the cache (posix_fadvise DONTNEED), so no other
# test's reads can warm it; once read, the next start reads nothing
cold() {
    cp "$DLM_SRC/models/tiny.gguf" base.gguf
    py "
import os
fd = os.open('base.gguf', os.O_RDONLY); os.fsync(fd)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED); os.close(fd)"
}
cold
"$DLM" prompt --base "$T/base.gguf" --raw "The" -n 2 --temp 0 > /dev/null 2> rd.txt || fail "prompt: $(cat rd.txt)"
grep -Eq "^dlm: reading base: [0-9.]+ MiB in [0-9.]+[ms]* \([0-9.]+ [KMG]?i?B/s\)$" rd.txt || fail "no reading line: $(cat rd.txt)"
"$DLM" prompt --base "$T/base.gguf" --raw "The" -n 2 --temp 0 > /dev/null 2> rd2.txt
grep -q "reading base" rd2.txt && fail "a cached base was read again: $(cat rd2.txt)"
# -q: nothing, even for a cold base
cold
"$DLM" -q prompt --base "$T/base.gguf" --raw "The" -n 2 --temp 0 > /dev/null 2> q.txt
grep -q "reading base" q.txt && fail "-q printed progress: $(cat q.txt)"

# the bar: redrawn in place (\r, erase line), done/total, rate, ETA, "done in"
cold
DLM_TEST_PROGRESS_BAR=1 "$DLM" prompt --base "$T/base.gguf" --raw "The" -n 2 --temp 0 > /dev/null 2> bar.bin
py "
import re
s = open('bar.bin', 'rb').read().decode()
draws = s.split('\r\x1b[K')
bars = [d for d in draws if d.startswith('reading base [')]
assert bars, repr(s[:300])
m = re.match(r'reading base \[[#.]{24}\] [0-9.]+ [KMG]?i?B of ([0-9.]+ MiB) \(\d+%\), [0-9.]+ [KMG]?i?B/s, ETA \d+:\d\d', bars[0])
assert m, bars[0]
size = m.group(1)
assert re.search(r'\[#{24}\] ' + re.escape(size + ' of ' + size) + r' \(100%\).*, done in [0-9.]+[ms]*\n', bars[-1]), bars[-1]
" || fail "bar: $(od -c bar.bin | head)"
echo ok
