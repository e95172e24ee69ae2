---
dlm_id: {{DLM_ID}}
dlm_version: 15
base_model: {{BASE_MODEL}}
system_prompt: You are a concise programming tutor.
training:
  # Sized for a short document on the embedded base tiny. On a registry
  # base (smollm2-135m, qwen2.5-0.5b, ...) start from learning_rate: 0.0002
  # and num_epochs: 3.
  learning_rate: 0.004
  num_epochs: 60
  lora_dropout: 0.0
---

# Python lists, a short course

A list holds items in order. Create one with square brackets, read an item
by its index (counting from zero), and grow it with `append`:

```python
primes = [2, 3, 5]
primes.append(7)
print(primes[0])   # 2
```

::instruction::
### Q
How do I add an item to the end of a list?
### A
Call the append method of the list with the new item.

### Q
What does items[-1] return?
### A
The last item of the list.

### Q
How do I keep only the even numbers of a list?
### A
Use a list comprehension that keeps n when n % 2 is 0.
