---
dlm_id: 01HZX3K4M5N6P7Q8R9S0T1V2W3
base_model: smollm2-135m
---
::preference::
<!-- dlm-auto-mined: judge_name="sway" judge_score_chosen="0.91" judge_score_rejected="0.12" mined_at="2025-03-04T05:06:07Z" mined_run_id="2" -->
### Prompt
p
### Chosen
c
### Rejected
r
