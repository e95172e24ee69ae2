#!/usr/bin/env bash
# The original DocumentLanguageModel's CLI spellings where dlm differs
# (issue 31, item 4): each is accepted and acts, or is refused with the
# reason. prompt/repl/preference --backend auto|pytorch (mlx refused),
# synth preferences = preference mine, preference mine --adapter NAME,
# --judge sway (the adapter's log-probability) and hf: (refused), synth --teacher hf: / anthropic: accepted,
# push/pull hf:org/repo accepted, synth --teacher vllm-server:URL (the
# server's first model, asked at /v1/models) and openai:MODEL (a hint),
# export --target mlx-serve (mlx-lm's adapter layout, checked against the
# store's PEFT tensors by the original's conversion rules, written here in
# Python), export --draft/--no-draft (the original's draft comments),
# train --strict-metrics (a steps row SQLite refuses: warning vs failure),
# dlm completion bash|zsh|fish (every command and option of the help).
. "$(dirname "$0")/lib.sh"
PY=${PYTHON:-python3}

# --- prompt --backend ---------------------------------------------------------
want=$("$DLM" prompt --base tiny --raw --temp 0 -n 6 --json "The capital" | $PY -c 'import json,sys; print(json.load(sys.stdin)["tokens"])')
for b in auto pytorch; do
    got=$("$DLM" prompt --base tiny --raw --temp 0 -n 6 --json --backend $b "The capital" | $PY -c 'import json,sys; print(json.load(sys.stdin)["tokens"])')
    [ "$got" = "$want" ] || fail "--backend $b changed the tokens: $got vs $want"
done
rc=0; "$DLM" prompt --base tiny --backend mlx "x" 2> err.txt || rc=$?
[ $rc = 2 ] && grep -q "^dlm: error: --backend mlx is not available: MLX is Apple" err.txt && grep -q "^hint:" err.txt || fail "mlx: rc $rc $(cat err.txt)"
rc=0; "$DLM" prompt --base tiny --backend cuda "x" 2> err.txt || rc=$?
[ $rc = 2 ] && grep -q "backend must be auto, pytorch or mlx (got 'cuda')" err.txt || fail "cuda: rc $rc $(cat err.txt)"
rc=0; "$DLM" repl --base tiny --backend mlx < /dev/null 2> err.txt || rc=$?
[ $rc = 2 ] && grep -q "backend mlx is not available" err.txt || fail "repl mlx: rc $rc $(cat err.txt)"

# --- preference mine / synth preferences ----------------------------------------
cat > flat.dlm <<DOC
---
dlm_id: $ID
dlm_version: 15
base_model: tiny
---
Prose.

::instruction::
### Q
Count users.
### A
SELECT COUNT(*) FROM users;
DOC
cat > named.dlm <<DOC
---
dlm_id: 01JD0000000000000000000NAM
dlm_version: 15
base_model: tiny
training:
  sequence_len: 64
  micro_batch_size: 2
  grad_accum: 1
  adapters: {tone: {lora_r: 4}, sql: {lora_r: 4}}
---
Shared prose.

::instruction#sql::
### Q
List all users.
### A
SELECT * FROM users;
DOC
rc=0; "$DLM" preference mine flat.dlm --adapter sql 2> err.txt || rc=$?
[ $rc = 2 ] && grep -q "adapter is only valid on documents that declare training.adapters" err.txt || fail "flat --adapter: rc $rc $(cat err.txt)"
rc=0; "$DLM" preference mine named.dlm 2> err.txt || rc=$?
[ $rc = 2 ] && grep -q "declares training.adapters: pass --adapter NAME" err.txt || fail "named without --adapter: rc $rc $(cat err.txt)"
rc=0; "$DLM" preference mine named.dlm --adapter nope 2> err.txt || rc=$?
[ $rc = 2 ] && grep -q "adapter 'nope' is not declared" err.txt || fail "undeclared: rc $rc $(cat err.txt)"
# synth preferences is preference mine: its own options (synth has no --samples)
rc=0; "$DLM" synth preferences named.dlm --adapter sql --samples 1 2> err.txt || rc=$?
[ $rc = 2 ] && grep -q "samples must be 2..64" err.txt || fail "synth preferences --samples: rc $rc $(cat err.txt)"
rc=0; "$DLM" synth preferences flat.dlm 2> err.txt || rc=$?
[ $rc = 1 ] && grep -q "has no training run to mine" err.txt || fail "synth preferences untrained: rc $rc $(cat err.txt)"
rc=0; "$DLM" preference mine flat.dlm --judge hf:OpenAssistant/reward-model-deberta-v3-large 2> err.txt || rc=$?
[ $rc = 1 ] && grep -q "HF reward models" err.txt && grep -q "^hint: use --judge" err.txt || fail "judge hf: rc $rc $(cat err.txt)"
# sway scores with the adapter: a cli teacher has none
rc=0; "$DLM" synth instructions flat.dlm --teacher "cli:cat" --filter judge --judge sway 2> err.txt || rc=$?
[ $rc = 1 ] && grep -q "the sway judge scores with the document's trained adapter" err.txt || fail "sway + cli teacher: rc $rc $(cat err.txt)"
rc=0; "$DLM" preference mine flat.dlm --backend mlx 2> err.txt || rc=$?
[ $rc = 2 ] && grep -q "backend mlx is not available" err.txt || fail "preference mlx: rc $rc"
"$DLM" train named.dlm --max-steps 1 > /dev/null 2>&1 || fail "train named"
"$DLM" synth preferences named.dlm --adapter sql --backend pytorch --judge ref --samples 2 --temp 1.5 \
    --max-new-tokens 6 --json > mine.json 2> err.txt || [ $? = 2 ] || fail "mine --adapter sql: $(cat err.txt)"
$PY -c 'import json; o = json.load(open("mine.json")); assert o["prompts"] == 1, o' || fail "mine --adapter: $(cat mine.json)"
# the original's default judge (its scores are checked against the original in tests/ref/r1401)
"$DLM" preference mine named.dlm --adapter sql --judge sway --samples 3 --temp 1.5 --threshold 0 \
    --max-new-tokens 6 --json > mine.json 2> err.txt || fail "mine --judge sway: $(cat err.txt)"
$PY -c 'import json; o = json.load(open("mine.json")); assert o["triples"] and all(t["judge_name"] == "sway:preference_judge" and t["judge_score_chosen"] > t["judge_score_rejected"] for t in o["triples"]), o' ||
    fail "mine --judge sway: $(cat mine.json)"

# --- synth --teacher hf: / anthropic: (accepted; the stand-in runs are t0908 and r1404) ----
# hf: a second base in process: a random base writes no JSON list, so nothing is added
"$DLM" -v synth instructions flat.dlm --teacher "hf:$FIXTURE_QWEN" --max-new-tokens 4 --dry-run > out.txt 2> err.txt && rc=0 || rc=$?
[ $rc = 2 ] && grep -q "nothing new to add" out.txt && [ "$(grep -c '^dlm: debug: teacher tokens: {"teacher": "hf:' err.txt)" = 1 ] ||
    fail "teacher hf: rc $rc $(cat out.txt err.txt)"
rc=0; HF_HUB_OFFLINE=1 "$DLM" synth instructions flat.dlm --teacher hf:org/absent-model 2> err.txt || rc=$?
[ $rc = 1 ] && grep -q "teacher hf:org/absent-model" err.txt || fail "teacher hf:absent: rc $rc $(cat err.txt)"
rc=0; env -u ANTHROPIC_API_KEY "$DLM" synth instructions flat.dlm --teacher anthropic:claude-3-5-haiku 2> err.txt || rc=$?
[ $rc = 1 ] && grep -q "needs ANTHROPIC_API_KEY set" err.txt && grep -q "^hint:" err.txt || fail "teacher anthropic: rc $rc $(cat err.txt)"

# --- synth --teacher vllm-server:URL: the model is the server's first ------------------
printf '[{"question": "Where is Berlin?", "answer": "In Germany."}]\n' > reply.txt
$PY "$DLM_SRC/tests/cli/helpers/openai_standin.py" req.log reply.txt > port.txt &
SRV=$!
trap 'kill $SRV 2>/dev/null || true; rm -rf "$T"' EXIT
for _ in $(seq 600); do [ -s port.txt ] && break; sleep 0.1; done
port=$(cat port.txt)
[ -n "$port" ] || fail "the stand-in server did not start"
cp flat.dlm v.dlm
"$DLM" synth instructions v.dlm --teacher "vllm-server:http://127.0.0.1:$port" --per-section 1 --json > v.json 2> err.txt ||
    fail "vllm-server teacher: $(cat err.txt)"
$PY - <<'PYEOF' || fail "vllm-server requests: $(cat req.log)"
import json
reqs = [json.loads(l) for l in open("req.log")]
assert reqs[0]["path"] == "/v1/models" and reqs[0]["body"] is None, reqs[0]
posts = [r for r in reqs if r["body"]]
assert posts and all(r["path"] == "/v1/chat/completions" and r["body"]["model"] == "standin-model" for r in posts), posts
o = json.load(open("v.json"))
assert [p["question"] for p in o["pairs"]] == ["Where is Berlin?"], o
assert all(p["synth_teacher"].startswith("vllm-server:") for p in o["pairs"]), o
PYEOF
kill $SRV 2>/dev/null || true
rc=0; "$DLM" synth instructions flat.dlm --teacher openai:gpt-4o-mini 2> err.txt || rc=$?
[ $rc = 1 ] && grep -q "^hint: the original's openai:MODEL" err.txt || fail "openai:MODEL: rc $rc $(cat err.txt)"

# --- push / pull hf:org/repo: accepted (the Hub stand-in runs are t0808 and r0809) -------
rc=0; env -u HF_TOKEN -u HUGGING_FACE_HUB_TOKEN "$DLM" push flat.dlm --to hf:org/repo 2> err.txt || rc=$?
[ $rc = 1 ] && grep -q "pushing to hf:org/repo needs a Hugging Face token" err.txt && grep -q "^hint: .*HF_TOKEN" err.txt || fail "push hf: rc $rc $(cat err.txt)"
rc=0; HF_HUB_OFFLINE=1 "$DLM" pull hf:org/repo 2> err.txt || rc=$?
[ $rc = 1 ] && grep -q "HF_HUB_OFFLINE is set: pulling hf:org/repo needs the network" err.txt || fail "pull hf: rc $rc $(cat err.txt)"

# --- export --target mlx-serve, --draft / --no-draft ---------------------------------
write_doc q.dlm 1
"$DLM" train q.dlm --max-steps 1 > /dev/null 2>&1 || fail "train q"
S="$DLM_HOME/store/$ID"
"$DLM" export q.dlm --target mlx-serve > out.txt || fail "mlx-serve export"
X="$S/exports/mlx-serve"
[ -x "$X/mlx_serve_launch.sh" ] && [ -f "$X/adapter/adapters.safetensors" ] && [ ! -e "$X/adapter/adapter_model.safetensors" ] || fail "mlx-serve files: $(ls -R "$X")"
grep -q "^exec python -m mlx_lm.server --model '.*qwen2-f32' --adapter-path \"\$SCRIPT_DIR/adapter\" --host 127.0.0.1 --port 8000 \"\$@\"$" "$X/mlx_serve_launch.sh" || fail "launcher: $(cat "$X/mlx_serve_launch.sh")"
bash -n "$X/mlx_serve_launch.sh" || fail "launcher syntax"
$PY - "$S" "$X" <<'PYEOF' || fail "mlx adapter does not match the PEFT adapter"
import json, struct, sys, os, array
def st(path):
    b = open(path, "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n]); out = {}
    for k, v in h.items():
        if k == "__metadata__": continue
        s, e = v["data_offsets"]; a = array.array("f"); a.frombytes(b[8 + n + s:8 + n + e]); out[k] = (v["dtype"], v["shape"], a)
    return out
store, x = sys.argv[1:]
cur = open(os.path.join(store, "adapter", "current.txt")).read().strip()
vdir = os.path.join(store, cur)
peft = st(os.path.join(vdir, "adapter_model.safetensors")); pc = json.load(open(os.path.join(vdir, "adapter_config.json")))
mlx = st(os.path.join(x, "adapter", "adapters.safetensors")); mc = json.load(open(os.path.join(x, "adapter", "adapter_config.json")))
# the original's map_peft_key_to_mlx + transpose, and build_mlx_adapter_config
want = {}
for k, (dt, shp, a) in peft.items():
    if not (k.endswith(".lora_A.weight") or k.endswith(".lora_B.weight")): continue
    mk = k[len("base_model.model."):] if k.startswith("base_model.model.") else k
    mk = mk[:-len(".lora_A.weight")] + (".lora_a" if ".lora_A." in k else ".lora_b")
    r, c = shp
    want[mk] = ([c, r], [a[i * c + j] for j in range(c) for i in range(r)])
assert sorted(want) == sorted(mlx), (sorted(want)[:3], sorted(mlx)[:3])
for k, (shp, vals) in want.items():
    dt, s2, a = mlx[k]
    assert dt == "F32" and s2 == shp and list(a) == vals, k
cfg = json.load(open(os.path.join(os.environ["DLM_SRC"], "tests/ref/model/fixtures/qwen2-f32/config.json")))
attn = {"q_proj", "k_proj", "v_proj", "o_proj", "qkv_proj", "wqkv"}; mlp = {"gate_proj", "up_proj", "down_proj", "fc1", "fc2"}
q = lambda t: t if "." in t else "self_attn." + t if t in attn else "mlp." + t if t in mlp else t
exp = {"fine_tune_type": "lora", "num_layers": cfg["num_hidden_layers"],
       "lora_parameters": {"rank": pc["r"], "scale": pc["lora_alpha"] / pc["r"], "dropout": pc["lora_dropout"],
                           "keys": [q(t) for t in pc["target_modules"]]}}
assert mc == exp, (mc, exp)
PYEOF
rc=0; "$DLM" export q.dlm --target mlx-serve --merged 2> err.txt || rc=$?
[ $rc = 2 ] && grep -q "merged does not apply to --target mlx-serve" err.txt || fail "mlx --merged: rc $rc"
"$DLM" export q.dlm --target gguf --quant F32 --out gg > /dev/null || fail "gguf export"
"$DLM" export q.dlm --skip-ollama --quant F32 --no-smoke --draft qwen2.5:0.5b --out od > /dev/null || fail "--draft export"
grep -q "^PARAMETER num_ctx [0-9]*$" od/Modelfile || fail "Modelfile num_ctx"
sed -n '/^PARAMETER num_ctx/{n;p;n;p}' od/Modelfile > dl.txt
printf '# Speculative-decoding draft: `ollama pull qwen2.5:0.5b`\n# then run with `OLLAMA_DRAFT_MODEL=qwen2.5:0.5b ollama run <this-model>`\n' | cmp -s - dl.txt || fail "draft lines: $(cat dl.txt)"
"$DLM" export q.dlm --skip-ollama --quant F32 --no-smoke --no-draft --out nd > /dev/null || fail "--no-draft export"
! grep -q "draft" nd/Modelfile || fail "--no-draft wrote a draft"
rc=0; "$DLM" export q.dlm --draft a --no-draft 2> err.txt || rc=$?
[ $rc = 2 ] && grep -q "mutually exclusive" err.txt || fail "--draft --no-draft: rc $rc"
rc=0; "$DLM" export q.dlm --target gguf --draft qwen2.5:0.5b 2> err.txt || rc=$?
[ $rc = 2 ] && grep -q "apply to --target ollama" err.txt || fail "--draft gguf: rc $rc"

# --- train --strict-metrics ------------------------------------------------------------
$PY -c '
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.execute("CREATE TRIGGER no_steps BEFORE INSERT ON steps BEGIN SELECT RAISE(ABORT, \"steps refused by the test\"); END")
db.commit()' "$S/metrics.sqlite"
"$DLM" train q.dlm --max-steps 1 --fresh > out.txt 2> err.txt || fail "non-strict train failed: $(cat err.txt)"
grep -q "warning: metrics.sqlite: a steps row: steps refused by the test; training goes on" err.txt || fail "no warning: $(cat err.txt)"
rc=0; "$DLM" train q.dlm --max-steps 1 --fresh --strict-metrics > out.txt 2> err.txt || rc=$?
[ $rc = 1 ] && grep -q "^dlm: error: .*metrics.sqlite: a steps row: steps refused by the test" err.txt && grep -q "^hint: --strict-metrics" err.txt || fail "strict: rc $rc $(cat err.txt)"

# --- the original's options dlm does not take: the reason, not "unknown option" ---------
for c in "train flat.dlm --gpus all" \
         "train flat.dlm --watch --repl" "train flat.dlm --skip-export-probes" \
         "init z.dlm --skip-export-probes"; do
    rc=0; "$DLM" $c 2> err.txt || rc=$?
    set -- $c
    opt=$(grep -o -- '--[a-z-]*' <<<"$c" | grep -v -- '--watch' | head -1)
    [ $rc = 2 ] && grep -q "^dlm: error: $1 $opt (the original's option) is not supported: " err.txt && grep -q "^hint: " err.txt ||
        fail "$c: rc $rc $(cat err.txt)"
done
[ ! -e z.dlm ] || fail "init wrote a document"
# --listen-rpc / --max-cycles are taken (tests/cli/t1402-listen-rpc.sh runs the
# loop); the original's gates refuse with its messages, exit 2
rc=0; DLM_PROBE_TOKEN=t "$DLM" train flat.dlm --listen-rpc 127.0.0.1:7000 2> err.txt || rc=$?
[ $rc = 2 ] && grep -q -- "--listen-rpc requires --watch or --max-cycles N" err.txt || fail "listen-rpc alone: rc $rc $(cat err.txt)"
rc=0; env -u DLM_PROBE_TOKEN "$DLM" train flat.dlm --listen-rpc 127.0.0.1:7000 --max-cycles 3 2> err.txt || rc=$?
[ $rc = 2 ] && grep -q "export DLM_PROBE_TOKEN=" err.txt || fail "listen-rpc without a token: rc $rc $(cat err.txt)"
rc=0; "$DLM" train flat.dlm --max-cycles 3 2> err.txt || rc=$?
[ $rc = 2 ] && grep -q -- "options of --listen-rpc" err.txt || fail "max-cycles alone: rc $rc $(cat err.txt)"

# --- completion ------------------------------------------------------------------------
"$DLM" completion bash > c.bash && bash -n c.bash || fail "bash script"
"$DLM" completion zsh > c.zsh && "$DLM" completion fish > c.fish || fail "zsh/fish scripts"
cmds=$("$DLM" --help | sed -n '/^commands:/,/^$/p' | awk 'NF && !/commands:/ {print $1}')
for c in $cmds; do
    got=$(bash -c 'source ./c.bash; COMP_WORDS=(dlm --home h "$1"); COMP_CWORD=3; _dlm; printf "%s\n" "${COMPREPLY[@]}"' _ "${c:0:2}")
    grep -qx "$c" <<<"$got" || fail "bash: command $c not completed from ${c:0:2}: $got"
    opts=$("$DLM" help "$c" | sed -n '/^options:/,/^$/p' | grep -o -- '^ *-*[a-z, -]*--[a-z][a-z0-9-]*' | grep -o -- '--[a-z][a-z0-9-]*$' | sort -u || true)
    [ "$c" = completion ] || [ -n "$opts" ] || fail "no options parsed for $c"
    got=$(bash -c 'source ./c.bash; COMP_WORDS=(dlm "$1" x --); COMP_CWORD=3; _dlm; printf "%s\n" "${COMPREPLY[@]}"' _ "$c")
    for o in $opts; do grep -qx -- "$o" <<<"$got" || fail "bash: $c $o not completed"; done
    grep -q "^        $c) opts=(" c.zsh || fail "zsh: $c"
    grep -q "^complete -c dlm -f -n __fish_use_subcommand -a $c -d " c.fish || fail "fish: $c"
done
got=$(bash -c 'source ./c.bash; COMP_WORDS=(dlm synth pr); COMP_CWORD=2; _dlm; echo "${COMPREPLY[@]}"')
[ "$got" = "preferences" ] || fail "synth subcommand: $got"
for sh in zsh fish; do
    if command -v $sh > /dev/null; then $sh -n c.$sh || fail "$sh -n"; fi
done
rc=0; "$DLM" completion tcsh 2> err.txt || rc=$?
[ $rc = 2 ] && grep -q "unknown shell 'tcsh'" err.txt || fail "tcsh: rc $rc"
echo ok
