#!/usr/bin/env bash
# Images in a document (docs/images.md): dlm init --multimodal, and at train
# time the blob store: ::image:: fences and image files from
# training.sources are decoded (bad files refused naming the document line
# and the file, nothing stored) and copied to <store>/blobs/<sha[:2]>/<sha>.<ext>;
# training itself then stops with a clear refusal (the towers are not built).
set -euo pipefail
. "$DLM_SRC/tests/cli/lib.sh"
expect_fail() { # expect_fail PATTERN cmd...
    local pat=$1; shift
    set +e; out=$("$@" 2>&1); rc=$?; set -e
    [ $rc -ne 0 ] || fail "'$*' succeeded: $out"
    grep <<<"$out" -q -- "$pat" || fail "'$*' output lacks '$pat': $out"
}
# png W H FILE [SEED]: an 8-bit RGB PNG written with Python's zlib
png() {
    python3 - "$@" <<'PY'
import struct, sys, zlib, random
w, h, f = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
random.seed(int(sys.argv[4]) if len(sys.argv) > 4 else 0)
def chunk(t, d): return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
rows = b"".join(b"\0" + bytes(random.randrange(256) for _ in range(3 * w)) for _ in range(h))
open(f, "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
                    chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))
PY
}
nblobs() { find "$1/blobs" -type f 2>/dev/null | wc -l; }

# 1. init --multimodal: gated default base, the original's scaffold
expect_fail "requires license acceptance" "$DLM" init --multimodal doc.dlm
[ ! -e doc.dlm ] || fail "a refused init wrote the document"
expect_fail "requires a vision-language base" "$DLM" init --multimodal x.dlm --base qwen2.5-1.5b
expect_fail "mutually exclusive" "$DLM" init --multimodal x.dlm --template default
"$DLM" init --multimodal doc.dlm --i-accept-license >/dev/null
grep -q '^base_model: paligemma-3b-mix-224$' doc.dlm || fail "default base: $(cat doc.dlm)"
grep -q '^::image path="figures/your-image.png" alt="short description"::$' doc.dlm || fail "no image fence"
id=$(sed -n 's/^dlm_id: //p' doc.dlm)
S="$DLM_HOME/store/$id"
grep -q '"license_acceptance"' "$S/manifest.json" || fail "acceptance not recorded"
fence=$(grep -n '^::image' doc.dlm | cut -d: -f1)

# 2. the placeholder is missing: the error names the line and the file
expect_fail "doc.dlm:$fence:1: image 'figures/your-image.png' not found" "$DLM" train doc.dlm
[ "$(nblobs "$S")" = 0 ] || fail "blobs written for a missing image"

# 3. a truncated PNG, a corrupt JPEG and a decompression bomb: refused, nothing stored
mkdir figures
png 40 30 full.png
head -c 200 full.png > figures/your-image.png
expect_fail "doc.dlm:$fence:1: image 'figures/your-image.png' (.*figures/your-image.png): corrupt or truncated PNG" "$DLM" train doc.dlm
printf '\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01junk' > figures/your-image.png
expect_fail "corrupt or truncated JPEG" "$DLM" train doc.dlm
python3 - <<'PY'
import struct, zlib
def chunk(t, d): return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
# 12000 x 12000 (144 M pixels) whose first rows of zeros are all there is: a
# bomb is refused from its header, before anything is inflated
z = zlib.compress(b"\0" * (1 + 3 * 12000) * 16)
open("figures/your-image.png", "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 12000, 12000, 8, 2, 0, 0, 0)) + chunk(b"IDAT", z) + chunk(b"IEND", b""))
PY
expect_fail "12000x12000 = 144000000 pixels, over the bound of 89478485" "$DLM" train doc.dlm
[ "$(nblobs "$S")" = 0 ] || fail "blobs written for a bad image"

# 4. a good image: stored under its sha256, byte for byte; training then
# refuses clearly on a vision row whose tower is not built (paligemma and
# qwen2-vl train: t2101, t1601; here the base would be downloaded next)
cp full.png figures/your-image.png
sha=$(sha256sum full.png | cut -d' ' -f1)
sed -i 's/^base_model: .*/base_model: mistral-small-3.1-24b-instruct/' doc.dlm
expect_fail "1 image(s) checked and in the blob store (1 new); training on images with mistral-small-3.1-24b-instruct is not built yet" "$DLM" train doc.dlm
cmp full.png "$S/blobs/${sha:0:2}/$sha.png" || fail "blob missing or different"
expect_fail "(0 new)" "$DLM" train doc.dlm     # idempotent
[ "$(nblobs "$S")" = 1 ] || fail "blob count $(nblobs "$S")"
ls -a "$S/blobs/${sha:0:2}" | grep -q tmp && fail "temp file left"

# 5. training.sources on a vision-language base: image files become image sections
mkdir corpus
png 8 8 corpus/a.png 1; cp corpus/a.png corpus/b.PNG; png 9 7 corpus/c.png 2
echo "Some notes." > corpus/notes.md
cat > src.dlm <<DOC
---
dlm_id: 01JD0000000000000000000002
dlm_version: 15
base_model: mistral-small-3.1-24b-instruct
training:
  sources:
    - path: corpus
      include: ["**/*"]
---
Prose.
DOC
S2="$DLM_HOME/store/01JD0000000000000000000002"
expect_fail "3 image(s) checked and in the blob store (2 new)" "$DLM" train src.dlm
[ "$(nblobs "$S2")" = 2 ] || fail "identical bytes are one blob"
for f in corpus/a.png corpus/c.png; do s=$(sha256sum "$f" | cut -d' ' -f1); cmp "$f" "$S2/blobs/${s:0:2}/$s.png"; done

# 6. a text base: images are refused (fence) or skipped (sources), nothing stored
sed 's/^base_model: .*/base_model: tiny/' doc.dlm > text.dlm
sed -i 's/^dlm_id: .*/dlm_id: 01JD0000000000000000000003/' text.dlm
expect_fail "text.dlm:$fence:1: image section 'figures/your-image.png' needs a vision-language base; tiny is not one" "$DLM" train text.dlm
[ "$(nblobs "$DLM_HOME/store/01JD0000000000000000000003")" = 0 ] || fail "text base stored blobs"
echo "ok"
