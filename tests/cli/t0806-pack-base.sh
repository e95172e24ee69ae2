#!/usr/bin/env bash
# pack --include-base → unpack on a machine without the base, checked with
# tools dlm did not write:
#   a random HF model (tests/ref/make_model.py, two safetensors shards) laid
#   out in an offline HF cache as huggingface_hub does (blobs/<sha256>,
#   snapshots/<commit>/<file> symlinks, .no_exist markers) at the pinned
#   commit of the registry key smollm2-135m → init, train, prompt --temp 0 →
#   pack --include-base (twice: same bytes) → GNU tar lists base/, sha256sum
#   checks every member against CHECKSUMS.sha256, Python checks manifest.json
#   "base" against the cache's own files and blob names → unpack with a fresh
#   HOME, DLM_HOME and an empty HF cache, offline → the cache holds the same
#   blobs and links, `prompt --temp 0` prints the same text. A differing file
#   in the cache is refused (nothing installed) until --force, which says so;
#   an hf:org/name base needs --i-am-the-licensee and unpack writes its
#   refs/main; hostile base entries are refused before anything is installed.
set -euo pipefail
. "$DLM_SRC/tests/cli/lib.sh"
PY=/usr/bin/python3     # Debian's: numpy for make_model.py, python3-zstandard for packlib.py
LIB="$DLM_SRC/tests/cli/packlib.py"
$PY -c 'import numpy, zstandard' 2>/dev/null || { echo "t0806: $PY lacks numpy or zstandard" >&2; exit 77; }
export HF_HUB_OFFLINE=1 HF_HUB_CACHE="$T/hub1"
REPO=HuggingFaceTB/SmolLM2-135M-Instruct C=12fd25f77366fa6b3b4b768ec3050bf629380bac

# make_cache CACHE REPO COMMIT SEED: a random model as huggingface_hub lays it out
make_cache() {
    local rd="$1/models--${2/\//--}"
    $PY "$DLM_SRC/tests/ref/make_model.py" --out "$rd/snapshots/$3" --vocab 400 --d-model 32 --ff 48 --layers 1 \
        --heads 2 --kv-heads 1 --shards 2 --seed "$4" >/dev/null
    mkdir -p "$rd/blobs" "$rd/.no_exist/$3"
    for f in "$rd/snapshots/$3"/*; do
        s=$(sha256sum "$f" | cut -c1-64)
        mv "$f" "$rd/blobs/$s" && ln -s "../../blobs/$s" "$f"
    done
    for f in special_tokens_map.json chat_template.jinja model.safetensors; do : > "$rd/.no_exist/$3/$f"; done
}
make_cache "$HF_HUB_CACHE" $REPO $C 7
write_doc t.dlm 1 smollm2-135m
"$DLM" train t.dlm --max-steps 2 -q >/dev/null
want=$("$DLM" prompt t.dlm "What is the capital of France?" --temp 0 -n 12)

"$DLM" pack t.dlm --include-base -q
"$DLM" pack t.dlm --include-base --out again.pack -q
cmp t.dlm.pack again.pack || fail "packing the same store and base twice gave different bytes"

# GNU tar lists and extracts it; sha256sum checks CHECKSUMS.sha256
tar --zstd -tf t.dlm.pack > list.txt
for f in config.json generation_config.json tokenizer.json tokenizer_config.json model.safetensors.index.json \
    model-00001-of-00002.safetensors model-00002-of-00002.safetensors; do
    grep -qx "base/$f" list.txt || fail "base/$f not in the pack: $(cat list.txt)"
done
[ "$(grep -c '^base/.' list.txt)" = 7 ] || fail "unexpected base/ members: $(grep '^base/' list.txt)"
mkdir x && tar --zstd -xf t.dlm.pack -C x
(cd x && sha256sum --quiet -c CHECKSUMS.sha256) || fail "GNU sha256sum rejects CHECKSUMS.sha256"
grep -q '  base/model-00001-of-00002.safetensors$' x/CHECKSUMS.sha256 || fail "base files lack checksums"
grep -q '"content_type": "no-exports"' x/PACK_HEADER.json || fail "header: $(cat x/PACK_HEADER.json)"
RD="$HF_HUB_CACHE/models--HuggingFaceTB--SmolLM2-135M-Instruct"
$PY - x "$RD/snapshots/$C" "$C" <<'PY'
import hashlib, json, os, sys
x, snap, commit = sys.argv[1:]
man = json.load(open(os.path.join(x, "manifest.json")))
b = man["base"]
assert b["kind"] == "hf" and b["repo"] == "HuggingFaceTB/SmolLM2-135M-Instruct" and b["commit"] == commit, b
assert sorted(b["absent"]) == ["chat_template.jinja", "model.safetensors", "special_tokens_map.json"], b["absent"]
assert sorted(b["files"]) == sorted(os.listdir(snap)), (sorted(b["files"]), os.listdir(snap))
h = hashlib.sha256()
for n in sorted(man["entries"]):
    h.update(("%s\n%s\n" % (n, hashlib.sha256(open(os.path.join(x, n), "rb").read()).hexdigest())).encode())
assert man["content_sha256"] == h.hexdigest(), "content_sha256 must cover base/ too"
for n, f in b["files"].items():
    data = open(os.path.join(snap, n), "rb").read()
    assert open(os.path.join(x, "base", n), "rb").read() == data, n
    assert f["sha256"] == hashlib.sha256(data).hexdigest() and f["size"] == len(data), n
    assert f["blob"] == os.path.basename(os.readlink(os.path.join(snap, n))), n
    assert man["entries"]["base/" + n] == len(data), n
PY

# a machine without the base: fresh HOME, dlm home and HF cache, offline
mkdir eh
export HOME="$T/eh" DLM_HOME="$T/home2" HF_HUB_CACHE="$T/hub2"
"$DLM" unpack t.dlm.pack --out d2 > un.txt
grep -q "installed the base $REPO (7 files) into the HF cache $T/hub2" un.txt || fail "unpack: $(cat un.txt)"
R2="$HF_HUB_CACHE/models--HuggingFaceTB--SmolLM2-135M-Instruct"
for f in "$RD/snapshots/$C"/*; do
    n=$(basename "$f")
    [ "$(readlink "$R2/snapshots/$C/$n")" = "$(readlink "$f")" ] || fail "$n: link differs from the source cache's"
    cmp "$R2/snapshots/$C/$n" "$f" || fail "$n: bytes differ"
done
for f in special_tokens_map.json chat_template.jinja model.safetensors; do
    [ -f "$R2/.no_exist/$C/$f" ] || fail "no .no_exist marker for $f"
done
got=$("$DLM" prompt d2/t.dlm "What is the capital of France?" --temp 0 -n 12)
[ "$got" = "$want" ] || fail "prompt after unpack: '$got' != '$want'"

# a differing file in the cache: refused, nothing installed; --force replaces it and says so
tc="$R2/blobs/$(basename "$(readlink "$RD/snapshots/$C/tokenizer_config.json")")"
echo '{}' > "$tc"
set +e; DLM_HOME="$T/home3" "$DLM" unpack t.dlm.pack --out d3 2> conf.txt; rc=$?; set -e
[ $rc = 1 ] && grep -q "BaseConflictError: .*$tc already holds other bytes than the pack's base file tokenizer_config.json" \
    conf.txt && grep -q "^hint: pass --force" conf.txt || fail "conflict: $(cat conf.txt)"
[ ! -e "$T/home3/store/$ID" ] && [ ! -e d3/t.dlm ] || fail "a refused unpack installed something"
[ "$(cat "$tc")" = "{}" ] || fail "a refused unpack changed the cache"
DLM_HOME="$T/home3" "$DLM" unpack t.dlm.pack --out d3 --force -q 2> force.txt
grep -q "warning: --force replaced 1 differing file of the base $REPO" force.txt || fail "force: $(cat force.txt)"
cmp "$tc" "$RD/snapshots/$C/tokenizer_config.json" || fail "--force did not restore the file"

# hostile base entries: refused before anything is installed
for k in base-unlisted base-blob base-repo; do
    $PY "$LIB" hostile $k t.dlm.pack h.pack
    set +e; DLM_HOME="$T/h-$k" HF_HUB_CACHE="$T/hub-$k" "$DLM" -v unpack h.pack --out "d-$k" 2> h.txt; rc=$?; set -e
    [ $rc = 1 ] || fail "$k: accepted"
    case $k in
    base-unlisted) grep -q "PackIntegrityError: .*base.files lists 7 files, base/ holds 8" h.txt || fail "$k: $(cat h.txt)" ;;
    base-blob) grep -q "HubError: .*invalid blob name '../../../../evil'" h.txt || fail "$k: $(cat h.txt)" ;;
    base-repo) grep -q "HubError: .*'../../evil' is not a Hugging Face model id" h.txt || fail "$k: $(cat h.txt)" ;;
    esac
    [ ! -e "$T/h-$k/store/$ID" ] && [ ! -e "$T/hub-$k" ] && [ ! -e "d-$k" ] || fail "$k: something was installed"
done

# an hf: base on a branch: needs --i-am-the-licensee; unpack writes refs/main
export HOME="$T" DLM_HOME="$T/home" HF_HUB_CACHE="$T/hub1"
C2=0123456789abcdef0123456789abcdef01234567
make_cache "$HF_HUB_CACHE" org/tiny-rand $C2 9
mkdir -p "$HF_HUB_CACHE/models--org--tiny-rand/refs" && printf %s $C2 > "$HF_HUB_CACHE/models--org--tiny-rand/refs/main"
ID=01JD0000000000000000000001 write_doc h.dlm 1 hf:org/tiny-rand
"$DLM" train h.dlm --max-steps 1 -q >/dev/null
want2=$("$DLM" prompt h.dlm "Where is Paris?" --temp 0 -n 8)
set +e; "$DLM" pack h.dlm --include-base 2> lic.txt; rc=$?; set -e
[ $rc = 1 ] && grep -q "BaseLicenseRefusedError" lic.txt || fail "hf: base without licensee: $(cat lic.txt)"
"$DLM" pack h.dlm --include-base --i-am-the-licensee https://example.com/lic -q
export HOME="$T/eh" DLM_HOME="$T/home4" HF_HUB_CACHE="$T/hub4"
"$DLM" unpack h.dlm.pack --out d4 -q
[ "$(cat "$T/hub4/models--org--tiny-rand/refs/main")" = $C2 ] || fail "refs/main not written"
got2=$("$DLM" prompt d4/h.dlm "Where is Paris?" --temp 0 -n 8)
[ "$got2" = "$want2" ] || fail "hf: base prompt after unpack: '$got2' != '$want2'"
echo ok
