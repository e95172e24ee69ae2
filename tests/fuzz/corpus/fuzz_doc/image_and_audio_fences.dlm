---
dlm_id: 01HZX3K4M5N6P7Q8R9S0T1V2W3
base_model: smollm2-135m
---
::image path="fig/a.png" alt="a cat"::
A cat.
::audio path="clip.wav" transcript="hello there"::
