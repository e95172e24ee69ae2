---
dlm_id: {{DLM_ID}}
dlm_version: 15
base_model: {{BASE_MODEL}}
training:
  # Sized for a short document on the embedded base tiny. On a registry
  # base (smollm2-135m, qwen2.5-0.5b, ...) start from learning_rate: 0.0002
  # and num_epochs: 3.
  learning_rate: 0.004
  num_epochs: 60
  lora_dropout: 0.0
---

# Notes

Paste or write your notes here. Plain prose trains as continued
pretraining: after training, the model continues text in the style and
with the facts of these notes. Start an `::instruction::` section when
you want question/answer pairs.
