#!/usr/bin/env bash
# `dlm train DIR`: the first run needs --base and scaffolds DIR/.dlm/corpus.dlm
# (read back with PyYAML: absolute path, include, exclude, policy, a valid
# ULID); it trains on DIR's files; the next run reuses the document (same
# dlm_id, next version); --dry-run lists verdicts and writes nothing;
# --rescaffold keeps the dlm_id; -R includes DIR's own files only; several
# scaffolds need --name.
set -euo pipefail
. "$DLM_SRC/tests/cli/lib.sh"
mkdir -p proj/src proj/docs
echo "The capital of France is Paris." > proj/README.md
printf 'int add(int a, int b) { return a + b; }\n' > proj/src/add.c
printf 'Design notes: add() adds.\n' > proj/docs/design.md
echo "SECRET-b10c" > proj/.env
set +e
out=$("$DLM" train proj --max-steps 1 2>&1); rc=$?
set -e
[ $rc = 1 ] || fail "first run without --base: rc $rc"
grep <<<"$out" -q "requires --base" || fail "no --base message: $out"
grep <<<"$out" -q "^hint:" || fail "no hint: $out"
[ ! -e proj/.dlm ] || fail "a failed scaffold left files"

"$DLM" train proj --base "$FIXTURE_QWEN" --exclude 'docs/**' --dry-run > dry.txt 2>dry.err
grep -q "dry run: $T/proj/.dlm/corpus.dlm would be scaffolded; nothing is written" dry.err || fail "dry run not said: $(cat dry.err)"
grep -q "directive 1 ($T/proj/.dlm/corpus.dlm:8)" dry.txt || fail "dry run: the directive's file:line: $(cat dry.txt)"
grep -q "excluded *.dlm/corpus.dlm  (default exclude" dry.txt || fail "dry run: the scaffold's own entry: $(cat dry.txt)"
grep -q "kept .* src/add.c" dry.txt || fail "dry run: add.c: $(cat dry.txt)"
grep -q "excluded .* docs/design.md  (directive exclude 'docs/\*\*')" dry.txt || fail "dry run: docs exclude: $(cat dry.txt)"
grep -q "excluded .* .env  (default exclude '.env')" dry.txt || fail "dry run: .env"
[ ! -d "$DLM_HOME/store" ] || [ -z "$(ls "$DLM_HOME/store")" ] || fail "--dry-run trained"
[ ! -e proj/.dlm ] || fail "--dry-run wrote into the tree: $(ls -A proj/.dlm)"
"$DLM" train proj --base "$FIXTURE_QWEN" --exclude 'docs/**' --max-steps 2 -q > /dev/null 2>err.txt || fail "train DIR: $(cat err.txt)"
python3 - "$T/proj" <<'PY' || fail "scaffold frontmatter"
import re, sys, yaml
root = sys.argv[1]
fm = yaml.safe_load(open(root + "/.dlm/corpus.dlm").read().split("---\n")[1])
assert re.fullmatch(r"[0-9A-HJKMNP-TV-Z]{26}", fm["dlm_id"]), fm
assert fm["dlm_version"] == 15
t = fm["training"]
assert t["sources_policy"] == "strict", t
assert t["sources"] == [{"path": root, "include": ["**/*"], "exclude": ["docs/**"]}], t["sources"]
PY
id1=$(sed -n 's/^dlm_id: //p' proj/.dlm/corpus.dlm)
[ -f "$DLM_HOME/store/$id1/adapter/versions/v0001/adapter_model.safetensors" ] || fail "no v0001 in $id1's store"
"$DLM" train proj --max-steps 2 -q > /dev/null
[ -d "$DLM_HOME/store/$id1/adapter/versions/v0002" ] || fail "the second run did not reuse the scaffold"
python3 - "$DLM_HOME/store/$id1/adapter/versions/v0002/training_run.json" <<'PY' || fail "training_run.json"
import json, sys
s = json.load(open(sys.argv[1]))["sources"]
assert sorted(f["path"] for f in s["files"]) == ["README.md", "src/add.c"], s["files"]
PY
# --rescaffold keeps the id; -R: top-level files only
cp proj/.dlm/corpus.dlm corpus.before
"$DLM" train proj --base "$FIXTURE_QWEN" -R --rescaffold --dry-run > dry2.txt 2>/dev/null
cmp -s proj/.dlm/corpus.dlm corpus.before || fail "--rescaffold --dry-run rewrote the scaffold"
[ "$(ls -A proj/.dlm)" = corpus.dlm ] || fail "--dry-run left files: $(ls -A proj/.dlm)"
grep -q "kept .* README.md" dry2.txt || fail "-R: README.md"
grep -q "not_included *src/add.c" dry2.txt || fail "-R: src/add.c should not be included: $(cat dry2.txt)"
"$DLM" train proj --base "$FIXTURE_QWEN" -R --rescaffold --max-steps 1 -q > /dev/null 2>&1 || fail "--rescaffold"
[ "$(sed -n 's/^dlm_id: //p' proj/.dlm/corpus.dlm)" = "$id1" ] || fail "--rescaffold changed the dlm_id"
# a second scaffold: the default name is then ambiguous
"$DLM" train proj --base "$FIXTURE_QWEN" --name docs --include 'docs/**' --max-steps 1 -q > /dev/null 2>&1
[ -f proj/.dlm/docs.dlm ] || fail "--name docs"
# corpus.dlm exists, so the default name still resolves to it
out=$("$DLM" train proj --dry-run 2>&1)
grep <<<"$out" -q "using $T/proj/.dlm/corpus.dlm" || fail "default name with two scaffolds: $out"
rm proj/.dlm/corpus.dlm
"$DLM" train proj --base "$FIXTURE_QWEN" --name extra --max-steps 1 -q > /dev/null 2>&1
set +e
out=$("$DLM" train proj --dry-run 2>&1); rc=$?
set -e
[ $rc = 1 ] || fail "two scaffolds without corpus.dlm and no --name: rc $rc"
grep <<<"$out" -q "dlm train proj --name docs" || fail "ambiguity message: $out"
set +e
"$DLM" train proj/README.md --include x >/dev/null 2>&1; rc=$?
set -e
[ $rc = 2 ] || fail "--include on a file should be a usage error, rc $rc"
echo ok
