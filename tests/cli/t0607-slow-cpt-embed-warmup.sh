#!/usr/bin/env bash
# training.cpt on the embedded tiny base (run/cpt.h), part 2 (the schedule: t0606;
# slow: ~19 s, minutes under ASan, where t0609 runs instead):
#   - embed_warmup_steps: 3: the embeddings stay frozen (the base file's
#     sha256 is unchanged, the adapter holds LoRA tensors only, no
#     modules_to_save) while steps 1..3 report a larger gradient norm than
#     the same run without it (the embedding gradients count in the clip
#     norm) and step 1 — same weights, same batch — has the same loss;
#   - threads 1 vs 2 and kill -9 mid-warm-up + --resume give the same
#     adapter bytes (DAPT schedule and warm-up on).
set -euo pipefail
. "$DLM_SRC/tests/cli/lib.sh"
. "$DLM_SRC/tests/cli/helpers/cpt_doc.sh"
# embed warm-up: frozen embeddings, a larger clip norm in steps 1..3
doc w0.dlm "  cpt:
    schedule: dapt"
"$DLM" train w0.dlm --max-steps 8 --threads 2 -q >/dev/null 2>&1 || fail "train w0"
cp "$(lastlog)" w0.jsonl
base=$(sed -n 's/.*"model_path":"\([^"]*\)".*/\1/p' w0.jsonl | head -1)
[ -f "$base" ] || fail "no base path in the log"
b0=$(sha256sum "$base" | cut -c1-64)
doc w.dlm "  cpt:
    schedule: dapt
    embed_warmup_steps: 3"
out=$("$DLM" train w.dlm --fresh --max-steps 8 --threads 2 2>&1) || fail "train w: $out"
echo "$out" | grep -q "embed warm-up: the embedding gradients count in the clipping norm of steps 1..3" ||
    fail "no warm-up note: $out"
cp "$(lastlog)" w.jsonl
a=$(sha)
[ "$(sha256sum "$base" | cut -c1-64)" = "$b0" ] || fail "the base changed"
"$py" - w0.jsonl w.jsonl "$store/$(cur)" <<'PY' || fail "embed warm-up records"
import json, struct, sys
def steps(p):
    return [json.loads(l) for l in open(p) if '"type":"step"' in l]
s0, s1 = steps(sys.argv[1]), steps(sys.argv[2])
assert s0[0]["loss"] == s1[0]["loss"], "step 1 loss differs: the forward changed"
for k in range(3):
    assert s1[k]["grad_norm"] > s0[k]["grad_norm"] * 1.01, (k + 1, s1[k]["grad_norm"], s0[k]["grad_norm"])
cfg = json.load(open(sys.argv[3] + "/adapter_config.json"))
assert not cfg.get("modules_to_save"), cfg.get("modules_to_save")
raw = open(sys.argv[3] + "/adapter_model.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
names = [k for k in json.loads(raw[8:8 + n]) if k != "__metadata__"]
assert names and all("lora_" in k for k in names), names
run = json.load(open(sys.argv[3] + "/training_run.json"))
assert run["cpt"]["embed_warmup_steps"] == 3, run["cpt"]
PY
# threads 1: the same bytes
"$DLM" train w.dlm --fresh --max-steps 8 --threads 1 -q >/dev/null 2>&1 || fail "train w threads 1"
b=$(sha)
[ "$a" = "$b" ] || fail "threads 1 vs 2 changed the adapter: $a vs $b"
# killed after step 2 (inside the warm-up; checkpoints every 2 steps), resumed
"$DLM" train w.dlm --fresh --max-steps 8 --threads 2 -q >/dev/null 2>&1 || fail "train w again"
set +e
DLM_TEST_CRASH_AFTER_STEP=2 "$DLM" train w.dlm --max-steps 8 -q >/dev/null 2>&1
rc=$?
set -e
[ $rc -ne 0 ] || fail "the crash hook did not kill the run"
"$DLM" train w.dlm --max-steps 8 --resume -q >/dev/null 2>&1 || fail "resume"
c=$(sha)
[ "$a" = "$c" ] || fail "kill -9 + --resume differs from the uninterrupted run: $a vs $c"

echo ok
