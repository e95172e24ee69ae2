---
dlm_id: {{DLM_ID}}
dlm_version: 15
base_model: {{BASE_MODEL}}
system_prompt: You answer from the team's knowledge base.
training:
  # Sized for a short document on the embedded base tiny. On a registry
  # base (smollm2-135m, qwen2.5-0.5b, ...) start from learning_rate: 0.0002
  # and num_epochs: 3.
  learning_rate: 0.004
  num_epochs: 60
  lora_dropout: 0.0
---

# Beekeeping basics

A colony has one queen, thousands of workers and, in summer, some drones.
Workers build wax comb and store honey in it. A beekeeper checks the hive
every week in spring to see that the queen is laying.

::instruction::
### Q
How many queens does a colony have?
### A
A colony has one queen.

### Q
What do workers store in the comb?
### A
Workers store honey in the wax comb.

### Q
How often is the hive checked in spring?
### A
The hive is checked every week in spring.
