#!/usr/bin/env bash
# No frontmatter key is silently ignored: each key that dlm parses but does
# not act on yet gives a note when a document sets it (train prints it and
# still trains), paged_adamw_8bit says that it trains as adamw_bnb_8bit, and
# galore_adamw* is refused at parse time with file:line and the reason.
set -euo pipefail
. "$DLM_SRC/tests/cli/lib.sh"
doc() { # doc FILE 'YAML lines under training:'
    cat > "$1" <<DOC
---
dlm_id: $ID
dlm_version: 15
base_model: tiny
training:
  sequence_len: 64
$2
---
The quick brown fox jumps over the lazy dog. Paris is the capital of France.
DOC
}
check() { # check 'YAML' KEY
    doc k.dlm "$1"
    out=$("$DLM" train k.dlm --max-steps 1 2>&1) || fail "train with $2: $out"
    grep <<<"$out" -q "^dlm: warning: note: training.$2: " || fail "no note for training.$2: $out"
    grep <<<"$out" -q "^trained v" || fail "train with $2 did not train: $out"
}
check "  optimizer: paged_adamw_8bit" optimizer
grep <<<"$out" -q "note: training.optimizer: paged_adamw_8bit trains as adamw_bnb_8bit .*dlm trains on the CPU" ||
    fail "paged_adamw_8bit: the note does not say why paging is not used: $out"
# adamw_bnb_8bit acts (8-bit moments, tests/cli/t0413): no note
doc k.dlm "  optimizer: adamw_bnb_8bit"
out=$("$DLM" train k.dlm --max-steps 1 2>&1) || fail "train with adamw_bnb_8bit: $out"
grep <<<"$out" -q "note: training" && fail "adamw_bnb_8bit got a note: $out"
# training.precision acts now (run/precision.h; t0411): no inert note, the precision line
doc k.dlm "  precision: bf16"
out=$("$DLM" train k.dlm --max-steps 1 2>&1) || fail "train with precision: $out"
grep <<<"$out" -q "note: training.precision" && fail "training.precision still noted as inert: $out"
grep <<<"$out" -q "^precision: bf16" || fail "no precision line: $out"
# training.cpt acts now (run/cpt.h; t0606): no inert note, the DAPT note
doc k.dlm "  cpt:
    schedule: dapt"
out=$("$DLM" train k.dlm --max-steps 1 2>&1) || fail "train with cpt: $out"
grep <<<"$out" -q "note: training.cpt" && fail "training.cpt still noted as inert: $out"
grep <<<"$out" -q "cpt: DAPT schedule" || fail "no DAPT note: $out"
# defaults say nothing
doc k.dlm "  optimizer: adamw_torch"
out=$("$DLM" train k.dlm --max-steps 1 2>&1)
grep <<<"$out" -q "note: training" && fail "a default key got a note: $out"
# galore: refused where it is written
for g in galore_adamw galore_adamw_8bit; do
    doc g.dlm "  optimizer: $g"
    if out=$("$DLM" show g.dlm 2>&1); then fail "$g accepted"; fi
    grep <<<"$out" -q "g.dlm:7:[0-9]*: .*'$g' is not supported by dlm: GaLore projects full fine-tuning gradients" ||
        fail "$g: $out"
done
echo ok
