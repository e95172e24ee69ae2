#!/usr/bin/env bash
# Tag weights (§1.9 / §1.10; the original's data/weighted_rows.py and
# trainer.py) on the embedded tiny base (slow: ~9 s, minutes under ASan;
# t0609 is the quick variant). A Python reference
# (tests/cli/helpers/tag_weights_ref.py) written from
# the original's formulas — section ids sha256("prose\n# source: REL\n\n" +
# text)[:16], one weights map merged over every .dlm/training.yaml (later,
# deeper wins per (key, value), so a sibling subtree's config weighs rows
# tagged elsewhere), a row's weight the product over its tags, floor(w)
# copies plus one iff u64_be(blake2b(f"{seed}:{sid}", 8)) / 2^64 < frac(w),
# w <= 0 dropped, then the split by sha256(f"{seed}\0{sid}\0{k}") over each
# copy k — gives the train/validation row counts, the rows dropped, the
# copies added and the manifest's weight_distribution; dlm's
# training_run.json, its log, its manifest and `dlm show --sources` must say
# the same. The weighted run gives the same adapter bytes with 1
# and 2 threads; weights that drop every row are an error with a hint.
set -euo pipefail
. "$DLM_SRC/tests/cli/lib.sh"
py=${DLM_PYTHON:-/usr/bin/python3}
ref="$DLM_SRC/tests/cli/helpers/tag_weights_ref.py"
"$py" "$ref" make corpus
doc() { # doc FILE [seed]
    cat > "$1" <<DOC
---
dlm_id: $ID
dlm_version: 15
base_model: tiny
training:
  sequence_len: 128
  micro_batch_size: 4
  seed: ${2:-42}
  sources:
    - path: corpus
---
DOC
}
doc w.dlm
"$DLM" -q show w.dlm --sources --json > show.json
"$DLM" train w.dlm --max-steps 3 --threads 2 -q >/dev/null 2>&1 || fail "train: $("$DLM" train w.dlm --max-steps 3 2>&1)"
store="$DLM_HOME/store/$ID"
v=$(tr -d '\n' < "$store/adapter/current.txt")
a=$(sha256sum "$store/$v/adapter_model.safetensors" | cut -c1-64)
log=$(ls -t "$store"/logs/train-*.jsonl | head -1)
"$py" - corpus 42 show.json "$store/$v/training_run.json" "$log" "$store/manifest.json" "$ref" <<'PY' || fail "weights differ from the reference"
import json, subprocess, sys
ref = json.loads(subprocess.check_output([sys.executable, sys.argv[7], "expect", sys.argv[1], sys.argv[2]]))
want_w, train, val, dropped, extra, dist = (ref[k] for k in ("weights", "train", "val", "dropped", "extra", "dist"))
got_w = {f["path"]: f["weight"] for f in json.load(open(sys.argv[3]))["files"] if f["verdict"] == "kept"}
assert got_w == want_w, (got_w, want_w)
run = json.load(open(sys.argv[4]))
banner = json.loads(open(sys.argv[5]).readline())
got = (run["cpt"]["text_rows"], banner["val_items"], run["tag_weights"]["rows_dropped"],
       run["tag_weights"]["copies_added"], run["train_items"])
assert got == (train, val, dropped, extra, train), (got, (train, val, dropped, extra, train))
wd = json.load(open(sys.argv[6]))["training_runs"][-1]["weight_distribution"]
assert wd == dist, (wd, dist)
print("train", train, "val", val, "dropped", dropped, "extra", extra)
PY
"$DLM" train w.dlm --fresh --max-steps 3 --threads 1 -q >/dev/null 2>&1 || fail "train threads 1"
b=$(sha256sum "$store/$(tr -d '\n' < "$store/adapter/current.txt")/adapter_model.safetensors" | cut -c1-64)
[ "$a" = "$b" ] || fail "threads 1 vs 2 changed the weighted run's adapter: $a vs $b"
# every row weighed 0
printf 'weights:\n  kind: {doc: 0, code: 0}\n' > corpus/other/.dlm/training.yaml
if out=$("$DLM" train w.dlm --fresh --max-steps 3 2>&1); then fail "a run with every row dropped trained: $out"; fi
grep <<<"$out" -q "weights dropped every row" || fail "no error: $out"
grep <<<"$out" -q "^hint: .*weights" || fail "no hint: $out"
echo ok
