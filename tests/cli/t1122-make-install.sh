#!/usr/bin/env bash
# Issue 30 point 2: `make install` (PREFIX, default /usr/local; DESTDIR
# honoured) through CMake's install rules: into a temp DESTDIR the binary
# lands in PREFIX/bin and the base tiny in PREFIX/share/dlm, and the
# installed binary runs from there (it finds tiny beside it, -v says
# which file). The Makefile's target is that same `cmake --install`, and
# `make demo` ends by saying how to put dlm on PATH.
set -euo pipefail
. "$DLM_SRC/tests/cli/lib.sh"
B=$(cd "$(dirname "$DLM")" && pwd)
DESTDIR="$T/stage" cmake --install "$B" --prefix /opt/dlmx > install.log || fail "cmake --install: $(cat install.log)"
P="$T/stage/opt/dlmx"
[ -x "$P/bin/dlm" ] || fail "no $P/bin/dlm: $(cat install.log)"
cmp -s "$P/share/dlm/tiny.gguf" "$DLM_SRC/models/tiny.gguf" || fail "share/dlm/tiny.gguf missing or different"
"$P/bin/dlm" --version | grep -q "^dlm " || fail "installed --version"
# the installed binary's tiny is its own copy, and it answers as the build's
cd /
"$P/bin/dlm" -v prompt --base tiny --raw "The" -n 6 --temp 0 > "$T/got.txt" 2> "$T/err.txt" ||
    fail "installed prompt: $(cat "$T/err.txt")"
grep -qF "base tiny: $P/bin/../share/dlm/tiny.gguf" "$T/err.txt" ||
    fail "installed binary used another tiny: $(grep 'base tiny' "$T/err.txt")"
"$DLM" prompt --base tiny --raw "The" -n 6 --temp 0 > "$T/want.txt" 2>/dev/null
cmp -s "$T/got.txt" "$T/want.txt" || fail "installed answer differs: $(cat "$T/got.txt") vs $(cat "$T/want.txt")"
cd "$T"
# make install is that rule, with PREFIX defaulting to /usr/local and DESTDIR passed on
make -n -C "$DLM_SRC" install DESTDIR=/x/stage PREFIX=/y > make.txt 2>&1 || fail "make -n install: $(cat make.txt)"
grep -qF 'DESTDIR="/x/stage" cmake --install build --prefix "/y"' make.txt || fail "make install recipe: $(cat make.txt)"
make -n -C "$DLM_SRC" install > make.txt 2>&1
grep -qF 'DESTDIR="" cmake --install build --prefix "/usr/local"' make.txt || fail "default PREFIX: $(cat make.txt)"
grep -q "make install" "$DLM_SRC/scripts/demo.sh" && grep -q "make install" "$DLM_SRC/README.md" || fail "demo/README do not say make install"
echo ok
