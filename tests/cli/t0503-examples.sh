#!/usr/bin/env bash
# examples/ stay valid documents on the embedded base: each one parses, is
# based on tiny, and has the sections it is there to show.
. "$(dirname "$0")/lib.sh"
for f in "$DLM_SRC"/examples/*.dlm; do
    "$DLM" show "$f" --json > "$T/show.json" || fail "dlm show $f"
    grep -q '"base_model": "tiny"' "$T/show.json" || fail "$f is not on the tiny base"
done
sections() { "$DLM" show "$DLM_SRC/examples/$1" | sed -n 's/^  sections *//p'; }
case "$(sections tutor.dlm)" in *"1 prose, 1 instruction, 0 preference"*) ;; *) fail "tutor: $(sections tutor.dlm)" ;; esac
case "$(sections notes.dlm)" in *"prose, 0 instruction, 0 preference"*) ;; *) fail "notes: $(sections notes.dlm)" ;; esac
case "$(sections preference.dlm)" in *"1 instruction, 1 preference"*) ;; *) fail "preference: $(sections preference.dlm)" ;; esac
echo "ok: $(ls "$DLM_SRC"/examples/*.dlm | wc -l) examples"
