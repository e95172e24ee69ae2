---
dlm_id: {{DLM_ID}}
dlm_version: 15
base_model: {{BASE_MODEL}}
system_prompt: You answer with one shell command.
training:
  # Sized for a short document on the embedded base tiny. On a registry
  # base (smollm2-135m, qwen2.5-0.5b, ...) start from learning_rate: 0.0002
  # and num_epochs: 3.
  learning_rate: 0.004
  num_epochs: 60
  lora_dropout: 0.0
---

# Shell one-liners

Each answer below is a single command for a POSIX shell with the GNU tools.

::instruction::
### Q
Count the lines of notes.txt.
### A
wc -l notes.txt

### Q
List the five largest files here.
### A
du -a . | sort -n -r | head -n 5

### Q
Find the files named *.log under this folder.
### A
find . -name '*.log'
