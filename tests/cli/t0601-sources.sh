#!/usr/bin/env bash
# training.sources end to end: directive errors carry the .dlm's file:line
# and a hint; `show --sources` lists verdicts; a train on a tree with
# planted secrets (default excludes, an ignore rule, a symlink out of the
# root), a binary, a non-UTF-8 and an oversized file trains on the text
# files only: no secret byte anywhere in the store (replay corpus, manifest,
# records); the run records each kept file's sha256 (checked with
# sha256sum) and `dlm show` summarises the directives.
set -euo pipefail
. "$DLM_SRC/tests/cli/lib.sh"
write_doc base.dlm 2
head -n 12 base.dlm | grep -v '^---$' > fm.yaml   # frontmatter lines
mk() { # FILE SOURCES_YAML...
    local f=$1; shift
    { echo ---; cat fm.yaml; echo "  sources:"; printf '%s\n' "$@"; echo ---; echo "Corpus notes."; } > "$f"
}
S=SECRET-7f3a9c01
mkdir -p corpus/src corpus/.dlm corpus/private corpus/node_modules/x
printf '%s\n' "$S env" > corpus/.env
printf '%s\n' "$S rsa" > corpus/src/id_rsa
printf '%s\n' "$S pem" > corpus/src/server.pem
printf '%s\n' "$S yml" > corpus/secrets.yml
printf '%s\n' "$S priv" > corpus/private/pw.txt
printf '%s\n' "$S nm" > corpus/node_modules/x/i.js
printf '%s\n' "$S out" > outside.txt
ln -s ../../outside.txt corpus/src/link.txt
printf 'private/\n' > corpus/.dlm/ignore
printf 'bin\0%s\n' "$S" > corpus/blob.dat
printf 'caf\xe9 %s\n' "$S" > corpus/latin1.txt
printf 'named %s\n' "$S" > "corpus/caf$(printf '\xe9').txt"      # a file name that is not UTF-8
{ for i in $(seq 1 200); do echo "line $i of a long file $S"; done; } > corpus/big.txt
cat > corpus/src/main.c <<'C'
/* The capital of France is Paris. */
int main(void) { return 0; }
C
printf '# Notes\r\n\r\nBerlin is the capital of Germany.\r\n' > corpus/notes.md

# errors: missing path, strict escape (file:line of the directive + hint)
mk e1.dlm "    - path: nope"
set +e
out=$("$DLM" show e1.dlm --sources 2>&1); rc=$?
set -e
[ $rc = 1 ] || fail "missing path: rc $rc"
grep <<<"$out" -q "e1.dlm:13: directive path $T/nope: path does not exist" || fail "missing path message: $out"
grep <<<"$out" -q "^hint:" || fail "no hint: $out"
mk e2.dlm "    - path: /usr/include/stdio.h" && sed -i 's/^training:/training:\n  sources_policy: strict/' e2.dlm
set +e
out=$("$DLM" show e2.dlm --sources 2>&1); rc=$?
set -e
[ $rc = 1 ] || fail "strict policy: rc $rc"
grep <<<"$out" -q "e2.dlm:14: directive path /usr/include/stdio.h escapes strict-policy root $T" || fail "policy message: $out"
out=$("$DLM" -v show e2.dlm --sources 2>&1 || true)
grep <<<"$out" -q DirectivePolicyError || fail "kind not shown with -v: $out"
set +e
"$DLM" train e1.dlm --max-steps 1 -q >/dev/null 2>&1; rc=$?
set -e
[ $rc = 1 ] || fail "train with a missing directive path must fail, rc $rc"

mk doc.dlm "    - path: corpus" "      max_bytes_per_file: 2000"
"$DLM" show doc.dlm --sources > list.txt
grep -q "kept .* src/main.c" list.txt || fail "main.c not kept: $(cat list.txt)"
grep -q "kept .* notes.md" list.txt || fail "notes.md not kept"
for f in .env src/id_rsa src/server.pem secrets.yml private/pw.txt node_modules/x/i.js; do
    grep -q "skip .*excluded .* $f " list.txt || fail "$f not excluded: $(cat list.txt)"
done
grep -q "private/pw.txt  (.dlm/ignore:1 'private/')" list.txt || fail "ignore rule not named with file:line"
grep -q "symlink_escape src/link.txt" list.txt || fail "symlink escape"
grep -q "binary  *blob.dat" list.txt || fail "binary"
grep -q "not_utf8 *latin1.txt" list.txt || fail "latin1"
LC_ALL=C grep -qa "not_utf8 .*(the file name is not UTF-8)" list.txt || fail "non-UTF-8 file name"
grep -q "too_large *big.txt" list.txt || fail "too large"
grep -q "total: 14 file(s) seen, 2 kept" list.txt || fail "totals: $(tail -1 list.txt)"

"$DLM" train doc.dlm --max-steps 2 -q >/dev/null
store=$DLM_HOME/store/$ID
# the replay corpus is zstd frames: decompress it (the zstd CLI) before grepping
zstd -dcq "$store/replay/corpus.zst" > replay.txt
[ -s replay.txt ] || fail "empty replay corpus"
if grep -qa "$S" replay.txt; then fail "a secret reached the replay corpus"; fi
if grep -rqa "$S" "$store"; then fail "a secret reached the store: $(grep -rla "$S" "$store")"; fi
grep -qa "The capital of France is Paris" replay.txt || fail "source text is not in the replay corpus"
grep -qa "# source: notes.md" replay.txt || fail "notes.md section is not in the replay corpus"
run=$store/adapter/versions/v0001/training_run.json
python3 - "$run" "$(sha256sum corpus/src/main.c | cut -c1-64)" <<'PY' || fail "training_run.json sources record"
import json, sys
r = json.load(open(sys.argv[1]))["sources"]
d = r["directives"][0]
assert d["path"] == "corpus" and d["files"] == 2 and d["skipped"]["excluded"] == 7, d
f = {x["path"]: x for x in r["files"]}
assert f["src/main.c"]["sha256"] == sys.argv[2] and f["src/main.c"]["size"] == 67, f
assert set(f) == {"src/main.c", "notes.md"}, f
PY
"$DLM" show doc.dlm > show.txt
grep -q "sources      1 directive(s), policy permissive" show.txt || fail "show: no sources line: $(cat show.txt)"
grep -q "v0001: corpus: 2 file(s), .*, 12 skipped" show.txt || fail "show: no per-directive summary: $(cat show.txt)"
echo ok
