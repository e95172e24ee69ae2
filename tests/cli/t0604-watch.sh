#!/usr/bin/env bash
# dlm train --watch: after the first run, an edit that adds a section (here a
# new file under training.sources) commits the next version from a bounded
# resume-mode run; an edit that adds nothing new (touching files) does not
# train; SIGINT between runs ends the watch cleanly (exit 0).
set -euo pipefail
. "$DLM_SRC/tests/cli/lib.sh"
write_doc doc.dlm 1
mkdir -p notes
echo "Lisbon is the capital of Portugal." > notes/a.md
sed -i 's/^training:/training:\n  sources:\n    - path: notes/' doc.dlm
versions() { ls "$DLM_HOME/store/$ID/adapter/versions" 2>/dev/null | grep -c '^v[0-9]*$' || true; }
wait_for() { # N SECONDS
    for _ in $(seq 1 $(( $2 * 5 ))); do [ "$(versions)" -ge "$1" ] && return 0; sleep 0.2; done
    return 1
}
"$DLM" train doc.dlm --max-steps 2 --watch --watch-max-steps 2 --watch-debounce-ms 200 > out.txt 2> err.txt &
pid=$!
trap 'kill $pid 2>/dev/null || true; [ -n "${KEEP:-}" ] || rm -rf "$T"' EXIT
wait_for 1 120 || fail "no first version: $(cat err.txt)"
for _ in $(seq 1 50); do grep -q "watching" err.txt && break; sleep 0.2; done
grep -q "watching doc.dlm" err.txt || fail "not watching: $(cat err.txt)"
sleep 0.5
echo "Rome is the capital of Italy." > notes/b.md
wait_for 2 120 || fail "no version after a new file: $(cat err.txt)"
grep -q "1 new section(s): retraining (resume mode, <= 2 steps)" err.txt || fail "no retrain line: $(cat err.txt)"
python3 - "$DLM_HOME/store/$ID/adapter/versions/v0002/training_run.json" <<'PY' || fail "v0002 record"
import json, sys
r = json.load(open(sys.argv[1]))
assert 1 <= r["steps"] <= 2, r["steps"]       # bounded by --watch-max-steps
assert sorted(f["path"] for f in r["sources"]["files"]) == ["a.md", "b.md"], r["sources"]
PY
# nothing new: no run
for _ in $(seq 1 100); do [ "$(grep -c '^trained v' out.txt)" = 2 ] && break; sleep 0.2; done
sleep 1
touch notes/a.md doc.dlm
for _ in $(seq 1 50); do grep -q "no new sections" err.txt && break; sleep 0.2; done
grep -q "no new sections; not retraining" err.txt || fail "a touch should not retrain: $(cat err.txt)"
[ "$(versions)" = 2 ] || fail "a touch trained a version"
kill -INT $pid
rc=0
wait $pid || rc=$?
[ $rc = 0 ] || fail "SIGINT between runs: exit $rc, $(cat err.txt)"
echo ok
