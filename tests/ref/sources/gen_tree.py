#!/usr/bin/env python3
"""Random source trees for r0701: nested dirs whose names sort differently
component-wise and byte-wise ("a", "a-b", "a.b"), `.dlm/` anchors with random
ignore rules (negation, anchored, dir-only) and training.yaml files (include,
exclude, exclude_defaults, metadata, weights, some malformed), default-excluded
secrets, binaries, non-UTF-8, CRLF and BOM files, symlinks in and out.

usage: gen_tree.py DIR SEED"""
import os, random, sys
from pathlib import Path

root, rnd = Path(sys.argv[1]), random.Random(int(sys.argv[2]))
NAMES = ["a", "a-b", "a.b", "b", "src", "docs", "build", "node_modules", "deep", "x_y", "Z", "sub"]
FILES = ["README.md", "main.c", "util.py", "notes.txt", "a.md", "x.log", "keep.log", ".env", ".env.prod",
         "id_rsa", "key.pem", "secrets.json", "app.min.js", "lib.so", "data.bin", "latin.txt", "crlf.txt",
         "bom.md", "pic.PNG", "Cargo.lock", "z.txt", "a-b.txt"]
PATS = ["*.log", "!keep.log", "/a/", "build/", "docs/**", "**/*.md", "?.txt", "sub/", "!**/README.md", "*.py",
        "x_y/", "/z.txt", "# comment", "", "!", "/", "deep/**/*.c"]
MARK = "SECRET-" + "%08x" % rnd.getrandbits(32)


def write(p, data):
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data)


def fill(d, depth):
    for f in rnd.sample(FILES, rnd.randint(2, 8)):
        p = d / f
        if f in (".env", ".env.prod", "id_rsa", "key.pem", "secrets.json"):
            write(p, (MARK + "\n").encode())
        elif f == "data.bin":
            write(p, b"hdr\0" + os.urandom(8))
        elif f == "latin.txt":
            write(p, b"caf\xe9 au lait\n")
        elif f == "crlf.txt":
            write(p, b"line one\r\nline two\rline three\r\n")
        elif f == "bom.md":
            write(p, b"\xef\xbb\xbf# bom\n")
        else:
            write(p, ("text of %s %d\n" % (p.relative_to(root), rnd.randint(0, 1 << 30)) * rnd.randint(1, 60)).encode())
    if rnd.random() < 0.5:
        (d / ".dlm").mkdir(exist_ok=True)
        if rnd.random() < 0.8:
            (d / ".dlm" / "ignore").write_text("\n".join(rnd.sample(PATS, rnd.randint(1, 6))) + "\n")
        if rnd.random() < 0.6:
            y = []
            if rnd.random() < 0.3: y.append('include: ["**/*.md", "**/*.txt"]')
            if rnd.random() < 0.4: y.append('exclude: ["*.c", "**/notes.txt"]')
            if rnd.random() < 0.3: y.append("exclude_defaults: false")
            if rnd.random() < 0.5: y.append("metadata: {lang: l%d, area: a%d}" % (depth, rnd.randint(0, 2)))
            if rnd.random() < 0.4: y.append("weights: {area: {a0: 2.0, a1: 0.5}, lang: {l1: 3}}")
            if rnd.random() < 0.15: y.append("bogus_key: 1")
            if rnd.random() < 0.1: y.append("include: [unclosed")
            (d / ".dlm" / "training.yaml").write_text("\n".join(y) + "\n")
    if depth < 3:
        for n in rnd.sample(NAMES, rnd.randint(0, 3)):
            fill(d / n, depth + 1)


root.mkdir(parents=True, exist_ok=True)
fill(root, 0)
outside = root.parent / "outside.txt"
outside.write_text(MARK + " outside\n")
(root / "link_out.txt").symlink_to(outside)
(root / "link_in.md").symlink_to(root / "README.md" if (root / "README.md").exists() else outside)
(root / "link_dir").symlink_to(root.parent)
print(MARK)
