#!/usr/bin/env bash
# Each named adapter reproduces its own answers (issue 17): a document with
# six #sql Q&A (SQL statements) and four #tone Q&A (polite chat) on the
# embedded tiny base, 30 epochs. For every trained question of adapter X,
# `dlm prompt --adapter X --temp 0` is closer to X's answer (difflib ratio)
# than `--adapter Y` is, and some answers come back exactly (at least 1 of 6
# SQL, 3 of 4 polite; measured 1 and 3).
set -euo pipefail
. "$DLM_SRC/tests/cli/lib.sh"
/usr/bin/python3 "$DLM_SRC/tests/cli/helpers/styles_doc.py" doc.dlm "$ID" 30
"$DLM" train doc.dlm -q > /dev/null 2>&1 || fail "train"
: > answers.tsv
for a in sql tone; do
    while IFS= read -r q; do
        printf '%s\t%s\t%s\n' "$a" "$q" "$("$DLM" prompt doc.dlm "$q" --temp 0 -n 24 --adapter "$a" 2>/dev/null)" >> answers.tsv
    done < <(/usr/bin/python3 -c "
import sys; sys.path.insert(0, '$DLM_SRC/tests/cli/helpers'); import styles_doc as s
print('\n'.join(q for q, _ in s.SQL + s.TONE))")
done
/usr/bin/python3 - "$DLM_SRC/tests/cli/helpers" <<'PY'
import difflib, sys
sys.path.insert(0, sys.argv[1])
import styles_doc as s
own = {q: ("sql", a) for q, a in s.SQL} | {q: ("tone", a) for q, a in s.TONE}
got = {}
for line in open("answers.tsv"):
    ad, q, out = line.rstrip("\n").split("\t")
    got[(ad, q)] = out
closer, exact = 0, {"sql": 0, "tone": 0}
for q, (ad, ans) in own.items():
    other = "tone" if ad == "sql" else "sql"
    r_own = difflib.SequenceMatcher(None, got[(ad, q)], ans).ratio()
    r_other = difflib.SequenceMatcher(None, got[(other, q)], ans).ratio()
    closer += r_own > r_other
    exact[ad] += got[(ad, q)] == ans
    if r_own <= r_other:
        print(f"not closer: {ad} {q!r}: {got[(ad, q)]!r} ({r_own:.2f}) vs {other}: {got[(other, q)]!r} ({r_other:.2f})")
print(f"own adapter closer to its answer: {closer}/{len(own)}; exact: sql {exact['sql']}/6, tone {exact['tone']}/4")
assert closer == len(own), "an adapter answered another's question closer than its own"
assert exact["sql"] >= 1 and exact["tone"] >= 3, exact
PY
