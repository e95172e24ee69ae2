#!/usr/bin/env bash
# Tag weights (§1.9 / §1.10; the original's data/weighted_rows.py and
# trainer.py) on the embedded tiny base. A Python reference written from
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
mkdir -p corpus/.dlm corpus/src/.dlm corpus/src/py/.dlm corpus/other/.dlm
cat > corpus/.dlm/training.yaml <<'Y'
dlm_training_version: 1
metadata: {kind: doc}
weights:
  kind: {doc: 2.0, code: 0.5}
  lang: {py: 0.0}
Y
printf 'metadata: {kind: code}\nweights:\n  kind: {code: 2.5}\n' > corpus/src/.dlm/training.yaml
printf 'metadata: {lang: py}\n' > corpus/src/py/.dlm/training.yaml
# a sibling subtree, deeper than the root: its doc weight wins for every doc row
printf 'weights:\n  kind: {doc: 1.5}\n' > corpus/other/.dlm/training.yaml
for i in $(seq 1 9); do echo "Note $i: the river Seine flows through Paris, stop $i." > "corpus/note$i.md"; done
for i in $(seq 1 7); do echo "int f$i(void) { return $i; } /* unit $i */" > "corpus/src/u$i.c"; done
echo "def p(): return 1  # never trained: lang py weighs 0" > corpus/src/py/p.py
echo "Other notes about Lyon and the Rhone." > corpus/other/o.md
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
"$py" - corpus 42 show.json "$store/$v/training_run.json" "$log" "$store/manifest.json" <<'PY' || fail "weights differ from the reference"
import hashlib, json, os, sys
root, seed = sys.argv[1], int(sys.argv[2])
# the merged map: configs by anchor depth (path length), later wins
cfgs = {"": {"md": {"kind": "doc"}, "w": {"kind": {"doc": 2.0, "code": 0.5}, "lang": {"py": 0.0}}},
        "src": {"md": {"kind": "code"}, "w": {"kind": {"code": 2.5}}},
        "src/py": {"md": {"lang": "py"}, "w": {}},
        "other": {"md": {}, "w": {"kind": {"doc": 1.5}}}}
merged = {}
for anchor in sorted(cfgs, key=lambda a: (len(os.path.join(root, a).rstrip("/")), a)):
    for k, inner in cfgs[anchor]["w"].items():
        for val, sc in inner.items():
            merged.setdefault(k, {})[val] = sc
files = sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs
               if "/.dlm" not in "/" + os.path.relpath(d, root) + "/" and os.path.basename(d) != ".dlm")
want_w, train, val, dropped, extra, dist = {}, 0, 0, 0, 0, {}
thr = int(0.1 * (1 << 64))
for rel in files:
    text = open(os.path.join(root, rel)).read()
    sid = hashlib.sha256(("prose\n# source: %s\n\n%s" % (rel, text)).encode()).hexdigest()[:16]
    tags = {}
    parts = rel.split("/")
    for i in range(len(parts)):   # ancestors shallow → deep
        tags.update(cfgs.get("/".join(parts[:i]), {"md": {}})["md"])
    w = 1.0
    for k, val_ in tags.items():
        sc = merged.get(k, {}).get(val_)
        if sc is not None: w *= sc
    want_w[rel] = w
    for k, val_ in tags.items():   # weighted_rows.weight_distribution: rows before weighting
        dist.setdefault(k, {})[val_] = dist.get(k, {}).get(val_, 0) + 1
    if w <= 0: dropped += 1; continue
    n = int(w)
    frac = w - n
    if frac > 0:
        h = hashlib.blake2b(f"{seed}:{sid}".encode(), digest_size=8).digest()
        if int.from_bytes(h, "big") / float(1 << 64) < frac: n += 1
    if n == 0: dropped += 1; continue
    extra += n - 1
    for k in range(n):
        d = hashlib.sha256(f"{seed}\0{sid}\0{k}".encode()).digest()[:8]
        if int.from_bytes(d, "big") < thr: val += 1
        else: train += 1
assert want_w["note1.md"] == 1.5 and want_w["src/u1.c"] == 2.5 and want_w["src/py/p.py"] == 0.0, want_w
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
echo "$out" | grep -q "weights dropped every row" || fail "no error: $out"
echo "$out" | grep -q "^hint: .*weights" || fail "no hint: $out"
echo ok
