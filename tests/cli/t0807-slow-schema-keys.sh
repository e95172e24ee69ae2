#!/usr/bin/env bash
# No frontmatter key is accepted and ignored: every key of the schema — the
# list comes from the code's own field tables (doc_schema_keys, printed by
# the unit test binary `test_schema_keys --list`), so a new key without a case
# here fails this test — is set to a non-default value in a document on the
# embedded base, and its effect is shown against the same document without
# it: in what `train` did (the run log's banner, per-step learning rates,
# checkpoints, adapter_config.json, training_run.json, the adapter's bytes),
# in `doctor --json`, the dataset, `export`'s files or `cache prune`; or its
# documented error with file:line; or, for the keys not implemented yet, the
# visible note of src/run/inert.c. Keys being implemented elsewhere
# (training.cpt.*, training.adapters / training.gate, 8-bit
# training.optimizer values, training.precision) pass with either an effect
# or the note.
set -euo pipefail
. "$DLM_SRC/tests/cli/lib.sh"
export FIXTURE_QWEN
KEYS_BIN="${DLM_BUILD:?}/test_schema_keys"
[ -x "$KEYS_BIN" ] || fail "$KEYS_BIN is not built"
"$KEYS_BIN" --list > keys.txt
[ "$(wc -l < keys.txt)" -gt 60 ] || fail "too few keys: $(cat keys.txt)"
mkdir -p notes/sub && printf 'Lisbon is the capital of Portugal.\n%.0s' $(seq 40) > notes/a.txt
printf 'Rome is the capital of Italy.\n' > notes/b.md && printf 'Oslo is the capital of Norway.\n' > notes/sub/c.txt
/usr/bin/python3 - "$DLM" keys.txt <<'PY' || fail "schema key walk failed"
import glob, hashlib, json, os, re, subprocess, sys, time
DLM, keyfile = sys.argv[1], sys.argv[2]
keys = [k.strip() for k in open(keyfile) if k.strip()]
ID = "01JD0000000000000000000000"
BODY = """Paris is the capital of France. Berlin is the capital of Germany.

::instruction::
### Q
What is the capital of France?
### A
Paris.

::preference::
### Prompt
Capital of France?
### Chosen
Paris.
### Rejected
Lyon.
"""

QAS = "".join("\n::instruction::\n### Q\nWhat is %d + %d?\n### A\n%d.\n" % (i, i, 2 * i) for i in range(8))

def doc(training="", top="", export=""):
    t = "---\ndlm_id: %s\ndlm_version: 15\nbase_model: tiny\n%straining:\n  sequence_len: 64\n%s" % (ID, top, training)
    if export: t += "export:\n" + export
    return t + "---\n" + BODY

n = [0]
memo = {}
def run(text, train=("--max-steps", "2"), phase=None):
    """Train text in a fresh home; everything observable about the run
    (the same document and arguments twice: the first run's)."""
    if (text, train, phase) in memo: return memo[(text, train, phase)]
    n[0] += 1
    d = os.path.abspath("r%d" % n[0]); os.makedirs(d)
    p = os.path.join(d, "k.dlm"); open(p, "w").write(text)
    env = dict(os.environ, DLM_HOME=os.path.join(d, "home"))
    f = {"dir": d, "doc": p, "env": env}
    a = [DLM, "train", p, *train] + (["--phase", phase] if phase else [])
    r = subprocess.run(a, capture_output=True, text=True, env=env)
    f["rc"], f["out"] = r.returncode, r.stdout + r.stderr
    f["notes"] = re.findall(r"note: (training\.[a-z_.]+)[: ]", f["out"])
    store = os.path.join(d, "home", "store", ID)
    logs = sorted(glob.glob(store + "/logs/train-*.jsonl"))
    f["banner"], f["lrs"], f["ckpt"], f["steps"] = {}, [], 0, []
    for lg in logs:
        for line in open(lg):
            o = json.loads(line)
            if o["type"] == "banner" and not f["banner"]: f["banner"] = o     # the first phase's
            if o["type"] == "step": f["lrs"].append(o.get("lr")); f["steps"].append(o)
            if o["type"] == "checkpoint": f["ckpt"] += 1
    vs = sorted(glob.glob(store + "/adapter/versions/v*"))
    f["cfg"] = json.load(open(vs[-1] + "/adapter_config.json")) if vs else {}
    f["run"] = json.load(open(vs[-1] + "/training_run.json")) if vs else {}
    f["sha"] = hashlib.sha256(open(vs[-1] + "/adapter_model.safetensors", "rb").read()).hexdigest() if vs else None
    f["tcache"] = sum(os.path.getsize(x) for x in glob.glob(store + "/tokenized-cache/**", recursive=True) if os.path.isfile(x))
    memo[(text, train, phase)] = f
    return f

def doctor(f):
    """`dlm doctor --json` of the run's document: the document part."""
    if "doctor" not in f:
        r = subprocess.run([DLM, "doctor", f["doc"], "--json"], capture_output=True, text=True, env=f["env"])
        assert r.returncode == 0, r.stdout + r.stderr
        f["doctor"] = json.loads(r.stdout)["document"]
    return f["doctor"]

def err(text, cmd="show"):
    """The error a document gets: (rc, output)."""
    n[0] += 1
    d = os.path.abspath("e%d" % n[0]); os.makedirs(d)
    p = os.path.join(d, "k.dlm"); open(p, "w").write(text)
    r = subprocess.run([DLM, cmd, p], capture_output=True, text=True, env=dict(os.environ, DLM_HOME=d + "/home"))
    return r.returncode, r.stdout + r.stderr

base = run(doc())
assert base["rc"] == 0 and not base["notes"], base["out"]
shown = {}
def effect(key, what, a, b):
    assert a != b, "%s: no effect on %s (%r both)" % (key, what, a)
    shown[key] = "effect: %s %r -> %r" % (what, b, a)

def effect_or_note(key, f, what, get, note):
    if note in f["notes"]:
        shown[key] = "inert note: " + note
    else:
        effect(key, what, get(f), get(base))

def error(key, text, pattern, cmd="show"):
    rc, out = err(text, cmd)
    assert rc != 0 and re.search(pattern, out), "%s: expected /%s/, got rc %d: %s" % (key, pattern, rc, out)
    assert re.search(r"k\.dlm:\d+:\d+:", out), "%s: the error has no file:line: %s" % (key, out)
    shown[key] = "error: " + out.strip().splitlines()[0][:100]

T = lambda s: "  " + s.replace("\n", "\n  ") + "\n"
lrs = lambda f: f["lrs"]
bn = lambda k: (lambda f: f["banner"].get(k))

# --- one run per key (or per group of keys whose effects are told apart) ---
g = run(doc(T("lora_r: 4\nlora_alpha: 32\nlora_dropout: 0.2\ntarget_modules: [q_proj, v_proj]\n"
              "seed: 7\nmicro_batch_size: 1\ngrad_accum: 2\nrecompute: \"on\"\nthreads: 1")))
assert g["rc"] == 0, g["out"]
def case(key):
    k = key
    if k in ("training", "export") or any(x.startswith(k + ".") or x.startswith(k + "[") for x in keys):
        return "object"         # shown by its keys
    if k == "dlm_id":
        f = run(doc().replace(ID, "01JD0000000000000000000009"))
        effect(k, "store folder", os.listdir(f["dir"] + "/home/store"), os.listdir(base["dir"] + "/home/store"))
    elif k == "dlm_version":
        error(k, doc().replace("dlm_version: 15", "dlm_version: 99"), "dlm_version|newer")
    elif k == "base_model":
        f = run(doc().replace("base_model: tiny", "base_model: " + os.path.abspath(os.environ["FIXTURE_QWEN"])))
        effect(k, "doctor document.base", doctor(f)["base"], doctor(base)["base"])
    elif k == "system_prompt":
        f = run(doc(top="system_prompt: You answer in one word.\n"))
        effect(k, "doctor document.tokens", doctor(f)["tokens"], doctor(base)["tokens"])
    elif k in ("training.lora_r", "training.lora_alpha", "training.lora_dropout", "training.target_modules"):
        field = {"training.lora_r": "r"}.get(k, k.split(".")[-1])
        effect(k, "adapter_config." + field, g["cfg"][field], base["cfg"][field])
    elif k == "training.adapter":
        f = run(doc(T("adapter: dora")))
        effect(k, "adapter_config.use_dora", f["cfg"].get("use_dora"), base["cfg"].get("use_dora"))
    elif k in ("training.seed", "training.micro_batch_size", "training.grad_accum", "training.recompute", "training.threads"):
        field = k.split(".")[-1]
        effect(k, "train log banner." + field, g["banner"][field], base["banner"][field])
    elif k == "training.val_frac":
        f = run(doc(T("val_frac: 0.5")))
        effect(k, "train log banner.val_items", f["banner"]["val_items"], base["banner"]["val_items"])
    elif k == "training.sequence_len":
        f = run(doc().replace("sequence_len: 64", "sequence_len: 128"))
        effect(k, "doctor document.sequence_len", doctor(f)["sequence_len"], doctor(base)["sequence_len"])
    elif k in ("training.learning_rate", "training.lr_scheduler", "training.warmup_ratio", "training.min_lr_ratio"):
        v = {"training.learning_rate": "learning_rate: 0.001", "training.lr_scheduler": "lr_scheduler: constant",
             "training.warmup_ratio": "warmup_ratio: 0.5", "training.min_lr_ratio": "min_lr_ratio: 0.9"}[k]
        train = ("--max-steps", "8")
        f, b = run(doc(T(v + ("\nlr_scheduler: cosine_min_lr" if k == "training.min_lr_ratio" else ""))), train), \
            run(doc(T("lr_scheduler: cosine_min_lr") if k == "training.min_lr_ratio" else ""), train)
        effect(k, "per-step learning rates", f["lrs"], b["lrs"])
    elif k == "training.num_epochs":
        f1, f2 = run(doc(T("num_epochs: 1\nmicro_batch_size: 1")), ()), run(doc(T("num_epochs: 3\nmicro_batch_size: 1")), ())
        effect(k, "steps of a run", f2["banner"]["total_steps"], f1["banner"]["total_steps"])
    elif k == "training.weight_decay":
        f = run(doc(T("weight_decay: 0.5\nlearning_rate: 0.01")))
        b = run(doc(T("learning_rate: 0.01")))
        effect(k, "adapter bytes", f["sha"], b["sha"])
    elif k == "training.save_steps":
        f = run(doc(T("save_steps: 3")))
        effect(k, "checkpoints written", f["ckpt"], base["ckpt"])
    elif k == "training.optimizer":
        f = run(doc(T("optimizer: adamw_bnb_8bit")))
        effect_or_note(k, f, "plan items", bn("plan_items"), "training.optimizer")
    elif k == "training.precision":
        # the other value than the default's: null trains bf16 where the CPU has
        # a bf16 back end (avx512bf16, amx), fp32 elsewhere
        f = run(doc(T("precision: " + ("fp32" if bn("precision")(base) == "bf16" else "bf16"))))
        effect_or_note(k, f, "train log banner precision", bn("precision"), "training.precision")
    elif k.startswith("training.cpt."):
        # schedule: the one auto did not choose for the base document
        # (training_run.json's cpt.schedule), so the learning rates differ
        other = "sft" if base["run"].get("cpt", {}).get("schedule") == "dapt" else "dapt"
        v = {"schedule": "schedule: " + other, "embed_warmup_steps": "embed_warmup_steps: 5"}[k.split(".")[-1]]
        if k.endswith(".schedule"):   # two steps are warmup + peak under both schedules: take five
            f = run(doc(T("cpt:\n  " + v)), train=("--max-steps", "5"))
            ref = run(doc(), train=("--max-steps", "5"))
            if "training.cpt" in f["notes"]: shown[k] = "inert note: training.cpt"
            else: effect(k, "learning rates", f["lrs"], ref["lrs"])
        else:
            f = run(doc(T("cpt:\n  " + v)))
            effect_or_note(k, f, "adapter bytes", lambda f: f["sha"], "training.cpt")
    elif k.startswith("training.gate."):
        v = {"enabled": "true", "hidden_proj_dim": "32", "steps": "50", "lr": "0.001", "cold_start_floor": "8",
             "entropy_lambda": "0.5"}[k.split(".")[-1]]
        f = run(doc(T("gate:\n  %s: %s" % (k.split(".")[-1], v))))
        if f["rc"] != 0 and "training.gate" not in f["notes"]:
            # gate.enabled alone is refused: a gate needs two named adapters
            assert re.search(r"k\.dlm:\d+:\d+: .*gate\.enabled", f["out"]), "%s: %s" % (k, f["out"])
            shown[k] = "error: " + f["out"].strip().splitlines()[-1][:100]
        else:
            effect_or_note(k, f, "adapter files", lambda f: f["cfg"], "training.gate")
    elif k == "training.audio.auto_resample":
        # an 8 kHz clip on the audio-language base: refused at 16 kHz
        # without the key, resampled and ingested with it (docs/audio.md)
        import wave
        # the row as a small random Qwen2-Audio in an offline HF cache (t1701)
        hub = os.path.abspath("q2a-hub")
        subprocess.run([os.path.join(os.environ["DLM_SRC"], "tests/ref/media/q2a-hub.sh"), hub], check=True,
                       capture_output=True)
        def audio_run(extra):
            d = os.path.abspath("a%d" % len(extra)); os.makedirs(d, exist_ok=True)
            w = wave.open(os.path.join(d, "c.wav"), "wb"); w.setnchannels(1); w.setsampwidth(2); w.setframerate(8000)
            w.writeframes(b"\0\1" * 4000); w.close()
            p = os.path.join(d, "k.dlm")
            open(p, "w").write("---\ndlm_id: %s\ndlm_version: 15\nbase_model: qwen2-audio-7b-instruct\n%s---\n"
                               "::audio path=\"c.wav\" transcript=\"hi\"::\n" % (ID, extra))
            r = subprocess.run([DLM, "train", p], capture_output=True, text=True,
                               env=dict(os.environ, DLM_HOME=d + "/home", HF_HUB_CACHE=hub, HF_HUB_OFFLINE="1"))
            return (r.stdout + r.stderr).strip().splitlines()[-2 if "hint:" in r.stdout + r.stderr else -1]
        effect(k, "an 8 kHz clip's ingestion", audio_run("training:\n  audio:\n    auto_resample: true\n"), audio_run(""))
    elif k.startswith("training.adapters.*."):
        field = k.split(".")[-1]
        v = {"adapter": "lora", "lora_r": "4", "lora_alpha": "8", "lora_dropout": "0.1", "target_modules": "[q_proj]",
             "learning_rate": "0.001"}[field]
        f = run(doc(T("adapters:\n  extra:\n    %s: %s" % (field, v))))
        effect_or_note(k, f, "adapter folders", lambda f: sorted(os.listdir(glob.glob(f["dir"] + "/home/store/*/adapter")[0])), "training.adapters")
    elif k == "training.multi_turn":
        # conversation rows need two Q/A pairs: QAS adds eight
        f, b = run(doc(T("multi_turn: 0")) + QAS), run(doc() + QAS)
        effect(k, "doctor document.train_items", doctor(f)["train_items"], doctor(b)["train_items"])
    elif k == "training.loss_on":
        f = run(doc(T("loss_on: all")))
        effect(k, "train log banner.train_loss_tokens", f["banner"]["train_loss_tokens"], base["banner"]["train_loss_tokens"])
    elif k == "training.packing":
        # packed, one row (as long as the longest item: the long prose
        # here) holds several short Q&A items; the losses are the same
        # (val_frac 0.1: the split this comparison was measured with; on
        # every row the third step's losses differ by 1.3e-4 relative)
        # precision fp32: the exact path (bf16 rounds differently per batch layout)
        mb = "micro_batch_size: 8\ngrad_accum: 1\nval_frac: 0.1\nprecision: fp32\n"
        LONG = "\n" + "Lisbon is the capital of Portugal and Rome the capital of Italy. " * 3 + "\n"
        pk = lambda t: t.replace("---\nParis", "---\n" + LONG + "\nParis") + QAS
        f, b = run(pk(doc(T(mb + "packing: false")))), run(pk(doc(T(mb))))
        la, lb = [s["loss"] for s in f["steps"]], [s["loss"] for s in b["steps"]]
        assert len(la) == len(lb) and all(abs(x - y) <= 1e-4 * abs(y) for x, y in zip(la, lb)), ("packing changed the losses", la, lb)
        effect(k, "train log rows per step", [s["rows"] for s in f["steps"] if "rows" in s], [s["rows"] for s in b["steps"] if "rows" in s])
    elif k == "training.cache.enabled":
        f = run(doc(T("cache:\n  enabled: false")))
        effect(k, "training_run tokenization_cache", f["run"].get("tokenization_cache"), base["run"].get("tokenization_cache"))
    elif k == "training.cache.max_bytes":
        f = run(doc(T("cache:\n  max_bytes: 1")))
        effect(k, "tokenized-cache bytes after the run", f["tcache"], base["tcache"])
    elif k == "training.cache.prune_older_than_days":
        res = []
        for days in (1, 90):
            f = run(doc(T("cache:\n  prune_older_than_days: %d" % days)))
            old = time.time() - 3 * 86400
            for x in glob.glob(f["dir"] + "/home/store/*/tokenized-cache/**", recursive=True):
                if os.path.isfile(x): os.utime(x, (old, old))
            r = subprocess.run([DLM, "cache", "prune", f["doc"]], capture_output=True, text=True, env=f["env"])
            assert r.returncode == 0, r.stdout + r.stderr
            res.append(sum(1 for x in glob.glob(f["dir"] + "/home/store/*/tokenized-cache/**", recursive=True) if os.path.isfile(x)))
        effect(k, "tokenized-cache files left by `cache prune` after 3 days", res[0], res[1])
    elif k in ("training.replay.enabled", "training.replay.max_bytes"):
        v = {"training.replay.enabled": "enabled: false", "training.replay.max_bytes": "max_bytes: 1"}[k]
        res = []
        for t in (doc(T("replay:\n  " + v)), doc()):
            f = run(t)
            # the prose section replaced: the old one is what replay replays
            t2 = open(f["doc"]).read().replace("Berlin is the capital of Germany.", "Madrid is the capital of Spain.")
            open(f["doc"], "w").write(t2)
            r = subprocess.run([DLM, "train", f["doc"], "--max-steps", "2"], capture_output=True, text=True, env=f["env"])
            assert r.returncode == 0, r.stdout + r.stderr
            # the SFT version's count (the DPO version after it counts past preference sections)
            runs = [json.load(open(v + "/training_run.json")) for v in sorted(glob.glob(f["dir"] + "/home/store/*/adapter/versions/v*"))]
            if k == "training.replay.enabled":
                res.append([rr for rr in runs if rr.get("phase") == "sft"][-1]["replay_sections"])
            else:   # the cap evicts the edited-away section once the second run commits
                res.append(len(json.load(open(glob.glob(f["dir"] + "/home/store/*/replay/index.json")[0]))))
        effect(k, "replay_sections of the second run" if k == "training.replay.enabled"
               else "replay corpus entries after the second run", res[0], res[1])
    elif k.startswith("training.preference."):
        field = k.split(".")[-1]
        v = {"enabled": "enabled: false", "method": "method: orpo", "loss_type": "loss_type: hinge",
             "reference": "reference: base", "beta": "hyperparams: {beta: 0.5}", "alpha": "hyperparams: {alpha: 0.5}\n  method: orpo",
             "learning_rate": "hyperparams: {learning_rate: 0.001}", "num_epochs": "hyperparams: {num_epochs: 3}"}[field]
        bv = "method: orpo" if field == "alpha" else ""
        f = run(doc(T("preference:\n  " + v)), ("--max-steps", "2"), "all")
        b = run(doc(T("preference:\n  " + bv) if bv else ""), ("--max-steps", "2"), "all")
        assert b["rc"] == 0, b["out"]
        get = lambda f: (f["sha"], [s.get("loss") for s in f["steps"]], f["banner"].get("total_steps"), f["lrs"])
        effect(k, "preference phase (adapter, losses, steps, lrs)", get(f), get(b))
    elif k == "training.sources_policy":
        t = doc(T("sources:\n  - path: /etc\n    include: ['hostname']\nsources_policy: strict"))
        rc, out = err(t, "train")
        assert rc != 0 and "strict" in out, "%s: %s" % (k, out)
        shown[k] = "error: " + out.strip().splitlines()[0][:100]
    elif k.startswith("training.sources[]."):
        field = k.split(".")[-1]
        src = os.path.abspath("notes")
        v = {"path": "", "include": "\n    include: ['*.md']", "exclude": "\n    exclude: ['*.md']",
             "max_bytes_per_file": "\n    max_bytes_per_file: 64", "max_files": "\n    max_files: 1"}[field]
        f = run(doc(T("sources:\n  - path: %s%s" % (src, v))))
        assert f["rc"] == 0, f["out"]
        b = base if field == "path" else run(doc(T("sources:\n  - path: %s" % src)))
        get = lambda f: (doctor(f)["tokens"], doctor(f)["train_items"])
        effect(k, "doctor document tokens/items", get(f), get(b))
    elif k.startswith("export."):
        field = k.split(".")[-1]
        v = {"default_quant": "Q8_0", "default_temperature": "0.3", "default_top_p": "0.5"}[field]
        res = []
        for ex in ("  %s: %s\n" % (field, v), ""):
            f = run(doc(export=ex), ("--max-steps", "1"))
            out = os.path.join(f["dir"], "x-" + field)      # the baseline run is shared
            r = subprocess.run([DLM, "export", f["doc"], "--target", "ollama", "--skip-ollama", "--quant", "F32", "--out", out]
                               if field != "default_quant" else [DLM, "export", f["doc"], "--target", "gguf", "--out", out],
                               capture_output=True, text=True, env=f["env"])
            assert r.returncode == 0, r.stdout + r.stderr
            files = sorted(os.listdir(out))
            mf = os.path.join(out, "Modelfile")
            res.append((files, open(mf).read() if os.path.exists(mf) and field != "default_quant" else None,
                        [hashlib.sha256(open(os.path.join(out, x), "rb").read()).hexdigest() for x in files if x.endswith(".gguf")]))
        effect(k, "export's files", res[0], res[1])
    else:
        raise AssertionError("no case for schema key %s: add one to tests/cli/t0807-slow-schema-keys.sh" % k)
    return shown.get(k, "?")

failed = []
only = os.environ.get("SCHEMA_KEYS_ONLY")      # a regex, to rerun some keys by hand
for k in keys:
    if only and not re.search(only, k): continue
    try:
        print("%-45s %s" % (k, case(k)))
    except Exception as e:      # report every key, then fail
        failed.append("%s: %s" % (k, e))
for x in failed: print("FAIL", x, file=sys.stderr)
sys.exit(1 if failed else 0)
PY
echo ok
