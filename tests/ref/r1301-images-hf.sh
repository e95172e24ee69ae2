#!/bin/bash
# r1301: image decoding and the PaliGemma (SigLIP) and Qwen2-VL image
# processors vs transformers 5.23 + Pillow 13 (the PIL-backend processor
# classes): real photos from Debian's python-matplotlib-data re-encoded as
# PNG/JPEG/WebP/GIF/BMP/TIFF and synthetic edge cases (1x1, odd sizes, alpha,
# palette and its transparency key, 16-bit, EXIF orientations 1-8, CMYK
# JPEG, interlaced PNG). RGB bytes must be equal; pixel values within 1e-5;
# image_grid_thw equal; files PIL refuses (truncated PNG/JPEG) refused.
set -eu
: "${DLM_SRC:?}" "${DLM_BUILD:?}"
if [ ! -f /usr/share/matplotlib/mpl-data/sample_data/grace_hopper.jpg ]; then
    if [ "${DLM_REF_SKIP:-}" = "1" ]; then echo "skip: python-matplotlib-data not installed"; exit 77; fi
    echo "r1301: the photos come from Debian's python-matplotlib-data (scripts/deps.sh installs it)" >&2
    exit 1
fi
venv=$("$DLM_SRC/scripts/ref-venv.sh" torch2) || {
    if [ "${DLM_REF_SKIP:-}" = "1" ]; then echo "skip: the torch2 reference venv is unavailable"; exit 77; fi
    exit 1
}
dir=$(mktemp -d "${TMPDIR:-/tmp}/dlm-r1301.XXXXXX")
trap 'rm -rf "$dir"' EXIT
"$venv/bin/python" "$DLM_SRC/tests/ref/media/images_hf.py" "$dir"
"$DLM_BUILD/test_media" --ref "$dir" | tail -3
