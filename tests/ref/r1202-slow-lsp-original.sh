#!/usr/bin/env bash
# r1202: `dlm lsp` beside the original dlm-lsp 0.1.1 on the same documents
# (tests/ref/lsp/test_original.py): every diagnostic the original gives,
# dlm gives too, at the same or a more precise line; dlm/listBaseModels and
# dlm/documentState return the original's fields (and the same values for
# the bases both registries have). The original's wheels (dlm-lsp==0.1.1,
# document-language-model==0.10.0) are fetched with --no-deps: the
# package's declared dependencies pull torch, and its language server's
# import path needs only pydantic, PyYAML and python-ulid (pinned in
# tests/ref/venv/lsp.txt with pygls and lsprotocol).
set -euo pipefail
: "${DLM:?}" "${DLM_SRC:?}"
skip() {
    if [ "${DLM_REF_SKIP:-}" = "1" ]; then echo "r1202: skipped: $1"; exit 77; fi
    echo "r1202: FAILED: $1" >&2; exit 1
}
venv=$("$DLM_SRC/scripts/ref-venv.sh" lsp) || skip "the lsp venv could not be installed (scripts/ref-venv.sh lsp)"
orig=${DLM_REF_VENV_ROOT:-/var/cache/dlm-ref-venv}/lsp-original-0.1.1
if [ ! -f "$orig/.dlm-ok" ]; then
    rm -rf "$orig.tmp"
    mkdir -p "$orig.tmp/wheels"
    "$venv/bin/pip" download -q --disable-pip-version-check --no-deps -d "$orig.tmp/wheels" \
        dlm-lsp==0.1.1 document-language-model==0.10.0 >&2 || skip "pip could not fetch the original's wheels"
    "$venv/bin/python" -c 'import sys, zipfile, glob
for w in glob.glob(sys.argv[1] + "/wheels/*.whl"): zipfile.ZipFile(w).extractall(sys.argv[1] + "/site")' "$orig.tmp"
    rm -rf "$orig"
    mv "$orig.tmp" "$orig"
    touch "$orig/.dlm-ok"
fi
set +e
DLM=$DLM DLM_LSP_ORIGINAL=$orig/site "$venv/bin/python" -m pytest -q -p no:cacheprovider \
    "$DLM_SRC/tests/ref/lsp/test_original.py"
rc=$?
set -e
[ $rc -ne 5 ] || { echo "r1202: FAILED: pytest ran no tests" >&2; exit 1; }
[ $rc -eq 0 ] || { echo "r1202: FAILED (pytest exit $rc)" >&2; exit 1; }
echo "r1202 ok"
