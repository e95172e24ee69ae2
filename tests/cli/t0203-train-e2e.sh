#!/usr/bin/env bash
# The main loop end to end on a small random base, in a fresh DLM_HOME:
# init → train → show → edit the document → train again (v0002, with a
# replay sample of the removed section) → prompt uses v0002 → metrics.
set -euo pipefail
. "$DLM_SRC/tests/cli/lib.sh"
"$DLM" init t.dlm --base "$FIXTURE_QWEN" --template tutor -q
sed -i 's/^  num_epochs: .*$/  num_epochs: 2\n  sequence_len: 128/' t.dlm
id=$(sed -n 's/^dlm_id: //p' t.dlm)
S="$DLM_HOME/store/$id"
out=$("$DLM" train t.dlm 2>/dev/null)
grep <<<"$out" -q "^trained v0001: " || fail "no 'trained v0001' line: $out"
"$DLM" show t.dlm --json > show.json
python3 - show.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["store"]["adapter_version"] == 1, d["store"]
assert d["frontmatter"]["training"]["num_epochs"] == 2
PY
# edit: drop the first prose paragraph, add a Q/A pair
python3 - t.dlm <<'PY'
import sys
p = sys.argv[1]; s = open(p).read()
a = s.index("# The water cycle"); b = s.index("::instruction::")
s = s[:a] + s[b:] + "\n### Q\nWhat is a cloud?\n### A\nMany tiny droplets of condensed water.\n"
open(p, "w").write(s)
PY
"$DLM" train t.dlm -q > out2.txt
grep -q "^trained v0002: " out2.txt || fail "second run did not commit v0002: $(cat out2.txt)"
python3 - "$S/adapter/versions/v0002/training_run.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["replay_sections"] >= 1, r["replay_sections"]   # the removed prose section came back
assert r["new_sections"] >= 1, r["new_sections"]
PY
[ "$(cat "$S/adapter/current.txt")" = "adapter/versions/v0002" ] || fail "v0002 not current"
v=$("$DLM" prompt t.dlm "What is a cloud?" --temp 0 -n 4 --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["adapter_version"])')
[ "$v" = 2 ] || fail "prompt used adapter v$v, expected v2"
# the adapter changes the output distribution: scored text differs with and without it
a=$("$DLM" perplexity t.dlm t.dlm --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["nll_mean"])')
b=$("$DLM" perplexity t.dlm t.dlm --no-adapter --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["nll_mean"])')
[ "$a" != "$b" ] || fail "the adapter did not change the scores"
n=$("$DLM" metrics t.dlm --runs --csv | wc -l)
[ "$n" = 3 ] || fail "metrics should list 2 runs, got $((n-1))"
"$DLM" metrics t.dlm --json --run 2 | python3 -c 'import json,sys; r=json.load(sys.stdin); assert r and all(x["run_id"]==2 for x in r)'
echo ok
