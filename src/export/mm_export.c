/* mm_export — `dlm export` for vision- and audio-language bases (see mm_export.h). */
#include "export/mm_export.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "doc/doc.h"
#include "export/export_gguf.h"
#include "store/store.h"
#include "tokens/tok_gguf.h"
#include "weights/hub.h"
#include "weights/registry.h"
#include "util/fs.h"
#include "util/hash.h"
#include "util/json.h"
#include "util/str.h"
#include "util/timeutil.h"
#include "version.h"

/* What `AutoProcessor.save_pretrained` writes for these bases, taken from
 * the checkpoint as it ships them (processor, image/feature extractor,
 * tokenizer and chat-template files). */
static const char *const PROCESSOR_FILES[] = {
    "preprocessor_config.json", "processor_config.json", "video_preprocessor_config.json", "tokenizer.json",
    "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json", "vocab.json", "merges.txt",
    "tokenizer.model", "chat_template.json", "chat_template.jinja"};

typedef struct mm_ctx {
    dlm_doc *doc;
    char store[4096];
    base_ref ref;
    char model_path[4096];
    mm_kind kind;
    char adapter_dir[4300];
    int version;
    const char *adapter_name;
} mm_ctx;

static int resolve_base(const export_opts *o, mm_ctx *c, dlm_err *e)
{
    c->doc = doc_load(o->doc_path, e);
    if (!c->doc) return -1;
    const doc_frontmatter *fm = doc_fm(c->doc);
    if (store_dir(o->home, fm->dlm_id, c->store, sizeof c->store, e)) return -1;
    if (registry_parse_base(fm->base_model, &c->ref, e)) return -1;
    hub_opts ho;
    switch (c->ref.kind) {
    case BASE_TINY:
        return 0;
    case BASE_REGISTRY:
        if (c->ref.entry->modality == REG_TEXT) return 0;
        c->kind = mm_kind_of_arch(c->ref.entry->architecture);
        if (c->kind == MM_NONE) {
            err_set(e, "ExportError", "base '%s' (%s) has no export in dlm", c->ref.entry->key, c->ref.entry->architecture);
            return err_hint(e, "dlm exports Qwen2-VL, PaliGemma and Qwen2-Audio bases");
        }
        if (hub_opts_init(&ho, e)) return -1;
        if (o->offline) ho.offline = 1;
        return hub_snapshot(&ho, c->ref.entry->hf_id, c->ref.entry->revision, c->model_path, sizeof c->model_path, e);
    case BASE_PATH:
        snprintf(c->model_path, sizeof c->model_path, "%s", c->ref.path);
        c->kind = fs_is_dir(c->model_path) ? mm_kind_of_dir(c->model_path) : MM_NONE;
        return 0;
    case BASE_HF:
        if (hub_opts_init(&ho, e)) return -1;
        if (o->offline) ho.offline = 1;
        if (hub_snapshot(&ho, c->ref.hf_id, c->ref.revision[0] ? c->ref.revision : "main", c->model_path,
                         sizeof c->model_path, e))
            return -1;
        c->kind = mm_kind_of_dir(c->model_path);
        return 0;
    }
    return 0;
}

int mm_export_kind(const export_opts *o, mm_kind *kind, char *model_path, size_t cap, dlm_err *e)
{
    mm_ctx c;
    memset(&c, 0, sizeof c);
    int rc = resolve_base(o, &c, e);
    *kind = rc ? MM_NONE : c.kind;
    if (model_path) snprintf(model_path, cap, "%s", c.model_path);
    doc_free(c.doc);
    return rc;
}

static int resolve_adapter(const export_opts *o, mm_ctx *c, dlm_err *e)
{
    const doc_frontmatter *fm = doc_fm(c->doc);
    if (fm->training.adapters && !o->adapter) {
        err_set(e, "ExportError", "%s declares named adapters: say which to export", o->doc_path);
        err_hint(e, "--adapter NAME exports one");
        e->code = 2;
        return -1;
    }
    if (o->adapter) {
        int i = doc_adapter_index(fm, o->adapter);
        if (i < 0) {
            (void)doc_scope_adapter(c->doc, o->adapter, e);
            return -1;
        }
        c->adapter_name = fm->training.adapters[i].name;
    }
    int v = store_exists(c->store) ? store_current_version_of(c->store, c->adapter_name, e) : 0;
    if (v < 0) return -1;
    if (!v) {
        err_set(e, "ExportError", "no current adapter: %s/adapter%s%s/current.txt names no trained version", c->store,
                c->adapter_name ? "/" : "", c->adapter_name ? c->adapter_name : "");
        return err_hint(e, "train one first: dlm train %s", o->doc_path);
    }
    char vn[16], ad[4200];
    store_version_name(v, vn, sizeof vn);
    if (store_adapter_dir(c->store, c->adapter_name, ad, sizeof ad, e)) return -1;
    snprintf(c->adapter_dir, sizeof c->adapter_dir, "%s/versions/%s", ad, vn);
    c->version = v;
    return 0;
}

/* ---- files ---------------------------------------------------------------------------------- */

typedef struct arts {
    json_t *list;               /* [{path, sha256, size_bytes}] */
    int n;
} arts;

static int art_add(arts *a, const char *root, const char *rel, dlm_err *e)
{
    char p[8400], hex[65];
    snprintf(p, sizeof p, "%s/%s", root, rel);
    if (sha256_file_hex(p, hex, e)) return -1;
    long long size = fs_file_size(p);
    json_array_append_new(a->list, json_pack("{s:s, s:s, s:I}", "path", rel, "sha256", hex, "size_bytes", (json_int_t)size));
    a->n++;
    return 0;
}

/* Copy every regular file of src into dst (created), names sorted; each
 * becomes an artifact "<prefix>/<name>". */
static int copy_dir_files(const char *src, const char *dst, const char *root, const char *prefix, arts *a, dlm_err *e)
{
    if (fs_mkdir_p(dst, e)) return -1;
    char **names;
    int k = fs_list_dir(src, &names, e), rc = 0;
    if (k < 0) return -1;
    for (int i = 0; i < k && !rc; i++) {
        char s[8400], d[8400], rel[600];
        snprintf(s, sizeof s, "%s/%s", src, names[i]);
        if (names[i][0] == '.' || !fs_is_file(s)) continue;
        snprintf(d, sizeof d, "%s/%s", dst, names[i]);
        snprintf(rel, sizeof rel, "%s/%s", prefix, names[i]);
        rc = fs_copy_file(s, d, e) || art_add(a, root, rel, e) ? -1 : 0;
    }
    fs_free_list(names, k);
    return rc;
}

static int write_json(const char *dir, const char *name, const json_t *j, dlm_err *e)
{
    char p[4300];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return json_save_file(p, j, e);
}

static int write_text(const char *dir, const char *name, const char *s, dlm_err *e)
{
    char p[4300];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return fs_write_atomic(p, s, strlen(s), 0644, e);
}

/* Move the finished staging folder into place: an earlier export there is
 * swapped out first and removed after, so a failure leaves one of them. */
static int publish(const char *stage, const char *final, dlm_err *e)
{
    char old[4400];
    snprintf(old, sizeof old, "%s.old-%d", final, (int)getpid());
    int had = fs_is_dir(final);
    if (had && rename(final, old) != 0) return err_set(e, "ExportError", "cannot move %s aside: %s", final, strerror(errno));
    if (rename(stage, final) != 0) {
        int er = errno;
        if (had) (void)rename(old, final);
        return err_set(e, "ExportError", "cannot move %s to %s: %s", stage, final, strerror(er));
    }
    if (had) fs_remove_tree(old, NULL);
    char parent[4096];
    fs_dirname(parent, sizeof parent, final);
    return fs_fsync_dir(parent, e);
}

/* ---- the HF snapshot -------------------------------------------------------------------- */

static const char *base_hf_id(const mm_ctx *c)
{
    return c->ref.kind == BASE_REGISTRY ? c->ref.entry->hf_id : c->ref.kind == BASE_HF ? c->ref.hf_id : c->ref.path;
}

static const char *base_revision(const mm_ctx *c)
{
    return c->ref.kind == BASE_REGISTRY ? c->ref.entry->revision : c->ref.kind == BASE_HF && c->ref.revision[0] ? c->ref.revision : "";
}

static const char *base_arch(const mm_ctx *c)
{
    return c->kind == MM_QWEN2VL ? "Qwen2VLForConditionalGeneration" : c->kind == MM_PALIGEMMA ? "PaliGemmaForConditionalGeneration"
                                                                                                : "Qwen2AudioForConditionalGeneration";
}

/* The original's preprocessor plan of the kind (base_models/registry.py):
 * PaliGemma <image> x (image_size/patch)^2 at image_size (256 at 224 for
 * the registry row), Qwen2-VL's fixed plan <|image_pad|> x 576 at 672x672,
 * Qwen2-Audio <|AUDIO|> x max_source_positions/2 (750), 16 kHz, 30 s. */
static void plan_fields(const mm_ctx *c, json_t *m)
{
    char p[4300];
    snprintf(p, sizeof p, "%s/config.json", c->model_path);
    json_t *cfg = json_load_path(p, 16u << 20, NULL);
    const json_t *v = cfg ? json_object_get(cfg, c->kind == MM_QWEN2AUDIO ? "audio_config" : "vision_config") : NULL;
    long long x, y;
    if (c->kind == MM_PALIGEMMA) {
        long long size = v && !jget_int(v, "image_size", &x) ? x : 224, patch = v && !jget_int(v, "patch_size", &y) && y > 0 ? y : 14;
        json_object_set_new(m, "image_token", json_string("<image>"));
        json_object_set_new(m, "num_image_tokens", json_integer((size / patch) * (size / patch)));
        json_object_set_new(m, "target_size", json_pack("[I, I]", (json_int_t)size, (json_int_t)size));
    } else if (c->kind == MM_QWEN2VL) {
        json_object_set_new(m, "image_token", json_string("<|image_pad|>"));
        json_object_set_new(m, "num_image_tokens", json_integer(576));
        json_object_set_new(m, "target_size", json_pack("[i, i]", 672, 672));
    } else {
        long long pos = v && !jget_int(v, "max_source_positions", &x) && x > 0 ? x : 1500;
        long long rate = 16000;
        snprintf(p, sizeof p, "%s/preprocessor_config.json", c->model_path);
        json_t *pp = json_load_path(p, 16u << 20, NULL);
        if (pp && !jget_int(pp, "sampling_rate", &x) && x > 0) rate = x;
        json_decref(pp);
        json_object_set_new(m, "audio_token", json_string("<|AUDIO|>"));
        json_object_set_new(m, "num_audio_tokens", json_integer(pos / 2));
        json_object_set_new(m, "sample_rate", json_integer(rate));
        json_object_set_new(m, "max_length_seconds", json_real(30.0));
    }
    json_decref(cfg);
}

static void readme_text(const mm_ctx *c, strbuf *sb)
{
    int audio = mm_kind_is_audio(c->kind);
    const char *rev = base_revision(c);
    sb_printf(sb, "# %s export\n\nTarget: **%s** (%s%s%.12s%s)\nAdapter version: v%04d%s%s%s\n\n## Load this snapshot\n\n```python\n",
              audio ? "HF-audio-snapshot" : "HF-snapshot", doc_fm(c->doc)->base_model, base_hf_id(c), *rev ? " @ " : "",
              rev, *rev ? "…" : "", c->version, c->adapter_name ? " (" : "", c->adapter_name ? c->adapter_name : "",
              c->adapter_name ? ")" : "");
    sb_printf(sb, "from transformers import %s, AutoProcessor\nfrom peft import PeftModel\n\nbase = %s.from_pretrained(\n    \"%s\"%s%s%s,\n)\n"
                  "model = PeftModel.from_pretrained(base, \"./adapter\")\nprocessor = AutoProcessor.from_pretrained(\"./processor\")\n```\n",
              audio ? base_arch(c) : "AutoModelForImageTextToText", audio ? base_arch(c) : "AutoModelForImageTextToText",
              base_hf_id(c), *rev ? ", revision=\"" : "", rev, *rev ? "\"" : "");
    if (audio)
        sb_puts(sb, "\n## Audio input shape\n\n- Sample rate: 16000 Hz (required; mismatches refused)\n- Max length: 30.0 s "
                    "(longer clips truncated)\n- Placeholder token: `<|AUDIO|>` (expands to 750 tokens per clip)\n");
    sb_puts(sb, audio ? "\n## llama.cpp\n\n`dlm export DOC --target gguf` writes the language GGUF, the adapter and the\n"
                        "`mmproj` of the audio encoder for `llama-mtmd-cli --audio`.\n"
                      : c->kind == MM_QWEN2VL ? "\n## llama.cpp\n\n`dlm export DOC --target gguf` writes the language GGUF, the adapter and the\n"
                                               "`mmproj` of the vision tower for `llama-mtmd-cli --image`.\n"
                                             : "\n## Why HF snapshot (not GGUF)\n\nllama.cpp has no PaliGemma support.\n");
}

static int write_snapshot(const mm_ctx *c, const char *dir, arts *a, dlm_err *e)
{
    char sub[4300];
    snprintf(sub, sizeof sub, "%s/adapter", dir);
    if (copy_dir_files(c->adapter_dir, sub, dir, "adapter", a, e)) return -1;
    snprintf(sub, sizeof sub, "%s/processor", dir);
    if (fs_mkdir_p(sub, e)) return -1;
    int have_proc = 0, have_tok = 0;
    for (size_t i = 0; i < sizeof PROCESSOR_FILES / sizeof PROCESSOR_FILES[0]; i++) {
        char s[4400], d[4400], rel[128];
        snprintf(s, sizeof s, "%s/%s", c->model_path, PROCESSOR_FILES[i]);
        if (!fs_is_file(s)) continue;
        snprintf(d, sizeof d, "%s/%s", sub, PROCESSOR_FILES[i]);
        snprintf(rel, sizeof rel, "processor/%s", PROCESSOR_FILES[i]);
        if (fs_copy_file(s, d, e) || art_add(a, dir, rel, e)) return -1;
        have_proc |= i < 3;
        have_tok |= i == 3 || i == 9;
    }
    if (!have_proc || !have_tok) {
        err_set(e, "ProcessorLoadError", "%s has no %s: the snapshot's processor/ could not be loaded", c->model_path,
                !have_proc ? (mm_kind_is_audio(c->kind) ? "preprocessor_config.json (the feature extractor)"
                                                        : "preprocessor_config.json (the image processor)")
                           : "tokenizer.json or tokenizer.model");
        return err_hint(e, "the base's folder must hold the processor files transformers saves with it");
    }
    return 0;
}

/* ---- the llama.cpp pair -------------------------------------------------------------------- */

static int write_pair(const export_opts *o, const mm_ctx *c, const export_mix *mix, const char *dir, arts *a,
                      mm_export_result *r, dlm_err *e)
{
    mm_base b;
    mm_lora l = {0};
    tok *t = NULL;
    int rc = -1;
    if (mm_open(c->model_path, &b, e)) return -1;
    if (mm_lora_load(c->adapter_dir, &b, &l, e) || tok_load_for_model(c->model_path, &t, e)) goto done;
    const char *pre;
    if (export_pre_name(t, o->pre_tokenizer, &pre, e)) goto done;
    int add_bos, add_eos;
    export_special_flags(c->model_path, t, b.vocab, &add_bos, &add_eos);
    char name[256];
    snprintf(name, sizeof name, "%s", fs_basename(o->doc_path));
    mm_lang_opts lo = {.mix = mix, .merge = o->merged ? &l : NULL, .name = name, .pre = pre, .add_bos = add_bos,
                       .add_eos = add_eos, .chat_template = !o->no_template};
    snprintf(r->lang_file, sizeof r->lang_file, "%s.%s.gguf", o->merged ? "merged" : "base", mix->name);
    char p[4400];
    snprintf(p, sizeof p, "%s/%s", dir, r->lang_file);
    if (mm_write_lang(&b, t, &lo, p, &r->lang_tensors, e) || art_add(a, dir, r->lang_file, e)) goto done;
    if (!o->merged) {
        snprintf(p, sizeof p, "%s/adapter.gguf", dir);
        if (mm_write_adapter(&b, &l, name, p, e) || art_add(a, dir, "adapter.gguf", e)) goto done;
        r->adapter_tensors = 2 * l.n;
    }
    snprintf(r->mmproj_file, sizeof r->mmproj_file, "mmproj.%s.gguf",
             mix->def == DT_F32 ? "F32" : mix->def == DT_BF16 ? "BF16" : "F16");
    snprintf(p, sizeof p, "%s/%s", dir, r->mmproj_file);
    if (mm_write_mmproj(&b, mix, name, p, &r->mmproj_tensors, e) || art_add(a, dir, r->mmproj_file, e)) goto done;
    rc = 0;
done:
    tok_free(t);
    mm_lora_free(&l);
    mm_close(&b);
    return rc;
}

/* Ollama: a GGUF of architecture clip given as a second FROM is the
 * model's projector (its image layer application/vnd.ollama.image.projector);
 * ChatML, which Qwen2-VL's template is, with Ollama's own chatml TEMPLATE. */
static void modelfile_text(const export_opts *o, const mm_ctx *c, const mm_export_result *r, strbuf *sb)
{
    char when[32];
    time_iso_utc(time_now(), when, sizeof when);
    sb_printf(sb, "# Generated by dlm %s at %s\n# source: %s\n# dlm_id: %s\n# adapter_version: %d\n# base_model: %s\n"
                  "# quant: %s\n# merged: %s\n# images: the second FROM is the vision tower + projector (mmproj)\n\n",
              DLM_VERSION, when, o->doc_path, doc_fm(c->doc)->dlm_id, c->version, base_hf_id(c), r->quant,
              o->merged ? "true" : "false");
    sb_printf(sb, "FROM ./%s\nFROM ./%s\n", r->lang_file, r->mmproj_file);
    if (!o->merged) sb_puts(sb, "ADAPTER ./adapter.gguf\n");
    if (!o->no_template)
        sb_puts(sb, "\nTEMPLATE \"\"\"{{- range .Messages }}<|im_start|>{{ .Role }}\n{{ .Content }}<|im_end|>\n{{ end }}"
                    "<|im_start|>assistant\n\"\"\"\n\nPARAMETER stop \"<|im_end|>\"\nPARAMETER stop \"<|endoftext|>\"\n");
    sb_puts(sb, "PARAMETER temperature 0.7\n");
    const char *sys = doc_fm(c->doc)->system_prompt;
    if (sys && *sys) {
        sb_puts(sb, "\nSYSTEM \"\"\"");
        sb_puts(sb, sys);
        sb_puts(sb, "\"\"\"\n");
    }
}

/* ---- the store's record -------------------------------------------------------------------- */

static json_t *art_sha(const arts *a, const char *path)
{
    size_t i;
    json_t *x;
    json_array_foreach(a->list, i, x) if (path && !strcmp(jget_str(x, "path"), path)) return json_string(jget_str(x, "sha256"));
    return json_null();
}

/* Append the export to <store>/manifest.json's exports under the store lock
 * (waits up to 60 s for another writer), as the text export does; the
 * snapshot's quant is "HF" (as --target vllm's). */
static int record_in_store(const mm_ctx *c, const export_opts *o, const mm_export_result *r, const arts *a, dlm_err *e)
{
    store_lock lk;
    double until = time_mono() + 60;
    for (;;) {
        if (store_lock_acquire(c->store, "export", &lk, e) == 0) break;
        if (strcmp(e->kind, "LockHeldError") || time_mono() > until) return -1;
        usleep(200 * 1000);
    }
    char mp[4200], now[32];
    snprintf(mp, sizeof mp, "%s/manifest.json", c->store);
    time_iso_utc(time_now(), now, sizeof now);
    int rc = -1;
    json_t *m = manifest_load(mp, e);
    if (!m) goto done;
    json_t *x = json_pack("{s:s, s:s, s:s, s:b, s:n, s:n, s:n, s:o, s:o, s:n, s:o}", "exported_at", now, "target",
                          export_target_name((export_target)r->target), "quant", r->quant ? r->quant : "HF", "merged",
                          o->merged, "ollama_name", "ollama_version", "llama_cpp_tag", "base_gguf_sha256",
                          art_sha(a, r->quant ? r->lang_file : NULL), "adapter_gguf_sha256",
                          art_sha(a, r->adapter_tensors ? "adapter.gguf" : NULL), "smoke_output_first_line",
                          "adapter_name", c->adapter_name ? json_string(c->adapter_name) : json_null());
    if (!x) { err_set(e, "MemoryError", "out of memory"); goto done; }
    rc = manifest_add_export(m, x, e);
    json_decref(x);
    if (!rc) rc = manifest_save(mp, m, e);
done:
    json_decref(m);
    store_lock_release(&lk);
    return rc;
}

/* ---- the run -------------------------------------------------------------------------------- */

static int pick_target(const export_opts *o, int given, mm_kind k, int *out, dlm_err *e)
{
    int t = given ? (int)o->target : k == MM_QWEN2VL ? EXPORT_TARGET_OLLAMA : EXPORT_TARGET_HF_SNAPSHOT;
    const char *kn = mm_kind_name(k);
    if (t == EXPORT_TARGET_VLLM || t == EXPORT_TARGET_MLX_SERVE || t == EXPORT_TARGET_LLAMA_SERVER) {
        err_set(e, "ExportError", "--target %s cannot carry the %s tower of a %s base: dlm writes it only for llama.cpp's "
                "mtmd (--target gguf) and the HF snapshot", export_target_name((export_target)t),
                mm_kind_is_audio(k) ? "audio" : "vision", kn);
        return err_hint(e, "use --target hf-snapshot%s", k == MM_PALIGEMMA ? "" : " or --target gguf (llama-mtmd-cli, llama-server --mmproj)");
    }
    if (k == MM_PALIGEMMA && (t == EXPORT_TARGET_GGUF || t == EXPORT_TARGET_OLLAMA)) {
        err_set(e, "ExportError", "--target %s: llama.cpp cannot run PaliGemma (its converter has no PaliGemma class and "
                "its mtmd library no projector for it), so there is no GGUF pair to write", export_target_name((export_target)t));
        return err_hint(e, "use --target hf-snapshot (transformers + PEFT)");
    }
    if (k == MM_QWEN2AUDIO && t == EXPORT_TARGET_OLLAMA) {
        err_set(e, "ExportError", "--target ollama: Ollama takes no audio input");
        return err_hint(e, "use --target hf-snapshot, or --target gguf for llama-mtmd-cli --audio");
    }
    if (t == EXPORT_TARGET_HF_SNAPSHOT) {
        const char *bad = o->quant ? "--quant" : o->merged ? "--merged" : o->no_imatrix ? "--no-imatrix" : o->dequantize ? "--dequantize"
                          : o->no_template ? "--no-template" : o->pre_tokenizer ? "--pre-tokenizer" : NULL;
        if (bad) {
            err_set(e, "ExportError", "%s does not apply to the HF snapshot (the adapter and processor files as they are)", bad);
            return err_hint(e, "drop it, or export llama.cpp's GGUF pair with --target gguf");
        }
    }
    if (o->adapter_mix) {
        err_set(e, "ExportError", "--adapter-mix is not built for %s bases", kn);
        return err_hint(e, "export one adapter (the current one, or --adapter NAME)");
    }
    if (o->draft) {
        err_set(e, "ExportError", "--draft: no draft model is paired with a %s base", kn);
        return err_hint(e, "drop --draft");
    }
    if (o->dequantize) {
        err_set(e, "ExportError", "--dequantize: the %s export reads the float checkpoint; there is nothing to dequantize", kn);
        return err_hint(e, "drop --dequantize");
    }
    *out = t;
    return 0;
}

int mm_export_run(const export_opts *o, int target_given, mm_export_result *r, dlm_err *e)
{
    memset(r, 0, sizeof *r);
    mm_ctx c;
    memset(&c, 0, sizeof c);
    arts a = {.list = json_array()};
    json_t *m = NULL;
    strbuf sb = STRBUF_INIT;
    char stage[4400] = "";
    int rc = -1;
    if (resolve_base(o, &c, e)) goto done;
    if (c.kind == MM_NONE) { err_set(e, "ExportError", "%s: not a vision- or audio-language base", o->doc_path); goto done; }
    r->kind = c.kind;
    if (pick_target(o, target_given, c.kind, &r->target, e)) {
        e->code = 2;   /* a combination of options this base cannot take */
        goto done;
    }
    if (resolve_adapter(o, &c, e)) goto done;
    r->adapter_version = c.version;
    int snap = r->target == EXPORT_TARGET_HF_SNAPSHOT;
    const export_mix *mix = NULL;
    if (!snap) {
        const char *qn = o->quant ? o->quant : doc_quant_names[doc_fm(c.doc)->export.default_quant];
        mix = export_mix_find(qn);
        if (!mix) { err_set(e, "ExportError", "unknown quantization '%s'", qn); goto done; }
        r->quant = mix->name;
    }
    if (o->out_dir) snprintf(r->dir, sizeof r->dir, "%s", o->out_dir);
    else {
        char rel[160];
        snprintf(rel, sizeof rel, "exports/%s%s%s", c.adapter_name ? c.adapter_name : "", c.adapter_name ? "/" : "",
                 snap ? (mm_kind_is_audio(c.kind) ? "hf-audio-snapshot" : "hf-snapshot") : mix->name);
        if (store_path(c.store, rel, r->dir, sizeof r->dir, e)) goto done;
    }
    if (o->out_dir && fs_is_dir(r->dir)) {
        char **names;
        int k = fs_list_dir(r->dir, &names, e);
        if (k < 0) goto done;
        fs_free_list(names, k);
        if (k) {
            err_set(e, "ExportError", "--out %s is not empty", r->dir);
            err_hint(e, "give a new or empty folder");
            goto done;
        }
    }
    {
        char parent[4096];
        fs_dirname(parent, sizeof parent, r->dir);
        if (fs_mkdir_p(parent, e)) goto done;
        snprintf(stage, sizeof stage, "%s/.%s.tmp-%d", parent, fs_basename(r->dir), (int)getpid());
        fs_remove_tree(stage, NULL);
        if (fs_mkdir_p(stage, e)) goto done;
    }
    char when[32];
    time_iso_utc(time_now(), when, sizeof when);
    m = json_object();
    if (snap) {
        if (write_snapshot(&c, stage, &a, e)) goto done;
        const char *rev = base_revision(&c);
        json_object_set_new(m, "export_target", json_string("hf_snapshot"));
        json_object_set_new(m, "created_at", json_string(when));
        json_object_set_new(m, "created_by", json_string("dlm-" DLM_VERSION));
        json_object_set_new(m, "base_model_hf_id", json_string(base_hf_id(&c)));
        json_object_set_new(m, "base_model_revision", *rev ? json_string(rev) : json_null());
        json_object_set_new(m, "base_model_architecture", json_string(base_arch(&c)));
        json_object_set_new(m, "modality", json_string(mm_kind_is_audio(c.kind) ? "audio-language" : "vision-language"));
        plan_fields(&c, m);
        json_object_set_new(m, "adapter_version", json_integer(c.version));
        json_object_set_new(m, "adapter_name", c.adapter_name ? json_string(c.adapter_name) : json_null());
        json_object_set_new(m, "rationale", json_string(
            c.kind == MM_PALIGEMMA ? "llama.cpp has no PaliGemma support; the HF snapshot loads with transformers + PEFT."
                                   : "The HF snapshot loads with transformers + PEFT; --target gguf writes llama.cpp's "
                                     "multimodal pair (language GGUF + mmproj)."));
        json_object_set(m, "artifacts", a.list);
        readme_text(&c, &sb);
        if (write_json(stage, "snapshot_manifest.json", m, e) || write_text(stage, "README.md", sb.buf, e)) goto done;
    } else {
        if (write_pair(o, &c, mix, stage, &a, r, e)) goto done;
        if (r->target == EXPORT_TARGET_OLLAMA) {
            modelfile_text(o, &c, r, &sb);
            if (write_text(stage, "Modelfile", sb.buf, e) || art_add(&a, stage, "Modelfile", e)) goto done;
            snprintf(r->next_steps, sizeof r->next_steps, "cd %s && ollama create %s -f Modelfile", r->dir,
                     o->name ? o->name : "NAME");
        }
        const char *rev = base_revision(&c);
        json_object_set_new(m, "target", json_string(export_target_name((export_target)r->target)));
        json_object_set_new(m, "quant", json_string(mix->name));
        json_object_set_new(m, "merged", json_boolean(o->merged));
        json_object_set_new(m, "created_at", json_string(when));
        json_object_set_new(m, "created_by", json_string("dlm-" DLM_VERSION));
        json_object_set_new(m, "llama_cpp_tag", json_null());
        json_object_set_new(m, "base_model", json_string(doc_fm(c.doc)->base_model));
        json_object_set_new(m, "base_model_hf_id", json_string(base_hf_id(&c)));
        json_object_set_new(m, "base_model_revision", *rev ? json_string(rev) : json_null());
        json_object_set_new(m, "base_model_architecture", json_string(base_arch(&c)));
        json_object_set_new(m, "modality", json_string(mm_kind_is_audio(c.kind) ? "audio-language" : "vision-language"));
        json_object_set_new(m, "adapter_version", json_integer(c.version));
        json_object_set_new(m, "mmproj", json_pack("{s:s, s:s}", "path", r->mmproj_file, "projector_type",
                                                   c.kind == MM_QWEN2VL ? "qwen2vl_merger" : "qwen2a"));
        json_object_set_new(m, "imatrix", json_pack("{s:b, s:s}", "used", 0, "reason", "multimodal export"));
        json_object_set(m, "artifacts", a.list);
        if (write_json(stage, "export_manifest.json", m, e)) goto done;
    }
    r->n_artifacts = a.n;
    if (o->out_dir && fs_is_dir(r->dir)) rmdir(r->dir);   /* empty, checked above */
    if (publish(stage, r->dir, e)) goto done;
    stage[0] = 0;
    if (record_in_store(&c, o, r, &a, e)) {
        err_prefix(e, "the export is in %s, but the store's manifest.json was not updated", r->dir);
        goto done;
    }
    rc = 0;
done:
    if (stage[0]) fs_remove_tree(stage, NULL);
    sb_free(&sb);
    json_decref(m);
    json_decref(a.list);
    doc_free(c.doc);
    return rc;
}
