#!/usr/bin/env bash
# The shipped embedded base (models/tiny.gguf), quality shown, not claimed:
#  1. `dlm prompt --base tiny --raw "The" --temp 0` continues with English-
#     looking text: printable ASCII letters and spaces, several distinct words
#     that occur in an English word list built from the examples and Q&A;
#  2. ChatML questions from its instruction set get their trained answers;
#  3. `dlm train` of examples/tutor.dlm (LoRA), then `dlm prompt` gives back
#     every trained answer at temperature 0.
# Label `slow` (it trains): `ctest -LE slow` skips it.
. "$(dirname "$0")/lib.sh"
gguf="$DLM_SRC/models/tiny.gguf"
[ -f "$gguf" ] || fail "models/tiny.gguf is missing (make tiny-base)"
unset DLM_TINY

# 1. raw continuation
text=$("$DLM" prompt --base tiny --raw "The" --temp 0 -n 48)
echo "raw: The$text"
letters=$(printf '%s' "$text" | tr -cd 'A-Za-z ' | wc -c)
total=$(printf '%s' "$text" | wc -c)
[ "$total" -gt 60 ] || fail "too little text ($total bytes)"
[ $((letters * 100)) -ge $((total * 85)) ] || fail "only $letters of $total bytes are ASCII letters or spaces"
# words of 3+ letters that are real English words (from the Q&A set and the slice)
cat "$DLM_SRC"/tools/tiny/qa.txt "$DLM_SRC"/tools/tiny/slice/*.txt | tr -cs 'A-Za-z' '\n' | tr 'A-Z' 'a-z' |
    sort -u > "$T/words"
printf '%s' "$text" | tr -cs 'A-Za-z' '\n' | tr 'A-Z' 'a-z' | awk 'length >= 3' | sort -u > "$T/gen"
known=$(comm -12 "$T/words" "$T/gen" | wc -l)
[ "$known" -ge 6 ] || fail "only $known distinct known English words in: $text"

# 2. the instruction-tuned shape: questions from its own Q&A set (tools/tiny/qa.txt);
#    at least two of three answers recalled (a tiny model, and other CPU levels
#    round differently at temperature 0)
hits=0
ask() {
    local got
    got=$("$DLM" prompt --base tiny "$1" --temp 0 -n 32)
    echo "chat: $1 -> $got"
    case "$got" in *"$2"*) hits=$((hits + 1)) ;; esac
}
ask "What is a noun?" "A noun is a word for a person, place or thing"
ask "Who wrote Moby-Dick?" "Herman Melville wrote Moby-Dick"
ask "What is a ship?" "A ship is a large boat"
[ $hits -ge 2 ] || fail "the base recalls only $hits of 3 answers of its instruction set"

# 3. train the tutor example, then its answers come back
cp "$DLM_SRC/examples/tutor.dlm" "$T/tutor.dlm"
"$DLM" train "$T/tutor.dlm" > "$T/train.log" 2>&1 || { cat "$T/train.log"; fail "dlm train"; }
tail -1 "$T/train.log"
check() {
    local got
    got=$("$DLM" prompt "$T/tutor.dlm" "$1" --temp 0 -n 48)
    echo "Q: $1 -> $got"
    case "$got" in *"$2"*) ;; *) fail "trained answer '$2' not in: $got" ;; esac
}
check "What makes water evaporate?" "Heat from the sun makes water evaporate into vapour."
check "What is condensation?" "Condensation is water vapour cooling back into liquid droplets"
check "Where does rain go after it falls?" "Rain runs off into rivers or soaks into the ground"
check "What are the kinds of precipitation?" "Rain, snow and hail are the kinds of precipitation."
echo "ok"
