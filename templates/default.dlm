---
dlm_id: {{DLM_ID}}
dlm_version: 15
base_model: {{BASE_MODEL}}
---

# Your document title

Write prose here. It trains as continued pretraining: the model learns to
continue text like this.

::instruction::
### Q
Your example question.
### A
Your example answer.
