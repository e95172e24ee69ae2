#!/usr/bin/env bash
# Issue 30 point 8, the small surprises of a new user's first hour, each
# with its expected behaviour:
#   - `dlm templates` alone lists; the columns line up; the sample prompts
#     show without --json
#   - YAML errors point at the line to fix (where a bracket/quote opened, the
#     key that lacks its ':') and carry a hint
#   - unknown frontmatter keys and template names get a "did you mean"
#   - `dlm doctor` prints a broken document's error once, well formed
#   - `dlm prompt "question"` says the document is missing
#   - a closed pipe on stdout ends a command quietly, as SIGPIPE (git)
#   - error class names: on location-less errors always, on file:line ones
#     with -v, as `dlm --help` says
#   - `dlm export` while the first run trains says a run is in progress
#   - the Ollama name defaults to the document's file name, sanitized
#   - the export summary counts adapter.gguf's own tensors
set -euo pipefail
. "$DLM_SRC/tests/cli/lib.sh"
py() { /usr/bin/python3 -c "$@"; }

# ---- templates ----------------------------------------------------------------
"$DLM" templates > alone.txt || fail "dlm templates alone: exit $?"
"$DLM" templates list > list.txt
cmp -s alone.txt list.txt || fail "'dlm templates' differs from 'dlm templates list'"
py "
import json, sys
lines = open('list.txt').read().splitlines()
head = lines[0]
cols = [head.index(c) for c in ('steps', 'time', 'summary')]
meta = {m['name']: m for m in json.load(open('$DLM_SRC/templates/index.json'))}
rows = [l for l in lines[1:] if not l.startswith(' ')]
assert len(rows) == len(meta), (len(rows), len(meta))
for r in rows:
    name = r.split()[0]
    m = meta[name]
    # every cell starts under its header, separated by at least one space
    assert r[cols[0]:].startswith(str(m['expected_steps'])) and r[cols[0] - 1] == ' ', r
    assert r[cols[1]:].startswith(m['expected_duration']) and r[cols[1] - 1] == ' ', r
    assert r[cols[2]:] == m['summary'] and r[cols[2] - 1] == ' ', r
# each template's sample prompts, under it, in order
i = 1
for name in meta:
    assert lines[i].split()[0] == name, (lines[i], name)
    i += 1
    for q in meta[name]['sample_prompts']:
        assert lines[i].strip() == 'ask: ' + q, (lines[i], q)
        i += 1
assert i == len(lines)
" || fail "templates list layout: $(head -5 list.txt)"
rc=0; "$DLM" templates lst 2> err.txt || rc=$?
[ $rc -eq 2 ] || fail "templates lst: exit $rc"

# ---- YAML errors: the line to fix, and a hint ------------------------------------
hdr=$'---\ndlm_id: '$ID$'\nbase_model: tiny\n'
yaml_err() {  # yaml_err FILE "EXPECTED file:line:col" HINT-WORDS
    local rc=0
    "$DLM" show "$1" > /dev/null 2> err.txt || rc=$?
    [ $rc -eq 1 ] || fail "$1: exit $rc"
    grep -q "^dlm: error: $2: invalid YAML" err.txt || fail "$1: expected $2: $(cat err.txt)"
    grep -q "^hint: .*$3" err.txt || fail "$1: no hint about '$3': $(cat err.txt)"
}
printf '%straining:\n  learning_rate: [0.004\n  num_epochs: 3\n---\nx\n' "$hdr" > flow.dlm
yaml_err flow.dlm "flow.dlm:5:18" "close the '\['"
printf '%straining:\n  num_epochs 3\n  lora_r: 4\n---\nx\n' "$hdr" > nocolon.dlm
yaml_err nocolon.dlm "nocolon.dlm:5:3" "a key needs ': '"
printf '%ssystem_prompt: "unclosed\n---\nx\n' "$hdr" > quote.dlm
yaml_err quote.dlm "quote.dlm:4:16" "close the quote"
printf '%straining:\n\tlora_r: 4\n---\nx\n' "$hdr" > tab.dlm
yaml_err tab.dlm "tab.dlm:5:1" "never tabs"
printf '%straining:\n  lora_r: 4\n    num_epochs: 3\n---\nx\n' "$hdr" > indent.dlm
yaml_err indent.dlm "indent.dlm:6:15" "indented deeper"

# ---- did you mean ---------------------------------------------------------------
printf '%straining:\n  lora_rr: 4\n---\nx\n' "$hdr" > key.dlm
rc=0; "$DLM" show key.dlm 2> err.txt > /dev/null || rc=$?
[ $rc -eq 1 ] && grep -qx "dlm: error: key.dlm:5:3: training.lora_rr: Extra inputs are not permitted" err.txt &&
    grep -q "^hint: did you mean 'training.lora_r'?" err.txt || fail "unknown key: $(cat err.txt)"
printf '%sbase_modle: tiny\n---\nx\n' "$hdr" > top.dlm
rc=0; "$DLM" show top.dlm 2> err.txt > /dev/null || rc=$?
grep -q "^hint: did you mean 'base_model'?" err.txt || fail "unknown top key: $(cat err.txt)"
rc=0; "$DLM" init t.dlm --base tiny --template tutr 2> err.txt || rc=$?
[ $rc -eq 2 ] && grep -qx "hint: did you mean '--template tutor'?" err.txt || fail "template: $rc $(cat err.txt)"
[ ! -e t.dlm ] || fail "init wrote a document for an unknown template"

# ---- doctor: one error, well formed ------------------------------------------------
printf '%sfoo: a: b\n---\nx\n' "$hdr" > broken.dlm
rc=0; "$DLM" doctor broken.dlm > out.txt 2> err.txt || rc=$?
[ $rc -eq 1 ] || fail "doctor broken: exit $rc"
[ "$(grep -c 'mapping values are not allowed' err.txt)" -eq 1 ] || fail "doctor printed the error $(grep -c mapping err.txt) times: $(cat err.txt)"
grep -q "(hint: )\|:0:\|warning" err.txt && fail "doctor's malformed line: $(cat err.txt)"
head -1 err.txt | grep -q "^dlm: error: broken.dlm:4:" || fail "doctor error: $(cat err.txt)"

# ---- prompt without a document -----------------------------------------------------
rc=0; "$DLM" prompt "What is the capital of France?" < /dev/null > out.txt 2> err.txt || rc=$?
[ $rc -eq 2 ] || fail "prompt QUESTION: exit $rc"
grep -q "no document 'What is the capital of France?': the first argument is the .dlm document" err.txt &&
    ! grep -q "empty query" err.txt || fail "prompt QUESTION: $(cat err.txt)"

# ---- class names and -v, as the help says --------------------------------------------
"$DLM" --help > out.txt
grep -q -- "-v, --verbose  more detail; class names on file:line errors too" out.txt || fail "help: $(cat out.txt)"
"$DLM" show key.dlm > out.txt 2>&1 || true
grep -q "SchemaValidationError" out.txt && fail "class name on a located error without -v"
"$DLM" -v show key.dlm > out.txt 2>&1 || true
grep -q "^dlm: error: SchemaValidationError: key.dlm:5:3" out.txt || fail "-v: no class name: $(cat out.txt)"
rc=0; "$DLM" prompt nothing.dlm x > out.txt 2>&1 || rc=$?
grep -q "^dlm: error: DocumentNotFoundError: no document 'nothing.dlm'" out.txt || fail "class name on an unlocated error: $(cat out.txt)"

# ---- a trained document: metrics into a closed pipe, export naming -------------------
write_doc "My Notes (v2).dlm" 2
S="$DLM_HOME/store/$ID"
# a training run in progress (its lock, held by a live process): export says so
sleep 60 & holder=$!
mkdir -p "$S"
printf '%s\n%s\n%s\ntrain\n' "$holder" "$(py 'import socket; print(socket.gethostname())')" "$(date +%s)" > "$S/.lock"
rc=0; "$DLM" export "My Notes (v2).dlm" --skip-ollama > out.txt 2> err.txt || rc=$?
kill "$holder"; wait "$holder" 2>/dev/null || true
rm -f "$S/.lock"
[ $rc -eq 1 ] && grep -q "a training run is in progress (PID $holder, dlm train)" err.txt &&
    ! grep -q "train one first" err.txt || fail "export during training: $rc $(cat err.txt)"

"$DLM" train "My Notes (v2).dlm" -q > /dev/null
# stdout's reader is gone before dlm writes: no "cannot write", the status of SIGPIPE
for c in "templates" "metrics My Notes (v2).dlm" "show My Notes (v2).dlm"; do
    py "
import os, subprocess, sys, shlex
r, w = os.pipe(); os.close(r)
args = ['$DLM'] + ('$c'.split(' ', 1) if '$c' != 'templates' else ['templates'])
p = subprocess.run(args, stdout=w, stderr=subprocess.PIPE)
os.close(w)
assert p.stderr == b'', p.stderr
assert p.returncode == -13, p.returncode
" || fail "closed pipe: $c"
done

out=$("$DLM" export "My Notes (v2).dlm" --quant F32 --skip-ollama)
grep -q "ollama create my-notes-v2:v0001 -f Modelfile" <<<"$out" || fail "ollama name: $out"
X="$S/exports/F32"
# tensor counts read from the files' GGUF headers (magic, version, n_tensors)
n_base=$(py "import struct; print(struct.unpack('<4sIQ', open('$X/base.F32.gguf','rb').read(16))[2])")
n_ad=$(py "import struct; print(struct.unpack('<4sIQ', open('$X/adapter.gguf','rb').read(16))[2])")
[ "$n_ad" -ne "$n_base" ] || fail "adapter and base have the same tensor count?"
grep -q "base.F32.gguf ($n_base tensors: $n_base F32), adapter.gguf ($n_ad tensors: F32 LoRA A and B)" <<<"$out" ||
    fail "summary tensor counts (base $n_base, adapter $n_ad): $out"
py "import json; m = json.load(open('$X/export_manifest.json')); assert m['ollama_name'] == 'my-notes-v2:v0001', m" ||
    fail "manifest ollama_name"
echo ok
