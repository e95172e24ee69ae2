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
# the killed process left its lock file, but the kernel released its lock:
# the next command proceeds with no manual step. Plain train refuses (a
# checkpoint is there) and names --resume and where the run died.
[ -e "$DLM_HOME/store/$ID/.lock" ] || fail "the killed run left no lock file (was it killed holding it?)"
set +e
out=$("$DLM" train doc.dlm --max-steps 20 2>&1)
rc=$?
set -e
[ $rc -eq 1 ] || fail "plain train after a crash should exit 1, got $rc"
grep <<<"$out" -q "InterruptedRunError\|stopped after step 10" || fail "no interrupted-run error: $out"
grep <<<"$out" -q -- "--resume" || fail "plain train after a crash does not name --resume: $out"
grep <<<"$out" -q "previous run (run 3, PID [0-9]*) died at step 10/20; its checkpoint at step 10 is kept" ||
    fail "train does not say where the previous run died: $out"
# the newest checkpoint corrupt, the older intact: the error names the
# intact one and a command that resumes from it, and that command works
ck="$DLM_HOME/store/$ID/adapter/checkpoints"
[ -d "$ck/step-000005" ] || fail "no older checkpoint at step 5"
printf 'X' | dd of="$ck/step-000010/training_state.bin" bs=1 seek=100 conv=notrunc 2>/dev/null
set +e
out=$("$DLM" train doc.dlm --max-steps 20 --resume 2>&1)
rc=$?
set -e
[ $rc -eq 1 ] || fail "a corrupt checkpoint should stop --resume, got $rc: $out"
grep <<<"$out" -q "ResumeIntegrityError" || fail "$out"
grep <<<"$out" -q "the older checkpoint $ck/step-000005 (step 5) is intact" || fail "the intact checkpoint is not named: $out"
cmd=$(echo "$out" | sed -n 's/^hint: resume from it: \(.*\)$/\1/p')
[ -n "$cmd" ] || fail "no resume command in: $out"
eval "${cmd/dlm train/\"\$DLM\" train} -q" >/dev/null
c=$(sha v0003)
[ "$a" = "$c" ] || fail "the run resumed from the older checkpoint differs from the uninterrupted one: $a vs $c"
# killed again (at step 12), resumed as-is: the bytes of the uninterrupted run
set +e
DLM_TEST_CRASH_AFTER_STEP=12 "$DLM" train doc.dlm --max-steps 20 -q >/dev/null 2>&1
set -e
"$DLM" train doc.dlm --max-steps 20 --resume -q >/dev/null
d=$(sha v0004)
[ "$a" = "$d" ] || fail "resumed run differs from the uninterrupted one: $a vs $d"
[ ! -d "$DLM_HOME/store/$ID/adapter/checkpoints" ] || fail "checkpoints left after the commit"
# --resume and --fresh together: usage error
set +e
"$DLM" train doc.dlm --resume --fresh 2>/dev/null
rc=$?
set -e
[ $rc -eq 2 ] || fail "--resume --fresh should exit 2, got $rc"
echo "ok: $a"
