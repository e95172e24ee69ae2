# Shared set-up of the `dlm api` reference tests (r0801, r0802, r1004):
# source it with NAME set to the test's id and NODE_MODULE to the npm
# package it drives. It skips (exit 77 under DLM_REF_SKIP=1) or fails when
# node or the package is missing, makes a temp dir with its own DLM_HOME,
# and gives fail, serve ARGS... (a server on a free port, its URL in $url,
# its stderr in serve.err) and stop (SIGTERM, exit status 0 required).
set -euo pipefail
: "${DLM:?}" "${DLM_SRC:?}" "${NAME:?}" "${NODE_MODULE:?}"
skip_or_fail() {
    if [ "${DLM_REF_SKIP:-}" = "1" ]; then echo "$NAME: skipped: $1"; exit 77; fi
    echo "$NAME: FAILED: $1" >&2; exit 1
}
command -v node >/dev/null || skip_or_fail "node is not installed"
export NODE_PATH="$DLM_SRC/tests/ref/extra/node_modules:$DLM_SRC/tests/ref/node_modules"
node -e "require('$NODE_MODULE')" 2>/dev/null || skip_or_fail "npm $NODE_MODULE is not installed (tests/ref/package.json)"
T=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; rm -rf "$T"' EXIT
export DLM_HOME="$T/home"
cd "$T"
fail() { echo "$NAME: FAILED: $*" >&2; exit 1; }
serve() {
    : > url.txt   # the last server's URL must not be read as this one's
    "$DLM" api "$@" --port 0 > url.txt 2> serve.err &
    pid=$!
    for _ in $(seq 600); do [ -s url.txt ] && break; sleep 0.1; done
    url=$(cat url.txt)
    [ -n "$url" ] || fail "server did not start: $(cat serve.err)"
}
stop() { kill -TERM $pid; wait $pid || fail "server exit status $?"; pid=; }
