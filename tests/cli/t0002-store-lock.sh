#!/usr/bin/env bash
# Two writers on one store: the second fails with a clear message and
# nothing is corrupted; a stale lock is reported with the command that
# clears it, never taken over.
set -euo pipefail
: "${DLM:?DLM must point at the dlm binary}"
PY=/usr/bin/python3
export DLM_HOME=$(mktemp -d)
w=$(mktemp -d)
bg=""
trap '[ -n "$bg" ] && kill "$bg" 2>/dev/null; rm -rf "$DLM_HOME" "$w"' EXIT
cd "$w"
fail() { echo "FAIL: $*" >&2; exit 1; }

"$DLM" init a.dlm > /dev/null
id=$(sed -n 's/^dlm_id: //p' a.dlm)
store="$DLM_HOME/store/$id"
sed -i 's/^dlm_version: 15$/dlm_version: 3/' a.dlm
cp a.dlm orig.dlm

# writer 1 holds the store lock for 8 s (test hook; long enough for a
# loaded machine), writer 2 arrives meanwhile
DLM_TEST_HOLD_LOCK_MS=8000 "$DLM" migrate a.dlm > w1.txt 2>&1 &
bg=$!
# wait for the record's command line, not only the file: it is written after the open
for _ in $(seq 600); do grep -q '^migrate$' "$store/.lock" 2>/dev/null && break; sleep 0.05; done
grep -q '^migrate$' "$store/.lock" || fail "writer 1 never took the lock"
"$DLM" show a.dlm --json | $PY -c 'import json,sys; l=json.load(sys.stdin)["store"]["lock"]; assert l and l["command"]=="migrate" and l["alive"] is True, l'
set +e
"$DLM" migrate a.dlm > w2.txt 2> err2.txt; rc=$?
set -e
[ $rc -eq 1 ] || fail "second writer exit $rc: $(cat err2.txt)"
grep -Eq "^dlm: error: $store/.lock: already locked by PID $bg \(dlm migrate, since [0-9T:-]+ UTC\)$" err2.txt || fail "$(cat err2.txt)"
grep -q '^hint: ' err2.txt || fail "no hint"
wait "$bg" || fail "writer 1 failed: $(cat w1.txt)"
bg=""
grep -q '^migrated: a.dlm' w1.txt || fail "$(cat w1.txt)"
[ ! -e "$store/.lock" ] || fail "lock left behind"
cmp -s a.dlm.bak orig.dlm || fail "backup corrupted"
"$DLM" show a.dlm --json | $PY -c 'import json,sys; s=json.load(sys.stdin); assert s["source_version"]==15 and s["store"]["lock"] is None'
$PY -c 'import json,sys; json.load(open(sys.argv[1]))' "$store/manifest.json"
find "$w" "$store" -name '*.tmp.*' | grep -q . && fail "temp files left behind"

# a lock left by a dead PID on this host (a file without the kernel mark,
# as the original tool writes it): taken over, with a note naming it
cp orig.dlm a.dlm
sh -c 'exit 0' & dead=$!
wait "$dead"
printf '%s\n%s\n%s\n' "$dead" "$(hostname)" "1700000000.25" > "$store/.lock"
"$DLM" migrate a.dlm --no-backup > out4.txt 2> err4.txt || fail "a dead holder's lock was not taken over: $(cat err4.txt)"
grep -q '^migrated: a.dlm' out4.txt || fail "$(cat out4.txt)"
grep -q "previous holder of this store (PID $dead, since 2023-11-14T22:13:20 UTC) died" err4.txt || fail "no note: $(cat err4.txt)"
[ ! -e "$store/.lock" ] || fail "lock left behind after a takeover"

# kill -9 of a holder: the kernel releases its lock, the next writer proceeds
cp orig.dlm a.dlm
DLM_TEST_HOLD_LOCK_MS=60000 "$DLM" migrate a.dlm --no-backup > /dev/null 2>&1 &
bg=$!
for _ in $(seq 400); do grep -q '^migrate$' "$store/.lock" 2>/dev/null && break; sleep 0.05; done
grep -q '^kernel-lock$' "$store/.lock" || fail "the lock file does not record its kernel lock"
kill -KILL "$bg"; wait "$bg" 2>/dev/null || true; bg=""
"$DLM" show a.dlm --json | $PY -c 'import json,sys; l=json.load(sys.stdin)["store"]["lock"]; assert l and l["alive"] is False, l'
cp orig.dlm a.dlm
"$DLM" migrate a.dlm --no-backup > out5.txt 2> err5.txt || fail "after kill -9: $(cat err5.txt)"
grep -q "(PID [0-9]*, dlm migrate, since .*) died without releasing it" err5.txt || fail "$(cat err5.txt)"

# a filesystem without kernel locks (simulated): today's exclusive file, and
# a dead holder is reported with the command that clears it, never taken
export DLM_TEST_NO_KERNEL_LOCK=1
cp orig.dlm a.dlm
printf '%s\n%s\n%s\n' "$dead" "$(hostname)" "1700000000.25" > "$store/.lock"
if "$DLM" migrate a.dlm > /dev/null 2> err3.txt; then fail "stale lock was taken over"; fi
grep -q "lock is stale (PID $dead not alive" err3.txt || fail "$(cat err3.txt)"
cmd=$(sed -n "s/^hint: .*remove it: \(rm '.*'\)$/\1/p" err3.txt)
[ "$cmd" = "rm '$store/.lock'" ] || fail "hint command: '$cmd' from $(cat err3.txt)"
cmp -s a.dlm orig.dlm || fail "document changed under a stale lock"
eval "$cmd"
"$DLM" migrate a.dlm --no-backup | grep '^migrated: a.dlm' >/dev/null || fail "migrate after clearing the lock"
! grep -q kernel-lock "$store/.lock" 2>/dev/null || fail "fallback lock left"
echo "t0002 ok"
