#!/usr/bin/env bash
# dlm lsp: the JSON-RPC framing and dispatch answer every malformed input
# with the protocol's error code and keep serving (LSP 3.17 / JSON-RPC 2.0:
# -32700 parse error, -32600 invalid request, -32601 method not found,
# -32602 invalid params, -32002 not initialized, -32800 cancelled), and
# exit's status follows the protocol (0 after shutdown, 1 without).
# A raw client (python3's standard library only) writes the bytes itself.
set -euo pipefail
: "${DLM:?DLM must point at the dlm binary}"
export DLM_HOME=$(mktemp -d)
trap 'rm -rf "$DLM_HOME"' EXIT
python3 - "$DLM" <<'PY'
import json, os, subprocess, sys
dlm = sys.argv[1]

def fail(msg):
    print("FAIL:", msg, file=sys.stderr); sys.exit(1)

class Client:
    def __init__(self, cmd=None):
        self.p = subprocess.Popen(cmd or [dlm, "lsp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    def raw(self, b):
        os.write(self.p.stdin.fileno(), b)
    def frame(self, body):
        b = body if isinstance(body, bytes) else json.dumps(body).encode()
        return b"Content-Length: %d\r\n\r\n" % len(b) + b
    def send(self, body):
        self.raw(self.frame(body))
    def recv(self):
        h = b""
        while not h.endswith(b"\r\n\r\n"):
            c = self.p.stdout.read(1)
            if not c: fail("server closed its output; read so far %r" % h)
            h += c
        n = int(h.split(b"Content-Length:")[1].split(b"\r\n")[0])
        return json.loads(self.p.stdout.read(n))
    def expect_error(self, code, id_, what):
        m = self.recv()
        if m.get("id") != id_ or m.get("error", {}).get("code") != code:
            fail("%s: expected error %d for id %r, got %r" % (what, code, id_, m))

c = Client()
c.send({"jsonrpc": "2.0", "id": 1, "method": "textDocument/hover", "params": {}})
c.expect_error(-32002, 1, "request before initialize")
c.send({"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": {"capabilities": {}}})
m = c.recv()
if m.get("id") != 2 or "capabilities" not in m.get("result", {}): fail("initialize: %r" % m)
c.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
c.send(b"{not json")
c.expect_error(-32700, None, "invalid JSON")
c.send(b"[1, 2]")
c.expect_error(-32600, None, "a batch")
c.send({"jsonrpc": "1.0", "id": 3, "method": "shutdown"})
c.expect_error(-32600, 3, "wrong jsonrpc version")
c.send({"jsonrpc": "2.0", "id": 4, "method": "no/such"})
c.expect_error(-32601, 4, "unknown method")
c.send({"jsonrpc": "2.0", "method": "no/such/notification"})   # dropped silently
c.send({"jsonrpc": "2.0", "id": 5, "method": "textDocument/hover", "params": "x"})
c.expect_error(-32602, 5, "params not an object")
c.send({"jsonrpc": "2.0", "id": 6, "method": "textDocument/hover", "params": {"position": {}}})
c.expect_error(-32602, 6, "no textDocument")
c.send({"jsonrpc": "2.0", "id": 7, "method": "workspace/executeCommand", "params": {"command": "nope"}})
c.expect_error(-32602, 7, "unknown command")
# broken headers: reported, skipped, and the next message still served
c.raw(b"Foo: bar\r\n\r\n")
c.expect_error(-32600, None, "no Content-Length")
c.raw(b"Content-Length: abc\r\n\r\n")
c.expect_error(-32600, None, "Content-Length not a number")
c.raw(b"Content-Length: 99999999999999999999999\r\n\r\n")
c.expect_error(-32600, None, "Content-Length overflow")
# a message split across writes, byte by byte for its header
whole = c.frame({"jsonrpc": "2.0", "id": 8, "method": "dlm/listTemplates", "params": []})
for i in range(0, 30):
    c.raw(whole[i:i + 1])
c.raw(whole[30:])
m = c.recv()
if m.get("id") != 8 or not isinstance(m.get("result"), list) or not m["result"]: fail("split message: %r" % m)
# a request cancelled before the server reached it: -32800
uri = "file:///nonexistent/a.dlm"
c.raw(c.frame({"jsonrpc": "2.0", "id": 9, "method": "textDocument/hover",
               "params": {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 0}}}) +
      c.frame({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 9}}))
c.expect_error(-32800, 9, "cancelled request")
# a document that is not open: null, not an error
c.send({"jsonrpc": "2.0", "id": 10, "method": "textDocument/completion",
        "params": {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 0}}})
m = c.recv()
if m.get("id") != 10 or m.get("result", 1) is not None: fail("closed document: %r" % m)
# a position that is not a position
c.send({"jsonrpc": "2.0", "method": "textDocument/didOpen",
        "params": {"textDocument": {"uri": uri, "languageId": "dlm", "version": 1, "text": "---\n"}}})
m = c.recv()
if m.get("method") != "textDocument/publishDiagnostics": fail("didOpen: %r" % m)
c.send({"jsonrpc": "2.0", "id": 11, "method": "textDocument/hover",
        "params": {"textDocument": {"uri": uri}, "position": {"line": -1, "character": "x"}}})
c.expect_error(-32602, 11, "bad position")
# a document over the CLI's 64 MB cap: refused with a diagnostic, as dlm show refuses the file
c.send({"jsonrpc": "2.0", "method": "textDocument/didOpen",
        "params": {"textDocument": {"uri": uri + "big", "languageId": "dlm", "version": 1,
                                    "text": "a" * (64 * 1024 * 1024 + 1)}}})
m = c.recv()
d = m.get("params", {}).get("diagnostics", [])
if len(d) != 1 or "67108865 bytes is larger than the 67108864-byte limit" not in d[0]["message"]:
    fail("oversized document: %r" % m)
c.send({"jsonrpc": "2.0", "id": 12, "method": "shutdown"})
m = c.recv()
if m.get("id") != 12 or "result" not in m or m["result"] is not None: fail("shutdown: %r" % m)
c.send({"jsonrpc": "2.0", "id": 13, "method": "textDocument/hover", "params": {}})
c.expect_error(-32600, 13, "request after shutdown")
c.send({"jsonrpc": "2.0", "method": "exit"})
if c.p.wait() != 0: fail("exit after shutdown: status %d" % c.p.returncode)

# exit without shutdown: status 1; end of input without exit: status 1
c = Client()
c.send({"jsonrpc": "2.0", "method": "exit"})
if c.p.wait() != 1: fail("exit without shutdown: status %d" % c.p.returncode)
c = Client()
c.p.stdin.close()
if c.p.wait() != 1: fail("end of input: status %d" % c.p.returncode)
# a body over the size limit is answered at its header, and its bytes are
# dropped as they come (the next 10^9 bytes belong to it)
c = Client()
c.raw(b"Content-Length: 1000000000\r\n\r\n" + b"x" * 100000)
c.expect_error(-32600, None, "message over the size limit")
c.p.stdin.close()
if c.p.wait() != 1: fail("oversized: status %d" % c.p.returncode)
# linked as dlm-lsp (what the original's VS Code extension starts, with no
# arguments): the same server
link = os.path.join(os.environ["DLM_HOME"], "dlm-lsp")
os.symlink(os.path.abspath(dlm), link)
c = Client([link])
c.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}})
m = c.recv()
if m.get("result", {}).get("serverInfo", {}).get("name") != "dlm": fail("dlm-lsp link: %r" % m)
c.send({"jsonrpc": "2.0", "id": 2, "method": "shutdown"})
c.recv()
c.send({"jsonrpc": "2.0", "method": "exit"})
if c.p.wait() != 0: fail("dlm-lsp link: exit status %d" % c.p.returncode)
print("t1201 ok")
PY
