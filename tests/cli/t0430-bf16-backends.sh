#!/usr/bin/env bash
# The bf16 back ends (src/kern/gemm_bf16.c, docs/kernels.md): `dlm --version`
# names the one the CPU probe picked and what training.precision null
# trains on it; DLM_BF16_BACKEND forces one (an unknown name or one the CPU
# cannot run is an error); DLM_CPU_LEVEL=avx2 leaves fma. A bf16 run on
# amx-model (the AMX tile kernel on the C model of the tile unit: the AMX
# path end to end on any CPU) gives the same bytes for 1 and 2 threads,
# and other bytes than fma (the pair order and DAZ/FTZ of tdpbf16ps).
set -euo pipefail
. "$DLM_SRC/tests/cli/lib.sh"
sha() { sha256sum "$DLM_HOME/store/$ID/adapter/versions/$1/adapter_model.safetensors" | cut -c1-64; }

v=$("$DLM" --version)
grep <<<"$v" -q '^bf16: \(amx (AMX tdpbf16ps)\|avx512bf16 (vdpbf16ps)\|fma (f32 FMA on bf16-rounded inputs)\); training.precision null trains \(bf16\|fp32\)$' ||
    fail "--version has no bf16 line: $v"
if grep <<<"$v" -q '^bf16: fma'; then
    grep <<<"$v" -q 'null trains fp32$' || fail "fma but null trains bf16: $v"
else
    grep <<<"$v" -q 'null trains bf16$' || fail "bf16 instructions but null trains fp32: $v"
fi
v=$(DLM_CPU_LEVEL=avx2 "$DLM" --version)
grep <<<"$v" -q '^bf16: fma (f32 FMA on bf16-rounded inputs); training.precision null trains fp32$' ||
    fail "DLM_CPU_LEVEL=avx2 did not leave fma: $v"
v=$(DLM_BF16_BACKEND=amx-model "$DLM" --version)
grep <<<"$v" -q '^bf16: amx-model (AMX tdpbf16ps on the C model of the tile unit); training.precision null trains fp32$' ||
    fail "DLM_BF16_BACKEND=amx-model: $v"
set +e
out=$(DLM_BF16_BACKEND=vnni "$DLM" --version 2>&1); rc=$?
set -e
[ $rc -ne 0 ] && grep <<<"$out" -q "DLM_BF16_BACKEND=vnni: expected fma, avx512bf16, amx or amx-model" ||
    fail "unknown back end accepted: $out"
set +e
out=$(DLM_CPU_LEVEL=avx2 DLM_BF16_BACKEND=avx512bf16 "$DLM" --version 2>&1); rc=$?
set -e
[ $rc -ne 0 ] && grep <<<"$out" -q "DLM_BF16_BACKEND=avx512bf16: this CPU cannot run it" ||
    fail "avx512bf16 at the avx2 level accepted: $out"

# the AMX kernel on the tile model, through a real training run
write_doc d.dlm 20
sed -i "s/^training:\$/training:\n  precision: bf16/" d.dlm
out=$(DLM_BF16_BACKEND=amx-model "$DLM" train d.dlm --max-steps 3 --threads 2 2>&1) || fail "amx-model train: $out"
grep <<<"$out" -q "^precision: bf16 on the C model of the AMX tile unit" || fail "no amx-model banner: $out"
a=$(sha v0001)
DLM_BF16_BACKEND=amx-model "$DLM" train d.dlm --max-steps 3 --threads 1 -q >/dev/null 2>&1
[ "$(sha v0002)" = "$a" ] || fail "amx-model: threads 1 vs 2 changed the adapter"
DLM_BF16_BACKEND=fma "$DLM" train d.dlm --max-steps 3 --threads 2 -q >/dev/null 2>&1
[ "$(sha v0003)" != "$a" ] || fail "amx-model and fma trained the same bytes"
echo "ok: amx-model $a"
