#!/usr/bin/env bash
# dlm export's importance matrix (src/export/calib.c, imatrix.c): a K-quant
# export computes it from the replay corpus by default and records it in
# export_manifest.json (used, sha256 of the cached imatrix.gguf, chunks);
# the file has llama.cpp's GGUF imatrix layout (read with the independent
# reader tests/ref/export/gguf_read.py); a second export reuses the cache
# (and the base GGUF); the same file for 1 thread and all; a tampered cache
# is recomputed; --no-imatrix and non-K quants use none (and the base bytes
# differ from the calibrated ones); retraining on an edited document
# changes the corpus, so the next export computes a new matrix.
set -euo pipefail
. "$DLM_SRC/tests/cli/lib.sh"
write_doc doc.dlm 1
S="$DLM_HOME/store/$ID"
IM="$S/exports/imatrix/imatrix.gguf"
X="$S/exports/Q4_K_M"
py() { /usr/bin/python3 -c "$@"; }
"$DLM" train doc.dlm -q >/dev/null

out=$("$DLM" export doc.dlm --target gguf --quant Q4_K_M 2>&1)
grep -q "imatrix: computed, 1 chunks of" <<<"$out" || fail "no imatrix line: $out"
[ -f "$IM" ] && [ -f "$S/exports/imatrix/imatrix.meta.json" ] || fail "no cached imatrix"
py "
import json, hashlib, sys
sys.path.insert(0, '$DLM_SRC/tests/ref/export')
import gguf_read
m = json.load(open('$X/export_manifest.json'))
im = m['imatrix']
assert im['used'] is True and im['cached'] is False and im['chunks'] == 1, im
assert im['sha256'] == hashlib.sha256(open('$IM', 'rb').read()).hexdigest(), im
assert im['corpus_sha256'] == hashlib.sha256(open('$S/replay/corpus.zst', 'rb').read()).hexdigest(), im
kv, ts = gguf_read.read('$IM')
assert kv['general.type'] == (8, 'imatrix') and kv['imatrix.chunk_count'] == (4, 1), kv   # str, u32
assert kv['imatrix.chunk_size'][0] == 4 and kv['imatrix.chunk_size'][1] == im['chunk_size'] == im['tokens'], (kv, im)
assert 16 < im['tokens'] < 512, im                                        # a short text: one chunk of all of it
assert kv['imatrix.datasets'] == (9, ['replay:' + im['corpus_sha256']]), kv
names = [t['name'] for t in ts]
assert names[::2] == sorted(names[::2]) and len(names) == 2 * 7 * 2, names   # by weight name, 7 projections x 2 layers
assert all(a == b.replace('.in_sum2', '.counts') for a, b in zip(names[1::2], names[::2])), names
for t in ts:
    if t['name'].endswith('.counts'):
        assert t['type'] == 0 and t['ne'] == [1, 1], t
    else:
        assert t['type'] == 0 and t['ne'][1] == 1 and t['ne'][0] in (32, 64), t
        assert t['name'].startswith('blk.'), t
" || fail "manifest / imatrix file"
py "
import sys
sys.path.insert(0, '$DLM_SRC/tests/ref/export')
import gguf_read, json
kv, _ = gguf_read.read('$X/base.Q4_K_M.gguf')
im = json.load(open('$X/export_manifest.json'))['imatrix']
assert kv['quantize.imatrix.file'] == (8, 'imatrix.gguf'), kv.get('quantize.imatrix.file')
assert kv['quantize.imatrix.dataset'] == (8, 'replay:' + im['corpus_sha256'])
assert kv['quantize.imatrix.entries_count'] == (4, 14) and kv['quantize.imatrix.chunks_count'] == (4, 1)
" || fail "quantize.imatrix.* keys"
base1=$(sha256sum "$X/base.Q4_K_M.gguf" | cut -c1-64)

# second export: the cache and the base are reused
out=$("$DLM" export doc.dlm --target gguf --quant Q4_K_M 2>&1)
grep -q "imatrix: reused" <<<"$out" || fail "cache not reused: $out"
grep -q "base reused" <<<"$out" || fail "base not reused: $out"
py "import json; assert json.load(open('$X/export_manifest.json'))['imatrix']['cached'] is True" || fail "cached flag"

# one thread computes the same file; a tampered cache is noticed
sum1=$(sha256sum "$IM" | cut -c1-64)
py "f = open('$IM', 'r+b'); f.seek(-1, 2); b = f.read(1); f.seek(-1, 2); f.write(bytes([b[0] ^ 0x55]))"
out=$("$DLM" export doc.dlm --target gguf --quant Q4_K_M --threads 1 2>&1)
grep -q "imatrix: computed" <<<"$out" || fail "tampered cache reused: $out"
[ "$(sha256sum "$IM" | cut -c1-64)" = "$sum1" ] || fail "1 thread gives another imatrix"
[ "$(sha256sum "$X/base.Q4_K_M.gguf" | cut -c1-64)" = "$base1" ] || fail "1 thread gives another base"

# --no-imatrix: none, and other bytes (Q5_0 fallback rows weigh by importance)
out=$("$DLM" export doc.dlm --target gguf --quant Q4_K_M --no-imatrix 2>&1)
grep -q "imatrix: none (--no-imatrix)" <<<"$out" || fail "--no-imatrix: $out"
grep -q "base reused" <<<"$out" && fail "--no-imatrix reused the calibrated base"
py "
import json
im = json.load(open('$X/export_manifest.json'))['imatrix']
assert im == {'used': False, 'reason': '--no-imatrix'}, im
" || fail "--no-imatrix manifest"
[ "$(sha256sum "$X/base.Q4_K_M.gguf" | cut -c1-64)" != "$base1" ] || fail "--no-imatrix gives the calibrated bytes"
out=$("$DLM" export doc.dlm --target gguf --quant Q8_0 2>&1)
grep -q "imatrix" <<<"$out" && fail "Q8_0 mentions an imatrix: $out"
py "import json; assert json.load(open('$S/exports/Q8_0/export_manifest.json'))['imatrix'] == {'used': False, 'reason': 'not a K-quant'}" || fail "Q8_0 manifest"

# a new training run on an edited document changes the corpus: recomputed
cat >> doc.dlm <<'DOC'

# Rivers

The Seine flows through Paris. The Spree flows through Berlin.
DOC
"$DLM" train doc.dlm -q >/dev/null
out=$("$DLM" export doc.dlm --target gguf --quant Q4_K_M 2>&1)
grep -q "imatrix: computed" <<<"$out" || fail "new corpus, cache reused: $out"
[ "$(sha256sum "$IM" | cut -c1-64)" != "$sum1" ] || fail "new corpus, same imatrix"
echo "t0306: ok"
