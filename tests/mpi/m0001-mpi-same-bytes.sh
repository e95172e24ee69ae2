#!/usr/bin/env bash
# Data-parallel training over MPI (docs/mpi.md), loopback only, on the small
# random base (fixture qwen2-f32), 2 ranks × 1 thread:
#   - `mpirun -np 2` with grad_accum 1 vs one process with grad_accum 2:
#     identical adapter bytes (sha256sum), LoRA and DoRA; dlm.lock says
#     world_size 2 (python3 json);
#   - `dlm doctor --ranks 2` plans grad_accum gradient buffers per rank;
#   - a 2-rank run whose rank 1 is killed (SIGKILL) after step 4: the job
#     ends non-zero with an error, the checkpoint at step 4 is intact, and
#     one process resumes it (N = 2 → 1) to the uninterrupted bytes.
# Registered only in an MPI build (cmake -DDLM_MPI=ON); skips (77) without
# mpirun only when DLM_REF_SKIP=1.
set -euo pipefail
. "$DLM_SRC/tests/cli/lib.sh"
MPIEXEC=${MPIEXEC:-mpirun}
if ! command -v "$MPIEXEC" >/dev/null || ! "$DLM" --version | grep "^mpi: yes" >/dev/null; then
    [ "${DLM_REF_SKIP:-}" = 1 ] && exit 77
    fail "needs mpirun (openmpi-bin) and an MPI build of dlm (make mpi)"
fi
# loopback: shared memory between the two local ranks, no network
mpi() { timeout 300 "$MPIEXEC" --oversubscribe --allow-run-as-root --mca btl self,vader \
        --mca btl_vader_single_copy_mechanism none -np "$@"; }

# doc FILE GRAD_ACCUM ADAPTER: prose + 6 Q/A pairs, micro_batch_size 1
doc() {
    cat > "$1" <<DOC
---
dlm_id: $ID
dlm_version: 15
base_model: $FIXTURE_QWEN
training:
  adapter: $3
  sequence_len: 64
  num_epochs: 4
  learning_rate: 0.005
  lora_dropout: 0.1
  micro_batch_size: 1
  grad_accum: $2
---
# Capitals

Paris is the capital of France. Berlin is the capital of Germany.

::instruction::
### Q
What is the capital of France?
### A
Paris.

### Q
What is the capital of Germany?
### A
Berlin.

### Q
What is the capital of Spain?
### A
Madrid.

### Q
What is the capital of Italy?
### A
Rome.

### Q
What is the capital of Portugal?
### A
Lisbon.

### Q
What is the capital of Austria?
### A
Vienna.
DOC
}
sha() { sha256sum "$1/store/$ID/adapter/versions/v0001/adapter_model.safetensors" | cut -c1-64; }

for ad in lora dora; do
    doc "one-$ad.dlm" 2 $ad
    doc "two-$ad.dlm" 1 $ad
    DLM_HOME="$T/one-$ad" "$DLM" train "one-$ad.dlm" --threads 1 -q >/dev/null
    DLM_HOME="$T/two-$ad" mpi 2 "$DLM" train "two-$ad.dlm" --threads 1 -q >/dev/null
    a=$(sha "$T/one-$ad") b=$(sha "$T/two-$ad")
    [ "$a" = "$b" ] || fail "$ad: 2 ranks × grad_accum 1 differ from 1 process × grad_accum 2: $b vs $a"
    # the run really took 2 micro-batches per step (else the check is empty)
    grep -q '"grad_accum":2' "$T/two-$ad"/store/$ID/logs/train-*.jsonl || fail "$ad: the 2-rank run did not log grad_accum 2"
    python3 - "$T/two-$ad/store/$ID/dlm.lock" "$T/one-$ad/store/$ID/dlm.lock" <<'PY' || fail "$ad: dlm.lock world_size"
import json, sys
assert json.load(open(sys.argv[1]))["world_size"] == 2
assert json.load(open(sys.argv[2]))["world_size"] == 1
PY
    echo "ok $ad: $a"
done

# doctor --ranks 2: one rank keeps each of its grad_accum micro-batch gradients
DLM_HOME="$T/doctor" "$DLM" doctor one-lora.dlm --ranks 2 --json 2>/dev/null | python3 -c '
import json, sys
p = json.load(sys.stdin)["plan"]
it = {i["name"]: i["bytes"] for i in p["items"]}
assert p["grad_accum"] == 2 and it["micro-batch gradients"] == 2 * it["gradients"], (p["grad_accum"], it)
' || fail "doctor --ranks 2 does not plan 2 micro-batch gradients per rank"

# kill rank 1 after step 7 (a checkpoint every total/4 = 4 steps: the one at
# step 4 must be intact), then resume on 1 process
ref=$(sha "$T/one-lora")
export DLM_HOME="$T/kill"
set +e
out=$(DLM_TEST_CRASH_AFTER_STEP=7 DLM_TEST_CRASH_RANK=1 DLM_TEST_STEP_DELAY_MS=200 \
      mpi 2 "$DLM" train two-lora.dlm --threads 1 -q 2>&1)
rc=$?
set -e
[ $rc -ne 0 ] || fail "a killed rank did not end the job: $out"
grep <<<"$out" -q "rank 1 .*exited on signal 9" || fail "no clear error when a rank died: $out"
ck="$DLM_HOME/store/$ID/adapter/checkpoints"
[ -d "$ck/step-000004" ] || fail "no checkpoint at step 4 after the kill: $(ls "$ck" 2>&1)"
[ ! -e "$ck/step-000008" ] || fail "a checkpoint after the kill"
[ ! -e "$DLM_HOME/store/$ID/adapter/versions/v0001" ] || fail "the killed job committed a version"
"$DLM" train two-lora.dlm --threads 1 --resume -q >/dev/null
c=$(sha "$DLM_HOME")
[ "$c" = "$ref" ] || fail "2 ranks killed, resumed on 1 process: $c, uninterrupted: $ref"
echo "$out" | sed -n '1,3p'
echo "ok kill + resume 2 -> 1: $c"
