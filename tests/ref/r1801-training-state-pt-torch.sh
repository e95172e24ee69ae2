#!/usr/bin/env bash
# r1801: the original DocumentLanguageModel's training_state.pt beside each
# version dlm commits (src/run/ptstate.c, written in C by util/torchpt.c),
# read by PyTorch itself:
#   - torch 2.15 (PyPI, tests/ref/venv/torch2.txt) loads it with
#     torch.load(weights_only=True): the original's payload keys, in its
#     order; torch.optim.AdamW's state_dict with one entry per PEFT tensor
#     in named_parameters order, whose exp_avg / exp_avg_sq are dlm's own
#     AdamW moments (training_state.bin) and shapes the adapter's; the two
#     param groups HF's Trainer makes; the LambdaLR state after the run;
#     torch_rng_state byte for byte torch.manual_seed(seed)'s, and
#     training_state.rng.json numpy's and Python's seeded states; an
#     AdamW built over the same shapes takes the state (load_state_dict)
#     and steps;
#   - Debian's python3-torch 1.13 loads the same values (plain torch.load:
#     1.13's weights_only reader has no BINFLOAT, not even for its own
#     files; torch >= 2.0 reads floats);
#   - the .sha256 sidecar is the file's digest;
#   - with training.optimizer adamw_bnb_8bit the state holds no moments.
set -euo pipefail
: "${DLM:?}" "${DLM_SRC:?}"
if ! V=$("$DLM_SRC/scripts/ref-venv.sh" torch2); then
    [ "${DLM_REF_SKIP:-}" = 1 ] && exit 77
    echo "r1801: cannot make the torch2 venv" >&2; exit 1
fi
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
cd "$T"
fail() { echo "FAIL: $*" >&2; exit 1; }
export DLM_HOME="$T/home"
cat > a.dlm <<DOC
---
dlm_id: 01JD0000000000000000001801
dlm_version: 15
base_model: $DLM_SRC/tests/ref/model/fixtures/qwen2-f32
training:
  sequence_len: 96
  num_epochs: 3
  learning_rate: 0.005
  micro_batch_size: 2
  grad_accum: 1
  seed: 7
  lora_r: 4
  target_modules: [q_proj, v_proj, down_proj]
---
# Capitals

Paris is the capital of France. Berlin is the capital of Germany.

::instruction::
### Q
What is the capital of France?
### A
Paris.

### Q
What is the capital of Germany?
### A
Berlin.
DOC
"$DLM" train a.dlm > train.log 2>&1 || fail "dlm train: $(cat train.log)"
D="$DLM_HOME/store/01JD0000000000000000001801/adapter/versions/v0001"
[ "$(cat "$D/training_state.pt.sha256")" = "$(sha256sum "$D/training_state.pt" | cut -c1-64)" ] || fail "sha256 sidecar"
cat > check.py <<'PYEOF'
import json, random, struct, sys
import numpy as np, torch
d = sys.argv[1]
new_torch = int(torch.__version__.split(".")[0]) >= 2
s = torch.load(d + "/training_state.pt", weights_only=new_torch)
# the original's payload (dlm.train.state_sidecar.save_state), in its order
assert list(s) == ["_state_sidecar_version", "optimizer_state_dict", "scheduler_state_dict", "scaler_state_dict",
                   "torch_rng_state", "cuda_rng_state", "global_step", "epoch", "best_val_loss", "dlm_manifest_hash",
                   "base_model_revision", "pinned_versions", "use_qlora"], list(s)
tr = json.load(open(d + "/training_run.json"))
steps = tr["steps"]
assert s["_state_sidecar_version"] == 2 and s["global_step"] == steps and steps > 0, (s["global_step"], steps)
assert s["use_qlora"] is False and s["scaler_state_dict"] is None and s["cuda_rng_state"] is None
assert s["base_model_revision"] == tr["base_model_revision"] and s["pinned_versions"]["dlm"]
# one param per PEFT tensor, in named_parameters order
def shapes(path):   # the safetensors header (8-byte length + JSON): names and shapes
    f = open(path, "rb"); h = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
    return {k: tuple(x["shape"]) for k, x in h.items() if k != "__metadata__"}
ad = shapes(d + "/adapter_model.safetensors")
MOD = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
def order(k):
    p = k.split(".")
    return (int(p[p.index("layers") + 1]), MOD.index(p[-3]), p[-2])
names = sorted(ad, key=order)
o = s["optimizer_state_dict"]
assert sorted(o["state"]) == list(range(len(names))), (sorted(o["state"]), len(names))
# dlm's own moments: training_state.bin (adapter/state.h): 88-byte header, params, m, v
b = open(d + "/training_state.bin", "rb").read()
assert b[:8] == b"DLMSTATE"
n = struct.unpack_from("<Q", b, 48)[0]
m = np.frombuffer(b, "<f4", n, 88 + 4 * n)
v = np.frombuffer(b, "<f4", n, 88 + 8 * n)
got_m = np.concatenate([o["state"][i]["exp_avg"].numpy().ravel() for i in range(len(names))])
got_v = np.concatenate([o["state"][i]["exp_avg_sq"].numpy().ravel() for i in range(len(names))])
assert got_m.size == n and np.array_equal(got_m, m) and np.array_equal(got_v, v)
assert np.abs(m).max() > 0
for i, k in enumerate(names):
    st = o["state"][i]
    assert tuple(st["exp_avg"].shape) == ad[k], (k, st["exp_avg"].shape, ad[k])
    assert st["exp_avg"].dtype == torch.float32 and st["step"].dim() == 0 and float(st["step"]) == steps
g0, g1 = o["param_groups"]
fm = tr["frontmatter"]["training"]
assert g0["params"] == list(range(len(names))) and g1["params"] == []
for g in (g0, g1):
    assert g["initial_lr"] == fm["learning_rate"] and g["betas"] == (0.9, 0.999) and g["eps"] == 1e-8
    assert g["lr"] == 0.0 and g["decoupled_weight_decay"] is True and g["foreach"] is None   # linear decay, done
sc = s["scheduler_state_dict"]
assert sc["last_epoch"] == steps and sc["_step_count"] == steps + 1 and sc["_last_lr"] == [0.0, 0.0]
assert sc["base_lrs"] == [fm["learning_rate"]] * 2 and sc["lr_lambdas"] == [{}, {}]
# the generators as seeding with the run's seed leaves them
torch.manual_seed(7)
assert torch.equal(s["torch_rng_state"], torch.get_rng_state())
rng = json.load(open(d + "/training_state.rng.json"))
np.random.seed(7)
name, key, pos, hg, cg = np.random.get_state()
ns = rng["numpy_rng_state"]
assert ns["name"] == name and bytes(key).hex() == ns["state_hex"] and ns["pos"] == pos and ns["has_gauss"] == hg
random.seed(7)
ver, st, gn = random.getstate()
ps = rng["python_random_state"]
assert ps["version"] == ver and tuple(ps["state"]) == st and ps["gauss_next"] is gn
# what dlm-sway's gradient_ghost reads (its trunk on GitHub, not in the
# pinned 0.1.0): optimizer_state_dict.state by int id, layer-major, the same
# count of adapter tensors in every layer, global_step, epoch
per_layer = {}
for k in ad:
    L = order(k)[0]
    per_layer[L] = per_layer.get(L, 0) + 1
assert len(set(per_layer.values())) == 1 and sum(per_layer.values()) == len(o["state"]), per_layer
assert all(isinstance(k, int) for k in o["state"]) and isinstance(s["epoch"], float) and s["epoch"] > 0
if new_torch:
    # torch's own AdamW takes the state over parameters of those shapes, and steps
    params = [torch.nn.Parameter(torch.zeros(ad[k])) for k in names]
    opt = torch.optim.AdamW([{"params": params, "weight_decay": 0.0}, {"params": [], "weight_decay": 0.0}], lr=fm["learning_rate"])
    opt.load_state_dict(o)
    assert torch.equal(opt.state[params[0]]["exp_avg"], o["state"][0]["exp_avg"])
    for p in params: p.grad = torch.ones_like(p)
    opt.param_groups[0]["lr"] = 1e-3
    opt.step()
    assert float(opt.state[params[0]]["step"]) == steps + 1
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda k: 1.0)
    sched.load_state_dict(sc)
    assert sched.last_epoch == steps
print("ok", torch.__version__)
PYEOF
"$V/bin/python" check.py "$D" > c2.txt 2>&1 || fail "torch 2.15: $(cat c2.txt)"
grep -q "^ok 2\.15" c2.txt || fail "torch 2.15: $(cat c2.txt)"
/usr/bin/python3 check.py "$D" > c1.txt 2>&1 || fail "Debian torch: $(cat c1.txt)"
grep -q "^ok 1\." c1.txt || fail "Debian torch: $(cat c1.txt)"
# 8-bit AdamW (bitsandbytes' block-wise state in the original): no moments
# are given for it, an empty "state" as an optimizer that has not stepped
sed -e 's/^  seed: 7$/  seed: 7\n  optimizer: adamw_bnb_8bit/' -e 's/001801$/001802/' -e 's/num_epochs: 3/num_epochs: 1/' a.dlm > b.dlm
"$DLM" train b.dlm > train8.log 2>&1 || fail "dlm train 8-bit: $(cat train8.log)"
"$V/bin/python" - "$DLM_HOME/store/01JD0000000000000000001802/adapter/versions/v0001" <<'PYEOF' || fail "8-bit state"
import sys, torch
s = torch.load(sys.argv[1] + "/training_state.pt", weights_only=True)
o = s["optimizer_state_dict"]
assert o["state"] == {} and len(o["param_groups"][0]["params"]) == 12 and s["global_step"] > 0, o
PYEOF
echo ok
