#!/usr/bin/python3
"""Packs written from the spec (dlm-format.md §7) with Python's tarfile and
Debian's python3-zstandard, independently of dlm's writer; and hostile
variants of a pack for the unpack refusal tests.

  packlib.py make DOC STORE OUT        a pack of DOC and the store folder STORE
  packlib.py hostile KIND IN OUT       IN with one defect (see hostile())
  packlib.py payload PACK OUT_PAYLOAD OUT_SIG   provenance's signed bytes and signature
  packlib.py tamper-prov PACK OUT FIELD VALUE   change a provenance field, fix checksums
  packlib.py prov PACK                          print provenance.json
  packlib.py set-member PACK OUT NAME TEXT      replace a member's bytes, checksums fixed
  packlib.py swap-adapter PACK OUT [PART]       other adapter bytes (members whose name holds PART), checksums fixed
"""
import hashlib, io, json, os, sys, tarfile, zstandard

SKIP_TOP = {"exports", "cache", "logs", "run", ".lock"}


def sha(b):
    return hashlib.sha256(b).hexdigest()


def dumps(o):
    return (json.dumps(o, sort_keys=True, indent=2, ensure_ascii=False) + "\n").encode()


def read(path):
    raw = open(path, "rb").read()
    data = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(raw)).read()
    tf = tarfile.open(fileobj=io.BytesIO(data))
    out = []
    for m in tf.getmembers():
        out.append((m, tf.extractfile(m).read() if m.isfile() else b""))
    return out


def fix(members):
    """Recompute manifest entries/content_sha256 and CHECKSUMS.sha256."""
    files = {m.name: d for m, d in members if m.isfile()}
    content = sorted(n for n in files if n.startswith(("dlm/", "store/", "base/")))
    man = json.loads(files["manifest.json"])
    man["entries"] = {n: len(files[n]) for n in content}
    h = hashlib.sha256()
    for n in content:
        h.update(("%s\n%s\n" % (n, sha(files[n]))).encode())
    man["content_sha256"] = h.hexdigest()
    files["manifest.json"] = dumps(man)
    files["CHECKSUMS.sha256"] = "".join(
        "%s  %s\n" % (sha(files[n]), n) for n in sorted(files) if n not in ("CHECKSUMS.sha256", "manifest.json")).encode()
    res = []
    for m, d in members:
        if m.isfile():
            d = files[m.name]
            m.size = len(d)
        res.append((m, d))
    return res


def write(path, members, compress=True, cctx=None):
    buf = io.BytesIO()
    tf = tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT)
    for m, d in members:
        tf.addfile(m, io.BytesIO(d) if m.isfile() else None)
    tf.close()
    data = buf.getvalue()
    if cctx:
        # streamed, size unknown: the frame keeps the window it was given
        with open(path, "wb") as fh:
            w = cctx.stream_writer(fh, closefd=False)
            w.write(data)
            w.flush(zstandard.FLUSH_FRAME)
        return
    if compress:
        data = zstandard.ZstdCompressor(level=10).compress(data)
    open(path, "wb").write(data)


def info(name, data=b"", kind=tarfile.REGTYPE):
    m = tarfile.TarInfo(name)
    m.type = kind
    m.size = len(data) if kind == tarfile.REGTYPE else 0
    m.mode = 0o755 if kind == tarfile.DIRTYPE else 0o644
    return m


def make(doc, store, out):
    """A pack from the spec: no directory entries, GNU tar would add them
    but the spec does not require them."""
    files = {}
    docb = open(doc, "rb").read()
    files["dlm/" + os.path.basename(doc)] = docb
    for root, dirs, names in os.walk(store):
        rel = os.path.relpath(root, store)
        if rel == ".":
            dirs[:] = [d for d in dirs if d not in SKIP_TOP]
            names = [n for n in names if n not in SKIP_TOP]
        for n in names:
            p = os.path.join(root, n)
            r = os.path.normpath(os.path.join("store", rel, n))
            files[r] = open(p, "rb").read()
    smf = json.loads(files["store/manifest.json"])
    cur = files.get("store/adapter/current.txt", b"").decode().strip()
    files["PACK_HEADER.json"] = dumps({"pack_format_version": 1, "created_at": "2026-01-01T00:00:00",
                                       "tool_version": "packlib.py", "content_type": "minimal",
                                       "platform_hint": "linux-python", "licensee_acceptance_url": None})
    files["manifest.json"] = dumps({"dlm_id": smf["dlm_id"], "base_model": smf["base_model"],
                                    "base_model_revision": smf.get("base_model_revision"),
                                    "base_model_sha256": smf.get("base_model_sha256"),
                                    "adapter_version": int(cur[-4:]) if cur else 0, "entries": {},
                                    "content_sha256": ""})
    files["CHECKSUMS.sha256"] = b""
    members = [(info(n, files[n]), files[n]) for n in sorted(files)]
    write(out, fix(members))


def hostile(kind, src, out):
    ms = read(src)
    env = {}
    if kind == "abs":
        ms.append((info("/tmp/dlm-evil", b"x"), b"x"))
    elif kind == "dotdot":
        ms.append((info("store/../../dlm-evil", b"x"), b"x"))
    elif kind == "symlink":
        m = info("store/link", kind=tarfile.SYMTYPE); m.linkname = "/etc/passwd"; ms.append((m, b""))
    elif kind == "hardlink":
        m = info("store/hl", kind=tarfile.LNKTYPE); m.linkname = "dlm/t.dlm"; ms.append((m, b""))
    elif kind == "device":
        m = info("store/dev", kind=tarfile.CHRTYPE); m.devmajor, m.devminor = 1, 3; ms.append((m, b""))
    elif kind == "fifo":
        ms.append((info("store/fifo", kind=tarfile.FIFOTYPE), b""))
    elif kind == "dup":
        d = [x for x in ms if x[0].name == "store/manifest.json"][0]
        ms.append((info("store/manifest.json", d[1]), d[1]))
    elif kind == "big":
        ms.append((info("store/big.bin", b"y" * 70000), b"y" * 70000))
        ms = fix(ms)
    elif kind == "bomb":
        z = bytes(8 << 20)
        ms.append((info("store/zeros.bin", z), z))
        ms = fix(ms)
    elif kind == "tamper":
        ms = [(m, d + b" " if m.name == "store/replay/index.json" else d) for m, d in ms]
        for m, d in ms:
            if m.name == "store/replay/index.json": m.size = len(d)
    elif kind == "version":
        ms = [(m, dumps(dict(json.loads(d), pack_format_version=2)) if m.name == "PACK_HEADER.json" else d) for m, d in ms]
        ms = fix(ms)
    elif kind == "toplevel":
        ms.append((info("evil.sh", b"#!/bin/sh\n"), b"#!/bin/sh\n"))
        ms = fix(ms)
    elif kind == "nodoc":
        ms = fix([x for x in ms if not x[0].name.startswith("dlm/")])
    elif kind.startswith("base-"):
        # --include-base packs (t0806): a base/ member manifest.json does not
        # list; a blob name or a repo id that would leave the HF cache folder
        man = json.loads([d for m, d in ms if m.name == "manifest.json"][0])
        if kind == "base-unlisted":
            ms.append((info("base/evil.bin", b"x"), b"x"))
        elif kind == "base-blob":
            f = man["base"]["files"]["config.json"]; f["blob"] = "../../../../evil"
        elif kind == "base-repo":
            man["base"]["repo"] = "../../evil"
        else:
            raise SystemExit("unknown kind " + kind)
        ms = [(m, dumps(man) if m.name == "manifest.json" else d) for m, d in ms]
        ms = fix(ms)
    elif kind == "notzstd":
        write(out, ms, compress=False)
        return
    elif kind == "window":
        p = zstandard.ZstdCompressionParameters(window_log=30, compression_level=3, write_content_size=0)
        write(out, ms, cctx=zstandard.ZstdCompressor(compression_params=p))
        return
    else:
        raise SystemExit("unknown kind " + kind)
    write(out, ms)


def prov_of(ms):
    return json.loads([d for m, d in ms if m.name == "provenance.json"][0])


def main():
    a = sys.argv[1:]
    if a[0] == "make":
        make(a[1], a[2], a[3])
    elif a[0] == "hostile":
        hostile(a[1], a[2], a[3])
    elif a[0] == "set-member":
        out = []
        for m, d in read(a[1]):
            if m.name == a[3]:
                d = a[4].encode(); m.size = len(d)
            out.append((m, d))
        write(a[2], fix(out))
    elif a[0] == "prov":
        sys.stdout.write(json.dumps(prov_of(read(a[1]))) + "\n")
    elif a[0] == "payload":
        p = prov_of(read(a[1]))
        keys = ["adapter_sha256", "base_revision", "corpus_root_sha256", "env_lock_digest", "signed_at"]
        keys += ["adapters_sha256"] if "adapters_sha256" in p else []   # a store of named adapters
        open(a[2], "wb").write(json.dumps({k: p[k] for k in keys}, sort_keys=True, separators=(",", ":")).encode())
        open(a[3], "w").write(p["signature"])
        if len(a) > 4:
            open(a[4], "w").write("untrusted comment: signer\n" + p["signer_public_key"] + "\n")
    elif a[0] == "tamper-prov":
        ms = read(a[1])
        out = []
        for m, d in ms:
            if m.name == "provenance.json":
                p = json.loads(d); p[a[3]] = a[4]; d = dumps(p); m.size = len(d)
            out.append((m, d))
        write(a[2], fix(out))
    elif a[0] == "swap-adapter":
        ms = read(a[1])
        out = []
        for m, d in ms:
            if m.name.endswith("adapter_model.safetensors") and (len(a) < 4 or a[3] in m.name):
                d = d[:-1] + bytes([d[-1] ^ 1]); m.size = len(d)
            out.append((m, d))
        write(a[2], fix(out))
    elif a[0] == "resign":
        # a.py resign PACK OUT SIGFILE: put a minisign-made signature and key into provenance
        ms = read(a[1])
        out = []
        for m, d in ms:
            if m.name == "provenance.json":
                p = json.loads(d)
                p["signature"] = open(a[3]).read()
                p["signer_public_key"] = open(a[4]).read().splitlines()[1]
                d = dumps(p); m.size = len(d)
            out.append((m, d))
        write(a[2], fix(out))


main()
