#!/usr/bin/env bash
# training.cpt.embed_warmup_steps on the embedded tiny base (tied: one
# matrix; run/embed.c, docs/cpt.md), part 2 of t0606 (slow: ~15 s, minutes
# under ASan, where t0609 runs instead):
#   - the adapter holds PEFT's modules_to_save (adapter_config.json lists
#     embed_tokens and lm_head; the safetensors hold both f32 [V, C] under
#     get_peft_model_state_dict's names), the base file is unchanged;
#   - step 1 (same weights, same batch) has the same loss as without the
#     warm-up and a larger gradient norm (the embedding gradient counts);
#   - trained in steps 1..3, frozen after: the step-2 checkpoint's matrix
#     differs from the final one, the step-4 checkpoint's equals it;
#   - threads 1 vs 2 and kill -9 mid-warm-up + --resume give the same
#     adapter bytes;
#   - dlm export refuses the LoRA GGUF (hint: --merged) and writes the
#     merged one.
set -euo pipefail
. "$DLM_SRC/tests/cli/lib.sh"
. "$DLM_SRC/tests/cli/helpers/cpt_doc.sh"
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
out=$("$DLM" train w.dlm --same-store --fresh --max-steps 8 --threads 2 2>&1) || fail "train w: $out"
grep <<<"$out" -q "embed warm-up: steps 1..3 train the embedding and LM head (tied: one matrix)" ||
    fail "no warm-up note: $out"
cp "$(lastlog)" w.jsonl
a=$(sha)
[ "$(sha256sum "$base" | cut -c1-64)" = "$b0" ] || fail "the base changed"
"$DLM" doctor w.dlm 2>&1 | grep "cpt embed warm-up: f32 embedding/head copies, gradients, AdamW moments" >/dev/null ||
    fail "doctor's plan does not count the warm-up"
# threads 1: the same bytes
"$DLM" train w.dlm --same-store --fresh --max-steps 8 --threads 1 -q >/dev/null 2>&1 || fail "train w threads 1"
b=$(sha)
[ "$a" = "$b" ] || fail "threads 1 vs 2 changed the adapter: $a vs $b"
# killed after step 2 (inside the warm-up; checkpoints every 2 steps), resumed
set +e
DLM_TEST_CRASH_AFTER_STEP=2 "$DLM" train w.dlm --same-store --fresh --max-steps 8 -q >/dev/null 2>&1
rc=$?
set -e
[ $rc -ne 0 ] || fail "the crash hook did not kill the run"
cp "$store"/adapter/checkpoints/step-000002/embed_state.safetensors step2.st || fail "no embed state at step 2"
"$DLM" train w.dlm --same-store --max-steps 8 --resume -q >/dev/null 2>&1 || fail "resume"
c=$(sha)
[ "$a" = "$c" ] || fail "kill -9 + --resume differs from the uninterrupted run: $a vs $c"
# a run killed after step 4 (past the warm-up): its checkpoint's matrix is the final one
set +e
DLM_TEST_CRASH_AFTER_STEP=4 "$DLM" train w.dlm --same-store --fresh --max-steps 8 -q >/dev/null 2>&1
set -e
cp "$store"/adapter/checkpoints/step-000004/embed_state.safetensors step4.st || fail "no embed state at step 4"
"$py" - w0.jsonl w.jsonl "$store/$(cur)" step2.st step4.st <<'PY' || fail "embed warm-up records"
import json, struct, sys
def steps(p):
    return [json.loads(l) for l in open(p) if '"type":"step"' in l]
def st(p):
    raw = open(p, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    h = json.loads(raw[8:8 + n])
    return {k: (v, raw[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]]) for k, v in h.items()
            if k != "__metadata__"}
s0, s1 = steps(sys.argv[1]), steps(sys.argv[2])
assert s0[0]["loss"] == s1[0]["loss"], "step 1 loss differs: the forward changed"
assert s1[0]["grad_norm"] > s0[0]["grad_norm"] * 1.01, (s1[0]["grad_norm"], s0[0]["grad_norm"])
cfg = json.load(open(sys.argv[3] + "/adapter_config.json"))
assert cfg["modules_to_save"] == ["embed_tokens", "lm_head"], cfg.get("modules_to_save")
t = st(sys.argv[3] + "/adapter_model.safetensors")
E, H = "base_model.model.model.embed_tokens.weight", "base_model.model.lm_head.weight"
assert t[E][0]["dtype"] == "F32" and len(t[E][0]["shape"]) == 2, t[E][0]
assert t[H][0]["shape"] == t[E][0]["shape"] and t[H][1] == t[E][1], "tied: both names carry one matrix"
assert all("lora_" in k for k in t if k not in (E, H)), list(t)
c2, c4 = st(sys.argv[4]), st(sys.argv[5])
assert c2["embed_tokens"][1] != t[E][1], "the step-2 embedding equals the final one: steps 3 did not train it"
assert c4["embed_tokens"][1] == t[E][1], "the embedding moved after step 3"
assert "embed_tokens.exp_avg" in c2 and "lm_head" not in c2, list(c2)
run = json.load(open(sys.argv[3] + "/training_run.json"))
assert run["cpt"]["embed_warmup_steps"] == 3, run["cpt"]
PY
# export: no LoRA GGUF with whole matrices; the merged GGUF
set +e
out=$("$DLM" export w.dlm --target gguf --quant F32 2>&1)
rc=$?
set -e
[ $rc -ne 0 ] && grep <<<"$out" -q "hint: export one merged GGUF instead: dlm export w.dlm --merged" ||
    fail "unmerged export not refused: $out"
"$DLM" export w.dlm --target gguf --quant F32 --merged -q >/dev/null 2>&1 || fail "merged export"
[ -f "$store/exports/F32/merged.F32.gguf" ] || fail "no merged GGUF"
echo ok
