#!/usr/bin/env bash
# training.precision (run/precision.h, docs/training.md "Precision"):
#   fp16 is refused at its file:line with a hint, before anything trains;
#   bf16 is recorded in the banner line, the JSONL banner, training_run.json,
#   checkpoints and dlm.lock, and shown by `dlm doctor` (text and --json);
#   bf16 bytes: --threads 1 = --threads 2, differ from fp32, and a run
#   killed (SIGKILL) after a checkpoint then --resumed gives the bytes of
#   the uninterrupted run; --resume with another precision is refused with
#   the precision it needs; null trains bf16 where the bf16 back end runs
#   on bf16 instructions (amx, avx512bf16: `dlm --version`), else fp32.
set -euo pipefail
. "$DLM_SRC/tests/cli/lib.sh"
be=$("$DLM" --version | sed -n 's/^bf16: \([a-z0-9-]*\) .*/\1/p')
[ -n "$be" ] || fail "dlm --version names no bf16 back end"
case $be in
amx | avx512bf16) fast=1 bf16_line="^precision: bf16 (\(AMX tiles\|AVX512-BF16\)" ;;
*) fast=0 bf16_line="^precision: bf16 emulated on \(avx2\|avx512\|scalar\)" ;;
esac
prec_doc() { # prec_doc FILE 'precision: X' (or '')
    write_doc "$1" 20
    [ -n "$2" ] && sed -i "s/^training:\$/training:\n  $2/" "$1"
    return 0
}
sha() { sha256sum "$DLM_HOME/store/$ID/adapter/versions/$1/adapter_model.safetensors" | cut -c1-64; }
store="$DLM_HOME/store/$ID"

# fp16: refused where it is written, nothing trained
prec_doc h.dlm "precision: fp16"
set +e
out=$("$DLM" train h.dlm --max-steps 2 2>&1)
rc=$?
set -e
[ $rc -ne 0 ] || fail "fp16 was accepted: $out"
grep <<<"$out" -q "^dlm: error: h.dlm:6:3: training.precision: fp16 is not supported: dlm has no fp16 training path" ||
    fail "fp16: no error at h.dlm:6:3 with the reason: $out"
grep <<<"$out" -q "^hint: .*bf16.*fp32" || fail "fp16: no hint naming bf16/fp32: $out"
[ ! -d "$store/adapter/versions" ] || fail "fp16 left a version"

# bf16, 2 threads: the records
prec_doc b.dlm "precision: bf16"
out=$("$DLM" train b.dlm --max-steps 8 --threads 2 2>&1) || fail "bf16 train: $out"
grep <<<"$out" -q "$bf16_line" || fail "no bf16 banner line ($be): $out"
a=$(sha v0001)
python3 - "$store" "$fast" <<'PY' || fail "bf16 records"
import glob, json, sys
s, fast = sys.argv[1], sys.argv[2] == "1"
tr = json.load(open(s + "/adapter/versions/v0001/training_run.json"))
assert tr["precision"] == "bf16", tr.get("precision")
assert json.load(open(s + "/dlm.lock"))["determinism_flags"]["dlm_precision"] == "bf16"
ban = [json.loads(l) for l in open(sorted(glob.glob(s + "/logs/train-*.jsonl"))[0]) if '"banner"' in l][0]
assert ban["precision"] == "bf16" and ("emulated" in ban["precision_how"]) != fast, ban
PY
"$DLM" train b.dlm --max-steps 8 --threads 1 -q >/dev/null
b=$(sha v0002)
[ "$a" = "$b" ] || fail "bf16: threads 1 vs 2 changed the adapter: $a vs $b"
# fp32 (explicit, and null) give other bytes: the mode is not a no-op
prec_doc f.dlm "precision: fp32"
"$DLM" train f.dlm --same-store --max-steps 8 -q >/dev/null 2>&1 || true   # dlm.lock warns: precision changed
f=$(sha v0003)
[ "$f" != "$a" ] || fail "bf16 and fp32 trained the same bytes"
prec_doc n.dlm ""
out=$("$DLM" train n.dlm --same-store --max-steps 8 2>&1) || true   # fast: dlm.lock warns (fp32 -> bf16)
if [ "$fast" = 1 ]; then
    grep <<<"$out" -q "^precision: bf16 (.*; training.precision null)" || fail "null: no bf16 banner: $out"
    [ "$(sha v0004)" = "$a" ] || fail "null and bf16 differ on this CPU ($be)"
else
    grep <<<"$out" -q "^precision: fp32 (exact f32 numerics; training.precision null" || fail "null: no fp32 banner: $out"
    [ "$(sha v0004)" = "$f" ] || fail "null and fp32 differ on this CPU"
fi

# bf16 killed after step 6 (checkpoints every 2 steps of 8), resumed: the uninterrupted bytes
sed -i "s/^training:\$/training:\n  save_steps: 2/" b.dlm
"$DLM" train b.dlm --max-steps 8 -q >/dev/null 2>&1
u=$(sha v0005)
set +e
DLM_TEST_CRASH_AFTER_STEP=6 "$DLM" train b.dlm --max-steps 8 -q >/dev/null 2>&1
rc=$?
set -e
[ $rc -ne 0 ] || fail "the crash hook did not kill the run"
python3 -c "import json,sys; assert json.load(open(sys.argv[1]))['precision'] == 'bf16'" \
    "$store/adapter/checkpoints/step-000006/progress.json" || fail "checkpoint without its precision"
# --resume in fp32 from the bf16 checkpoint: refused, naming what it needs
sed 's/precision: bf16/precision: fp32/' b.dlm > b32.dlm
set +e
out=$("$DLM" train b32.dlm --same-store --max-steps 8 --resume 2>&1)
rc=$?
set -e
[ $rc -ne 0 ] || fail "a bf16 checkpoint resumed in fp32: $out"
grep <<<"$out" -q "ResumeIntegrityError: the checkpoint at step 6 was trained with precision bf16; this run would train with fp32" ||
    fail "no precision refusal: $out"
grep <<<"$out" -q "^hint: set training.precision: bf16 in b32.dlm to continue it" || fail "no hint: $out"
"$DLM" train b.dlm --max-steps 8 --resume -q >/dev/null 2>&1 || fail "bf16 --resume failed"
r=$(sha v0006)
[ "$r" = "$u" ] || fail "bf16: the resumed run differs from the uninterrupted one: $r vs $u"
# continuing the committed bf16 version in fp32: refused too
set +e
out=$("$DLM" train b32.dlm --same-store --max-steps 2 --continue 2>&1)
set -e
grep <<<"$out" -q "version v0006 was trained with precision bf16" || fail "version continue: $out"

# doctor: text and JSON
out=$("$DLM" doctor b.dlm 2>&1) || fail "doctor: $out"
grep <<<"$out" -q "^  precision: ${bf16_line#^precision: }" || fail "doctor text: $out"
grep <<<"$out" -q "^bf16:    $be (" || fail "doctor: no bf16 back end line: $out"
out=$("$DLM" doctor h.dlm 2>&1) || fail "doctor fp16: $out"
grep <<<"$out" -q "^  precision: refused: .*fp16 is not supported" || fail "doctor fp16: $out"
"$DLM" doctor b.dlm --json | python3 -c "
import json, sys
fast, be = sys.argv[1] == '1', sys.argv[2]
d = json.load(sys.stdin)
p = d['document']['precision'] if 'document' in d else d['precision']
assert p['requested'] == 'bf16' and p['used'] == 'bf16' and ('emulated' in p['how']) != fast, p
assert d['capabilities']['precision_default'] == ('bf16' if fast else 'fp32'), d['capabilities'].get('precision_default')
assert d['capabilities']['bf16_backend']['name'] == be, d['capabilities'].get('bf16_backend')
" "$fast" "$be" || fail "doctor --json"
echo "ok: bf16 ($be) $a, fp32 $f"
