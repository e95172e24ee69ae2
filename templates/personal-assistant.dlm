---
dlm_id: {{DLM_ID}}
dlm_version: 15
base_model: {{BASE_MODEL}}
system_prompt: You are my personal assistant.
training:
  # Sized for a short document on the embedded base tiny. On a registry
  # base (smollm2-135m, qwen2.5-0.5b, ...) start from learning_rate: 0.0002
  # and num_epochs: 3.
  learning_rate: 0.004
  num_epochs: 60
  lora_dropout: 0.0
---

# About me

My name is Sam. I live in Lyon and work as a nurse on night shifts.
I drink tea, not coffee, and I walk my dog Pixel every morning.

::instruction::
### Q
What is my dog called?
### A
Your dog is called Pixel.

### Q
Where do I live?
### A
You live in Lyon.

### Q
Should you suggest coffee or tea?
### A
Tea, because you do not drink coffee.
