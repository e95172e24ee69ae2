#!/usr/bin/env bash
# bench/api/build-llama-server.sh: llama-server, the peer of bench/api/run.sh
# (bench/build-llama.sh says how and where it is built). Prints its path.
exec "$(dirname "$0")/../build-llama.sh" llama-server
