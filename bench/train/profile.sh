#!/bin/bash
# bench/train/profile.sh — where a LoRA training step spends its time: CPU
# milliseconds per phase of src/decoder/forward.c and src/grad/backward.c
# (matmuls, LoRA products, LM head,
# attention, norms, ...), from a build of those two files with -DDECODER_PROFILE (the normal
# build has no timers). The process CPU clock is used, so on a machine
# shared with other jobs the numbers count only the time dlm ran; with
# 2 threads they add up both threads (spinning included).
#
#   bench/train/profile.sh [SHAPE] [THREADS] [bench_train options...]
#   e.g. bench/train/profile.sh smollm2-135m 1 --dropout 0.05
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out="$root/bench/out"
mkdir -p "$out"
shape=${1:-smollm2-135m}
thr=${2:-1}
shift 2 || shift $#
[ -f "$root/build/libdlmcore.a" ] || cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$root/build" -j2 --target dlmcore >/dev/null
FLAGS="-O2 -DDECODER_PROFILE -ffp-contract=off -fno-strict-aliasing -fno-math-errno -D_GNU_SOURCE -I $root/src -I $root/build/gen"
# shellcheck disable=SC2086
gcc $FLAGS -c "$root/src/decoder/forward.c" -o "$out/forward_prof.o"
# shellcheck disable=SC2086
gcc $FLAGS -c "$root/src/grad/backward.c" -o "$out/backward_prof.o"
# shellcheck disable=SC2086
gcc $FLAGS "$here/bench_train.c" "$out/forward_prof.o" "$out/backward_prof.o" "$root/build/libdlmcore.a" \
    $(pkg-config --libs yaml-0.1 jansson libpcre2-8 libutf8proc libzstd libarchive sqlite3 libcurl libsodium) \
    -lm -lpthread -o "$out/bench_train_prof"
"$out/bench_train_prof" "$shape" --seq 512 --batch 1 --rank 8 --steps 2 --warmup 1 --threads "$thr" "$@" \
    > "$out/profile.txt" 2>&1
grep '^PROF' "$out/profile.txt" | sort -k3 -n -r
grep '^RESULT' "$out/profile.txt"
