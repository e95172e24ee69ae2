#!/usr/bin/env bash
# dlm cache show|prune|clear on entries written by an independent writer
# (python3 struct + hashlib, from the format in src/tokens/tcache.h), aged
# with coreutils touch: show counts them, prune --older-than removes the
# stale ones, the default prune honours training.cache.max_bytes (oldest
# first), clear refuses without --force off a terminal, then clears.
set -euo pipefail
. "$DLM_SRC/tests/cli/lib.sh"
write_doc doc.dlm 1
sed -i 's/^training:/training:\n  cache:\n    max_bytes: 200\n    prune_older_than_days: 7/' doc.dlm
store=$DLM_HOME/store/$ID
mk() { # KEY NTOK
    python3 - "$store/tokenized-cache/entries" "$1" "$2" <<'PY'
import hashlib, os, struct, sys
d, key, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
body = b"DLMTC001" + struct.pack("<I", 1) + struct.pack("<I", n) + struct.pack("<%di" % n, *range(n)) + bytes([1]) * n
os.makedirs(os.path.join(d, key[:2]), exist_ok=True)
open(os.path.join(d, key[:2], key + ".bin"), "wb").write(body + hashlib.sha256(body).digest())
PY
}
k1=$(printf a | sha256sum | cut -c1-64); k2=$(printf b | sha256sum | cut -c1-64); k3=$(printf c | sha256sum | cut -c1-64)
mk "$k1" 10; mk "$k2" 10; mk "$k3" 10          # 8+4+4+50+32 = 98 bytes each
touch -d '30 days ago' "$store/tokenized-cache/entries/${k1:0:2}/$k1.bin"
touch -d '3 days ago' "$store/tokenized-cache/entries/${k2:0:2}/$k2.bin"
"$DLM" cache show doc.dlm --json > show.json
python3 - show.json <<'PY' || fail "cache show --json: $(cat show.json)"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["entries"] == 3 and s["bytes"] == 3 * 98, s
assert 29 * 86400 < s["oldest_age_s"] < 31 * 86400, s
assert s["settings"] == {"enabled": True, "max_bytes": 200, "prune_older_than_days": 7}, s
PY
"$DLM" cache show doc.dlm > show.txt
grep -q "entries      3" show.txt || fail "cache show text: $(cat show.txt)"
out=$("$DLM" cache prune doc.dlm --older-than 40d)
grep <<<"$out" -q "pruned 1 entry" || fail "the size cap should prune one (oldest): $out"
[ ! -e "$store/tokenized-cache/entries/${k1:0:2}/$k1.bin" ] || fail "the oldest entry survived the cap"
out=$("$DLM" cache prune doc.dlm --older-than 2d)
grep <<<"$out" -q "pruned 1 entry" || fail "--older-than 2d: $out"
[ -e "$store/tokenized-cache/entries/${k3:0:2}/$k3.bin" ] || fail "the fresh entry was pruned"
set +e
"$DLM" cache prune doc.dlm --older-than 3x >/dev/null 2>&1; rc=$?
set -e
[ $rc = 2 ] || fail "bad duration: rc $rc"
set +e
out=$("$DLM" cache clear doc.dlm 2>&1 </dev/null); rc=$?
set -e
[ $rc = 1 ] && grep <<<"$out" -q -- "--force" || fail "clear without --force off a terminal: $rc $out"
[ -e "$store/tokenized-cache/entries/${k3:0:2}/$k3.bin" ] || fail "refused clear removed entries"
"$DLM" cache clear doc.dlm --force >/dev/null
[ ! -e "$store/tokenized-cache" ] || fail "clear left the cache"
"$DLM" cache show doc.dlm --json > show2.json
python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["entries"] == 0' show2.json || fail "empty after clear"
echo ok
