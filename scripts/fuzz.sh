#!/bin/sh
# Run every libFuzzer target in BUILD for SECONDS each, from its seed corpus
# tests/fuzz/corpus/<name>/ (copied, so runs never modify the repo). Two
# targets run at a time on a 2-core machine. Any crash, leak or UB fails.
set -eu
build=$(cd "$1" && pwd)
secs=${2:-60}
src=$(cd "$(dirname "$0")/.." && pwd)
out=$build/fuzz-out
rm -rf "$out"
mkdir -p "$out"
status=0
run_one() {
    name=$1
    mkdir -p "$out/$name/corpus"
    if [ -d "$src/tests/fuzz/corpus/$name" ]; then
        cp -r "$src/tests/fuzz/corpus/$name/." "$out/$name/corpus/"
    fi
    dict=""
    [ -f "$src/tests/fuzz/$name.dict" ] && dict="-dict=$src/tests/fuzz/$name.dict"
    ( cd "$out/$name" && ASAN_OPTIONS=detect_leaks=1 "$build/$name" $dict \
        -max_total_time="$secs" -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
        corpus > log.txt 2>&1 )
}
pids=""
names=""
for f in "$build"/fuzz_*; do
    [ -x "$f" ] || continue
    name=$(basename "$f")
    names="$names $name"
done
set -- $names
while [ $# -gt 0 ]; do
    a=$1; shift
    b=""
    if [ $# -gt 0 ]; then b=$1; shift; fi
    run_one "$a" & pa=$!
    pb=""
    if [ -n "$b" ]; then run_one "$b" & pb=$!; fi
    for pair in "$a:$pa" "$b:$pb"; do
        n=${pair%%:*}; p=${pair#*:}
        [ -n "$n" ] || continue
        if wait "$p"; then
            echo "fuzz: $n ok ($(grep -h 'stat::number_of_executed_units' "$out/$n/log.txt" | awk '{print $2}') runs)"
        else
            echo "fuzz: $n FAILED; log follows" >&2
            tail -60 "$out/$n/log.txt" >&2
            status=1
        fi
    done
done
exit $status
