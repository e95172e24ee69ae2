#!/bin/bash
# bench/gemm/run.sh — matmul throughput of dlm's kernels vs the machine's
# measured FMA peak.
#
#   bench/gemm/run.sh [MIN_SECONDS] [FILTER]
#
# 1. builds ../shared/bench/c/peak.c (gcc -O2 -march=native -fopenmp) and
#    measures the AVX-512 / AVX2 FMA peak with 1 and 2 threads;
# 2. builds bench_gemm.c against build/libdlmcore.a (configure + build the
#    release tree first if needed) and times kern_matmul with f32, f16, bf16,
#    q8_0, q4_K and q6_K weights, kern_matmul_dx and kern_sgemm (dW = dyᵀ·x)
#    on the matmul shapes of SmolLM2-135M and Qwen2.5-0.5B with N = 512 rows,
#    plus a one-row (decode) matmul, with 1 and 2 threads;
# 3. prints a markdown table (GFLOPS, % of the peak for that thread count)
#    and saves it under bench/out/.
# Each number is the best of several runs: the machine is shared, so take
# the best of a few invocations too. FILTER (e.g. "smollm2") limits shapes.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out="$root/bench/out"
mkdir -p "$out"
min_sec=${1:-0.3}
filter=${2:-}
peak_src="$root/../shared/bench/c/peak.c"
[ -f "$peak_src" ] || { echo "missing $peak_src" >&2; exit 1; }
gcc -O2 -march=native -fopenmp "$peak_src" -o "$out/peak"
if [ ! -f "$root/build/libdlmcore.a" ]; then
    cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
cmake --build "$root/build" -j2 --target dlmcore >/dev/null
gcc -O2 -I "$root/src" -I "$root/build/gen" "$here/bench_gemm.c" "$root/build/libdlmcore.a" -lm -lpthread \
    -o "$out/bench_gemm"

declare -A PEAK
for t in 1 2; do
    line=$("$out/peak" "$t" 5 | grep avx512_fma_fp32 || true)
    p=$(echo "$line" | sed -n 's/.*max=\([0-9.]*\).*/\1/p')
    if [ -z "$p" ] || [ "$p" = "0.0" ]; then
        line=$("$out/peak" "$t" 5 | grep avx2_fma_fp32)
        p=$(echo "$line" | sed -n 's/.*max=\([0-9.]*\).*/\1/p')
    fi
    PEAK[$t]=$p
    echo "peak fp32 FMA, $t thread(s): $p GFLOPS" >&2
done

res="$out/gemm-results.txt"
: > "$res"
for t in 1 2; do
    "$out/bench_gemm" "$t" "$min_sec" "$filter" | tee -a "$res" >&2
done

ts=$(date -u +%Y%m%dT%H%M%SZ)
table="$out/gemm-$ts.md"
{
    echo "# dlm GEMM benchmark, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cpus, load $(cut -d' ' -f1-3 /proc/loadavg)"
    echo
    echo "FMA peak (fp32, best of 5): 1 thread ${PEAK[1]} GFLOPS, 2 threads ${PEAK[2]} GFLOPS. N = 512 rows unless noted."
    echo
    echo "| model | matmul | op | weights | O×I | 1 thread GFLOPS | % peak | 2 threads GFLOPS | % peak |"
    echo "|---|---|---|---|---|---|---|---|---|"
    awk -v p1="${PEAK[1]}" -v p2="${PEAK[2]}" '
        /^RESULT/ {
            key = $2 " | " $3 " | " $4 " | " $5 " | " substr($7, 3) "×" substr($8, 3)
            if ($4 == "matmul_N1") key = $2 " | " $3 " | matmul N=1 | " $5 " | " substr($7, 3) "×" substr($8, 3)
            thr = substr($9, 9); g = substr($10, 8)
            if (!(key in seen)) { order[++n] = key; seen[key] = 1 }
            val[key, thr] = g
        }
        END {
            for (i = 1; i <= n; i++) {
                k = order[i]; a = val[k, 1]; b = val[k, 2]
                pa = (a ~ /^[0-9.]+$/ && p1 > 0) ? sprintf("%.0f%%", 100 * a / p1) : ""
                pb = (b ~ /^[0-9.]+$/ && p2 > 0) ? sprintf("%.0f%%", 100 * b / p2) : ""
                printf "| %s | %s | %s | %s | %s |\n", k, a, pa, b, pb
            }
        }' "$res"
} > "$table"
cat "$table"
echo "saved $table" >&2
