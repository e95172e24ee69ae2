#!/usr/bin/env bash
# Sampling options out of range are usage errors (exit 2, the range named)
# before anything loads, for dlm prompt, and the same range and words for
# repl, synth and preference mine; "nan"/"inf" are not numbers to any
# option; a negative --threads is refused by every command that has it; the
# edges of each range are accepted.
set -euo pipefail
. "$DLM_SRC/tests/cli/lib.sh"
usage() {  # usage "EXPECTED FIRST LINE" ARGS...
    local want=$1; shift
    set +e
    "$DLM" prompt --base tiny "$@" x -n 2 > out.txt 2> err.txt; local rc=$?
    set -e
    [ $rc -eq 2 ] || fail "$*: exit $rc, expected 2: $(cat err.txt)"
    [ "$(head -1 err.txt)" = "dlm: error: $want" ] || fail "$*: $(head -1 err.txt)"
    [ ! -s out.txt ] || fail "$*: printed an answer"
}
usage "--temp: temperature must be in [0, 5] (0 = greedy), got -1" --temp -1
usage "--temp: temperature must be in [0, 5] (0 = greedy), got 5.5" --temp 5.5
usage "--top-p: top_p must be in (0, 1] (1 = off), got 2" --top-p 2
usage "--top-p: top_p must be in (0, 1] (1 = off), got 0" --top-p 0
usage "--top-k: top_k must be 0 or more, an integer (0 = off), got -3" --top-k -3
usage "--min-p: min_p must be in [0, 1] (0 = off), got 1.5" --min-p 1.5
usage "--repeat-penalty: repetition_penalty must be in (0, 100] (1 = off), got 0" --repeat-penalty 0
usage "option '--temp' expects a number, got 'nan'" --temp nan
usage "option '--top-p' expects a number, got 'inf'" --top-p inf
usage "option '--temp' expects a number, got '0.5x'" --temp 0.5x
usage "--threads must be >= 0 (0 = all cores)" --threads -1
# every command with --threads says the same (it meant "all cores" silently)
for c in api export perplexity preference repl synth train; do
    set +e
    "$DLM" $c x.dlm --threads -2 > out.txt 2> err.txt; rc=$?
    set -e
    [ $rc -eq 2 ] && [ "$(head -1 err.txt)" = "dlm: error: --threads must be >= 0 (0 = all cores)" ] ||
        fail "$c --threads -2: exit $rc: $(cat err.txt)"
done
# one range for every front end (infer/sample.h): repl, synth and
# preference mine refuse what prompt refuses, with the same words
for c in "repl --base tiny" "synth instructions x.dlm" "preference mine x.dlm"; do
    set +e
    "$DLM" $c --temp 5.5 > out.txt 2> err.txt; rc=$?
    set -e
    [ $rc -eq 2 ] && [ "$(head -1 err.txt)" = "dlm: error: --temp: temperature must be in [0, 5] (0 = greedy), got 5.5" ] ||
        fail "$c --temp 5.5: exit $rc: $(cat err.txt)"
done
# the edges are fine
"$DLM" prompt --base tiny x -n 2 --temp 0 --top-p 1 --top-k 0 --min-p 0 --repeat-penalty 1 > out.txt 2>&1 ||
    fail "edge values refused: $(cat out.txt)"
"$DLM" prompt --base tiny x -n 2 --temp 5 --top-p 0.01 --min-p 1 --repeat-penalty 100 > out.txt 2>&1 ||
    fail "edge values refused: $(cat out.txt)"
echo ok
