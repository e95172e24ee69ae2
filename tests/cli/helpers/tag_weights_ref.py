"""Tag weights reference for tests/cli/t0608-slow-tag-weights.sh and
t0609-cpt-quick.sh, written from the original's formulas (not from dlm):
data/weighted_rows.py merge_weights_maps / resolve_row_weight /
expand_rows_by_weight, data/splitter.py, section ids of §1.9.

  tag_weights_ref.py make ROOT       the tree (four .dlm/training.yaml)
  tag_weights_ref.py expect ROOT SEED
      {"weights": {relpath: w}, "train": rows, "val": rows, "dropped": n,
       "extra": copies added, "dist": weight_distribution}
"""
import hashlib, json, os, sys

# the tree's configs: anchor (relative) -> metadata, weights
CFGS = {"": {"md": {"kind": "doc"}, "w": {"kind": {"doc": 2.0, "code": 0.5}, "lang": {"py": 0.0}}},
        "src": {"md": {"kind": "code"}, "w": {"kind": {"code": 2.5}}},
        "src/py": {"md": {"lang": "py"}, "w": {}},
        "other": {"md": {}, "w": {"kind": {"doc": 1.5}}}}


def make(root):
    ys = {"": "dlm_training_version: 1\nmetadata: {kind: doc}\nweights:\n  kind: {doc: 2.0, code: 0.5}\n"
              "  lang: {py: 0.0}\n",
          "src": "metadata: {kind: code}\nweights:\n  kind: {code: 2.5}\n",
          "src/py": "metadata: {lang: py}\n",
          # a sibling subtree, deeper than the root: its doc weight wins for every doc row
          "other": "weights:\n  kind: {doc: 1.5}\n"}
    for a, y in ys.items():
        os.makedirs(os.path.join(root, a, ".dlm"), exist_ok=True)
        open(os.path.join(root, a, ".dlm", "training.yaml"), "w").write(y)
    for i in range(1, 10):
        open(os.path.join(root, "note%d.md" % i), "w").write("Note %d: the river Seine flows through Paris, stop %d.\n" % (i, i))
    for i in range(1, 8):
        open(os.path.join(root, "src", "u%d.c" % i), "w").write("int f%d(void) { return %d; } /* unit %d */\n" % (i, i, i))
    open(os.path.join(root, "src", "py", "p.py"), "w").write("def p(): return 1  # never trained: lang py weighs 0\n")
    open(os.path.join(root, "other", "o.md"), "w").write("Other notes about Lyon and the Rhone.\n")


def expect(root, seed):
    cfgs = CFGS
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
    return {"weights": want_w, "train": train, "val": val, "dropped": dropped, "extra": extra, "dist": dist}


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2])
    else:
        json.dump(expect(sys.argv[2], int(sys.argv[3])), sys.stdout)
