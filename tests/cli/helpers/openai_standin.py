#!/usr/bin/env python3
"""A stand-in OpenAI-compatible chat-completions server for the synth tests:
POST .../chat/completions answers with the next reply file's text (cycling
through the files given), and appends each request's JSON to LOG; GET
.../v1/models lists one model, "standin-model" (what vLLM's server answers,
and the original's vllm-server teacher asks).

    openai_standin.py LOG REPLY_FILE... (prints the port, then serves)"""
import http.server, json, sys

log, replies = sys.argv[1], [open(p).read() for p in sys.argv[2:]]
count = 0

class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if not self.path.endswith("/v1/models"):
            self.send_response(404); self.end_headers(); return
        with open(log, "a") as f:
            f.write(json.dumps({"path": self.path, "auth": self.headers.get("Authorization"), "body": None}) + "\n")
        body = json.dumps({"object": "list", "data": [{"id": "standin-model", "object": "model"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        global count
        n = int(self.headers.get("Content-Length", 0))
        req = json.loads(self.rfile.read(n))
        if not self.path.endswith("/chat/completions"):
            self.send_response(404); self.end_headers(); return
        with open(log, "a") as f:
            f.write(json.dumps({"path": self.path, "auth": self.headers.get("Authorization"), "body": req}) + "\n")
        text = replies[count % len(replies)]
        count += 1
        body = json.dumps({"id": "chatcmpl-%d" % count, "object": "chat.completion", "model": req.get("model"),
                           "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                        "finish_reason": "stop"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass

s = http.server.HTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
