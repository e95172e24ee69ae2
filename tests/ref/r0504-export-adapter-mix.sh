#!/usr/bin/env bash
# r0504: dlm export --adapter-mix in llama.cpp (npm node-llama-cpp 3.21.1,
# CPU) and against numpy: the linear mix loaded alone (and merged) equals
# two adapter GGUFs loaded with scales 0.7/0.3; the svd mix's recorded
# relative Frobenius errors equal the discarded singular values' share and
# its factors numpy's truncation (tests/ref/export/check_admix.py).
set -euo pipefail
: "${DLM:?}" "${DLM_SRC:?}"
skip_or_fail() {
    if [ "${DLM_REF_SKIP:-}" = "1" ]; then echo "r0504: skipped: $1"; exit 77; fi
    echo "r0504: FAILED: $1" >&2; exit 1
}
/usr/bin/python3 -c 'import numpy' 2>/dev/null || skip_or_fail "/usr/bin/python3 with numpy is required"
command -v node >/dev/null || skip_or_fail "node is not installed"
[ -f "$DLM_SRC/tests/ref/node_modules/node-llama-cpp/dist/index.js" ] ||
    skip_or_fail "node-llama-cpp is not installed (run scripts/ref-deps.sh)"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
/usr/bin/python3 "$DLM_SRC/tests/ref/export/check_admix.py" "$T"
