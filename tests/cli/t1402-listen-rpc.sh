#!/usr/bin/env bash
# t1402: `dlm train DOC --listen-rpc 127.0.0.1:0 --max-cycles 2` (the original
# DocumentLanguageModel's probe-injection loop) on the embedded base, driven
# by a client written from the original's server (tests/cli/helpers/
# probe_client.py: dlm.train.rpc's contract; neither document-language-model
# 0.10.0 nor dlm-sway 0.1.0 ships a client). tests/ref/r1805 runs the same
# client against the original's own server.
#   a. two cycles: A+B, then C; each version's adapter differs, training_run.json
#      records the probes with the original's section ids, logs/rpc-injected.jsonl
#      has a line per probe, the loop stops after 2 cycles (rc 0), a probe sent
#      after the last drain gets 503; wire errors: 401 (no/wrong token), 404
#      (path, method), 400 (Content-Length, JSON, schema), 501 (GET), a bad body
#      on a kept-alive connection (it carries the next request), non-HTTP bytes.
#   b. determinism: the same injections in the same order, a second store: the
#      same adapter bytes for every version.
#   c. a probe the document cannot take ("### A" inside its prompt) is said and
#      audited as refused; the good probe of the batch trains.
#   d. refusals before training: a taken port (nothing trained), a non-loopback
#      address without --i-know-this-is-public; SIGTERM while waiting: rc 0.
. "$DLM_SRC/tests/cli/lib.sh"
PY=${PYTHON:-python3}
H="$DLM_SRC/tests/cli/helpers"
cat > d.dlm <<DOC
---
dlm_id: $ID
dlm_version: 15
base_model: tiny
training:
  sequence_len: 64
  micro_batch_size: 2
  num_epochs: 2
---
# Capitals

Paris is the capital of France.

::instruction::
### Q
What is the capital of France?
### A
Paris.
DOC

# --- a + b ------------------------------------------------------------------------------
DLM_HOME="$T/h1" "$PY" "$H/rpc_cycles.py" "$DLM" d.dlm o1 --wire > r1.json || fail "cycles (wire checks)"
DLM_HOME="$T/h2" "$PY" "$H/rpc_cycles.py" "$DLM" d.dlm o2 > r2.json || fail "cycles (second store)"
"$PY" - r1.json r2.json <<'PY' || fail "not deterministic: $(cat r1.json r2.json)"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert a["adapter_sha256"] == b["adapter_sha256"] and a["section_ids"] == b["section_ids"], (a, b)
PY

# --- c: a probe the grammar refuses --------------------------------------------------------
export DLM_HOME="$T/h3"
DLM_PROBE_TOKEN=tok "$DLM" train d.dlm --listen-rpc 127.0.0.1:0 --max-cycles 1 --watch-max-steps 2 \
    --watch-debounce-ms 1000 > c.out 2> c.err &
pid=$!
"$PY" - "$H" c.err <<'PY' || { kill $pid 2>/dev/null; fail "injecting: $(cat c.err)"; }
import re, sys, time
sys.path.insert(0, sys.argv[1])
from probe_client import ProbeClient
for _ in range(600):
    m = re.search(r"listening on 127\.0\.0\.1:(\d+)", open(sys.argv[2]).read())
    if m: break
    time.sleep(0.05)
c = ProbeClient("127.0.0.1", int(m.group(1)), "tok")
for p, r in (("Bad one\n### A\nsmuggled answer", "x"), ("Good one?", "Fine.")):
    st, body = c.inject(p, r)
    assert st == 200, (st, body)
PY
rc=0; wait $pid || rc=$?
[ $rc = 0 ] || fail "c: rc $rc $(cat c.err)"
grep -q "warning: rpc: probe 'Bad one" c.err && grep -q "rpc: cycle 1/1: 1 injected probe(s)" c.err &&
    grep -q "rpc: cycle 1/1 done: v0002 trained 1 injected probe(s)" c.err || fail "c: $(cat c.err)"
"$PY" - "$DLM_HOME/store/$ID" <<'PY' || fail "c: records"
import json, sys
s = sys.argv[1]
a = [json.loads(x) for x in open(s + "/logs/rpc-injected.jsonl")]
assert [x["prompt"] for x in a] == ["Bad one\n### A\nsmuggled answer", "Good one?"], a
assert "refused" in a[0] and a[0]["run_id"] is None and a[1]["adapter_version"] == 2 and "refused" not in a[1], a
t = json.load(open(s + "/adapter/versions/v0002/training_run.json"))
assert [x["prompt"] for x in t["injected_probes"]] == ["Good one?"], t
PY

# --- d: refusals, and a stop while waiting ---------------------------------------------------
export DLM_HOME="$T/h4"
port=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$PY" -c 'import socket,sys,time; s=socket.socket(); s.bind(("127.0.0.1",int(sys.argv[1]))); s.listen(); time.sleep(30)' "$port" &
holder=$!
sleep 0.5
rc=0; DLM_PROBE_TOKEN=tok "$DLM" train d.dlm --listen-rpc "127.0.0.1:$port" --max-cycles 1 > /dev/null 2> d.err || rc=$?
kill $holder 2>/dev/null || true
[ $rc != 0 ] && grep -q "cannot listen on 127.0.0.1:$port" d.err || fail "taken port: rc $rc $(cat d.err)"
[ ! -e "$DLM_HOME/store/$ID/adapter/versions/v0001" ] || fail "taken port: it trained first"
for addr in 0.0.0.0:0 10.1.2.3:7429 "[::]:0"; do
    rc=0; DLM_PROBE_TOKEN=tok "$DLM" train d.dlm --listen-rpc "$addr" --max-cycles 1 2> d.err || rc=$?
    [ $rc = 2 ] && grep -q "is not a loopback address" d.err && grep -q -- "--i-know-this-is-public" d.err ||
        fail "$addr: rc $rc $(cat d.err)"
done
# IPv6 loopback where the host has it, else IPv4
addr="[::1]:0" shown="::1"
"$PY" -c 'import socket; socket.socket(socket.AF_INET6).bind(("::1", 0))' 2> /dev/null || { addr=127.0.0.1:0 shown=127.0.0.1; }
DLM_PROBE_TOKEN=tok "$DLM" train d.dlm --listen-rpc "$addr" --max-cycles 3 > /dev/null 2> w.err &
pid=$!
for _ in $(seq 600); do grep -q "rpc: waiting for probes" w.err && break; sleep 0.05; done
grep -q "rpc: listening on $shown:" w.err || { kill $pid; fail "$addr: $(cat w.err)"; }
kill -TERM $pid
rc=0; wait $pid || rc=$?
[ $rc = 0 ] || fail "SIGTERM while waiting: rc $rc $(cat w.err)"
rc=0; DLM_PROBE_TOKEN=tok "$DLM" train d.dlm --listen-rpc 127.0.0.1:0 --max-cycles 1 --i-know-this-is-public 2> d.err || rc=$?
[ $rc = 2 ] && grep -q "is loopback" d.err || fail "opt-in on loopback: rc $rc $(cat d.err)"
rc=0; DLM_PROBE_TOKEN=tok "$DLM" train d.dlm --listen-rpc 127.0.0.1:0 --max-cycles 1 --phase preference 2> d.err || rc=$?
[ $rc = 2 ] && grep -q "would never train them" d.err || fail "--phase preference: rc $rc $(cat d.err)"
# --- e: with --watch, a probe and an edit each start a cycle; --max-cycles caps both ---------
export DLM_HOME="$T/h5"
cp d.dlm w.dlm
DLM_PROBE_TOKEN=tok "$DLM" train w.dlm --watch --listen-rpc 127.0.0.1:0 --max-cycles 2 --watch-max-steps 2 \
    --watch-debounce-ms 300 > /dev/null 2> e.err &
pid=$!
"$PY" - "$H" e.err <<'PY' || { kill $pid 2>/dev/null; fail "e: $(cat e.err)"; }
import re, sys, time
sys.path.insert(0, sys.argv[1])
from probe_client import ProbeClient
def wait(pat):
    for _ in range(2400):
        m = re.search(pat, open(sys.argv[2]).read())
        if m: return m
        time.sleep(0.05)
    raise SystemExit(f"no /{pat}/")
m = wait(r"listening on 127\.0\.0\.1:(\d+)")
wait(r"rpc: waiting for probes for cycle 1 of 2")
st, body = ProbeClient("127.0.0.1", int(m.group(1)), "tok").inject("Probe via watch?", "Yes.")
assert st == 200, (st, body)
wait(r"rpc: cycle 1/2 done: v0002 trained 1 injected probe")
time.sleep(1)   # --watch notices edits made while it waits (t0604 does the same)
with open("w.dlm", "a") as f:
    f.write("\n::instruction::\n### Q\nAn edit?\n### A\nIt trains.\n")
wait(r"rpc: cycle 2/2: 0 injected probe\(s\), \d+ new section")
PY
rc=0; wait $pid || rc=$?
[ $rc = 0 ] && grep -q "rpc: cycle 2/2 done: v0003" e.err && grep -q "rpc: 2 cycle(s) done; stopping" e.err || fail "e: rc $rc $(cat e.err)"
echo "t1402 ok"
