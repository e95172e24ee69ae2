#!/usr/bin/env bash
# bench/infer/build-llama-bench.sh: llama-bench, the peer of
# bench/infer/pp_native.sh (bench/build-llama.sh says how and where it is
# built). Prints its path.
exec "$(dirname "$0")/../build-llama.sh" llama-bench
