#!/usr/bin/env bash
# t0101: `dlm tokenize` end to end on a small committed tokenizer
# (tests/fuzz/corpus/fuzz_tokenizer_json/qwen2.json: the 256 byte tokens,
# merges Ġt=256 he=257 Ġthe=258 in=259 ĠĠ=260 ca=261 12=262, <|im_start|>=263
# special, <tool>=264, Qwen2 regex + NFC). Expected ids worked out by hand.
set -euo pipefail
: "${DLM:?}" "${DLM_SRC:?}"
export DLM_HOME=$(mktemp -d)
trap 'rm -rf "$DLM_HOME"' EXIT
tk=$DLM_SRC/tests/fuzz/corpus/fuzz_tokenizer_json/qwen2.json
fail=0
check() { # label, expected, actual
    if [ "$2" != "$3" ]; then echo "t0101: $1: expected [$2], got [$3]" >&2; fail=1; fi
}
check "plain" "116 257 32 261 116" "$("$DLM" tokenize --tokenizer "$tk" "the cat")"
check "merges" "258" "$("$DLM" tokenize --tokenizer "$tk" " the")"
check "stdin" "258" "$(printf ' the' | "$DLM" tokenize --tokenizer "$tk")"
check "dash" "258" "$(printf ' the' | "$DLM" tokenize --tokenizer "$tk" -)"
check "special" "263 120" "$("$DLM" tokenize --tokenizer "$tk" "<|im_start|>x")"
check "no-special" "60 124 105 109 95 115 116 97 114 116 124 62 120" \
      "$("$DLM" tokenize --no-special --tokenizer "$tk" "<|im_start|>x")"
check "json" "[49,50,32,259]" "$("$DLM" tokenize --json --tokenizer "$tk" "12 in")"
check "json -v" '{"ids":[49,50,32,259],"tokens":["1","2","Ġ","in"]}' \
      "$("$DLM" tokenize --json -v --tokenizer "$tk" "12 in")"
check "lines" $'[116,257]\n[]\n[261,116]' "$(printf 'the\n\ncat\n' | "$DLM" tokenize --lines --tokenizer "$tk")"
check "decode" " the ca" "$(echo "[258, 32, 261]" | "$DLM" tokenize --decode --tokenizer "$tk")"
check "decode lines" $'" the"\n"<|im_start|>x"' \
      "$(printf '258\n263 120\n' | "$DLM" tokenize --decode --lines --tokenizer "$tk")"
check "skip-special" '"x"' "$(printf '263 120\n' | "$DLM" tokenize --decode --skip-special --lines --tokenizer "$tk")"
# NFC: e + combining acute becomes é (C3 A9): two byte tokens.
check "nfc" "195 169" "$("$DLM" tokenize --tokenizer "$tk" $'e\xcc\x81')"
# An HF model folder as PATH.
mkdir -p "$DLM_HOME/model"
cp "$tk" "$DLM_HOME/model/tokenizer.json"
check "folder" "258" "$("$DLM" tokenize "$DLM_HOME/model" " the")"

# Failures: exit codes and messages.
expect_fail() { # label, code, pattern, command...
    local label=$1 code=$2 pat=$3; shift 3
    set +e; err=$("$@" 2>&1 >/dev/null); rc=$?; set -e
    if [ $rc != "$code" ] || ! grep -q -- "$pat" <<< "$err"; then
        echo "t0101: $label: expected exit $code and '$pat', got $rc: $err" >&2; fail=1
    fi
}
expect_fail "no tokenizer" 2 "which tokenizer" "$DLM" tokenize
expect_fail "two texts" 2 "one TEXT" "$DLM" tokenize --tokenizer "$tk" a b
expect_fail "missing gguf" 1 "cannot open" "$DLM" tokenize --tokenizer "$DLM_HOME/x.gguf" a
# a tokenizer rebuilt from GGUF metadata gives the tokenizer.json's ids
fx="$DLM_SRC/tests/ref/model/fixtures"
for m in qwen2-f32:qwen2-f32.f16.gguf llama-bf16:llama-bf16.q8_0.gguf; do
    a=$("$DLM" tokenize --tokenizer "$fx/${m%%:*}/tokenizer.json" "Hello <|im_end|> world 123")
    b=$("$DLM" tokenize --tokenizer "$fx/${m##*:}" "Hello <|im_end|> world 123")
    c=$("$DLM" tokenize --base "$fx/${m##*:}" "Hello <|im_end|> world 123")
    if [ "$a" != "$b" ] || [ "$a" != "$c" ]; then echo "t0101: gguf ids differ: $a / $b / $c" >&2; fail=1; fi
done
expect_fail "missing file" 1 "cannot open" "$DLM" tokenize --tokenizer "$DLM_HOME/none.json" a
expect_fail "empty folder" 1 "no tokenizer.json" "$DLM" tokenize "$DLM_HOME" a
printf '{"model": {"type": "Unigram"}}' > "$DLM_HOME/bad.json"
expect_fail "unigram" 1 "not supported" "$DLM" tokenize --tokenizer "$DLM_HOME/bad.json" a
printf '{"model": ' > "$DLM_HOME/trunc.json"
expect_fail "bad json" 1 "invalid JSON" "$DLM" tokenize --tokenizer "$DLM_HOME/trunc.json" a
expect_fail "bad utf8" 1 "not valid UTF-8" "$DLM" tokenize --tokenizer "$tk" $'a\xff'
expect_fail "bad ids" 1 "out of range" sh -c "echo 99999 | '$DLM' tokenize --decode --tokenizer '$tk'"
[ $fail = 0 ] && echo "t0101: ok"
exit $fail
