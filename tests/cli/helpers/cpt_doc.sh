# The prose-heavy document of t0606 and t0607 (training.cpt on the embedded
# tiny base) and their store helpers; sourced after lib.sh.
py=${DLM_PYTHON:-/usr/bin/python3}
doc() { # doc FILE 'cpt YAML' [QA-PAIRS]
    cat > "$1" <<DOC
---
dlm_id: $ID
dlm_version: 15
base_model: tiny
training:
  sequence_len: 64
  micro_batch_size: 1
  grad_accum: 1
  num_epochs: 3
  learning_rate: 0.003
$2
---
The quick brown fox jumps over the lazy dog. Paris is the capital of France.

::prose::
Berlin is the capital of Germany. Madrid is the capital of Spain.

::prose::
Rome is the capital of Italy. Lisbon is the capital of Portugal.

::prose::
Vienna is the capital of Austria. Prague is the capital of Czechia.
DOC
    local i
    for ((i = 0; i < ${3:-0}; i++)); do
        printf '\n::instruction::\n### Q\nWhat is fact %d?\n### A\nFact %d is a capital.\n' "$i" "$i" >> "$1"
    done
}
store="$DLM_HOME/store/$ID"
lastlog() { ls -t "$store"/logs/train-*.jsonl | head -1; }
cur() { cat "$store/adapter/current.txt" 2>/dev/null | tr -d '\n'; }
sha() { sha256sum "$store/$(cur)/adapter_model.safetensors" | cut -c1-64; }
