#!/usr/bin/env python3
"""A stand-in for the Hugging Face Hub's repository API, for the push/pull
tests: stateful, in memory, stdlib only, written from the Hub's public API
documentation (huggingface.co/docs/hub/api, the git-lfs batch API spec) and
what huggingface_hub 2.4 sends (tests/ref/r0809 runs that client against
it, so the stand-in answers as a client written for the real Hub expects).

  POST /api/repos/create        {"name", "organization"?, "visibility"? (or the
                                older "private"), "type"?}
                                200 {"url"}; 409 when it exists; 403 outside
                                the token's namespaces
  GET  /api/models/{repo}[/revision/{rev}]   {"id", "sha", "private", "siblings"}
  POST /api/validate-yaml       {"content", "repoType"} → {"errors", "warnings"}
  POST /api/models/{repo}/preupload/{rev}    {"files": [{path, sample, size}]}
                                → uploadMode "lfs" for files over 10 MB or
                                  whose sample is binary (a NUL byte or not
                                  UTF-8), else "regular"
  POST /{repo}.git/info/lfs/objects/batch    git-lfs batch API (upload, sha256):
                                "basic" transfer: an upload action with a
                                presigned href (/s3/ORG/NAME/<oid>?X-Amz-Signature=..:
                                a request that also carries Authorization is
                                refused, as S3 refuses two auth mechanisms)
                                and a verify action; no actions when stored
  PUT  /s3/ORG/NAME/<oid>?...   the bytes (sha256 checked)
  multipart (with --multipart-over N: objects over N bytes when the client
                                offers "multipart"): the upload header has
                                chunk_size (--chunk) and one presigned URL per
                                part under "1", "2", ...; PUT
                                /s3/ORG/NAME/<oid>/part/<i> answers an ETag;
                                POST the href (/ORG/NAME.git/info/lfs/complete/
                                <oid>) {"oid", "parts": [{"partNumber", "etag"}]}
                                assembles them (every part, in order, the
                                ETags they got, the sha256)
  POST /{repo}.git/info/lfs/objects/verify   {"oid", "size"}
  POST /api/models/{repo}/commit/{rev}       application/x-ndjson: header,
                                file (base64), lfsFile (a stored oid),
                                deletedFile (404 when absent) → {"commitOid",
                                "commitUrl"}; the commit replaces main
  HEAD/GET /{repo}/resolve/{rev}/{path}      X-Repo-Commit; LFS files: ETag
                                and X-Linked-Etag = sha256, X-Linked-Size and
                                a 302 to http://localhost:PORT/cdn/<sha256>
                                (absolute, another host name, like the
                                Hub's CDN); others: 200, ETag = git blob sha1;
                                missing file 404 X-Error-Code EntryNotFound,
                                missing (or private, without a token)
                                repository 401 RepoNotFound
Tokens: "hf_write" may write the namespaces "standin-user" and "org";
"hf_read" reads everything, writes nothing (403); any other token 401;
writes without a token 401. Every request is appended to LOG as a JSON
line {"method", "path", "auth", "ctype", "body"} (the body parsed when JSON
or NDJSON, base64 contents elided to their length).

    hub_share_standin.py LOG [--private ORG/NAME]... [--multipart-over N --chunk N]
    (prints the port, then serves)"""
import base64, hashlib, http.server, json, sys
from urllib.parse import urlsplit, unquote

LOG = sys.argv[1]
PRIVATE = {sys.argv[i + 1] for i, a in enumerate(sys.argv) if a == "--private"}
MP_OVER = next((int(sys.argv[i + 1]) for i, a in enumerate(sys.argv) if a == "--multipart-over"), None)
CHUNK = next((int(sys.argv[i + 1]) for i, a in enumerate(sys.argv) if a == "--chunk"), 5 << 20)
mparts = {}         # (repo, oid) -> {part number: bytes}
WRITE = {"hf_write": {"standin-user", "org"}}
READ = {"hf_write", "hf_read"}
repos = {}          # id -> {"files": {path: bytes}, "lfs": {path: oid}, "sha": str, "private": bool}
lfs = {}            # oid -> bytes


def git_sha1(b):
    return hashlib.sha1(b"blob %d\0" % len(b) + b).hexdigest()


def is_binary(sample):
    if b"\0" in sample:
        return True
    try:
        sample.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def token(self):
        a = self.headers.get("authorization", "")
        return a[7:] if a.lower().startswith("bearer ") else None

    def record(self, body):
        shown = None
        ct = self.headers.get("Content-Type", "")
        try:
            if "ndjson" in ct:
                shown = [json.loads(l) for l in body.decode().splitlines() if l.strip()]
                for l in shown:
                    v = l.get("value", {})
                    if "content" in v:
                        v["content"] = "<%d base64 chars>" % len(v["content"])
            elif "json" in ct:
                shown = json.loads(body)
                for f in shown.get("files", []) if isinstance(shown, dict) else []:
                    if "sample" in f:
                        f["sample"] = "<%d base64 chars>" % len(f["sample"])
            elif body:
                shown = "<%d bytes>" % len(body)
        except ValueError:
            shown = "<not JSON: %d bytes>" % len(body)
        with open(LOG, "a") as f:
            f.write(json.dumps({"method": self.command, "path": self.path, "auth": self.headers.get("authorization"),
                                "ctype": ct or None, "accept": self.headers.get("Accept"), "body": shown}) + "\n")

    def send(self, code, obj=None, headers=None, raw=None):
        body = raw if raw is not None else (json.dumps(obj).encode() if obj is not None else b"")
        self.send_response(code)
        hs = dict(headers or {})
        if obj is not None and raw is None:
            hs.setdefault("Content-Type", "application/json")
        for k, v in hs.items():
            self.send_header(k, v)
        if "Content-Length" not in hs:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def err(self, code, msg, code_hdr=None):
        hs = {"X-Error-Message": msg}
        if code_hdr:
            hs["X-Error-Code"] = code_hdr
        self.send(code, {"error": msg}, hs)

    def readable(self, rid):
        r = repos.get(rid)
        return r is not None and (not r["private"] or self.token() in READ)

    def can_write(self, rid):
        t = self.token()
        if t is None or (t not in WRITE and t not in READ):
            self.err(401, "Invalid credentials in Authorization header")
            return False
        if rid.split("/")[0] not in WRITE.get(t, set()):
            self.err(403, "You don't have the rights to write to %s" % rid)
            return False
        return True

    def body(self):
        n = int(self.headers.get("Content-Length", 0) or 0)
        return self.rfile.read(n) if n else b""

    # ---- reads ----
    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        self.record(b"")
        p = unquote(urlsplit(self.path).path)
        parts = p.strip("/").split("/")
        if parts[0] == "cdn" and len(parts) == 2:
            b = lfs.get(parts[1])
            return self.send(200, raw=b, headers={"ETag": '"%s"' % parts[1], "Content-Type": "application/octet-stream"}) \
                if b is not None else self.send(404)
        if parts[:2] == ["api", "models"] and len(parts) >= 4:
            rid = parts[2] + "/" + parts[3]
            if not self.readable(rid):
                return self.err(401, "Repository Not Found", "RepoNotFound")
            r = repos[rid]
            return self.send(200, {"id": rid, "modelId": rid, "sha": r["sha"], "private": r["private"],
                                   "siblings": [{"rfilename": f} for f in sorted(r["files"])]})
        if len(parts) >= 5 and parts[2] == "resolve":
            rid, rev, path = parts[0] + "/" + parts[1], parts[3], "/".join(parts[4:])
            if not self.readable(rid):
                return self.err(401, "Repository not found", "RepoNotFound")
            r = repos[rid]
            if rev not in ("main", r["sha"]):
                return self.err(404, "Revision Not Found", "RevisionNotFound")
            if path not in r["files"]:
                return self.send(404, {"error": "Entry not found"},
                                 {"X-Error-Code": "EntryNotFound", "X-Repo-Commit": r["sha"]})
            data = r["files"][path]
            if path in r["lfs"]:
                oid = r["lfs"][path]
                # the CDN is another host, as the Hub's is (clients keep the token off it)
                host = "http://localhost:%d" % self.server.server_address[1]
                return self.send(302, headers={"Location": "%s/cdn/%s" % (host, oid), "X-Repo-Commit": r["sha"],
                                               "X-Linked-Etag": '"%s"' % oid, "X-Linked-Size": str(len(data)),
                                               "ETag": '"%s"' % git_sha1(b"pointer " + oid.encode()),
                                               "Content-Length": "0"})
            return self.send(200, raw=data, headers={"X-Repo-Commit": r["sha"], "ETag": '"%s"' % git_sha1(data),
                                                     "Content-Type": "application/octet-stream"})
        self.err(404, "Not found: %s %s" % (self.command, p))

    # ---- writes ----
    def do_PUT(self):
        b = self.body()
        self.record(b)
        u = urlsplit(self.path)
        parts = u.path.strip("/").split("/")
        if parts[0] != "s3" or len(parts) not in (4, 6) or "X-Amz-Signature" not in u.query:
            return self.send(403, raw=b"<Error><Code>AccessDenied</Code></Error>")
        if self.headers.get("authorization"):
            return self.send(400, raw=b"<Error><Code>InvalidArgument</Code><Message>Only one auth mechanism "
                                      b"allowed</Message></Error>")
        rid, oid = parts[1] + "/" + parts[2], parts[3]
        if len(parts) == 6:
            mparts.setdefault((rid, oid), {})[int(parts[5])] = b
            return self.send(200, headers={"ETag": '"%s"' % hashlib.md5(b).hexdigest()})
        if hashlib.sha256(b).hexdigest() != oid or rid not in repos:
            return self.send(400, raw=b"<Error><Code>BadDigest</Code></Error>")
        lfs[oid] = b
        repos[rid]["objs"].add(oid)
        self.send(200, headers={"ETag": '"%s"' % hashlib.md5(b).hexdigest()})

    def do_POST(self):
        b = self.body()
        self.record(b)
        p = unquote(urlsplit(self.path).path)
        parts = p.strip("/").split("/")
        try:
            if p == "/api/repos/create":
                return self.create(json.loads(b))
            if p == "/api/validate-yaml":      # huggingface_hub checks a README.md's metadata first
                c = json.loads(b).get("content", "")
                ok = not c.startswith("---\n") or "\n---\n" in c[3:]
                return self.send(200 if ok else 400, {"errors": [] if ok else [{"message": "unclosed YAML metadata"}],
                                                      "warnings": []})
            if parts[:2] == ["api", "models"] and len(parts) == 6 and parts[4] == "preupload":
                return self.preupload(parts[2] + "/" + parts[3], json.loads(b))
            if parts[:2] == ["api", "models"] and len(parts) == 6 and parts[4] == "commit":
                return self.commit(parts[2] + "/" + parts[3], b)
            if parts[0] == "_standin":
                return self.admin(parts[1], parts[2] + "/" + parts[3], "/".join(parts[4:]), b)
            if len(parts) == 6 and parts[1].endswith(".git") and parts[2:5] == ["info", "lfs", "objects"]:
                rid = parts[0] + "/" + parts[1][:-4]
                if parts[5] == "batch":
                    return self.batch(rid, json.loads(b))
                if parts[5] == "verify":
                    return self.verify(rid, json.loads(b))
            if len(parts) == 6 and parts[1].endswith(".git") and parts[2:5] == ["info", "lfs", "complete"]:
                return self.complete(parts[0] + "/" + parts[1][:-4], parts[5], json.loads(b))
        except ValueError as ex:
            return self.err(400, "Bad request: %s" % ex)
        self.err(404, "Not found: POST %s" % p)

    def create(self, req):
        name, org = req.get("name"), req.get("organization") or "standin-user"
        if not isinstance(name, str) or not name or req.get("type", "model") != "model":
            return self.err(400, "name is required (a model repository)")
        rid = org + "/" + name
        if not self.can_write(rid):
            return
        host = "http://%s:%d" % self.server.server_address
        if rid in repos:
            return self.send(409, {"error": "You already created this model repo", "url": "%s/%s" % (host, rid)})
        init = b"*.pack filter=lfs diff=lfs merge=lfs -text\n"
        repos[rid] = {"files": {".gitattributes": init}, "lfs": {}, "objs": set(), "private": bool(req.get("private")) or req.get("visibility") == "private" or rid in PRIVATE,
                      "sha": hashlib.sha1(rid.encode()).hexdigest()}
        self.send(200, {"url": "%s/%s" % (host, rid), "name": rid, "id": rid})

    def preupload(self, rid, req):
        if not self.readable(rid):
            return self.err(401, "Repository not found", "RepoNotFound")
        if not self.can_write(rid):
            return
        out = []
        for f in req["files"]:
            sample = base64.b64decode(f["sample"])
            mode = "lfs" if f["size"] > 10_000_000 or is_binary(sample) else "regular"
            out.append({"path": f["path"], "uploadMode": mode, "shouldIgnore": False, "oid": None})
        self.send(200, {"files": out, "commitOid": repos[rid]["sha"]})

    def batch(self, rid, req):
        if self.headers.get("Accept") != "application/vnd.git-lfs+json":
            return self.err(406, "Accept: application/vnd.git-lfs+json is required")
        if not self.readable(rid):
            return self.err(401, "Repository not found", "RepoNotFound")
        if not self.can_write(rid):
            return
        if req.get("operation") != "upload" or req.get("hash_algo", "sha256") != "sha256" or \
                "basic" not in req.get("transfers", ["basic"]):
            return self.err(422, "only sha256 'basic' uploads")
        host = "http://%s:%d" % self.server.server_address
        objs = []
        mp = False
        for o in req["objects"]:
            ob = {"oid": o["oid"], "size": o["size"], "authenticated": True}
            if o["oid"] in repos[rid]["objs"]:     # LFS objects are per repository
                pass
            elif MP_OVER is not None and o["size"] > MP_OVER and "multipart" in req.get("transfers", []):
                n = (o["size"] + CHUNK - 1) // CHUNK
                hdr = {"chunk_size": str(CHUNK)}
                for i in range(1, n + 1):
                    hdr[str(i)] = "%s/s3/%s/%s/part/%d?X-Amz-Signature=standin" % (host, rid, o["oid"], i)
                ob["actions"] = {
                    "upload": {"href": "%s/%s.git/info/lfs/complete/%s?X-Amz-Signature=standin" % (host, rid, o["oid"]),
                               "header": hdr},
                    "verify": {"href": "%s/%s.git/info/lfs/objects/verify" % (host, rid),
                               "header": {"Authorization": "Basic c3RhbmRpbg=="}},
                }
                mp = True
            else:
                ob["actions"] = {
                    "upload": {"href": "%s/s3/%s/%s?X-Amz-Signature=standin" % (host, rid, o["oid"]), "header": {}},
                    "verify": {"href": "%s/%s.git/info/lfs/objects/verify" % (host, rid),
                               "header": {"Authorization": "Basic c3RhbmRpbg=="}},
                }
            objs.append(ob)
        self.send(200, {"transfer": "multipart" if mp else "basic", "objects": objs, "hash_algo": "sha256"},
                  {"Content-Type": "application/vnd.git-lfs+json"})

    def complete(self, rid, oid, req):
        got = mparts.pop((rid, oid), {})
        ps = req.get("parts", [])
        if req.get("oid") != oid or [p.get("partNumber") for p in ps] != list(range(1, len(got) + 1)) or not got:
            return self.err(400, "multipart completion: the parts do not match what was uploaded")
        for p in ps:
            if p.get("etag") != '"%s"' % hashlib.md5(got[p["partNumber"]]).hexdigest():
                return self.err(400, "multipart completion: part %d has another ETag" % p["partNumber"])
        data = b"".join(got[i] for i in sorted(got))
        if hashlib.sha256(data).hexdigest() != oid:
            return self.err(400, "multipart completion: sha256 mismatch")
        lfs[oid] = data
        repos[rid]["objs"].add(oid)
        self.send(200, {"ok": True})

    def verify(self, rid, req):
        if self.token() not in READ:
            return self.err(401, "Invalid credentials in Authorization header")
        b = lfs.get(req.get("oid")) if req.get("oid") in repos.get(rid, {}).get("objs", ()) else None
        if b is None or len(b) != req.get("size"):
            return self.err(404, "object %s not found" % req.get("oid"))
        self.send(200, {"ok": True})

    def admin(self, op, rid, path, b):
        """Test hooks, not the Hub's: /_standin/put/ORG/NAME/PATH stores the
        body as PATH (LFS when binary, a new oid); /_standin/flip/... flips a
        byte of PATH's stored bytes and keeps its oid (a CDN serving bytes
        that do not match the sha256 the Hub states)."""
        r = repos[rid]
        if op == "put":
            r["files"][path] = b
            if is_binary(b[:512]):
                oid = hashlib.sha256(b).hexdigest()
                lfs[oid] = b
                r["objs"].add(oid)
                r["lfs"][path] = oid
            else:
                r["lfs"].pop(path, None)
        elif op == "flip":
            data = bytearray(r["files"][path])
            data[len(data) // 2] ^= 0xFF
            r["files"][path] = bytes(data)
            if path in r["lfs"]:
                lfs[r["lfs"][path]] = bytes(data)
        self.send(200, {"ok": True})

    def commit(self, rid, raw):
        if "application/x-ndjson" not in self.headers.get("Content-Type", ""):
            return self.err(400, "Content-Type must be application/x-ndjson")
        if not self.readable(rid):
            return self.err(401, "Repository not found", "RepoNotFound")
        if not self.can_write(rid):
            return
        lines = [json.loads(l) for l in raw.decode().splitlines() if l.strip()]
        if not lines or lines[0].get("key") != "header" or not lines[0]["value"].get("summary"):
            return self.err(400, "the first line must be the header, with a summary")
        r = repos[rid]
        files, lfsmap = dict(r["files"]), dict(r["lfs"])
        for l in lines[1:]:
            k, v = l.get("key"), l.get("value", {})
            path = v.get("path", "")
            if not path or path.startswith("/") or ".." in path.split("/"):
                return self.err(400, "bad path %r" % path)
            if k == "file":
                if v.get("encoding") != "base64":
                    return self.err(400, "file: encoding must be base64")
                files[path] = base64.b64decode(v["content"])
                lfsmap.pop(path, None)
            elif k == "lfsFile":
                if v.get("algo") != "sha256" or v.get("oid") not in r["objs"]:
                    return self.err(400, "lfsFile %s: oid %s was not uploaded" % (path, v.get("oid")))
                if "size" in v and v["size"] != len(lfs[v["oid"]]):
                    return self.err(400, "lfsFile %s: size mismatch" % path)
                files[path] = lfs[v["oid"]]
                lfsmap[path] = v["oid"]
            elif k == "deletedFile":
                if path not in files:
                    return self.err(404, "deletedFile %s: no such file" % path)
                del files[path]
                lfsmap.pop(path, None)
            else:
                return self.err(400, "unknown operation %r" % k)
        for path, data in files.items():
            if path not in lfsmap and is_binary(data[:512]):
                return self.err(400, "Your push was rejected because it contains binary files (%s): use LFS" % path)
        r["files"], r["lfs"] = files, lfsmap
        r["sha"] = hashlib.sha1((r["sha"] + raw.decode()).encode()).hexdigest()
        host = "http://%s:%d" % self.server.server_address
        self.send(200, {"success": True, "commitOid": r["sha"], "commitUrl": "%s/%s/commit/%s" % (host, rid, r["sha"]),
                        "commitMessage": lines[0]["value"]["summary"]})


s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
