#!/usr/bin/env bash
# bench/api/build-llama-server.sh: build llama.cpp's llama-server (CPU only)
# from the llama.cpp source that npm node-llama-cpp ships
# (node_modules/node-llama-cpp/llama/gitRelease.bundle, a git bundle of the
# release it was built against), as the peer of bench/api/run.sh. The clone
# and the build live OUTSIDE the repository, in $DLM_BENCH_CACHE
# (~/.cache/dlm-bench by default); nothing of it is committed or linked into
# dlm. Prints the path of the llama-server binary. Takes ~15 min on 2 cores
# the first time, nothing afterwards.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cache=${DLM_BENCH_CACHE:-$HOME/.cache/dlm-bench}
nlc=${NODE_LLAMA_CPP:-$root/tests/ref/node_modules/node-llama-cpp}
bundle="$nlc/llama/gitRelease.bundle"
src="$cache/llama.cpp"
bin="$src/build/bin/llama-server"
[ -x "$bin" ] && { echo "$bin"; exit 0; }
[ -f "$bundle" ] || { echo "build-llama-server: $bundle missing (scripts/ref-deps.sh installs node-llama-cpp)" >&2; exit 1; }
mkdir -p "$cache"
[ -d "$src/.git" ] || git clone -q "$bundle" "$src" >&2
# CPU only, this machine's ISA (as dlm's kernels pick theirs at run time),
# no network code (no curl, no OpenSSL, no prebuilt web UI download)
cmake -S "$src" -B "$src/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
    -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF -DGGML_OPENMP=ON >&2
cmake --build "$src/build" -j "${JOBS:-2}" --target llama-server >&2
echo "$bin"
