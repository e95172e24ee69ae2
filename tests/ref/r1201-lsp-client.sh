#!/usr/bin/env bash
# r1201: `dlm lsp` driven by a real Language Server Protocol client
# (pytest-lsp 1.0.1, tests/ref/venv/lsp.txt) through initialize, didOpen /
# didChange / didSave / didClose, diagnostics for every error kind the CLI
# has (at the line and column `dlm show` prints, in UTF-16 units),
# completion, hover, code actions (checked by applying them and parsing the
# result with the CLI), the original dlm-lsp's custom requests and the
# dlm/trainingProgress notification, shutdown and exit. The tests live in
# tests/ref/lsp/test_lsp.py.
set -euo pipefail
: "${DLM:?}" "${DLM_SRC:?}"
skip() {
    if [ "${DLM_REF_SKIP:-}" = "1" ]; then echo "r1201: skipped: $1"; exit 77; fi
    echo "r1201: FAILED: $1" >&2; exit 1
}
venv=$("$DLM_SRC/scripts/ref-venv.sh" lsp) || skip "pytest-lsp could not be installed (scripts/ref-venv.sh lsp)"
set +e
DLM=$DLM "$venv/bin/python" -m pytest -q -p no:cacheprovider "$DLM_SRC/tests/ref/lsp/test_lsp.py"
rc=$?
set -e
# pytest exits 5 when it collected nothing: a broken import must not pass
[ $rc -ne 5 ] || { echo "r1201: FAILED: pytest ran no tests" >&2; exit 1; }
[ $rc -eq 0 ] || { echo "r1201: FAILED (pytest exit $rc)" >&2; exit 1; }
echo "r1201 ok"
