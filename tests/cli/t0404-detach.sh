#!/usr/bin/env bash
# Runs that survive: a detached run outlives the shell that started it (own
# session, SIGHUP ignored), reports through its heartbeat (`dlm status`),
# is cancelled by SIGTERM after a checkpoint (exit record "cancelled", 130),
# and `--resume` then ends with the adapter bytes of an uninterrupted run.
# Also: SIGKILL → "died"; a second SIGTERM → stops at once (143);
# `status --watch` and `logs -f` end with the run.
set -euo pipefail
. "$DLM_SRC/tests/cli/lib.sh"
PY=/usr/bin/python3
write_doc doc.dlm 40
S="$DLM_HOME/store/$ID"
sha() { sha256sum "$1/store/$ID/adapter/versions/$2/adapter_model.safetensors" | cut -c1-64; }
st() { "$DLM" status doc.dlm --json | $PY -c "import json,sys; d=json.load(sys.stdin); print(eval(sys.argv[1]))" "$1"; }
wait_for() { # wait_for PYTHON-CONDITION-ON-d SECONDS
    local i
    for i in $(seq 1 $(( $2 * 10 ))); do
        [ "$(st "$1")" = True ] && return 0
        sleep 0.1
    done
    fail "timed out waiting for $1: $("$DLM" status doc.dlm)"
}

# the uninterrupted reference, in its own home
DLM_HOME="$T/ref" "$DLM" train doc.dlm --max-steps 40 -q > /dev/null
want=$(sha "$T/ref" v0001)
[ "$(st "d['state']")" = none ] || fail "status before any run should be none"

# 1. started from a shell that exits at once
DLM_TEST_STEP_DELAY_MS=150 bash -c '"$0" train doc.dlm --detach --max-steps 40 > launch.out 2>&1' "$DLM"
grep -q "training in the background: run 1" launch.out || fail "no launch line: $(cat launch.out)"
pid=$(cat "$S/run/run.pid")
kill -0 "$pid" 2>/dev/null || fail "the detached run is not alive after its shell exited"
[ "$(ps -o sid= -p "$pid" | tr -d ' ')" != "$(ps -o sid= -p $$ | tr -d ' ')" ] || fail "the run shares our session"
[ "$(ps -o sid= -p "$pid" | tr -d ' ')" != "$pid" ] || fail "the run is a session leader (could take a terminal)"
kill -HUP "$pid"                               # a hangup does not stop it
wait_for "d['state'] == 'running' and d['step'] >= 4" 20
[ "$(st "d['detached'] and d['phase'] in ('training', 'evaluating', 'saving') and d['total'] == 40")" = True ] ||
    fail "heartbeat fields: $("$DLM" status doc.dlm --json)"
[ "$(st "d['loss'] > 0 and d['tokens_per_sec'] > 0 and d['heartbeat_age_s'] < 10 and d['eta_s'] > 0")" = True ] ||
    fail "heartbeat numbers: $("$DLM" status doc.dlm --json)"
[ "$(st "d['lock']['pid'] == $pid and d['lock']['command'] == 'train' and d['lock']['alive'] and d['lock']['kernel']")" = True ] ||
    fail "status does not show the run's store lock: $("$DLM" status doc.dlm --json)"
log=$(st "d['log']")
[ -f "$log" ] || fail "the heartbeat names no log"
"$DLM" status doc.dlm | grep "running" >/dev/null || fail "text status does not say running"

# 2. SIGTERM: the step ends, a checkpoint is written, the exit record says cancelled
kill -TERM "$pid"
wait_for "d['state'] == 'finished'" 20
[ "$(st "d['status']")" = cancelled ] || fail "status after SIGTERM: $("$DLM" status doc.dlm --json)"
[ "$(st "d['exit_code']")" = 130 ] || fail "exit code after SIGTERM should be 130"
step=$(st "d['step']")
[ -d "$S/adapter/checkpoints/step-$(printf %06d "$step")" ] || fail "no checkpoint at step $step"
for i in $(seq 1 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
! kill -0 "$pid" 2>/dev/null || fail "the run is still alive after its exit record"
"$DLM" logs doc.dlm | grep "cancelled after step $step" >/dev/null || fail "the console log lacks the cancel line"
"$DLM" logs doc.dlm --jsonl | grep '"type":"run_cancelled"' >/dev/null || fail "the JSONL log lacks run_cancelled"

# 3. --resume finishes with the bytes of the uninterrupted run
"$DLM" train doc.dlm --resume --max-steps 40 -q > /dev/null
[ "$(sha "$DLM_HOME" v0001)" = "$want" ] || fail "resumed adapter differs from the uninterrupted one"
[ "$(st "d['state'] + ' ' + d['status'] + ' ' + str(d['version'])")" = "finished completed 1" ] ||
    fail "status after the resume: $("$DLM" status doc.dlm --json)"

# 4. SIGKILL leaves no exit record: "died"
DLM_TEST_STEP_DELAY_MS=100 "$DLM" train doc.dlm --detach --max-steps 40 > /dev/null 2>&1
pid=$(cat "$S/run/run.pid")
wait_for "d['state'] == 'running' and d['step'] >= 2" 20
kill -KILL "$pid"
wait_for "d['state'] == 'died'" 10
"$DLM" status doc.dlm | grep "died" >/dev/null || fail "text status does not say died"
[ "$(st "d['stale_lock']")" = None ] || fail "a kernel-released lock is not stale: $("$DLM" status doc.dlm --json)"
ck=$(st "d['checkpoint_step']")
if [ "$ck" = None ]; then
    "$DLM" status doc.dlm | grep "died before its first checkpoint" >/dev/null || fail "status claims a checkpoint: $("$DLM" status doc.dlm)"
else
    "$DLM" status doc.dlm | grep "its checkpoint at step $ck is kept" >/dev/null || fail "status: $("$DLM" status doc.dlm)"
fi

# 5. a second SIGTERM stops at once, recorded as cancelled with 128+15
# (steps of 2 s: the second signal lands in the same step however slow
# the machine is)
DLM_TEST_STEP_DELAY_MS=2000 "$DLM" train doc.dlm --detach --fresh --max-steps 40 > /dev/null 2>&1
pid=$(cat "$S/run/run.pid")
wait_for "d['state'] == 'running' and d['step'] >= 1" 20
kill -TERM "$pid"
sleep 0.1
kill -TERM "$pid"
wait_for "d['state'] == 'finished'" 10
[ "$(st "d['status'] + ' ' + str(d['exit_code'])")" = "cancelled 143" ] || fail "second signal: $("$DLM" status doc.dlm --json)"
st "d['message']" | grep -q "second signal" || fail "the exit record does not say why"

# 5b. killed before its first checkpoint: status must not claim one, and
# the next train proceeds (no manual step) and says where it died
DLM_TEST_STEP_DELAY_MS=800 "$DLM" train doc.dlm --detach --fresh --max-steps 40 > /dev/null 2>&1
pid=$(cat "$S/run/run.pid")
wait_for "d['state'] == 'running' and d['step'] >= 1" 20
kill -KILL "$pid"
wait_for "d['state'] == 'died'" 10
[ "$(st "d['checkpoint_step']")" = None ] || fail "a checkpoint before step 10? $("$DLM" status doc.dlm --json)"
"$DLM" status doc.dlm | grep "died before its first checkpoint: nothing to resume" >/dev/null || fail "status: $("$DLM" status doc.dlm)"
! "$DLM" status doc.dlm | grep -- "--resume" >/dev/null || fail "status names --resume with no checkpoint"

# 6. status --watch and logs -f follow a run to its end
DLM_TEST_STEP_DELAY_MS=50 "$DLM" train doc.dlm --detach --fresh --max-steps 15 > /dev/null 2>&1
timeout 60 "$DLM" status doc.dlm --watch --json --interval 0.2 > watch.jsonl &
w=$!
timeout 60 "$DLM" logs doc.dlm -f > follow.txt || fail "logs -f did not end with the run"
wait $w || fail "status --watch did not end with the run"
tail -1 watch.jsonl | $PY -c "import json,sys; d=json.load(sys.stdin); assert d['state']=='finished' and d['status']=='completed', d"
[ "$(wc -l < watch.jsonl)" -ge 2 ] || fail "status --watch reported only once"
grep -q "trained v0002" follow.txt || fail "logs -f stopped before the end: $(tail -3 follow.txt)"
echo "ok: $want"
