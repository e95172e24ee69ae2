---
dlm_id: 01JDEM0TVT0R0000000000000A
dlm_version: 15
base_model: tiny
system_prompt: You are a patient tutor. Answer briefly.
training:
  lora_r: 16
  lora_alpha: 32
  lora_dropout: 0.0
  target_modules: [q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj]
  sequence_len: 256
  learning_rate: 0.004
  num_epochs: 30
  warmup_ratio: 0.05
  micro_batch_size: 1
  grad_accum: 1
---

# The water cycle

Water moves between the oceans, the air and the land in a loop called the
water cycle. The sun heats surface water, which evaporates into vapour.
Rising vapour cools and condenses into clouds. When droplets grow heavy
they fall as precipitation: rain, snow or hail. On land, water runs off
into rivers or soaks into the ground, and eventually returns to the sea.

::instruction::
### Q
What makes water evaporate?
### A
Heat from the sun makes water evaporate into vapour.

### Q
What is condensation?
### A
Condensation is water vapour cooling back into liquid droplets, like clouds and dew.

### Q
Where does rain go after it falls?
### A
Rain runs off into rivers or soaks into the ground, and flows back to the sea.

### Q
What are the kinds of precipitation?
### A
Rain, snow and hail are the kinds of precipitation.
