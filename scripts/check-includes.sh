#!/bin/sh
# The include graph is the architecture: a folder of src/ may include its
# own headers and those of the folders before it in LAYERS, never one after
# it. Fails (exit 1) naming each upward include. Run by CTest (lint/includes)
# and so by CI; docs/architecture.md explains the order.
set -eu
LAYERS="util kern doc store media weights vision tokens decoder grad adapter infer export share api run lsp cmd"
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root/src"
rank() { i=0; for l in $LAYERS; do [ "$l" = "$1" ] && { echo $i; return; }; i=$((i + 1)); done; echo -1; }
bad=0
for dir in */; do
    dir=${dir%/}
    r=$(rank "$dir")
    if [ "$r" -lt 0 ]; then echo "check-includes: src/$dir is not in LAYERS (scripts/check-includes.sh)"; bad=1; continue; fi
    for f in $(find "$dir" -name '*.[ch]' -o -name '*.inc'); do
        for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([a-z_]*\)\/[^"]*".*/\1/p' "$f" | sort -u); do
            ri=$(rank "$inc")
            [ "$ri" -lt 0 ] && continue
            if [ "$ri" -gt "$r" ]; then
                grep -n "#[[:space:]]*include[[:space:]]*\"$inc/" "$f" | sed "s|^|check-includes: src/$f:|;s|\$|  (upward: $dir may not include $inc)|"
                bad=1
            fi
        done
    done
done
[ "$bad" = 0 ] && echo "check-includes: ok ($LAYERS)"
exit $bad
