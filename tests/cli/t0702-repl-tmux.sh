#!/usr/bin/env bash
# dlm repl in a real terminal (tmux send-keys / capture-pane) on a document
# over the embedded base: streaming (the answer grows on screen), Ctrl-C
# mid-answer (partial kept, " [cancelled]", still in the loop), Ctrl-C at
# the prompt, /params temperature=0 (then the answer equals
# `dlm prompt --temp 0`), /clear, /history and the KV cache across two
# turns, /save, /model, /adapter, the history file in the store, Ctrl-D;
# a non-ASCII line comes back as typed under LC_ALL=C.
set -euo pipefail
. "$DLM_SRC/tests/cli/lib.sh"
command -v tmux >/dev/null || fail "tmux is not installed (scripts/deps.sh)"
S=dlmrepl$$
export TMUX_TMPDIR="$T"
trap 'tmux kill-server 2>/dev/null; rm -rf "$T"' EXIT
cat > d.dlm <<'DOC'
---
dlm_id: 01JD0000000000000000000702
dlm_version: 15
base_model: tiny
---
# Notes

Paris is the capital of France.
DOC
"$DLM" prompt d.dlm "What is the capital of France?" --temp 0 > ref.txt 2>/dev/null
tmux new-session -d -s $S -x 150 -y 50 "LC_ALL=C DLM_TEST_EMIT_DELAY_MS=2 '$DLM' repl d.dlm -v --temp 3 --max-tokens 3000 --seed 42; echo EXIT=\$? > exit.txt; sleep 60"
pane() { tmux capture-pane -p -J -t $S -S -200; }
# wait_for TEXT [SECONDS]: until TEXT is on screen
wait_for() {
    for _ in $(seq $((${2:-10} * 10))); do grep -qF -- "$1" <<< "$(pane)" && return 0; sleep 0.1; done
    pane >&2; fail "never saw: $1"
}
wait_for "Ctrl-D to exit"
wait_for "note: no trained adapter yet; answering with the base"
# a long hot answer (temperature 3, seed 42: it runs to the context limit, and
# DLM_TEST_EMIT_DELAY_MS=2 paces its ~1000 pieces over 2 s on any machine): it grows
# on screen while it streams, then Ctrl-C cancels it
tmux send-keys -t $S "Tell me a story." Enter
sleep 0.8
a=$(pane | wc -c)
sleep 0.5
b=$(pane | wc -c)
[ "$b" -gt "$a" ] || fail "the answer did not grow while streaming ($a -> $b bytes)"
tmux send-keys -t $S C-c
wait_for " [cancelled]"
wait_for "generated]"
# Ctrl-C at the prompt drops the half-typed line and stays in the loop
tmux send-keys -t $S "half typed"
sleep 0.2
tmux send-keys -t $S C-c
sleep 0.2
tmux send-keys -t $S "/history" Enter
wait_for "assistant: "
grep -q "^assistant: .* \[cancelled\]$" <<< "$(pane)" || { pane >&2; fail "the partial answer is not kept with [cancelled]"; }
tmux send-keys -t $S "/params temperature=0 max_new_tokens=256" Enter
wait_for "temperature=0 top_p=1"
tmux send-keys -t $S "/clear" Enter
wait_for "conversation cleared"
tmux send-keys -t $S "/history" Enter
wait_for "(empty)"
tmux send-keys -t $S "What is the capital of France?" Enter
wait_for "[19 prompt tokens"
# greedy: the same answer as dlm prompt --temp 0
grep -qxF "$(cat ref.txt)" <<< "$(pane)" || { pane >&2; fail "greedy answer differs from dlm prompt: $(cat ref.txt)"; }
tmux send-keys -t $S "And of Germany, où?" Enter
wait_for "And of Germany, où?"
for _ in $(seq 600); do [ "$(pane | grep -c 'generated]')" -ge 3 ] && break; sleep 0.1; done
# turn 2 renders both turns and evaluates only what the cache lacks
python3 - "$(pane | grep 'generated]' | tail -1)" <<'PY' || fail "turn 2 did not reuse the cache"
import re, sys
m = re.search(r"\[(\d+) prompt tokens, (\d+) from the cache", sys.argv[1])
n, cached = int(m.group(1)), int(m.group(2))
assert n > 19 + 5 and cached >= 19, (n, cached)
PY
tmux send-keys -t $S "/save conv.json" Enter
wait_for "saved 4 messages to conv.json"
python3 - <<'PY' || fail "/save wrote $(cat conv.json)"
import json
c = json.load(open("conv.json"))
assert [m["role"] for m in c] == ["user", "assistant", "user", "assistant"], c
assert c[0]["content"] == "What is the capital of France?" and c[2]["content"] == "And of Germany, où?", c
PY
grep -qxF "$(python3 -c 'import json; print(json.load(open("conv.json"))[1]["content"])')" ref.txt ||
    fail "saved answer differs from the screen's"
tmux send-keys -t $S "/model" Enter
wait_for "dialect: "
tmux send-keys -t $S "/adapter v0003" Enter
wait_for "no trained version v0003"
tmux send-keys -t $S "/nope" Enter
wait_for "unknown command /nope"
tmux send-keys -t $S C-d
for _ in $(seq 300); do [ -s exit.txt ] && break; sleep 0.1; done
[ "$(cat exit.txt)" = "EXIT=0" ] || fail "Ctrl-D: $(cat exit.txt 2>/dev/null)"
h="$DLM_HOME/repl_history"   # no store yet (untrained): DLM_HOME
grep -qF 'And\040of\040Germany,\040où?' "$h" || fail "history file: $(cat "$h" 2>/dev/null)"
echo ok
