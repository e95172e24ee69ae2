#!/usr/bin/env python3
"""A template, initialised and trained on tiny with its own settings, must
answer: every sample prompt that is a question of the document gets that
question's answer back at temperature 0, and a sample prompt taken from the
prose (prose-only templates) is continued with the prose's next words when
the text from the section start up to it is given with --raw.

    template_check.py DLM DOC META_JSON TRAIN_OUTPUT

The Q/A pairs are read from the document text here, with a regex written
from the format's rules (spec §1.6), not through dlm."""
import json, re, subprocess, sys

dlm, doc, meta, train_out = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4]
text = open(doc, encoding="utf-8").read()
body = text.split("\n---\n", 1)[1]
pairs = {}
for sec in re.split(r"^::instruction::$", body, flags=re.M)[1:]:
    for q, a in re.findall(r"^### Q\n(.*?)\n### A\n(.*?)(?=\n### Q\n|\Z)", sec, re.S | re.M):
        pairs[q.strip()] = a.strip()

m = re.search(r"^trained v0001: (\d+) steps, loss ([\d.]+) → ([\d.]+)", train_out, re.M)
assert m, "no 'trained v0001' line: " + train_out
steps, l0, l1 = int(m.group(1)), float(m.group(2)), float(m.group(3))
assert steps == meta["expected_steps"], (steps, meta["expected_steps"])
assert l1 < 0.5 * l0, "loss fell too little: %s → %s" % (l0, l1)
assert "learned little" not in train_out, train_out
# no Q/A row may fall into the validation split (it would never be trained)
assert "(val " not in m.group(0) and "(val " not in train_out.split("trained v0001:")[1].splitlines()[0], train_out

def run(*args):
    r = subprocess.run([dlm, "prompt", doc, *args, "--temp", "0"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()

checked = 0
for p in meta["sample_prompts"]:
    if p in pairs:
        got = run(p)
        assert got == pairs[p], "%s: %r → %r, trained %r" % (meta["name"], p, got, pairs[p])
    else:
        # a prose prompt: the document's text up to the end of p, as the
        # model saw it in training (prose rows start at the section start)
        prose = body.lstrip("\n")
        i = prose.index(p) + len(p)
        want = " ".join(prose[i:].split()[:4])
        got = " ".join(run("--raw", prose[:i], "-n", "12").split())
        assert got.startswith(want), "%s: %r continued as %r, the prose says %r" % (meta["name"], p, got, want)
    checked += 1
assert checked, "no sample prompts"
print("ok %s: %d steps, loss %.3f → %.3f, %d prompts answered" % (meta["name"], steps, l0, l1, checked))
