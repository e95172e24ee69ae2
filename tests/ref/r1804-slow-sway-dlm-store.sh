#!/usr/bin/env bash
# r1804: dlm-sway 0.1.0 (tests/ref/venv/orig.txt) on a store dlm trained, from
# the sway.yaml `dlm export --emit-sway-json` wrote, on r1401's base (a
# random llama under the registry key smollm2-135m):
#   - `sway run` and `sway gate` of its null_adapter, delta_kl,
#     section_internalization and adapter_ablation entries (dlm's
#     thresholds, unchanged) pass on the PEFT adapter dlm trained: the
#     adapter moved the model on the document, per section, and its
#     λ-scaled ablation curve is smooth and saturates (sway's HF backend
#     loads dlm's adapter folder with peft);
#   - gradient_ghost and training_drift, which the issue names, are not
#     probes of dlm-sway 0.1.0: sway refuses them as unknown kinds (when a
#     pinned sway has them, this fails and the test grows);
#   - `dlm harvest` reads the reports those runs wrote as the original's
#     harvest does: the green one has nothing to harvest (exit 2 both); a
#     failing probe without evidence.prompt/reference (sway 0.1.0's probes
#     write none) is an error under the default --strict (exit 1 both,
#     naming the probe) and skipped with --lax (exit 2 both).
# The full autogen battery also runs on such a store (style, calibration,
# perplexity probes: ~2.5 minutes), left out here for time.
set -euo pipefail
: "${DLM:?}" "${DLM_SRC:?}"
if ! V=$("$DLM_SRC/scripts/ref-venv.sh" orig); then
    [ "${DLM_REF_SKIP:-}" = 1 ] && exit 77
    echo "r1804: cannot make the orig venv (tests/ref/venv/orig.txt)" >&2; exit 1
fi
O="$V/bin/dlm"; PY="$V/bin/python"; SW="$V/bin/sway"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
cd "$T"
fail() { echo "FAIL: $*" >&2; exit 1; }
export HF_HOME="$T/hf" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1 DO_NOT_TRACK=1
unset HF_HUB_CACHE DLM_TINY
"$PY" "$DLM_SRC/tests/ref/orig/mkbase.py" "$DLM_SRC/tests/ref/model/fixtures/llama-bf16" "$HF_HOME" > /dev/null 2>&1 ||
    fail "cannot make the base"
export DLM_HOME="$T/h"
cat > c.dlm <<'DOC'
---
dlm_id: 01M92MPZHR0JDACWTYDQ2C1804
dlm_version: 1
base_model: smollm2-135m
training:
  sequence_len: 64
  num_epochs: 20
  micro_batch_size: 2
  grad_accum: 1
  learning_rate: 0.01
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
DOC
"$DLM" train c.dlm > train.log 2>&1 || fail "dlm train: $(cat train.log)"
"$DLM" export c.dlm --target gguf --quant F32 --emit-sway-json > exp.log 2>&1 || fail "dlm export: $(cat exp.log)"
Y=$(sed -n 's/^sway.yaml: //p' exp.log)
"$PY" - "$Y" <<'PYEOF' || fail "cannot derive the suites"
import sys, yaml
s = yaml.safe_load(open(sys.argv[1]))
keep = ("null_adapter", "delta_kl", "section_internalization", "adapter_ablation")
s["suite"] = [p for p in s["suite"] if p["kind"] in keep]
assert [p["kind"] for p in s["suite"]] == list(keep), s["suite"]
yaml.safe_dump(s, open("sub.yaml", "w"), sort_keys=False)
for kind in ("gradient_ghost", "training_drift"):
    g = dict(s, suite=s["suite"] + [{"name": kind, "kind": kind}])
    yaml.safe_dump(g, open(kind + ".yaml", "w"), sort_keys=False)
f = dict(s, suite=[dict(s["suite"][1], assert_mean_gte=0.99)])   # no null baseline: the mean decides
yaml.safe_dump(f, open("fail.yaml", "w"), sort_keys=False)
PYEOF
"$SW" run sub.yaml --json rep.json > run.log 2>&1 || fail "sway run: $(tail -20 run.log)"
"$PY" - <<'PYEOF' || fail "sway run on dlm's store: $(tail -30 run.log)"
import json
r = json.load(open("rep.json"))
v = {p["kind"]: p["verdict"] for p in r["probes"]}
assert v == {"null_adapter": "pass", "delta_kl": "pass", "section_internalization": "pass", "adapter_ablation": "pass"}, v
PYEOF
"$SW" gate sub.yaml --junit gate.xml > gate.log 2>&1 || fail "sway gate: $(tail -20 gate.log)"
grep -q 'failures="0"' gate.xml || fail "gate junit: $(cat gate.xml)"
for kind in gradient_ghost training_drift; do
    rc=0; "$SW" run $kind.yaml > $kind.log 2>&1 || rc=$?
    [ $rc != 0 ] && grep -q "unknown probe kind '$kind'" $kind.log || fail "sway 0.1.0 and $kind: rc $rc $(cat $kind.log)"
done
# dlm harvest beside the original's harvest, on the reports sway wrote
cp c.dlm o.dlm
rc=0; "$DLM" harvest c.dlm --sway-json rep.json > h1.txt 2>&1 || rc=$?
ro=0; "$O" harvest o.dlm --sway-json rep.json > oh1.txt 2>&1 || ro=$?
[ $rc = 2 ] && [ $ro = 2 ] || fail "green report: dlm rc $rc $(cat h1.txt); original rc $ro $(cat oh1.txt)"
"$SW" run fail.yaml --json frep.json > frun.log 2>&1 || fail "sway run (failing suite): $(tail -20 frun.log)"
"$PY" -c 'import json; v = [(p["kind"], p["verdict"]) for p in json.load(open("frep.json"))["probes"]]; assert v[-1] == ("delta_kl", "fail"), v' || fail "the failing suite: $(tail -20 frun.log)"
rc=0; "$DLM" harvest c.dlm --sway-json frep.json > h2.txt 2>&1 || rc=$?
ro=0; "$O" harvest o.dlm --sway-json frep.json > oh2.txt 2>&1 || ro=$?
[ $rc = 1 ] && [ $ro = 1 ] && grep -q "probe 'delta_kl_doc'" h2.txt && grep -q "probe 'delta_kl_doc'" oh2.txt ||
    fail "failing report, --strict: dlm rc $rc $(cat h2.txt); original rc $ro $(cat oh2.txt)"
rc=0; "$DLM" harvest c.dlm --sway-json frep.json --lax > h3.txt 2>&1 || rc=$?
ro=0; "$O" harvest o.dlm --sway-json frep.json --lax > oh3.txt 2>&1 || ro=$?
[ $rc = 2 ] && [ $ro = 2 ] || fail "failing report, --lax: dlm rc $rc $(cat h3.txt); original rc $ro $(cat oh3.txt)"
cmp -s c.dlm o.dlm || fail "harvest changed a document"
echo ok
