#!/usr/bin/env bash
# dlm metrics: `metrics watch` follows a running (detached) run and prints
# each of its steps once, with the loss the run's own JSONL log records,
# and exits 0 when the run completes; `metrics show` filters (--phase,
# --since, --limit, --run-id) give the rows Python's sqlite3 module selects
# from metrics.sqlite with the same conditions; --runs prints its columns
# apart (timestamps no longer run into the next column).
. "$(dirname "$0")/lib.sh"
PY=${PYTHON:-python3}
write_doc doc.dlm 40
# a validation split on this 4-pair document (below 20 rows there is none by default), so runs record evals
sed -i 's/^training:$/training:\n  val_frac: 0.5/' doc.dlm
S="$DLM_HOME/store/$ID"
rc=0; "$DLM" metrics watch doc.dlm > none.txt || rc=$?
[ $rc = 0 ] && grep -q "no training run in progress" none.txt || fail "watch without a run: rc $rc $(cat none.txt)"
DLM_TEST_STEP_DELAY_MS=100 "$DLM" train doc.dlm --detach --max-steps 30 > launch.txt 2>&1
grep -q "training in the background" launch.txt || fail "no detached run: $(cat launch.txt)"
"$DLM" metrics watch doc.dlm --poll-seconds 0.2 > watch.txt || fail "watch exit $?: $(cat watch.txt)"
$PY - watch.txt "$S"/logs/train-000001-*.jsonl <<'P'
import json, re, sys
out = open(sys.argv[1]).read()
steps = {}
for l in out.splitlines():
    m = re.match(r"\s*(\d+)/(\d+)\s+([\d.]+)\s", l)
    if m and " eval " not in l:
        assert m.group(1) not in steps, "step %s printed twice" % m.group(1)
        steps[int(m.group(1))] = float(m.group(3))
        assert m.group(2) == "30", l
log = [json.loads(l) for l in open(sys.argv[2])]
want = {r["step"]: r["loss"] for r in log if r.get("type") == "step"}
assert sorted(steps) == sorted(want) == list(range(1, 31)), (sorted(steps), sorted(want))
for s, l in want.items(): assert abs(steps[s] - l) < 6e-5, (s, steps[s], l)
evals = [r["step"] for r in log if r.get("type") == "eval"]
assert len([l for l in out.splitlines() if " eval " in l]) == len(evals), (out, evals)
assert re.search(r"^run 1 completed: v0001$", out, re.M), out
assert out.splitlines()[1].split() == ["step/total", "loss", "lr", "tok/s", "val_loss", "ETA"], out.splitlines()[1]
print("ok: watch printed steps 1..30 once each, losses as the log")
P
"$DLM" train doc.dlm --max-steps 5 -q > /dev/null    # run 2
# show: the filters against Python's sqlite3 on the same file
for args in "" "--run-id 2" "--limit 3" "--since 1h" "--phase sft --limit 4" "--phase dpo" "--evals --limit 2" "--runs" "--runs --limit 1"; do
    "$DLM" metrics show doc.dlm --json $args > got.json
    $PY - "$S/metrics.sqlite" got.json $args <<'P'
import datetime, json, sqlite3, sys
db, got, args = sys.argv[1], json.load(open(sys.argv[2])), sys.argv[3:]
opt = lambda k: args[args.index(k) + 1] if k in args else None
table = "runs" if "--runs" in args else "evals" if "--evals" in args else "steps"
c = sqlite3.connect(db)
c.row_factory = sqlite3.Row
rows = c.execute("SELECT t.* FROM %s t JOIN runs r ON r.run_id = t.run_id" % table).fetchall()
rows = [dict(r) for r in rows]
if opt("--run-id"): rows = [r for r in rows if r["run_id"] == int(opt("--run-id"))]
phase = {r["run_id"]: r["phase"] for r in map(dict, c.execute("SELECT * FROM runs"))}
if opt("--phase"): rows = [r for r in rows if phase[r["run_id"]] == opt("--phase")]
if opt("--since"):
    cut = (datetime.datetime.utcnow() - datetime.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S")
    rows = [r for r in rows if (r["started_at"] if table == "runs" else r["at"]) >= cut]
key = (lambda r: r["run_id"]) if table == "runs" else (lambda r: (r["run_id"], r["step"]))
rows.sort(key=key)
if opt("--limit"): rows = rows[-int(opt("--limit")):]
assert [key(r) for r in got] == [key(r) for r in rows], (args, [key(r) for r in got], [key(r) for r in rows])
for g, w in zip(got, rows):
    for k, v in w.items():
        assert g[k] == v or (isinstance(v, float) and abs(g[k] - v) <= 1e-12 * max(1, abs(v))), (args, k, g[k], v)
assert rows or opt("--phase") == "dpo", args
P
done
"$DLM" metrics doc.dlm --runs > runs.txt
$PY - runs.txt <<'P'
import sys
lines = open(sys.argv[1]).read().splitlines()
assert lines[0].split() == ["run_id", "started_at", "ended_at", "adapter_version", "phase", "seed", "status",
                            "committed_step", "first_loss", "final_loss", "val_loss", "early_stopped"], lines[0]
for l in lines[1:]:
    f = l.split()
    assert len(f) == 12 and f[1][10] == "T" and f[2][10] == "T" and f[6] == "completed", l
P
rc=0; "$DLM" metrics show doc.dlm --since 5x 2> err.txt || rc=$?
[ $rc = 2 ] && grep -q "^hint:" err.txt || fail "--since 5x: rc $rc"
rc=0; "$DLM" metrics show doc.dlm --phase dpo > out.txt 2> err.txt || rc=$?
[ $rc = 0 ] && grep -q "no rows match" err.txt || fail "--phase dpo: rc $rc"
echo ok
