#!/usr/bin/env python3
"""Generate src/weights/registry_table.c from the base-model registry TSV.

    scripts/gen-registry.py [TSV] > src/weights/registry_table.c

TSV defaults to docs/reference/base-registry.tsv.
The output is committed; run this only when the registry changes. Columns
the TSV lacks (license URL, fp16 size, recommended sequence length,
reasoning-tuned flag, effective context) are the EXTRA table below; rows
dlm adds (the two larger coders and the embedded `tiny`) are in ADDED.
"""
import csv, json, os, sys

EXTRA = {  # key: (license_url, size_gb_fp16, recommended_seq_len, reasoning_tuned, context_length_effective)
    "qwen2.5-0.5b": ("https://huggingface.co/Qwen/Qwen2.5-0.5B-Instruct/blob/main/LICENSE", 1.0, 2048, 0, 0),
    "qwen2.5-1.5b": ("https://huggingface.co/Qwen/Qwen2.5-1.5B-Instruct/blob/main/LICENSE", 3.1, 2048, 0, 0),
    "qwen2.5-3b": ("https://huggingface.co/Qwen/Qwen2.5-3B-Instruct/blob/main/LICENSE", 6.2, 2048, 0, 0),
    "qwen2.5-coder-1.5b": ("https://huggingface.co/Qwen/Qwen2.5-Coder-1.5B-Instruct/blob/main/LICENSE", 3.1, 2048, 0, 0),
    "qwen3-1.7b": ("https://huggingface.co/Qwen/Qwen3-1.7B/blob/main/LICENSE", 3.4, 2048, 1, 0),
    "qwen3-1.7b-thinking": ("https://huggingface.co/Qwen/Qwen3-1.7B/blob/main/LICENSE", 3.4, 2048, 1, 0),
    "qwen3-4b": ("https://huggingface.co/Qwen/Qwen3-4B/blob/main/LICENSE", 8.0, 2048, 1, 0),
    "qwen3-8b": ("https://huggingface.co/Qwen/Qwen3-8B/blob/main/LICENSE", 16.0, 2048, 1, 0),
    "llama-3.2-1b": ("https://www.llama.com/llama3_2/license/", 2.5, 4096, 0, 0),
    "llama-3.2-3b": ("https://www.llama.com/llama3_2/license/", 6.5, 4096, 0, 0),
    "llama-3.3-8b-instruct": ("https://llama.meta.com/llama3/license", 16.5, 4096, 0, 8192),
    "smollm3-3b": ("https://huggingface.co/HuggingFaceTB/SmolLM3-3B", 6.2, 4096, 1, 0),
    "olmo-2-7b-instruct": ("https://huggingface.co/allenai/OLMo-2-1124-7B-Instruct", 14.6, 2048, 0, 0),
    "gemma-2-2b-it": ("https://ai.google.dev/gemma/terms", 5.2, 2048, 0, 0),
    "gemma-2-9b-it": ("https://ai.google.dev/gemma/terms", 18.0, 2048, 0, 0),
    "smollm2-135m": ("https://huggingface.co/HuggingFaceTB/SmolLM2-135M-Instruct", 0.27, 1024, 0, 0),
    "smollm2-360m": ("https://huggingface.co/HuggingFaceTB/SmolLM2-360M-Instruct", 0.72, 1024, 0, 0),
    "smollm2-1.7b": ("https://huggingface.co/HuggingFaceTB/SmolLM2-1.7B-Instruct", 3.4, 2048, 0, 0),
    "phi-3.5-mini": ("https://huggingface.co/microsoft/Phi-3.5-mini-instruct/blob/main/LICENSE", 7.6, 2048, 0, 0),
    "phi-4-mini-reasoning": ("https://huggingface.co/microsoft/Phi-4-mini-reasoning/blob/main/LICENSE", 7.6, 2048, 1, 0),
    "mixtral-8x7b-instruct": ("https://huggingface.co/mistralai/Mixtral-8x7B-Instruct-v0.1", 93.4, 2048, 0, 0),
    "mistral-small-3.1-24b-instruct": ("https://huggingface.co/mistralai/Mistral-Small-3.1-24B-Instruct-2503", 48.0, 4096, 0, 0),
    "paligemma-3b-mix-224": ("https://ai.google.dev/gemma/terms", 6.5, 2048, 0, 0),
    "qwen2-vl-2b-instruct": ("https://huggingface.co/Qwen/Qwen2-VL-2B-Instruct/blob/main/LICENSE", 4.5, 2048, 0, 0),
    "internvl2-2b": ("https://huggingface.co/OpenGVLab/InternVL2-2B/blob/main/LICENSE", 4.4, 2048, 0, 0),
    "internvl3-2b": ("https://huggingface.co/OpenGVLab/InternVL3-2B", 4.0, 2048, 0, 0),
    "qwen2-audio-7b-instruct": ("https://huggingface.co/Qwen/Qwen2-Audio-7B-Instruct", 15.5, 2048, 0, 0),
}
# (key, hf_id, revision, architecture, params, dialect, gguf_arch, tokenizer_pre, license,
#  requires_acceptance, redistributable, context_length, targets, extra)
QKVO = '["q_proj", "k_proj", "v_proj", "o_proj"]'
ADDED = [
    ("qwen2.5-coder-7b", "Qwen/Qwen2.5-Coder-7B-Instruct", "main", "Qwen2ForCausalLM", "7600000000", "chatml", "qwen2",
     "qwen2", "Apache-2.0", "False", "True", "32768", QKVO,
     ("https://huggingface.co/Qwen/Qwen2.5-Coder-7B-Instruct/blob/main/LICENSE", 15.2, 2048, 0, 0)),
    ("qwen2.5-coder-14b", "Qwen/Qwen2.5-Coder-14B-Instruct", "main", "Qwen2ForCausalLM", "14700000000", "chatml", "qwen2",
     "qwen2", "Apache-2.0", "False", "True", "32768", QKVO,
     ("https://huggingface.co/Qwen/Qwen2.5-Coder-14B-Instruct/blob/main/LICENSE", 29.5, 2048, 0, 0)),
]
VISION = {"Qwen2VLForConditionalGeneration", "PaliGemmaForConditionalGeneration", "InternVLChatModel",
          "Mistral3ForConditionalGeneration"}
AUDIO = {"Qwen2AudioForConditionalGeneration"}

def cstr(s):
    return "NULL" if s is None else json.dumps(s)

def main():
    here = os.path.dirname(os.path.abspath(__file__))
    tsv = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "docs", "reference", "base-registry.tsv")
    rows = []
    with open(tsv, newline="") as f:
        for r in csv.DictReader(f, delimiter="\t"):
            rows.append((r["key"], r["hf_id"], r["revision"], r["architecture"], r["params"], r["dialect"],
                         r["gguf_arch"], r["tokenizer_pre"], r["license"], r["requires_acceptance"],
                         r["redistributable"], r["context_length"], r["target_modules"], EXTRA[r["key"]]))
    rows += ADDED
    out = sys.stdout
    out.write("/* Generated by scripts/gen-registry.py from docs/reference/base-registry.tsv:\n"
              " * do not edit by hand. */\n#include \"weights/registry.h\"\n\n")
    for r in rows:
        tm = json.loads(r[12])
        out.write("static const char *const tm_%s[] = {%s};\n" % (r[0].replace(".", "_").replace("-", "_"),
                  ", ".join(cstr(t) for t in tm)))
    out.write("\nconst reg_entry registry_table[] = {\n")
    for r in rows:
        ex = r[13]
        mod = "REG_VISION" if r[3] in VISION else "REG_AUDIO" if r[3] in AUDIO else "REG_TEXT"
        ident = r[0].replace(".", "_").replace("-", "_")
        out.write("    {%s, %s, %s, %s, %sLL, %s, %s, %s, %s, %d, %d, %d, tm_%s, %d, %s,\n     %s, %s, %d, %d, %d, NULL},\n" % (
            cstr(r[0]), cstr(r[1]), cstr(r[2]), cstr(r[3]), r[4], cstr(r[5]), cstr(r[6]), cstr(r[7]), cstr(r[8]),
            r[9] == "True", r[10] == "True", int(r[11]), ident, len(json.loads(r[12])), mod,
            cstr(ex[0]), repr(float(ex[1])), ex[2], ex[3], ex[4]))
    out.write("    /* the embedded base shipped with dlm (models/tiny.gguf, resolved at load time) */\n")
    out.write("    {\"tiny\", NULL, NULL, \"LlamaForCausalLM\", 5770496LL, \"chatml\", \"llama\", \"gpt-2\", \"Apache-2.0\", 0, 1, 1024,\n"
              "     tm_qwen2_5_0_5b, 4, REG_TEXT, NULL, 0.012, 256, 0, 0, \"models/tiny.gguf\"},\n")
    out.write("};\n\nconst int registry_table_len = (int)(sizeof registry_table / sizeof registry_table[0]);\n")

main()
