/* export — the `dlm export` flow (see export.h). */
#include "export/export.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "adapter/adapter.h"
#include "export/admix.h"
#include "export/ollama.h"
#include "export/vllm.h"
#include "export/mlx_serve.h"
#include "infer/target.h"
#include "weights/gguf.h"
#include "store/store.h"
#include "util/fs.h"
#include "util/hash.h"
#include "util/json.h"
#include "util/log.h"
#include "util/timeutil.h"
#include "version.h"

#define EXPORT_FORMAT 1         /* bump when the bytes of an exported base change */

static const char *const TARGETS[] = {"ollama", "gguf", "llama-server", "vllm", "mlx-serve", "hf-snapshot"};

const char *export_draft_for(const char *key)
{
    static const char *const PAIRS[][2] = {
        {"qwen2.5-3b", "qwen2.5:0.5b"},
        {"qwen2.5-coder-1.5b", "qwen2.5:0.5b"},
        {"llama-3.2-3b", "llama3.2:1b"},
        {"smollm2-1.7b", "smollm2:360m"},
    };
    for (size_t i = 0; key && i < sizeof PAIRS / sizeof PAIRS[0]; i++)
        if (!strcmp(key, PAIRS[i][0])) return PAIRS[i][1];
    return NULL;
}

int export_target_parse(const char *s)
{
    for (int i = 0; i < (int)(sizeof TARGETS / sizeof TARGETS[0]); i++)
        if (!strcmp(s, TARGETS[i])) return i;
    return -1;
}

const char *export_target_name(export_target t) { return (unsigned)t < sizeof TARGETS / sizeof TARGETS[0] ? TARGETS[t] : "?"; }

/* ---- small helpers ------------------------------------------------------------------------ */

static int path_in(char *out, size_t cap, const char *dir, const char *name, dlm_err *e)
{
    if (!fs_join(out, cap, dir, name)) return err_set(e, "ExportError", "path too long: %s/%s", dir, name);
    return 0;
}

static int write_text(const char *dir, const char *name, const char *text, size_t len, int mode, dlm_err *e)
{
    char p[4200];
    if (path_in(p, sizeof p, dir, name, e)) return -1;
    return fs_write_atomic(p, text, len, mode, e);
}

/* training_run.json says whether the adapter was trained on a quantized base. */
static int trained_on_quantized(const char *adapter_dir)
{
    char p[4300];
    snprintf(p, sizeof p, "%s/training_run.json", adapter_dir);
    json_t *j = fs_is_file(p) ? json_load_path(p, 16u << 20, NULL) : NULL;
    int q = 0;
    if (j) jget_bool(j, "use_qlora", &q);
    json_decref(j);
    return q;
}

/* What identifies the base bytes an export writes: the source files (path,
 * size, mtime, inode), the mix, the pre-tokenizer name, whether the chat
 * template is in, and this writer's version. */
static void stat_line(sha256_ctx *c, const char *path)
{
    struct stat st;
    char line[4400];
    if (stat(path, &st) != 0) return;
    int n = snprintf(line, sizeof line, "%s %lld %lld %lld.%09ld\n", path, (long long)st.st_size, (long long)st.st_ino,
                     (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
    sha256_update(c, line, (size_t)n);
}

static int base_fingerprint(const char *model_path, const char *quant, const char *pre, int with_template,
                            char hex[65], dlm_err *e)
{
    sha256_ctx c;
    sha256_init(&c);
    char head[512];
    int n = snprintf(head, sizeof head, "dlm-export-base %d %s\n%s\n%s\n%d\n", EXPORT_FORMAT, DLM_VERSION, quant, pre ? pre : "",
                     with_template);
    sha256_update(&c, head, (size_t)n);
    if (fs_is_dir(model_path)) {
        char **names;
        int k = fs_list_dir(model_path, &names, e);
        if (k < 0) return -1;
        for (int i = 0; i < k; i++) {
            char p[4400];
            snprintf(p, sizeof p, "%s/%s", model_path, names[i]);
            if (fs_is_file(p)) stat_line(&c, p);
        }
        fs_free_list(names, k);
    } else {
        stat_line(&c, model_path);
    }
    unsigned char d[32];
    sha256_final(&c, d);
    hex_encode(d, 32, hex);
    return 0;
}

/* The previous export_manifest.json recorded this fingerprint and a sha256
 * for file, and the file still has it. */
static int can_reuse(const char *dir, const char *file, const char *fp, char sha_out[65])
{
    char mp[4200], fpath[4200];
    if (!fs_join(mp, sizeof mp, dir, "export_manifest.json") || !fs_join(fpath, sizeof fpath, dir, file)) return 0;
    if (!fs_is_file(mp) || !fs_is_file(fpath)) return 0;
    json_t *j = json_load_path(mp, 16u << 20, NULL);
    if (!j) return 0;
    int ok = 0;
    const char *rec = jget_str(j, "base_fingerprint");
    json_t *arts = json_object_get(j, "artifacts");
    const char *want = NULL;
    for (size_t i = 0; json_is_array(arts) && i < json_array_size(arts); i++) {
        json_t *a = json_array_get(arts, i);
        const char *p = jget_str(a, "path");
        if (p && !strcmp(p, file)) want = jget_str(a, "sha256");
    }
    if (rec && !strcmp(rec, fp) && want && strlen(want) == 64) {
        char got[65];
        if (sha256_file_hex(fpath, got, NULL) == 0) {
            if (!strcmp(got, want)) {
                memcpy(sha_out, got, 65);
                ok = 1;
            } else {
                log_warn("export: %s changed since the last export (sha256 %.12s…, recorded %.12s…); writing it again",
                         file, got, want);
            }
        }
    }
    json_decref(j);
    return ok;
}

typedef struct artifact {
    char path[64];
    char sha[65];
    int64_t size;
} artifact;

static int add_artifact(artifact *a, int *n, const char *dir, const char *name, const char *known_sha, dlm_err *e)
{
    char p[4200];
    if (path_in(p, sizeof p, dir, name, e)) return -1;
    artifact *x = &a[(*n)++];
    snprintf(x->path, sizeof x->path, "%s", name);
    if (known_sha) memcpy(x->sha, known_sha, 65);
    else if (sha256_file_hex(p, x->sha, e)) return -1;
    x->size = fs_file_size(p);
    return 0;
}

static const char *artifact_sha(const artifact *a, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(a[i].path, name)) return a[i].sha;
    return NULL;
}

static void shell_quote(strbuf *out, const char *s)
{
    sb_putc(out, '\'');
    for (; *s; s++) {
        if (*s == '\'') sb_puts(out, "'\\''");
        else sb_putc(out, *s);
    }
    sb_putc(out, '\'');
}

/* ---- ollama ------------------------------------------------------------------------------- */

static int run_ollama(const char *bin, const char *home, const char *dir, const export_opts *o, export_result *r,
                      dlm_err *e)
{
    export_proc p;
    char *vargv[] = {(char *)bin, "--version", NULL};
    if (export_proc_run(vargv, dir, 10, &p, e) == 0 && p.exit_code == 0) {
        /* "ollama version is 0.5.7" (newer: one line per client/server) */
        const char *s = sb_str(&p.out), *v = strstr(s, "version is ");
        v = v ? v + 11 : s;
        size_t n = strcspn(v, " \r\n");
        snprintf(r->ollama_version, sizeof r->ollama_version, "%.*s", (int)n, v);
    }
    export_proc_free(&p);
    /* one `ollama create` at a time per home (the original's ollama.lock) */
    char lp[4200];
    int lfd = -1;
    if (fs_join(lp, sizeof lp, home, "ollama.lock") && !fs_mkdir_p(home, NULL)) {
        lfd = open(lp, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (lfd >= 0) flock(lfd, LOCK_EX);
    }
    int rc = -1;
    char *cargv[] = {(char *)bin, "create", r->ollama_name, "-f", "Modelfile", NULL};
    log_info("export: ollama create %s", r->ollama_name);
    if (export_proc_run(cargv, dir, 600, &p, e)) goto done;
    if (p.exit_code != 0) {
        err_set(e, "OllamaError", "ollama create %s failed (%s %d): %s", r->ollama_name,
                p.timed_out ? "timed out after" : "exit", p.timed_out ? 600 : p.exit_code, sb_str(&p.err));
        export_proc_free(&p);
        goto done;
    }
    export_proc_free(&p);
    r->ollama_ran = 1;
    if (!o->no_smoke) {
        char *rargv[] = {(char *)bin, "run", r->ollama_name, "Hello.", NULL};
        if (export_proc_run(rargv, dir, 120, &p, e)) goto done;
        const char *s = sb_str(&p.out);
        while (*s == '\n' || *s == '\r' || *s == ' ') s++;
        size_t n = strcspn(s, "\r\n");
        if (p.exit_code != 0 || n == 0) {
            err_set(e, "OllamaSmokeError", "smoke prompt failed: ollama run %s \"Hello.\" %s: %s", r->ollama_name,
                    p.exit_code != 0 ? "exited with an error" : "printed nothing", sb_str(&p.err));
            err_hint(e, "the model was created; --no-smoke skips this check");
            export_proc_free(&p);
            goto done;
        }
        snprintf(r->smoke, sizeof r->smoke, "%.*s", (int)(n > 200 ? 200 : n), s);
        export_proc_free(&p);
    }
    rc = 0;
done:
    if (lfd >= 0) close(lfd);
    return rc;
}

/* ---- manifests ----------------------------------------------------------------------------- */

static json_t *jstr_or_null(const char *s) { return s && *s ? json_string(s) : json_null(); }

static int write_export_manifest(const char *dir, const export_opts *o, const export_result *r, const infer_target *T,
                                 const char *fp, const artifact *arts, int n_arts, json_t *mix, dlm_err *e)
{
    char now[32];
    time_iso_utc(time_now(), now, sizeof now);
    const reg_entry *ent = T->base.entry;
    const char *hf = ent ? ent->hf_id : T->base.kind == BASE_HF ? T->base.hf_id : NULL;
    const char *rev = ent ? ent->revision : T->base.kind == BASE_HF ? T->base.revision : NULL;
    json_t *types = json_object(), *a = json_array();
    for (int i = 0; i < DT_COUNT; i++)
        if (r->info.n_by_type[i]) json_object_set_new(types, dtype_name((dtype)i), json_integer(r->info.n_by_type[i]));
    for (int i = 0; i < n_arts; i++)
        json_array_append_new(a, json_pack("{s:s, s:s, s:I}", "path", arts[i].path, "sha256", arts[i].sha,
                                           "size_bytes", (json_int_t)arts[i].size));
    char by[64];
    snprintf(by, sizeof by, "dlm-%s", DLM_VERSION);
    json_t *m = json_pack("{s:s, s:s, s:b, s:b, s:o, s:s, s:s, s:n, s:s, s:o, s:o, s:i, s:s, s:o, s:o, s:b, s:i, s:o}",
                          "target", export_target_name(o->target), "quant", r->quant, "merged", o->merged,
                          "dequantized", o->dequantize, "ollama_name",
                          o->target == EXPORT_TARGET_OLLAMA ? json_string(r->ollama_name) : json_null(), "created_at",
                          now, "created_by", by, "llama_cpp_tag", "base_model", T->base_spec, "base_model_hf_id",
                          jstr_or_null(hf), "base_model_revision", jstr_or_null(rev), "adapter_version",
                          r->adapter_version, "base_fingerprint", fp, "pre_tokenizer", jstr_or_null(r->pre), "tensor_types", types,
                          "reused_base", r->reused_base, "template_drift_checked", r->drift_checked, "artifacts", a);
    if (!m) return err_set(e, "MemoryError", "out of memory");
    json_object_set(m, "adapter_mix", mix ? mix : json_null());
    if (o->gate_mode) json_object_set_new(m, "gate_mode", json_string(o->gate_mode));
    json_object_set_new(m, "adapter_name", T->adapter_name ? json_string(T->adapter_name) : json_null());
    const calib_result *ir = &r->imatrix;
    json_object_set_new(m, "imatrix",
                        ir->used ? json_pack("{s:b, s:s, s:s, s:i, s:i, s:I, s:b}", "used", 1, "sha256", ir->sha256,
                                             "corpus_sha256", ir->corpus_sha256, "chunks", ir->chunks, "chunk_size",
                                             ir->chunk_size, "tokens", (json_int_t)ir->tokens, "cached", ir->cached)
                                 : json_pack("{s:b, s:s}", "used", 0, "reason", ir->reason ? ir->reason : "none"));
    char p[4200];
    int rc = path_in(p, sizeof p, dir, "export_manifest.json", e) ? -1 : json_save_file(p, m, e);
    json_decref(m);
    return rc;
}

/* Append the export to <store>/manifest.json under the store lock (waits
 * up to 60 s for another writer, as the original does). */
static int record_in_store(const infer_target *T, const export_opts *o, const export_result *r, const artifact *arts,
                           int n_arts, dlm_err *e)
{
    store_lock lk;
    double until = time_mono() + 60;
    for (;;) {
        if (store_lock_acquire(T->store, "export", &lk, e) == 0) break;
        if (strcmp(e->kind, "LockHeldError") || time_mono() > until) return -1;
        usleep(200 * 1000);
    }
    char mp[4200];
    int rc = -1;
    json_t *m = NULL;
    if (path_in(mp, sizeof mp, T->store, "manifest.json", e) || !(m = manifest_load(mp, e))) goto done;
    char now[32];
    time_iso_utc(time_now(), now, sizeof now);
    char mf[64];
    snprintf(mf, sizeof mf, "%s", r->model_file);
    json_t *x = json_pack("{s:s, s:s, s:s, s:b, s:o, s:o, s:n, s:o, s:o, s:o, s:n}", "exported_at", now, "target",
                          export_target_name(o->target), "quant", r->quant, "merged", o->merged, "ollama_name",
                          r->ollama_ran ? json_string(r->ollama_name) : json_null(), "ollama_version",
                          jstr_or_null(r->ollama_version), "llama_cpp_tag", "base_gguf_sha256",
                          jstr_or_null(artifact_sha(arts, n_arts, mf)), "adapter_gguf_sha256",
                          jstr_or_null(artifact_sha(arts, n_arts, "adapter.gguf")), "smoke_output_first_line",
                          jstr_or_null(r->smoke), "adapter_name");
    if (x && T->adapter_name) json_object_set_new(x, "adapter_name", json_string(T->adapter_name));
    if (!x) { err_set(e, "MemoryError", "out of memory"); goto done; }
    rc = manifest_add_export(m, x, e);
    json_decref(x);
    if (!rc) rc = manifest_save(mp, m, e);
done:
    json_decref(m);
    store_lock_release(&lk);
    return rc;
}

/* ---- adapter mixes ------------------------------------------------------------------------ */

/* --adapter-mix: load every source (a version vNNNN of the document's
 * adapter, or an adapter folder), combine them (admix.h), and describe
 * the mix for export_manifest.json. */
static int load_mix(const export_opts *o, infer_target *T, export_result *r, lora **out, json_t **mj, dlm_err *e)
{
    admix_spec sp;
    if (admix_parse(o->adapter_mix, &sp, e)) return -1;
    lora *ls[ADMIX_MAX] = {0};
    int rc = -1;
    json_t *srcs = json_array();
    double *rel = NULL;
    for (int i = 0; i < sp.n; i++) {
        const char *s = sp.src[i];
        char dir[4300];
        size_t k = 1;
        while (s[0] == 'v' && s[k] >= '0' && s[k] <= '9') k++;
        if (doc_adapter_index(doc_fm(T->doc), s) >= 0) {
            /* a named adapter of training.adapters: its current version */
            char ad[4200], vn[16];
            int v = store_current_version_of(T->store, s, e);
            if (v < 0) goto done;
            if (v == 0) {
                err_set(e, "ExportError", "--adapter-mix: adapter '%s' has no trained version", s);
                err_hint(e, "train it first: dlm train %s --adapter %s", o->doc_path, s);
                goto done;
            }
            store_version_name(v, vn, sizeof vn);
            if (store_adapter_dir(T->store, s, ad, sizeof ad, e)) goto done;
            snprintf(dir, sizeof dir, "%s/versions/%s", ad, vn);
        } else if (s[0] == 'v' && k > 1 && !s[k]) {
            char rel_[64];
            snprintf(rel_, sizeof rel_, "adapter/versions/v%04d", atoi(s + 1));
            if (store_path(T->store, rel_, dir, sizeof dir, e)) goto done;
        } else {
            snprintf(dir, sizeof dir, "%s", s);
        }
        char cfgp[4400];
        snprintf(cfgp, sizeof cfgp, "%s/adapter_config.json", dir);
        if (!fs_is_file(cfgp)) {
            err_set(e, "ExportError", "--adapter-mix: '%s' is no adapter (%s is missing)", s, cfgp);
            err_hint(e, "name a trained version of this document (dlm show %s lists them) or a PEFT adapter folder",
                     o->doc_path);
            goto done;
        }
        if (o->merged && !o->dequantize && trained_on_quantized(dir)) {
            err_set(e, "UnsafeMergeError", "merge refused: adapter '%s' was trained on a quantized base", s);
            err_hint(e, "--dequantize merges it into an f16 copy of the dequantized base and quantizes that");
            goto done;
        }
        if (adapter_load(dir, T->m, &ls[i], e)) goto done;
        if (ls[i]->embd) {
            err_set(e, "ExportError", "--adapter-mix: '%s' carries whole embed_tokens / lm_head matrices"
                    " (modules_to_save, from training.cpt.embed_warmup_steps); a mix of LoRA deltas cannot combine them", s);
            err_hint(e, "export that adapter alone: dlm export %s --merged", o->doc_path);
            goto done;
        }
        json_array_append_new(srcs, json_pack("{s:s, s:s, s:f, s:i, s:f}", "source", s, "path", dir, "weight", sp.w[i],
                                              "rank", ls[i]->cfg.rank, "alpha", (double)ls[i]->cfg.alpha));
    }
    if (admix_build(T->m, ls, sp.w, sp.n, (admix_method)o->mix_method, out, &rel, e)) goto done;
    r->n_mix = sp.n;
    r->mix_rank = (*out)->cfg.rank;
    *mj = json_pack("{s:s, s:O, s:i}", "method", admix_method_name((admix_method)o->mix_method), "adapters", srcs,
                    "rank", r->mix_rank);
    if (rel) {
        /* each tensor by the name llama.cpp gives its LoRA pair */
        json_t *errs = json_object();
        for (int il = 0; il < (*out)->n_layer; il++)
            for (int mm = 0; mm < LM_COUNT; mm++) {
                double v = rel[il * LM_COUNT + mm];
                if (v < 0) continue;
                char name[64];
                model_config fc = {.fused = (*out)->fused};   /* phi3: attn_qkv, the fused ffn_up */
                if (!model_proj_name_for(&fc, mm, il, 1, name, sizeof name)) continue;
                json_object_set_new(errs, name, json_real(v));
                if (v > r->mix_max_err) r->mix_max_err = v;
            }
        json_object_set_new(*mj, "svd_relative_frobenius_error", errs);
    }
    rc = 0;
done:
    for (int i = 0; i < sp.n; i++) lora_free(ls[i]);
    free(rel);
    json_decref(srcs);
    return rc;
}

/* ---- vllm ---------------------------------------------------------------------------------- */

static int write_vllm(const export_opts *o, const infer_target *T, const lora *L, int num_ctx, const char *wdir,
                      artifact *arts, int *n_arts, dlm_err *e)
{
    const doc_frontmatter *fm = doc_fm(T->doc);
    const reg_entry *ent = T->base.entry;
    const char *hf = ent ? ent->hf_id : T->base.kind == BASE_HF ? T->base.hf_id : NULL;
    const char *rev = ent ? ent->revision : T->base.kind == BASE_HF && T->base.revision[0] ? T->base.revision : NULL;
    char abs[4096], served[64];
    if (!hf) {
        if (!realpath(T->model_path, abs)) snprintf(abs, sizeof abs, "%s", T->model_path);
        hf = abs;
        rev = NULL;
    }
    size_t k = 0;
    served[k++] = 'd', served[k++] = 'l', served[k++] = 'm', served[k++] = '-';
    for (const char *p = fm->dlm_id; *p && k < sizeof served - 1; p++) served[k++] = (char)tolower((unsigned char)*p);
    served[k] = 0;
    export_vllm_opts vo = {.model_ref = hf, .revision = rev, .served_name = served, .max_model_len = num_ctx,
                           .merged = o->merged, .dlm_version = DLM_VERSION, .dlm_id = fm->dlm_id,
                           .adapter_version = T->version};
    adapter_meta meta = {.base_model = hf, .revision = rev};
    char names[40][64];
    int n;
    if (export_vllm_write(T->m, T->model_path, L, &meta, &vo, wdir, names, 40, &n, e)) return -1;
    for (int i = 0; i < n; i++)
        if (add_artifact(arts, n_arts, wdir, names[i], NULL, e)) return -1;
    return 0;
}

/* ---- mlx-serve ----------------------------------------------------------------------------- */

static int write_mlx(const infer_target *T, const lora *L, const char *wdir, artifact *arts, int *n_arts, dlm_err *e)
{
    const reg_entry *ent = T->base.entry;
    const char *hf = ent ? ent->hf_id : T->base.kind == BASE_HF ? T->base.hf_id : NULL;
    const char *rev = ent ? ent->revision : T->base.kind == BASE_HF && T->base.revision[0] ? T->base.revision : NULL;
    char abs[4096];
    if (!hf) {   /* a local folder: mlx_lm.server --model takes its path */
        if (!realpath(T->model_path, abs)) snprintf(abs, sizeof abs, "%s", T->model_path);
        hf = abs;
        rev = NULL;
    }
    export_mlx_opts mo = {.model_ref = hf, .dlm_version = DLM_VERSION, .dlm_id = doc_fm(T->doc)->dlm_id,
                          .adapter_version = T->version};
    adapter_meta meta = {.base_model = hf, .revision = rev};
    char names[8][64];
    int n;
    if (export_mlx_write(L, &meta, &mo, wdir, names, 8, &n, e)) return -1;
    for (int i = 0; i < n; i++)
        if (add_artifact(arts, n_arts, wdir, names[i], NULL, e)) return -1;
    return 0;
}

/* ---- the flow ------------------------------------------------------------------------------- */

/* s without leading/trailing ASCII whitespace, in buf (cap bytes). */
static const char *trimmed(const char *s, char *buf, size_t cap)
{
    while (*s == ' ' || (*s >= '\t' && *s <= '\r')) s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || (s[n - 1] >= '\t' && s[n - 1] <= '\r'))) n--;
    if (n >= cap) n = cap - 1;
    memcpy(buf, s, n);
    buf[n] = 0;
    return buf;
}

static int preflight(const export_opts *o, infer_target *T, const lora *L, export_result *r, const char **go_tmpl,
                     const char **mf_system, dlm_err *e)
{
    const doc_frontmatter *fm = doc_fm(T->doc);
    if (o->merged && !o->dequantize && !o->adapter_mix && trained_on_quantized(T->adapter_dir)) {
        err_set(e, "UnsafeMergeError", "merge refused: adapter was trained on a quantized base");
        return err_hint(e, "--dequantize merges it into an f16 copy of the dequantized base and quantizes that "
                           "(or export without --merged: the adapter then runs on the base it was trained on)");
    }
    if (!o->merged && L->cfg.dora) {
        err_set(e, "ExportError", "preflight: a DoRA adapter cannot run as a separate llama.cpp adapter");
        return err_hint(e, "export it merged: dlm export %s --merged", o->doc_path);
    }
    if (o->target == EXPORT_TARGET_VLLM || o->target == EXPORT_TARGET_MLX_SERVE) {
        /* vLLM and mlx-lm read the HF folder: no GGUF checks */
        if (T->m->from_gguf || !fs_is_dir(T->model_path)) {
            err_set(e, "ExportError", "preflight: the %s target needs an HF-format base (a folder with config.json); "
                                      "%s is a GGUF file", export_target_name(o->target), T->base_spec);
            return err_hint(e, "use an HF id or folder as base_model, or export --target gguf / llama-server");
        }
        return 0;
    }
    if (export_pre_name(T->t, o->pre_tokenizer, &r->pre, e)) return -1;
    export_special_flags(T->model_path, T->t, T->m->cfg.vocab, &r->add_bos, &r->add_eos);
    const reg_entry *ent = T->base.entry;
    if (ent && ent->tokenizer_pre && *ent->tokenizer_pre && strcmp(ent->tokenizer_pre, r->pre))
        log_warn("export: the registry lists pre-tokenizer '%s' for %s, the tokenizer looks like '%s'",
                 ent->tokenizer_pre, ent->key, r->pre);
    size_t nt = tok_vocab_size(T->t);
    if (nt > (size_t)T->m->cfg.vocab) {
        err_set(e, "ExportError", "preflight: vocab mismatch: the tokenizer has %zu tokens but the embedding has %d rows",
                nt, T->m->cfg.vocab);
        return err_hint(e, "the tokenizer does not belong to these weights");
    }
    const char *tmpl = tok_chat_template(T->t);
    if (!o->no_template && !(tmpl && *tmpl)) {
        err_set(e, "ExportError", "preflight: the base has no chat template");
        return err_hint(e, "--no-template exports without one (prompts are then plain text)");
    }
    *go_tmpl = NULL;
    *mf_system = fm->system_prompt && *fm->system_prompt ? fm->system_prompt : NULL;
    if (o->target == EXPORT_TARGET_OLLAMA && !o->no_template) {
        if (!T->dialect) {
            err_set(e, "ExportError", "preflight: the base's chat template is none dlm can write as an Ollama TEMPLATE");
            return err_hint(e, "--no-template leaves TEMPLATE out (Ollama then guesses one from the GGUF)");
        }
        *go_tmpl = export_ollama_template(T->dialect);
        if (!*go_tmpl) {
            /* every dialect has one today (test_export_ollama); a new
             * dialect without one is refused, not exported untemplated */
            err_set(e, "ExportError", "preflight: dlm has no Ollama TEMPLATE for the %s dialect yet", T->dialect->name);
            return err_hint(e, "--no-template leaves TEMPLATE out (Ollama then guesses one from the GGUF)");
        }
        if (!*mf_system) *mf_system = T->dialect->default_system;
        /* Llama 3 templates |trim the system prompt, SmolLM3's rstrips it;
         * Go cannot, so SYSTEM carries it trimmed (a YAML block scalar ends
         * with a newline) */
        if (*mf_system && (!strcmp(T->dialect->family, "llama3") || !strcmp(T->dialect->family, "smollm3")))
            *mf_system = trimmed(*mf_system, r->system_buf, sizeof r->system_buf);
        /* the ids llama.cpp adds around a prompt with the exported metadata */
        int32_t bos = tok_bos(T->t) >= 0 ? tok_bos(T->t) : T->m->cfg.bos_id;
        int32_t eos = tok_eos(T->t) >= 0 ? tok_eos(T->t) : T->m->cfg.eos_id;
        if (!export_llama_add_bos(r->add_bos, r->pre)) bos = -1;
        if (r->add_eos != 1) eos = -1;
        if (export_drift_check(T->dialect, *go_tmpl, fm->system_prompt, *mf_system, T->t, bos, eos, &r->drift_checked, e))
            return -1;
    }
    return 0;
}

/* The importance matrix for a K-quant export (export/calib.h): computed on
 * the weights being quantized (base, or base + adapter when merging) from
 * the replay corpus, or reused from the store's cache. *im stays NULL for
 * other quantizations, --no-imatrix, and a document without a corpus;
 * r->imatrix says which. */
static int export_imatrix(const export_opts *o, infer_target *T, const export_mix *mix, const lora *merge,
                          export_result *r, imatrix **im, dlm_err *e)
{
    calib_result *ir = &r->imatrix;
    memset(ir, 0, sizeof *ir);
    if (o->target == EXPORT_TARGET_VLLM || o->target == EXPORT_TARGET_MLX_SERVE || (mix->def != DT_Q4_K && mix->def != DT_Q5_K && mix->def != DT_Q6_K)) {
        ir->reason = "not a K-quant";
        return 0;
    }
    if (o->no_imatrix) {
        ir->reason = "--no-imatrix";
        return 0;
    }
    char base_key[65], wkey[65] = "base";
    if (base_fingerprint(T->model_path, "imatrix", "", 0, base_key, e)) return -1;
    if (merge) {   /* the merged weights: the adapter's own bytes and scale */
        sha256_ctx c;
        unsigned char d[32];
        sha256_init(&c);
        sha256_update(&c, &merge->scale, sizeof merge->scale);
        sha256_update(&c, merge->w, merge->n * sizeof *merge->w);
        sha256_final(&c, d);
        for (int i = 0; i < 32; i++) snprintf(wkey + 2 * i, 3, "%02x", d[i]);
    }
    calib_opts co = {.store = T->store, .m = T->m, .merge = merge, .t = T->t,
                     .bos = export_llama_add_bos(r->add_bos, r->pre) ? tok_bos(T->t) : -1, .base_key = base_key,
                     .weights_key = wkey};
    if (calib_imatrix(&co, im, ir, e)) return -1;
    if (!ir->used) log_info("export: no importance matrix (%s): quantizing without", ir->reason);
    else if (ir->cached) log_info("export: reusing the importance matrix (sha256 %.12s…)", ir->sha256);
    return 0;
}

int export_run(const export_opts *o, export_result *r, dlm_err *e)
{
    memset(r, 0, sizeof *r);
    if (!o->doc_path) return err_set(e, "ExportError", "export needs a document");
    if (o->target == EXPORT_TARGET_HF_SNAPSHOT) {   /* export/mm_export.h takes the multimodal bases first */
        err_set(e, "ExportError", "--target hf-snapshot is for vision- and audio-language bases");
        err_hint(e, "a text base exports an HF/PEFT folder with --target vllm");
        e->code = 2;
        return -1;
    }
    infer_target T;
    target_opts to = {.doc_path = o->doc_path, .home = o->home, .use_adapter = 1, .offline = o->offline,
                      .adapter = o->adapter};
    if (target_open(&to, &T, e)) return -1;
    int rc = -1;
    const doc_frontmatter *fm = doc_fm(T.doc);
    artifact arts[48];
    int n_arts = 0, created = 0, complete = 0;
    strbuf sb = STRBUF_INIT;
    char stage[4300] = "";
    const char *wdir = r->dir;
    json_t *mixj = NULL;
    lora *mixed = NULL;
    imatrix *im = NULL;
    if (!o->adapter_mix && T.named && !T.adapter_name) {
        err_set(e, "ExportError", "%s declares named adapters: say which to export", o->doc_path);
        err_hint(e, "--adapter NAME exports one; --adapter-mix a:0.5,b:0.5 exports a weighted mix");
        e->code = 2;
        goto done;
    }
    if (!o->adapter_mix && (!T.version || !T.l)) {
        /* the first run may be under way: say so, not "train one first" */
        store_lock_info li;
        if (store_lock_read(T.store, &li) == 1 && li.alive > 0 && !strcmp(li.command, "train")) {
            err_set(e, "ExportError", "no trained version yet: a training run is in progress (PID %ld, dlm train)",
                    li.pid);
            err_hint(e, "export once it has committed its first version ('dlm status %s' shows it)", o->doc_path);
            goto done;
        }
        err_set(e, "ExportError", "no current adapter: %s/adapter%s%s/current.txt names no trained version", T.store,
                T.adapter_name ? "/" : "", T.adapter_name ? T.adapter_name : "");
        err_hint(e, "train one first: dlm train %s", o->doc_path);
        goto done;
    }
    r->adapter_version = T.version;
    const char *qname = o->quant ? o->quant : doc_quant_names[fm->export.default_quant];
    const export_mix *mix = export_mix_find(qname);
    if (!mix) {
        err_set(e, "ExportError", "unknown quantization '%s'", qname);
        err_hint(e, "use one of Q4_K_M Q5_K_M Q6_K Q8_0 Q4_0 F16 BF16 F32");
        e->code = 2;
        goto done;
    }
    r->quant = o->target == EXPORT_TARGET_VLLM ? "HF" : o->target == EXPORT_TARGET_MLX_SERVE ? "hf" : mix->name;
    if (o->target == EXPORT_TARGET_OLLAMA) {
        char id[32];
        size_t k = 0;
        for (; fm->dlm_id[k] && k < sizeof id - 1; k++) id[k] = (char)tolower((unsigned char)fm->dlm_id[k]);
        id[k] = 0;
        /* default: the document's file name (dlm-<dlm_id> when it has no
         * usable character), one model per named adapter */
        char stem[80];
        export_ollama_doc_name(o->doc_path, stem, sizeof stem);
        if (!stem[0]) snprintf(stem, sizeof stem, "dlm-%s", id);
        if (o->name) snprintf(r->ollama_name, sizeof r->ollama_name, "%s", o->name);
        else if (T.adapter_name)
            snprintf(r->ollama_name, sizeof r->ollama_name, "%s-%s:v%04d", stem, T.adapter_name, T.version);
        else snprintf(r->ollama_name, sizeof r->ollama_name, "%s:v%04d", stem, T.version);
        if (!export_ollama_name_ok(r->ollama_name)) {
            err_set(e, "ExportError", "'%s' is not a valid Ollama model name", r->ollama_name);
            err_hint(e, "use [namespace/]name[:tag] with letters, digits, '.', '-', '_' (at most 128 characters)");
            e->code = 2;
            goto done;
        }
    }
    const char *go_tmpl = NULL, *mf_system = NULL;
    if (o->adapter_mix && load_mix(o, &T, r, &mixed, &mixj, e)) goto done;
    const lora *L = mixed ? mixed : T.l;
    if (L && L->embd && !o->merged && o->target != EXPORT_TARGET_VLLM && o->target != EXPORT_TARGET_MLX_SERVE) {
        /* llama.cpp's convert_lora_to_gguf.py refuses such adapters too
         * ("Embeddings is present in the adapter") */
        err_set(e, "ExportError", "the adapter carries whole embed_tokens / lm_head matrices (modules_to_save, from"
                " training.cpt.embed_warmup_steps): a LoRA adapter GGUF cannot hold them");
        err_hint(e, "export one merged GGUF instead: dlm export %s --merged", o->doc_path);
        e->code = 2;
        goto done;
    }
    if (preflight(o, &T, L, r, &go_tmpl, &mf_system, e)) goto done;

    /* where */
    if (o->out_dir) snprintf(r->dir, sizeof r->dir, "%s", o->out_dir);
    else {
        char rel[128];
        /* a named adapter exports beside the others: exports/<name>/<QUANT> */
        snprintf(rel, sizeof rel, "exports/%s%s%s", T.adapter_name ? T.adapter_name : "", T.adapter_name ? "/" : "",
                 o->target == EXPORT_TARGET_VLLM ? "vllm" : o->target == EXPORT_TARGET_MLX_SERVE ? "mlx-serve" : mix->name);
        if (store_path(T.store, rel, r->dir, sizeof r->dir, e)) goto done;
    }
    /* A store export is written into a hidden staging folder and swapped
     * in whole (rename, or RENAME_EXCHANGE over an earlier export), so a
     * failure (a full disk, a kill) leaves the earlier export or nothing,
     * never half of one. A folder given with --out is the user's: it is
     * written in place, and removed on failure only if this run made it. */
    if (!o->out_dir) {
        char parent[4096];
        fs_dirname(parent, sizeof parent, r->dir);
        snprintf(stage, sizeof stage, "%s/.%s.tmp-%d", parent, fs_basename(r->dir), (int)getpid());
        store_sweep_temp(parent);   /* stages of killed exports */
        fs_remove_tree(stage, NULL);
        if (fs_mkdir_p(stage, e)) goto done;
        wdir = stage;
        /* files of an earlier export that this one does not rewrite stay
         * (a merged GGUF beside base + adapter): hard links, no copy */
        char **names;
        int nn = fs_is_dir(r->dir) ? fs_list_dir(r->dir, &names, NULL) : 0;
        for (int i = 0; i < nn; i++) {
            char from[4400], dst[4400];
            snprintf(from, sizeof from, "%s/%s", r->dir, names[i]);
            snprintf(dst, sizeof dst, "%s/%s", stage, names[i]);
            if (fs_is_file(from) && link(from, dst) != 0) log_warn("export: cannot keep %s of the earlier export", names[i]);
        }
        if (nn > 0) fs_free_list(names, nn);
    } else {
        created = !fs_exists(r->dir);
        if (fs_mkdir_p(r->dir, e)) goto done;
    }

    int with_tmpl = !o->no_template;
    char fp[65], known[65], mpath[4200], qtag[128];
    if (export_imatrix(o, &T, mix, o->merged ? L : NULL, r, &im, e)) goto done;
    /* the base's bytes depend on the importance matrix: it is part of the fingerprint */
    snprintf(qtag, sizeof qtag, "%s%s%s", mix->name, im ? "+imatrix:" : "", im ? r->imatrix.sha256 : "");
    if (base_fingerprint(T.model_path, qtag, r->pre, with_tmpl, fp, e)) goto done;
    const reg_entry *ent = T.base.entry;
    int ctxlen = ent && ent->context_length > 0 ? ent->context_length : T.m->cfg.max_pos;
    int num_ctx = fm->training.sequence_len < ctxlen ? fm->training.sequence_len : ctxlen;
    if (o->target == EXPORT_TARGET_VLLM) {
        if (write_vllm(o, &T, L, num_ctx, wdir, arts, &n_arts, e)) goto done;
        goto complete_folder;
    }
    if (o->target == EXPORT_TARGET_MLX_SERVE) {
        if (write_mlx(&T, L, wdir, arts, &n_arts, e)) goto done;
        goto complete_folder;
    }

    /* the model GGUF */
    snprintf(r->model_file, sizeof r->model_file, "%s.%s.gguf", o->merged ? "merged" : "base", mix->name);
    if (path_in(mpath, sizeof mpath, wdir, r->model_file, e)) goto done;
    int reuse = !o->merged && can_reuse(r->dir, r->model_file, fp, known);
    if (reuse && stage[0]) {   /* the unchanged base goes into the stage by a hard link: no copy, no space */
        char old[4200];
        if (path_in(old, sizeof old, r->dir, r->model_file, e)) goto done;
        reuse = link(old, mpath) == 0 || errno == EEXIST;
    }
    if (reuse) {
        r->reused_base = 1;
        log_info("export: reusing %s (unchanged base, sha256 %.12s… checked)", r->model_file, known);
        /* the per-type counts of a reused file come from its tensors */
        gguf_file *g;
        if (gguf_open(mpath, &g, NULL) == 0) {
            r->info.n_tensors = gguf_tensor_count(g);
            for (int i = 0; i < r->info.n_tensors; i++) {
                int ty = gguf_tensor_at(g, i)->type;
                if (ty >= 0 && ty < DT_COUNT) r->info.n_by_type[ty]++;
            }
            gguf_close(g);
        }
    } else {
        /* general.name: the registry key, or the folder / file name */
        const char *gname = T.base.entry ? T.base.entry->key : fs_basename(T.base_spec);
        export_gguf_opts go = {.mix = mix, .merge = o->merged ? L : NULL, .merge_f16 = o->merged && o->dequantize,
                               .name = gname, .pre = r->pre, .chat_template = with_tmpl, .add_bos = r->add_bos,
                               .add_eos = r->add_eos, .imatrix = im};
        log_info("export: writing %s (%s)", r->model_file, o->merged ? "adapter merged" : "base");
        if (export_write_model(T.m, T.t, &go, mpath, &r->info, e)) goto done;
    }
    if (add_artifact(arts, &n_arts, wdir, r->model_file, r->reused_base ? known : NULL, e)) goto done;
    if (!o->merged) {
        char ap[4200];
        if (path_in(ap, sizeof ap, wdir, "adapter.gguf", e) || export_write_adapter(T.m, L, fm->dlm_id, ap, e) ||
            add_artifact(arts, &n_arts, wdir, "adapter.gguf", NULL, e))
            goto done;
        r->has_adapter = 1;
        /* the summary reports the adapter's own tensors (lora_a/lora_b
         * pairs), read back from what was written */
        gguf_file *ag;
        if (gguf_open(ap, &ag, NULL) == 0) {
            r->adapter_tensors = gguf_tensor_count(ag);
            gguf_close(ag);
        }
    }

    /* target files */
    char from[96], adapter_ref[32] = "./adapter.gguf";
    snprintf(from, sizeof from, "./%s", r->model_file);
    if (o->target == EXPORT_TARGET_OLLAMA) {
        const char *stops[32];
        int n_stops = export_stop_list(T.t, o->no_template ? NULL : T.dialect, stops, 32);
        char now[32], abs[4096];
        time_iso_utc(time_now(), now, sizeof now);
        if (!realpath(o->doc_path, abs)) snprintf(abs, sizeof abs, "%s", o->doc_path);
        const char *rev = ent ? ent->revision : T.base.kind == BASE_HF && T.base.revision[0] ? T.base.revision : NULL;
        export_modelfile mf = {
            .version = DLM_VERSION, .created_at = now, .source = abs, .dlm_id = fm->dlm_id,
            .adapter_version = T.version, .base_model = T.base_spec, .base_revision = rev, .quant = mix->name,
            .merged = o->merged, .from = from, .adapter = o->merged ? NULL : adapter_ref, .template_text = go_tmpl,
            .stops = stops, .n_stops = n_stops,
            .temperature = fm->export.has_temperature ? fm->export.default_temperature
                           : ent && ent->reasoning_tuned ? 0.6 : 0.7,
            .top_p = fm->export.has_top_p ? fm->export.default_top_p : T.dialect ? T.dialect->top_p : 0.9,
            .num_ctx = num_ctx, .system = mf_system, .license = ent && ent->license ? ent->license : NULL,
            .draft = o->no_draft ? NULL : o->draft ? o->draft : export_draft_for(ent ? ent->key : NULL)};
        r->draft = mf.draft;
        if (export_modelfile_text(&mf, &sb, e) || write_text(wdir, "Modelfile", sb.buf, sb.len, 0644, e) ||
            add_artifact(arts, &n_arts, wdir, "Modelfile", NULL, e))
            goto done;
    } else if (o->target == EXPORT_TARGET_LLAMA_SERVER) {
        const char *tmpl = with_tmpl ? tok_chat_template(T.t) : NULL;
        if (tmpl) {
            if (write_text(wdir, "chat-template.jinja", tmpl, strlen(tmpl), 0644, e) ||
                add_artifact(arts, &n_arts, wdir, "chat-template.jinja", NULL, e))
                goto done;
        }
        export_llama_server_script(&sb, DLM_VERSION, r->model_file, o->merged ? NULL : "adapter.gguf",
                                   tmpl ? "chat-template.jinja" : NULL, num_ctx);
        if (write_text(wdir, "llama-server_launch.sh", sb.buf, sb.len, 0755, e) ||
            add_artifact(arts, &n_arts, wdir, "llama-server_launch.sh", NULL, e))
            goto done;
    }

complete_folder:
    /* the folder is complete (files and manifest): put it in place */
    if (write_export_manifest(wdir, o, r, &T, fp, arts, n_arts, mixj, e)) goto done;
    complete = 1;
    if (stage[0]) {
        char parent[4096];
        fs_dirname(parent, sizeof parent, r->dir);
        if (fs_exists(r->dir)) {
            if (renameat2(AT_FDCWD, stage, AT_FDCWD, r->dir, RENAME_EXCHANGE) != 0) {
                err_sys(e, "cannot move the export into '%s'", r->dir);
                goto done;
            }
            fs_remove_tree(stage, NULL);   /* the earlier export, swapped out */
        } else if (rename(stage, r->dir) != 0) {
            err_sys(e, "cannot move the export into '%s'", r->dir);
            goto done;
        }
        stage[0] = 0;
        if (fs_fsync_dir(parent, e)) goto done;
    }
    if (o->target == EXPORT_TARGET_OLLAMA) {
        char bin[4096];
        if (!o->skip_ollama && export_which("ollama", bin, sizeof bin)) {
            if (run_ollama(bin, o->home, r->dir, o, r, e)) goto done;
            /* what ollama checked goes into the manifest */
            if (write_export_manifest(r->dir, o, r, &T, fp, arts, n_arts, mixj, e)) goto done;
        } else {
            strbuf ns = STRBUF_INIT;
            sb_puts(&ns, "cd ");
            shell_quote(&ns, r->dir);
            sb_printf(&ns, " && ollama create %s -f Modelfile && ollama run %s \"Hello.\"", r->ollama_name,
                      r->ollama_name);
            snprintf(r->next_steps, sizeof r->next_steps, "%s", sb_str(&ns));
            sb_free(&ns);
        }
    }
    if (record_in_store(&T, o, r, arts, n_arts, e)) goto done;
    rc = 0;
done:
    if (rc && stage[0]) fs_remove_tree(stage, NULL);
    else if (rc && created && !complete) fs_remove_tree(r->dir, NULL);
    sb_free(&sb);
    lora_free(mixed);
    json_decref(mixj);
    imatrix_free(im);
    target_close(&T);
    return rc;
}
