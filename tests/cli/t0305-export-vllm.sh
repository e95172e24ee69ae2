#!/usr/bin/env bash
# dlm export --target vllm (original-spec §6.3): base + PEFT adapter folder
# (the trained adapter's tensors unchanged), vllm_launch.sh with the spec's
# flags and vllm_config.json; --merged: an HF folder whose projections numpy
# recomputes as W + (alpha/r)·B·A from the base's and the adapter's
# safetensors (read here from the format), every other tensor and the
# config byte-identical, and dlm itself generates the same tokens from it as
# from base + adapter; a mix goes out as one PEFT adapter; a GGUF base is
# refused with a hint.
set -euo pipefail
. "$DLM_SRC/tests/cli/lib.sh"
write_doc doc.dlm 2
S="$DLM_HOME/store/$ID"
py() { /usr/bin/python3 -c "$@"; }
"$DLM" train doc.dlm -q >/dev/null
V="$S/adapter/versions/v0001"

out=$("$DLM" export doc.dlm --target vllm)
X="$S/exports/vllm"
for f in adapter/adapter_config.json adapter/adapter_model.safetensors vllm_launch.sh vllm_config.json export_manifest.json; do
    [ -f "$X/$f" ] || fail "missing $f: $out"
done
[ -x "$X/vllm_launch.sh" ] && sh -n "$X/vllm_launch.sh" || fail "launch script"
abs=$(realpath "$FIXTURE_QWEN")
grep -qF "exec vllm serve '$abs' --host 127.0.0.1 --port 8000 --dtype auto --served-model-name 'dlm-01jd0000000000000000000000' --max-model-len 96 --enable-lora --lora-modules 'dlm-01jd0000000000000000000000-adapter'=./adapter --max-lora-rank 8" "$X/vllm_launch.sh" ||
    fail "launch line: $(cat "$X/vllm_launch.sh")"
py "
import json, struct, sys
import numpy as np
def st(p):
    b = open(p, 'rb').read(); n = struct.unpack_from('<Q', b)[0]; h = json.loads(b[8:8 + n])
    return {k: np.frombuffer(b[8 + n + v['data_offsets'][0]:8 + n + v['data_offsets'][1]], dtype={'F32': np.float32, 'F16': np.float16, 'BF16': np.uint16}[v['dtype']]).reshape(v['shape'])
            for k, v in h.items() if k != '__metadata__'}, h
a, _ = st('$V/adapter_model.safetensors'); b, _ = st('$X/adapter/adapter_model.safetensors')
assert sorted(a) == sorted(b) and all(np.array_equal(a[k], b[k]) for k in a), 'adapter tensors differ'
c = json.load(open('$X/vllm_config.json'))
assert c['model'] == '$abs' and c['enable_lora'] is True and c['max_model_len'] == 96 and c['max_lora_rank'] == 8, c
assert c['lora_modules'] == [{'name': 'dlm-01jd0000000000000000000000-adapter', 'path': './adapter'}], c
m = json.load(open('$X/export_manifest.json'))
assert m['target'] == 'vllm' and sorted(x['path'] for x in m['artifacts']) == ['adapter/adapter_config.json', 'adapter/adapter_model.safetensors', 'vllm_config.json', 'vllm_launch.sh'], m
" || fail "vllm adapter export"

# merged: an HF folder
"$DLM" export doc.dlm --target vllm --merged --out "$T/vm" >/dev/null
grep -qF "exec vllm serve './model' --host" "$T/vm/vllm_launch.sh" && ! grep -q -- "--enable-lora" "$T/vm/vllm_launch.sh" || fail "merged launch: $(cat "$T/vm/vllm_launch.sh")"
cmp -s "$FIXTURE_QWEN/config.json" "$T/vm/model/config.json" || fail "config.json differs"
py "
import json, struct, glob
import numpy as np
def st(p):
    b = open(p, 'rb').read(); n = struct.unpack_from('<Q', b)[0]; h = json.loads(b[8:8 + n])
    return {k: np.frombuffer(b[8 + n + v['data_offsets'][0]:8 + n + v['data_offsets'][1]], dtype={'F32': np.float32}[v['dtype']]).reshape(v['shape'])
            for k, v in h.items() if k != '__metadata__'}
base = {}
for f in glob.glob('$FIXTURE_QWEN/*.safetensors'): base.update(st(f))
ad = st('$V/adapter_model.safetensors'); cfg = json.load(open('$V/adapter_config.json'))
s = cfg['lora_alpha'] / cfg['r']
out = st('$T/vm/model/model.safetensors')
assert sorted(out) == sorted(base), (sorted(out), sorted(base))
n = 0; worst = 0
for k, w in base.items():
    ka = 'base_model.model.' + k.replace('.weight', '.lora_A.weight')
    if ka in ad:
        want = w.astype(np.float64) + s * (ad[ka.replace('lora_A', 'lora_B')].astype(np.float64) @ ad[ka].astype(np.float64))
        err = float(np.max(np.abs(out[k] - want)) / np.max(np.abs(want))); worst = max(worst, err); n += 1
        assert err < 1e-6, (k, err)
    else:
        assert np.array_equal(out[k], w), k
assert n > 0
print('merged projections', n, 'max rel err', worst)
" || fail "merged weights"
a=$("$DLM" prompt doc.dlm --raw --temp 0 -n 16 --json "The quick brown fox" | py "import json,sys; print(json.load(sys.stdin)['tokens'])")
b=$("$DLM" prompt --base "$T/vm/model" --raw --temp 0 -n 16 --json "The quick brown fox" | py "import json,sys; print(json.load(sys.stdin)['tokens'])")
[ "$a" = "$b" ] || fail "merged vllm model generates $b, base + adapter $a"

# a mix goes out as one PEFT adapter (rank 16 → --max-lora-rank 16)
"$DLM" export doc.dlm --target vllm --out "$T/vmix" --adapter-mix v0001:0.5,v0001:0.5 >/dev/null
py "
import json; c = json.load(open('$T/vmix/adapter/adapter_config.json')); assert c['r'] == 16, c
assert json.load(open('$T/vmix/vllm_config.json'))['max_lora_rank'] == 16
" || fail "vllm mix"

# a GGUF base is refused
"$DLM" export doc.dlm --target gguf --quant F32 --merged --out "$T/g" >/dev/null
write_doc gg.dlm 1 "$T/g/merged.F32.gguf"
sed -i "s/$ID/01JD0000000000000000000009/" gg.dlm
"$DLM" train gg.dlm -q >/dev/null
set +e; out=$("$DLM" export gg.dlm --target vllm 2>&1); rc=$?; set -e
[ $rc -eq 1 ] && grep -q "needs an HF-format base" <<<"$out" && grep -q "hint:" <<<"$out" || fail "GGUF base: $rc $out"
echo ok
