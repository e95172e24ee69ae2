#!/bin/bash
# bench/train/cmd.sh — the real command: `dlm train` on a .dlm document, as a
# user runs it, against the PyTorch peer (../shared/bench/torch_lora_peer.py
# through bench/train/peer_qwen.py, called by path) in fp32 and in bf16
# autocast, in one script. Issue 16: bench_train is a harness; this is what
# users run.
#
#   bench/train/cmd.sh RESULTS.jsonl     (bench/run.sh section "cmd")
#
# Cases (sequence_len 512, micro-batch 1, grad_accum 1, LoRA r 8 on
# q,k,v,o,gate,up,down, 2 threads):
#   smol135-l3  SmolLM2-135M shape with the Llama-3 vocabulary (128,256)
#   qwen05      Qwen2.5-0.5B shape (vocabulary 151,936)
# each with every weight at a pretrained-like std 0.02 (the bases as
# published: bf16 safetensors), and once more with the q,k,v,o weights at
# std 0.3: attention scores in the hundreds, so the softmax underflows
# (the denormal case of issue 16). Bases written by tests/ref/make_model.py
# (numpy) into $DLM_BENCH_TMP (default /tmp/dlm-bench-cmd); nothing committed.
#
# Step time: `dlm train --max-steps N` logs every step's step_s and
# tokens_per_sec in the run's JSONL log; the first step is warm-up, the
# others are timed (best and median). The peer runs 1 warm-up + the same
# timed steps. Peak RSS: /usr/bin/time's maxrss of `dlm train` (the whole
# command: load, tokenize, train, write) against the peer's ru_maxrss.
#
# dlm runs once per training.precision in CMD_PRECS ("fp32 bf16": the exact
# path and the bf16 back end of `dlm --version`), the peer once per amp.
# The peer's Python: CMD_PEER_PY, else the pinned PyPI venv of PyTorch 2.x
# (scripts/ref-venv.sh torch2: the torch a user installs, with oneDNN's
# bf16 kernels), else Debian's /usr/bin/python3 (torch 1.13). Every row
# carries the CPU model and its AVX-512/AMX flags.
#
# CPU time per step (CMD_CPU=1, the default): the rows above are wall-clock
# rates, and on a machine shared with other jobs they measure the load as
# much as the code. So each side's own CPU time per timed step is measured
# too: dlm's as the user+sys time of the run minus that of a 1-step run of
# the same document (the difference is the timed steps), the peer's as its
# own_cpu_frac (its process CPU over the timed window, /proc/stat) times
# the CPUs times the window; rows "tokens per CPU-second" compare the two.
#
# Knobs: CMD_SHAPES ("smol135-l3 qwen05"), CMD_STDS ("0.02 0.3"),
# CMD_STEPS (timed steps, default 4), CMD_AMPS (peer configurations,
# "none bf16"; bf16 autocast without AVX512-BF16/AMX is emulated and slow),
# CMD_PRECS ("fp32 bf16"), CMD_PEER_PY, BENCH_THREADS (2),
# DLM_BENCH_SHARED (the shared folder; default ../shared next to the repo).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
res=${1:?usage: cmd.sh RESULTS.jsonl}
tmp=${DLM_BENCH_TMP:-/tmp/dlm-bench-cmd}
shapes=${CMD_SHAPES:-"smol135-l3 qwen05"}
stds=${CMD_STDS:-"0.02 0.3"}
steps=${CMD_STEPS:-4}
amps=${CMD_AMPS:-"none bf16"}
precs=${CMD_PRECS:-"fp32 bf16"}
cpu_on=${CMD_CPU:-1}
thr=${BENCH_THREADS:-2}
py=/usr/bin/python3
DLM="$root/build/dlm"
mkdir -p "$tmp"
log() { echo "[bench-cmd $(date +%H:%M:%S)] $*" >&2; }
ppy=${CMD_PEER_PY:-}
if [ -z "$ppy" ]; then
    v=$("$root/scripts/ref-venv.sh" torch2 2>/dev/null) && [ -x "$v/bin/python" ] && ppy="$v/bin/python"
    ppy=${ppy:-/usr/bin/python3}
fi
tv=$("$ppy" -c 'import torch; print(torch.__version__)')
cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
fam=$(sed -n 's/^cpu family[[:space:]]*: //p' /proc/cpuinfo | head -1)
mod=$(sed -n 's/^model[[:space:]]*: //p' /proc/cpuinfo | head -1)
cpu="$cpu (family $fam model $mod)"
flags=$(grep -o -w -E 'avx512f|avx512_bf16|avx512_vnni|amx_tile|amx_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ')
cpu="$cpu [${flags% }]"
bf16be=$("$DLM" --version | sed -n 's/^bf16: \([^;]*\);.*/\1/p')
log "peer: $ppy (torch $tv); cpu: $cpu; dlm bf16 back end: $bf16be"
emit() {
    printf '{"section":"cmd","name":"%s","dlm":%s,"peer":%s,"unit":"%s","target":%s,"kind":"%s","peer_name":"%s","cpu":"%s"}\n' \
        "$1" "${2:-null}" "${3:-null}" "$4" "$5" "$6" "$7" "$cpu" >> "$res"
}
jget() { $py -c 'import json,sys; d=json.loads(sys.argv[1]); v=d.get(sys.argv[2]); print("null" if v is None else v)' "$1" "$2"; }

make_base() { # make_base SHAPE STD → the base folder
    local d="$tmp/$1-std$2"
    case $1 in
    smol135-l3) a="--arch llama --layers 30 --d-model 576 --heads 9 --kv-heads 3 --ff 1536 --vocab 128256 --max-pos 8192" ;;
    qwen05) a="--arch qwen2 --layers 24 --d-model 896 --heads 14 --kv-heads 2 --ff 4864 --vocab 151936 --max-pos 32768" ;;
    *) echo "cmd.sh: unknown shape $1" >&2; exit 2 ;;
    esac
    # shellcheck disable=SC2086
    [ -f "$d/model.safetensors" ] || $py "$root/tests/ref/make_model.py" --out "$d" $a --dtype bf16 \
        --std 0.02 --attn-std "$2" >/dev/null
    echo "$d"
}

# write_doc FILE BASE PRECISION: 30 sections, each longer than 512 tokens, so
# every row is full (the peer's rows are 512). save_steps 1000: a run of
# --max-steps N checkpoints every N/4 steps (every step here), and the
# checkpoint written after a step (adapter + optimizer state, its sha256)
# lands in the next step's step_s; a real run checkpoints a few times in
# hundreds of steps, and the peer never does.
write_doc() {
    $py - "$1" "$2" "$3" <<'PY'
import random, sys
path, base, prec = sys.argv[1:4]
random.seed(1)
words = ("the quick brown fox jumps over lazy dog model reads document learns facts answers questions training "
         "runs on cpu with weights kept in their stored type adapter is small").split()
body = "\n\n".join(" ".join(random.choice(words) for _ in range(600)) + "." for _ in range(30))
open(path, "w").write("---\ndlm_id: 01JD0000000000000000CMD016\ndlm_version: 15\nbase_model: %s\ntraining:\n"
                      "  sequence_len: 512\n  micro_batch_size: 1\n  grad_accum: 1\n  lora_r: 8\n  save_steps: 1000\n"
                      "  target_modules: [q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj]\n"
                      "  precision: %s\n  num_epochs: 1\n---\n# Bench\n\n%s\n" % (base, prec, body))
PY
}

# dlm_steps LOG → {"best":..,"median":..} tokens/s over the steps after the first
dlm_steps() {
    $py - "$1" <<'PY'
import json, statistics, sys
st = [json.loads(l) for l in open(sys.argv[1]) if '"type":"step"' in l]
t = [s["tokens_per_sec"] for s in st[1:]]
tok = [round(s["tokens_per_sec"] * s["step_s"]) for s in st[1:]]   # tokens per step: 512 when rows are full
print(json.dumps({"best": max(t), "median": statistics.median(t), "n": len(t), "tokens_per_step": tok}
                 if t else {"best": None, "median": None, "n": 0}))
PY
}

declare -A tok
for s in $shapes; do
    case $s in smol135-l3) ps="smollm2-135m --vocab 128256" ;; qwen05) ps="qwen2.5-0.5b" ;; esac
    for std in $stds; do
        base=$(make_base "$s" "$std")
        declare -A dt=() cs=()
        for prec in $precs; do
            home="$tmp/home-$s-$std-$prec"
            rm -rf "$home"
            doc="$tmp/$s-$std-$prec.dlm"
            write_doc "$doc" "$base" "$prec"
            log "$s std $std: dlm train --max-steps $((steps + 1)), precision $prec"
            DLM_HOME="$home" /usr/bin/time -f "%M %U %S" -o "$tmp/$s-$std.maxrss" "$DLM" train "$doc" \
                --max-steps $((steps + 1)) --threads "$thr" > "$tmp/$s-$std.out" 2>&1 \
                || { cat "$tmp/$s-$std.out" >&2; exit 1; }
            grep '^precision:' "$tmp/$s-$std.out" >&2 || true
            jl=$(ls "$home"/store/*/logs/train-*.jsonl | head -1)
            d=$(dlm_steps "$jl")
            read -r m_rss m_u m_s < <(tail -1 "$tmp/$s-$std.maxrss")
            rss=$($py -c "print(round($m_rss / 1024, 1))")
            dt[$prec]=$(jget "$d" best)
            log "$s std $std: dlm $prec $d, peak RSS $rss MB"
            if [ "$cpu_on" = 1 ]; then   # the same document, 1 step: the difference is the timed steps
                rm -rf "$home.1"
                DLM_HOME="$home.1" /usr/bin/time -f "%U %S" -o "$tmp/$s-$std.cpu1" "$DLM" train "$doc" \
                    --max-steps 1 --threads "$thr" > "$tmp/$s-$std.out1" 2>&1 \
                    || { cat "$tmp/$s-$std.out1" >&2; exit 1; }
                read -r o_u o_s < <(tail -1 "$tmp/$s-$std.cpu1")
                cs[$prec]=$($py -c "print(round(($m_u + $m_s - $o_u - $o_s) / $steps, 3))")
                log "$s std $std: dlm $prec CPU s per step ${cs[$prec]}"
            fi
        done
        d=$($py -c "import sys; v=[float(x) for x in sys.argv[1:] if x not in ('', 'null')]; print('{\"best\": %s}' % (max(v) if v else 'null'))" "${dt[fp32]:-}" "${dt[bf16]:-}")
        [ -n "${dt[fp32]:-}" ] && [ -n "${dt[bf16]:-}" ] &&
            emit "dlm train $s std $std tok/s: bf16 ($bf16be) vs fp32" "${dt[bf16]}" "${dt[fp32]}" "tok/s" 1.0 ratio "dlm fp32"
        tok[$s-$std]=$(jget "$d" best)
        pbest=0; prss=; declare -A pcs=()
        for amp in $amps; do
            log "$s std $std: PyTorch $tv peer, amp $amp"
            # shellcheck disable=SC2086
            OMP_WAIT_POLICY=PASSIVE "$ppy" "$here/peer_qwen.py" --mode train --shape $ps --seq 512 --batch 1 \
                --rank 8 --steps "$steps" --warmup 1 --threads "$thr" --init-std 0.02 --attn-std "$std" \
                --amp "$amp" > "$tmp/$s-$std.peer" 2>&1 || { cat "$tmp/$s-$std.peer" >&2; exit 1; }
            p=$(sed -n 's/^RESULT //p' "$tmp/$s-$std.peer")
            pt=$(jget "$p" tok_s_max); pr=$(jget "$p" peak_rss_mb)
            log "$s std $std: peer amp $amp ${pt} tok/s, peak RSS ${pr} MB"
            if [ "$cpu_on" = 1 ]; then   # own CPU over the timed window (its step lines after the warm-up)
                pc=$($py - "$tmp/$s-$std.peer" "$(nproc)" <<'PY'
import json, re, sys
out = open(sys.argv[1]).read().splitlines()
r = json.loads([l for l in out if l.startswith("RESULT ")][-1][7:])
t = [float(m.group(2)) for m in (re.match(r"step (\d+) loss \S+ time ([0-9.]+)s", l) for l in out) if m]
t = t[1:]   # the first step is the warm-up (--warmup 1)
print(round(r["own_cpu_frac"] * int(sys.argv[2]) * sum(t) / len(t), 3) if t else "null")
PY
)
                log "$s std $std: peer amp $amp CPU s per step $pc"
                pcs[$amp]=$pc
            fi
            for prec in $precs; do
                [ -n "${dt[$prec]:-}" ] || continue
                [ "$amp" = none ] && emit "dlm $prec train $s std $std tok/s" "${dt[$prec]}" "$pt" "tok/s" 1.0 ratio "PyTorch $tv fp32"
                [ "$amp" = bf16 ] && emit "dlm $prec train $s std $std tok/s" "${dt[$prec]}" "$pt" "tok/s" 1.0 ratio "PyTorch $tv bf16 autocast"
            done
            [ "$amp" = none ] && prss=$pr
            pbest=$($py -c "print(max($pbest, ${pt/null/0}))")
        done
        emit "dlm train $s std $std tok/s (best precision), peer's best" "$(jget "$d" best)" "$pbest" "tok/s" 2.0 ratio "PyTorch $tv best"
        emit "dlm train $s std $std peak RSS" "$rss" "$prss" "MB" 0.25 inv "PyTorch fp32"
        if [ "$cpu_on" = 1 ]; then   # tokens per CPU-second, each side's best precision
            tc=$($py -c "import sys; v=[512/float(x) for x in sys.argv[1:] if x not in ('', 'null')]; print(max(v) if v else 'null')" \
                "${cs[fp32]:-}" "${cs[bf16]:-}")
            pc=$($py -c "import sys; v=[512/float(x) for x in sys.argv[1:] if x not in ('', 'null')]; print(max(v) if v else 'null')" \
                "${pcs[none]:-}" "${pcs[bf16]:-}")
            emit "dlm train $s std $std tokens per CPU-second (best precision), peer's best" "$tc" "$pc" \
                "tok/CPU-s" 2.0 ratio "PyTorch $tv best"
        fi
    done
    if [ -n "${tok[$s-0.3]:-}" ] && [ -n "${tok[$s-0.02]:-}" ]; then
        emit "dlm train $s: std 0.3 vs std 0.02 tok/s" "${tok[$s-0.3]}" "${tok[$s-0.02]}" "tok/s" 0.9 ratio "dlm std 0.02"
    fi
done
