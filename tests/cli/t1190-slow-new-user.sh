#!/usr/bin/env bash
# Issue 30, "done when": a new user's first hour, scripted from the README
# alone on the embedded base tiny: init -> edit -> train -> prompt -> repl in
# tmux -> api -> export -> copy -> retrain. Each step asserts what issue 30
# says a user must see (its point numbers are in the comments); the unit of
# each point has its own quicker test (t1101-t1105, t1120-t1123, t1140,
# t1141), this one checks they hold together in one session.
set -euo pipefail
. "$DLM_SRC/tests/cli/lib.sh"
command -v tmux >/dev/null || fail "tmux is not installed (scripts/deps.sh)"
S=dlmnew$$
export TMUX_TMPDIR="$T"
api_pid=
trap 'tmux kill-server 2>/dev/null; [ -n "$api_pid" ] && kill $api_pid 2>/dev/null; rm -rf "$T"' EXIT

# --- the gallery (point 8): `dlm templates` alone lists, with sample prompts
"$DLM" templates > gallery.txt || fail "dlm templates alone: exit $?"
grep -q '^tutor ' gallery.txt || fail "no tutor row: $(cat gallery.txt)"
grep -q 'ask: ' gallery.txt || fail "no sample prompts without --json"

# --- init, then edit: a fourth Q&A pair of the user's own
"$DLM" init "My Notes.dlm" --template tutor > init.txt || fail "init"
cat >> "My Notes.dlm" <<'DOC'

### Q
Where does rain go?
### A
Rain flows into rivers and back to the oceans.
DOC
# a misspelt key gets a did-you-mean (point 8), and nothing is trained
sed 's/^  num_epochs: 60/  num_epoch: 60/' "My Notes.dlm" > typo.dlm
if "$DLM" train typo.dlm > typo.out 2> typo.err; then fail "a misspelt key trained"; fi
grep -q "did you mean 'training.num_epochs'" typo.err || fail "no did-you-mean: $(cat typo.err)"

# --- --resume before any run (point 4)
if "$DLM" train "My Notes.dlm" --resume > r0.out 2> r0.err; then fail "--resume with no run trained"; fi
grep -q "nothing to resume: no run has started yet" r0.err || fail "resume message: $(cat r0.err)"

# --- train: a small document holds no row out, and says so (point 1)
"$DLM" train "My Notes.dlm" > train.out 2> train.err || { cat train.err >&2; fail "train"; }
grep -q "every row trained" train.out train.err || fail "the summary does not say every row trained: $(cat train.out)"
grep -q "held out:" train.err train.out && fail "a small document held a row out"

# --- prompt: every question, the user's own included, answered as trained
ask() { "$DLM" prompt "My Notes.dlm" "$1" --temp 0 -n 40 2>/dev/null; }
check() {  # check QUESTION ANSWER
    local got; got=$(ask "$1")
    [ "$got" = "$2" ] || fail "asked '$1': got '$got', want '$2'"
}
check "What makes water evaporate?" "Heat from the sun makes water evaporate into vapour."
check "What is condensation?" "Condensation is water vapour cooling back into liquid droplets."
check "What are the kinds of precipitation?" "Rain, snow and hail are the kinds of precipitation."
check "Where does rain go?" "Rain flows into rivers and back to the oceans."
# the document missing: said, not "empty query" (point 8)
if "$DLM" prompt "What is condensation?" > np.out 2> np.err < /dev/null; then fail "prompt without a document"; fi
grep -q "no document" np.err || fail "missing document message: $(cat np.err)"

# --- --resume after a completed run (point 4)
if "$DLM" train "My Notes.dlm" --resume > r1.out 2> r1.err; then fail "--resume after a completed run trained"; fi
grep -q "nothing to resume: the last run completed as v0001" r1.err || fail "resume message: $(cat r1.err)"

# --- metrics into a closed pipe ends quietly (point 8)
"$DLM" metrics "My Notes.dlm" 2> pipe.err | head -1 > /dev/null || true
grep -q "cannot write" pipe.err && fail "metrics | head: $(cat pipe.err)"

# --- the repl (points 9 and 3): trained questions as turns 1 and 2 are
# answered as when asked alone, then a hot turn (broken UTF-8 is likely at
# temperature 5) is answered and saved, not refused
tmux new-session -d -s $S -x 160 -y 50 "LC_ALL=C.UTF-8 '$DLM' repl 'My Notes.dlm' --max-tokens 40 --seed 1; echo EXIT=\$? > exit.txt; sleep 60"
pane() { tmux capture-pane -p -J -t $S -S -600; }
wait_for() {
    for _ in $(seq $((${2:-30} * 10))); do grep -qF -- "$1" <<< "$(pane)" && return 0; sleep 0.1; done
    pane >&2; fail "never saw: $1"
}
wait_for "Ctrl-D to exit"
tmux send-keys -t $S "/params temperature=0" Enter
wait_for "temperature=0"
tmux send-keys -t $S "What is condensation?" Enter
tmux send-keys -t $S "Where does rain go?" Enter
tmux send-keys -t $S "/params temperature=5" Enter
wait_for "temperature=5"
tmux send-keys -t $S "Tell me something." Enter
tmux send-keys -t $S "/save conv.json" Enter
wait_for "saved 6 messages to conv.json"
pane | grep -q "TokenizerError" && { pane >&2; fail "the repl refused its own answer"; }
python3 - <<'PY' || fail "repl conversation: $(cat conv.json)"
import json
c = json.load(open("conv.json", encoding="utf-8"))
assert len(c) == 6, len(c)
assert c[1]["content"] == "Condensation is water vapour cooling back into liquid droplets.", c[1]
assert c[3]["content"] == "Rain flows into rivers and back to the oceans.", c[3]
assert c[4]["content"] == "Tell me something." and c[5]["role"] == "assistant", c[4:]
PY
tmux send-keys -t $S C-d
for _ in $(seq 300); do [ -s exit.txt ] && break; sleep 0.1; done
[ "$(cat exit.txt)" = "EXIT=0" ] || fail "repl exit: $(cat exit.txt 2>/dev/null)"

# --- the API: the same question as turn 2 of a conversation (point 9)
: > url.txt
"$DLM" api "My Notes.dlm" --port 0 > url.txt 2> api.err &
api_pid=$!
for _ in $(seq 600); do [ -s url.txt ] && break; sleep 0.1; done
url=$(cat url.txt)
[ -n "$url" ] || { cat api.err >&2; fail "api did not start"; }
python3 - "$url" <<'PY' || fail "api conversation"
import json, sys, urllib.request
url = sys.argv[1].rstrip("/")
model = json.load(urllib.request.urlopen(url + "/v1/models", timeout=60))["data"][0]["id"]
body = {"model": model, "temperature": 0, "max_tokens": 40, "messages": [
    {"role": "user", "content": "What makes water evaporate?"},
    {"role": "assistant", "content": "Heat from the sun makes water evaporate into vapour."},
    {"role": "user", "content": "What are the kinds of precipitation?"}]}
req = urllib.request.Request(url + "/v1/chat/completions", json.dumps(body).encode(),
                             {"Content-Type": "application/json"})
got = json.load(urllib.request.urlopen(req, timeout=120))["choices"][0]["message"]["content"]
assert got == "Rain, snow and hail are the kinds of precipitation.", got
PY
kill $api_pid; wait $api_pid 2>/dev/null || true; api_pid=

# --- export: Ollama name from the file name, the adapter's own tensor count (point 8)
"$DLM" export "My Notes.dlm" > export.out 2> export.err || { cat export.err >&2; fail "export"; }
grep -rq "my-notes:v0001" export.out export.err "$DLM_HOME" || fail "Ollama name: $(cat export.out)"
grep -q "adapter.gguf ([0-9]* tensors" export.out || fail "adapter tensor count: $(cat export.out)"

# --- copy with cp: refused, with the way out (point 5)
cp "My Notes.dlm" copy.dlm
sed -i 's/Rain flows into rivers and back to the oceans./Rain soaks into the ground./' copy.dlm
if "$DLM" train copy.dlm > cp.out 2> cp.err; then fail "a cp'd document trained into the original's store"; fi
grep -q "init --from" cp.err || fail "no init --from hint: $(cat cp.err)"
check "Where does rain go?" "Rain flows into rivers and back to the oceans."
# the way out: a copy with its own id and store, trained; the original unchanged
"$DLM" init --from copy.dlm copy.dlm > from.out || fail "init --from"
"$DLM" train copy.dlm > t2.out 2> t2.err || { cat t2.err >&2; fail "train the re-id'd copy"; }
got=$("$DLM" prompt copy.dlm "Where does rain go?" --temp 0 -n 40 2>/dev/null)
[ "$got" = "Rain soaks into the ground." ] || fail "the copy answers '$got'"
check "Where does rain go?" "Rain flows into rivers and back to the oceans."
echo ok
