#!/usr/bin/env bash
# dlm doctor: capabilities and registry rows without a document; for a
# document, the plan dlm train then makes (same choices, same total within
# the heap noise of the store records), buffer by buffer; refusals with
# --max-memory; JSON fields as docs/doctor.md lists them.
set -euo pipefail
. "$DLM_SRC/tests/cli/lib.sh"
PY=/usr/bin/python3
write_doc doc.dlm 2

# no document: capabilities + one row per registry base
"$DLM" doctor --json > all.json
$PY - all.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
c = d["capabilities"]
for k in ("cpu_model", "cores_online", "cores_physical", "cores_usable", "isa", "isa_flags", "ram_total_bytes",
          "ram_available_bytes", "cgroup", "budget_bytes", "budget_from", "gpus", "determinism_class", "caches"):
    assert k in c, k
assert c["cores_usable"] >= 1 and c["budget_bytes"] > 0 and c["ram_total_bytes"] >= c["budget_bytes"]
assert c["determinism_class"] == "strong" and c["compute"] == "cpu"
# AMX: the CPUID bits as the kernel reports them in /proc/cpuinfo's flags
flags = next(l for l in open("/proc/cpuinfo") if l.startswith("flags")).split()
a = c["amx"]
assert a["amx_tile"] == ("amx_tile" in flags) and a["amx_bf16"] == ("amx_bf16" in flags), (a, "amx" in str(flags))
assert a["reason"] and (a["usable"] or "amx_tile" in flags or a["reason"] == "cpuid: no amx_tile"), a
rows = {r["key"]: r for r in d["bases"]}
s = rows["smollm2-135m"]
assert s["trainable"] and s["total_bytes"] > 0 and s["micro_batch_size"] * s["grad_accum"] in (8, 8), s
# qwen3, olmo2, smollm3, gemma2 and phi3 rows plan from their registry shape (Qwen3-8B: untied, NH·HS != hidden)
for k in ("qwen3-1.7b", "qwen3-4b", "qwen3-8b", "olmo-2-7b-instruct", "smollm3-3b", "gemma-2-2b-it", "gemma-2-9b-it",
          "phi-3.5-mini", "phi-4-mini-reasoning"):
    assert rows[k]["trainable"] and rows[k]["total_bytes"] > 0, rows[k]
# paligemma plans from its shape with its SigLIP tower; the other vision rows are refused
pg = rows["paligemma-3b-mix-224"]
assert pg["trainable"] and pg["total_bytes"] > rows["gemma-2-2b-it"]["total_bytes"] * 0.5, pg
assert not rows["internvl2-2b"]["trainable"]
# a 14B base needs more memory than a 135M one, as the same stored type
assert rows["qwen2.5-coder-14b"]["total_bytes"] > s["total_bytes"]
PY
"$DLM" doctor > all.txt
grep -q "smollm2-135m" all.txt || fail "no registry rows in the text output"
grep -q "determinism: strong" all.txt || fail "no determinism class"
grep -q "^amx:     \(yes\|no\) (" all.txt || fail "no amx line in doctor's text"
"$DLM" --version | grep "^cpu: .*(dispatch level [a-z0-9]*; amx \(yes\|no\) (" >/dev/null || fail "--version has no amx verdict"

# a tight budget for the registry: the 7B row must be quantized or refused
"$DLM" doctor --json --max-memory 3G > tight.json
$PY - tight.json <<'PY'
import json, sys
rows = {r["key"]: r for r in json.load(open(sys.argv[1]))["bases"]}
r = rows["qwen2.5-coder-7b"]
assert (r["fits"] and r["must_quantize"] and r["stored_type"] in ("Q8_0", "Q4_K")) or \
       (not r["fits"] and "Q4_K" in r["reason"]), r
PY

# a document: the plan, then train and compare with the plan it logs
"$DLM" doctor doc.dlm --json > plan.json
"$DLM" doctor doc.dlm > plan.txt
grep -q "total (predicted peak RSS)" plan.txt || fail "no total line: $(cat plan.txt)"
grep -q "activations" plan.txt || fail "no activation line"
"$DLM" train doc.dlm -q > /dev/null
log=$(ls "$DLM_HOME"/store/$ID/logs/train-*.jsonl)
$PY - plan.json "$log" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
p = d["plan"]
assert d["plan_error"] is None and p["fits"]
assert d["document"]["planned_from_files"] and d["document"]["train_items"] > 0
names = [i["name"] for i in p["items"]]
for want in ("runtime", "base weights", "tokenizer", "dataset", "adapter weights", "gradients", "AdamW moments",
             "checkpoint buffer", "activations", "attention scratch", "LM-head chunk", "backward scratch",
             "batch buffers"):
    assert any(n.startswith(want) for n in names), (want, names)
assert sum(i["bytes"] for i in p["items"]) == p["total_bytes"]
assert p["activation_bytes_per_token"] > p["activation_bytes_per_token_recompute"] > 0
# the document fixes micro_batch_size 2 and grad_accum 2
assert (p["micro_batch_size"], p["grad_accum"]) == (2, 2), p
lines = [json.loads(l) for l in open(sys.argv[2])]
banner = next(l for l in lines if l["type"] == "banner")
mem = next(l for l in lines if l["type"] == "memory")
assert banner["micro_batch_size"] == p["micro_batch_size"] and banner["grad_accum"] == p["grad_accum"]
assert banner["recompute"] == p["recompute"] and banner["seq_len"] == p["sequence_len"]
# same planner, same inputs: the totals differ only by the heap the store records take
assert abs(mem["plan_bytes"] - p["total_bytes"]) <= 0.02 * p["total_bytes"], (mem, p["total_bytes"])
assert mem["peak_rss_bytes"] > 0
PY

# refusal: a budget below even micro-batch 1 with recomputation
"$DLM" doctor doc.dlm --json --max-memory 1M > small.json
$PY - small.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert not d["plan"]["fits"] and d["plan_error"] and "budget" in d["plan_error"], d["plan_error"]
assert d["plan"]["recommendation"] is None
PY
out=$("$DLM" doctor doc.dlm --max-memory 1M) || true
grep <<<"$out" -q "DOES NOT FIT" || fail "no refusal in the text output"

# usage and input errors
set +e
"$DLM" doctor a.dlm b.dlm 2>/dev/null; rc=$?
[ $rc -eq 2 ] || fail "two paths should be a usage error, got $rc"
"$DLM" doctor missing.dlm 2>/dev/null; rc=$?
[ $rc -eq 1 ] || fail "a missing document should exit 1, got $rc"
"$DLM" doctor --max-memory lots 2>/dev/null; rc=$?
[ $rc -eq 2 ] || fail "a bad --max-memory should exit 2, got $rc"
set -e
echo ok
