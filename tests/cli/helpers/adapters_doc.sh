# The two-adapter document of t1001 and t1002 (tone prose, sql Q&A on the
# embedded tiny base) and their store helpers; sourced after lib.sh.
S="$DLM_HOME/store/$ID"
cat > doc.dlm <<DOC
---
dlm_id: $ID
dlm_version: 15
base_model: tiny
training:
  sequence_len: 64
  micro_batch_size: 2
  grad_accum: 1
  num_epochs: 3
  adapters:
    tone:
      lora_r: 4
      learning_rate: 0.005
    sql:
      lora_r: 8
      lora_alpha: 8
      learning_rate: 0.003
---
Databases keep rows in tables. Polite people say please and thank you.

::prose#tone::
Always answer politely and warmly, with a kind word at the end.

::instruction::
### Q
How are you today?
### A
Very well, thank you kindly!

### Q
Can you help me?
### A
Of course, it would be my pleasure.

::instruction#sql::
### Q
List all users.
### A
SELECT * FROM users;

### Q
Count the orders.
### A
SELECT COUNT(*) FROM orders;
DOC
sha() { sha256sum "$S/adapter/$1/versions/$2/adapter_model.safetensors" | cut -c1-64; }
tree_sha() { (cd "$S/adapter/$1" && find . -type f | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-64); }
