#!/usr/bin/env bash
# r0413 (slow: ~6 s of CPU, node and two trainings): dlm's GGUF export of
# phi3 in llama.cpp (npm node-llama-cpp 3.21.1, its phi3 arch: attn_qkv,
# the fused ffn_up, rope_factors_long/short, rope.dimension_count,
# rope.scaling.attn_factor / original_context_length). For a
# Phi-3.5-like model (LongRoPE whose original context 16 is shorter than
# llama.cpp's 256-token context: the long factors and the attention
# factor) and a Phi-4-mini-like one (tied, GQA, partial rotary 0.75,
# original context 512: the short factors), each with a LoRA adapter on
# qkv_proj, o_proj, gate_up_proj and down_proj trained by dlm:
#   - the F32 export, base + adapter GGUF and merged, continues the prompt
#     with the greedy tokens (32, or up to an end token) of `dlm prompt --raw --temp 0` on the HF
#     folder; the base alone with those of the base (and the adapter
#     changes them); dlm reads its merged export back to the same tokens;
#   - training is deterministic across thread counts: --threads 1 (v0001)
#     and --fresh --threads 3 (v0002) write the same adapter bytes, and so
#     does a run killed (SIGKILL) after step 5 of 8 then resumed.
set -euo pipefail
: "${DLM:?}" "${DLM_SRC:?}"
py=/usr/bin/python3
ref=$DLM_SRC/tests/ref
skip() {
    if [ "${DLM_REF_SKIP:-}" = "1" ]; then echo "r0413: skipped: $1"; exit 77; fi
    echo "r0413: FAILED: $1" >&2; exit 1
}
"$py" -c 'import numpy' 2>/dev/null || skip "$py has no numpy"
command -v node >/dev/null || skip "node is not installed"
[ -f "$ref/node_modules/node-llama-cpp/dist/index.js" ] || skip "node-llama-cpp is not installed (scripts/ref-deps.sh)"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
export DLM_HOME="$T/home"
cd "$T"
"$py" "$ref/make_model.py" --out a --arch phi3 --untied --vocab 400 --d-model 64 --ff 128 --layers 2 --heads 4 \
    --kv-heads 4 --longrope 16 --max-pos 256 --seed 3 >/dev/null
"$py" "$ref/make_model.py" --out b --arch phi3 --tied --vocab 400 --d-model 64 --ff 128 --layers 2 --heads 4 \
    --kv-heads 2 --partial-rotary 0.75 --longrope 512 --max-pos 4096 --seed 6 >/dev/null
P="The quick brown fox jumps over the lazy dog. Paris is the capital of"
for k in a b; do
    id=01JD00000000000000000000P${k^^}
    cat > $k.dlm <<DOC
---
dlm_id: $id
dlm_version: 15
base_model: $T/$k
training:
  sequence_len: 64
  num_epochs: 8
  learning_rate: 0.02
  micro_batch_size: 2
  lora_r: 8
  lora_alpha: 16
  target_modules: [qkv_proj, o_proj, gate_up_proj, down_proj]
---
# Capitals

Paris is the capital of France. Berlin is the capital of Germany.
Madrid is the capital of Spain, and Lisbon the capital of Portugal.
DOC
    "$DLM" train $k.dlm -q --threads 1 >/dev/null
    cp "$DLM_HOME"/store/$id/adapter/versions/v0001/adapter_model.safetensors $k.t1
    "$DLM" train $k.dlm -q --fresh --threads 3 >/dev/null
    cmp -s $k.t1 "$DLM_HOME"/store/$id/adapter/versions/v0002/adapter_model.safetensors ||
        { echo "r0413: $k: --threads 1 and 3 trained different adapters" >&2; exit 1; }
    if [ $k = a ]; then
        # killed (SIGKILL) after step 5 of 8, then --resume: the uninterrupted run's bytes (v0003 = v0002)
        set +e
        DLM_TEST_CRASH_AFTER_STEP=5 "$DLM" train $k.dlm -q --fresh --max-steps 8 >/dev/null 2>&1
        rc=$?
        set -e
        [ $rc -ne 0 ] || { echo "r0413: the crash hook did not kill the run" >&2; exit 1; }
        "$DLM" train $k.dlm -q --resume --max-steps 8 >/dev/null
        cmp -s $k.t1 "$DLM_HOME"/store/$id/adapter/versions/v0003/adapter_model.safetensors ||
            { echo "r0413: the resumed run differs from the uninterrupted one" >&2; exit 1; }
    fi
    "$DLM" export $k.dlm --target gguf --quant F32 --out x$k >/dev/null 2>&1
    "$DLM" export $k.dlm --target gguf --quant F32 --merged --out m$k >/dev/null 2>&1
    # the importance matrix names phi3's fused weights as llama.cpp stores
    # them (attn_qkv; ffn_up = gate rows then up rows), so they are calibrated
    "$DLM" export $k.dlm --target gguf --quant Q4_K_M --out q$k >/dev/null 2>&1
    PYTHONPATH="$ref/export" "$py" - "$DLM_HOME/store/$id/exports/imatrix/imatrix.gguf" <<'PY'
import sys, gguf_read
_, ts = gguf_read.read(sys.argv[1])
names = sorted(t["name"] for t in ts)
want = sorted(f"blk.{l}.{m}.weight.{p}" for l in range(2) for m in ("attn_qkv", "attn_output", "ffn_up", "ffn_down")
              for p in ("in_sum2", "counts"))
assert names == want, names
PY
    "$DLM" prompt $k.dlm --raw --temp 0 -n 32 --json "$P" > $k.mine.json
    "$DLM" prompt --base m$k/merged.F32.gguf --raw --temp 0 -n 32 --json "$P" > $k.mg.json
    "$DLM" prompt $k.dlm --no-adapter --raw --temp 0 -n 32 --json "$P" > $k.none.json
done
"$py" - "$ref/export/llama_check.mjs" <<'PY'
import json, subprocess, sys
jobs = []
for k in "ab":
    ids = json.load(open(f"{k}.mine.json"))["prompt_tokens"]
    jobs += [{"id": f"{k}.adapter", "model": f"x{k}/base.F32.gguf", "lora": f"x{k}/adapter.gguf", "ids": ids, "greedy": 32},
             {"id": f"{k}.merged", "model": f"m{k}/merged.F32.gguf", "lora": None, "ids": ids, "greedy": 32},
             {"id": f"{k}.base", "model": f"x{k}/base.F32.gguf", "lora": None, "ids": ids, "greedy": 32}]
json.dump(jobs, open("jobs.json", "w"))
subprocess.run(["node", sys.argv[1], "jobs.json", "llama.json"], check=True)
lc = json.load(open("llama.json"))
for k in "ab":
    mine, mg, none = (json.load(open(f"{k}.{s}.json")) for s in ("mine", "mg", "none"))
    want = mine["tokens"]
    assert len(want) >= 8 and len(set(want)) > 3, f"{k}: degenerate continuation {want}"
    assert none["tokens"] != want, f"{k}: the adapter does not change the greedy continuation"
    assert mg["tokens"] == want, f"{k}: dlm on its merged GGUF {mg['tokens']} vs the HF folder {want}"
    for j, w in (("adapter", want), ("merged", want), ("base", none["tokens"])):
        got = lc[f"{k}.{j}"].get("tokens")
        # dlm stops at an end-of-generation token, llama.cpp yields it and goes on
        assert got is not None and got[:len(w)] == w and (len(w) == 32 or len(got) > len(w)), \
            f"llama.cpp {k} {j}: {lc[f'{k}.{j}']} vs dlm {w}"
    print(f"r0413: {k}: llama.cpp greedy (base + adapter, merged, base) = dlm prompt's {len(want)} tokens")
PY
echo "r0413: adapters equal for --threads 1 and 3, and after kill -9 + --resume"
