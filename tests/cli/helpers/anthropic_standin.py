#!/usr/bin/env python3
"""A stand-in for Anthropic's Messages API, written from its public
documentation (docs.anthropic.com, "Messages" and "Errors"), for the synth
tests. POST /v1/messages checks what the API checks before answering:
the key (x-api-key, or Authorization: Bearer as SDK 2.x sends it) and the
anthropic-version header, a JSON body with a string
model, an integer max_tokens >= 1, messages as a list of {role:
user|assistant, content}, an optional string system, and no field the API
does not take (it answers 400 invalid_request_error to unknown ones), no
temperature / top_p / top_k under anthropic-version 2026-10-21 (which removed
them) and no temperature for a model named claude-notemp-* (the newest
models refuse it on 2023-06-01 too: "`temperature` is deprecated for this
model."). It answers

  {"id": "msg_...", "type": "message", "role": "assistant", "model": ...,
   "content": [{"type": "text", "text": REPLY}], "stop_reason": "end_turn",
   "stop_sequence": null, "usage": {"input_tokens": N, "output_tokens": M}}

and errors as {"type": "error", "error": {"type": ..., "message": ...}}.
Every request (path, headers that matter, body) is appended to LOG as one
JSON line. SCRIPT names one action per line; each request takes (and
removes) the first line, "ok" when it is empty (the test rewrites it
between runs):
  ok           the reply above (REPLY_FILE's text; content split into two
               text blocks around a tool_use block when the text holds
               "\\n--SPLIT--\\n")
  401          authentication_error
  429          rate_limit_error with retry-after-ms: 20
  429-noretry  rate_limit_error with x-should-retry: false
  429-long     rate_limit_error with retry-after: 3600
  529          overloaded_error
  malformed    a 200 whose body is not JSON
  big          a 200 body of 5 MiB

    anthropic_standin.py LOG REPLY_FILE SCRIPT   (prints the port, then serves)"""
import http.server, json, sys

log, reply_file, script = sys.argv[1], sys.argv[2], sys.argv[3]
count = 0


def next_action():
    lines = [l.strip() for l in open(script) if l.strip()]
    if not lines:
        return "ok"
    with open(script, "w") as f:
        f.write("".join(l + "\n" for l in lines[1:]))
    return lines[0]
ALLOWED = {"model", "max_tokens", "messages", "system", "temperature", "top_p", "top_k", "stop_sequences",
           "metadata", "stream", "tools", "tool_choice", "thinking", "service_tier"}


class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def send(self, code, obj=None, raw=None, headers=()):
        body = raw if raw is not None else json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("request-id", "req_standin_%d" % count)
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def err(self, code, kind, msg, headers=()):
        self.send(code, {"type": "error", "error": {"type": kind, "message": msg}}, headers=headers)

    def do_POST(self):
        global count
        n = int(self.headers.get("Content-Length", 0))
        raw = self.rfile.read(n)
        try:
            req = json.loads(raw)
        except ValueError:
            req = None
        with open(log, "a") as f:
            f.write(json.dumps({"path": self.path, "x-api-key": self.headers.get("x-api-key"),
                                "anthropic-version": self.headers.get("anthropic-version"),
                                "content-type": self.headers.get("Content-Type"),
                                "authorization": self.headers.get("Authorization"), "body": req}) + "\n")
        if self.path != "/v1/messages":
            return self.err(404, "not_found_error", "Not found")
        action = next_action()
        count += 1
        auth = self.headers.get("Authorization") or ""
        if not self.headers.get("x-api-key") and not auth.startswith("Bearer "):
            return self.err(401, "authentication_error", "x-api-key header is required")
        if not self.headers.get("anthropic-version"):
            return self.err(400, "invalid_request_error", "anthropic-version: header is required")
        if not isinstance(req, dict):
            return self.err(400, "invalid_request_error", "the body must be a JSON object")
        extra = sorted(set(req) - ALLOWED)
        if extra:
            return self.err(400, "invalid_request_error", "%s: Extra inputs are not permitted" % extra[0])
        if not isinstance(req.get("model"), str) or not isinstance(req.get("max_tokens"), int) or req["max_tokens"] < 1:
            return self.err(400, "invalid_request_error", "model (string) and max_tokens (integer >= 1) are required")
        msgs = req.get("messages")
        if not isinstance(msgs, list) or not msgs or any(
                not isinstance(m, dict) or m.get("role") not in ("user", "assistant") or "content" not in m for m in msgs):
            return self.err(400, "invalid_request_error", "messages: a list of {role, content}")
        if "system" in req and not isinstance(req["system"], (str, list)):
            return self.err(400, "invalid_request_error", "system: a string")
        sampling = [k for k in ("temperature", "top_p", "top_k") if k in req]
        if sampling and self.headers.get("anthropic-version") == "2026-10-21":
            return self.err(400, "invalid_request_error", "%s: Extra inputs are not permitted" % sampling[0])
        if "temperature" in req and req["model"].startswith("claude-notemp"):
            return self.err(400, "invalid_request_error", "`temperature` is deprecated for this model.")
        if action == "401":
            return self.err(401, "authentication_error", "invalid x-api-key")
        if action == "429":
            return self.err(429, "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit",
                            headers=[("retry-after-ms", "20"), ("retry-after", "1")])
        if action == "429-long":
            return self.err(429, "rate_limit_error", "Rate limited", headers=[("retry-after", "3600")])
        if action == "429-noretry":
            return self.err(429, "rate_limit_error", "Rate limited", headers=[("x-should-retry", "false")])
        if action == "529":
            return self.err(529, "overloaded_error", "Overloaded")
        if action == "malformed":
            return self.send(200, raw=b'{"id": "msg_1", "content": [{"type": "text", "text": "cut')
        if action == "big":
            return self.send(200, raw=b'{"content": [{"type": "text", "text": "' + b"x" * (5 << 20) + b'"}]}')
        text = open(reply_file).read()
        parts = text.split("\n--SPLIT--\n")
        content = [{"type": "text", "text": parts[0]}]
        for p in parts[1:]:
            content += [{"type": "tool_use", "id": "toolu_1", "name": "noop", "input": {}}, {"type": "text", "text": p}]
        self.send(200, {"id": "msg_standin_%d" % count, "type": "message", "role": "assistant", "model": req["model"],
                        "content": content, "stop_reason": "end_turn", "stop_sequence": None,
                        "usage": {"input_tokens": 10, "output_tokens": 20}})

    def log_message(self, *a):
        pass


s = http.server.HTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
