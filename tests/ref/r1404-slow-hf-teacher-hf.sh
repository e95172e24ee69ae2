#!/bin/bash
# r1404: dlm synth --teacher hf:MODEL (the original's second local base, in
# process, no adapter) against the original's HF teacher restated with
# transformers 5.23 (tests/ref/teacher/hf_teacher_ref.py): on small random
# models, the prompt dlm tokenizes (the flattened system/user prompt as one
# user turn of the chat template, or the raw text for a base without a
# template) has the same ids, greedy decoding gives the same tokens, and
# the reply text is the same. Cases: the qwen2 fixture (ChatML template,
# sharded safetensors), a llama made here without a chat template (BOS
# added by the tokenizer), and the org/name spelling resolved from the HF
# cache. Then the original's own HfTeacher (document-language-model 0.10.0,
# tests/ref/venv/orig.txt) is asked the same prompts and must reply with the
# same texts (tests/ref/teacher/hf_teacher_orig.py).
# Keep the vocabularies small: transformers 5 loads a model_type qwen2
# folder with Qwen2Tokenizer, which rebuilds the pre-tokenizer with Qwen's
# regex whatever tokenizer.json says (make_model.py writes GPT-2's), so a
# vocabulary with a "\n\n" merge tokenizes differently there than in the
# tokenizers library and in dlm (which follow tokenizer.json).
set -eu
: "${DLM_SRC:?}" "${DLM_BUILD:?}"
venv=$("$DLM_SRC/scripts/ref-venv.sh" torch2) || {
    if [ "${DLM_REF_SKIP:-}" = "1" ]; then echo "skip: the torch2 reference venv is unavailable"; exit 77; fi
    exit 1
}
py="$venv/bin/python"
T=$(mktemp -d "${TMPDIR:-/tmp}/dlm-r1404.XXXXXX")
trap 'rm -rf "$T"' EXIT
export DLM_HOME="$T/home" HF_HUB_OFFLINE=1 HF_HUB_CACHE="$T/cache"
DLM=${DLM:-$DLM_BUILD/dlm}
cd "$T"
cat > d.dlm <<'DOC'
---
dlm_id: 01JD0000000000000000000000
dlm_version: 15
base_model: tiny
---
# Capitals

Paris is the capital of France. Rome is the capital of Italy.

::prose::
# Rivers

The Seine flows through Paris.
DOC
orig=$("$DLM_SRC/scripts/ref-venv.sh" orig) || {
    if [ "${DLM_REF_SKIP:-}" = "1" ]; then echo "skip: the orig reference venv is unavailable"; exit 77; fi
    echo "r1404: cannot make the orig venv" >&2; exit 1
}
run() { # model-spec model-dir max-new
    "$DLM" -v synth instructions d.dlm --teacher "hf:$1" --strategy both --max-new-tokens "$3" --dry-run > out.txt 2> err.txt
    rc=$?
    [ $rc = 0 ] || [ $rc = 2 ] || { cat err.txt >&2; echo "r1404: synth failed (rc $rc)" >&2; exit 1; }
    [ "$(grep -c '^dlm: debug: teacher tokens: ' err.txt)" = 4 ] || { cat err.txt >&2; echo "r1404: want 4 requests" >&2; exit 1; }
    "$py" "$DLM_SRC/tests/ref/teacher/hf_teacher_ref.py" "$2" err.txt "$3" || return 1
    HF_HUB_OFFLINE=1 "$orig/bin/python" "$DLM_SRC/tests/ref/teacher/hf_teacher_orig.py" "$2" err.txt "$3" 2>&1 | grep -v "Loading weights"
    return "${PIPESTATUS[0]}"
}
set +e
run "$DLM_SRC/tests/ref/model/fixtures/qwen2-f32" "$DLM_SRC/tests/ref/model/fixtures/qwen2-f32" 20 || exit 1
"$py" "$DLM_SRC/tests/ref/make_model.py" --out "$T/llama" --arch llama --untied --vocab 400 --d-model 64 --ff 96 \
    --layers 2 --seed 21 > /dev/null || exit 1
"$py" - "$T/llama" <<'PY' || exit 1
import json, sys
p = sys.argv[1] + "/tokenizer_config.json"
c = json.load(open(p))
c.pop("chat_template", None)
c["add_bos_token"] = True
c["bos_token"] = "<|endoftext|>"
json.dump(c, open(p, "w"))
PY
run "$T/llama" "$T/llama" 24 || exit 1
# hf:ORG/NAME: the base from the HF cache (offline), as the hub would give it
"$py" - "$DLM_SRC/tests/ref/model/fixtures/qwen2-f32" "$T/cache" <<'PY' || exit 1
import hashlib, os, shutil, sys
src, cache = sys.argv[1:]
commit = "a" * 40
repo = os.path.join(cache, "models--org--teacher")
os.makedirs(os.path.join(repo, "refs"))
open(os.path.join(repo, "refs", "main"), "w").write(commit)
snap = os.path.join(repo, "snapshots", commit)
os.makedirs(snap)
os.makedirs(os.path.join(repo, "blobs"))
for f in os.listdir(src):
    b = open(os.path.join(src, f), "rb").read()
    h = hashlib.sha256(b).hexdigest()
    open(os.path.join(repo, "blobs", h), "wb").write(b)
    os.symlink("../../blobs/" + h, os.path.join(snap, f))
PY
run org/teacher "$DLM_SRC/tests/ref/model/fixtures/qwen2-f32" 8 || exit 1
grep -q '"teacher": "hf:org/teacher"' err.txt || { echo "r1404: teacher name" >&2; exit 1; }
echo "r1404: ok"
