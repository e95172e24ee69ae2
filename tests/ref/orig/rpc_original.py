"""r1805: dlm's --listen-rpc against the original's own server and cycle code
(document-language-model 0.10.0: dlm.train.rpc.ProbeRpcServer,
dlm.train.inject.InjectedProbeQueue, dlm.watch.loop._probes_to_sections).

  rpc_original.py DLM DOC OUT

1. The client's request battery (tests/cli/helpers/probe_client.py) goes to
   the original's server and to dlm's: the same status for every request,
   an {"error": str} body for every error, and for the accepted probes the
   same reply fields and queue depths.
2. The queue bound: 1000 probes fill both queues; the next gets 429 with
   queue_depth 1000 from both.
3. The probes dlm's cycle trained carry the section ids and harvest_source
   that the original's _probes_to_sections gives the same probes (stripped
   text, untagged prompts named by their first 32 characters, Unicode).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "cli", "helpers"))
from probe_client import ProbeClient, run_battery  # noqa: E402

from dlm.train.inject import InjectedProbe, InjectedProbeQueue  # noqa: E402
from dlm.train.rpc import ProbeRpcServer  # noqa: E402
from dlm.watch.loop import _probes_to_sections  # noqa: E402

TOKEN = "r1805-token"
PROBES = [
    ("  What does DGEMM compute?\n", "\tA double-precision general matrix multiplication. ", ["nightly-ci", "x"]),
    ("Ünïcödé prompt that is longer than thirty-two characters, surely?", "Réponse.", []),
    ("short one", "answer\u2003", None),
]


def fail(msg: str) -> None:
    print(f"FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def exchange(host: str, port: int) -> dict:
    c = ProbeClient(host, port, TOKEN)
    out = {"battery": [(n, st, sorted(b) if isinstance(b, dict) else b, isinstance((b or {}).get("error"), str))
                       for n, st, b in run_battery(c, TOKEN)]}
    c = ProbeClient(host, port, TOKEN)
    out["accepted"] = []
    for p, r, t in PROBES:
        st, b = c.inject(p, r, t)
        out["accepted"].append((st, b.get("accepted"), b.get("queue_depth"), type(b.get("next_cycle_eta_s")).__name__,
                                sorted(b)))
    # fill to the bound (1000), then one more
    for i in range(1000 - len(PROBES)):
        st, b = c.inject(f"filler {i}?", "filler.")
        if st != 200:
            fail(f"filler {i}: HTTP {st} {b} from port {port}")
    st, b = c.inject("one too many?", "no.")
    out["full"] = (st, b.get("queue_depth"), isinstance(b.get("error"), str))
    c.close()
    return out


def main() -> None:
    dlm, doc, out = sys.argv[1:4]
    os.makedirs(out, exist_ok=True)
    # --- the original's server ---
    q = InjectedProbeQueue()
    srv = ProbeRpcServer(host="127.0.0.1", port=0, token=TOKEN, queue=q)
    srv.start()
    try:
        orig = exchange(*srv.address)
        drained = q.drain()
    finally:
        srv.stop()
    if [(p.prompt, p.reference) for p in drained[:3]] != [(p.strip(), r.strip()) for p, r, _ in PROBES]:
        fail(f"the original queued {drained[:3]}")
    # --- dlm's ---
    err_path = os.path.join(out, "err.txt")
    with open(err_path, "w") as ef, open(os.path.join(out, "out.txt"), "w") as of:
        proc = subprocess.Popen([dlm, "train", doc, "--listen-rpc", "127.0.0.1:0", "--max-cycles", "1",
                                 "--watch-max-steps", "1", "--watch-debounce-ms", "3000"],
                                stdout=of, stderr=ef, env=dict(os.environ, DLM_PROBE_TOKEN=TOKEN))
    try:
        port = None
        for _ in range(2400):
            m = re.search(r"rpc: listening on 127\.0\.0\.1:(\d+)", open(err_path).read())
            if m:
                port = int(m.group(1))
                break
            if proc.poll() is not None:
                break
            time.sleep(0.05)
        if port is None:
            fail(f"dlm did not listen:\n{open(err_path).read()}")
        t0 = time.time()
        mine = exchange("127.0.0.1", port)
        t_inject = time.time() - t0
        rc = proc.wait(timeout=600)
        t_cycle = time.time() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
    err = open(err_path).read()
    if rc != 0:
        fail(f"dlm exited {rc}:\n{err}")
    for key in ("battery", "accepted", "full"):
        if orig[key] != mine[key]:
            a, b = orig[key], mine[key]
            diff = [(x, y) for x, y in zip(a, b) if x != y] if isinstance(a, list) else (a, b)
            fail(f"{key} differs (original, dlm): {diff}")
    if orig["full"][0] != 429 or orig["full"][1] != 1000:
        fail(f"the original's bound: {orig['full']}")
    # --- the sections the cycle trained ---
    want = _probes_to_sections([InjectedProbe(prompt=p.strip(), reference=r.strip(), tags=tuple(t or ()))
                                for p, r, t in PROBES])
    store = os.path.join(os.environ["DLM_HOME"], "store")
    [sid] = os.listdir(store)
    rec = json.load(open(os.path.join(store, sid, "adapter", "versions", "v0002", "training_run.json")))
    got = rec["injected_probes"]
    if len(got) != 1000:
        fail(f"v0002 trained {len(got)} probes, want 1000")
    for g, w in zip(got, want):
        if (g["section_id"], g["harvest_source"]) != (w.section_id, w.harvest_source):
            fail(f"section of {g['prompt']!r}: dlm ({g['section_id']}, {g['harvest_source']}), "
                 f"the original ({w.section_id}, {w.harvest_source})")
    print(f"r1805: {len(orig['battery'])} requests answered alike; 1000 probes + 429 alike; "
          f"dlm took the 1001 requests in {t_inject:.1f}s and trained the 1000-probe cycle by {t_cycle:.1f}s")


if __name__ == "__main__":
    main()
