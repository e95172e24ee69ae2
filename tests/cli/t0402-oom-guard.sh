#!/usr/bin/env bash
# The OOM guard: --max-memory below the plan stops dlm train before it maps
# or hashes a weight, with OOMError naming the need, the budget and the
# micro_batch_size / grad_accum / sequence_len to write; written into the
# frontmatter, that recommendation fits and trains under the same budget.
# A budget nothing fits under says why; --force trains anyway.
set -euo pipefail
. "$DLM_SRC/tests/cli/lib.sh"
PY=/usr/bin/python3
S="$DLM_HOME/store/$ID"
# a document with long rows: sequence_len 1024 matters here
doc() { # doc FILE [extra training lines...]
    local f=$1; shift
    {
        printf -- "---\ndlm_id: $ID\ndlm_version: 15\nbase_model: $FIXTURE_QWEN\ntraining:\n  sequence_len: %s\n" "${SEQ:-1024}"
        printf "  num_epochs: 1\n"
        for l in "$@"; do printf "  %s\n" "$l"; done
        printf -- "---\n# Long\n\n"
        $PY -c "
import random
random.seed(3)
w='alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau'.split()
print('\n\n'.join(' '.join(random.choice(w) for _ in range(700)) + '.' for _ in range(3)))"
    } > "$f"
}
total() { "$DLM" doctor "$1" --json ${2:+--max-memory $2} | $PY -c "import json,sys; print(json.load(sys.stdin)['plan']['total_bytes'])"; }

doc full.dlm
doc small.dlm "micro_batch_size: 1" "grad_accum: 8" "recompute: on"
SEQ=64 doc tiny.dlm "micro_batch_size: 1" "grad_accum: 8" "recompute: on"
need=$(total full.dlm)
t1=$(total small.dlm)
t0=$(total tiny.dlm)
[ "$t0" -lt "$t1" ] && [ "$t1" -lt "$need" ] || fail "plans not ordered: $t0 < $t1 < $need"
budget=$(( (t0 + t1) / 2 ))

# 1. below the need: OOMError before any weight is touched, nothing written
set +e
out=$("$DLM" train full.dlm --max-memory "$budget" 2>&1); rc=$?
set -e
[ $rc -eq 1 ] || fail "train under a small --max-memory should exit 1, got $rc: $out"
grep <<<"$out" -q "OOMError" || fail "no OOMError: $out"
grep <<<"$out" -q "training needs .* but the budget is .* (--max-memory)" || fail "need/budget not named: $out"
grep <<<"$out" -q "write in the frontmatter: training: {micro_batch_size: 1, grad_accum: 8, sequence_len: [0-9]*, recompute: on}" \
    || fail "no recommendation: $out"
[ ! -e "$DLM_HOME/cache/weights.json" ] || fail "the weights were hashed before the plan refused"
[ -z "$(ls "$S/adapter/versions")" ] || fail "a version was written"
[ ! -e "$S/.lock" ] || fail "the store lock was left behind"
seq=$(echo "$out" | sed -n 's/.*sequence_len: \([0-9]*\), recompute.*/\1/p')
[ "$seq" -ge 64 ] && [ "$seq" -lt 1024 ] || fail "recommended sequence_len $seq out of range"

# 2. the recommendation, written into the frontmatter, fits the same budget and trains
SEQ=$seq doc full.dlm "micro_batch_size: 1" "grad_accum: 8" "recompute: on"
[ "$(total full.dlm "$budget")" -le "$budget" ] || fail "the recommended plan does not fit"
"$DLM" train full.dlm --max-memory "$budget" --max-steps 2 -q > /dev/null || fail "the recommendation did not train"
[ "$(cat "$S/adapter/current.txt")" = "adapter/versions/v0001" ] || fail "v0001 not committed"

# 3. a budget nothing fits under: a specific reason, no recommendation
set +e
out=$("$DLM" train full.dlm --max-memory 4M 2>&1); rc=$?
set -e
[ $rc -eq 1 ] || fail "a 4M budget should exit 1, got $rc"
grep <<<"$out" -q "OOMError" || fail "no OOMError: $out"
# the base is f32: the reason says that not even a Q4_K copy of it would fit
grep <<<"$out" -q "even a Q4_K base with micro_batch_size 1 and recomputation at sequence_len 64 needs" \
    || fail "no specific reason: $out"

# 4. --force tries anyway (with a warning) and trains
out=$("$DLM" train full.dlm --max-memory 4M --force --max-steps 1 2>&1) || fail "--force did not train: $out"
grep <<<"$out" -q "does not fit" || fail "--force gave no warning: $out"
[ "$(cat "$S/adapter/current.txt")" = "adapter/versions/v0002" ] || fail "v0002 not committed"
echo "ok: need $need, budget $budget, recommended sequence_len $seq"
