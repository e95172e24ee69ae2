#!/bin/bash
# bench/lsp/run.sh — `dlm lsp` diagnostics latency on a 1 MB document
# (issue 32 target: < 50 ms): the wall time from writing didOpen to reading
# publishDiagnostics, through the real pipe, as an editor sees it (JSON
# decode of the 1 MB string, the parse with the schema and the body checks,
# the JSON reply), median of RUNS after a warm-up; once clean and once with
# two errors (a schema error and a bad fence: three parses, see
# src/lsp/diag.c). The server's CPU time (/proc, 10 ms ticks) is given
# too: it does not move with the load of a shared machine. With DLM_LSP_ORIGINAL (a folder holding the original
# dlm-lsp 0.1.1 and document-language-model 0.10.0, as r1202 unpacks them)
# and PY (a python with pygls, pydantic, PyYAML), the original is timed on
# the same documents beside it. Prints a markdown table.
#
#   bench/lsp/run.sh [DLM] [RUNS]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
dlm=${1:-$root/build/dlm}
runs=${2:-15}
cpu="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //') (family $(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'))"
echo "CPU: $cpu, $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg) at start"
echo
echo "| server | document | bytes | diagnostics | median ms | min ms | max ms | server CPU ms (median) | runs | target |"
echo "|---|---|---|---|---|---|---|---|---|---|"
row() {
    python3 -c 'import json, sys
name = sys.argv[1]
for doc, r in json.loads(sys.stdin.read()).items():
    tgt = ("< 50 ms: %s" % ("met" if r["median_ms"] < 50 else "not met")) if name == "dlm lsp" and doc == "clean" else ""
    print("| %s | %s | %d | %d | %.1f | %.1f | %.1f | %.0f | %d | %s |" % (name, doc, r["bytes"], r["diagnostics"],
          r["median_ms"], r["min_ms"], r["max_ms"], r["server_cpu_median_ms"], r["runs"], tgt))' "$1"
}
python3 "$here/latency.py" "$runs" "$dlm" lsp | row "dlm lsp"
if [ -n "${DLM_LSP_ORIGINAL:-}" ] && [ -n "${PY:-}" ]; then
    HOME=$(mktemp -d) PYTHONPATH=$DLM_LSP_ORIGINAL python3 "$here/latency.py" 3 "$PY" -m dlm_lsp | row "dlm-lsp 0.1.1 (original)"
fi
