#!/bin/bash
# bench/sources/run.sh — training.sources at scale: walk + verdicts + read +
# UTF-8 check + sha256 + section ids of `dlm show --sources --json` on real
# trees nobody here wrote (/usr/include, /usr/share/doc, an unpacked npm
# dependency tree as the directive root, and its parent, where the default
# excludes drop node_modules/), against tests/ref/sources/sources_ref.py
# (the same rules in Python: pathlib + re + hashlib) as the peer. One run
# each; rates are per CPU-second (user+sys: the machine is shared, wall
# time is mostly waiting); files/s over every file seen, MB/s over the
# bytes of kept files, peak RSS from /usr/bin/time. Prints a markdown table.
#
#   bench/sources/run.sh [DLM] [TREE...]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
dlm=${1:-$root/build/dlm}
shift || true
nm=$(readlink -f "$root/tests/ref/node_modules" || true)
trees=${*:-"/usr/include /usr/share/doc $nm $(dirname "$nm")"}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "| tree | files seen | kept | kept MB | dlm wall s | dlm CPU s | dlm files/CPU-s | dlm MB/CPU-s | dlm peak RSS MB | python CPU s | python RSS MB | CPU speedup |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
for t in $trees; do
    [ -d "$t" ] || continue
    printf -- '---\ndlm_id: 01HZY0000000000000000000AB\nbase_model: tiny\ntraining:\n  sources:\n    - path: %s\n---\n' "$t" > "$tmp/doc.dlm"
    /usr/bin/time -f "%e %U %S %M" -o "$tmp/t.dlm" "$dlm" -q show "$tmp/doc.dlm" --sources --json > "$tmp/out.json" 2>/dev/null
    /usr/bin/time -f "%e %U %S %M" -o "$tmp/t.py" python3 "$root/tests/ref/sources/sources_ref.py" "$tmp/doc.dlm" > "$tmp/ref.json" 2>/dev/null || echo "0 0" > "$tmp/t.py"
    python3 - "$t" "$tmp/out.json" "$tmp/t.dlm" "$tmp/t.py" <<'PY'
import json, sys
t, out, td, tp = sys.argv[1:]
r = json.load(open(out))["totals"]
dw, du, dsy, drss = open(td).read().split()[-4:]
pw, pu, psy, prss = open(tp).read().split()[-4:]
dc = max(float(du) + float(dsy), 0.01)
pc = float(pu) + float(psy)
mb = r["bytes"] / 1e6
print("| %s | %d | %d | %.1f | %.2f | %.2f | %.0f | %.1f | %.1f | %.2f | %.1f | %s |" % (
    t, r["files"], r["kept"], mb, float(dw), dc, r["files"] / dc, mb / dc, int(drss) / 1024, pc, int(prss) / 1024,
    "%.1fx" % (pc / dc) if pc else "-"))
PY
done
