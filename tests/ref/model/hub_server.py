#!/usr/bin/python3
"""A local stand-in for the Hugging Face hub, for dlm's downloader tests.
stdlib only; listens on 127.0.0.1 (random free port written to --port-file).

Serves fixture folders in the hub's URL layout
    HEAD/GET /{org}/{name}/resolve/{rev}/{path}
with the headers huggingface_hub reads (docs/reference/formats.md §1.3):
  - X-Repo-Commit (a fixed 40-hex sha per repo), ETag;
  - "LFS" files (*.safetensors, *.gguf): ETag/X-Linked-Etag = sha256,
    X-Linked-Size, and a 302 with an *absolute* Location to /cdn/<sha256>
    on this server (the CDN), for HEAD and GET;
  - small files: ETag = git blob sha1, served directly;
  - config.json requested by branch name: a *relative* 307 to the
    same path at the commit sha (as for a renamed repo);
  - Range: bytes=N- → 206 with Content-Range;
  - missing file: 404 X-Error-Code: EntryNotFound (with X-Repo-Commit);
    unknown repo: 401 RepoNotFound; unknown revision: 404 RevisionNotFound.

Per-repo options: --repo ORG/NAME=DIR[,gated][,corrupt][,cut=N][,norange]
  gated    needs "authorization: Bearer hf_dlm_test" (401 GatedRepo without
           a token, 403 with a wrong one)
  corrupt  LFS bytes served with one byte flipped (sha256 mismatch)
  cut=N    the first LFS GET sends the full Content-Length but closes the
           connection after N bytes (an interrupted transfer), once
  norange  ignore Range headers (answer 200 with the whole file)
Every request is appended to --log as "METHOD path range=<Range or ->".
"""
import argparse
import hashlib
import http.server
import os
import socketserver
import sys
import threading
from urllib.parse import unquote, urlsplit

TOKEN = "hf_dlm_test"
REVS = ("main",)


class Repo:
    def __init__(self, spec):
        name, _, rest = spec.partition("=")
        parts = rest.split(",")
        self.name, self.dir = name, parts[0]
        self.gated = "gated" in parts
        self.corrupt = "corrupt" in parts
        self.norange = "norange" in parts
        self.cut = None
        for p in parts[1:]:
            if p.startswith("cut="):
                self.cut = int(p[4:])
        self.commit = hashlib.sha1(name.encode()).hexdigest()
        self.lock = threading.Lock()


def is_lfs(path):
    return path.endswith(".safetensors") or path.endswith(".gguf")


def git_sha1(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    repos = {}
    blobs = {}          # sha256 -> (repo, path)
    log_path = None

    def log_message(self, fmt, *args):
        pass

    def record(self):
        if self.log_path:
            with open(self.log_path, "a") as f:
                f.write("%s %s range=%s auth=%s\n" % (self.command, self.path, self.headers.get("Range", "-"),
                                                     "yes" if self.headers.get("authorization") else "no"))

    def reply(self, code, headers=None, body=b""):
        self.send_response(code)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        if "Content-Length" not in (headers or {}):
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD" and body:
            self.wfile.write(body)

    def do_HEAD(self):
        self.handle_any()

    def do_GET(self):
        self.handle_any()

    def handle_any(self):
        self.record()
        path = unquote(urlsplit(self.path).path)
        if path.startswith("/cdn/"):
            return self.serve_cdn(path[5:])
        parts = path.lstrip("/").split("/")
        if len(parts) < 5 or parts[2] != "resolve":
            return self.reply(404, {"X-Error-Code": "EntryNotFound"})
        name, rev, fpath = parts[0] + "/" + parts[1], parts[3], "/".join(parts[4:])
        repo = self.repos.get(name)
        if repo is None:
            return self.reply(401, {"X-Error-Code": "RepoNotFound", "X-Error-Message": "Repository not found"})
        if repo.gated:
            auth = self.headers.get("authorization", "")
            if not auth:
                return self.reply(401, {"X-Error-Code": "GatedRepo", "X-Error-Message": "gated"})
            if auth != "Bearer " + TOKEN:
                return self.reply(403, {"X-Error-Code": "GatedRepo", "X-Error-Message": "gated"})
        if rev not in REVS and rev != repo.commit:
            return self.reply(404, {"X-Error-Code": "RevisionNotFound"})
        full = os.path.join(repo.dir, fpath)
        if ".." in fpath.split("/") or not os.path.isfile(full):
            return self.reply(404, {"X-Error-Code": "EntryNotFound", "X-Repo-Commit": repo.commit})
        with open(full, "rb") as f:
            data = f.read()
        if fpath == "config.json" and rev != repo.commit:
            loc = "/%s/resolve/%s/%s" % (name, repo.commit, fpath)
            return self.reply(307, {"Location": loc, "X-Repo-Commit": repo.commit})
        if is_lfs(fpath):
            sha = hashlib.sha256(data).hexdigest()
            self.blobs[sha] = (repo, fpath)
            host = "http://127.0.0.1:%d" % self.server.server_address[1]
            return self.reply(302, {"Location": "%s/cdn/%s" % (host, sha), "X-Repo-Commit": repo.commit,
                                    "X-Linked-Etag": '"%s"' % sha, "X-Linked-Size": str(len(data)),
                                    "ETag": 'W/"%s"' % git_sha1(b"pointer " + sha.encode())})
        self.serve_bytes(repo, data, {"X-Repo-Commit": repo.commit, "ETag": '"%s"' % git_sha1(data)}, None)

    def serve_cdn(self, sha):
        if sha not in self.blobs:
            return self.reply(404)
        repo, fpath = self.blobs[sha]
        with open(os.path.join(repo.dir, fpath), "rb") as f:
            data = f.read()
        if repo.corrupt:
            data = bytearray(data)
            data[len(data) // 2] ^= 0xFF
            data = bytes(data)
        self.serve_bytes(repo, data, {"ETag": '"%s"' % sha}, repo)

    def serve_bytes(self, repo, data, headers, lfs_repo):
        start = 0
        rng = self.headers.get("Range")
        code = 200
        if rng and not repo.norange and rng.startswith("bytes=") and rng.endswith("-"):
            start = int(rng[6:-1])
            if start >= len(data):
                return self.reply(416, {"Content-Range": "bytes */%d" % len(data)})
            code = 206
            headers["Content-Range"] = "bytes %d-%d/%d" % (start, len(data) - 1, len(data))
        body = data[start:]
        headers["Content-Length"] = str(len(body))
        headers["Accept-Ranges"] = "bytes"
        cut = None
        if lfs_repo is not None and self.command == "GET":
            with lfs_repo.lock:
                if lfs_repo.cut is not None:
                    cut, lfs_repo.cut = lfs_repo.cut, None
        self.send_response(code)
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        if self.command == "HEAD":
            return
        if cut is not None:
            self.wfile.write(body[:cut])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(body)


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", action="append", default=[])
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--log")
    a = ap.parse_args()
    for spec in a.repo:
        r = Repo(spec)
        Handler.repos[r.name] = r
    Handler.log_path = a.log
    srv = Server(("127.0.0.1", 0), Handler)
    tmp = a.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(tmp, a.port_file)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
