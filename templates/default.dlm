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

# Your document title

Write prose here. It trains as continued pretraining: the model learns to
continue text like this. Replace the questions and answers below with your own.

::instruction::
### Q
What is this document about?
### A
This document is about my project.

### Q
How do I train it?
### A
Run dlm train on this file.
