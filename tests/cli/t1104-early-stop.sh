#!/usr/bin/env bash
# Early stopping stops, and every report gives the committed numbers
# (issue 30 point 7). A document with a validation split (val_frac 0.3)
# trains to num_epochs (500 steps) at a high learning rate, evaluating every
# 2 steps (DLM_TEST_EVAL_EVERY: the cadence is 50 steps, or a quarter of a
# --max-steps run, as the original's). A Python replay of transformers'
# EarlyStoppingCallback (patience 3, threshold 0: a strictly lower loss
# resets the count) over the run log's evaluations gives the step the run
# must stop at and the best evaluation, whose weights are committed; then
#   - the run's last step is that step, far before 500;
#   - train's last line, train --json, `dlm status` (text and --json), the
#     exit record, `dlm metrics --runs --json`, the manifest's run record and
#     the summary file all give the committed step, its training and
#     validation loss (the log's), and the run's first loss (step 1's);
#   - killed after a checkpoint and resumed, the run stops at the same step
#     with the same adapter bytes and the same numbers: the first loss is
#     step 1's, not the first step after the resume.
set -euo pipefail
. "$DLM_SRC/tests/cli/lib.sh"
export DLM_TEST_EVAL_EVERY=2
mk() {
    { printf -- '---\ndlm_id: %s\ndlm_version: 15\nbase_model: tiny\ntraining:\n  sequence_len: 64\n  micro_batch_size: 2\n' "$ID"
      printf -- '  grad_accum: 1\n  learning_rate: 0.05\n  num_epochs: 100\n  val_frac: 0.3\n  save_steps: 4\n  multi_turn: 0\n---\n'
      printf -- '# Notes\n\nParis is the capital of France.\n\n::instruction::\n'
      for i in $(seq 12); do printf '\n### Q\nWhat is %d plus %d?\n### A\n%d.\n' "$i" "$i" $((2 * i)); done; } > "$1"
}
mk doc.dlm
S="$DLM_HOME/store/$ID"
"$DLM" train doc.dlm --json > run1.json 2> err1.txt || fail "train: $(cat err1.txt)"
"$DLM" status doc.dlm > status.txt
"$DLM" status doc.dlm --json > status.json
"$DLM" metrics doc.dlm --runs --json > runs.json
check() { # check RUN_ID TRAIN_JSON LOG [TEXT_LINE_FILE]
    python3 - "$@" "$S" <<'PY'
import glob, json, re, sys
rid, tj, logp = int(sys.argv[1]), sys.argv[2], sys.argv[3]
text = sys.argv[4] if len(sys.argv) > 5 else None
store = sys.argv[-1]
log = [json.loads(l) for l in open(logp)]
steps = {r["step"]: r["loss"] for r in log if r["type"] == "step"}
evals = [(r["step"], r["val_loss"]) for r in log if r["type"] == "eval"]
# transformers.EarlyStoppingCallback(early_stopping_patience=3, early_stopping_threshold=0.0)
best, best_step, count, stop = None, None, 0, None
for s, v in evals:
    if best is None or (v < best and abs(v - best) > 0.0):
        best, best_step, count = v, s, 0
    else:
        count += 1
    if count >= 3:
        stop = s
        break
assert stop is not None and stop < 500, (evals, "no early stop")
assert max(steps) == stop, ("ran past the stop", max(steps), stop)
want = {"steps": stop, "committed_step": best_step, "first_loss": steps[1], "final_loss": steps[best_step],
        "val_loss": best}
j = json.load(open(tj))
for k, v in want.items():
    assert abs(j[k] - v) <= 1e-9 * max(1, abs(v)), ("train --json", k, j[k], v)
assert j["early_stopped"] is True and j["total_steps"] == 500, j
line = "trained v%04d: stopped early at step %d of 500, committed step %d: loss %.3f → %.3f (val %.3f)" % (
    j["version"], stop, best_step, steps[1], steps[best_step], best)
if text:
    assert line in open(text).read(), (line, open(text).read())
st = json.load(open(store + "/run/exit.json"))
for k in ("committed_step", "first_loss", "final_loss", "val_loss"):
    assert abs(st[k] - want[k]) <= 1e-9 * max(1, abs(want[k])), ("exit.json", k, st[k], want[k])
assert st["steps"] == stop and st["message"] == line, (st, line)
m = json.load(open(store + "/manifest.json"))["training_runs"][-1]
assert m["steps"] == stop and abs(m["final_train_loss"] - want["final_loss"]) < 1e-12 and \
    abs(m["final_val_loss"] - best) < 1e-12, m
summ = json.load(open(glob.glob(store + "/logs/train-%06d-*.summary.json" % rid)[0]))
assert summ["committed_step"] == best_step and summ["early_stopped"] and abs(summ["first_loss"] - steps[1]) < 1e-12, summ
print("ok: run %d stopped at %d of 500, committed step %d (val %.4f)" % (rid, stop, best_step, best))
PY
}
check 1 run1.json "$S"/logs/train-000001-*.jsonl || fail "run 1"
grep -q "early stop at step [0-9]* of 500: the validation loss has not improved for 3 evaluations" err1.txt || fail "$(cat err1.txt)"
python3 - status.json runs.json run1.json status.txt <<'PY' || fail "status/metrics differ from train"
import json, sys
s, runs, t, txt = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), json.load(open(sys.argv[3])), open(sys.argv[4]).read()
r = [x for x in runs if x["run_id"] == 1][0]
for k in ("committed_step", "first_loss", "final_loss", "val_loss"):
    assert abs(s[k] - t[k]) <= 1e-9 * max(1, abs(t[k])), ("status", k, s[k], t[k])
    assert abs(float(r[k]) - t[k]) <= 1e-9 * max(1, abs(t[k])), ("metrics", k, r[k], t[k])
assert s["early_stopped"] and int(r["early_stopped"]) == 1 and s["step"] == t["steps"], (s, r)
want = "v0001 committed at step %d (stopped early after step %d/500)" % (t["committed_step"], t["steps"])
assert want in txt and "  trained v0001: stopped early at step %d of 500, committed step %d:" % (t["steps"], t["committed_step"]) in txt, txt
PY
a=$(sha256sum "$S/adapter/versions/v0001/adapter_model.safetensors" | cut -c1-64)
# killed after the checkpoint at step 8, resumed: the same stop, bytes and numbers
set +e; DLM_TEST_CRASH_AFTER_STEP=9 "$DLM" train doc.dlm -q > /dev/null 2>&1; set -e
[ -d "$S/adapter/checkpoints/step-000008" ] || fail "no checkpoint at step 8"
"$DLM" train doc.dlm --resume > out2.txt 2> /dev/null || fail "resume"
sed -n 's/^\(trained v0002: .*\), [0-9.]*s$/\1/p' out2.txt > line2.txt
python3 - line2.txt "$S/run/exit.json" <<'PY' || fail "train's last line is not the exit record's"
import json, sys
x = json.load(open(sys.argv[2]))
open("run2.json", "w").write(json.dumps(dict(x, version=2, total_steps=500)))
assert open(sys.argv[1]).read().strip() == x["message"], (open(sys.argv[1]).read(), x["message"])
PY
check 2 run2.json "$S"/logs/train-000002-*.jsonl line2.txt || fail "resumed run"
b=$(sha256sum "$S/adapter/versions/v0002/adapter_model.safetensors" | cut -c1-64)
[ "$a" = "$b" ] || fail "the resumed early-stopped run differs: $a vs $b"
python3 -c 'import json,sys; a,b=json.load(open(sys.argv[1])),json.load(open(sys.argv[2]))
for k in ("steps","committed_step","first_loss","final_loss","val_loss"): assert a[k]==b[k],(k,a[k],b[k])' run1.json run2.json ||
    fail "resumed numbers differ"
echo ok
