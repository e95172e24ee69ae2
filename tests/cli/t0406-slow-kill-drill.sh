#!/usr/bin/env bash
# Kill drill: `kill -9` at random moments of `dlm train` (loading, steps,
# checkpoint writes, the version commit, replay and metrics writes) and of
# `dlm export`. After each kill: `dlm show` reads the store and the manifest
# parses (else: a corrupted store); the interrupted command is rerun with no
# manual step (train with --resume when a checkpoint was kept) and must
# complete; the adapter it commits (or exports) must equal the bytes of an
# uninterrupted run (else: a resume that differed); no temp file of a dead
# process may remain. Prints the figure docs/reliability.md reports.
#
# DLM_KILL_DRILLS=N sets the number of drills (default 16: about 2 minutes
# on 2 cores; the issue's campaign is 200). A quarter are export drills.
# Label `slow` (ctest -LE slow skips it).
set -euo pipefail
. "$DLM_SRC/tests/cli/lib.sh"
PY=/usr/bin/python3
N=${DLM_KILL_DRILLS:-16}
write_tiny_doc doc.dlm
STEPS=12
S="$DLM_HOME/store/$ID"
sha() { sha256sum "$1" | cut -c1-64; }
now_ms() { date +%s%3N; }
cur() { sed -n 's|^adapter/versions/\(v[0-9]*\)$|\1|p' "$S/adapter/current.txt" 2>/dev/null; }
leftovers() { find "$S" \( -name '*.tmp.*' -o -name '*.tmp-*' \) 2>/dev/null | wc -l; }

# the uninterrupted references (their wall time sets the kill window)
t0=$(now_ms)
DLM_HOME="$T/ref" "$DLM" train doc.dlm --max-steps $STEPS -q > /dev/null
t_train=$(( $(now_ms) - t0 ))
want=$(sha "$T/ref/store/$ID/adapter/versions/v0001/adapter_model.safetensors")
t0=$(now_ms)
DLM_HOME="$T/ref" "$DLM" export doc.dlm --target gguf --quant Q8_0 -q > /dev/null
t_export=$(( $(now_ms) - t0 ))
want_a=$(sha "$T/ref/store/$ID/exports/Q8_0/adapter.gguf")
want_b=$(sha "$T/ref/store/$ID/exports/Q8_0/base.Q8_0.gguf")
t0=$(now_ms)
"$DLM" train doc.dlm --max-steps $STEPS -q > /dev/null   # a first version, so export has one
t1=$(( $(now_ms) - t0 ))
# the kill window: the shorter of two timings (a cold or loaded first run
# would make most kills land after the end)
[ $t1 -lt $t_train ] && t_train=$t1

RANDOM=$(( $$ % 32768 ))
corrupt=0 differ=0 rerun_failed=0 killed=0 dirty=0 resumed=0 n_train=0 n_export=0
for i in $(seq 1 "$N"); do
    if [ $((i % 4)) -eq 0 ]; then kind=export; win=$t_export; else kind=train; win=$t_train; fi
    ms=$(( (RANDOM * 32768 + RANDOM) % (win + 1) ))
    if [ $kind = train ]; then
        n_train=$((n_train + 1))
        "$DLM" train doc.dlm --max-steps $STEPS -q > /dev/null 2>&1 &
    else
        n_export=$((n_export + 1))
        "$DLM" export doc.dlm --target gguf --quant Q8_0 -q > /dev/null 2>&1 &
    fi
    pid=$!
    sleep "$(printf '%d.%03d' $((ms / 1000)) $((ms % 1000)))"
    if kill -KILL "$pid" 2>/dev/null; then killed=$((killed + 1)); fi
    wait "$pid" 2>/dev/null || true
    # the store must read
    if ! "$DLM" show doc.dlm --json > show.json 2> show.err ||
       ! $PY -c 'import json,sys; json.load(open(sys.argv[1]))' "$S/manifest.json" 2>/dev/null; then
        corrupt=$((corrupt + 1))
        echo "drill $i ($kind, kill at ${ms} ms): the store does not read: $(cat show.err)" >&2
        continue
    fi
    # rerun with no manual step
    if [ $kind = train ]; then
        if ls "$S/adapter/checkpoints" 2>/dev/null | grep -q '^step-'; then
            resumed=$((resumed + 1))
            cmd=(train doc.dlm --max-steps $STEPS --resume -q)
        else
            cmd=(train doc.dlm --max-steps $STEPS -q)
        fi
    else
        cmd=(export doc.dlm --target gguf --quant Q8_0 -q)
    fi
    if ! "$DLM" "${cmd[@]}" > rerun.out 2>&1; then
        rerun_failed=$((rerun_failed + 1))
        echo "drill $i ($kind, kill at ${ms} ms): 'dlm ${cmd[*]}' failed: $(cat rerun.out)" >&2
        continue
    fi
    if [ $kind = train ]; then
        v=$(cur)
        if [ -z "$v" ] || [ "$(sha "$S/adapter/versions/$v/adapter_model.safetensors")" != "$want" ]; then
            differ=$((differ + 1))
            echo "drill $i (train, kill at ${ms} ms): $v differs from the uninterrupted run" >&2
        fi
        # keep the store small: drop all but the current version
        for d in "$S"/adapter/versions/v*; do [ "$(basename "$d")" = "$v" ] || rm -rf "$d"; done
    else
        if [ "$(sha "$S/exports/Q8_0/adapter.gguf")" != "$want_a" ] ||
           [ "$(sha "$S/exports/Q8_0/base.Q8_0.gguf")" != "$want_b" ]; then
            differ=$((differ + 1))
            echo "drill $i (export, kill at ${ms} ms): the export differs from the uninterrupted one" >&2
        fi
    fi
    l=$(leftovers)
    if [ "$l" -ne 0 ]; then
        dirty=$((dirty + 1))
        echo "drill $i ($kind, kill at ${ms} ms): $l temp files left: $(find "$S" -name '*.tmp*' | head -3)" >&2
    fi
done
echo "kill drill: $N drills ($n_train train, $n_export export; $killed killed mid-command, $resumed resumed from a checkpoint): corrupted stores $corrupt, resumes that differed $differ, reruns that failed $rerun_failed, temp leftovers $dirty"
[ $corrupt -eq 0 ] && [ $differ -eq 0 ] && [ $rerun_failed -eq 0 ] && [ $dirty -eq 0 ] || fail "the drill found damage"
[ $killed -ge $((N / 4)) ] || fail "only $killed of $N kills landed mid-command"
echo "ok"
