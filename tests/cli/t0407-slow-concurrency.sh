#!/usr/bin/env bash
# Concurrency: 8 processes loop over train, export, prompt, show and
# metrics on one store for a bounded time (30 s; DLM_CONCURRENCY_SECONDS
# raises it, e.g. 120). Writers are exclusive: a train that finds the store
# locked fails at once with LockHeldError and nothing else; every command
# that reported success is in the manifest (no lost update, which two
# writers at once would cause); readers never fail on a half-written file
# (the manifest, current.txt, an adapter being committed, metrics.sqlite);
# the store reads at the end. Prints the operation counts.
# Label `slow` (ctest -LE slow skips it).
set -euo pipefail
. "$DLM_SRC/tests/cli/lib.sh"
PY=/usr/bin/python3
DUR=${DLM_CONCURRENCY_SECONDS:-30}
write_tiny_doc doc.dlm
S="$DLM_HOME/store/$ID"
"$DLM" train doc.dlm --max-steps 4 -q > /dev/null
"$DLM" export doc.dlm --target gguf --quant Q8_0 -q > /dev/null
mkdir -p c
end=$(( $(date +%s) + DUR ))

worker() { # worker NAME: loop one kind of operation, count outcomes
    local name=$1 ok=0 locked=0 bad=0 out
    while [ "$(date +%s)" -lt $end ]; do
        case $name in
            train*)  out=$("$DLM" train doc.dlm --max-steps 4 -q 2>&1) ;;
            export*) out=$("$DLM" export doc.dlm --target gguf --quant Q8_0 -q 2>&1) ;;
            prompt*) out=$("$DLM" prompt doc.dlm --temp 0 --max-tokens 4 "Paris is" 2>&1) ;;
            show*)   out=$("$DLM" show doc.dlm --json 2>&1) &&
                         out=$(echo "$out" | $PY -c 'import json,sys; d=json.load(sys.stdin); assert len(d["store"]["versions"]) >= 1, d' 2>&1) &&
                         out=$($PY -c 'import json,sys; json.load(open(sys.argv[1]))' "$S/manifest.json" 2>&1) ;;
            metrics*) out=$("$DLM" metrics doc.dlm --runs 2>&1) ;;
        esac
        if [ $? -eq 0 ]; then ok=$((ok + 1))
        elif [[ $name == train* ]] && grep <<<"$out" -q "LockHeldError\|already locked"; then locked=$((locked + 1))
        else bad=$((bad + 1)); echo "$name: $out" >> c/errors.txt
        fi
    done
    echo "$ok $locked $bad" > "c/$name"
}
set +e
for w in train1 train2 export1 prompt1 prompt2 show1 show2 metrics1; do worker $w & done
wait
set -e

tot_ok=0 tot_bad=0 summary=""
for w in train1 train2 export1 prompt1 prompt2 show1 show2 metrics1; do
    read -r ok locked bad < "c/$w"
    summary="$summary $w=$ok"
    [ "$locked" -gt 0 ] && summary="$summary(+$locked locked)"
    tot_ok=$((tot_ok + ok)); tot_bad=$((tot_bad + bad))
done
echo "concurrency ($DUR s, 8 processes):$summary; failures $tot_bad"
[ $tot_bad -eq 0 ] || fail "operations failed: $(head -c 3000 c/errors.txt)"
# every successful writer is recorded: 1 + trains runs, 1 + exports exports
read -r t1 _ _ < c/train1; read -r t2 _ _ < c/train2; read -r ex _ _ < c/export1
$PY - "$S/manifest.json" $((1 + t1 + t2)) $((1 + ex)) <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
runs = [r for r in m.get("training_runs", m.get("runs", [])) if r.get("status", "completed") == "completed"]
assert len(runs) == int(sys.argv[2]), ("runs recorded", len(runs), "trains that succeeded", sys.argv[2])
assert len(m["exports"]) == int(sys.argv[3]), ("exports recorded", len(m["exports"]), "succeeded", sys.argv[3])
PY
[ $((t1 + t2)) -ge 1 ] || fail "no train ran in $DUR s"
[ ! -e "$S/.lock" ] || fail "a lock was left behind"
[ -z "$(find "$S" -name '*.tmp*')" ] || fail "temp files left: $(find "$S" -name '*.tmp*')"
"$DLM" show doc.dlm > /dev/null
echo "ok"
