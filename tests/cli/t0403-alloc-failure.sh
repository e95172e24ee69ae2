#!/usr/bin/env bash
# A real allocation failure (RLIMIT_AS set below what the activations
# need, with --force past the plan) is a clean OOMError, never a crash, and
# leaves the last checkpoint intact: --resume without the limit then
# finishes the run. The limit is the peak address space of the same run
# minus half the activation slab, so only that allocation can fail.
set -euo pipefail
. "$DLM_SRC/tests/cli/lib.sh"
PY=/usr/bin/python3
S="$DLM_HOME/store/$ID"
{
    printf -- "---\ndlm_id: $ID\ndlm_version: 15\nbase_model: $FIXTURE_QWEN\ntraining:\n  sequence_len: 256\n"
    printf "  micro_batch_size: 64\n  grad_accum: 1\n  num_epochs: 2\n---\n# Long\n\n"
    $PY -c "
import random
random.seed(5)
w='alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau'.split()
print('\n\n'.join(' '.join(random.choice(w) for _ in range(700)) + '.' for _ in range(3)))"
} > doc.dlm
# what the activations take (fb's buffers) and the peak address space of a
# run that allocates them, measured on a separate store
"$DLM" doctor doc.dlm --json > plan.json
fb=$($PY -c "
import json
p = json.load(open('plan.json'))['plan']
print(sum(i['bytes'] for i in p['items'] if i['name'].startswith(('activations', 'attention', 'LM-head', 'backward'))))")
DLM_HOME="$T/probe" "$DLM" train doc.dlm --max-steps 1 -q > /dev/null
vm=$(grep -h '"type":"memory"' "$T"/probe/store/$ID/logs/*.jsonl | $PY -c "import json,sys; print(json.load(sys.stdin)['peak_vm_bytes'])")
[ "$fb" -gt $((32 << 20)) ] || fail "the activations ($fb bytes) are too small for this test"
limit_kb=$(( (vm - fb / 2) / 1024 ))

# a checkpoint at step 1 of 2, then the process dies
set +e
DLM_TEST_CRASH_AFTER_STEP=1 "$DLM" train doc.dlm -q > /dev/null 2>&1
set -e
ck="$S/adapter/checkpoints/step-000001"
[ -f "$ck/training_state.bin" ] || fail "no checkpoint at step 1"
before=$(cat "$ck"/* | sha256sum)

# --resume under the address-space limit: the activation slab cannot be had
set +e
# (under AddressSanitizer, its allocator must return NULL as malloc does
# instead of aborting; elsewhere the variable is ignored)
out=$( (ulimit -v "$limit_kb"; ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}allocator_may_return_null=1" \
        exec "$DLM" train doc.dlm --resume --force) 2>&1); rc=$?
set -e
[ $rc -eq 1 ] || fail "an allocation failure should exit 1, got $rc: $out"
grep <<<"$out" -q "OOMError" || fail "no OOMError: $out"
grep <<<"$out" -q "allocation failed" || fail "the message does not say the allocation failed: $out"
[ "$before" = "$(cat "$ck"/* | sha256sum)" ] || fail "the checkpoint changed"
[ ! -e "$S/.lock" ] || fail "the store lock was left behind"
[ -z "$(ls "$S/adapter/versions")" ] || fail "a version was committed"

# without the limit the same command finishes the run
"$DLM" train doc.dlm --resume -q > /dev/null || fail "--resume after the failure did not finish"
[ "$(cat "$S/adapter/current.txt")" = "adapter/versions/v0001" ] || fail "v0001 not committed"
echo "ok: limit ${limit_kb} KiB (peak VM $vm, activations $fb)"
