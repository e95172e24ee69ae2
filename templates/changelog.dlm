---
dlm_id: {{DLM_ID}}
dlm_version: 15
base_model: {{BASE_MODEL}}
system_prompt: You answer questions about the project's releases.
training:
  # Sized for a short document on the embedded base tiny. On a registry
  # base (smollm2-135m, qwen2.5-0.5b, ...) start from learning_rate: 0.0002
  # and num_epochs: 3.
  learning_rate: 0.004
  num_epochs: 60
  lora_dropout: 0.0
---

# Changelog of the lamp project

Version 2.0 replaced the configuration file with environment variables.
Version 1.4 added a dark theme. Version 1.3 fixed a crash on empty input.

::instruction::
### Q
What changed in version 2.0?
### A
Version 2.0 replaced the configuration file with environment variables.

### Q
Which version added a dark theme?
### A
Version 1.4 added the dark theme.

### Q
Which version fixed the crash on empty input?
### A
Version 1.3 fixed the crash on empty input.
