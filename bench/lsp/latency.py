"""Diagnostics latency of a language server on a 1 MB .dlm document: the
time from writing textDocument/didOpen (or a full didChange) to reading its
textDocument/publishDiagnostics, as an editor sees it. Standard library
only. Usage: latency.py RUNS SERVER-COMMAND... ; prints JSON."""
import json
import os
import statistics
import subprocess
import sys
import time

ID = "01HZX3K4M5N6P7Q8R9S0T1V2W3"


def document(size, broken):
    head = f"---\ndlm_id: {ID}\nbase_model: smollm2-135m\ntraining:\n  lora_r: {0 if broken else 8}\n---\n"
    parts, n, i = [head], len(head), 0
    while n < size:
        if i % 2:
            s = (f"::instruction::\n### Q\nWhat does step {i} of the procedure do?\n### A\n"
                 f"Step {i} checks the input, writes the result atomically and records it.\n\n")
        else:
            s = (f"# Part {i}\n\nThe store keeps every adapter version; a run {i} that is interrupted "
                 f"resumes from its last checkpoint with the same bytes. Ünïcode ✓ 😀 too.\n\n")
        if broken and i == 5001:
            s = "::Instruction::\nbad fence\n\n"
        parts.append(s)
        n += len(s.encode())
        i += 1
    return "".join(parts)


class Server:
    def __init__(self, cmd):
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.next = 0

    @staticmethod
    def frame(o):
        # as editors send it: UTF-8, non-ASCII not escaped (JSON.stringify)
        b = json.dumps(o, ensure_ascii=False).encode()
        return b"Content-Length: %d\r\n\r\n" % len(b) + b

    def send(self, o):
        self.send_bytes(self.frame(o))

    def send_bytes(self, b):
        self.p.stdin.write(b)
        self.p.stdin.flush()

    def cpu_ms(self):
        """The server's user + system CPU time so far (load-independent)."""
        f = open(f"/proc/{self.p.pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) * 1000 / os.sysconf("SC_CLK_TCK")

    def recv(self):
        h = b""
        while not h.endswith(b"\r\n\r\n"):
            c = self.p.stdout.read(1)
            if not c:
                raise SystemExit("server closed its output")
            h += c
        n = int(h.split(b"Content-Length:")[1].split(b"\r\n")[0])
        return json.loads(self.p.stdout.read(n))

    def until(self, pred):
        while True:
            m = self.recv()
            if pred(m):
                return m


def main():
    runs, cmd = int(sys.argv[1]), sys.argv[2:]
    s = Server(cmd)
    s.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}})
    s.until(lambda m: m.get("id") == 1)
    s.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
    out = {}
    for label, broken in (("clean", False), ("two errors", True)):
        text = document(1 << 20, broken)
        times, cpus, ndiag = [], [], None
        for r in range(runs + 1):   # the first is a warm-up
            uri = f"file:///tmp/bench-lsp-{label.replace(' ', '-')}-{r}.dlm"
            msg = s.frame({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {
                "uri": uri, "languageId": "dlm", "version": 1, "text": text}}})
            c0 = s.cpu_ms()
            t0 = time.perf_counter()
            s.send_bytes(msg)
            m = s.until(lambda m: m.get("method") == "textDocument/publishDiagnostics" and
                        m["params"]["uri"] == uri)
            dt = time.perf_counter() - t0
            cpus.append(s.cpu_ms() - c0)
            ndiag = len(m["params"]["diagnostics"])
            # (dlm then clears the closed document's diagnostics; the original does not)
            s.send({"jsonrpc": "2.0", "method": "textDocument/didClose", "params": {"textDocument": {"uri": uri}}})
            if r:
                times.append(dt * 1000)
        out[label] = {"bytes": len(text.encode()), "diagnostics": ndiag, "median_ms": statistics.median(times),
                      "min_ms": min(times), "max_ms": max(times), "runs": runs,
                      "server_cpu_median_ms": statistics.median(cpus[1:])}
    s.send({"jsonrpc": "2.0", "id": 2, "method": "shutdown"})
    s.until(lambda m: m.get("id") == 2)
    s.send({"jsonrpc": "2.0", "method": "exit"})
    s.p.wait()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
