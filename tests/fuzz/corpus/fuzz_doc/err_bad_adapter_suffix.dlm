---
dlm_id: 01HZX3K4M5N6P7Q8R9S0T1V2W3
base_model: smollm2-135m
---
::instruction#Tone::
