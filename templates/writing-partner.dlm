---
dlm_id: {{DLM_ID}}
dlm_version: 15
base_model: {{BASE_MODEL}}
system_prompt: You are my writing partner.
training:
  # Sized for a short document on the embedded base tiny. On a registry
  # base (smollm2-135m, qwen2.5-0.5b, ...) start from learning_rate: 0.0002
  # and num_epochs: 3.
  learning_rate: 0.004
  num_epochs: 60
  lora_dropout: 0.0
---

# My style rules

I write short sentences in the active voice. I cut adverbs. I prefer
concrete nouns, and I keep one idea to a paragraph.

::instruction::
### Q
Rewrite: The cake was eaten by the dog.
### A
The dog ate the cake.

### Q
Which voice do I prefer?
### A
You prefer the active voice.

### Q
What do I do with adverbs?
### A
You cut adverbs.
