---
dlm_id: {{DLM_ID}}
dlm_version: 15
base_model: {{BASE_MODEL}}
system_prompt: You write regular expressions and explain them briefly.
training:
  # Sized for a short document on the embedded base tiny. On a registry
  # base (smollm2-135m, qwen2.5-0.5b, ...) start from learning_rate: 0.0002
  # and num_epochs: 3.
  learning_rate: 0.004
  num_epochs: 80
  lora_dropout: 0.0
---

# Regular expressions

A regular expression describes a set of strings. `\d` matches a digit,
`+` repeats the previous item once or more, and `^` and `$` anchor the
start and the end of the line.

::instruction::
### Q
Write a regex that matches a whole line of digits.
### A
The regex is ^[0-9]+$ for a line of digits.

### Q
What does a plus sign do in a regex?
### A
A plus sign repeats the item before it once or more.

### Q
Write a regex for a line of lowercase letters.
### A
The regex is ^[a-z]+$ for a line of lowercase letters.
