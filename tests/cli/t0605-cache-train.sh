#!/usr/bin/env bash
# training.cache in a run: the first train fills <store>/tokenized-cache,
# a retrain of the unchanged document takes every section from it (hit
# counts in training_run.json), and the adapters trained with the cache,
# from it, and with --no-cache are the same bytes. An edit misses only the
# edited section.
. "$(dirname "$0")/lib.sh"
"$DLM" init c.dlm --template tutor -q
sed -i 's/^  num_epochs: .*/  num_epochs: 2/' c.dlm
store() { ls -d "$DLM_HOME"/store/*/ | head -1; }
run_json() { cat "$(store)adapter/versions/$1/training_run.json"; }
"$DLM" train c.dlm -q --no-replay > /dev/null
S=$(store)
[ -d "$S/tokenized-cache/entries" ] || fail "no tokenized-cache after the first train"
n=$(find "$S/tokenized-cache/entries" -name '*.bin' | wc -l)
[ "$n" -ge 2 ] || fail "expected an entry per section, found $n"
"$DLM" train c.dlm -q --fresh --no-replay > /dev/null
"$DLM" train c.dlm -q --fresh --no-replay --no-cache > /dev/null
python3 - "$S" <<'PY'
import json, sys, hashlib, os
S = sys.argv[1]
def run(v): return json.load(open(f"{S}/adapter/versions/{v}/training_run.json"))
def sha(v): return hashlib.sha256(open(f"{S}/adapter/versions/{v}/adapter_model.safetensors", "rb").read()).hexdigest()
a, b, c = run("v0001"), run("v0002"), run("v0003")
assert a["tokenization_cache"]["hits"] == 0 and a["tokenization_cache"]["misses"] >= 2, a.get("tokenization_cache")
hb, mb = b["tokenization_cache"]["hits"], b["tokenization_cache"]["misses"]
assert mb == 0 and hb == a["tokenization_cache"]["misses"], (hb, mb)
assert "tokenization_cache" not in c, c.get("tokenization_cache")
assert sha("v0001") == sha("v0002") == sha("v0003"), "cache changed the adapter"
PY
# an edit: only the edited section misses
printf '\nA new paragraph about clouds, which form when vapour cools.\n' >> c.dlm
"$DLM" train c.dlm -q --fresh --no-replay > /dev/null
python3 - "$S" <<'PY'
import json, sys
t = json.load(open(f"{sys.argv[1]}/adapter/versions/v0004/training_run.json"))["tokenization_cache"]
assert t["misses"] == 1 and t["hits"] >= 1, t
PY
# the pack leaves the cache home
"$DLM" pack c.dlm --out c.pack -q
tar --zstd -tf c.pack | grep -q tokenized-cache && fail "the pack carries the tokenization cache"
echo ok
