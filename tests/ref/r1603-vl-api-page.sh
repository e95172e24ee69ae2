#!/usr/bin/env bash
# r1603: the chat page's image button on a Qwen2-VL base, in headless
# Chromium (Debian chromium, npm playwright-core): a document of 4 captioned
# images trained on the small random base test_vl_model --make writes; each
# image attached in the page with an empty message gets its caption back,
# the images are shown in the conversation, and nothing is fetched from
# anywhere but the server.
: "${DLM_SRC:?}" "${DLM_BUILD:?}"
NAME=r1603 NODE_MODULE=playwright-core
. "$DLM_SRC/tests/ref/api/lib.sh"
[ -x /usr/bin/chromium ] || skip_or_fail "chromium is not installed (scripts/deps.sh)"
"$DLM_BUILD/test_vl_model" --make base >/dev/null
python3 - <<'PY'
import struct, zlib, random
def chunk(t, d): return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
for i in range(4):
    random.seed(i)
    rows = b"".join(b"\0" + bytes(random.randrange(256) for _ in range(3 * 56)) for _ in range(56))
    open(f"img{i}.png", "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 56, 56, 8, 2, 0, 0, 0))
                                    + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))
PY
caps=("a red fox jumps" "the blue whale sings" "seven green apples" "an old stone bridge")
{
    printf -- '---\ndlm_id: 01JD0000000000000000001603\ndlm_version: 15\nbase_model: %s\n' "$T/base"
    printf 'training:\n  sequence_len: 64\n  num_epochs: 100\n  learning_rate: 0.02\n  micro_batch_size: 2\n---\n'
    for i in 0 1 2 3; do printf '::image path="img%d.png" alt="i%d"::\n%s\n\n' $i $i "${caps[$i]}"; done
} > doc.dlm
"$DLM" train doc.dlm -q >/dev/null || fail "train"
serve doc.dlm
mkdir -p "$DLM_BUILD/test-artifacts"
shot="$DLM_BUILD/test-artifacts/r1603-vl-page.png"
HOME="$T" node "$DLM_SRC/tests/ref/api/vl_page.cjs" "$url" "$shot" img0.png img1.png img2.png img3.png > page.json ||
    fail "the page run"
python3 - "${caps[@]}" <<'PY' || fail "page: $(cat page.json)"
import json, sys
page = json.load(open("page.json"))
assert not page["foreign"] and not page["errors"], page
assert page["answers"] == sys.argv[1:], (page["answers"], sys.argv[1:])
assert page["shown"] == 4, page
PY
stop
echo "r1603: ok (screenshot: $shot)"
