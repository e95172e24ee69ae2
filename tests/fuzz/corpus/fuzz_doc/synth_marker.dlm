---
dlm_id: 01HZX3K4M5N6P7Q8R9S0T1V2W3
base_model: smollm2-135m
---
::instruction::
<!-- dlm-auto-synth: synth_teacher="self" synth_strategy="extraction" synth_at="2025-03-04T05:06:07" source_section_id="c78031fc5ab5a29a" -->
### Q
q
### A
a
