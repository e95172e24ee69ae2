#!/usr/bin/env bash
# The embedded base's recipe, shortened (tools/tiny/recipe-short.json on the
# committed corpus slice): run twice, with 1 and with 2 threads, and the
# GGUF bytes must be equal. Then the result is an ordinary base: dlm loads
# it, its GGUF tokenizer gives the ids of the tokenizer.json the recipe wrote
# (the report states fp32, the precision the pinned bytes are trained in;
# a recipe with another precision is refused),
# and dlm's perplexity of the held-out text is close to the recipe's own
# (f32) figure, which would not hold with a wrong Q/K row order.
. "$(dirname "$0")/lib.sh"
: "${DLM_BUILD:?}"
[ -x "$DLM_BUILD/tiny-recipe" ] || fail "$DLM_BUILD/tiny-recipe not built"
mk="$DLM_SRC/tools/tiny/make-tiny.sh"

TINY_THREADS=1 "$mk" --short --work "$T/w1" --out "$T/a.gguf" > "$T/log1" 2>&1 || { cat "$T/log1"; fail "recipe run 1"; }
TINY_THREADS=2 "$mk" --short --work "$T/w2" --out "$T/b.gguf" > "$T/log2" 2>&1 || { cat "$T/log2"; fail "recipe run 2"; }
cmp "$T/a.gguf" "$T/b.gguf" || fail "two runs of the recipe wrote different bytes"
cmp "$T/w1/tokenizer/tokenizer.json" "$T/w2/tokenizer/tokenizer.json" || fail "tokenizer.json differs"
head -c 4 "$T/a.gguf" | grep -q GGUF || fail "not a GGUF"
grep -q '"parameters": 106816' "$T/w1/report.json" || { cat "$T/w1/report.json"; fail "unexpected parameter count"; }
# the pinned bytes are fp32's: the report says so, and a recipe asking for anything else is refused
grep -q '"precision": "fp32"' "$T/w1/report.json" || { cat "$T/w1/report.json"; fail "the report does not state fp32"; }
sed 's/"precision": "fp32"/"precision": "bf16"/' "$DLM_SRC/tools/tiny/recipe-short.json" > "$T/bf16.json"
if out=$("$DLM_BUILD/tiny-recipe" build --recipe "$T/bf16.json" --corpus /dev/null --qa /dev/null --work "$T/w3" \
    --out "$T/c.gguf" 2>&1); then fail "a bf16 recipe was accepted"; fi
grep <<<"$out" -q "'precision' must be \"fp32\"" || fail "bf16 recipe: $out"

# tokenizer: GGUF metadata == tokenizer.json (+ config), specials included
text=$'Call me Ishmael. Some years ago\xe2\x80\x94never mind how long\n<|im_start|>user\nHi 1999<|im_end|>\n'
a=$("$DLM" tokenize --tokenizer "$T/a.gguf" --json "$text")
b=$("$DLM" tokenize --tokenizer "$T/w1/tokenizer/tokenizer.json" --json "$text")
[ "$a" = "$b" ] || fail "GGUF ids $a != tokenizer.json ids $b"
case "$a" in *510,*,511,*) ;; *) fail "ChatML specials not parsed: $a" ;; esac

# dlm reads it as a llama base: perplexity on the held-out text close to the recipe's
want=$(sed -n 's/.*"heldout_ppl_final": \([0-9.]*\).*/\1/p' "$T/w1/report.json")
got=$("$DLM" perplexity --base "$T/a.gguf" "$T/w1/heldout.txt" --ctx 64 --json | sed -n 's/.*"ppl": *\([0-9.]*\).*/\1/p')
[ -n "$want" ] && [ -n "$got" ] || fail "missing perplexities (recipe '$want', dlm '$got')"
awk -v a="$got" -v b="$want" 'BEGIN { r = a / b; exit !(r > 0.9 && r < 1.1) }' ||
    fail "dlm perplexity $got is far from the recipe's $want"
# and generates from it
"$DLM" prompt --base "$T/a.gguf" --raw "The" --temp 0 -n 8 > "$T/gen" || fail "prompt on the recipe's GGUF"
echo "ok: recipe twice -> same $(stat -c %s "$T/a.gguf") bytes; ppl dlm $got vs recipe $want"
