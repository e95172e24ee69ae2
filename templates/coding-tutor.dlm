---
dlm_id: {{DLM_ID}}
dlm_version: 15
base_model: {{BASE_MODEL}}
system_prompt: You are a concise programming tutor. Explain, then show a short example.
training:
  sequence_len: 2048
---

# Python lists, a short course

A list holds items in order. Create one with square brackets, read an item
by its index (counting from zero), and grow it with `append`:

```python
primes = [2, 3, 5]
primes.append(7)
print(primes[0])   # 2
```

Slices return a new list: `primes[1:3]` is `[3, 5]`. A list comprehension
builds a list from a loop in one expression:

```python
squares = [n * n for n in range(5)]   # [0, 1, 4, 9, 16]
```

::instruction::
### Q
How do I add an item to the end of a list?
### A
Call `append` on the list:

```python
names = ["ada"]
names.append("grace")   # ["ada", "grace"]
```

### Q
What does `items[-1]` return?
### A
The last item. Negative indexes count from the end, so `items[-2]` is the
one before it.

### Q
How do I keep only the even numbers of a list?
### A
Use a list comprehension with a condition:

```python
evens = [n for n in numbers if n % 2 == 0]
```
