#!/usr/bin/env bash
# training.cpt on the embedded tiny base (run/cpt.h):
#   - the learning rate of every step in the JSONL log equals a Python
#     reference written from the original's choice (runtime.py: DAPT iff
#     text / (text + messages) train rows > 0.7 under auto; dapt/sft forced)
#     and transformers' schedules (cosine_with_min_lr, min_lr_rate 0.1,
#     warmup ceil(0.2·total) for DAPT; the document's cosine, warmup
#     ceil(0.1·total) otherwise), for auto on prose, auto on Q/A, and sft;
#   (the embed warm-up, determinism and resume: t0607; slow: ~16 s, minutes
#   under ASan, where t0609 runs instead);
#   - a negative embed_warmup_steps or an unknown schedule is refused with
#     file:line.
set -euo pipefail
. "$DLM_SRC/tests/cli/lib.sh"
. "$DLM_SRC/tests/cli/helpers/cpt_doc.sh"
# check_lr WANT(dapt|sft): the run's record and every logged lr vs the reference
check_lr() {
    "$py" - "$store/$(cur)/training_run.json" "$(lastlog)" "$1" <<'PY'
import json, math, sys
run = json.load(open(sys.argv[1]))
cpt, fm = run["cpt"], run["frontmatter"]["training"]
setting = fm["cpt"]["schedule"]
text, msgs = cpt["text_rows"], cpt["messages_rows"]
frac = text / (text + msgs) if text + msgs else 0.0          # runtime.cpt_row_fraction
chosen = setting if setting != "auto" else ("dapt" if frac > 0.7 else "sft")
assert chosen == sys.argv[3], (chosen, sys.argv[3], cpt)
assert cpt["schedule"] == chosen and cpt["setting"] == setting, cpt
assert abs(cpt["cpt_fraction"] - frac) < 1e-15, cpt
steps = [json.loads(l) for l in open(sys.argv[2]) if '"type":"step"' in l]
total = steps[0]["total"]
peak = fm["learning_rate"]
if chosen == "dapt":   # dapt_sft_config_overrides → cosine_with_min_lr
    kind, warm, floor = "cosine_with_min_lr", math.ceil(total * 0.2), 0.1
else:
    kind, warm, floor = fm["lr_scheduler"], math.ceil(total * fm["warmup_ratio"]), 0.0
def lam(k):   # transformers.optimization, num_cycles 0.5
    if k < warm:
        return k / max(1, warm)
    p = (k - warm) / max(1, total - warm)
    f = 0.5 * (1.0 + math.cos(math.pi * 0.5 * 2.0 * p))
    return max(0.0, f * (1 - floor) + floor) if kind == "cosine_with_min_lr" else max(0.0, f)
assert cpt["warmup_steps"] == warm and cpt["lr_scheduler"] == kind, (cpt, warm, kind)
assert len(steps) == total, (len(steps), total)
for s in steps:
    want = peak * lam(s["step"] - 1)   # the update of step s uses LambdaLR at s-1
    assert abs(s["lr"] - want) <= 1e-12 * max(abs(want), 1e-12), (s["step"], s["lr"], want)
print(chosen, total, warm)
PY
}

# auto on a prose document: DAPT
doc p.dlm "  cpt:
    schedule: auto"
out=$("$DLM" train p.dlm --max-steps 10 2>&1) || fail "train: $out"
grep <<<"$out" -q "cpt: DAPT schedule (auto; 100% of the train rows are prose)" || fail "no DAPT note: $out"
check_lr dapt >/dev/null || fail "auto/prose lr"
# doctor shows the choice train made
"$DLM" doctor p.dlm --json > doc.json || fail "doctor"
"$py" - doc.json "$store/$(cur)/training_run.json" <<'PY' || fail "doctor's schedule differs from train's"
import json, sys
d, r = json.load(open(sys.argv[1]))["cpt"], json.load(open(sys.argv[2]))["cpt"]
for k in ("setting", "schedule", "cpt_fraction", "text_rows", "messages_rows", "lr_scheduler", "warmup_ratio",
          "min_lr_ratio", "embed_warmup_steps"):
    assert d[k] == r[k], (k, d[k], r[k])
PY
"$DLM" doctor p.dlm | grep "schedule: dapt (training.cpt.schedule auto; 4 prose + 0 Q/A train rows before replay, 100% prose > 70%)" >/dev/null ||
    fail "doctor: $("$DLM" doctor p.dlm 2>&1)"
# auto on a Q/A-heavy document: SFT (the document's cosine)
doc q.dlm "  cpt:
    schedule: auto" 12
out=$("$DLM" train q.dlm --same-store --fresh --max-steps 10 2>&1) || fail "train: $out"
grep <<<"$out" -q "DAPT" && fail "auto chose DAPT on a Q/A document: $out"
check_lr sft >/dev/null || fail "auto/qa lr"
# forced sft on prose, forced dapt on Q/A
doc s.dlm "  cpt:
    schedule: sft"
"$DLM" train s.dlm --same-store --fresh --max-steps 10 -q >/dev/null 2>&1 || fail "train sft"
check_lr sft >/dev/null || fail "sft lr"
doc d.dlm "  cpt:
    schedule: dapt" 12
"$DLM" train d.dlm --same-store --fresh --max-steps 10 -q >/dev/null 2>&1 || fail "train dapt"
check_lr dapt >/dev/null || fail "dapt lr"

# bad values: refused where they are written
doc bad.dlm "  cpt:
    embed_warmup_steps: -1"
if out=$("$DLM" show bad.dlm 2>&1); then fail "negative embed_warmup_steps accepted"; fi
grep <<<"$out" -q "bad.dlm:1[0-9]:" || fail "no file:line: $out"
doc bad2.dlm "  cpt:
    schedule: pretrain"
if out=$("$DLM" show bad2.dlm 2>&1); then fail "unknown schedule accepted"; fi
grep <<<"$out" -q "bad2.dlm:1[0-9]:" || fail "no file:line: $out"
echo ok
