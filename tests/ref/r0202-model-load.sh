#!/bin/bash
# Reference check: small random llama / qwen2 models written in HF format
# and as GGUF by tests/ref/make_model.py (numpy, from the format specs) load
# through model_load to the same config and the same weights
# (test_model_load HF GGUF: exact for f32/same-type, within rounding for
# f16/bf16/q8_0), across arch × tied × dtype × RoPE × layout × shards ×
# GGUF type. Also checks the committed fixtures regenerate byte for byte.
set -eu
: "${DLM_SRC:?}" "${DLM_BUILD:?}"
PY=/usr/bin/python3
if ! "$PY" -c 'import numpy' 2>/dev/null; then
    [ "${DLM_REF_SKIP:-}" = "1" ] && exit 77
    echo "r0202: $PY with numpy is required" >&2
    exit 1
fi
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
mk="$PY $DLM_SRC/tests/ref/make_model.py"
bin=$DLM_BUILD/test_model_load
fail=0
n=0
run() {
    local name=$1; shift
    local gt=$1; shift
    $mk --out "$T/$name" --gguf "$T/$name.gguf" --gguf-type "$gt" "$@" >/dev/null
    if (cd "$DLM_SRC" && "$bin" "$T/$name" "$T/$name.gguf") >"$T/$name.log" 2>&1; then
        n=$((n + 1))
    else
        echo "r0202: FAIL $name ($gt $*)" >&2
        tail -20 "$T/$name.log" >&2
        fail=1
    fi
}
run llama-f32-tied        f32  --arch llama --dtype f32 --tied
run llama-f32-untied-q8   q8_0 --arch llama --dtype f32 --untied --seed 3
run llama-bf16-l3-bf16    bf16 --arch llama --dtype bf16 --rope-llama3 --layout v5 --seed 4
run llama-bf16-f32        f32  --arch llama --dtype bf16 --untied --seed 5
run llama-f16-f16         f16  --arch llama --dtype f16 --heads 8 --kv-heads 8 --seed 6
run llama-gqa-hd          f32  --arch llama --dtype f32 --heads 8 --kv-heads 2 --head-dim 16 --seed 7
run llama-sharded         q8_0 --arch llama --dtype bf16 --shards 3 --layers 3 --seed 8
run qwen2-f32-tied        f32  --arch qwen2 --dtype f32 --tied --seed 9
run qwen2-bf16-untied-q8  q8_0 --arch qwen2 --dtype bf16 --untied --layout v5 --seed 10
run qwen2-f16-f16         f16  --arch qwen2 --dtype f16 --untied --kv-heads 1 --seed 11
run qwen2-bf16-bf16       bf16 --arch qwen2 --dtype bf16 --shards 2 --seed 12

# quantized GGUF types stay quantized, rows in HF order (pattern blocks)
pat() {
    local name=$1 gt=$2 want=$3; shift 3
    $mk --out "$T/$name" --gguf "$T/$name.gguf" --gguf-type "$gt" "$@" >/dev/null
    if (cd "$DLM_SRC" && "$bin" --pattern "$T/$name.gguf" "$want") >"$T/$name.log" 2>&1; then
        n=$((n + 1))
    else
        echo "r0202: FAIL $name ($gt)" >&2
        tail -20 "$T/$name.log" >&2
        fail=1
    fi
}
pat llama-q4_0 q4_0 Q4_0 --arch llama --untied --seed 20
pat qwen2-q5_0 q5_0 Q5_0 --arch qwen2 --seed 21
pat llama-q4_k q4_k Q4_K --arch llama --d-model 256 --ff 512 --heads 4 --kv-heads 2 --seed 22
pat llama-q5_k q5_k Q5_K --arch llama --d-model 256 --ff 256 --heads 8 --kv-heads 4 --untied --seed 23
pat qwen2-q6_k q6_k Q6_K --arch qwen2 --d-model 256 --ff 512 --seed 24

# the committed fixtures are exactly what the generator makes
sh "$DLM_SRC/tests/ref/model/make_fixtures.sh" "$T/fixtures" >/dev/null
if ! diff -r "$T/fixtures" "$DLM_SRC/tests/ref/model/fixtures" >/dev/null; then
    echo "r0202: committed fixtures differ from make_fixtures.sh output" >&2
    fail=1
fi
[ $fail = 0 ] && echo "r0202: $n models agree (HF vs GGUF pairs, quantized GGUF patterns); fixtures reproducible"
exit $fail
