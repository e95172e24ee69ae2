#!/bin/sh
# Install every Debian package dlm's build, tests and benchmarks need.
#
#   scripts/deps.sh           install what is missing (apt-get, as root)
#   scripts/deps.sh --check   exit 0 if everything is installed, 1 if not (quiet)
#   scripts/deps.sh --build [--check]
#                             only what building dlm and `make demo` need
#                             (compiler, cmake, the -dev libraries): no
#                             clang, torch or node, so a fresh machine is quick
#
# Idempotent: packages already installed are skipped. Not root: prints the
# exact command to run and exits non-zero. Later features add packages here,
# never anywhere else.
set -eu

PKGS="
build-essential cmake pkg-config git clang libclang-rt-14-dev
libyaml-dev libjansson-dev libpcre2-dev libutf8proc-dev libzstd-dev
libarchive-dev libsqlite3-dev libcurl4-openssl-dev libsodium-dev
libmicrohttpd-dev libedit-dev
libopenblas-dev libsimde-dev
python3 python3-numpy python3-torch python3-zstandard python3-jinja2
tmux curl chromium minisign
golang-go
libopenmpi-dev openmpi-bin
"

BUILD_PKGS="
build-essential cmake pkg-config
libyaml-dev libjansson-dev libpcre2-dev libutf8proc-dev libzstd-dev
libarchive-dev libsqlite3-dev libcurl4-openssl-dev libsodium-dev
libmicrohttpd-dev libedit-dev
libopenblas-dev libsimde-dev
"

if [ "${1:-}" = "--build" ]; then
    PKGS=$BUILD_PKGS
    shift
else
    # node and npm (test-time references only): any install will do, e.g.
    # NodeSource's nodejs, which bundles npm and conflicts with Debian's npm.
    command -v node >/dev/null 2>&1 || PKGS="$PKGS nodejs"
    command -v npm >/dev/null 2>&1 || PKGS="$PKGS npm"
fi

missing=""
for p in $PKGS; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done

if [ "${1:-}" = "--check" ]; then
    [ -z "$missing" ] && exit 0
    exit 1
fi

if [ -z "$missing" ]; then
    echo "deps: all packages installed"
    exit 0
fi

cmd="apt-get install -y --no-install-recommends$missing"
if [ "$(id -u)" != "0" ]; then
    echo "deps: missing packages:$missing" >&2
    echo "deps: run as root:  apt-get update && $cmd" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
# shellcheck disable=SC2086
apt-get install -y --no-install-recommends $missing
echo "deps: installed:$missing"
