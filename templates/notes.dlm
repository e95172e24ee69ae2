---
dlm_id: {{DLM_ID}}
dlm_version: 15
base_model: {{BASE_MODEL}}
---

# Notes

Paste or write your notes here. Plain prose trains as continued
pretraining: after training, the model continues text in the style and
with the facts of these notes.

## A heading inside a section is just text

Headings, lists and code blocks are all kept as written. Start a new
`::instruction::` section below when you want question/answer pairs.
