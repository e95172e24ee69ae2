#!/bin/bash
# bench/train/denorm_cmd.sh — does `dlm train` pay for std-0.3 attention
# weights (issue 16/27's denormal case) on each back end? The real command
# on the SmolLM2-135M shape with the Llama-3 vocabulary (bases from
# tests/ref/make_model.py, all weights std 0.02, and q,k,v,o at std 0.3;
# bench/train/cmd.sh's document), --max-steps 4, measured in the process's
# user CPU time (/usr/bin/time), because on a shared machine wall-clock
# tokens/s mostly measure the other jobs. One thread by default, so the
# pool's spin-wait does not count either.
#
#   bench/train/denorm_cmd.sh [THREADS]
# Back ends: fp32 (AVX-512), precision bf16 (the CPU's bf16 back end),
# fp32 at DLM_CPU_LEVEL=avx2. Prints one markdown table.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
thr=${1:-1}
T=${DLM_BENCH_TMP:-/tmp/dlm-bench-denorm}
DLM="$root/build/dlm"
mkdir -p "$T"
doc_body() {
    /usr/bin/python3 - "$1" "$2" "$3" <<'PY'
import random, sys
path, base, prec = sys.argv[1:4]
random.seed(1)
words = ("the quick brown fox jumps over lazy dog model reads document learns facts answers questions training "
         "runs on cpu with weights kept in their stored type adapter is small").split()
body = "\n\n".join(" ".join(random.choice(words) for _ in range(600)) + "." for _ in range(30))
open(path, "w").write("---\ndlm_id: 01JD0000000000000000CMD016\ndlm_version: 15\nbase_model: %s\ntraining:\n"
                      "  sequence_len: 512\n  micro_batch_size: 1\n  grad_accum: 1\n  lora_r: 8\n"
                      "  target_modules: [q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj]\n"
                      "  num_epochs: 1\n  precision: %s\n---\n# Bench\n\n%s\n" % (base, prec, body))
PY
}
echo "| back end | std 0.02 user CPU s | std 0.3 user CPU s | std 0.3 / std 0.02 |"
echo "|---|---|---|---|"
for be in "fp32:" "bf16:" "fp32:avx2"; do
    prec=${be%%:*}; lvl=${be#*:}
    declare -A u
    for std in 0.02 0.3; do
        base="$T/smol135-l3-std$std"
        [ -f "$base/model.safetensors" ] || /usr/bin/python3 "$root/tests/ref/make_model.py" --out "$base" --arch llama \
            --layers 30 --d-model 576 --heads 9 --kv-heads 3 --ff 1536 --vocab 128256 --max-pos 8192 --dtype bf16 \
            --std 0.02 --attn-std "$std" >/dev/null
        doc_body "$T/doc.dlm" "$base" "$prec"
        rm -rf "$T/home"
        DLM_CPU_LEVEL=$lvl DLM_HOME="$T/home" /usr/bin/time -f "%U" -o "$T/time" "$DLM" train "$T/doc.dlm" \
            --max-steps 4 --threads "$thr" > "$T/out" 2>&1 || { cat "$T/out" >&2; exit 1; }
        u[$std]=$(tail -1 "$T/time")
    done
    echo "| $prec${lvl:+ (DLM_CPU_LEVEL=$lvl)} | ${u[0.02]} | ${u[0.3]} | $(/usr/bin/python3 -c "print(f'{${u[0.3]}/${u[0.02]}:.2f}')") |"
done
