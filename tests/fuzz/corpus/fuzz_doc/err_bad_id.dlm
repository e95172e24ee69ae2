---
dlm_id: 01KTESTEXAMPLE000000000000
base_model: x
---
