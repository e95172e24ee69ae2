/* registry — lookups and `--base` parsing over registry_table.c. */
#include "weights/registry.h"

#include "weights/hub.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/fs.h"
#include "util/str.h"

int registry_count(void) { return registry_table_len; }

const reg_entry *registry_at(int i)
{
    return i >= 0 && i < registry_table_len ? &registry_table[i] : NULL;
}

const reg_entry *registry_lookup(const char *key)
{
    for (int i = 0; i < registry_table_len; i++)
        if (!strcmp(registry_table[i].key, key)) return &registry_table[i];
    return NULL;
}

const char *registry_modality_name(reg_modality m)
{
    return m == REG_VISION ? "vision-language" : m == REG_AUDIO ? "audio-language" : "text";
}

int registry_suggest(const char *key, const char **out, int max)
{
    int dist[64], n = 0;
    for (int i = 0; i < registry_table_len && i < 64; i++) {
        const char *k = registry_table[i].key;
        int d = str_edit_distance(key, k);
        if (*key && strlen(key) >= 3 && strstr(k, key)) d = d < 2 ? d : 2;
        if (d > 3) continue;
        /* insertion sort by distance, stable */
        int j = n < max ? n : max - 1;
        if (n >= max && d >= dist[max - 1]) continue;
        while (j > 0 && dist[j - 1] > d) {
            dist[j] = dist[j - 1];
            out[j] = out[j - 1];
            j--;
        }
        dist[j] = d;
        out[j] = k;
        if (n < max) n++;
    }
    return n;
}

static int hf_part_ok(const char *s, size_t n)
{
    if (!n || n > 96) return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
              c == '_' || c == '.'))
            return 0;
    }
    return !(s[0] == '.' || s[0] == '-');
}

static int unknown(const char *s, dlm_err *e)
{
    strbuf sb = STRBUF_INIT;
    int shown = 0;
    for (int i = 0; i < registry_table_len && shown < 5; i++) {
        if (!strcmp(registry_table[i].key, "tiny")) continue;
        sb_printf(&sb, "%s%s", shown++ ? ", " : "", registry_table[i].key);
    }
    int total = registry_table_len - 1;
    if (total > 5) sb_printf(&sb, ", … (%d more)", total - 5);
    err_set(e, "UnknownBaseModelError",
            "unknown base model '%s'. Known keys: %s. Use `hf:org/name` for models outside the registry.", s,
            sb_str(&sb));
    sb_free(&sb);
    const char *sug[5];
    int ns = registry_suggest(s, sug, 5);
    if (ns) {
        strbuf h = STRBUF_INIT;
        sb_puts(&h, "did you mean ");
        for (int i = 0; i < ns; i++) sb_printf(&h, "%s'%s'", i ? (i == ns - 1 ? " or " : ", ") : "", sug[i]);
        sb_puts(&h, "?");
        err_hint(e, "%s", sb_str(&h));
        sb_free(&h);
    } else err_hint(e, "pass a registry key, hf:org/name[@revision], a path to a model, or 'tiny'");
    return -1;
}

int registry_parse_base(const char *s, base_ref *out, dlm_err *e)
{
    memset(out, 0, sizeof *out);
    if (!s || !*s) return err_set(e, "UnknownBaseModelError", "empty base model");
    if (!strcmp(s, "tiny")) {
        out->kind = BASE_TINY;
        out->entry = registry_lookup("tiny");
        return 0;
    }
    if (!strncmp(s, "hf:", 3)) {
        const char *id = s + 3, *at = strchr(id, '@');
        size_t idn = at ? (size_t)(at - id) : strlen(id);
        const char *slash = memchr(id, '/', idn);
        if (!slash || !hf_part_ok(id, (size_t)(slash - id)) || !hf_part_ok(slash + 1, idn - (size_t)(slash - id) - 1)) {
            err_set(e, "UnknownBaseModelError", "'%s' is not a valid hf:org/name[@revision] reference", s);
            return err_hint(e, "example: hf:Qwen/Qwen2.5-Coder-7B-Instruct or hf:Qwen/Qwen2.5-Coder-7B-Instruct@main");
        }
        if (at) {
            const char *rev = at + 1;
            size_t rn = strlen(rev);
            int ok = rn > 0 && rn < sizeof out->revision;
            for (size_t i = 0; ok && i < rn; i++) {
                char c = rev[i];
                ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                     c == '_' || c == '.' || c == '/';
            }
            if (!ok) return err_set(e, "UnknownBaseModelError", "'%s': bad revision after '@'", s);
            snprintf(out->revision, sizeof out->revision, "%s", rev);
        }
        snprintf(out->hf_id, sizeof out->hf_id, "%.*s", (int)idn, id);
        out->kind = BASE_HF;
        return 0;
    }
    const reg_entry *r = registry_lookup(s);
    if (r) {
        out->kind = BASE_REGISTRY;
        out->entry = r;
        return 0;
    }
    if (strchr(s, '/') || s[0] == '.' || s[0] == '~' || str_endswith(s, ".gguf")) {
        if (s[0] == '~' && (s[1] == '/' || !s[1])) {
            const char *home = hub_get_env()->home;
            if (!home) home = "";
            if (snprintf(out->path, sizeof out->path, "%s%s", home, s + 1) >= (int)sizeof out->path)
                return err_set(e, NULL, "base path too long");
        } else if (snprintf(out->path, sizeof out->path, "%s", s) >= (int)sizeof out->path)
            return err_set(e, NULL, "base path too long");
        out->kind = BASE_PATH;
        return 0;
    }
    return unknown(s, e);
}

int registry_check_trainable(const base_ref *b, dlm_err *e)
{
    /* Qwen2-VL and PaliGemma (docs/images.md) and the audio row (docs/audio.md) train; the other vision rows not yet */
    if (b->kind == BASE_REGISTRY && b->entry->modality == REG_VISION && b->entry->architecture &&
        (!strcmp(b->entry->architecture, "Qwen2VLForConditionalGeneration") ||
         !strcmp(b->entry->architecture, "PaliGemmaForConditionalGeneration")))
        return 0;
    if ((b->kind == BASE_REGISTRY) && b->entry->modality == REG_VISION) {
        err_set(e, "UnsupportedBaseError", "%s is a%s %s base; dlm trains text bases, Qwen2-VL, PaliGemma and Qwen2-Audio only", b->entry->key,
                b->entry->modality == REG_AUDIO ? "n" : "",
                b->entry->modality == REG_VISION ? "vision-language" : "audio-language");
        return err_hint(e, "pick a text base, e.g. --base qwen2.5-1.5b (or tiny)%s",
                        b->entry->modality == REG_VISION ? "; images train on qwen2-vl-2b-instruct or paligemma-3b-mix-224 "
                                                           "(dlm init --multimodal --base qwen2-vl-2b-instruct)" : "");
    }
    return 0;
}

int registry_check_license(const base_ref *b, int accepted, dlm_err *e)
{
    if (b->kind != BASE_REGISTRY || !b->entry->requires_acceptance || accepted) return 0;
    err_set(e, "GatedModelError",
            "%s requires license acceptance. Accept the license and pass --i-accept-license (or via dlm init). "
            "License: %s", b->entry->hf_id, b->entry->license_url ? b->entry->license_url : "(unknown)");
    return err_hint(e, "read the license, then re-run with --i-accept-license");
}

void registry_base_string(const base_ref *b, char *out, size_t cap)
{
    switch (b->kind) {
    case BASE_TINY: snprintf(out, cap, "tiny"); break;
    case BASE_REGISTRY: snprintf(out, cap, "%s", b->entry->key); break;
    case BASE_HF:
        if (b->revision[0]) snprintf(out, cap, "hf:%s@%s", b->hf_id, b->revision);
        else snprintf(out, cap, "hf:%s", b->hf_id);
        break;
    case BASE_PATH: snprintf(out, cap, "%s", b->path); break;
    }
}
