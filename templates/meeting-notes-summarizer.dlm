---
dlm_id: {{DLM_ID}}
dlm_version: 15
base_model: {{BASE_MODEL}}
system_prompt: You summarize meetings in one or two sentences.
training:
  # Sized for a short document on the embedded base tiny. On a registry
  # base (smollm2-135m, qwen2.5-0.5b, ...) start from learning_rate: 0.0002
  # and num_epochs: 3.
  learning_rate: 0.004
  num_epochs: 60
  lora_dropout: 0.0
---

# Planning meeting, 3 March

Present: Ana, Ben, Chen. The team chose Friday for the release. Ben will
write the announcement. Chen will fix the login bug before Thursday.

::instruction::
### Q
Summarize the planning meeting of 3 March.
### A
The team set the release for Friday; Ben writes the announcement and Chen fixes the login bug.

### Q
Who will write the announcement?
### A
Ben will write the announcement.

### Q
When is the release?
### A
The release is on Friday.
