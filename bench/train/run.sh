#!/bin/bash
# bench/train/run.sh — LoRA training speed and memory of dlm next to the
# PyTorch peer (../shared/bench/torch_lora_peer.py, Debian's torch), same
# shape, same machine, same script: SmolLM2-135M and Qwen2.5-0.5B shapes,
# seq 512, batch 1, rank 8 on q,k,v,o,gate,up,down, 2 threads.
# Prints a markdown table of ratios (dlm / peer) and saves it in bench/out/.
#
#   bench/train/run.sh [STEPS] [SHAPES...]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out="$root/bench/out"
mkdir -p "$out"
steps=${1:-6}
shift || true
shapes=${*:-"smollm2-135m qwen2.5-0.5b"}
[ -f "$root/build/libdlmcore.a" ] || cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$root/build" -j2 --target dlmcore >/dev/null
gcc -O2 -I "$root/src" -I "$root/build/gen" "$here/bench_train.c" "$root/build/libdlmcore.a" \
    $(pkg-config --libs yaml-0.1 jansson libpcre2-8 libutf8proc libzstd libarchive sqlite3 libcurl libsodium) \
    -lm -lpthread -o "$out/bench_train"
# the peer's documented tuned settings (see ../shared/bench/README.md)
TUNED="MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=100000000000 OPENBLAS_CORETYPE=SkylakeX OMP_WAIT_POLICY=PASSIVE"
table="$out/train_$(date +%Y%m%d_%H%M%S).md"
{
echo "| shape | dlm tok/s | peer tok/s | speed ratio | dlm peak RSS MB | peer peak RSS MB | RSS ratio |"
echo "|---|---|---|---|---|---|---|"
} > "$table"
for s in $shapes; do
    d=$("$out/bench_train" "$s" --seq 512 --batch 1 --rank 8 --steps "$steps" --warmup 2 --threads 2 | sed -n 's/^RESULT //p')
    p=$(env $TUNED /usr/bin/python3 "$here/peer_qwen.py" --mode train --shape "$s" --seq 512 --batch 1 --rank 8 \
        --steps "$steps" --warmup 2 --threads 2 | sed -n 's/^RESULT //p')
    echo "dlm:  $d"
    echo "peer: $p" | cut -c1-400
    /usr/bin/python3 - "$s" "$d" "$p" >> "$table" <<'PY'
import json, sys
s, d, p = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
dt = d["tokens_per_s_median"]
pt = p["tok_s_median"]
pr = p.get("peak_rss_mb")
print(f"| {s} | {dt:.1f} | {pt:.1f} | {dt/pt:.2f}x | {d['peak_rss_mb']:.0f} | {pr:.0f} | {d['peak_rss_mb']/pr:.2f}x |")
PY
done
cat "$table"
echo "(machine load during the peer run: foreign_cpu_frac in its RESULT line; rerun when it is high)"
