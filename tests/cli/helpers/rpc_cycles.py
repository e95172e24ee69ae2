"""Drive `dlm train DOC --listen-rpc 127.0.0.1:0 --max-cycles 2` with the
probe client (probe_client.py, written from the original's server) and
check what the loop did. Used by tests/cli/t1402-listen-rpc.sh and
tests/ref/r1805-listen-rpc-original.sh.

  rpc_cycles.py DLM DOC OUT [--wire] [--extra-args ...]

Cycle 1 gets probes A and B, cycle 2 probe C; a probe sent after the last
cycle drained gets 503 (or finds the port closed). --wire also checks the
error answers (401/400/404/501, a malformed request on a kept-alive
connection, bytes that are not HTTP). Prints one JSON line: the versions'
adapter sha256s, the section ids, the records (the caller compares runs).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from probe_client import ProbeClient, battery, raw_exchange, run_battery  # noqa: E402

TOKEN = "s3cret-token-for-the-test"
port = 0
PROBES = [
    ("What colour is the sky on Zorblax?", "Green, always green.", ["zorblax"]),
    ("Who founded the city of Quenth?", "Queen Ilsa founded Quenth.", []),
    ("What is the capital of Marn?", "Tollo is the capital of Marn.", ["marn", "geo"]),
]


def fail(msg: str) -> None:
    print(f"FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def original_content(prompt: str, reference: str) -> str:
    # dlm.watch.loop._probes_to_sections: "\n".join([...])
    return "\n".join(["### Q !probe", prompt.strip(), "", "### A", reference.strip()])


def original_section_id(content: str) -> str:
    # the original's Section.section_id: sha256(type "\n" content)[:16]
    return hashlib.sha256(("instruction\n" + content).encode()).hexdigest()[:16]


def wait_for(path: str, pattern: str, proc: subprocess.Popen, timeout: float = 300.0) -> re.Match:
    t0 = time.time()
    while time.time() - t0 < timeout:
        with open(path, encoding="utf-8", errors="replace") as f:
            m = re.search(pattern, f.read())
        if m:
            return m
        if proc.poll() is not None:
            with open(path, encoding="utf-8", errors="replace") as f:
                fail(f"dlm exited ({proc.returncode}) before /{pattern}/:\n{f.read()}")
        time.sleep(0.05)
    fail(f"timed out waiting for /{pattern}/")
    raise AssertionError


def sha(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def main() -> None:
    dlm, doc, out = sys.argv[1:4]
    wire = "--wire" in sys.argv
    extra = sys.argv[sys.argv.index("--extra-args") + 1:] if "--extra-args" in sys.argv else []
    os.makedirs(out, exist_ok=True)
    err_path, out_path = os.path.join(out, "err.txt"), os.path.join(out, "out.json")
    env = dict(os.environ, DLM_PROBE_TOKEN=f"  {TOKEN}\n")   # the original strips it
    with open(err_path, "w") as ef, open(out_path, "w") as of:
        proc = subprocess.Popen([dlm, "train", doc, "--listen-rpc", "127.0.0.1:0", "--max-cycles", "2",
                                 "--watch-max-steps", "4", "--watch-debounce-ms", "1500", "--json", *extra],
                                stdout=of, stderr=ef, env=env)
    try:
        drive(proc, err_path, wire)
        rc = proc.wait(timeout=300)
    except (ConnectionError, OSError) as exc:
        fail(f"{exc!r}; dlm's stderr:\n{open(err_path, encoding='utf-8').read()}")
    finally:
        if proc.poll() is None:
            proc.kill()
    check(rc, err_path, out_path)


def drive(proc: subprocess.Popen, err_path: str, wire: bool) -> None:
    global port
    if True:
        m = wait_for(err_path, r"rpc: listening on 127\.0\.0\.1:(\d+) \(queue capacity 1000\)", proc)
        port = int(m.group(1))
        c = ProbeClient("127.0.0.1", port, TOKEN)
        if wire:
            for (name, st, body), (_n, _k, _kw, want) in zip(run_battery(c, TOKEN), battery(TOKEN)):
                if st != want or not isinstance(body, dict) or not isinstance(body.get("error"), str):
                    fail(f"{name}: HTTP {st} {body}, want {want} with an error")
            st, body = c.post(b"", method="GET")
            if st != 501:
                fail(f"GET: HTTP {st} {body}")
            c.close()
            c = ProbeClient("127.0.0.1", port, TOKEN)
            # a malformed body on a kept-alive connection: 400, and the
            # connection still carries the next request
            st, body = c.post(b"\xff\xfe not json")
            if st != 400:
                fail(f"bad bytes: HTTP {st} {body}")
            if c.conn.sock is None:
                fail("the connection closed after a 400 for a bad body")
            sock_before = c.conn.sock
        # cycle 1: A and B within the debounce
        answers = [c.inject(p, r, tags) for p, r, tags in PROBES[:2]]
        for i, (st, body) in enumerate(answers):
            if st != 200 or body.get("accepted") is not True or body.get("queue_depth") != i + 1 or \
                    not isinstance(body.get("next_cycle_eta_s"), int):
                fail(f"inject {i}: HTTP {st} {body}")
        if wire and c.conn.sock is not sock_before:
            fail("the client reconnected: the connection did not survive the 400")
        if wire:
            # bytes that are not HTTP: answered 400 or closed, never a crash
            got = raw_exchange("127.0.0.1", port, b"\x16\x03\x01\x00\xa5garbage\r\n\r\n")
            if got and not re.match(rb"HTTP/1\.[01] 400", got):
                fail(f"garbage got {got[:80]!r}")
            got = raw_exchange("127.0.0.1", port, b"POST /rpc HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n"
                               b"Authorization: Bearer " + TOKEN.encode() + b"\r\n\r\n")
            if not re.match(rb"HTTP/1\.[01] 400", got):
                fail(f"negative Content-Length got {got[:80]!r}")
        c.close()
        wait_for(err_path, r"rpc: cycle 1/2 done: v0002 trained 2 injected probe\(s\)", proc)
        c = ProbeClient("127.0.0.1", port, TOKEN)
        st, body = c.inject(*PROBES[2])
        if st != 200 or body.get("queue_depth") != 1:
            fail(f"inject C: HTTP {st} {body}")
        c.close()
        wait_for(err_path, r"rpc: cycle 2/2: 1 injected probe\(s\)", proc)
        try:
            c = ProbeClient("127.0.0.1", port, TOKEN)
            st, body = c.inject("Too late?", "Yes.")
            if st != 503:
                fail(f"after the last drain: HTTP {st} {body}")
        except (ConnectionError, OSError):
            pass   # the loop had already ended


def check(rc: int, err_path: str, out_path: str) -> None:
    err = open(err_path, encoding="utf-8").read()
    if rc != 0:
        fail(f"dlm exited {rc}:\n{err}")
    for want in ("rpc: waiting for probes for cycle 1 of 2", "rpc: cycle 1/2: 2 injected probe(s), 2 new section(s)",
                 "rpc: cycle 2/2 done: v0003 trained 1 injected probe(s)", "rpc: 2 cycle(s) done; stopping"):
        if want not in err:
            fail(f"stderr lacks '{want}':\n{err}")
    if "not trained" in err:
        fail(f"a probe was lost:\n{err}")
    # --json prints one (indented) object per result: read them in turn
    text, lines, dec, at = open(out_path, encoding="utf-8").read(), [], json.JSONDecoder(), 0
    while text[at:].strip():
        at += len(text[at:]) - len(text[at:].lstrip())
        obj, at = dec.raw_decode(text, at)
        lines.append(obj)
    if len(lines) != 4 or lines[0].get("rpc", {}).get("port") != port:
        fail(f"stdout: {lines}")
    runs = lines[1:]
    if [r.get("version") for r in runs] != [1, 2, 3] or [r.get("cycle") for r in runs] != [None, 1, 2] or \
            [r.get("injected_probes") for r in runs] != [None, 2, 1] or runs[1].get("max_cycles") != 2:
        fail(f"run results: {runs}")
    vdir = [r["adapter_dir"] for r in runs]
    store = os.path.dirname(os.path.dirname(os.path.dirname(vdir[0])))
    shas = [sha(os.path.join(v, "adapter_model.safetensors")) for v in vdir]
    if len(set(shas)) != 3:
        fail(f"a cycle left the adapter unchanged: {shas}")
    manifest = json.load(open(os.path.join(store, "manifest.json")))
    want_ids = []
    for k, group in ((1, PROBES[:2]), (2, PROBES[2:])):
        tr = json.load(open(os.path.join(vdir[k], "training_run.json")))
        rec = tr["injected_probes"]
        # the probes trained: new sections, and rows beside the document's
        if tr.get("new_sections") != len(group) or runs[k]["rows"] != runs[0]["rows"] + len(group):
            fail(f"v{k + 1}: new_sections {tr.get('new_sections')}, rows {runs[k]['rows']} (document {runs[0]['rows']})")
        if [(r["prompt"], r["reference"], r["tags"]) for r in rec] != [(p, r, t) for p, r, t in group]:
            fail(f"v{k + 1} injected_probes: {rec}")
        for r, (p, a, t) in zip(rec, group):
            sid = original_section_id(original_content(p, a))
            name = t[0] if t else p[:32].strip().replace(" ", "-")
            if r["section_id"] != sid or r["harvest_source"] != f"rpc-inject/{name}" or r["source_addr"] != "127.0.0.1":
                fail(f"record {r} (want section {sid}, rpc-inject/{name})")
            # content_hashes are the last run's sections (the original's rule)
            if k == 2 and sid not in manifest.get("content_hashes", {}):
                fail(f"section {sid} of '{p}' is not in the manifest's content_hashes")
            want_ids.append(sid)
    if "injected_probes" in json.load(open(os.path.join(vdir[0], "training_run.json"))):
        fail("the first run records injected probes")
    audit = [json.loads(x) for x in open(os.path.join(store, "logs", "rpc-injected.jsonl"))]
    ids = [a["run_id"] for a in audit]
    if [(a["prompt"], a["adapter_version"]) for a in audit] != [(PROBES[0][0], 2), (PROBES[1][0], 2), (PROBES[2][0], 3)] \
            or not all(isinstance(i, int) for i in ids) or ids[0] != ids[1] or ids[2] <= ids[0]:
        fail(f"audit log: {audit}")
    print(json.dumps({"adapter_sha256": shas, "section_ids": want_ids, "port": port}))


if __name__ == "__main__":
    main()
