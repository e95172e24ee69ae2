"""The original's own HF teacher (document-language-model 0.10.0,
dlm.synth.teachers.HfTeacher, on CPU) asked what `dlm -v synth --teacher
hf:MODEL` logged in its "synth: ask:" lines; its replies must equal dlm's
"synth: reply:" texts (stripped, as the original strips; cut at a NUL byte,
which dlm's C strings cannot hold).

    hf_teacher_orig.py MODEL_DIR DLM_STDERR MAX_NEW_TOKENS"""
import json, sys

from dlm.synth.teachers import HfTeacher

model_dir, log, max_new = sys.argv[1], sys.argv[2], int(sys.argv[3])
asks, replies = [], []
for line in open(log, encoding="utf-8"):
    if line.startswith("synth: ask: "):
        asks.append(json.loads(line[len("synth: ask: "):]))
    elif line.startswith("synth: reply: "):
        replies.append(json.loads(line[len("synth: reply: "):]))
assert asks and len(asks) == len(replies)
t = HfTeacher(model_dir, device="cpu")
for ask, reply in zip(asks, replies):
    try:
        got = t.generate(ask["system"], ask["user"], max_new_tokens=max_new, temperature=0.0)
    except Exception as ex:          # TeacherInvocationError: an empty reply
        got = "" if "empty output" in str(ex) else None
        if got is None:
            raise
    want = reply.strip()
    got = got.split("\x00")[0].strip() if "\x00" in got else got
    assert got == want, f"the original's HfTeacher replied {got!r}, dlm {want!r}"
print(f"original HfTeacher: {len(asks)} replies equal dlm's")
