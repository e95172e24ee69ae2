#!/bin/bash
# r1303: Qwen2-VL's M-RoPE vs transformers: get_rope_index's (t, h, w)
# positions and delta for text + two images (equal), the mrope_section cos/sin
# tables and a rotated q (within 1e-5), on a small random Qwen2VLConfig.
set -eu
: "${DLM_SRC:?}" "${DLM_BUILD:?}"
venv=$("$DLM_SRC/scripts/ref-venv.sh" torch2) || {
    if [ "${DLM_REF_SKIP:-}" = "1" ]; then echo "skip: the torch2 reference venv is unavailable"; exit 77; fi
    exit 1
}
dir=$(mktemp -d "${TMPDIR:-/tmp}/dlm-r1303.XXXXXX")
trap 'rm -rf "$dir"' EXIT
"$venv/bin/python" "$DLM_SRC/tests/ref/media/mrope_hf.py" "$dir" 2>/dev/null
"$DLM_BUILD/test_vision" --mrope "$dir"
