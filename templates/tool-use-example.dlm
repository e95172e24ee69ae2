---
dlm_id: {{DLM_ID}}
dlm_version: 15
base_model: {{BASE_MODEL}}
system_prompt: You call tools by writing one JSON object.
training:
  # Sized for a short document on the embedded base tiny. On a registry
  # base (smollm2-135m, qwen2.5-0.5b, ...) start from learning_rate: 0.0002
  # and num_epochs: 3.
  learning_rate: 0.004
  num_epochs: 60
  lora_dropout: 0.0
---

# Tools

The assistant has two tools. `weather` takes a city and returns the
forecast. `timer` takes a number of minutes and rings when it runs out.

::instruction::
### Q
What is the weather in Oslo?
### A
{"tool": "weather", "city": "Oslo"}

### Q
Set a timer for ten minutes.
### A
{"tool": "timer", "minutes": 10}

### Q
Will it rain in Rome?
### A
{"tool": "weather", "city": "Rome"}
