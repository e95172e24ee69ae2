#!/bin/bash
# r2102: the training rows of a PaliGemma document (tokens/dataset.c) are
# PaliGemmaProcessor's (transformers 5.23, the orig venv): an image
# section's caption row is processor(images, text="", suffix=caption), a
# Q/A about the image before it is processor(images, text=question,
# suffix=answer): the same input ids (the image's tokens, <bos>, the
# question, "\n", the answer, EOS), the loss on exactly the processor's
# labels (token_type_ids 1), and the prefix-LM block dlm attends both ways
# = the processor's token_type_ids 0. The base: vl_fixture.py's random
# PaliGemma (tests/ref/export) with its processor files.
set -eu
: "${DLM_SRC:?}" "${DLM_BUILD:?}"
venv=$("$DLM_SRC/scripts/ref-venv.sh" orig) || {
    if [ "${DLM_REF_SKIP:-}" = "1" ]; then echo "skip: the orig reference venv is unavailable"; exit 77; fi
    exit 1
}
py="$venv/bin/python"
dir=$(mktemp -d "${TMPDIR:-/tmp}/dlm-r2102.XXXXXX")
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
"$py" "$DLM_SRC/tests/ref/export/vl_fixture.py" "$dir/a" paligemma 2>/dev/null | grep vl_fixture || true
# the fixture's byte-level tokenizer has no <bos>, which PaliGemma's rows
# (and the processor) need: its <|im_start|> stands in
"$py" - "$dir" <<'PY'
import sys
from transformers import AutoTokenizer
t = AutoTokenizer.from_pretrained(sys.argv[1] + "/a/base")
t.bos_token = "<|im_start|>"
t.save_pretrained(sys.argv[1] + "/a/base")
PY
"$py" - "$dir" <<'PY'
import sys
import numpy as np
from PIL import Image
d = sys.argv[1]
for i, (w, h) in enumerate([(56, 56), (40, 72)]):
    Image.fromarray(np.random.RandomState(i).randint(0, 256, (h, w, 3), dtype=np.uint8)).save(f"{d}/img{i}.png")
PY
cat > "$dir/doc.dlm" <<'DOC'
---
dlm_id: 01JD0000000000000000000000
dlm_version: 15
base_model: ./a/base
---
::image path="img0.png" alt="first"::
A red fox jumps over the fence.

::instruction::
### Q
What animal is in the picture?
### A
A fox.

### Q
Is it day or night? Answer briefly
### A
Day, with clouds.

::image path="img1.png" alt="second"::
Two cats asleep on a sofa.
DOC
"$DLM_BUILD/test_pali" --rows "$dir/a/base" "$dir/doc.dlm" > "$dir/rows.jsonl" || fail "test_pali --rows"
"$py" - "$dir" <<'PY'
import json, sys
from PIL import Image
from transformers import AutoTokenizer, PaliGemmaProcessor, SiglipImageProcessor
d = sys.argv[1]
tok = AutoTokenizer.from_pretrained(d + "/a/base")
ip = SiglipImageProcessor.from_pretrained(d + "/a/base")
vc = json.load(open(d + "/a/base/config.json"))["vision_config"]
ip.image_seq_length = (vc["image_size"] // vc["patch_size"]) ** 2   # what a hub checkpoint's preprocessor_config.json says
proc = PaliGemmaProcessor(image_processor=ip, tokenizer=tok)
rows = [json.loads(l) for l in open(d + "/rows.jsonl")]
want = [("img0.png", "", "A red fox jumps over the fence."),
        ("img0.png", "What animal is in the picture?", "A fox."),
        ("img0.png", "Is it day or night? Answer briefly", "Day, with clouds."),
        ("img1.png", "", "Two cats asleep on a sofa.")]
assert len(rows) == len(want), (len(rows), [(r["sid"], r["row"]) for r in rows])
# dlm keeps document order within the dataset's items
for r, (img, q, a) in zip(rows, want):
    out = proc(images=Image.open(f"{d}/{img}").convert("RGB"), text=q, suffix=a)
    ids, tt, lab = list(out["input_ids"][0]), list(out["token_type_ids"][0]), list(out["labels"][0])
    assert r["tok"] == [int(x) for x in ids[:-1]], (q, r["tok"], ids)
    tgt = [int(ids[i + 1]) if lab[i + 1] != -100 else -1 for i in range(len(ids) - 1)]
    assert r["tgt"] == tgt, (q, r["tgt"], tgt)
    assert r["prefix"] == tt.count(0) and all(x == 0 for x in tt[:tt.count(0)]), (q, r["prefix"], tt)
    assert r["image"] >= 1
    print(f"  {img} q={q!r}: {len(ids)} ids, prefix {r['prefix']}, {sum(t >= 0 for t in tgt)} loss tokens: equal")
PY
echo ok
