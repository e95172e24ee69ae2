#!/bin/bash
# bench/run.sh — `make bench`: dlm against its peers on this machine, in one
# script, as ratios (absolute times on a shared machine are noisy; peers run
# interleaved with dlm, best of several rounds). Prints one table and
# appends it to bench/RESULTS.md with the date, the machine and its load.
#
#   1. LoRA training tokens/s and peak RSS (random-weight SmolLM2-135M and
#      Qwen2.5-0.5B shapes, seq 512, rank 8 on q,k,v,o,gate,up,down,
#      2 threads) against ../shared/bench/torch_lora_peer.py (Debian torch);
#   2. prompt processing (512 tokens) and generation tokens/s against
#      llama.cpp (npm node-llama-cpp 3.21.1) on the same GGUF files: F32,
#      F16, Q8_0, Q4_K_M (llama-quant's per-tensor mix, bench/infer/make_gguf.c);
#   3. GEMM GFLOPS of dlm's kernels against the measured FMA peak
#      (../shared/bench/c/peak.c) on the matmul shapes of both models;
#   4. tokenizer MB/s against HF tokenizers (npm @anush008/tokenizers);
#   5. the real command: `dlm train` on a document (SmolLM2-135M shape with
#      the Llama-3 vocabulary, Qwen2.5-0.5B shape; std 0.02 weights and std
#      0.3 attention weights) against the PyTorch peer in fp32 and bf16
#      autocast, steps timed from the JSONL log (bench/train/cmd.sh).
#
# Knobs (environment):
#   BENCH_QUICK=1          SmolLM2 shape only, fewer types (a ~10 minute run)
#   BENCH_ROUNDS=N         interleaved rounds per training pair (default 2)
#   BENCH_STEPS=N          timed training steps per run (default 3, +1 warm-up)
#   BENCH_THREADS=N        threads for training and the 2-thread columns (2)
#   BENCH_SECTIONS="train infer gemm tok cmd"   which sections run
#   CMD_SHAPES, CMD_STDS, CMD_STEPS         section cmd (bench/train/cmd.sh)
#   DLM_BENCH_SHARED=DIR   the shared folder (default ../shared next to the repo)
#   BENCH_NO_APPEND=1      print the table without appending to RESULTS.md
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
shared=${DLM_BENCH_SHARED:-"$root/../shared"}
export DLM_BENCH_SHARED="$shared"
out="$root/bench/out"
stamp=$(date -u +%Y%m%dT%H%M%SZ)
run="$out/run-$stamp"
mkdir -p "$run" "$out/models"
res="$run/results.jsonl"
: > "$res"
quick=${BENCH_QUICK:-0}
rounds=${BENCH_ROUNDS:-2}
steps=${BENCH_STEPS:-3}
thr=${BENCH_THREADS:-2}
sections=${BENCH_SECTIONS:-"train infer gemm tok cmd"}
if [ "$quick" = 1 ]; then
    shapes="smollm2-135m"; types="f32 q8_0 q4_k_m"
else
    shapes="smollm2-135m qwen2.5-0.5b"; types="f32 f16 q8_0 q4_k_m"
fi
load0=$(cut -d' ' -f1-3 /proc/loadavg)
log() { echo "[bench $(date +%H:%M:%S)] $*" >&2; }

# ---- build ---------------------------------------------------------------
log "building (release)"
cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$root/build" -j2 >/dev/null
LIBS="$(pkg-config --libs yaml-0.1 jansson libpcre2-8 libutf8proc libzstd libarchive sqlite3 libcurl libsodium) -lm -lpthread"
CC_ARGS="-O2 -I $root/src -I $root/build/gen"
# shellcheck disable=SC2086
{
gcc $CC_ARGS "$here/train/bench_train.c" "$root/build/libdlmcore.a" $LIBS -o "$out/bench_train"
gcc $CC_ARGS "$here/infer/bench_infer.c" "$root/build/libdlmcore.a" $LIBS -o "$out/bench_infer"
gcc $CC_ARGS "$here/infer/make_gguf.c" "$root/build/libdlmcore.a" $LIBS -o "$out/make_gguf"
gcc $CC_ARGS "$here/gemm/bench_gemm.c" "$root/build/libdlmcore.a" $LIBS -o "$out/bench_gemm"
gcc $CC_ARGS "$here/train/denorm.c" "$root/build/libdlmcore.a" $LIBS -o "$out/denorm"
# the FMA peaks are AVX-512 code: on an AVX2-only CPU they do not build and
# section gemm has no peak to compare with (the other sections still run)
gcc -O2 -march=native -fopenmp "$shared/bench/c/peak.c" -o "$out/peak" 2>/dev/null || log "peak.c did not build (no AVX-512?)"
gcc -O2 "$here/gemm/isa_peak.c" -o "$out/isa_peak" 2>/dev/null || log "isa_peak.c did not build (no AVX-512?)"
}

# one result line: section name dlm peer unit target kind
#   kind: ratio (dlm/peer >= target), inv (dlm/peer <= target), frac (dlm/peer >= target, a share of a peak)
emit() {
    printf '{"section":"%s","name":"%s","dlm":%s,"peer":%s,"unit":"%s","target":%s,"kind":"%s","peer_name":"%s"}\n' \
        "$1" "$2" "${3:-null}" "${4:-null}" "$5" "$6" "$7" "$8" >> "$res"
}
jget() { /usr/bin/python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(d.get(sys.argv[2], ""))' "$1" "$2"; }
best() { /usr/bin/python3 -c 'import sys; v=[float(x) for x in sys.argv[2:] if x not in ("", "null")]; print((max if sys.argv[1]=="max" else min)(v) if v else "null")' "$@"; }

# ---- 1. training -----------------------------------------------------------
if [[ " $sections " == *" train "* ]]; then
    TUNED="MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=100000000000 OPENBLAS_CORETYPE=SkylakeX OMP_WAIT_POLICY=PASSIVE"
    for s in $shapes; do
        dt=(); pt=(); dr=(); pr=(); bt=(); br=()
        for r in $(seq "$rounds"); do
            log "train $s round $r: dlm"
            d=$("$out/bench_train" "$s" --seq 512 --batch 1 --rank 8 --steps "$steps" --warmup 1 --threads "$thr" \
                | sed -n 's/^RESULT //p')
            echo "dlm  $d" >> "$run/train.log"
            # the base as published (SmolLM2 and Qwen2.5 ship bf16): the
            # same f32 arithmetic on bf16-valued weights, half the bytes
            log "train $s round $r: dlm, bf16 base"
            b=$("$out/bench_train" "$s" --seq 512 --batch 1 --rank 8 --steps "$steps" --warmup 1 --threads "$thr" \
                --base bf16 | sed -n 's/^RESULT //p')
            echo "dlm  $b" >> "$run/train.log"
            bt+=("$(jget "$b" tokens_per_s_max)"); br+=("$(jget "$b" peak_rss_mb)")
            log "train $s round $r: PyTorch peer"
            # shellcheck disable=SC2086
            p=$(env $TUNED /usr/bin/python3 "$here/train/peer_qwen.py" --mode train --shape "$s" --seq 512 --batch 1 \
                --rank 8 --steps "$steps" --warmup 1 --threads "$thr" | sed -n 's/^RESULT //p')
            echo "peer $p" >> "$run/train.log"
            dt+=("$(jget "$d" tokens_per_s_max)"); dr+=("$(jget "$d" peak_rss_mb)")
            pt+=("$(jget "$p" tok_s_max)"); pr+=("$(jget "$p" peak_rss_mb)")
        done
        emit train "LoRA train $s tok/s" "$(best max "${dt[@]}")" "$(best max "${pt[@]}")" "tok/s" 3.0 ratio "PyTorch"
        emit train "LoRA train $s peak RSS" "$(best max "${dr[@]}")" "$(best min "${pr[@]}")" "MB" 0.25 inv "PyTorch"
        emit train "LoRA train $s bf16 base tok/s" "$(best max "${bt[@]}")" "$(best max "${pt[@]}")" "tok/s" 3.0 ratio "PyTorch f32"
        emit train "LoRA train $s bf16 base peak RSS" "$(best max "${br[@]}")" "$(best min "${pr[@]}")" "MB" 0.25 inv "PyTorch f32"
    done
fi

# ---- 2. inference ----------------------------------------------------------
if [[ " $sections " == *" infer "* ]]; then
    llama="$out/llama"
    mkdir -p "$llama"
    if ! cmp -s "$here/infer/package-lock.json" "$llama/package-lock.json" || [ ! -d "$llama/node_modules/node-llama-cpp" ]; then
        log "installing node-llama-cpp (bench/infer/package.json, pinned)"
        cp "$here/infer/package.json" "$here/infer/package-lock.json" "$llama/"
        (cd "$llama" && npm ci --omit=optional --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null)
    fi
    cp "$here/infer/llama_bench.mjs" "$llama/"
    for s in $shapes; do
        for t in $types; do
            g="$out/models/$s-$t.gguf"
            [ -f "$g" ] || { log "writing $g"; "$out/make_gguf" "$s" "$t" "$g"; }
            for n in $(printf '%s\n' "$thr" 1 | sort -u); do
                log "infer $s $t threads=$n: dlm, llama.cpp"
                d=$("$out/bench_infer" "$g" "$n" 512 32 2 | sed -n 's/^RESULT //p')
                l=$(cd "$llama" && node llama_bench.mjs "$g" "$n" 512 32 2 2>>"$run/llama.err" | sed -n 's/^RESULT //p')
                echo "dlm   $s $t $n $d" >> "$run/infer.log"
                echo "llama $s $t $n $l" >> "$run/infer.log"
                emit infer "pp512 $s $t, $n thr" "$(jget "$d" pp_tok_s)" "$(jget "$l" pp_tok_s)" "tok/s" 1.0 ratio "llama.cpp"
                emit infer "tg $s $t, $n thr" "$(jget "$d" tg_tok_s)" "$(jget "$l" tg_tok_s)" "tok/s" 1.0 ratio "llama.cpp"
            done
        done
    done
fi

# ---- 3. GEMM vs the FMA peak -------------------------------------------------
# One thread, timed with the process CPU clock (only the time the thread
# ran counts: other jobs on the machine do not shrink the numbers) for both
# the kernels and the FMA peak (24 independent AVX-512 FMA chains), best of
# three rounds. ../shared/bench/c/peak.c (wall clock, OpenMP) is run too and
# logged; on a loaded machine its 2-thread figure mostly measures the load.
if [[ " $sections " == *" gemm "* ]]; then
    filt=""; [ "$quick" = 1 ] && filt="smollm2"
    for r in 1 2 3; do
        log "gemm round $r: kernels and FMA peak (1 thread, CPU clock)"
        "$out/bench_gemm" 1 0.3 "$filt" F32,Q8_0 cpu >> "$run/gemm.txt"
    done
    "$out/isa_peak" > "$run/isa_peak.txt" 2>&1 || true
    "$out/peak" 1 5 >> "$run/peak.txt" 2>&1 || true
    "$out/peak" 2 5 >> "$run/peak.txt" 2>&1 || true
    /usr/bin/python3 - "$run/gemm.txt" >> "$res" <<'PY'
import json, sys
best, peak = {}, 0.0
for line in open(sys.argv[1]):
    f = line.split()
    if f and f[0] == "PEAK":
        peak = max(peak, float(f[3].split("=")[1]))
    if not f or f[0] != "RESULT" or "gflops=n/a" in line or f[3] == "matmul_N1":
        continue
    key = f"GEMM {f[1]} {f[2]} {f[3]} {f[4]}, 1 thr"
    best[key] = max(best.get(key, 0), float(f[9].split("=")[1]))
for k, g in best.items():
    print(json.dumps({"section": "gemm", "name": k, "dlm": g, "peer": peak, "unit": "GFLOPS",
                      "target": 0.6, "kind": "frac", "peer_name": "FMA peak"}))
PY
fi

# ---- 4. tokenizer ----------------------------------------------------------------
if [[ " $sections " == *" tok "* ]]; then
    log "tokenizer vs HF tokenizers"
    "$root/scripts/ref-deps.sh"
    RUNS=3 "$here/tok/run.sh" "$root/build" > "$run/tok.txt"
    awk 'NR > 1 && NF == 7 { printf "{\"section\":\"tok\",\"name\":\"tokenize %s %s\",\"dlm\":%s,\"peer\":%s,\"unit\":\"MB/s\",\"target\":1.0,\"kind\":\"ratio\",\"peer_name\":\"HF tokenizers\"}\n", $1, $2, $5, $6 }' \
        "$run/tok.txt" >> "$res"
fi

# ---- 5. the real command ------------------------------------------------------------
if [[ " $sections " == *" cmd "* ]]; then
    [ "$quick" = 1 ] && export CMD_SHAPES=${CMD_SHAPES:-smol135-l3}
    # attention alone, IEEE against FTZ|DAZ, std 0.02 and 0.3 (logged, not a row)
    "$out/denorm" 5 | tee "$run/denorm.txt" >&2
    BENCH_THREADS="$thr" "$here/train/cmd.sh" "$res" 2> >(tee "$run/cmd.log" >&2)
fi

# ---- table ---------------------------------------------------------------------------
cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
isa=$(grep -o -w -E 'avx512f|avx512_bf16|avx512_vnni|amx_tile' /proc/cpuinfo | sort -u | tr '\n' ' ')
commit=$(git -C "$root" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
load1=$(cut -d' ' -f1-3 /proc/loadavg)
table="$run/table.md"
/usr/bin/python3 - "$res" > "$table" \
    "$(date -u '+%Y-%m-%d %H:%M UTC')" "$cpu" "$(nproc)" "$isa" "$load0" "$load1" "$commit" "$rounds" "$thr" <<'PY'
import json, sys
path, date, cpu, ncpu, isa, load0, load1, commit, rounds, thr = sys.argv[1:]
rows = [json.loads(l) for l in open(path) if l.strip()]
print(f"## {date} — dlm {commit}")
print()
print(f"Machine: {cpu}, {ncpu} cores ({isa.strip()}); load average {load0} at start, {load1} at end "
      f"(other jobs share it). Training: {thr} threads, best of {rounds} interleaved rounds; "
      "inference: best of 2 runs each; GEMM: 1 thread, process CPU clock, best of 3 rounds, against the "
      "FMA peak timed the same way.")
print()
print("| benchmark | dlm | peer | dlm / peer | target | met | CPU [flags] |")
print("|---|---|---|---|---|---|---|")
for r in rows:
    d, p = r["dlm"], r["peer"]
    if d is None or p is None or p == 0:
        ratio, met = "n/a", "n/a"
    else:
        x = d / p
        if r["kind"] == "inv":
            ratio, met = f"{x:.2f}x", "yes" if x <= r["target"] else "no"
        elif r["kind"] == "frac":
            ratio, met = f"{100 * x:.0f}%", "yes" if x >= r["target"] else "no"
        else:
            ratio, met = f"{x:.2f}x", "yes" if x >= r["target"] else "no"
    tgt = (f"≤ {r['target']}x" if r["kind"] == "inv" else f"≥ {100 * r['target']:.0f}%" if r["kind"] == "frac"
           else f"≥ {r['target']}x")
    fmt = lambda v: "n/a" if v is None else (f"{v:.1f}" if v < 1000 else f"{v:.0f}")
    rc = r.get("cpu") or f"{cpu} [{isa.strip()}]"
    print(f"| {r['name']} ({r['unit']}) | {fmt(d)} | {fmt(p)} {r['peer_name']} | {ratio} | {tgt} | {met} | {rc} |")
print()
PY
if [ -s "$run/isa_peak.txt" ]; then
    {
        echo "One core's multiply-add throughput (bench/gemm/isa_peak.c, 24 chains):"
        echo
        sed 's/  (sink.*//; s/^/    /' "$run/isa_peak.txt"
        echo
    } >> "$table"
fi
cat "$table"
if [ "${BENCH_NO_APPEND:-0}" != 1 ]; then
    [ -f "$root/bench/RESULTS.md" ] || printf '# dlm benchmark results\n\nAppended by `make bench` (bench/run.sh); newest last.\n\n' > "$root/bench/RESULTS.md"
    cat "$table" >> "$root/bench/RESULTS.md"
    log "appended to bench/RESULTS.md (raw logs in $run)"
fi
