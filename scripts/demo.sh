#!/usr/bin/env bash
# `make demo` — the main job end to end on the embedded base, from a fresh
# clone (Debian 12, as root), on 2 cores in a few minutes:
#
#   1. build dependencies only (scripts/deps.sh --build: no torch, no node)
#   2. build the dlm binary (Release)
#   3. dlm init        a tutor document, its store in a temporary DLM_HOME
#   4. dlm train       LoRA on the embedded base `tiny` (models/tiny.gguf)
#   5. dlm prompt      asks a trained question; the trained answer must come back
#   6. dlm export      GGUF + Ollama Modelfile
#
# Each step prints how long it took. Exit 0 only when every step passed.
# DEMO_KEEP=1 keeps the temporary folder.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
cd "$src"
jobs=$(nproc 2>/dev/null || echo 2)
t_all=$(date +%s)
t_step=$t_all
times=()
step() { echo; echo "==> demo: $*"; t_step=$(date +%s); }
done_step() { local s=$(( $(date +%s) - t_step )); times+=("$(printf '%-34s %4ss' "$1" "$s")"); echo "    ($1: ${s}s)"; }
fail() { echo "demo: FAILED: $*" >&2; exit 1; }

step "1/6 build dependencies (scripts/deps.sh --build)"
scripts/deps.sh --build --check || scripts/deps.sh --build
done_step "dependencies"

step "2/6 build dlm"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$jobs" --target dlm 2>&1 | tail -1
DLM=$src/build/dlm
done_step "build"

[ -f models/tiny.gguf ] || fail "models/tiny.gguf is missing (make tiny-base rebuilds it)"
work=$(mktemp -d /tmp/dlm-demo.XXXXXX)
[ "${DEMO_KEEP:-0}" = 1 ] || trap 'rm -rf "$work"' EXIT
export DLM_HOME=$work/home
doc=$work/tutor.dlm

step "3/6 dlm init $doc --template tutor"
# The template as a newcomer gets it: its training settings suit `tiny`.
"$DLM" init "$doc" --template tutor --base tiny
done_step "init"

step "4/6 dlm train (LoRA on the embedded base tiny)"
"$DLM" train "$doc"
done_step "train"

step "5/6 dlm prompt"
q="What makes water evaporate?"
want="Heat from the sun makes water evaporate into vapour."
echo "    Q: $q"
echo "    base alone:    $("$DLM" prompt "$doc" "$q" --temp 0 -n 40 --no-adapter 2>/dev/null | head -c 300)"
got=$("$DLM" prompt "$doc" "$q" --temp 0 -n 40)
echo "    with adapter:  $got"
case "$got" in
    *"$want"*) echo "    the trained answer came back" ;;
    *) fail "the trained answer ('$want') did not come back" ;;
esac
done_step "prompt"

step "6/6 dlm export --target ollama"
"$DLM" export "$doc" --target ollama
found=$(find "$DLM_HOME" \( -name '*.gguf' -o -name Modelfile \) -newer "$doc" | sort)
[ -n "$found" ] || fail "dlm export wrote no GGUF / Modelfile"
echo "$found" | sed 's/^/    wrote /'
echo "$found" | grep -q '\.gguf$' || fail "no GGUF written"
echo "$found" | grep -q '/Modelfile$' || fail "no Modelfile written"
done_step "export"

echo
echo "==> demo: all steps passed in $(( $(date +%s) - t_all ))s"
printf '    %s\n' "${times[@]}"
echo
echo "The binary is $DLM. To have 'dlm' on your PATH:"
echo "    make install                    # /usr/local/bin/dlm (PREFIX=/usr/local)"
echo "    make install PREFIX=\$HOME/.local # ~/.local/bin/dlm, no root needed"
