#!/usr/bin/env python3
"""Reference for training.sources, written from shared/reference/dlm-format.md
§1.9 (plus dlm's one documented addition: a symlinked file resolving outside
the directive root is skipped). Python's pathlib, re, hashlib and PyYAML do
the walking, matching, hashing and YAML; nothing here is dlm's code.

usage: sources_ref.py DOC.dlm   -> JSON {kept: [{path, id, sha256, size,
tags, weight}], skipped: {relpath: verdict}} on stdout."""
import hashlib, json, re, sys
from pathlib import Path
import yaml

DEFAULTS = """.git/** .hg/** .svn/** .env .env.* **/.env **/.env.* **/id_rsa **/id_ed25519
**/*.pem **/*.key **/secrets.* **/__pycache__/** **/*.pyc **/*.pyo .venv/** venv/** .tox/** node_modules/**
**/*.min.js **/*.min.css **/*.map target/** **/*.rlib **/*.class **/*.jar **/*.o **/*.so **/*.dylib **/*.dll
build/** dist/** __generated__/** generated/** **/package-lock.json **/yarn.lock **/pnpm-lock.yaml
**/Cargo.lock **/uv.lock **/poetry.lock **/Pipfile.lock **/*.ico **/*.pdf **/*.zip **/*.tar **/*.gz **/*.xz
**/*.bz2 **/*.7z **/*.wasm .dlm/** **/.dlm/**""".split()
MEDIA = {".png", ".jpg", ".jpeg", ".webp", ".gif", ".bmp", ".tiff", ".wav", ".flac", ".ogg"}


def glob_re(p):
    # §1.9: `**` -> `.*` (a following `/` swallowed), `*` -> `[^/]*`, `?` -> `[^/]`, rest literal
    out, i = "", 0
    while i < len(p):
        if p.startswith("**", i):
            out += ".*"; i += 2
            if i < len(p) and p[i] == "/": i += 1
        elif p[i] == "*": out += "[^/]*"; i += 1
        elif p[i] == "?": out += "[^/]"; i += 1
        else: out += re.escape(p[i]); i += 1
    return re.compile(out)


def any_match(pats, rel):
    return any(glob_re(p).fullmatch(rel) for p in pats)


def parse_ignore(text):
    rules = []
    for line in text.splitlines():
        line = line.rstrip()
        if not line or line.lstrip().startswith("#"): continue
        neg = line.startswith("!"); line = line[1:] if neg else line
        anch = line.startswith("/"); line = line[1:] if anch else line
        d = line.endswith("/"); line = line[:-1] if d else line
        if line: rules.append((line, anch, d, neg))
    return rules


def ign_match(rule, rel):
    pat, anch, d, _ = rule
    rx = glob_re(pat)
    parts = rel.split("/")
    cands = [rel] if anch else ["/".join(parts[i:]) for i in range(len(parts))]
    if any(rx.fullmatch(c) for c in cands) and not d: return True
    if d and not anch: return any(rx.fullmatch(c) for c in parts[:-1])
    return False


def load_yaml(p):
    KEYS = {"dlm_training_version", "include", "exclude", "exclude_defaults", "metadata", "weights"}
    try:
        raw = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
    except Exception:
        return None
    if not isinstance(raw, dict) or set(raw) - KEYS: return None
    if raw.get("dlm_training_version", 1) != 1: return None
    return {"include": raw.get("include", []), "exclude": raw.get("exclude", []),
            "exclude_defaults": raw.get("exclude_defaults", True), "metadata": raw.get("metadata", {}),
            "weights": raw.get("weights", {})}


def main():
    doc = Path(sys.argv[1])
    fm = yaml.safe_load(doc.read_text().split("---\n")[1])
    tr = fm.get("training", {})
    base = doc.resolve().parent
    if base.name == ".dlm": base = base.parent
    kept, skipped, merged = [], {}, {}
    for d in tr.get("sources") or []:
        raw = Path(d["path"]).expanduser()
        root = (raw if raw.is_absolute() else base / raw).resolve()
        inc, exc = d.get("include", ["**/*"]), d.get("exclude", [])
        mb, mf = d.get("max_bytes_per_file"), d.get("max_files")
        single = root.is_file()
        files = [root] if single else [p for p in sorted(root.rglob("*")) if p.is_file()]
        anchors = []
        if not single:
            for dd in sorted(root.rglob(".dlm")):
                if dd.is_dir():
                    y = (dd / "training.yaml")
                    ig = (dd / "ignore")
                    anchors.append((dd.parent, load_yaml(y) if y.is_file() else None,
                                    parse_ignore(ig.read_text()) if ig.is_file() else []))
            anchors.sort(key=lambda a: len(a[0].as_posix()))
        n = 0
        for f in files:
            if mf is not None and n >= mf: break
            rel = f.name if single else f.relative_to(root).as_posix()
            anc = [a for a in anchors if f.parent == a[0] or a[0] in f.parents]
            include = inc
            for a in reversed(anc):
                if a[1] and a[1]["include"]: include = a[1]["include"]; break
            excluded = any_match(exc, rel)
            defaults = next((a[1]["exclude_defaults"] for a in reversed(anc) if a[1]), True)
            if defaults and any_match(DEFAULTS, rel): excluded = True
            for a in anc:
                ra = f.relative_to(a[0]).as_posix()
                if a[1] and any_match(a[1]["exclude"], ra): excluded = True
            for a in anc:
                ra = f.relative_to(a[0]).as_posix()
                for r in a[2]:
                    if ign_match(r, ra): excluded = not r[3]
            if excluded: skipped[rel] = "excluded"; continue
            if not any_match(include, rel): skipped[rel] = "not_included"; continue
            if f.is_symlink() and not (f.resolve() == root or root in f.resolve().parents):
                skipped[rel] = "symlink_escape"; continue
            size = f.stat().st_size
            if mb is not None and size > mb: skipped[rel] = "too_large"; continue
            if f.suffix.lower() in MEDIA: skipped[rel] = "media"; continue
            data = f.read_bytes()
            if b"\0" in data[:1024]: skipped[rel] = "binary"; continue
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                skipped[rel] = "not_utf8"; continue
            if text.startswith("\ufeff"): text = text[1:]
            text = text.replace("\r\n", "\n").replace("\r", "\n")
            content = f"# source: {rel}\n\n{text}"
            sid = hashlib.sha256(("prose\n" + content).encode()).hexdigest()[:16]
            tags = {}
            for a in anc:
                if a[1]: tags.update(a[1]["metadata"])
            kept.append({"path": rel, "id": sid, "sha256": hashlib.sha256(data).hexdigest(), "size": len(data),
                         "tags": tags, "weight": 1.0})
            n += 1
        # the original (train/trainer.py, data/weighted_rows.py): every
        # discovered config's weights, of every directive, merged into one
        # map (later wins per (key, value)); a row's weight is the product
        # over its tags of that map's scales
        for a in anchors:
            if a[1]:
                for k, inner in a[1]["weights"].items():
                    for v, sc in inner.items():
                        merged.setdefault(k, {})[v] = sc
    for e in kept:
        w = 1.0
        for k, v in e["tags"].items():
            sc = merged.get(k, {}).get(v)
            if sc is not None: w *= sc
        e["weight"] = w
    json.dump({"kept": kept, "skipped": skipped}, sys.stdout, indent=1, sort_keys=True)


main()
