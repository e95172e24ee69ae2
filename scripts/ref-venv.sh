#!/bin/sh
# Make (once) and print the path of a pinned PyPI virtual environment for
# the reference tests and benchmarks. Test- and bench-time only: dlm never
# runs Python.
#
#   scripts/ref-venv.sh SET     prints the venv folder for
#                               tests/ref/venv/SET.txt (pinned requirements),
#                               creating or updating it when that file changed
#
# The venv lives outside the checkout, keyed by the requirement file's hash,
# so every clone and worktree on a machine shares it:
#   ${DLM_REF_VENV_ROOT:-/var/cache/dlm-ref-venv}/SET-<hash>
# Progress goes to stderr; stdout is the path alone. Exit 1 with a message
# when pip cannot install (e.g. no registry): callers fail, never skip quietly.
set -eu
set_name=${1:?usage: scripts/ref-venv.sh SET (a file tests/ref/venv/SET.txt)}
here=$(cd "$(dirname "$0")/.." && pwd)
req="$here/tests/ref/venv/$set_name.txt"
[ -f "$req" ] || { echo "ref-venv: no $req" >&2; exit 1; }
root=${DLM_REF_VENV_ROOT:-/var/cache/dlm-ref-venv}
hash=$(sha256sum "$req" | cut -c1-12)
dir="$root/$set_name-$hash"
if [ -f "$dir/.dlm-ok" ]; then
    echo "$dir"
    exit 0
fi
mkdir -p "$root"
# one installer at a time per set (parallel tests share the venv)
exec 9>"$root/.$set_name.lock"
flock 9
if [ ! -f "$dir/.dlm-ok" ]; then
    echo "ref-venv: installing $set_name (tests/ref/venv/$set_name.txt) into $dir" >&2
    rm -rf "$dir.tmp"
    python3 -m venv "$dir.tmp" >&2
    "$dir.tmp/bin/pip" install -q --disable-pip-version-check -r "$req" >&2 || {
        echo "ref-venv: pip could not install tests/ref/venv/$set_name.txt" >&2
        rm -rf "$dir.tmp"
        exit 1
    }
    # venvs hard-code their path: build in place under the final name
    rm -rf "$dir"
    mv "$dir.tmp" "$dir"
    sed -i "s#$dir.tmp#$dir#g" "$dir"/bin/* 2>/dev/null || true
    touch "$dir/.dlm-ok"
fi
echo "$dir"
