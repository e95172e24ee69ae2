#!/bin/bash
# bench/media/run.sh — image decoding and the two image processors: dlm
# (bench_media.c, against build/libdlmcore.a) vs Pillow + transformers'
# PIL-backend processors on the same file (load_image, then the processor),
# best of 20 runs, one thread each. Photos from Debian's python-matplotlib-data.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out="$root/bench/out"
mkdir -p "$out"
[ -f "$root/build/libdlmcore.a" ] || { cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=Release >/dev/null; cmake --build "$root/build" -j2 --target dlmcore >/dev/null; }
gcc -O2 -std=c11 -D_GNU_SOURCE -I"$root/src" -I"$root/build/gen" "$here/bench_media.c" "$root/build/libdlmcore.a" \
    $(pkg-config --libs libpng libjpeg libwebp libtiff-4 jansson yaml-0.1 libsodium libzstd) -lgif -lm -lpthread -o "$out/bench_media"
venv=$("$root/scripts/ref-venv.sh" torch2)
cpu=$(grep -m1 "model name" /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
echo "CPU: $cpu"
for f in /usr/share/matplotlib/mpl-data/sample_data/grace_hopper.jpg /usr/share/matplotlib/mpl-data/sample_data/Minduka_Present_Blue_Pack.png; do
    echo "$(basename "$f"):"
    echo "  dlm:          $("$out/bench_media" "$f" 20)"
    OMP_NUM_THREADS=1 "$venv/bin/python" - "$f" <<'PY'
import sys, time
import numpy as np
from transformers.image_utils import load_image
from transformers.models.siglip.image_processing_pil_siglip import SiglipImageProcessorPil
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil
sig = SiglipImageProcessorPil(image_mean=[0.5] * 3, image_std=[0.5] * 3, resample=3, size={"height": 224, "width": 224})
qw = Qwen2VLImageProcessorPil(min_pixels=3136, max_pixels=12845056)
best = [1e9] * 3
for _ in range(20):
    t0 = time.perf_counter(); im = load_image(sys.argv[1]); np.asarray(im); t1 = time.perf_counter()
    sig(im, return_tensors="np"); t2 = time.perf_counter(); qw(im, return_tensors="np"); t3 = time.perf_counter()
    best = [min(best[0], t1 - t0), min(best[1], t2 - t1), min(best[2], t3 - t2)]
print(f"  transformers: {im.size[0]}x{im.size[1]} decode {best[0]*1e3:.2f} ms, paligemma-224 {best[1]*1e3:.2f} ms, qwen2-vl {best[2]*1e3:.2f} ms")
PY
done
# the vision tower: one Qwen2-VL-2B block (plus patch embedding and merger) on
# grace_hopper.jpg's 42x36 patch grid, random weights; the tower is 32 blocks
gcc -O2 -std=c11 -D_GNU_SOURCE -I"$root/src" -I"$root/build/gen" "$here/bench_vit.c" "$root/build/libdlmcore.a" \
    $(pkg-config --libs libpng libjpeg libwebp libtiff-4 jansson yaml-0.1 libsodium libzstd) -lgif -lm -lpthread -o "$out/bench_vit"
"$out/bench_vit" 42 36
# PaliGemma-3B's tower (one SigLIP So400m layer of 27, patch embedding,
# projector) on 224x224, and one Gemma attention layer with the prefix-LM
# mask vs causal, random weights
gcc -O2 -std=c11 -D_GNU_SOURCE -I"$root/src" -I"$root/build/gen" "$here/bench_siglip.c" "$root/build/libdlmcore.a" \
    $(pkg-config --libs libpng libjpeg libwebp libtiff-4 jansson yaml-0.1 libsodium libzstd) -lgif -lm -lpthread -o "$out/bench_siglip"
"$out/bench_siglip"
