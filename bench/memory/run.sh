#!/bin/bash
# bench/memory/run.sh — is the memory plan right? For random-weight bases of
# three shapes, the plan (`dlm doctor PATH --json`, and the plan `dlm train`
# logs) against the peak RSS `dlm train --max-steps 1` really reaches
# (ru_maxrss of the child, from /usr/bin/time; the run also logs VmHWM).
#
#   bench/memory/run.sh [SHAPE...]      SHAPE: smol135 qwen05 q7b (default: all)
#
# Shapes (sequence_len 512, LoRA r 8 on q,k,v,o, one optimizer step):
#   smol135  SmolLM2-135M config, HF safetensors bf16, micro-batch auto
#   qwen05   Qwen2.5-0.5B config, HF safetensors bf16, micro_batch_size 2
#   q7b      Qwen2.5-Coder-7B config, GGUF Q4_K (4.0 GiB), micro_batch_size 1
# The bases are written once into $DLM_BENCH_TMP (default /tmp/dlm-bench-memory):
# the HF ones by tests/ref/make_model.py (numpy), the GGUF by mkbase.c (dlm's
# own quantizer through the streaming GGUF writer). Nothing is committed.
# Exit status 1 when an estimate is off by more than 10%.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
tmp=${DLM_BENCH_TMP:-/tmp/dlm-bench-memory}
out="$root/bench/out"
mkdir -p "$tmp" "$out"
shapes=${*:-"smol135 qwen05 q7b"}
py=/usr/bin/python3

if [ ! -x "$root/build/dlm" ]; then
    cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
cmake --build "$root/build" -j2 >/dev/null
libs=$(pkg-config --libs yaml-0.1 jansson libpcre2-8 libutf8proc libzstd libarchive sqlite3 libcurl libsodium)
gcc -O2 -I "$root/src" -I "$root/build/gen" "$here/mkbase.c" "$root/build/libdlmcore.a" $libs -lm -lpthread \
    -o "$out/mkbase"
DLM="$root/build/dlm"

make_base() { # make_base SHAPE → prints the base path
    case $1 in
    smol135)
        [ -f "$tmp/smol135/model.safetensors" ] || $py "$root/tests/ref/make_model.py" --out "$tmp/smol135" \
            --arch llama --dtype bf16 --layers 30 --d-model 576 --heads 9 --kv-heads 3 --ff 1536 --vocab 49152 \
            --max-pos 8192 >/dev/null
        echo "$tmp/smol135" ;;
    qwen05)
        [ -f "$tmp/qwen05/model.safetensors" ] || $py "$root/tests/ref/make_model.py" --out "$tmp/qwen05" \
            --arch qwen2 --dtype bf16 --layers 24 --d-model 896 --heads 14 --kv-heads 2 --ff 4864 --vocab 151936 \
            --max-pos 32768 >/dev/null
        echo "$tmp/qwen05" ;;
    q7b)
        [ -f "$tmp/q7b.gguf" ] || "$out/mkbase" "$tmp/q7b.gguf" --arch qwen2 --layers 28 --d-model 3584 \
            --ff 18944 --heads 28 --kv-heads 4 --vocab 152064 --max-pos 32768 --untied --type q4_K
        echo "$tmp/q7b.gguf" ;;
    *) echo "unknown shape $1" >&2; exit 2 ;;
    esac
}

write_doc() { # write_doc FILE ID BASE EXTRA_TRAINING_LINES
    $py - "$@" <<'PY'
import random, sys
path, did, base, extra = sys.argv[1:5]
random.seed(1)
words = ("the quick brown fox jumps over lazy dog model reads document learns facts answers questions training "
         "runs on cpu with weights kept in their stored type adapter is small").split()
body = "\n\n".join(" ".join(random.choice(words) for _ in range(120)) + "." for _ in range(40))
extra = "".join("  %s\n" % l for l in extra.split(";") if l)
open(path, "w").write("---\ndlm_id: %s\ndlm_version: 15\nbase_model: %s\ntraining:\n  sequence_len: 512\n"
                      "  num_epochs: 1\n%s---\n# Bench\n\n%s\n" % (did, base, extra, body))
PY
}

jnum() { $py -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }

res="$out/memory-results.md"
{
    echo "| shape | base | mb x ga | recompute | doctor estimate | train plan | measured peak RSS | error | step time |"
    echo "|---|---|---|---|---|---|---|---|---|"
} > "$res.tmp"
fail=0
for s in $shapes; do
    base=$(make_base "$s")
    case $s in
    smol135) id=01JD000000000000000000SM01; extra="" ;;
    qwen05) id=01JD000000000000000000QW05; extra="micro_batch_size: 2;grad_accum: 1" ;;
    q7b) id=01JD000000000000000000Q7B0; extra="micro_batch_size: 1;grad_accum: 1" ;;
    esac
    home="$tmp/home-$s"
    rm -rf "$home"
    doc="$tmp/$s.dlm"
    write_doc "$doc" "$id" "$base" "$extra"
    DLM_HOME="$home" "$DLM" doctor "$doc" --json > "$tmp/$s.doctor.json"
    est=$(jnum "$tmp/$s.doctor.json" "d['plan']['total_bytes']")
    echo "== $s: doctor estimate $est bytes; training one step..." >&2
    t0=$(date +%s)
    DLM_HOME="$home" /usr/bin/time -f "%M" -o "$tmp/$s.maxrss" "$DLM" train "$doc" --max-steps 1 \
        > "$tmp/$s.train.out" 2>&1 || { cat "$tmp/$s.train.out" >&2; exit 1; }
    t1=$(date +%s)
    peak=$(( $(tail -1 "$tmp/$s.maxrss") * 1024 ))
    log=$(ls "$home"/store/*/logs/train-*.jsonl | head -1)
    grep '"type":"memory"' "$log" > "$tmp/$s.memory.json"
    grep '"type":"banner"' "$log" > "$tmp/$s.banner.json"
    planned=$(jnum "$tmp/$s.memory.json" "d['plan_bytes']")
    mb=$(jnum "$tmp/$s.banner.json" "'%d x %d' % (d['micro_batch_size'], d['grad_accum'])")
    rc=$(jnum "$tmp/$s.banner.json" "'on' if d['recompute'] else 'off'")
    step=$(grep -o '"tokens_per_sec":[0-9.]*' "$log" | head -1 | cut -d: -f2)
    err=$($py -c "print('%+.1f%%' % (100.0 * ($est - $peak) / $peak))")
    ok=$($py -c "print(int(abs($est - $peak) <= 0.10 * $peak and abs($planned - $peak) <= 0.10 * $peak))")
    [ "$ok" = 1 ] || fail=1
    gib() { $py -c "print('%.3f GiB' % ($1 / 2**30))"; }
    echo "| $s | $(basename "$base") | $mb | $rc | $(gib $est) | $(gib $planned) | $(gib $peak) | $err |" \
         "$((t1 - t0)) s ($step tok/s) |" >> "$res.tmp"
    cat "$tmp/$s.train.out" >&2
done
cat "$res.tmp" | tee "$res"
rm -f "$res.tmp"
exit $fail
