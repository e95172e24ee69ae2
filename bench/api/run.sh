#!/usr/bin/env bash
# bench/api/run.sh: the loopback load test (load.py: 16 streaming clients x 8
# requests by default) against `dlm api --base tiny` with --parallel 8 and
# --parallel 1, side by side. Bounded: each run has a hard time limit.
#   DLM=build/dlm bench/api/run.sh [CLIENTS REQUESTS MAX_TOKENS]
set -euo pipefail
DLM=${DLM:-build/dlm}
here=$(cd "$(dirname "$0")" && pwd)
C=${1:-16} R=${2:-8} N=${3:-32}
T=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; rm -rf "$T"' EXIT
export DLM_HOME="$T/home"
echo "| --parallel | requests | errors | gen tok/s | TTFT p50 ms | TTFT p99 ms | per-token p50 ms | per-token p99 ms |"
echo "|---|---|---|---|---|---|---|---|"
for P in 8 1; do
    : > "$T/url"
    "$DLM" api --base tiny --port 0 --parallel $P --queue 64 --threads "${THREADS:-1}" > "$T/url" 2> "$T/err" &
    pid=$!
    for _ in $(seq 100); do [ -s "$T/url" ] && break; sleep 0.1; done
    timeout 600 python3 "$here/load.py" "$(cat "$T/url")" --clients "$C" --requests "$R" --max-tokens "$N" > "$T/out.json" || true
    kill -TERM $pid; wait $pid || true; pid=
    python3 - "$P" "$T/out.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[2]))
print(f"| {sys.argv[1]} | {r['requests']} | {r['errors']} | {r['tokens_per_s']} | {r['ttft_ms_p50']} | {r['ttft_ms_p99']} | {r['token_ms_p50']} | {r['token_ms_p99']} |")
PY
done
