#!/usr/bin/env bash
# bench/api/run.sh: the loopback load test of issue 18 (load.mjs or load.py: 16 streaming
# clients x 8 requests, max_tokens 32, temperature 0.8, seed 1) against
# `dlm api` and llama.cpp's llama-server on the SAME GGUF file, each with
# --parallel 1 and --parallel 8, the same compute threads, the same prompts
# and the same max tokens, through their OpenAI endpoints.
#
# What it reports: generated tokens/s of the whole run (all clients' usage
# completion_tokens / wall time) for each server and parallelism, medians of
# ROUNDS interleaved rounds, and the ratios that matter:
#   - P8 / P1 of each server: what batching buys (issue 18's target >= 2.5x);
#   - dlm / llama-server at P1 and at P8.
# Every run records the 1-minute load average beside its numbers (the
# machine is shared). Appends a section to bench/RESULTS.md unless
# BENCH_NO_APPEND=1. Bounded: every run has a hard time limit.
#
#   bench/api/run.sh [CLIENTS REQUESTS MAX_TOKENS]
# environment:
#   DLM=build/dlm  MODEL=models/tiny.gguf  ROUNDS=3  THREADS=1  CTX=1024
#   ENDPOINT=chat|completions  PARALLEL="1 8"
#   PEER=server|engine|none (default: server when llama-server is built or
#     LLAMA_SERVER is set, else engine)
#     server: llama-server over HTTP, the same load.py; LLAMA_SERVER=path, or
#       bench/api/build-llama-server.sh builds it (~/.cache/dlm-bench, from
#       node-llama-cpp's llama.cpp source; long on a loaded 2-core machine)
#     engine: the same load inside llama.cpp's engine through node-llama-cpp's
#       prebuilt binaries (bench/api/llama_engine.mjs: batched sequences of one
#       context, no HTTP, no client threads) — a stand-in, not llama-server
#   NO_LLAMA=1 (= PEER=none)  PERF=1 (perf record dlm api --parallel 8, round 1)
#   SHAPE=smollm2-135m|qwen2.5-0.5b: instead of MODEL, a random-weight F16
#     model of that real shape (bench/infer/make_gguf.c, cached in
#     ~/.cache/dlm-bench; stub byte vocabulary, so ENDPOINT defaults to
#     completions). tiny's 11 MB of weights stay in cache and its decode is
#     compute-bound; a real shape is read from memory every step, which is
#     where batching pays
#   CLIENT=node|py: the load generator, load.mjs (one Node.js event loop;
#     the default where node exists) or load.py (python threads: at ~900
#     tokens/s its GIL, on the same 2 cores, became the ceiling)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
DLM=${DLM:-$root/build/dlm}
MODEL=${MODEL:-$root/models/tiny.gguf}
if [ -n "${SHAPE:-}" ]; then
    gdir=${DLM_BENCH_CACHE:-$HOME/.cache/dlm-bench}
    MODEL=$gdir/$SHAPE-f16.gguf
    if [ ! -f "$MODEL" ]; then
        mkdir -p "$gdir"
        libs="$(pkg-config --libs yaml-0.1 jansson libpcre2-8 libutf8proc libzstd libarchive sqlite3 libcurl libsodium) -lm -lpthread"
        # shellcheck disable=SC2086
        gcc -O2 -I "$root/src" -I "$root/build/gen" "$root/bench/infer/make_gguf.c" "$root/build/libdlmcore.a" $libs \
            -o "$gdir/make_gguf"
        "$gdir/make_gguf" "$SHAPE" f16 "$MODEL.part" && mv "$MODEL.part" "$MODEL"
    fi
    ENDPOINT=${ENDPOINT:-completions}
fi
ROUNDS=${ROUNDS:-3} THREADS=${THREADS:-1} CTX=${CTX:-1024} ENDPOINT=${ENDPOINT:-chat}
PARALLEL=${PARALLEL:-"1 8"}
C=${1:-16} R=${2:-8} N=${3:-32}
NLC=${NODE_LLAMA_CPP:-$root/tests/ref/node_modules/node-llama-cpp}
cached=${DLM_BENCH_CACHE:-$HOME/.cache/dlm-bench}/llama.cpp/build/bin/llama-server
PEER=${PEER:-auto}
CLIENT=${CLIENT:-$(command -v node >/dev/null && echo node || echo py)}
[ "${NO_LLAMA:-0}" = 1 ] && PEER=none
if [ "$PEER" = auto ]; then
    if [ -n "${LLAMA_SERVER:-}" ] || [ -x "$cached" ]; then PEER=server; else PEER=engine; fi
fi
servers="dlm"
case $PEER in
    server) LLAMA_SERVER=${LLAMA_SERVER:-$("$here/build-llama-server.sh")}; servers="dlm llama" ;;
    engine) [ -f "$NLC/dist/index.js" ] || { echo "api-bench: $NLC missing (scripts/ref-deps.sh)" >&2; exit 1; }
            servers="dlm engine" ;;
esac
stamp=$(date -u +%Y%m%dT%H%M%SZ)
out="$root/bench/out/api-$stamp"
mkdir -p "$out"
T=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; rm -rf "$T"' EXIT
export DLM_HOME="$T/home"
load0=$(cut -d' ' -f1-3 /proc/loadavg)
log() { echo "[api-bench $(date +%H:%M:%S)] $*" >&2; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_health() {   # URL: until GET /health answers 200 (llama-server: 503 while loading)
    for _ in $(seq 300); do
        curl -sf -o /dev/null "$1/health" && return 0
        kill -0 $pid 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}

# start SERVER P: sets pid and url
start() {
    local port
    port=$(free_port)
    url="http://127.0.0.1:$port"
    if [ "$1" = dlm ]; then
        "$DLM" api --base "$MODEL" --port "$port" --parallel "$2" --queue 64 --ctx "$CTX" --threads "$THREADS" \
            > "$T/out" 2> "$T/err" &
    else
        # -c is the KV cache of all slots together: CTX per slot, as dlm's --ctx
        "$LLAMA_SERVER" -m "$MODEL" --host 127.0.0.1 --port "$port" -np "$2" -c $(($2 * CTX)) \
            -t "$THREADS" -tb "$THREADS" --no-webui > "$T/out" 2> "$T/err" &
    fi
    pid=$!
    wait_health "$url" || { cat "$T/err" >&2; echo "api-bench: $1 did not start" >&2; exit 1; }
}
stop() { kill -TERM $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; pid=; }

: > "$out/runs.jsonl"
for r in $(seq "$ROUNDS"); do
    for s in $servers; do
        for P in $PARALLEL; do
            if [ "$s" = engine ]; then
                l=$(cut -d' ' -f1 /proc/loadavg)
                log "round $r: llama.cpp engine, $P sequences (load $l)"
                timeout 600 node "$here/llama_engine.mjs" "$NLC" "$MODEL" "$P" "$THREADS" "$CTX" "$C" "$R" "$N" \
                    > "$T/res.json" 2> "$out/$s-p$P-r$r.log" || true
            else
                start "$s" "$P"
                if [ "${PERF:-0}" = 1 ] && [ "$s" = dlm ] && [ "$P" = 8 ] && [ "$r" = 1 ]; then
                    perf record -g -o "$out/perf-dlm-p8.data" -p $pid 2> /dev/null &
                    perfpid=$!
                fi
                l=$(cut -d' ' -f1 /proc/loadavg)
                log "round $r: $s --parallel $P (load $l)"
                if [ "$CLIENT" = node ]; then loader=(node "$here/load.mjs"); else loader=(python3 "$here/load.py"); fi
                timeout 600 "${loader[@]}" "$url" --clients "$C" --requests "$R" --max-tokens "$N" \
                    --endpoint "$ENDPOINT" > "$T/res.json" || true
                if [ -n "${perfpid:-}" ]; then kill -INT $perfpid; wait $perfpid || true; perfpid=; fi
                stop
                cp "$T/err" "$out/$s-p$P-r$r.log"
            fi
            python3 - "$s" "$P" "$r" "$l" "$(cut -d' ' -f1 /proc/loadavg)" "$T/res.json" >> "$out/runs.jsonl" <<'PY'
import json, sys
s, p, r, l0, l1, path = sys.argv[1:]
try:
    d = json.load(open(path))
except Exception as e:  # a run that printed nothing is recorded as failed
    d = {"errors": -1, "error_samples": [str(e)]}
d.update(server=s, parallel=int(p), round=int(r), load_start=float(l0), load_end=float(l1))
print(json.dumps(d))
PY
        done
    done
done
load1=$(cut -d' ' -f1-3 /proc/loadavg)
commit=$(git -C "$root" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
llv=""
[ "$PEER" = server ] && llv="llama-server built from node-llama-cpp's llama.cpp bundle (commit $(git -C "$(dirname "$LLAMA_SERVER")/../.." log -1 --format=%h 2>/dev/null || echo '?'))."
[ "$PEER" = engine ] && llv="The peer is llama.cpp's engine through npm node-llama-cpp $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["version"])' "$NLC/package.json") (prebuilt CPU binaries, llama.cpp $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["tag"])' "$NLC/llama/llama.cpp.info.json")): bench/api/llama_engine.mjs runs the same questions (the GGUF's ChatML turn), max tokens and temperature as PARALLEL sequences of one context, batched by node-llama-cpp — no HTTP and no Python client; its sequences are orchestrated in JavaScript, which at 8 sequences on a small model can cost more than the decoding (see the notes in bench/RESULTS.md of 2026-12-01); llama-server itself was not built."
python3 - "$out/runs.jsonl" "$(date -u '+%Y-%m-%d %H:%M UTC')" "$commit" "$load0" "$load1" "$C" "$R" "$N" \
    "$THREADS" "$ROUNDS" "$ENDPOINT" "$(basename "$MODEL")" "$llv" "$CLIENT" "${SHAPE:-}" > "$out/table.md" <<'PY'
import json, statistics, sys
path, date, commit, load0, load1, C, R, N, thr, rounds, ep, model, llv, cl, shape = sys.argv[1:]
if shape:
    model += (f": random F16 weights of {shape}'s real shape (bench/infer/make_gguf.c), read from memory every "
              "step; its stub vocabulary's tokens are mostly text-less fillers, so dlm streams no text and its "
              "time to first token reads n/a")
client = "Node.js client, one event loop (bench/api/load.mjs)" if cl == "node" else "python3 stdlib client (bench/api/load.py)"
runs = [json.loads(l) for l in open(path) if l.strip()]
name = {"dlm": "dlm api", "llama": "llama-server", "engine": "llama.cpp engine (node-llama-cpp)"}
med = lambda xs: statistics.median(xs) if xs else None
f1 = lambda v: "n/a" if v is None else f"{v:.1f}"
peer = next((s for s in ("llama", "engine") if any(r["server"] == s for r in runs)), None)
print(f"## {date} — dlm api load test" + (f", {name[peer]} beside it" if peer else "")
      + f" (bench/api/run.sh), dlm {commit}")
print()
print(f"Machine: AMD EPYC, 2 cores shared with other engineers' builds; load average {load0} at start, "
      f"{load1} at end (each run's 1-minute load is in its row). Same GGUF ({model}) for both servers, "
      f"{thr} compute thread(s) each, {C} streaming {ep} clients × {R} requests, max_tokens {N}, "
      f"temperature 0.8, seed 1, loopback, {client}. Medians of {rounds} "
      f"interleaved rounds (each round: every server × parallelism once)."
      + (" " + llv if llv else ""))
print()
print("| server | --parallel | requests (all rounds) | errors | gen tok/s (median) | runs tok/s | TTFT p50 ms | TTFT p99 ms "
      "| per-token p50 ms | per-token p99 ms | load during runs |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
tps = {}
for s in ("dlm", peer):
    if s is None:
        continue
    for p in sorted({r["parallel"] for r in runs}):
        rs = [r for r in runs if r["server"] == s and r["parallel"] == p]
        if not rs:
            continue
        ok = [r for r in rs if r.get("errors") == 0]
        t = med([r["tokens_per_s"] for r in ok])
        tps[(s, p)] = t
        g = lambda k: med([r[k] for r in ok if r.get(k) is not None])
        errs = sum(r["errors"] for r in rs if r.get("errors", -1) >= 0)
        bad = sum(1 for r in rs if r.get("errors", -1) < 0)
        print(f"| {name[s]} | {p} | {sum(r.get('requests', 0) for r in rs)} | {errs}{f' (+{bad} failed runs)' if bad else ''} "
              f"| {f1(t)} | {' / '.join(f1(r.get('tokens_per_s')) for r in rs)} | {f1(g('ttft_ms_p50'))} "
              f"| {f1(g('ttft_ms_p99'))} | {f1(g('token_ms_p50'))} | {f1(g('token_ms_p99'))} "
              f"| {' / '.join(str(r['load_start']) for r in rs)} |")
print()
ps = sorted({r["parallel"] for r in runs})
rows = []
ratio = lambda a, b: None if a is None or b in (None, 0) else a / b
if len(ps) >= 2:
    lo, hi = ps[0], ps[-1]
    for s in ("dlm", peer):
        x = ratio(tps.get((s, hi)), tps.get((s, lo)))
        if x is not None:
            tgt = " (issue 18 target ≥ 2.5x: " + ("met" if x >= 2.5 else "not met") + ")" if s == "dlm" else ""
            rows.append(f"- {name[s]} --parallel {hi} / --parallel {lo}: **{x:.2f}x**{tgt}")
for p in ps:
    x = ratio(tps.get(("dlm", p)), tps.get((peer, p)))
    if x is not None:
        rows.append(f"- dlm api / {name[peer]} at --parallel {p}: **{x:.2f}x**")
print("\n".join(rows))
nu = sum(r.get("usage_missing", 0) for r in runs)
if nu:
    print(f"\n({nu} requests came without usage; their content chunks were counted.)")
print()
PY
cat "$out/table.md"
if [ "${BENCH_NO_APPEND:-0}" != 1 ]; then
    cat "$out/table.md" >> "$root/bench/RESULTS.md"
    log "appended to bench/RESULTS.md (raw runs in $out)"
fi
