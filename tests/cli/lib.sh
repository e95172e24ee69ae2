# Shared helpers for the CLI scripts: a fresh DLM_HOME in a temp dir, a
# document on a fixture base, and fail().
set -euo pipefail
: "${DLM:?}" "${DLM_SRC:?}"
T=$(mktemp -d /tmp/dlm-cli.XXXXXX)
trap 'rm -rf "$T"' EXIT
export DLM_HOME="$T/home"
cd "$T"
FIXTURE_QWEN="$DLM_SRC/tests/ref/model/fixtures/qwen2-f32"
ID=01JD0000000000000000000000
fail() { echo "FAIL: $*" >&2; exit 1; }
# write_doc FILE [EPOCHS] [BASE]: a prose + Q&A document on the fixture base
write_doc() {
    cat > "$1" <<DOC
---
dlm_id: $ID
dlm_version: 15
base_model: ${3:-$FIXTURE_QWEN}
training:
  sequence_len: 96
  num_epochs: ${2:-3}
  learning_rate: 0.005
  lora_dropout: 0.1
  micro_batch_size: 2
  grad_accum: 2
---
# Capitals

Paris is the capital of France. Berlin is the capital of Germany.
Madrid is the capital of Spain, and Lisbon the capital of Portugal.

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
DOC
}
# write_tiny_doc FILE: prose + one Q&A on the embedded base, 30 epochs of
# sequence_len 64 (the reliability drills kill and fill it part-way)
write_tiny_doc() {
    cat > "$1" <<DOC
---
dlm_id: $ID
dlm_version: 15
base_model: tiny
training:
  sequence_len: 64
  micro_batch_size: 2
  num_epochs: 30
---
# Notes

The quick brown fox jumps over the lazy dog. Paris is the capital of France.
Berlin is the capital of Germany, and Madrid is the capital of Spain.

::instruction::
### Q
What is the capital of France?
### A
Paris.
DOC
}
