#!/usr/bin/env bash
# Issue 30 point 3: a hot answer whose sampled bytes are not UTF-8 does not
# wedge the repl. In a real terminal (tmux), `/params temperature=5` and a
# seed whose answer holds broken byte tokens (seed 1 on tiny: an 0xE9 lead
# byte without its continuation, among others), then two more turns: each
# is answered (no "TokenizerError: text is not valid UTF-8"), and `/save`
# writes exactly the messages it says it wrote. The kept answer is the raw
# bytes of `dlm prompt` (same rendering, seed and sampler) decoded as
# Python's bytes.decode('utf-8', 'replace') decodes them: U+FFFD for each
# maximal invalid subpart, what the API does to its JSON bodies.
set -euo pipefail
. "$DLM_SRC/tests/cli/lib.sh"
command -v tmux >/dev/null || fail "tmux is not installed (scripts/deps.sh)"
S=dlmutf$$
export TMUX_TMPDIR="$T"
trap 'tmux kill-server 2>/dev/null; rm -rf "$T"' EXIT
cat > d.dlm <<'DOC'
---
dlm_id: 01JD0000000000000000001121
dlm_version: 15
base_model: tiny
---
# Notes

Paris is the capital of France.
DOC
# the reference: the raw bytes of the same first turn, not valid UTF-8
"$DLM" prompt d.dlm "Tell me a story." --temp 5 --seed 1 -n 200 > ref.bin 2>/dev/null
python3 -c "
b = open('ref.bin', 'rb').read()
try:
    b.decode('utf-8')
except UnicodeDecodeError:
    raise SystemExit(0)
raise SystemExit('the reference answer is valid UTF-8: the test needs a seed that breaks it')
" || fail "reference"
tmux new-session -d -s $S -x 150 -y 50 "LC_ALL=C.UTF-8 '$DLM' repl d.dlm -v --max-tokens 200 --seed 1; echo EXIT=\$? > exit.txt; sleep 60"
pane() { tmux capture-pane -p -J -t $S -S -400; }
wait_for() {  # wait_for TEXT [SECONDS]
    for _ in $(seq $((${2:-20} * 10))); do grep -qF -- "$1" <<< "$(pane)" && return 0; sleep 0.1; done
    pane >&2; fail "never saw: $1"
}
turns() { pane | grep -c 'generated]' || true; }
wait_turns() {  # wait_turns N: until N answers are done
    for _ in $(seq 600); do [ "$(turns)" -ge "$1" ] && return 0; sleep 0.1; done
    pane >&2; fail "turn $1 never finished"
}
wait_for "Ctrl-D to exit"
tmux send-keys -t $S "/params temperature=5" Enter
wait_for "temperature=5 top_p=1"
tmux send-keys -t $S "Tell me a story." Enter
wait_turns 1
tmux send-keys -t $S "And another?" Enter
wait_turns 2
tmux send-keys -t $S "/params temperature=0" Enter
wait_for "temperature=0 top_p=1"
tmux send-keys -t $S "What is the capital of France?" Enter
wait_turns 3
pane | grep -q "TokenizerError\|not valid UTF-8" && { pane >&2; fail "the repl refused its own answer"; }
# out of the shared range: refused with the range, the setting kept
tmux send-keys -t $S "/params temperature=9" Enter
wait_for "temperature must be in [0, 5] (0 = greedy), got 9"
tmux send-keys -t $S "/save conv.json" Enter
wait_for "saved 6 messages to conv.json"
python3 - <<'PY' || fail "/save wrote $(cat conv.json)"
import json
raw = open("conv.json", "rb").read()
raw.decode("utf-8")                          # strict: valid UTF-8 throughout
c = json.loads(raw)
assert [m["role"] for m in c] == ["user", "assistant"] * 3, [m["role"] for m in c]
assert [c[0]["content"], c[2]["content"], c[4]["content"]] == \
    ["Tell me a story.", "And another?", "What is the capital of France?"], c
ref = open("ref.bin", "rb").read().decode("utf-8", "replace").rstrip("\n")
assert "\ufffd" in ref and c[1]["content"] == ref, (c[1]["content"][:120], ref[:120])
assert c[3]["content"] and c[5]["content"], c
PY
tmux send-keys -t $S C-d
for _ in $(seq 300); do [ -s exit.txt ] && break; sleep 0.1; done
[ "$(cat exit.txt)" = "EXIT=0" ] || fail "Ctrl-D: $(cat exit.txt 2>/dev/null)"
echo ok
