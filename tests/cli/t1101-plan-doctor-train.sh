#!/usr/bin/env bash
# One plan, one number (issue 30 point 11): `dlm doctor PATH --json` and the
# banner `dlm train PATH` writes into its run log give the same memory plan,
# item by item and in total, for a document on the embedded base; the
# tokenizer, dataset and document items are counted from the structures'
# sizes (a heap delta differed by a few hundred bytes between the two
# processes, and "document and records" by 34 KB).
set -euo pipefail
. "$DLM_SRC/tests/cli/lib.sh"
write_tiny_doc doc.dlm
sed -i 's/num_epochs: 30/num_epochs: 1/' doc.dlm
"$DLM" doctor doc.dlm --json > doctor.json
"$DLM" train doc.dlm -q > /dev/null
python3 - doctor.json "$DLM_HOME"/store/$ID/logs/train-000001-*.jsonl <<'PY' || fail "doctor and train plan differently"
import json, sys
d = json.load(open(sys.argv[1]))["plan"]
b = json.loads(open(sys.argv[2]).readline())
assert b["type"] == "banner", b
items = {i["name"]: i["bytes"] for i in d["items"]}
diff = {k: (items.get(k), b["plan_items"].get(k)) for k in set(items) | set(b["plan_items"])
        if items.get(k) != b["plan_items"].get(k)}
assert not diff, diff
assert d["total_bytes"] == b["plan_bytes"], (d["total_bytes"], b["plan_bytes"])
assert d["micro_batch_size"] == b["micro_batch_size"] and d["grad_accum"] == b["grad_accum"], (d, b)
for k in ("tokenizer", "dataset", "document and records"):
    assert items[k] > 0, (k, items)
print("ok: one plan,", d["total_bytes"], "bytes")
PY
echo ok
