#!/usr/bin/env bash
# bench/mpi/run.sh: issue 23's bench. `dlm train` on one document (the
# embedded tiny base, LoRA) as
#   A. 1 process × 2 threads, grad_accum 2
#   B. 2 MPI ranks × 1 thread each (mpirun -np 2, loopback), grad_accum 1
#   C. 1 process × 1 thread, grad_accum 2 (what one core does alone)
#   D. as B, with Open MPI's mpi_yield_when_idle 1 (a waiting rank yields
#      its core instead of polling; Open MPI turns it on by itself only when
#      it sees more ranks than cores)
# Same cores for A and B, so the issue expects parity. Each layout trains
# the same steps of 2 micro-batches; a step's time is the `step_s` of the
# run's JSONL log (logs/train-*.jsonl, written by rank 0), median over the
# steps after the first (warm-up), then median over ROUNDS interleaved
# rounds. The adapters of all runs must be identical bytes (docs/mpi.md: N
# ranks with grad_accum g = one process with N·g, any thread count): the
# script fails if they are not. The scaling model of docs/mpi.md is
# evaluated with this run's figures: S = the LoRA gradient bytes (dlm doctor
# --json, plan item "gradients"), the chain's N − 1 + ⌈log₂ N⌉ hops of S at
# 10/25/100 Gbit/s next to the measured step. Appends to bench/RESULTS.md
# unless BENCH_NO_APPEND=1.
#
#   bench/mpi/run.sh
# environment: DLM_MPI_BIN=build-mpi/dlm (built with cmake -DDLM_MPI=ON --target
#   dlm when missing), ROUNDS=3, STEPS=16 (about: the text is sized for it), SEQ=128
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
ROUNDS=${ROUNDS:-3} STEPS=${STEPS:-16} SEQ=${SEQ:-128}
DLM=${DLM_MPI_BIN:-$root/build-mpi/dlm}
if [ ! -x "$DLM" ]; then
    echo "[mpi-bench] building $DLM (cmake -DDLM_MPI=ON, as make mpi)" >&2
    cmake -S "$root" -B "$root/build-mpi" -DCMAKE_BUILD_TYPE=Release -DDLM_MPI=ON >/dev/null
    cmake --build "$root/build-mpi" -j2 --target dlm >/dev/null
fi
"$DLM" --version | grep -q '^mpi: yes' || { echo "mpi-bench: $DLM is not an MPI build" >&2; exit 1; }
command -v mpirun >/dev/null || { echo "mpi-bench: mpirun missing (openmpi-bin)" >&2; exit 1; }
stamp=$(date -u +%Y%m%dT%H%M%SZ)
out="$root/bench/out/mpi-$stamp"
mkdir -p "$out"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
ID=01JD0000000000000000000000
log() { echo "[mpi-bench $(date +%H:%M:%S)] $*" >&2; }
# loopback, as tests/mpi/m0001: shared memory between the local ranks; not
# bound to cores (the single process is not either)
mpi() { timeout 600 mpirun --oversubscribe --allow-run-as-root --bind-to none --mca btl self,vader \
        --mca btl_vader_single_copy_mechanism none -np "$@"; }

# doc FILE GRAD_ACCUM: prose in windows of SEQ tokens, micro_batch_size 1;
# 2·STEPS windows make STEPS steps of 2 micro-batches in one epoch
doc() {
    python3 - "$1" "$2" "$ID" "$SEQ" "$STEPS" <<'PY'
import random, sys
path, ga, did, seq, steps = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
rng = random.Random(23)
words = ("the whale ship sea captain harpoon crew deck wind sail storm voyage island harbour oil "
         "rope boat mast wave night morning ocean sailor chase white long cold deep").split()
paras = []
# ~4 bytes a token: enough text for 2*steps windows (the validation split takes its share too)
while sum(map(len, paras)) < 2 * steps * seq * 5:
    paras.append(" ".join(" ".join(rng.choice(words) for _ in range(rng.randint(6, 14))).capitalize() + "."
                          for _ in range(6)))
open(path, "w").write(f"""---
dlm_id: {did}
dlm_version: 15
base_model: tiny
training:
  adapter: lora
  sequence_len: {seq}
  num_epochs: 1
  learning_rate: 0.001
  micro_batch_size: 1
  grad_accum: {ga}
---
# Voyage

""" + "\n\n".join(paras) + "\n")
PY
}
doc "$T/one.dlm" 2
doc "$T/two.dlm" 1
sbytes=$(DLM_HOME="$T/doctor" "$DLM" doctor "$T/one.dlm" --json 2>/dev/null | python3 -c '
import json, sys
p = json.load(sys.stdin)["plan"]
print({i["name"]: i["bytes"] for i in p["items"]}["gradients"])')

load0=$(cut -d' ' -f1-3 /proc/loadavg)
: > "$out/runs.jsonl"
for r in $(seq "$ROUNDS"); do
    for lay in A B C D; do
        h="$T/$lay-$r"
        l=$(cut -d' ' -f1 /proc/loadavg)
        log "round $r: layout $lay (load $l)"
        t0=$(date +%s.%N)
        case $lay in
            A) DLM_HOME="$h" "$DLM" train "$T/one.dlm" --threads 2 -q > /dev/null ;;
            B) DLM_HOME="$h" mpi 2 "$DLM" train "$T/two.dlm" --threads 1 -q > /dev/null ;;
            C) DLM_HOME="$h" "$DLM" train "$T/one.dlm" --threads 1 -q > /dev/null ;;
            D) DLM_HOME="$h" mpi 2 --mca mpi_yield_when_idle 1 "$DLM" train "$T/two.dlm" --threads 1 -q > /dev/null ;;
        esac
        t1=$(date +%s.%N)
        sha=$(sha256sum "$h/store/$ID/adapter/versions/v0001/adapter_model.safetensors" | cut -c1-64)
        python3 - "$lay" "$r" "$l" "$(cut -d' ' -f1 /proc/loadavg)" "$sha" "$t0" "$t1" "$h"/store/$ID/logs/train-*.jsonl \
            >> "$out/runs.jsonl" <<'PY'
import json, statistics, sys
lay, r, l0, l1, sha, t0, t1, logf = sys.argv[1:]
steps = [json.loads(x) for x in open(logf) if '"type":"step"' in x]
ga = [json.loads(x) for x in open(logf) if '"grad_accum"' in x]
st = [s["step_s"] for s in steps[1:]]
print(json.dumps({"layout": lay, "round": int(r), "load_start": float(l0), "load_end": float(l1), "sha256": sha,
                  "steps": len(steps), "step_s_median": statistics.median(st), "wall_s": float(t1) - float(t0)}))
PY
        rm -rf "$h"
    done
done
load1=$(cut -d' ' -f1-3 /proc/loadavg)
commit=$(git -C "$root" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
rc=0
python3 - "$out/runs.jsonl" "$(date -u '+%Y-%m-%d %H:%M UTC')" "$commit" "$load0" "$load1" "$ROUNDS" "$SEQ" "$sbytes" \
    > "$out/table.md" <<'PY' || rc=$?
import json, math, statistics, sys
path, date, commit, load0, load1, rounds, seq, sbytes = sys.argv[1:]
sbytes = int(sbytes)
runs = [json.loads(l) for l in open(path) if l.strip()]
shas = {r["sha256"] for r in runs}
name = {"A": "1 process × 2 threads, grad_accum 2", "B": "2 ranks × 1 thread (mpirun -np 2), grad_accum 1",
        "C": "1 process × 1 thread, grad_accum 2",
        "D": "2 ranks × 1 thread, mpi_yield_when_idle 1, grad_accum 1"}
med = {}
print(f"## {date} — MPI data parallelism (bench/mpi/run.sh), dlm {commit}")
print()
print(f"Machine: AMD EPYC, 2 cores shared with other engineers' builds; load average {load0} at start, {load1} at "
      f"end (each run's 1-minute load is in its row). `dlm train` (MPI build) on the tiny base, LoRA, "
      f"sequence_len {seq}, micro_batch_size 1, 2 micro-batches per step, {runs[0]['steps']} steps; step time = "
      f"median `step_s` of the JSONL log after the first step; median of {rounds} interleaved rounds.")
print()
print("| layout | step s (median) | runs step s | runs wall s | load during runs |")
print("|---|---|---|---|---|")
for k in "ABCD":
    rs = [r for r in runs if r["layout"] == k]
    med[k] = statistics.median(r["step_s_median"] for r in rs)
    per = " / ".join("%.3f" % r["step_s_median"] for r in rs)
    wall = " / ".join("%.1f" % r["wall_s"] for r in rs)
    loads = " / ".join(str(r["load_start"]) for r in rs)
    print(f"| {name[k]} | {med[k]:.3f} | {per} | {wall} | {loads} |")
print()
print(f"- 2 ranks × 1 thread / 1 process × 2 threads, step time: **{med['B'] / med['A']:.2f}x** "
      f"(1.00x = parity; > 1 = the ranks are slower)")
print(f"- 2 ranks (yielding) / 1 process × 2 threads: **{med['D'] / med['A']:.2f}x**")
print(f"- 1 process × 1 thread / 2 ranks × 1 thread: **{med['C'] / med['B']:.2f}x**, yielding ranks "
      f"**{med['C'] / med['D']:.2f}x** (2.00x = perfect 2-way scaling)")
if len(shas) == 1:
    print(f"- adapters: all {len(runs)} runs identical bytes (sha256 {next(iter(shas))[:16]}…)")
else:
    print("- adapters: DIFFER: " + ", ".join(sorted(shas)))
print()
print(f"Scaling model (docs/mpi.md) with these figures: S = {sbytes} bytes of LoRA gradient per step; "
      "t_comm = (N − 1 + ⌈log₂ N⌉) · S / bandwidth; compute per rank ≈ (1-thread step) / N.")
print()
print("| N ranks | hops | t_comm 10 Gbit/s | 25 Gbit/s | 100 Gbit/s | compute per rank (C / N) |")
print("|---|---|---|---|---|---|")
for n in (2, 4, 8):
    hops = n - 1 + math.ceil(math.log2(n))
    t = lambda gbit: f"{1e3 * hops * sbytes * 8 / (gbit * 1e9):.2f} ms"
    print(f"| {n} | {hops} | {t(10)} | {t(25)} | {t(100)} | {1e3 * med['C'] / n:.1f} ms |")
print()
print(f"Measured on loopback (shared memory): 2 ranks' step − (1-thread step / 2) = "
      f"{1e3 * (med['B'] - med['C'] / 2):.1f} ms of overhead per step (chain, broadcast, waiting for the slower rank).")
print()
sys.exit(0 if len(shas) == 1 else 3)
PY
cat "$out/table.md"
if [ "${BENCH_NO_APPEND:-0}" != 1 ]; then
    cat "$out/table.md" >> "$root/bench/RESULTS.md"
    echo "[mpi-bench] appended to bench/RESULTS.md (raw runs in $out)" >&2
fi
[ $rc = 0 ] || { echo "mpi-bench: the adapters differ between layouts" >&2; exit 1; }
