"""Run llama.cpp's own convert_hf_to_gguf.py (the source node-llama-cpp
ships, LLAMA_SRC) on an HF folder: the reference for dlm's multimodal
export. Its BPE pre-tokenizer check only knows real checkpoints' hashes, so
the test fixture's tokenizer is named here (PRE) rather than recognised.

  convert_ref.py LLAMA_SRC PRE convert_hf_to_gguf-arguments...
"""
import os, sys

src, pre = sys.argv[1], sys.argv[2]
sys.path[:0] = [os.path.join(src, "gguf-py"), src]
sys.argv = [os.path.join(src, "convert_hf_to_gguf.py")] + sys.argv[3:]
import conversion.base as base
base.TextModel.get_vocab_base_pre = lambda self, tokenizer: pre
import runpy
runpy.run_path(sys.argv[0], run_name="__main__")
