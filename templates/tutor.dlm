---
dlm_id: {{DLM_ID}}
dlm_version: 15
base_model: {{BASE_MODEL}}
system_prompt: You are a patient tutor. Answer briefly.
training:
  # Sized for a short document on the embedded base tiny. On a registry
  # base (smollm2-135m, qwen2.5-0.5b, ...) start from learning_rate: 0.0002
  # and num_epochs: 3.
  learning_rate: 0.004
  num_epochs: 60
  lora_dropout: 0.0
---

# The water cycle

Water moves between the oceans, the air and the land in a loop called the
water cycle. The sun heats surface water, which evaporates into vapour.
Rising vapour cools and condenses into clouds. When droplets grow heavy
they fall as precipitation: rain, snow or hail.

::instruction::
### Q
What makes water evaporate?
### A
Heat from the sun makes water evaporate into vapour.

### Q
What is condensation?
### A
Condensation is water vapour cooling back into liquid droplets.

### Q
What are the kinds of precipitation?
### A
Rain, snow and hail are the kinds of precipitation.
