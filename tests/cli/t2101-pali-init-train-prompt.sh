#!/usr/bin/env bash
# A PaliGemma base end to end (docs/images.md), on a small random one that
# test_pali --make writes in the hub's layout (Gemma hidden 128, 2 layers;
# a 2-layer SigLIP at 28x28: 4 image tokens):
#   dlm init --multimodal takes the model folder and scaffolds the fence;
#   memorisation: 8 images with distinct captions; after training,
#     `dlm prompt --image IMG "" --temp 0` gives each image's caption, while
#     the base alone gives none of them;
#   the features come from <store>/vl-cache/ on the next run, same adapter
#     bytes with --threads 1 as with 2; a run killed at step 10 then
#     --resume gives an uninterrupted run's bytes;
#   repl /image gives the captions too, and so does dlm api (image_url
#     parts, several requests decoded together);
#   refusals, nothing written: a PaliGemma base prompted without --image, a
#     missing image, an image token written into the query.
set -euo pipefail
. "$DLM_SRC/tests/cli/lib.sh"
"$DLM_BUILD/test_pali" --make base >/dev/null
python3 - <<'PY'
import struct, zlib, random
def chunk(t, d): return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
for i in range(8):
    random.seed(i)
    rows = b"".join(b"\0" + bytes(random.randrange(256) for _ in range(3 * 56)) for _ in range(56))
    open(f"img{i}.png", "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 56, 56, 8, 2, 0, 0, 0))
                                    + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))
PY
caps=("a red fox jumps" "the blue whale sings" "seven green apples" "an old stone bridge" "two cats asleep"
      "the desert at noon" "a small paper boat" "snow on the pines")

# init --multimodal on the folder (no licence: not a registry row)
"$DLM" init --multimodal doc.dlm --base "$T/base" >/dev/null
grep -q '^::image path="figures/your-image.png"' doc.dlm || fail "no image fence: $(cat doc.dlm)"
grep -q "^base_model: $T/base\$" doc.dlm || fail "base: $(cat doc.dlm)"
id=$(sed -n 's/^dlm_id: //p' doc.dlm)
{
    printf -- '---\ndlm_id: %s\ndlm_version: 15\nbase_model: %s\ntraining:\n  sequence_len: 64\n' "$id" "$T/base"
    printf '  num_epochs: 100\n  learning_rate: 0.02\n  micro_batch_size: 2\n---\n'
    for i in 0 1 2 3 4 5 6 7; do printf '::image path="img%d.png" alt="i%d"::\n%s\n\n' $i $i "${caps[$i]}"; done
} > doc.dlm
S="$DLM_HOME/store/$id"
sha() { sha256sum "$S/adapter/versions/$1/adapter_model.safetensors" | cut -c1-64; }
expect_fail() { # expect_fail RC PATTERN cmd...
    local want=$1 pat=$2; shift 2
    set +e; out=$("$@" 2>&1); rc=$?; set -e
    [ $rc -eq "$want" ] || fail "'$*' exited $rc, not $want: $out"
    grep <<<"$out" -q -- "$pat" || fail "'$*' output lacks '$pat': $out"
}

for i in 0 1 2 3 4 5 6 7; do
    got=$("$DLM" prompt --base "$T/base" "" --image "img$i.png" --temp 0 -n 8)
    [ "$got" != "${caps[$i]}" ] || fail "the base already says '${caps[$i]}'"
done

out=$("$DLM" train doc.dlm --threads 2 2>&1)
grep <<<"$out" -q "images: 8, 32 image tokens; features of 0 from the vl-cache, 8 computed" || fail "$out"
a=$(sha v0001)
[ "$(find "$S/vl-cache" -name '*.f32' | wc -l)" = 8 ] || fail "vl-cache: $(find "$S/vl-cache")"
for i in 0 1 2 3 4 5 6 7; do
    got=$("$DLM" prompt doc.dlm "" --image "img$i.png" --temp 0 -n 12)
    [ "$got" = "${caps[$i]}" ] || fail "img$i: '$got', trained on '${caps[$i]}'"
done
# repl /image: the same captions (a fresh cache per image turn, the prefix in one piece)
out=$(printf '/image img3.png\n\n/image img5.png\n\n' | "$DLM" repl doc.dlm --temp 0 2>&1)
grep <<<"$out" -qx "${caps[3]}" && grep <<<"$out" -qx "${caps[5]}" || fail "repl /image: $out"
# dlm api: image parts on a PaliGemma base, four requests at once (the
# batched server feeds each prefix-LM block whole, beside the others'
# pieces): each image's trained caption, and a text-only request beside them
: > url.txt
"$DLM" api doc.dlm --port 0 --parallel 4 > url.txt 2> serve.err &
apid=$!
for _ in $(seq 300); do [ -s url.txt ] && break; sleep 0.1; done
python3 - "$(cat url.txt)" "${caps[@]}" <<'PY' || { kill $apid; fail "api: $(cat serve.err)"; }
import base64, json, sys, threading, urllib.request
url, caps = sys.argv[1].rstrip("/"), sys.argv[2:]
def ask(content):
    body = {"messages": [{"role": "user", "content": content}], "temperature": 0, "max_tokens": 12}
    req = urllib.request.Request(url + "/v1/chat/completions", data=json.dumps(body).encode())
    return json.load(urllib.request.urlopen(req))["choices"][0]["message"]["content"]
def img(i):
    return {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(open(f"img{i}.png", "rb").read()).decode()}}
got = {}
def run(i):
    got[i] = ask([img(i), {"type": "text", "text": ""}]) if i >= 0 else ask("Hello")
ts = [threading.Thread(target=run, args=(i,)) for i in (4, 6, -1, 1)]
for t in ts: t.start()
for t in ts: t.join()
for i in (4, 6, 1):
    assert got.get(i) == caps[i], (i, got.get(i), caps[i])
assert isinstance(got.get(-1), str), got
print("api: captions", [got[i] for i in (4, 6, 1)])
PY
kill -TERM $apid; wait $apid || fail "api exit status"

out=$("$DLM" train doc.dlm --threads 1 2>&1)
grep <<<"$out" -q "features of 8 from the vl-cache, 0 computed" || fail "no cache hit: $out"
[ "$(sha v0002)" = "$a" ] || fail "threads 1 (features from the cache) vs 2 changed the adapter"
set +e
DLM_TEST_CRASH_AFTER_STEP=10 "$DLM" train doc.dlm --max-steps 20 -q >/dev/null 2>&1
set -e
"$DLM" train doc.dlm --max-steps 20 --resume -q >/dev/null
"$DLM" train doc.dlm --max-steps 20 -q >/dev/null
[ "$(sha v0003)" = "$(sha v0004)" ] || fail "a killed and resumed run differs from an uninterrupted one"

# refusals
before=$(find "$DLM_HOME" -type f | sort | sha256sum)
expect_fail 2 "is a vision-language base: give the image" "$DLM" prompt doc.dlm "hi"
expect_fail 1 "nope.png: no such image file" "$DLM" prompt doc.dlm "" --image nope.png
expect_fail 1 "image tokens" "$DLM" prompt doc.dlm "<image>" --image img0.png
[ "$(find "$DLM_HOME" -type f | sort | sha256sum)" = "$before" ] || fail "a refused prompt wrote files"
echo "ok"
