#!/usr/bin/env bash
# dlm train --phase: the preference phase (DPO/ORPO) on the fixture base.
#   errors: PriorAdapterRequiredError, NoPreferenceContentError, the note for
#   disabled sections; --phase all commits two versions and names both;
#   same seed → same bytes with --threads 1 and 2; kill -9 during the
#   preference phase then --resume → the uninterrupted bytes (the reference
#   log-probs come from the checkpoint); the version prompts; metrics rows
#   carry phase = dpo and the rewards; ORPO and the base reference train.
set -euo pipefail
. "$DLM_SRC/tests/cli/lib.sh"
pref_doc() { # FILE [EXTRA-PREFERENCE-YAML] [with-sections=1]
    cat > "$1" <<DOC
---
dlm_id: $ID
dlm_version: 15
base_model: $FIXTURE_QWEN
training:
  sequence_len: 96
  num_epochs: 2
  learning_rate: 0.005
  lora_dropout: 0.1
  micro_batch_size: 2
  grad_accum: 1
  save_steps: 2
  preference:
    hyperparams: {beta: 0.1, learning_rate: 0.001, num_epochs: 3}
${2:-}
---
Paris is the capital of France.

::instruction::
### Q
What is the capital of France?
### A
Paris.
DOC
    [ "${3:-1}" = 1 ] || return 0
    cat >> "$1" <<'DOC'

::preference::
### Prompt
Capital of France?
### Chosen
Paris [1].
### Rejected
Lyon.

### Prompt
Capital of Spain?
### Chosen
Madrid [2].
### Rejected
Seville.

### Prompt
Capital of Italy?
### Chosen
Rome [3].
### Rejected
Milan.
DOC
}
sha() { sha256sum "$DLM_HOME/store/$ID/adapter/versions/$1/adapter_model.safetensors" | cut -c1-64; }
expect_fail() { # KIND CMD...: exit 1 and the kind and a hint on stderr
    local kind=$1; shift
    set +e
    out=$("$@" 2>&1)
    rc=$?
    set -e
    [ $rc -eq 1 ] || fail "$* should exit 1, got $rc: $out"
    grep -q "$kind" <<<"$out" || fail "no $kind: $out"
    grep -q "hint:" <<<"$out" || fail "no hint with $kind: $out"
}

# --phase preference before any SFT version (reference: pre_adapter)
pref_doc a.dlm
expect_fail PriorAdapterRequiredError "$DLM" train a.dlm --phase preference
grep -q -- "--phase sft" <<<"$out" || fail "PriorAdapterRequiredError does not name --phase sft: $out"
# preference sections only, --phase all: the SFT phase has nothing, so the
# hint names the reference that needs no version, not --phase sft
pref_doc p.dlm "    enabled: true"
python3 - p.dlm "$ID" <<'PY'
import sys
t = open(sys.argv[1]).read()
head, rest = t.split("\n---\n", 1)
rest = rest[rest.index("::preference::"):]
open(sys.argv[1], "w").write(head.replace(sys.argv[2], "01JD0000000000000000000205") + "\n---\n" + rest)
PY
expect_fail PriorAdapterRequiredError "$DLM" train p.dlm
grep -q "p.dlm has no prose or Q/A for an SFT version to be the DPO reference: set training.preference.reference: base" \
    <<<"$out" || fail "preference-only --phase all: $out"
# no preference sections
pref_doc n.dlm "" 0
expect_fail NoPreferenceContentError "$DLM" train n.dlm --same-store --phase preference
# bad --phase
set +e; "$DLM" train a.dlm --phase dpo >/dev/null 2>&1; rc=$?; set -e
[ $rc -eq 2 ] || fail "--phase dpo should be a usage error (2), got $rc"
rm -rf "$DLM_HOME"

# sections present but disabled: a note naming the frontmatter line, one version
pref_doc d.dlm "    enabled: false"
out=$("$DLM" train d.dlm 2>&1)
grep -q "enabled: true" <<<"$out" || fail "no note about disabled preference sections: $out"
[ "$(ls "$DLM_HOME/store/$ID/adapter/versions")" = v0001 ] || fail "disabled preference trained a second version"
rm -rf "$DLM_HOME"

# doctor plans both phases and says which
"$DLM" doctor a.dlm > doc.txt
grep -q "phase sft" doc.txt || fail "doctor does not name the SFT phase"
grep -q "phase preference (dpo): 3 pairs, 2 sequences per pair" doc.txt || fail "doctor does not plan the DPO phase: $(cat doc.txt)"
grep -q "preference: reference log-probs" doc.txt || fail "doctor's preference plan lacks the reference buffers"
"$DLM" doctor a.dlm --json | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["preference"]["pairs"] == 3 and d["preference_plan"]["total_bytes"] > 0, d["preference"]' \
    || fail "doctor --json has no preference plan"
out=$("$DLM" doctor d.dlm) || true
grep -q "phase preference: not planned" <<<"$out" || fail "doctor does not say the disabled phase is skipped"

# --phase all: two versions, the last line names both
out=$("$DLM" train a.dlm --threads 2 2>/dev/null)
grep -q "trained v0001 (sft" <<<"$out" || fail "final line does not name the SFT version: $out"
grep -q "v0002 (dpo" <<<"$out" || fail "final line does not name the DPO version: $out"
a=$(sha v0002)
log=$(ls "$DLM_HOME"/store/$ID/logs/train-000002-*.jsonl)
grep -q '"rewards/margins"' "$log" || fail "no rewards/margins in the DPO log"
grep -q '"rewards/accuracies"' "$log" || fail "no rewards/accuracies in the DPO log"
"$DLM" metrics a.dlm --runs --phase dpo --json > runs.json
"$DLM" metrics a.dlm --phase dpo --json > steps.json
"$DLM" metrics a.dlm --runs --phase sft --json > sft.json
python3 - runs.json steps.json sft.json "$log" <<'PY' || fail "metrics --phase dpo"
import json, sys
runs, steps, sft = (json.load(open(p)) for p in sys.argv[1:4])
assert len(runs) == 1 and runs[0]["phase"] == "dpo" and runs[0]["status"] == "completed", runs
assert len(sft) == 1 and sft[0]["phase"] == "sft", sft
assert steps and all(str(s["run_id"]) == str(runs[0]["run_id"]) for s in steps), steps
log = [json.loads(l) for l in open(sys.argv[4]) if '"type":"step"' in l]
assert len(log) == len(steps), (len(log), len(steps))
for a, b in zip(log, steps):   # SQLite rows = the JSONL rows
    for k in ("rewards/chosen", "rewards/rejected", "rewards/margins", "rewards/accuracies", "loss"):
        assert abs(float(a[k]) - float(b[k])) <= 1e-12 * max(1, abs(float(a[k]))), (k, a[k], b[k])
    assert abs(a["rewards/margins"] - (a["rewards/chosen"] - a["rewards/rejected"])) < 1e-12
PY
"$DLM" prompt a.dlm "Capital of France?" --temp 0 -n 4 --json | python3 -c 'import json,sys; v=json.load(sys.stdin)["adapter_version"]; assert v == 2, v' \
    || fail "prompt does not use the preference version"
out=$("$DLM" export a.dlm --target gguf --quant Q8_0)
grep -q "adapter v0002" <<<"$out" || fail "export does not take the DPO version: $out"
[ -f "$DLM_HOME/store/$ID/exports/Q8_0/adapter.gguf" ] || fail "no adapter.gguf for the DPO version"
python3 -c 'import json,sys; t=json.load(open(sys.argv[1])); assert t["phase"] == "dpo", t["phase"]' \
    "$DLM_HOME/store/$ID/adapter/versions/v0002/training_run.json" || fail "training_run.json phase"

# same seed, --threads 1: the same bytes (SFT and DPO again as v0003/v0004)
"$DLM" train a.dlm --fresh --threads 1 -q >/dev/null 2>&1
b=$(sha v0004)
[ "$a" = "$b" ] || fail "threads 1 vs 2 changed the DPO adapter: $a vs $b"

# kill -9 after DPO step 2 (its checkpoint), then --resume: the same bytes
set +e
DLM_TEST_CRASH_AFTER_STEP=100 "$DLM" train a.dlm --phase sft -q >/dev/null 2>&1
DLM_TEST_CRASH_AFTER_STEP=2 "$DLM" train a.dlm --phase preference -q >/dev/null 2>&1
rc=$?
set -e
[ $rc -ne 0 ] || fail "the crash hook did not kill the preference run"
ck="$DLM_HOME/store/$ID/adapter/checkpoints/step-000002"
[ -f "$ck/reference_logps.json" ] || fail "no reference log-probs in the checkpoint"
rm -f "$DLM_HOME/store/$ID/.lock"
"$DLM" train a.dlm --resume -q >/dev/null 2>&1
c=$(sha v0006)
[ "$a" = "$c" ] || fail "resumed DPO differs from the uninterrupted one: $a vs $c"
# a damaged reference file in the checkpoint: refused with a hint, never recomputed silently
set +e
DLM_TEST_CRASH_AFTER_STEP=2 "$DLM" train a.dlm --phase preference -q >/dev/null 2>&1
set -e
rm -f "$DLM_HOME/store/$ID/.lock"
python3 - "$ck/reference_logps.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); d["chosen"] = d["chosen"][:-1]; json.dump(d, open(sys.argv[1], "w"))
PY
expect_fail ResumeIntegrityError "$DLM" train a.dlm --resume
# --phase sft --resume on a preference checkpoint names the right phase
expect_fail ResumeIntegrityError "$DLM" train a.dlm --phase sft --resume
grep -q -- "--phase preference" <<<"$out" || fail "the phase mismatch does not name --phase preference: $out"
"$DLM" train a.dlm --phase preference --fresh -q >/dev/null 2>&1 || fail "--fresh after a damaged checkpoint"

# ORPO and the base reference train and commit
rm -rf "$DLM_HOME"
pref_doc o.dlm "    method: orpo"
rm -rf "$DLM_HOME"
pref_doc o.dlm "    method: orpo"
out=$("$DLM" train o.dlm 2>/dev/null)
grep -q "v0002 (orpo" <<<"$out" || fail "ORPO did not commit: $out"
rm -rf "$DLM_HOME"
pref_doc b.dlm "    reference: base
    loss_type: ipo"
out=$("$DLM" train b.dlm --phase preference 2>/dev/null)
grep -q "v0001 (dpo" <<<"$out" || fail "DPO against the base without a prior version did not train: $out"
echo "ok: $a"
