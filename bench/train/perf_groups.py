#!/usr/bin/python3
"""Groups `perf report --sort symbol --stdio` lines (stdin) of a training
run by kernel family and prints a markdown table (bench/train/perf.sh)."""
import re
import sys

GROUPS = [
    ("GEMM micro-kernel (gemm_block, gemm_bf16_block)", r"gemm_block|gemm_bf16_block|gemm_amx_block"),
    ("GEMM packing + dequantizing tiles (bf16 pairs/zip)", r"pack_|dequant|kq_|bf16_pairs|bf16_zip"),
    ("attention fwd/bwd", r"attn_"),
    ("LM head softmax / cross-entropy", r"softmax_tile|xent|head"),
    ("LoRA narrow products", r"narrow"),
    ("RMSNorm / RoPE / SwiGLU / residual", r"rms_|rope|swiglu|dsum|vexp|add_rows"),
    ("dropout, AdamW, clipping", r"adamw|dropout|philox|clip|mask_avx|mask_scalar|apply_avx|apply_scalar|drop_add"),
    ("kernel (page faults, scheduler)", r"^\[k\]"),
]


def main():
    tot = {g: 0.0 for g, _ in GROUPS}
    other = {}
    for line in sys.stdin:
        m = re.match(r"\s*([0-9.]+)%\s+(\[[.k]\])\s+(\S+)", line)
        if not m:
            continue
        pct, kind, sym = float(m.group(1)), m.group(2), m.group(3)
        key = ("[k] " if kind == "[k]" else "") + sym
        for g, pat in GROUPS:
            if re.search(pat, key):
                tot[g] += pct
                break
        else:
            other[sym] = other.get(sym, 0) + pct
    print("| where | share of the step |")
    print("|---|---|")
    for g, _ in GROUPS:
        print(f"| {g} | {tot[g]:.1f}% |")
    top = ", ".join(s for s, _ in sorted(other.items(), key=lambda kv: -kv[1])[:4])
    print(f"| other ({top}, ...) | {sum(other.values()):.1f}% |")


if __name__ == "__main__":
    main()
