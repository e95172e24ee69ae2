#!/usr/bin/env bash
# bench/infer/build-llama-bench.sh: build llama.cpp's llama-bench natively
# (GGML_NATIVE: the AVX-512 / VNNI / BF16 build on a CPU that has them),
# from the llama.cpp source npm node-llama-cpp ships, in the same cache
# and build folder as bench/api/build-llama-server.sh (outside the
# repository; nothing committed or linked into dlm). Prints the binary's
# path. ~15 min on 2 cores the first time.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cache=${DLM_BENCH_CACHE:-$HOME/.cache/dlm-bench}
nlc=${NODE_LLAMA_CPP:-$root/tests/ref/node_modules/node-llama-cpp}
bundle="$nlc/llama/gitRelease.bundle"
src="$cache/llama.cpp"
bin="$src/build/bin/llama-bench"
[ -x "$bin" ] && { echo "$bin"; exit 0; }
[ -f "$bundle" ] || { echo "build-llama-bench: $bundle missing (scripts/ref-deps.sh installs node-llama-cpp)" >&2; exit 1; }
mkdir -p "$cache"
[ -d "$src/.git" ] || git clone -q "$bundle" "$src" >&2
cmake -S "$src" -B "$src/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
    -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF -DGGML_OPENMP=ON >&2
cmake --build "$src/build" -j "${JOBS:-2}" --target llama-bench >&2
echo "$bin"
