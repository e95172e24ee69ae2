/* base — see base.h. */
#include "weights/base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/fs.h"
#include "util/log.h"
#include "weights/hub.h"
#include "weights/model.h"

int base_arch_supported(const char *a)
{
    return a && (!strcmp(a, "LlamaForCausalLM") || !strcmp(a, "MistralForCausalLM") || !strcmp(a, "Qwen2ForCausalLM") ||
                 !strcmp(a, "Qwen3ForCausalLM") || !strcmp(a, "Olmo2ForCausalLM") || !strcmp(a, "SmolLM3ForCausalLM") ||
                 !strcmp(a, "Gemma2ForCausalLM") || !strcmp(a, "GemmaForCausalLM") || !strcmp(a, "MixtralForCausalLM") ||
                 !strcmp(a, "Phi3ForCausalLM") || !strcmp(a, "Qwen2VLForConditionalGeneration") ||
                 !strcmp(a, "PaliGemmaForConditionalGeneration") || !strcmp(a, "Qwen2AudioForConditionalGeneration"));
}

static char g_tiny[4096];

void base_set_tiny_path(const char *path) { snprintf(g_tiny, sizeof g_tiny, "%s", path ? path : ""); }

/* What each registry architecture still lacks in dlm's decoder, so a refusal
 * says why rather than only "unsupported". */
static const struct { const char *arch, *missing; } ARCH_GAPS[] = {
    {"Mistral3ForConditionalGeneration", "a vision encoder (dlm trains text bases, Qwen2-VL, PaliGemma and Qwen2-Audio only)"},
};

int base_check_runnable(const base_ref *ref, dlm_err *e)
{
    if (ref->kind != BASE_REGISTRY || base_arch_supported(ref->entry->architecture)) return 0;
    const char *a = ref->entry->architecture, *missing = NULL;
    for (size_t i = 0; i < sizeof ARCH_GAPS / sizeof ARCH_GAPS[0]; i++)
        if (a && !strcmp(a, ARCH_GAPS[i].arch)) missing = ARCH_GAPS[i].missing;
    if (missing)
        err_set(e, "UnsupportedArchitectureError", "base '%s' (%s) is a %s, which dlm cannot train or run yet: its decoder lacks %s",
                ref->entry->key, ref->entry->hf_id, a, missing);
    else
        err_set(e, "UnsupportedArchitectureError", "base '%s' (%s, %s) is not supported", ref->entry->key,
                ref->entry->hf_id, a ? a : "unknown architecture");
    return err_hint(e, "dlm runs llama, mistral, mixtral, qwen2, qwen3, olmo2, smollm3, gemma2 and phi3 architectures, e.g. smollm2-135m, "
                       "qwen2.5-0.5b, qwen3-1.7b, llama-3.2-1b (dlm init --base KEY)");
}

/* The config of a folder or hf: base (an hf: base's config.json alone, from
 * the cache or one small download: how to read images and clips is decided
 * before the weights are fetched). 0 = *c parsed. */
static int base_config(const base_ref *b, model_config *c)
{
    char p[4200], *txt = NULL;
    size_t n;
    dlm_err ignore;
    if (b->kind == BASE_HF) {
        hub_opts o;
        if (hub_opts_init(&o, &ignore) ||
            hub_resolve_file(&o, b->hf_id, b->revision[0] ? b->revision : NULL, "config.json", p, sizeof p, &ignore))
            return -1;
    } else if (b->kind != BASE_PATH || !fs_join(p, sizeof p, b->path, "config.json")) {
        return -1;
    }
    if (!fs_is_file(p) || fs_read_all(p, 16u << 20, &txt, &n, NULL)) return -1;
    int r = model_config_parse(txt, n, p, c, &ignore);
    free(txt);
    return r ? -1 : 0;
}

int base_vl_kind(const char *spec)
{
    base_ref b;
    dlm_err ignore;
    if (!spec || registry_parse_base(spec, &b, &ignore)) return 0;
    if (b.kind == BASE_REGISTRY) {
        if (b.entry->modality != REG_VISION) return 0;
        if (!b.entry->architecture) return -1;
        if (!strcmp(b.entry->architecture, "PaliGemmaForConditionalGeneration")) return VL_PALI;
        return !strcmp(b.entry->architecture, "Qwen2VLForConditionalGeneration") ? VL_QWEN2 : -1;
    }
    model_config c;
    return base_config(&b, &c) ? 0 : c.vl;
}

int base_is_audio(const char *spec)
{
    base_ref b;
    dlm_err ignore;
    if (!spec || registry_parse_base(spec, &b, &ignore)) return 0;
    if (b.kind == BASE_REGISTRY) return b.entry->modality == REG_AUDIO;
    model_config c;
    return !base_config(&b, &c) && c.audio;
}

int base_tiny_path(char *out, size_t cap, dlm_err *e)
{
    const char *env = g_tiny;
    if (*env) {
        if (!fs_is_file(env)) return err_set(e, "BaseError", "DLM_TINY='%s' is not a file", env);
        snprintf(out, cap, "%s", env);
        return 0;
    }
    char exe[4096], dir[4096], cand[4200];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        fs_dirname(dir, sizeof dir, exe);
        /* installed (make install: PREFIX/bin/dlm, PREFIX/share/dlm/), then a build tree */
        snprintf(cand, sizeof cand, "%s/../share/dlm/tiny.gguf", dir);
        if (fs_is_file(cand)) goto found;
        snprintf(cand, sizeof cand, "%s/../models/tiny.gguf", dir);
        if (fs_is_file(cand)) goto found;
    }
    snprintf(cand, sizeof cand, "%s/models/tiny.gguf", DLM_SOURCE_DIR);
    if (fs_is_file(cand)) goto found;
    err_set(e, "BaseError", "the embedded base 'tiny' (models/tiny.gguf) was not found");
    return err_hint(e, "set DLM_TINY=/path/to/tiny.gguf, or rebuild it with 'make tiny-base'");
found:
    log_debug("base tiny: %s", cand);
    snprintf(out, cap, "%s", cand);
    return 0;
}

int base_resolve(const char *spec, const hub_opts *o, base_ref *ref, char *path, size_t cap, dlm_err *e)
{
    if (registry_parse_base(spec, ref, e) || registry_check_trainable(ref, e)) return -1;
    switch (ref->kind) {
    case BASE_TINY:
        return base_tiny_path(path, cap, e);
    case BASE_PATH:
        if (!fs_exists(ref->path)) {
            err_set(e, "BaseError", "base model path '%s' does not exist", ref->path);
            return err_hint(e, "give an HF model folder, a .gguf file, a registry key or hf:org/name");
        }
        if ((size_t)snprintf(path, cap, "%s", ref->path) >= cap) return err_set(e, "BaseError", "path too long");
        return 0;
    case BASE_REGISTRY:
        if (base_check_runnable(ref, e)) return -1;
        return hub_snapshot(o, ref->entry->hf_id, ref->entry->revision, path, cap, e);
    case BASE_HF:
        return hub_snapshot(o, ref->hf_id, ref->revision[0] ? ref->revision : "main", path, cap, e);
    }
    return err_set(e, "BaseError", "unknown base kind");
}
