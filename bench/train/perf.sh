#!/bin/bash
# bench/train/perf.sh — a perf profile of LoRA training steps (the evidence
# for what limits training speed): `perf record` over bench_train, then the
# samples of the timed steps grouped by kernel family. Only the steps are
# sampled: perf is started after the model is built (bench_train --pause
# waits on a fifo), so setup does not dilute the figures.
#
#   bench/train/perf.sh [SHAPE] [THREADS] [bench_train options...]
#   e.g. bench/train/perf.sh qwen2.5-0.5b 1 --base bf16
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out="$root/bench/out"
mkdir -p "$out"
shape=${1:-smollm2-135m}
thr=${2:-1}
shift 2 || shift $#
command -v perf >/dev/null || { echo "perf.sh: perf not found (apt-get install linux-perf)" >&2; exit 1; }
[ -f "$root/build/libdlmcore.a" ] || cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$root/build" -j2 --target dlmcore >/dev/null
gcc -O2 -I "$root/src" -I "$root/build/gen" "$here/bench_train.c" "$root/build/libdlmcore.a" \
    $(pkg-config --libs yaml-0.1 jansson libpcre2-8 libutf8proc libzstd libarchive sqlite3 libcurl libsodium) \
    -lm -lpthread -o "$out/bench_train"
fifo=$(mktemp -u /tmp/dlm-perf.XXXXXX)
mkfifo "$fifo"
trap 'rm -f "$fifo"' EXIT
"$out/bench_train" "$shape" --seq 512 --batch 1 --rank 8 --steps 3 --warmup 1 --threads "$thr" \
    --pause "$fifo" "$@" > "$out/perf_train.txt" &
pid=$!
# bench_train opens the fifo for writing once set up; attach, then let it go
read -r _ < "$fifo"
perf record -q -p "$pid" -o "$out/perf_train.data" 2>/dev/null &
ppid=$!
sleep 0.5
echo go > "$fifo"
wait "$pid"
kill -INT "$ppid" 2>/dev/null || true
wait "$ppid" 2>/dev/null || true
grep '^RESULT' "$out/perf_train.txt"
perf report -i "$out/perf_train.data" --no-children --sort symbol --stdio 2>/dev/null |
    /usr/bin/python3 "$here/perf_groups.py"
