#!/usr/bin/env bash
# r1803: `dlm export --emit-sway-json` writes the sway.yaml the original
# DocumentLanguageModel writes: its export calls dlm-sway 0.1.0's
# build_spec_dict(resolve_dlm(doc), dlm_source=str(doc)) and
# yaml.safe_dump(sort_keys=False) (dlm.export.sway_json on its trunk; the
# PyPI 0.10.0 CLI predates the flag, so the test calls those two functions
# from the pinned packages, tests/ref/venv/orig.txt). Both files are read
# with yaml.safe_load and must be equal, keys in the same order, on:
#   a. prose + Q&A (delta_kl, adapter_revert, paraphrases, ablation, ...);
#   b. prose only, several paragraphs (leading-sentence prompts);
#   c. a preference section and 24 distinct questions (preference_flip,
#      cluster_kl over the first 64, the 16/8/6/4 prompt caps);
#   d. one instruction section (no section_internalization, no prose probes).
# The base is r1401's (a random llama under the registry key smollm2-135m).
set -euo pipefail
: "${DLM:?}" "${DLM_SRC:?}"
if ! V=$("$DLM_SRC/scripts/ref-venv.sh" orig); then
    [ "${DLM_REF_SKIP:-}" = 1 ] && exit 77
    echo "r1803: cannot make the orig venv (tests/ref/venv/orig.txt)" >&2; exit 1
fi
PY="$V/bin/python"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
cd "$T"
fail() { echo "FAIL: $*" >&2; exit 1; }
export HF_HOME="$T/hf" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1 DO_NOT_TRACK=1
unset HF_HUB_CACHE DLM_TINY
"$PY" "$DLM_SRC/tests/ref/orig/mkbase.py" "$DLM_SRC/tests/ref/model/fixtures/llama-bf16" "$HF_HOME" > /dev/null 2>&1 ||
    fail "cannot make the base"
export DLM_HOME="$T/h"
head() {
    printf -- '---\ndlm_id: 01M92MPZHR0JDACWTYDQ2C18%s\ndlm_version: 1\nbase_model: smollm2-135m\ntraining:\n  sequence_len: 64\n  num_epochs: 1\n  micro_batch_size: 2\n---\n' "$1"
}
{ head 0A; printf '# Capitals\n\nParis is the capital of France. Berlin is the capital of Germany.\n\n::instruction::\n### Q\nWhat is the capital of France?\n### A\nParis.\n\n### Q\nIs Berlin big...?  \n### A\nYes. Very.\n'; } > a.dlm
{ head 0B; printf 'First paragraph has no period at all\n\n::instruction::\n### Q\nQ one?\n### A\nA one.\n\n::prose::\n  Second: "quoted" text, with: colons. And more.\n\n::prose::\n\n...\n'; } > b.dlm
{ head 0C; printf 'Some prose. More.\n\n::preference::\n### Prompt\nSay hi.\n### Chosen\nHi!\n### Rejected\nGo away.\n\n::instruction::\n'
  for i in $(seq 1 24); do printf '### Q\nQuestion number %d about topic %d?\n### A\nAnswer %d.\n\n' "$i" "$i" "$i"; done; } > c.dlm
{ head 0D; printf '::instruction::\n### Q\nOnly question?\n### A\nOnly answer.\n'; } > d.dlm
for f in a b c d; do
    "$DLM" train $f.dlm --max-steps 1 > t-$f.log 2>&1 || fail "dlm train $f: $(cat t-$f.log)"
    "$DLM" export $f.dlm --target gguf --quant F32 --emit-sway-json > e-$f.log 2>&1 || fail "dlm export $f: $(cat e-$f.log)"
    Y=$(sed -n 's/^sway.yaml: //p' e-$f.log)
    [ "$Y" = "$DLM_HOME/store/01M92MPZHR0JDACWTYDQ2C180${f^^}/exports/F32/sway.yaml" ] && [ -s "$Y" ] ||
        fail "$f: no sway.yaml in the export folder: $(cat e-$f.log)"
    "$PY" - "$f.dlm" "$Y" <<'PYEOF' || fail "$f: dlm's sway.yaml differs from the original's"
import sys, yaml
from pathlib import Path
from dlm_sway.integrations.dlm.autogen import build_spec_dict
from dlm_sway.integrations.dlm.resolver import resolve_dlm
p = Path(sys.argv[1]).expanduser().resolve()
want = yaml.safe_load(yaml.safe_dump(build_spec_dict(resolve_dlm(p), dlm_source=str(p)), sort_keys=False))
got = yaml.safe_load(open(sys.argv[2]))
def keys(x):   # the key order, everywhere
    if isinstance(x, dict): return [(k, keys(v)) for k, v in x.items()]
    if isinstance(x, list): return [keys(v) for v in x]
    return None
if got != want or keys(got) != keys(want):
    for k in want:
        if got.get(k) != want[k]: print("key", k, "\n  dlm:     ", got.get(k), "\n  original:", want[k])
    sys.exit(1)
assert want["models"]["ft"]["adapter"], want["models"]
print(sys.argv[1], " ".join(s["kind"] for s in want["suite"]))
PYEOF
done > kinds.txt
grep -q "^c.dlm .*preference_flip.*cluster_kl adapter_ablation$" kinds.txt && grep -q "^d.dlm null_adapter delta_kl adapter_revert prompt_collapse paraphrase_invariance style_fingerprint calibration_drift adapter_ablation$" kinds.txt ||
    fail "the documents do not reach the probes they are for: $(cat kinds.txt)"
echo ok
