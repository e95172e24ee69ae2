#!/usr/bin/env bash
# r0701: training.sources verdicts, section ids, sha256s, tags and weights of
# `dlm show --sources --json` equal those of tests/ref/sources/sources_ref.py,
# a Python (pathlib + re + hashlib + PyYAML) reading of dlm-format.md §1.9,
# on 30 random trees (tests/ref/sources/gen_tree.py) and on a max_files /
# single-file / max_bytes variant. Planted secrets never appear as kept.
set -euo pipefail
: "${DLM:?}" "${DLM_SRC:?}"
ref=$DLM_SRC/tests/ref/sources
skip() {
    if [ "${DLM_REF_SKIP:-}" = "1" ]; then echo "r0701: skipped: $1"; exit 77; fi
    echo "r0701: FAILED: $1" >&2; exit 1
}
python3 -c 'import yaml' 2>/dev/null || skip "python3 with PyYAML is not installed"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
compare() { # DOC
    "$DLM" -q show "$1" --sources --json > "$T/got.json"
    python3 "$ref/sources_ref.py" "$1" > "$T/want.json"
    python3 - "$T/got.json" "$T/want.json" <<'PY'
import json, sys
got, want = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
gk = [{"path": f["path"], "id": f["section_id"], "sha256": f["sha256"], "size": f["size"], "tags": f["tags"],
       "weight": f["weight"]} for f in got["files"] if f["verdict"] == "kept"]
gs = {f["path"]: f["verdict"] for f in got["files"] if f["verdict"] not in ("kept", "max_files")}
bad = 0
if gk != want["kept"]:
    bad = 1
    a, b = {k["path"]: k for k in gk}, {k["path"]: k for k in want["kept"]}
    for p in sorted(set(a) | set(b)):
        if a.get(p) != b.get(p): print("kept differs:", p, a.get(p), b.get(p))
    if [k["path"] for k in gk] != [k["path"] for k in want["kept"]]: print("order differs")
if gs != want["skipped"]:
    bad = 1
    for p in sorted(set(gs) | set(want["skipped"])):
        if gs.get(p) != want["skipped"].get(p): print("verdict differs:", p, gs.get(p), want["skipped"].get(p))
sys.exit(bad)
PY
}
fail=0
for seed in $(seq 1 30); do
    d=$T/s$seed
    mark=$(python3 "$ref/gen_tree.py" "$d/tree" "$seed")
    printf -- '---\ndlm_id: 01HZY0000000000000000000AB\nbase_model: tiny\ntraining:\n  sources:\n    - path: tree\n---\nbody\n' > "$d/doc.dlm"
    compare "$d/doc.dlm" || { echo "r0701: seed $seed differs" >&2; fail=1; }
    # planted secrets are default-excluded unless a training.yaml opted out
    if ! grep -rq exclude_defaults "$d/tree" && "$DLM" -q show "$d/doc.dlm" --sources --json |
        python3 -c 'import json,sys; d=json.load(sys.stdin); sys.exit(0 if any(f["verdict"]=="kept" and f["path"].split("/")[-1] in (".env",".env.prod","id_rsa","key.pem","secrets.json","link_out.txt") for f in d["files"]) else 1)'; then
        echo "r0701: seed $seed kept a secret" >&2; fail=1
    fi
    rm -rf "$d"
done
# caps and a single-file directive
d=$T/caps
python3 "$ref/gen_tree.py" "$d/tree" 7 >/dev/null
printf "one\r\n" > "$d/tree/one.md"
printf -- '---\ndlm_id: 01HZY0000000000000000000AB\nbase_model: tiny\ntraining:\n  sources:\n    - path: tree\n      max_files: 5\n      max_bytes_per_file: 300\n      exclude: ["**/*.c"]\n    - path: tree/one.md\n    - path: tree\n      include: ["**/*.md"]\n---\nbody\n' > "$d/doc.dlm"
compare "$d/doc.dlm" || { echo "r0701: caps variant differs" >&2; fail=1; }
# the .dlm/ auto-scaffold shape anchors at the grandparent
mkdir -p "$d/tree/.dlm"
printf -- '---\ndlm_id: 01HZY0000000000000000000AB\nbase_model: tiny\ntraining:\n  sources:\n    - path: .\n---\n' > "$d/tree/.dlm/corpus.dlm"
compare "$d/tree/.dlm/corpus.dlm" || { echo "r0701: scaffold shape differs" >&2; fail=1; }
[ $fail = 0 ] && echo "r0701: ok (32 trees)"
exit $fail
