#!/usr/bin/env bash
# dlm show on broken documents: exit 1 with the located message.
set -euo pipefail
: "${DLM:?DLM must point at the dlm binary}"
export DLM_HOME=$(mktemp -d)
w=$(mktemp -d)
trap 'rm -rf "$DLM_HOME" "$w"' EXIT
cd "$w"
fail() { echo "FAIL: $*" >&2; exit 1; }
H='---
dlm_id: 01HZX3K4M5N6P7Q8R9S0T1V2W3
base_model: smollm2-135m'

expect() {  # expect FILE EXIT "exact first stderr line"
    set +e
    "$DLM" show "$1" > out.txt 2> err.txt; local rc=$?
    set -e
    [ "$rc" -eq "$2" ] || fail "$1: exit $rc, expected $2: $(cat err.txt)"
    [ "$(head -1 err.txt)" = "$3" ] || fail "$1:
  got:      $(head -1 err.txt)
  expected: $3"
    [ ! -s out.txt ] || fail "$1: printed to stdout on error"
}

printf '%s\n---\nIntro\n\n::Instruction::\n### Q\nq\n### A\na\n' "$H" > fence.dlm
expect fence.dlm 1 "dlm: error: fence.dlm:7:1: unknown section fence '::Instruction::'; valid types are ['prose', 'instruction', 'preference', 'image', 'audio']"

printf -- '---\ndlm_id: 01KTESTEXAMPLE000000000000\nbase_model: x\n---\n' > id.dlm
expect id.dlm 1 "dlm: error: id.dlm:2:1: dlm_id: Value error, dlm_id must be a 26-char Crockford base32 ULID, got '01KTESTEXAMPLE000000000000'"

printf '%s\nfoo: 1\n---\n' "$H" > key.dlm
expect key.dlm 1 "dlm: error: key.dlm:4:1: foo: Extra inputs are not permitted"

printf '%s\ndlm_version: 99\n---\n' "$H" > ver.dlm
expect ver.dlm 1 "dlm: error: ver.dlm:4:1: dlm_version 99 is newer than this parser (CURRENT_SCHEMA_VERSION=15); upgrade dlm or check the source's schema."

printf '%s\n---\n::instruction::\n### Q\nq\n### A\n\n' "$H" > qa.dlm
expect qa.dlm 1 "dlm: error: qa.dlm:8:1: ### A body is empty"

printf '%s\n---\n::preference::\n### Prompt\np\n### Rejected\nr\n' "$H" > pref.dlm
expect pref.dlm 1 "dlm: error: pref.dlm:8:1: expected \`### Chosen\` header alone on its line, got '### Rejected'"

printf '%s\ntraining:\n  lora_r: 0\n---\n' "$H" > range.dlm
expect range.dlm 1 "dlm: error: range.dlm:5:3: training.lora_r: Input should be greater than or equal to 1"

printf -- '---\ndlm_id: \xe2\x82\n' > enc.dlm
expect enc.dlm 1 "dlm: error: enc.dlm: invalid UTF-8 at byte 12: invalid continuation byte"

printf 'no frontmatter\n' > nofm.dlm
expect nofm.dlm 1 "dlm: error: nofm.dlm:1:1: expected '---' on line 1 to open frontmatter, got 'no frontmatter'"

printf '%s\n---\n```\ncode\n' "$H" > code.dlm
expect code.dlm 1 "dlm: error: code.dlm:5:1: unterminated triple-backtick code block in body"

expect missing.dlm 1 "dlm: error: cannot open 'missing.dlm': No such file or directory"

# -v adds the error class
set +e
"$DLM" -v show fence.dlm 2> err.txt
set -e
grep -q "^dlm: error: FenceError: fence.dlm:7:1: unknown section fence" err.txt || fail "-v: $(cat err.txt)"

# usage errors exit 2
set +e
"$DLM" show > /dev/null 2>&1; rc=$?
set -e
[ $rc -eq 2 ] || fail "show without PATH exit $rc"

# a corrupt manifest is reported, located
printf '%s\n---\nok\n' "$H" > good.dlm
mkdir -p "$DLM_HOME/store/01HZX3K4M5N6P7Q8R9S0T1V2W3"
echo '{"dlm_id": 1' > "$DLM_HOME/store/01HZX3K4M5N6P7Q8R9S0T1V2W3/manifest.json"
set +e
"$DLM" show good.dlm 2> err.txt; rc=$?
set -e
[ $rc -eq 1 ] || fail "corrupt manifest exit $rc"
grep -q "manifest.json: manifest is corrupt: invalid JSON" err.txt || fail "$(cat err.txt)"
echo "t0003 ok"
