"""A client for the original DocumentLanguageModel's probe-injection RPC.

Written from the original's server (dlm.train.rpc in document-language-model
0.10.0, and docs/cookbook/probe-driven-training.md), not from dlm's C code:
neither that package nor dlm-sway 0.1.0 ships a client (sway 0.1.0 has no
sink for it), so this stands in for the "sway-style eval harness" the
original's docstring names.

Wire contract (the original's):
  POST /rpc, Authorization: Bearer <DLM_PROBE_TOKEN>, Content-Length
  {"method": "inject_probe", "params": {"prompt", "reference", "tags"}}
  200 {"accepted": true, "next_cycle_eta_s": int, "queue_depth": int}
  400 malformed, 401 token, 404 path/method, 429 queue full; JSON bodies.

Standard library only (http.client, socket, json).
"""

from __future__ import annotations

import http.client
import json
import socket


def _decode(resp: http.client.HTTPResponse) -> tuple[int, dict | None]:
    raw = resp.read()
    try:
        body = json.loads(raw) if raw else None
    except ValueError:
        body = {"_raw": raw.decode("latin-1")}
    return resp.status, body


class ProbeClient:
    """One keep-alive HTTP/1.1 connection to the endpoint."""

    def __init__(self, host: str, port: int, token: str | None, timeout: float = 30.0) -> None:
        self.host, self.port, self.token, self.timeout = host, port, token, timeout
        self.conn = http.client.HTTPConnection(host, port, timeout=timeout)

    def close(self) -> None:
        self.conn.close()

    def post(self, body: bytes, *, path: str = "/rpc", token: str | None | bool = True,
             headers: dict | None = None, method: str = "POST") -> tuple[int, dict | None]:
        """Send raw body bytes; token True = the client's token, None/False = no header."""
        h = {"Content-Type": "application/json"}
        tok = self.token if token is True else token
        if tok:
            h["Authorization"] = f"Bearer {tok}"
        if headers:
            h.update(headers)
        self.conn.request(method, path, body=body, headers=h)
        return _decode(self.conn.getresponse())

    def inject(self, prompt, reference, tags=None, **kw) -> tuple[int, dict | None]:
        params = {"prompt": prompt, "reference": reference}
        if tags is not None:
            params["tags"] = tags
        return self.post(json.dumps({"method": "inject_probe", "params": params}).encode(), **kw)


def raw_exchange(host: str, port: int, data: bytes, timeout: float = 10.0) -> bytes:
    """Write bytes that are not a well-formed request; return what came
    back before the server closed (b"" when it closed without a reply)."""
    s = socket.create_connection((host, port), timeout=timeout)
    try:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        out = b""
        while True:
            try:
                chunk = s.recv(65536)
            except (ConnectionResetError, socket.timeout):
                break
            if not chunk:
                break
            out += chunk
        return out
    finally:
        s.close()


def raw_post(host: str, port: int, token: str, content_length: str, body: bytes = b"") -> tuple[int, dict | None]:
    """POST /rpc with a Content-Length as given, written byte for byte."""
    got = raw_exchange(host, port, b"POST /rpc HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                       b"Authorization: Bearer " + token.encode() + b"\r\nContent-Length: " +
                       content_length.encode() + b"\r\n\r\n" + body)
    head, _, body = got.partition(b"\r\n\r\n")
    try:
        status = int(head.split(b" ", 2)[1])
    except (IndexError, ValueError):
        return 0, {"_raw": got[:200].decode("latin-1")}
    try:
        return status, json.loads(body)
    except ValueError:
        return status, {"_raw": body[:200].decode("latin-1")}


# The requests both servers must answer alike (status, and for 200 the
# reply's fields): name, kwargs for ProbeClient.post or inject, status.
def battery(token: str) -> list[tuple[str, str, dict, int]]:
    ok = json.dumps({"method": "inject_probe", "params": {"prompt": "P?", "reference": "R."}}).encode()

    def body(obj) -> bytes:
        return json.dumps(obj).encode()

    return [
        ("wrong path", "post", {"body": ok, "path": "/other"}, 404),
        ("wrong path, no token", "post", {"body": ok, "path": "/x", "token": None}, 404),
        ("no token", "post", {"body": ok, "token": None}, 401),
        ("wrong token", "post", {"body": ok, "token": token + "x"}, 401),
        ("token prefix only", "post", {"body": ok, "token": token[:-1]}, 401),
        ("basic auth", "post", {"body": ok, "token": None, "headers": {"Authorization": "Basic " + token}}, 401),
        # the servers answer from the header (sending 64 KiB would race their close)
        ("body over 64 KiB", "raw", {"content_length": "65537"}, 400),
        ("Content-Length 0", "raw", {"content_length": "0"}, 400),
        # not a number: the original says "invalid Content-Length"; dlm's HTTP
        # layer (libmicrohttpd) refuses it first, 400 with its own HTML body
        ("Content-Length nope", "raw-status", {"content_length": "nope"}, 400),
        ("two JSON objects (NDJSON)", "post", {"body": b'{"method": "inject_probe"}\n{"method": "inject_probe"}\n'}, 400),
        ("not JSON", "post", {"body": b"{not json"}, 400),
        ("JSON array", "post", {"body": b"[1, 2]"}, 400),
        ("unknown method", "post", {"body": body({"method": "drop_tables", "params": {}})}, 404),
        ("no method", "post", {"body": body({"params": {"prompt": "a", "reference": "b"}})}, 404),
        ("params not object", "post", {"body": body({"method": "inject_probe", "params": [1]})}, 400),
        ("no params", "post", {"body": body({"method": "inject_probe"})}, 400),
        ("blank prompt", "inject", {"prompt": "  \n", "reference": "r"}, 400),
        ("prompt not str", "post", {"body": body({"method": "inject_probe", "params": {"prompt": 3, "reference": "r"}})}, 400),
        ("no reference", "post", {"body": body({"method": "inject_probe", "params": {"prompt": "p"}})}, 400),
        ("tags not list", "inject", {"prompt": "p", "reference": "r", "tags": "t"}, 400),
        ("tags not strings", "inject", {"prompt": "p", "reference": "r", "tags": ["a", 1]}, 400),
    ]


def run_battery(client: ProbeClient, token: str) -> list[tuple[str, int, dict | None]]:
    out = []
    for name, kind, kw, _want in battery(token):
        if kind.startswith("raw"):
            st, b = raw_post(client.host, client.port, token, **kw)
            if kind == "raw-status":
                b = {"error": "(body not compared)"}
        elif kind == "post":
            st, b = client.post(**kw)
        else:
            st, b = client.inject(**kw)
        out.append((name, st, b))
        # an error reply may close the connection (the original's server
        # speaks HTTP/1.0); reconnect as a client would
        client.conn.close()
        client.conn = http.client.HTTPConnection(client.host, client.port, timeout=client.timeout)
    return out
