#!/usr/bin/env bash
# dlm train determinism drills on a small random base (fixture qwen2-f32):
#   two runs, same seed → identical adapter sha256; --threads 1 vs 2 → identical;
#   a run killed (SIGKILL) after its second checkpoint, then --resume → the
#   sha256 of the uninterrupted run.
set -euo pipefail
. "$DLM_SRC/tests/cli/lib.sh"
write_doc doc.dlm 20
sha() { sha256sum "$DLM_HOME/store/$ID/adapter/versions/$1/adapter_model.safetensors" | cut -c1-64; }

"$DLM" train doc.dlm --max-steps 20 --threads 2 -q >/dev/null
a=$(sha v0001)
"$DLM" train doc.dlm --max-steps 20 --threads 1 -q >/dev/null
b=$(sha v0002)
[ "$a" = "$b" ] || fail "threads 1 vs 2 (or a rerun) changed the adapter: $a vs $b"

# killed after step 10 (checkpoints at 5, 10, 15 for a 20-step run)
set +e
DLM_TEST_CRASH_AFTER_STEP=10 "$DLM" train doc.dlm --max-steps 20 -q >/dev/null 2>&1
rc=$?
set -e
[ $rc -ne 0 ] || fail "the crash hook did not kill the run"
ls "$DLM_HOME/store/$ID/adapter/checkpoints" | grep -q step-000010 || fail "no checkpoint at step 10"
# the killed process left its store lock: reported, never stolen
set +e
out=$("$DLM" train doc.dlm --max-steps 20 2>&1)
rc=$?
set -e
[ $rc -eq 1 ] || fail "a stale lock should stop train"
echo "$out" | grep -q "lock is stale" || fail "no stale-lock message: $out"
rm "$DLM_HOME/store/$ID/.lock"
# plain train refuses and names --resume
set +e
out=$("$DLM" train doc.dlm --max-steps 20 2>&1)
rc=$?
set -e
[ $rc -eq 1 ] || fail "plain train after a crash should exit 1, got $rc"
echo "$out" | grep -q -- "--resume" || fail "plain train after a crash does not name --resume: $out"
"$DLM" train doc.dlm --max-steps 20 --resume -q >/dev/null
c=$(sha v0003)
[ "$a" = "$c" ] || fail "resumed run differs from the uninterrupted one: $a vs $c"
[ ! -d "$DLM_HOME/store/$ID/adapter/checkpoints" ] || fail "checkpoints left after the commit"
# --resume and --fresh together: usage error
set +e
"$DLM" train doc.dlm --resume --fresh 2>/dev/null
rc=$?
set -e
[ $rc -eq 2 ] || fail "--resume --fresh should exit 2, got $rc"
echo "ok: $a"
