/* base — see base.h. The registry rows are those of the original tool
 * (shared/reference/base-registry.tsv), unsupported architectures kept so
 * that naming one gives a precise refusal instead of "unknown key". */
#include "model/base.h"

#include <stdio.h>
#include <string.h>

#include "util/fs.h"
#include "util/str.h"

#define L "LlamaForCausalLM"
#define Q "Qwen2ForCausalLM"
static const base_entry REG[] = {
    {"qwen2.5-0.5b", "Qwen/Qwen2.5-0.5B-Instruct", "7ae557604adf67be50417f59c2c2f167def9a775", Q, "chatml", "qwen2", "qwen2", "Apache-2.0", 0, 1, 32768, 1},
    {"qwen2.5-1.5b", "Qwen/Qwen2.5-1.5B-Instruct", "989aa7980e4cf806f80c7fef2b1adb7bc71aa306", Q, "chatml", "qwen2", "qwen2", "Apache-2.0", 0, 1, 32768, 1},
    {"qwen2.5-3b", "Qwen/Qwen2.5-3B-Instruct", "aa8e72537993ba99e69dfaafa59ed015b17504d1", Q, "chatml", "qwen2", "qwen2", "Other", 0, 1, 32768, 1},
    {"qwen2.5-coder-1.5b", "Qwen/Qwen2.5-Coder-1.5B-Instruct", "2e1fd397ee46e1388853d2af2c993145b0f1098a", Q, "chatml", "qwen2", "qwen2", "Apache-2.0", 0, 1, 32768, 1},
    {"qwen3-1.7b", "Qwen/Qwen3-1.7B", "70d244cc86ccca08cf5af4e1e306ecf908b1ad5e", "Qwen3ForCausalLM", "chatml", "qwen3", "qwen2", "Apache-2.0", 0, 1, 32768, 0},
    {"qwen3-1.7b-thinking", "Qwen/Qwen3-1.7B", "70d244cc86ccca08cf5af4e1e306ecf908b1ad5e", "Qwen3ForCausalLM", "qwen3thinking", "qwen3", "qwen2", "Apache-2.0", 0, 1, 32768, 0},
    {"qwen3-4b", "Qwen/Qwen3-4B", "1cfa9a7208912126459214e8b04321603b3df60c", "Qwen3ForCausalLM", "chatml", "qwen3", "qwen2", "Apache-2.0", 0, 1, 32768, 0},
    {"qwen3-8b", "Qwen/Qwen3-8B", "b968826d9c46dd6066d109eabc6255188de91218", "Qwen3ForCausalLM", "chatml", "qwen3", "qwen2", "Apache-2.0", 0, 1, 32768, 0},
    {"llama-3.2-1b", "meta-llama/Llama-3.2-1B-Instruct", "9213176726f574b556790deb65791e0c5aa438b6", L, "llama3", "llama", "llama-bpe", "Other", 1, 0, 131072, 1},
    {"llama-3.2-3b", "meta-llama/Llama-3.2-3B-Instruct", "0cb88a4f764b7a12671c53f0838cd831a0843b95", L, "llama3", "llama", "llama-bpe", "Other", 1, 0, 131072, 1},
    {"llama-3.3-8b-instruct", "allura-forge/Llama-3.3-8B-Instruct", "df95224cf87c32d9f4958dd284a07ded620aa4fc", L, "llama3", "llama", "llama-bpe", "Other", 1, 0, 131072, 1},
    {"smollm3-3b", "HuggingFaceTB/SmolLM3-3B", "a07cc9a04f16550a088caea529712d1d335b0ac1", "SmolLM3ForCausalLM", "smollm3", "llama", "smollm", "Apache-2.0", 0, 1, 65536, 0},
    {"olmo-2-7b-instruct", "allenai/OLMo-2-1124-7B-Instruct", "470b1fba1ae01581f270116362ee4aa1b97f4c84", "Olmo2ForCausalLM", "olmo2", "olmo2", "superbpe", "Apache-2.0", 0, 1, 4096, 0},
    {"gemma-2-2b-it", "google/gemma-2-2b-it", "299a8560bedf22ed1c72a8a11e7dce4a7f9f51f8", "Gemma2ForCausalLM", "gemma2", "gemma2", "gemma", "Gemma", 1, 0, 8192, 0},
    {"gemma-2-9b-it", "google/gemma-2-9b-it", "11c9b309abf73637e4b6f9a3fa1e92e615547819", "Gemma2ForCausalLM", "gemma2", "gemma2", "gemma", "Gemma", 1, 0, 8192, 0},
    {"smollm2-135m", "HuggingFaceTB/SmolLM2-135M-Instruct", "12fd25f77366fa6b3b4b768ec3050bf629380bac", L, "chatml", "llama", "smollm", "Apache-2.0", 0, 1, 8192, 1},
    {"smollm2-360m", "HuggingFaceTB/SmolLM2-360M-Instruct", "a10cc1512eabd3dde888204e902eca88bddb4951", L, "chatml", "llama", "smollm", "Apache-2.0", 0, 1, 8192, 1},
    {"smollm2-1.7b", "HuggingFaceTB/SmolLM2-1.7B-Instruct", "31b70e2e869a7173562077fd711b654946d38674", L, "chatml", "llama", "smollm", "Apache-2.0", 0, 1, 8192, 1},
    {"phi-3.5-mini", "microsoft/Phi-3.5-mini-instruct", "2fe192450127e6a83f7441aef6e3ca586c338b77", "Phi3ForCausalLM", "phi3", "phi3", "phi-2", "MIT", 0, 1, 131072, 0},
    {"phi-4-mini-reasoning", "microsoft/Phi-4-mini-reasoning", "0e3b1e2d02ee478a3743abe3f629e9c0cb722e0a", "Phi3ForCausalLM", "phi4mini", "phi3", "phi-2", "MIT", 0, 1, 131072, 0},
    {"mixtral-8x7b-instruct", "mistralai/Mixtral-8x7B-Instruct-v0.1", "eba92302a2861cdc0098cc54bc9f17cb2c47eb61", "MixtralForCausalLM", "mistral", "llama", "llama-bpe", "Apache-2.0", 0, 1, 32768, 0},
    {"mistral-small-3.1-24b-instruct", "mistralai/Mistral-Small-3.1-24B-Instruct-2503", "68faf511d618ef198fef186659617cfd2eb8e33a", "Mistral3ForConditionalGeneration", "mistral", "mistral3", "tekken", "Apache-2.0", 0, 1, 131072, 0},
    {"paligemma-3b-mix-224", "google/paligemma-3b-mix-224", "d1d8734c9c3ad0ccfeea4afc270faa356c2ba515", "PaliGemmaForConditionalGeneration", "paligemma", "paligemma", "gemma", "Other", 1, 0, 8192, 0},
    {"qwen2-vl-2b-instruct", "Qwen/Qwen2-VL-2B-Instruct", "895c3a49bc3fa70a340399125c650a463535e71c", "Qwen2VLForConditionalGeneration", "qwen2-vl", "qwen2-vl", "qwen2", "Apache-2.0", 0, 1, 32768, 0},
    {"internvl2-2b", "OpenGVLab/InternVL2-2B", "e4f6747bd20f139e637642c6a058c6bd00b36919", "InternVLChatModel", "internvl2", "internvl2", "internvl2", "MIT", 0, 1, 8192, 0},
    {"internvl3-2b", "OpenGVLab/InternVL3-2B", "899155015275a9b7338c7f4677e19c784e0e5a21", "InternVLChatModel", "internvl2", "internvl3", "internvl3", "Apache-2.0", 0, 1, 32768, 0},
    {"qwen2-audio-7b-instruct", "Qwen/Qwen2-Audio-7B-Instruct", "0a095220c30b7b31434169c3086508ef3ea5bf0a", "Qwen2AudioForConditionalGeneration", "qwen2-audio", "qwen2-audio", "qwen2", "Apache-2.0", 0, 1, 8192, 0},
};
#undef L
#undef Q
#define NREG ((int)(sizeof REG / sizeof REG[0]))

int base_registry_count(void) { return NREG; }
const base_entry *base_registry_at(int i) { return i >= 0 && i < NREG ? &REG[i] : NULL; }

const base_entry *base_registry_find(const char *key)
{
    for (int i = 0; i < NREG; i++)
        if (!strcmp(REG[i].key, key)) return &REG[i];
    return NULL;
}

static int set(char *dst, size_t cap, const char *s, size_t n, dlm_err *e)
{
    if (n >= cap) return err_set(e, "BaseError", "base model name too long");
    memcpy(dst, s, n);
    dst[n] = 0;
    return 0;
}

int base_parse(const char *spec, base_ref *ref, dlm_err *e)
{
    memset(ref, 0, sizeof *ref);
    snprintf(ref->rev, sizeof ref->rev, "main");
    if (!spec || !*spec) return err_set(e, "BaseError", "no base model given");
    if (!strncmp(spec, "hf:", 3)) {
        const char *id = spec + 3, *at = strchr(id, '@');
        size_t n = at ? (size_t)(at - id) : strlen(id);
        if (set(ref->repo, sizeof ref->repo, id, n, e)) return -1;
        if (at && set(ref->rev, sizeof ref->rev, at + 1, strlen(at + 1), e)) return -1;
        if (!hub_valid_repo(ref->repo)) {
            err_set(e, "BaseError", "'%s' is not a Hugging Face model id", ref->repo);
            return err_hint(e, "write hf:org/name or hf:org/name@revision");
        }
        if (!hub_valid_rev(ref->rev)) return err_set(e, "BaseError", "invalid revision '%s'", ref->rev);
        ref->kind = BASE_HF;
        return 0;
    }
    const base_entry *b = base_registry_find(spec);
    if (b) {
        if (!b->supported) {
            err_set(e, "UnsupportedArchitectureError", "base '%s' (%s, %s) is not supported", spec, b->hf_id,
                    b->architecture);
            return err_hint(e, "dlm runs llama and qwen2 architectures, e.g. smollm2-135m, qwen2.5-0.5b, llama-3.2-1b");
        }
        ref->kind = BASE_REGISTRY;
        ref->entry = b;
        snprintf(ref->repo, sizeof ref->repo, "%s", b->hf_id);
        snprintf(ref->rev, sizeof ref->rev, "%s", b->revision);
        return 0;
    }
    int pathlike = strchr(spec, '/') || spec[0] == '.' || spec[0] == '~' || str_endswith(spec, ".gguf");
    if (fs_exists(spec) || pathlike) {
        if (set(ref->path, sizeof ref->path, spec, strlen(spec), e)) return -1;
        if (fs_is_dir(spec)) { ref->kind = BASE_DIR; return 0; }
        if (fs_is_file(spec)) { ref->kind = BASE_GGUF; return 0; }
        err_set(e, "BaseError", "base model path '%s' does not exist", spec);
        return err_hint(e, "give an HF model folder, a .gguf file, a registry key or hf:org/name");
    }
    const char *best = NULL;
    int bd = 4;
    for (int i = 0; i < NREG; i++) {
        int d = str_edit_distance(spec, REG[i].key);
        if (d < bd) { bd = d; best = REG[i].key; }
    }
    err_set(e, "BaseError", "unknown base model '%s'", spec);
    if (best) return err_hint(e, "did you mean '%s'? (or hf:org/name for any HF model)", best);
    return err_hint(e, "use a registry key such as smollm2-135m or qwen2.5-0.5b, hf:org/name, or a path");
}

int base_resolve(const char *spec, const hub_opts *o, base_ref *ref, char *path, size_t cap, dlm_err *e)
{
    if (base_parse(spec, ref, e)) return -1;
    if (ref->kind == BASE_DIR || ref->kind == BASE_GGUF) {
        int n = snprintf(path, cap, "%s", ref->path);
        return n < 0 || (size_t)n >= cap ? err_set(e, "BaseError", "path too long") : 0;
    }
    return hub_snapshot(o, ref->repo, ref->rev, path, cap, e);
}
