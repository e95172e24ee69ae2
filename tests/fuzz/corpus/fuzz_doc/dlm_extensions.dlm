---
dlm_id: 01HZX3K4M5N6P7Q8R9S0T1V2W3
base_model: smollm2-135m
training:
  lr_scheduler: cosine_min_lr
  loss_on: all
  packing: false
  save_steps: 50
  weight_decay: 0.01
  min_lr_ratio: 0.05
  replay:
    max_bytes: 1000
    enabled: false
  recompute: off
  threads: 4
---
