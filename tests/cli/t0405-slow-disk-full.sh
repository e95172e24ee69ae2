#!/usr/bin/env bash
# Disk full: the store on a small tmpfs, its free space filled to leave
# varied amounts, so `dlm train` and `dlm export` run out at different
# points (checkpoint, version commit, logs, export files). Each failure is
# a DiskFullError naming the path and the bytes it needed; the previous
# version stays current; no temp file or partial folder is left; `dlm show`
# reads the store; and once space is freed the same command (train with
# --resume when a checkpoint was kept) completes with the bytes of an
# uninterrupted run. Needs root (mount); exits 77 when mounting is refused.
set -euo pipefail
. "$DLM_SRC/tests/cli/lib.sh"
PY=/usr/bin/python3
mnt="$T/mnt"
mkdir -p "$mnt"
mount -t tmpfs -o size=24m tmpfs "$mnt" 2>/dev/null || { echo "skip: cannot mount a tmpfs here"; exit 77; }
trap 'umount "$mnt" 2>/dev/null || umount -l "$mnt"; rm -rf "$T"' EXIT
write_tiny_doc doc.dlm
STEPS=12
S="$mnt/home/store/$ID"
export DLM_HOME="$mnt/home"
sha() { sha256sum "$1" | cut -c1-64; }

# references, uninterrupted, on a roomy disk
DLM_HOME="$T/ref" "$DLM" train doc.dlm --max-steps $STEPS -q > /dev/null
want=$(sha "$T/ref/store/$ID/adapter/versions/v0001/adapter_model.safetensors")
DLM_HOME="$T/ref" "$DLM" export doc.dlm --target gguf --quant Q8_0 -q > /dev/null
want_gguf=$(sha "$T/ref/store/$ID/exports/Q8_0/adapter.gguf")

"$DLM" train doc.dlm --max-steps $STEPS -q > /dev/null
[ "$(sha "$S/adapter/versions/v0001/adapter_model.safetensors")" = "$want" ] || fail "v0001 on tmpfs differs"

avail() { df -B1 --output=avail "$mnt" | tail -1 | tr -d ' '; }
fill_to() { # leave about $1 bytes free
    rm -f "$mnt/filler"
    local a; a=$(avail)
    [ "$a" -gt "$1" ] || return 0
    fallocate -l $(( a - $1 )) "$mnt/filler" 2>/dev/null || head -c $(( a - $1 )) /dev/zero > "$mnt/filler" 2>/dev/null || true
}
leftovers() { find "$S" \( -name '*.tmp.*' -o -name '*.tmp-*' -o -name '.tmp*' \) 2>/dev/null || true; }
check_failed() { # check_failed WHAT OUTPUT
    grep <<<"$2" -q "^dlm: error: DiskFullError: .*disk full: " || fail "$1: not a disk-full error: $2"
    grep <<<"$2" -Eq "cannot [a-z ]+'$mnt/[^']+'" || fail "$1: the error names no path on the full disk: $2"
    grep <<<"$2" -Eq "it needs [0-9.]+ [KMG]?i?B \([0-9]+ bytes\), [0-9.]+ [KMG]?i?B free there" ||
        grep <<<"$2" -q "No space left on device" || fail "$1: the error does not say what it needed: $2"
    grep <<<"$2" -q "^hint: " || fail "$1: no hint: $2"
    [ -z "$(leftovers)" ] || fail "$1: left behind: $(leftovers)"
    "$DLM" show doc.dlm --json > /dev/null || fail "$1: show cannot read the store"
    $PY -c 'import json,sys; json.load(open(sys.argv[1]))' "$S/manifest.json" || fail "$1: manifest"
}

ver=1 fails=0 where=""
levels="8192 600000 1500000 2600000 3300000 3700000 4200000 4700000 9000000"
nl=0
for k in $levels; do
    nl=$((nl + 1))
    fill_to $k
    set +e
    out=$("$DLM" train doc.dlm --max-steps $STEPS 2>&1); rc=$?
    set -e
    if [ $rc -eq 0 ]; then
        ver=$((ver + 1))
    else
        [ $rc -eq 1 ] || fail "train with $k bytes free: exit $rc: $out"
        check_failed "train with $k bytes free" "$out"
        [ "$(cat "$S/adapter/current.txt")" = "adapter/versions/$(printf v%04d $ver)" ] ||
            fail "train with $k bytes free: current moved to $(cat "$S/adapter/current.txt")"
        [ ! -e "$S/adapter/versions/$(printf v%04d $((ver + 1)))" ] || fail "a partial version folder is left"
        fails=$((fails + 1))
        where="$where $(echo "$out" | sed -n "s/^dlm: error: .*cannot [a-z ]*'[^']*\/\([^'/]*\)'.*/\1/p" | head -1)"
        rm -f "$mnt/filler"
        if ls "$S/adapter/checkpoints" 2>/dev/null | grep -q '^step-'; then
            "$DLM" train doc.dlm --max-steps $STEPS --resume -q > /dev/null || fail "--resume after $k bytes free"
        else
            "$DLM" train doc.dlm --max-steps $STEPS -q > /dev/null || fail "train again after $k bytes free"
        fi
        ver=$((ver + 1))
    fi
    got=$(sha "$S/adapter/versions/$(printf v%04d $ver)/adapter_model.safetensors")
    [ "$got" = "$want" ] || fail "v$ver (after $k bytes free) differs from the uninterrupted run"
    rm -rf "$S/adapter/versions/$(printf v%04d $((ver - 1)))"   # keep the tmpfs roomy
done
rm -f "$mnt/filler"
[ $fails -ge 4 ] || fail "only $fails train runs hit the full disk"
echo "train: $fails of $nl fill levels failed, at:$where"

efails=0 ewhere=""
for k in 8192 200000 3000000 6400000 9000000; do
    rm -rf "$S/exports"
    fill_to $k
    set +e
    out=$("$DLM" export doc.dlm --target gguf --quant Q8_0 2>&1); rc=$?
    set -e
    if [ $rc -ne 0 ]; then
        [ $rc -eq 1 ] || fail "export with $k bytes free: exit $rc: $out"
        check_failed "export with $k bytes free" "$out"
        [ ! -e "$S/exports/Q8_0" ] || fail "export with $k bytes free left a folder: $(ls "$S/exports/Q8_0")"
        efails=$((efails + 1))
        ewhere="$ewhere $(echo "$out" | sed -n "s/^dlm: error: .*cannot [a-z ]*'[^']*\/\([^'/]*\)'.*/\1/p" | head -1)"
        rm -f "$mnt/filler"
        "$DLM" export doc.dlm --target gguf --quant Q8_0 -q > /dev/null || fail "export again after $k bytes free"
    fi
    [ "$(sha "$S/exports/Q8_0/adapter.gguf")" = "$want_gguf" ] || fail "adapter.gguf after $k bytes free differs"
done
rm -f "$mnt/filler"
[ $efails -ge 2 ] || fail "only $efails exports hit the full disk"
echo "export: $efails of 5 fill levels failed, at:$ewhere"
echo "ok: train $fails failures, export $efails failures, every one recovered"
