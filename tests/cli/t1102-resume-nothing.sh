#!/usr/bin/env bash
# `dlm train DOC --resume` with nothing to resume (issue 30 point 4): it says
# so and exits 1 instead of starting a new run: "no run has started yet"
# before any run, "the last run completed as v0001" after one; nothing is
# trained and `dlm status` still reports the completed run. --continue
# trains the current version further (the version's weights and optimizer
# state, a new run); a run that left a checkpoint is resumed as before.
set -euo pipefail
. "$DLM_SRC/tests/cli/lib.sh"
write_tiny_doc doc.dlm
S="$DLM_HOME/store/$ID"
expect() { # expect RC PATTERN cmd...
    local want=$1 pat=$2; shift 2
    set +e; out=$("$@" 2>&1); rc=$?; set -e
    [ $rc -eq "$want" ] || fail "'$*' exited $rc, expected $want: $out"
    grep <<<"$out" -q -- "$pat" || fail "'$*' output lacks '$pat': $out"
}
expect 1 "error: .*nothing to resume: no run has started yet" "$DLM" train doc.dlm --resume --max-steps 2
[ ! -e "$S/adapter/current.txt" ] || fail "--resume with nothing to resume trained"
"$DLM" train doc.dlm --max-steps 2 -q > /dev/null
expect 1 "nothing to resume: the last run completed as v0001" "$DLM" train doc.dlm --resume --max-steps 2
grep <<<"$out" -q "^hint: 'dlm train doc.dlm' trains a new version .*'dlm train doc.dlm --continue' trains v0001 further" ||
    fail "no hint: $out"
[ "$(cat "$S/adapter/current.txt")" = "adapter/versions/v0001" ] || fail "--resume committed a version"
"$DLM" status doc.dlm | grep -q "completed, v0001 committed" || fail "status after the refusal: $("$DLM" status doc.dlm)"
# JSON: the error on stderr, nothing on stdout
set +e; js=$("$DLM" train doc.dlm --resume --json 2>/dev/null); rc=$?; set -e
[ $rc -eq 1 ] && [ -z "$js" ] || fail "--json: rc $rc stdout '$js'"
# --continue: a new run from v0001's weights
"$DLM" train doc.dlm --continue --max-steps 2 -q > /dev/null
[ "$(cat "$S/adapter/current.txt")" = "adapter/versions/v0002" ] || fail "--continue did not commit v0002"
expect 2 "mutually exclusive" "$DLM" train doc.dlm --resume --continue
expect 2 "mutually exclusive" "$DLM" train doc.dlm --continue --fresh
# a run killed after a checkpoint is still resumed
set +e; DLM_TEST_CRASH_AFTER_STEP=2 "$DLM" train doc.dlm --max-steps 4 -q >/dev/null 2>&1; set -e
"$DLM" train doc.dlm --max-steps 4 --resume -q > /dev/null || fail "--resume after a crash"
[ "$(cat "$S/adapter/current.txt")" = "adapter/versions/v0003" ] || fail "the resumed run did not commit v0003"
echo ok
