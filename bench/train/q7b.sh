#!/bin/bash
# bench/train/q7b.sh — issue 27's 7B target: a LoRA step of `dlm train` on a
# Qwen2.5-7B-shaped Q4_K GGUF base (4.4 GB, written by bench/memory/mkbase.c
# with dlm's own quantizer; random weights, the real shape), sequence_len
# 512, micro-batch 1, LoRA r 16 on all seven projections, the run's default
# precision (bf16 where the CPU has AVX512_BF16 or AMX). Prints tokens/s
# of the best and the median timed step (the first step is warm-up) and
# appends a row to bench/RESULTS.md with the CPU. No peer: the target is
# absolute (>= 25 tok/s with AMX, >= 12 with AVX512_BF16).
#
#   bench/train/q7b.sh [STEPS]     (default 3 timed steps)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
steps=${1:-3}
tmp=${DLM_BENCH_TMP:-/tmp/dlm-bench-memory}
out="$root/bench/out"
mkdir -p "$tmp" "$out"
py=/usr/bin/python3
cmake --build "$root/build" -j2 >/dev/null
libs=$(pkg-config --libs yaml-0.1 jansson libpcre2-8 libutf8proc libzstd libarchive sqlite3 libcurl libsodium)
[ -x "$out/mkbase" ] || gcc -O2 -I "$root/src" -I "$root/build/gen" "$root/bench/memory/mkbase.c" \
    "$root/build/libdlmcore.a" $libs -lm -lpthread -o "$out/mkbase"
base="$tmp/q7b.gguf"   # the memory bench's q7b: the same file
[ -f "$base" ] || "$out/mkbase" "$base" --arch qwen2 --layers 28 --d-model 3584 --ff 18944 --heads 28 \
    --kv-heads 4 --vocab 152064 --max-pos 32768 --untied --type q4_K
doc="$tmp/q7b-step.dlm"
$py - "$doc" "$base" <<'PY'
import random, sys
random.seed(7)
words = "the model reads a document and learns its facts one step at a time on the cpu".split()
body = "\n\n".join(" ".join(random.choice(words) for _ in range(150)) + "." for _ in range(30))
open(sys.argv[1], "w").write("---\ndlm_id: 01JD000000000000000000Q7B1\ndlm_version: 15\nbase_model: %s\n"
    "training:\n  sequence_len: 512\n  micro_batch_size: 1\n  grad_accum: 1\n  num_epochs: 1\n  lora_r: 16\n"
    "  lora_alpha: 32\n  target_modules: [q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj]\n---\n# Bench\n\n%s\n"
    % (sys.argv[2], body))
PY
home="$tmp/home-q7b-step"
rm -rf "$home"
DLM_HOME="$home" /usr/bin/time -f "%M" -o "$tmp/q7b-step.maxrss" "$root/build/dlm" train "$doc" \
    --max-steps $((steps + 1)) --threads "$(nproc)" > "$tmp/q7b-step.out" 2>&1 || { cat "$tmp/q7b-step.out" >&2; exit 1; }
prec=$(grep '^precision:' "$tmp/q7b-step.out" || echo "precision: ?")
jl=$(ls "$home"/store/*/logs/train-*.jsonl | head -1)
cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
fam=$(lscpu | sed -n 's/^CPU family: *//p' | head -1)
flags=$(grep -o -w 'avx512f\|avx512_bf16\|avx512_vnni\|amx_tile\|amx_bf16\|amx_int8\|avx2' /proc/cpuinfo | sort -u | tr '\n' ' ')
$py - "$jl" "$root/bench/RESULTS.md" "$cpu (family $fam) [$flags]" "$prec" "$(git -C "$root" rev-parse --short=12 HEAD)" \
    "$(tail -1 "$tmp/q7b-step.maxrss")" "$(cat /proc/loadavg | cut -d' ' -f1-3)" <<'PY'
import datetime, json, statistics, sys
jl, res, cpu, prec, rev, rss, load = sys.argv[1:8]
st = [json.loads(l) for l in open(jl) if '"type":"step"' in l][1:]
t = [s["tokens_per_sec"] for s in st]
amx = "amx_tile" in cpu
target = 25.0 if amx else 12.0
best, med = max(t), statistics.median(t)
now = datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M UTC")
row = (f"\n## {now} — 7B Q4_K LoRA step (bench/train/q7b.sh), dlm {rev}\n\n"
       f"Qwen2.5-7B shape (28 layers, 3584 wide, ff 18944, GQA 28/4, vocab 152064, untied), GGUF Q4_K, "
       f"seq 512, micro-batch 1, LoRA r 16 on all seven projections, {len(t)} timed steps, {prec.strip()}, "
       f"peak RSS {int(rss) / 1024:.0f} MB, load average {load} at the end.\n\n"
       f"| benchmark | best tok/s | median tok/s | target | met | CPU [flags] |\n|---|---|---|---|---|---|\n"
       f"| dlm train 7B Q4_K LoRA step | {best:.1f} | {med:.1f} | >= {target:g} tok/s | "
       f"{'yes' if best >= target else 'no'} | {cpu} |\n")
open(res, "a").write(row)
print(row)
PY
