#!/usr/bin/env bash
# dlm train failure drills: a corrupt training_state.bin, a failed write
# during the version commit, and dlm.lock drift with the three lock flags.
set -euo pipefail
. "$DLM_SRC/tests/cli/lib.sh"
cp -r "$FIXTURE_QWEN" base
write_doc doc.dlm 3 "$T/base"
S="$DLM_HOME/store/$ID"
expect_fail() { # expect_fail RC PATTERN cmd...
    local want=$1 pat=$2; shift 2
    set +e; out=$("$@" 2>&1); rc=$?; set -e
    [ $rc -eq "$want" ] || fail "'$*' exited $rc, expected $want: $out"
    grep <<<"$out" -q -- "$pat" || fail "'$*' output lacks '$pat': $out"
}

"$DLM" train doc.dlm -q >/dev/null
[ "$(cat "$S/adapter/current.txt")" = "adapter/versions/v0001" ] || fail "v0001 not current"

# 1. a write failure while committing v0002: clear error, v0001 stays current
expect_fail 1 "current version is unchanged" env DLM_FAIL_WRITE=adapter_model.safetensors "$DLM" train doc.dlm
[ "$(cat "$S/adapter/current.txt")" = "adapter/versions/v0001" ] || fail "current moved after a failed commit"
[ ! -e "$S/adapter/versions/v0002" ] || fail "a half-written v0002 exists"
ls -a "$S/adapter/versions" | grep -q tmp && fail "temp folder left behind"

# 2. corrupt newest checkpoint: ResumeIntegrityError naming the intact older one, nothing overwritten
# (the lock of the killed run is taken over with no manual step)
set +e; DLM_TEST_CRASH_AFTER_STEP=2 "$DLM" train doc.dlm --max-steps 6 -q >/dev/null 2>&1; set -e
ck=$(ls -d "$S"/adapter/checkpoints/step-* | tail -1)
printf 'X' | dd of="$ck/training_state.bin" bs=1 seek=100 conv=notrunc 2>/dev/null
before=$(sha256sum "$ck/training_state.bin")
expect_fail 1 "ResumeIntegrityError: training_state.bin sha256 mismatch" "$DLM" train doc.dlm --max-steps 6 --resume
expect_fail 1 "is intact" "$DLM" train doc.dlm --max-steps 6 --resume
[ "$before" = "$(sha256sum "$ck/training_state.bin")" ] || fail "the corrupt checkpoint was overwritten"
[ "$(cat "$S/adapter/current.txt")" = "adapter/versions/v0001" ] || fail "current moved"
"$DLM" train doc.dlm --fresh -q >/dev/null   # --fresh drops the checkpoint and trains v0002
[ "$(cat "$S/adapter/current.txt")" = "adapter/versions/v0002" ] || fail "--fresh did not commit v0002"

# 2b. a kill while a committed run removes its checkpoints (DLM_FAIL_REMOVE
# stops the removal at training_state.bin, after progress.json went, as a
# kill there would): the next --resume must not find a step-NNNNNN that
# lacks its progress.json (the kill drill hit this once in CI)
DLM_FAIL_REMOVE=training_state.bin "$DLM" train doc.dlm --max-steps 6 -q >/dev/null
[ "$(cat "$S/adapter/current.txt")" = "adapter/versions/v0003" ] || fail "v0003 not committed"
for d in "$S"/adapter/checkpoints/step-*; do
    [ -e "$d" ] || continue
    [ -f "$d/progress.json" ] || fail "a half-removed checkpoint is left: $(ls -la "$d")"
done
expect_fail 1 "nothing to resume: the last run completed as v0003" "$DLM" train doc.dlm --max-steps 6 --resume
"$DLM" train doc.dlm --max-steps 6 --continue -q >/dev/null || fail "--continue after a stopped removal failed"
[ "$(cat "$S/adapter/current.txt")" = "adapter/versions/v0004" ] || fail "v0004 not committed"
left=$(find "$S/adapter" -name '*.tmp-*')
[ -z "$left" ] || fail "the stopped removal's folder was not swept: $left"

# 3. lock drift: the base weights change → error naming --update-lock
python3 - "$T/base/model-00002-of-00002.safetensors" <<'PY'
import sys
p = sys.argv[1]
b = bytearray(open(p, 'rb').read()); b[-1] ^= 1; open(p, 'wb').write(b)
PY
expect_fail 1 "base_model_sha256 changed" "$DLM" train doc.dlm
expect_fail 1 "dlm train doc.dlm --update-lock" "$DLM" train doc.dlm
expect_fail 2 "mutually exclusive" "$DLM" train doc.dlm --update-lock --ignore-lock
lock_before=$(sha256sum "$S/dlm.lock")
"$DLM" train doc.dlm --ignore-lock -q >/dev/null       # trains, leaves the lock alone
[ "$lock_before" = "$(sha256sum "$S/dlm.lock")" ] || fail "--ignore-lock rewrote dlm.lock"
"$DLM" train doc.dlm --update-lock -q >/dev/null       # trains, rewrites the lock
[ "$lock_before" != "$(sha256sum "$S/dlm.lock")" ] || fail "--update-lock did not rewrite dlm.lock"
"$DLM" train doc.dlm -q >/dev/null                     # now consistent again
# a seed change is a warning, an error under --strict-lock
out=$("$DLM" train doc.dlm --seed 7 2>&1) || fail "a seed change should only warn"
grep <<<"$out" -q "seed changed" || fail "no seed warning: $out"
"$DLM" train doc.dlm --update-lock -q >/dev/null
expect_fail 1 "seed changed" "$DLM" train doc.dlm --seed 9 --strict-lock
echo ok
