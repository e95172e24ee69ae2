---
dlm_id: 01HZX3K4M5N6P7Q8R9S0T1V2W3
base_model: smollm2-135m
training:
  dpo:
    enabled: true
    beta: 0.3
    learning_rate: 1e-6
    num_epochs: 2
    loss_type: hinge
    reference: pre_dpo_adapter
---
