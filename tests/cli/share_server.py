#!/usr/bin/python3
"""A loopback HTTPS server for the push/pull tests (Python's http.server +
ssl, nothing of dlm's): POST stores the body under the path when the
Authorization header is the expected one (401 otherwise, 415 unless the
body is application/octet-stream), GET returns it (404 when absent).

  share_server.py CERT KEY AUTH PORTFILE
"""
import http.server, ssl, sys, threading

cert, key, auth, portfile = sys.argv[1:5]
store = {}


class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def do_POST(self):
        if self.headers.get("Authorization") != auth:
            self.send_response(401); self.end_headers(); return
        if self.headers.get("Content-Type") != "application/octet-stream":
            self.send_response(415); self.end_headers(); return
        n = int(self.headers["Content-Length"])
        store[self.path] = self.rfile.read(n)
        self.send_response(201); self.send_header("Content-Length", "0"); self.end_headers()

    def do_GET(self):
        if self.path == "/quit":
            self.send_response(200); self.end_headers()
            threading.Thread(target=srv.shutdown).start(); return
        b = store.get(self.path)
        if b is None:
            self.send_response(404); self.send_header("Content-Length", "0"); self.end_headers(); return
        self.send_response(200); self.send_header("Content-Length", str(len(b))); self.end_headers()
        self.wfile.write(b)


srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
open(portfile, "w").write(str(srv.server_address[1]))
srv.serve_forever()
