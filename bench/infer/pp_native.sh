#!/bin/bash
# bench/infer/pp_native.sh — prompt processing (512 tokens in one batch)
# of dlm against llama.cpp's own native build (llama-bench from
# bench/infer/build-llama-bench.sh: GGML_NATIVE, i.e. its AVX-512 / VNNI
# kernels on a CPU that has them) on the same GGUF files, interleaved,
# best of ROUNDS; dlm with the int8 prefill (default) and with
# DLM_DECODE=f32 (the float path it replaced). Prints one markdown block
# for bench/RESULTS.md.
#
#   bench/infer/pp_native.sh [SHAPE] [TYPES] [THREADS] [ROUNDS]
#   (defaults: qwen2.5-0.5b "q8_0 q4_k_m" 2 3)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
shape=${1:-qwen2.5-0.5b}; types=${2:-"q8_0 q4_k_m"}; thr=${3:-2}; rounds=${4:-3}
out=${DLM_BENCH_TMP:-/tmp/dlm-bench-pp}
mkdir -p "$out"
lb=$("$here/build-llama-bench.sh")
LIBS="$(pkg-config --libs yaml-0.1 jansson libpcre2-8 libutf8proc libzstd libarchive sqlite3 libcurl libsodium) -lm -lpthread"
# shellcheck disable=SC2086
gcc -O2 -I "$root/src" -I "$root/build/gen" "$here/bench_infer.c" "$root/build/libdlmcore.a" $LIBS -o "$out/bench_infer"
# shellcheck disable=SC2086
gcc -O2 -I "$root/src" -I "$root/build/gen" "$here/make_gguf.c" "$root/build/libdlmcore.a" $LIBS -o "$out/make_gguf"
cpu=$(grep -m1 "model name" /proc/cpuinfo | sed 's/.*: //')
flags=$(grep -m1 "^flags" /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx512f|avx512_bf16|avx512_vnni|avx_vnni|amx_tile|amx_int8)$' | tr '\n' ' ')
echo "## $(date -u '+%Y-%m-%d %H:%M') UTC — prompt processing vs native llama.cpp (bench/infer/pp_native.sh), dlm $(git -C "$root" rev-parse --short=12 HEAD)"
echo
echo "CPU: $cpu ($flags; family $(grep -m1 'cpu family' /proc/cpuinfo | sed 's/.*: //')), $(nproc) cores shared with other jobs; load $(cut -d' ' -f1-3 /proc/loadavg) at start. $shape random weights (bench/infer/make_gguf.c), 512-token prompt in one batch, $thr threads, best of $rounds interleaved rounds (wall clock). llama.cpp: llama-bench built with GGML_NATIVE from node-llama-cpp's bundled source ($(git -C "$(dirname "$(dirname "$(dirname "$lb")")")" rev-parse --short HEAD 2>/dev/null || echo '?'))."
echo
echo "| GGUF | dlm int8 prefill tok/s | dlm float path tok/s | llama.cpp native tok/s | dlm / llama.cpp | int8 / float |"
echo "|---|---|---|---|---|---|"
for t in $types; do
    g="$out/$shape-$t.gguf"
    [ -f "$g" ] || "$out/make_gguf" "$shape" "$t" "$g" >&2
    bi=0; bf=0; bl=0
    for _ in $(seq "$rounds"); do
        d=$("$out/bench_infer" "$g" "$thr" 512 1 1 | sed -n 's/.*"pp_tok_s":\([0-9.]*\).*/\1/p')
        f=$(DLM_DECODE=f32 "$out/bench_infer" "$g" "$thr" 512 1 1 | sed -n 's/.*"pp_tok_s":\([0-9.]*\).*/\1/p')
        l=$("$lb" -m "$g" -p 512 -n 0 -t "$thr" -r 1 -o json 2>/dev/null |
            /usr/bin/python3 -c 'import json,sys; print(max(r["avg_ts"] for r in json.load(sys.stdin)))')
        bi=$(/usr/bin/python3 -c "print(max($bi, $d))"); bf=$(/usr/bin/python3 -c "print(max($bf, $f))")
        bl=$(/usr/bin/python3 -c "print(max($bl, $l))")
        echo "  round: $t dlm $d f32 $f llama $l" >&2
    done
    echo "| $shape $t | $bi | $bf | $bl | $(/usr/bin/python3 -c "print(f'{$bi/$bl:.2f}x')") | $(/usr/bin/python3 -c "print(f'{$bi/$bf:.2f}x')") |"
done
echo
echo "Load at end: $(cut -d' ' -f1-3 /proc/loadavg)."
