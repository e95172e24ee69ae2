#!/usr/bin/env python3
"""A trained document must answer a question asked after earlier turns as it
answers the question alone: each question of the document, asked alone and
as turn 2, 3 and 4 of a conversation, through `dlm api` (the chat page's
and the repl's rendering: the whole conversation in the base's chat
template), greedy. The earlier turns are the document's other questions
(cycling through them, so a short document repeats some) with the answers
the model gave to them alone, as a chat client would send them back.

    multiturn_check.py DLM DOC [--expect-fail]

Prints one line per (question, turn) and exits 1 when an answer differs
(0 with --expect-fail only when at least one differs: the check itself is
tested against an adapter trained without multi-turn rows). The Q/A pairs
are read from the document text with a regex written from the format's rules
(spec §1.6), not through dlm."""
import json
import re
import subprocess
import sys
import time
import urllib.request

dlm, doc = sys.argv[1], sys.argv[2]
expect_fail = "--expect-fail" in sys.argv[3:]
text = open(doc, encoding="utf-8").read()
body = text.split("\n---\n", 1)[1]
pairs = []
for sec in re.split(r"^::instruction::$", body, flags=re.M)[1:]:
    for q, a in re.findall(r"^### Q\n(.*?)\n### A\n(.*?)(?=\n### Q\n|\n::|\Z)", sec, re.S | re.M):
        pairs.append((q.strip(), a.strip()))
assert len(pairs) >= 2, "need two Q/A pairs at least"

srv = subprocess.Popen([dlm, "api", doc, "--port", "0", "--parallel", "1"], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
try:
    url = srv.stdout.readline().strip().rstrip("/")
    assert url.startswith("http"), "dlm api did not start: " + srv.stderr.read()

    def ask(messages):
        req = urllib.request.Request(url + "/v1/chat/completions", method="POST",
                                     headers={"Content-Type": "application/json"},
                                     data=json.dumps({"messages": messages, "temperature": 0,
                                                      "max_tokens": 64}).encode())
        with urllib.request.urlopen(req, timeout=600) as r:
            return json.load(r)["choices"][0]["message"]["content"].strip()

    alone = [ask([{"role": "user", "content": q}]) for q, _ in pairs]
    bad = 0
    for i, (q, _) in enumerate(pairs):
        print("alone  %r -> %r" % (q, alone[i]))
        others = [j for j in range(len(pairs)) if j != i]
        for turn in (2, 3, 4):
            msgs = []
            for m in range(turn - 1):
                j = others[(i + m) % len(others)]
                msgs += [{"role": "user", "content": pairs[j][0]}, {"role": "assistant", "content": alone[j]}]
            got = ask(msgs + [{"role": "user", "content": q}])
            ok = got == alone[i]
            bad += not ok
            print("turn %d %r -> %r%s" % (turn, q, got, "" if ok else "   DIFFERS"))
    print("%d of %d answers after earlier turns differ from the answer alone" % (bad, 3 * len(pairs)))
finally:
    srv.terminate()
    srv.wait(timeout=60)
sys.exit((0 if bad else 1) if expect_fail else (1 if bad else 0))
