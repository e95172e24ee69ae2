#!/usr/bin/env bash
# bench/build-llama.sh TARGET: build one llama.cpp program (llama-server,
# llama-bench, llama-mtmd-cli for tests/ref/r1901-r1902, ...) as a benchmark
# or reference peer, from the llama.cpp source that npm
# node-llama-cpp ships (node_modules/node-llama-cpp/llama/gitRelease.bundle,
# a git bundle of the release it was built against). CPU only, this
# machine's ISA (GGML_NATIVE: the AVX-512 / VNNI / BF16 build on a CPU that
# has them, as dlm's kernels pick theirs at run time), no network code (no
# curl, no OpenSSL, no prebuilt web UI download). The clone and the build
# live OUTSIDE the repository, in $DLM_BENCH_CACHE (~/.cache/dlm-bench by
# default), one build folder for every target; nothing of it is committed
# or linked into dlm. Prints the binary's path. ~15 min on 2 cores the first
# time, nothing afterwards.
set -euo pipefail
target=${1:?usage: bench/build-llama.sh TARGET (llama-server, llama-bench, llama-mtmd-cli, ...)}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
cache=${DLM_BENCH_CACHE:-$HOME/.cache/dlm-bench}
nlc=${NODE_LLAMA_CPP:-$root/tests/ref/node_modules/node-llama-cpp}
bundle="$nlc/llama/gitRelease.bundle"
src="$cache/llama.cpp"
bin="$src/build/bin/$target"
[ -x "$bin" ] && { echo "$bin"; exit 0; }
[ -f "$bundle" ] || { echo "build-llama: $bundle missing (scripts/ref-deps.sh installs node-llama-cpp)" >&2; exit 1; }
mkdir -p "$cache"
[ -d "$src/.git" ] || git clone -q "$bundle" "$src" >&2
cmake -S "$src" -B "$src/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
    -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF -DGGML_OPENMP=ON >&2
cmake --build "$src/build" -j "${JOBS:-2}" --target "$target" >&2
echo "$bin"
