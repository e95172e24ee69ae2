/* vllm — the vllm export target (see vllm.h). */
#include "export/vllm.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kern/kern.h"
#include "weights/safetensors.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/str.h"

int export_vllm_lora_rank(int r)
{
    static const int OK[] = {1, 8, 16, 32, 64, 128, 256, 320, 512};
    for (size_t i = 0; i < sizeof OK / sizeof OK[0]; i++)
        if (r <= OK[i]) return OK[i];
    return r;
}

static int add_name(char names[][64], int cap, int *n, const char *s, dlm_err *e)
{
    if (*n >= cap) return err_set(e, "ExportError", "too many files in the vllm export");
    snprintf(names[(*n)++], 64, "%s", s);
    return 0;
}

/* (layer, module) of an HF projection weight name, or 0 */
static int proj_of(const model *m, const char *hf, int *il, int *mm)
{
    const char *p = strstr(hf, "layers.");
    if (!p) return 0;
    int l = atoi(p + 7);
    if (l < 0 || l >= m->cfg.n_layer) return 0;
    char buf[128];
    for (int k = 0; k < LM_COUNT; k++)
        if (model_proj_name_for(&m->cfg, k, l, 0, buf, sizeof buf) && !strcmp(buf, hf)) {
            *il = l;
            *mm = k;
            return 1;
        }
    return 0;
}

/* W + s·B·A in f32, rounded back to the source dtype (F32 / F16 / BF16). */
static void *merge_tensor(const model_tensor *t, const lora *l, const lora_mod *md, size_t *nbytes)
{
    int64_t cols = t->ne[0], rows = t->ne[1];
    int es = t->type == DT_F32 ? 4 : 2;
    uint8_t *out = malloc((size_t)(rows * cols) * es);
    float *row = malloc((size_t)cols * sizeof *row);
    if (!out || !row) { free(out); free(row); return NULL; }
    int rk = l->cfg.rank;
    const float *A = l->w + md->off_a;
    for (int64_t r = 0; r < rows; r++) {
        kern_dequant_row((dtype)t->type, (const uint8_t *)t->data + (size_t)(r * cols) * es, row, cols);
        const float *B = l->w + md->off_b + (size_t)r * rk;
        for (int64_t i = 0; i < cols; i++) {
            float ba = 0;
            for (int k = 0; k < rk; k++) ba += B[k] * A[(size_t)k * cols + i];
            row[i] += l->scale * ba;
        }
        uint8_t *o = out + (size_t)(r * cols) * es;
        for (int64_t i = 0; i < cols; i++) {
            if (t->type == DT_F32) memcpy(o + i * 4, &row[i], 4);
            else {
                uint16_t h = t->type == DT_F16 ? f32_to_fp16(row[i]) : f32_to_bf16(row[i]);
                memcpy(o + i * 2, &h, 2);
            }
        }
    }
    free(row);
    *nbytes = (size_t)(rows * cols) * es;
    return out;
}

static int write_merged(const model *m, const char *model_path, const lora *l, const char *dir, char names[][64],
                        int cap, int *n, dlm_err *e)
{
    char md[4200];
    if (!fs_join(md, sizeof md, dir, "model")) return err_set(e, "ExportError", "path too long");
    if (fs_mkdir_p(md, e)) return -1;
    /* the base's config, tokenizer and generation files as they are */
    char **fn;
    int k = fs_list_dir(model_path, &fn, e);
    if (k < 0) return -1;
    int rc = -1;
    for (int i = 0; i < k; i++) {
        size_t len = strlen(fn[i]);
        if ((len > 12 && !strcmp(fn[i] + len - 12, ".safetensors")) || !strcmp(fn[i], "model.safetensors.index.json") ||
            fn[i][0] == '.')
            continue;
        char src[4400], dst[4400], rel[64];
        snprintf(src, sizeof src, "%s/%s", model_path, fn[i]);
        if (!fs_is_file(src) || len > 50) continue;
        snprintf(dst, sizeof dst, "%s/%s", md, fn[i]);
        snprintf(rel, sizeof rel, "model/%s", fn[i]);
        if (fs_copy_file(src, dst, e) || add_name(names, cap, n, rel, e)) goto done;
    }
    int nt = model_tensor_count(m), no = 0;
    st_out *o = calloc((size_t)(nt ? nt : 1), sizeof *o);
    void **own = calloc((size_t)(nt ? nt : 1), sizeof *own);
    if (!o || !own) { free(o); free(own); err_set(e, "MemoryError", "out of memory"); goto done; }
    int bad = 0;
    for (int i = 0; i < nt && !bad; i++) {
        const model_tensor *t = model_tensor_at(m, i);
        if (!t->hf_name || !*t->hf_name) continue;
        st_out *x = &o[no++];
        x->name = t->hf_name;
        if (st_dtype_from_name(t->type_name, &x->dtype)) { bad = 1; break; }
        x->ndim = t->n_dims;
        for (int d = 0; d < t->n_dims; d++) x->shape[d] = t->ne[t->n_dims - 1 - d];
        x->data = t->data;
        if (l->embd && (!strcmp(t->hf_name, "model.embed_tokens.weight") || !strcmp(t->hf_name, "lm_head.weight"))) {
            /* modules_to_save: the adapter's trained f32 matrices (docs/cpt.md) */
            x->dtype = ST_F32;
            x->data = t->hf_name[0] == 'l' ? l->head : l->embd;
            continue;
        }
        int il, mm;
        const lora_mod *lm = proj_of(m, t->hf_name, &il, &mm) ? lora_mod_at(l, il, mm) : NULL;
        if (lm) {
            if (t->type != DT_F32 && t->type != DT_F16 && t->type != DT_BF16) { bad = 2; break; }
            size_t nb;
            if (!(own[i] = merge_tensor(t, l, lm, &nb))) { bad = 3; break; }
            x->data = own[i];
        }
    }
    char sp[4400];
    snprintf(sp, sizeof sp, "%s/model.safetensors", md);
    const char *meta[] = {"format", "pt", NULL};
    if (bad == 1) err_set(e, "ExportError", "a tensor of the base has a dtype safetensors cannot name");
    else if (bad == 2) err_set(e, "ExportError", "the vllm merge needs F32, F16 or BF16 projection weights");
    else if (bad == 3) err_set(e, "MemoryError", "out of memory");
    int wrc = bad ? -1 : st_write(sp, o, no, meta, e);
    for (int i = 0; i < nt; i++) free(own[i]);
    free(own);
    free(o);
    if (wrc || add_name(names, cap, n, "model/model.safetensors", e)) goto done;
    rc = 0;
done:
    fs_free_list(fn, k);
    return rc;
}

static void sh_quote(strbuf *sb, const char *s)
{
    sb_putc(sb, '\'');
    for (; *s; s++) {
        if (*s == '\'') sb_puts(sb, "'\\''");
        else sb_putc(sb, *s);
    }
    sb_putc(sb, '\'');
}

int export_vllm_write(const model *m, const char *model_path, const lora *l, const adapter_meta *meta,
                      const export_vllm_opts *o, const char *dir, char names[][64], int cap, int *n, dlm_err *e)
{
    *n = 0;
    if (l->embd && !o->merged) {
        err_set(e, "ExportError", "preflight: the adapter carries whole embed_tokens / lm_head matrices"
                " (modules_to_save, from training.cpt.embed_warmup_steps), which vLLM's LoRA loading does not apply");
        return err_hint(e, "export it merged: --target vllm --merged");
    }
    if (l->cfg.dora && !o->merged) {
        err_set(e, "ExportError", "preflight: vLLM does not load DoRA adapters");
        return err_hint(e, "export it merged: --target vllm --merged");
    }
    char lora_name[160];
    snprintf(lora_name, sizeof lora_name, "%s-adapter", o->served_name);
    int lrank = export_vllm_lora_rank(l->cfg.rank);
    if (o->merged) {
        if (write_merged(m, model_path, l, dir, names, cap, n, e)) return -1;
    } else {
        char ad[4200];
        if (!fs_join(ad, sizeof ad, dir, "adapter")) return err_set(e, "ExportError", "path too long");
        if (fs_mkdir_p(ad, e) || adapter_save(ad, l, meta, e) ||
            add_name(names, cap, n, "adapter/adapter_config.json", e) ||
            add_name(names, cap, n, "adapter/adapter_model.safetensors", e))
            return -1;
    }
    const char *served = o->merged ? "./model" : o->model_ref;
    strbuf sb = STRBUF_INIT;
    sb_printf(&sb, "#!/bin/sh\n# vLLM launcher written by dlm %s for %s (adapter v%04d%s)\n", o->dlm_version,
              o->dlm_id, o->adapter_version, o->merged ? ", merged" : "");
    sb_puts(&sb, "cd \"$(dirname \"$0\")\" || exit 1\nexec vllm serve ");
    sh_quote(&sb, served);
    if (o->revision && !o->merged) {
        sb_puts(&sb, " --revision ");
        sh_quote(&sb, o->revision);
    }
    sb_puts(&sb, " --host 127.0.0.1 --port 8000 --dtype auto --served-model-name ");
    sh_quote(&sb, o->served_name);
    sb_printf(&sb, " --max-model-len %d", o->max_model_len);
    if (!o->merged) {
        sb_puts(&sb, " --enable-lora --lora-modules ");
        sh_quote(&sb, lora_name);
        sb_printf(&sb, "=./adapter --max-lora-rank %d", lrank);
    }
    sb_puts(&sb, " \"$@\"\n");
    char p[4200];
    int rc = -1;
    if (!fs_join(p, sizeof p, dir, "vllm_launch.sh")) { err_set(e, "ExportError", "path too long"); goto done; }
    if (fs_write_atomic(p, sb.buf, sb.len, 0755, e) || add_name(names, cap, n, "vllm_launch.sh", e)) goto done;
    json_t *mods = json_array();
    if (!o->merged) json_array_append_new(mods, json_pack("{s:s, s:s}", "name", lora_name, "path", "./adapter"));
    json_t *c = json_pack("{s:s, s:o, s:s, s:i, s:s, s:s, s:i, s:b, s:o, s:o, s:b, s:s, s:i}", "model", served,
                          "revision", o->revision && !o->merged ? json_string(o->revision) : json_null(), "host",
                          "127.0.0.1", "port", 8000, "dtype", "auto", "served_model_name", o->served_name,
                          "max_model_len", o->max_model_len, "enable_lora", !o->merged, "lora_modules", mods,
                          "max_lora_rank", o->merged ? json_null() : json_integer(lrank), "merged", o->merged,
                          "dlm_id", o->dlm_id, "adapter_version", o->adapter_version);
    if (!c) { err_set(e, "MemoryError", "out of memory"); goto done; }
    int jr = !fs_join(p, sizeof p, dir, "vllm_config.json") ? err_set(e, "ExportError", "path too long")
                                                           : json_save_file(p, c, e);
    json_decref(c);
    if (jr || add_name(names, cap, n, "vllm_config.json", e)) goto done;
    rc = 0;
done:
    sb_free(&sb);
    return rc;
}
