/* mm_gguf — the multimodal pair for llama.cpp (see mm_gguf.h). Names and
 * keys follow llama.cpp's converter (conversion/qwenvl.py Qwen2VLModel /
 * Qwen2VLVisionModel, conversion/ultravox.py WhisperEncoderModel,
 * conversion/base.py MmprojModel, gguf-py's tensor_mapping.py); the test
 * r1901 runs that converter on the same checkpoint and compares. */
#include "export/mm_gguf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "export/export_gguf.h"
#include "kern/kern.h"
#include "weights/gguf.h"
#include "weights/model.h"
#include "weights/safetensors.h"
#include "util/fs.h"

static const char *const PROJ_HF[7] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                                       "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"};

mm_kind mm_kind_of_arch(const char *a)
{
    if (!a) return MM_NONE;
    if (!strcmp(a, "Qwen2VLForConditionalGeneration")) return MM_QWEN2VL;
    if (!strcmp(a, "PaliGemmaForConditionalGeneration")) return MM_PALIGEMMA;
    if (!strcmp(a, "Qwen2AudioForConditionalGeneration")) return MM_QWEN2AUDIO;
    return MM_NONE;
}

mm_kind mm_kind_of_dir(const char *dir)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/config.json", dir);
    if (!fs_is_file(p)) return MM_NONE;
    json_t *j = json_load_path(p, 16u << 20, NULL);
    if (!j) return MM_NONE;
    mm_kind k = MM_NONE;
    const json_t *archs = json_object_get(j, "architectures");
    if (json_is_array(archs) && json_array_size(archs)) k = mm_kind_of_arch(json_string_value(json_array_get(archs, 0)));
    const char *mt = jget_str(j, "model_type");
    if (k == MM_NONE && mt)
        k = !strcmp(mt, "qwen2_vl") ? MM_QWEN2VL : !strcmp(mt, "paligemma") ? MM_PALIGEMMA
          : !strcmp(mt, "qwen2_audio") ? MM_QWEN2AUDIO : MM_NONE;
    json_decref(j);
    return k;
}

const char *mm_kind_name(mm_kind k)
{
    return k == MM_QWEN2VL ? "Qwen2-VL" : k == MM_PALIGEMMA ? "PaliGemma" : k == MM_QWEN2AUDIO ? "Qwen2-Audio" : "text";
}

int mm_kind_is_audio(mm_kind k) { return k == MM_QWEN2AUDIO; }

const char *mm_lang_arch(const mm_base *b) { return b->kind == MM_QWEN2VL ? "qwen2vl" : "qwen2"; }

static int need_int(const json_t *o, const char *key, const char *dir, int *out, dlm_err *e)
{
    long long v;
    if (!o || jget_int(o, key, &v) || v <= 0 || v > (1 << 30))
        return err_set(e, "ExportError", "%s/config.json: no usable %s", dir, key);
    *out = (int)v;
    return 0;
}

int mm_open(const char *dir, mm_base *b, dlm_err *e)
{
    memset(b, 0, sizeof *b);
    snprintf(b->dir, sizeof b->dir, "%s", dir);
    b->kind = mm_kind_of_dir(dir);
    if (b->kind == MM_NONE) return err_set(e, "ExportError", "%s is not a vision- or audio-language checkpoint", dir);
    if (b->kind == MM_PALIGEMMA) {
        err_set(e, "ExportError", "llama.cpp cannot run PaliGemma: its converter has no PaliGemma class and its "
                                  "multimodal library (mtmd) no SigLIP + linear projector for it");
        return err_hint(e, "export the HF snapshot instead: dlm export DOC --target hf-snapshot");
    }
    char p[4200];
    snprintf(p, sizeof p, "%s/config.json", dir);
    b->cfg = json_load_path(p, 16u << 20, e);
    if (!b->cfg) return -1;
    const json_t *tc = json_object_get(b->cfg, "text_config");
    b->text = json_is_object(tc) ? tc : b->cfg;
    b->vision = json_object_get(b->cfg, b->kind == MM_QWEN2AUDIO ? "audio_config" : "vision_config");
    if (!json_is_object(b->vision)) {
        mm_close(b);
        return err_set(e, "ExportError", "%s: no %s", p, b->kind == MM_QWEN2AUDIO ? "audio_config" : "vision_config");
    }
    if (need_int(b->text, "num_hidden_layers", dir, &b->n_layer, e) || need_int(b->text, "hidden_size", dir, &b->d_model, e)
        || need_int(b->text, "vocab_size", dir, &b->vocab, e) || st_open(dir, &b->st, e)) {
        mm_close(b);
        return -1;
    }
    int tied = 0;
    if (jget_bool(b->text, "tie_word_embeddings", &tied)) jget_bool(b->cfg, "tie_word_embeddings", &tied);
    b->tied = tied;
    return 0;
}

void mm_close(mm_base *b)
{
    if (b->st) st_close(b->st);
    json_decref(b->cfg);
    memset(b, 0, sizeof *b);
}

/* ---- names -------------------------------------------------------------------------------- */

/* The text model's name of a checkpoint tensor in Qwen2ForCausalLM's form
 * ("model.layers.0...", "lm_head.weight"), or 0 when it is not part of the
 * language model. */
static int lang_name(const mm_base *b, const char *n, char *out, size_t cap)
{
    const char *rest = NULL;
    if (!strncmp(n, "model.language_model.", 21)) rest = n + 21;          /* transformers 5 */
    else if (!strncmp(n, "language_model.model.", 21)) rest = n + 21;     /* Qwen2-Audio, hub */
    else if (!strcmp(n, "language_model.lm_head.weight") || !strcmp(n, "lm_head.weight")) {
        snprintf(out, cap, "lm_head.weight");
        return 1;
    } else if (b->kind == MM_QWEN2VL && !strncmp(n, "model.", 6) && strncmp(n, "model.visual.", 13)) rest = n + 6;
    if (!rest) return 0;
    return snprintf(out, cap, "model.%s", rest) < (int)cap;
}

/* The encoder tensor's name without its prefix, or NULL. */
static const char *tower_name(const mm_base *b, const char *n)
{
    static const char *const VL[] = {"model.visual.", "visual."};
    static const char *const AU[] = {"model.audio_tower.", "audio_tower.", "model.multi_modal_projector.",
                                     "multi_modal_projector."};
    const char *const *pre = b->kind == MM_QWEN2VL ? VL : AU;
    int np = b->kind == MM_QWEN2VL ? 2 : 4;
    for (int i = 0; i < np; i++) {
        size_t k = strlen(pre[i]);
        if (!strncmp(n, pre[i], k)) return strstr(pre[i], "projector") ? n + k - strlen("multi_modal_projector.") : n + k;
    }
    return NULL;
}

/* ---- rows --------------------------------------------------------------------------------- */

/* One output tensor: its rows of ne[0] elements come from src in order,
 * starting at element row0·ne[0]; a temporal slice (Qwen2-VL's Conv3d
 * kernel [C][3][kt][kh][kw]) picks plane t of every (c, ch). */
typedef struct item {
    char name[GGUF_MAX_NAME];
    int type, n_dims;
    int64_t ne[4];
    const st_tensor *src;
    int64_t row0;
    int t, kt;                  /* t < 0: no temporal slice */
    const mm_pair *lora;
    int lora_rank;
} item;

typedef struct items {
    item *v;
    int n, cap;
    float scale;
} items;

static item *items_add(items *s, const char *name, const st_tensor *src, dlm_err *e)
{
    if (s->n == s->cap) {
        int c = s->cap ? 2 * s->cap : 64;
        item *v = realloc(s->v, (size_t)c * sizeof *v);
        if (!v) return err_set(e, "MemoryError", "out of memory"), NULL;
        s->v = v;
        s->cap = c;
    }
    item *it = &s->v[s->n++];
    memset(it, 0, sizeof *it);
    snprintf(it->name, sizeof it->name, "%s", name);
    it->src = src;
    it->t = -1;
    it->n_dims = src->ndim ? src->ndim : 1;
    for (int i = 0; i < 4; i++) it->ne[i] = 1;
    for (int i = 0; i < src->ndim && i < 4; i++) it->ne[i] = src->shape[src->ndim - 1 - i];
    return it;
}

static float src_at(const st_tensor *t, int64_t i)
{
    switch (t->dtype) {
    case ST_F32: { float f; memcpy(&f, (const char *)t->data + 4 * i, 4); return f; }
    case ST_F16: { uint16_t h; memcpy(&h, (const char *)t->data + 2 * i, 2); return fp16_to_f32(h); }
    default: { uint16_t h; memcpy(&h, (const char *)t->data + 2 * i, 2); return bf16_to_f32(h); }
    }
}

static void item_row(const item *it, int64_t r, float *row, float scale)
{
    int64_t n = it->ne[0], off;
    if (it->t >= 0) {   /* [C][3][kt][kh][kw]: row r = (c·3 + ch)·kh + y */
        int64_t kh = it->ne[1], y = r % kh, cc = r / kh;
        off = ((cc * it->kt + it->t) * kh + y) * n;
    } else off = (it->row0 + r) * n;
    for (int64_t i = 0; i < n; i++) row[i] = src_at(it->src, off + i);
    const mm_pair *p = it->lora;
    if (!p) return;
    const float *b = p->b + r * (int64_t)it->lora_rank;   /* W' = W + s·B·A, row r */
    for (int k = 0; k < it->lora_rank; k++) {
        float s = scale * b[k];
        const float *a = p->a + (int64_t)k * n;
        for (int64_t i = 0; i < n; i++) row[i] += s * a[i];
    }
}

static int64_t item_rows(const item *it) { return it->ne[1] * it->ne[2] * it->ne[3]; }

static int fill_item(void *ctx, int index, void *dst, size_t nbytes, dlm_err *e)
{
    const items *s = ctx;
    const item *it = &s->v[index];
    int64_t n = it->ne[0], rows = item_rows(it);
    size_t rb = dtype_row_bytes((dtype)it->type, n);
    if (rb * (size_t)rows != nbytes) return err_set(e, "ExportError", "%s: %zu bytes, expected %zu", it->name, nbytes, rb * (size_t)rows);
    float *row = malloc((size_t)n * sizeof *row);
    if (!row) return err_set(e, "MemoryError", "out of memory");
    for (int64_t r = 0; r < rows; r++) {
        char *d = (char *)dst + (size_t)r * rb;
        item_row(it, r, row, s->scale);
        if (it->type == DT_F32) memcpy(d, row, (size_t)n * 4);
        else if (it->type == DT_F16) for (int64_t i = 0; i < n; i++) { uint16_t h = f32_to_fp16(row[i]); memcpy(d + 2 * i, &h, 2); }
        else if (it->type == DT_BF16) for (int64_t i = 0; i < n; i++) { uint16_t h = f32_to_bf16(row[i]); memcpy(d + 2 * i, &h, 2); }
        else if (export_quant_row((dtype)it->type, row, d, n) != rb) {
            free(row);
            return err_set(e, "ExportError", "%s: cannot quantize a row of %lld to %s", it->name, (long long)n,
                           dtype_name((dtype)it->type));
        }
    }
    free(row);
    return 0;
}

static int float_src(const st_tensor *t, dlm_err *e)
{
    if (t->dtype == ST_F32 || t->dtype == ST_F16 || t->dtype == ST_BF16) return 0;
    return err_set(e, "ExportError", "tensor %s is %s; the export reads F32, F16 and BF16 checkpoints", t->name,
                   t->dtype == ST_I64 ? "I64" : "not a float type");
}

static int write_items(gguf_w *w, items *s, const char *path, dlm_err *e)
{
    for (int i = 0; i < s->n; i++) {
        item *it = &s->v[i];
        if (gguf_w_tensor(w, it->name, it->type, it->n_dims, it->ne, NULL, fill_item, s) != i)
            return err_set(e, "ExportError", "%s: duplicate or malformed tensor", it->name);
    }
    return gguf_w_write(w, path, e);
}

/* ---- the adapter -------------------------------------------------------------------------- */

static int read_f32_tensor(const st_tensor *t, float **out, dlm_err *e)
{
    if (float_src(t, e)) return -1;
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    float *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    if (!v) return err_set(e, "MemoryError", "out of memory");
    for (int64_t i = 0; i < n; i++) v[i] = src_at(t, i);
    *out = v;
    return 0;
}

void mm_lora_free(mm_lora *l)
{
    for (int i = 0; l->p && i < l->n; i++) {
        free(l->p[i].a);
        free(l->p[i].b);
    }
    free(l->p);
    memset(l, 0, sizeof *l);
}

/* "...layers.<N>.<self_attn.q_proj|...>.lora_<A|B>.weight" of the language
 * model → layer, projection, A or B; -1 for a tower's pair, -2 otherwise. */
static int parse_lora_name(const mm_base *b, const char *n, int *layer, int *proj, int *is_b)
{
    const char *p = strstr(n, ".lora_");
    if (!p || (strcmp(p, ".lora_A.weight") && strcmp(p, ".lora_B.weight"))) return -2;
    *is_b = p[6] == 'B';
    if (strstr(n, "visual.") || strstr(n, "vision_tower.") || strstr(n, "audio_tower.") || strstr(n, "multi_modal_projector."))
        return -1;
    const char *l = strstr(n, "layers.");
    if (!l) return -2;
    char *end;
    long il = strtol(l + 7, &end, 10);
    if (end == l + 7 || *end != '.' || il < 0 || il >= b->n_layer) return -2;
    for (int k = 0; k < 7; k++) {
        size_t m = strlen(PROJ_HF[k]);
        if (!strncmp(end + 1, PROJ_HF[k], m) && end + 1 + m == p) {
            *layer = (int)il;
            *proj = k;
            return 0;
        }
    }
    return -2;
}

int mm_lora_load(const char *dir, const mm_base *b, mm_lora *l, dlm_err *e)
{
    memset(l, 0, sizeof *l);
    char p[4200];
    snprintf(p, sizeof p, "%s/adapter_config.json", dir);
    json_t *cfg = json_load_path(p, 16u << 20, e);
    if (!cfg) return -1;
    long long r = 0;
    double alpha = 0;
    int dora = 0, rs = 0;
    jget_bool(cfg, "use_dora", &dora);
    jget_bool(cfg, "use_rslora", &rs);
    const json_t *mts = json_object_get(cfg, "modules_to_save");
    int bad_mts = json_is_array(mts) && json_array_size(mts) > 0;
    int ok = !jget_int(cfg, "r", &r) && r > 0 && r <= 4096 && !jget_num(cfg, "lora_alpha", &alpha);
    json_decref(cfg);
    if (!ok) return err_set(e, "ExportError", "%s: no usable r / lora_alpha", p);
    if (dora) {
        err_set(e, "ExportError", "a DoRA adapter cannot be exported as a llama.cpp adapter (no magnitude vectors)");
        return err_hint(e, "export it merged: --merged");
    }
    if (rs) return err_set(e, "ExportError", "%s: use_rslora (scale alpha/sqrt(r)) is not what llama.cpp applies", p);
    if (bad_mts) {
        err_set(e, "ExportError", "the adapter carries whole matrices (modules_to_save): a LoRA adapter GGUF cannot hold them");
        return err_hint(e, "export one merged GGUF instead: --merged");
    }
    l->rank = (int)r;
    l->alpha = (float)alpha;
    l->scale = (float)(alpha / (double)r);
    st_file *st = NULL;
    snprintf(p, sizeof p, "%s/adapter_model.safetensors", dir);
    if (st_open(p, &st, e)) return -1;
    int rc = -1, cap = st_count(st);
    l->p = calloc((size_t)(cap ? cap : 1), sizeof *l->p);
    if (!l->p) { err_set(e, "MemoryError", "out of memory"); goto done; }
    for (int i = 0; i < st_count(st); i++) {
        const st_tensor *t = st_at(st, i);
        int il, pj, isb, k = parse_lora_name(b, t->name, &il, &pj, &isb);
        if (k == -1) {
            err_set(e, "ExportError", "%s: the adapter trains the %s tower (%s); llama.cpp applies adapters to the "
                    "language model only", dir, mm_kind_is_audio(b->kind) ? "audio" : "vision", t->name);
            err_hint(e, "train LoRA on the language model's projections only");
            goto done;
        }
        if (k == -2) { err_set(e, "ExportError", "%s: unexpected adapter tensor %s", dir, t->name); goto done; }
        if (t->ndim != 2) { err_set(e, "ExportError", "%s: %s is not a matrix", dir, t->name); goto done; }
        mm_pair *q = NULL;
        for (int j = 0; j < l->n; j++)
            if (l->p[j].layer == il && l->p[j].proj == pj) q = &l->p[j];
        if (!q) {
            q = &l->p[l->n++];
            q->layer = il;
            q->proj = pj;
        }
        float **dst = isb ? &q->b : &q->a;
        if (*dst) { err_set(e, "ExportError", "%s: %s twice", dir, t->name); goto done; }
        if (isb ? t->shape[1] != r : t->shape[0] != r) {
            err_set(e, "ExportError", "%s: %s has shape [%lld, %lld], rank %lld expected", dir, t->name,
                    (long long)t->shape[0], (long long)t->shape[1], r);
            goto done;
        }
        if (isb) q->out = t->shape[0];
        else q->in = t->shape[1];
        if (read_f32_tensor(t, dst, e)) goto done;
    }
    for (int j = 0; j < l->n; j++)
        if (!l->p[j].a || !l->p[j].b) {
            err_set(e, "ExportError", "%s: layer %d %s has only one of lora_A / lora_B", dir, l->p[j].layer, PROJ_HF[l->p[j].proj]);
            goto done;
        }
    if (!l->n) { err_set(e, "ExportError", "%s: the adapter has no LoRA pairs", dir); goto done; }
    rc = 0;
done:
    st_close(st);
    if (rc) mm_lora_free(l);
    return rc;
}

static int name_cmp(const void *a, const void *b) { return export_name_cmp(*(const char *const *)a, *(const char *const *)b); }

int mm_write_adapter(const mm_base *b, const mm_lora *l, const char *name, const char *path, dlm_err *e)
{
    gguf_w *w = gguf_w_new();
    if (!w) return err_set(e, "MemoryError", "out of memory");
    gguf_w_str(w, "general.architecture", mm_lang_arch(b));
    gguf_w_str(w, "general.type", "adapter");
    gguf_w_str(w, "general.name", name && *name ? name : "dlm adapter");
    gguf_w_u32(w, "general.file_type", 0);
    gguf_w_u32(w, "general.quantization_version", 2);
    gguf_w_str(w, "adapter.type", "lora");
    gguf_w_f32(w, "adapter.lora.alpha", l->alpha);
    /* tensors in llama.cpp's name order */
    const char **names = calloc((size_t)(2 * l->n), sizeof *names);
    char (*buf)[GGUF_MAX_NAME] = calloc((size_t)(2 * l->n), GGUF_MAX_NAME);
    int rc = -1;
    if (!names || !buf) { err_set(e, "MemoryError", "out of memory"); goto done; }
    for (int j = 0; j < l->n; j++) {
        char g[GGUF_MAX_NAME];
        model_proj_name(l->p[j].proj, l->p[j].layer, 1, g, sizeof g);
        snprintf(buf[2 * j], GGUF_MAX_NAME, "%s.lora_a", g);
        snprintf(buf[2 * j + 1], GGUF_MAX_NAME, "%s.lora_b", g);
        names[2 * j] = buf[2 * j];
        names[2 * j + 1] = buf[2 * j + 1];
    }
    qsort(names, (size_t)(2 * l->n), sizeof *names, name_cmp);
    for (int i = 0; i < 2 * l->n; i++) {
        int k = (int)((names[i] - buf[0]) / GGUF_MAX_NAME), j = k / 2;
        const mm_pair *q = &l->p[j];
        int64_t ne[2];
        if (k % 2 == 0) { ne[0] = q->in; ne[1] = l->rank; }
        else { ne[0] = l->rank; ne[1] = q->out; }
        gguf_w_tensor(w, names[i], DT_F32, 2, ne, k % 2 ? q->b : q->a, NULL, NULL);
    }
    rc = gguf_w_write(w, path, e);
done:
    gguf_w_free(w);
    free(names);
    free(buf);
    return rc;
}

/* ---- the language model ------------------------------------------------------------------- */

static int lang_items(const mm_base *b, const mm_lang_opts *o, items *s, dlm_err *e)
{
    for (int i = 0; i < st_count(b->st); i++) {
        const st_tensor *t = st_at(b->st, i);
        char hf[256], g[GGUF_MAX_NAME];
        if (!lang_name(b, t->name, hf, sizeof hf)) continue;
        if (model_name_to_gguf(hf, g, sizeof g)) return err_set(e, "ExportError", "%s: unexpected tensor %s", b->dir, t->name);
        if (float_src(t, e)) return -1;
        if (b->tied && !strcmp(g, "output.weight")) continue;   /* llama.cpp reads token_embd */
        item *it = items_add(s, g, t, e);
        if (!it) return -1;
        if (o->merge)
            for (int j = 0; j < o->merge->n; j++) {
                char pn[GGUF_MAX_NAME];
                const mm_pair *q = &o->merge->p[j];
                model_proj_name(q->proj, q->layer, 1, pn, sizeof pn);
                if (strcmp(pn, g)) continue;
                if (q->in != it->ne[0] || q->out != it->ne[1])
                    return err_set(e, "ExportError", "adapter pair %s is [%lld x %lld], the weight [%lld x %lld]", g,
                                   (long long)q->out, (long long)q->in, (long long)it->ne[1], (long long)it->ne[0]);
                it->lora = q;
                it->lora_rank = o->merge->rank;
            }
    }
    if (!s->n) return err_set(e, "ExportError", "%s: no language-model tensors", b->dir);
    /* llama.cpp's order, then its mix in that order */
    for (int i = 1; i < s->n; i++)
        for (int j = i; j > 0 && export_name_cmp(s->v[j - 1].name, s->v[j].name) > 0; j--) {
            item x = s->v[j];
            s->v[j] = s->v[j - 1];
            s->v[j - 1] = x;
        }
    export_qstate qs = {.n_layer = b->n_layer};
    for (int i = 0; i < s->n; i++) {
        if (!strcmp(s->v[i].name, "output.weight")) qs.has_output = 1;
        if (strstr(s->v[i].name, "attn_v.weight")) qs.n_attention_wv++;
    }
    for (int i = 0; i < s->n; i++) {
        item *it = &s->v[i];
        it->type = export_tensor_type(o->mix, &qs, it->name, it->ne[0], it->n_dims);
    }
    return 0;
}

/* rope.dimension_sections: mrope_section (t, h, w) and a 0, as the converter pads it */
static int mrope_sections(const mm_base *b, int32_t sec[4], dlm_err *e)
{
    const char *keys[3] = {"rope_parameters", "rope_scaling", NULL};
    const json_t *ms = NULL;
    for (int k = 0; keys[k] && !ms; k++) {
        const json_t *r = json_object_get(b->text, keys[k]);
        if (!json_is_object(r)) r = json_object_get(b->cfg, keys[k]);
        if (json_is_object(r)) ms = json_object_get(r, "mrope_section");
    }
    if (!json_is_array(ms) || json_array_size(ms) < 1 || json_array_size(ms) > 4)
        return err_set(e, "ExportError", "%s/config.json: no rope mrope_section", b->dir);
    memset(sec, 0, 4 * sizeof *sec);
    for (size_t i = 0; i < json_array_size(ms); i++) sec[i] = (int32_t)json_integer_value(json_array_get(ms, i));
    return 0;
}

static double text_num(const mm_base *b, const char *key, double def)
{
    double v;
    if (!jget_num(b->text, key, &v)) return v;
    const json_t *rp = json_object_get(b->text, "rope_parameters");
    if (json_is_object(rp) && !jget_num(rp, key, &v)) return v;
    return def;
}

/* chat_template.jinja, else chat_template.json's "chat_template" (gguf-py
 * vocab.py SpecialVocab: tokenizer_config.json's, which tok has, wins). */
static char *template_alt(const char *dir)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/chat_template.jinja", dir);
    if (fs_is_file(p)) {
        size_t n;
        char *s = NULL;
        if (!fs_read_all(p, 16u << 20, &s, &n, NULL)) return s;
    }
    snprintf(p, sizeof p, "%s/chat_template.json", dir);
    json_t *j = fs_is_file(p) ? json_load_path(p, 16u << 20, NULL) : NULL;
    const char *t = j ? jget_str(j, "chat_template") : NULL;
    char *s = t ? strdup(t) : NULL;
    json_decref(j);
    return s;
}

int mm_write_lang(const mm_base *b, const tok *t, const mm_lang_opts *o, const char *path, int *n_tensors, dlm_err *e)
{
    items s = {.scale = o->merge ? o->merge->scale : 0};
    gguf_w *w = gguf_w_new();
    int rc = -1;
    if (!w) { err_set(e, "MemoryError", "out of memory"); goto done; }
    if (lang_items(b, o, &s, e)) goto done;
    const char *a = mm_lang_arch(b);
    char k[96];
    int nh, nkv, ff, ctx;
    if (need_int(b->text, "num_attention_heads", b->dir, &nh, e) || need_int(b->text, "intermediate_size", b->dir, &ff, e))
        goto done;
    long long v;
    nkv = !jget_int(b->text, "num_key_value_heads", &v) && v > 0 ? (int)v : nh;
    ctx = !jget_int(b->text, "max_position_embeddings", &v) && v > 0 ? (int)v : 32768;
    gguf_w_str(w, "general.architecture", a);
    gguf_w_str(w, "general.type", "model");
    gguf_w_str(w, "general.name", o->name ? o->name : "dlm export");
#define KEY(x) (snprintf(k, sizeof k, "%s.%s", a, x), k)
    gguf_w_u32(w, KEY("block_count"), (uint32_t)b->n_layer);
    gguf_w_u32(w, KEY("context_length"), (uint32_t)ctx);
    gguf_w_u32(w, KEY("embedding_length"), (uint32_t)b->d_model);
    gguf_w_u32(w, KEY("feed_forward_length"), (uint32_t)ff);
    gguf_w_u32(w, KEY("attention.head_count"), (uint32_t)nh);
    gguf_w_u32(w, KEY("attention.head_count_kv"), (uint32_t)nkv);
    if (b->kind == MM_QWEN2VL) {
        int32_t sec[4];
        if (mrope_sections(b, sec, e)) goto done;
        gguf_w_arr_i32(w, KEY("rope.dimension_sections"), sec, 4);
    }
    gguf_w_f32(w, KEY("rope.freq_base"), (float)text_num(b, "rope_theta", 10000.0));
    gguf_w_f32(w, KEY("attention.layer_norm_rms_epsilon"), (float)text_num(b, "rms_norm_eps", 1e-6));
#undef KEY
    gguf_w_u32(w, "general.file_type", o->mix->ftype);
    gguf_w_u32(w, "general.quantization_version", 2);
    long long bos = -1, eos = -1;
    if (jget_int(b->text, "bos_token_id", &bos)) bos = -1;
    if (jget_int(b->text, "eos_token_id", &eos)) eos = -1;
    char *alt = template_alt(b->dir);
    export_gguf_opts go = {.mix = o->mix, .pre = o->pre, .chat_template = o->chat_template, .add_bos = o->add_bos,
                           .add_eos = o->add_eos};
    int trc = export_write_tokenizer(w, t, b->vocab, (int)bos, (int)eos, alt, &go, e);
    free(alt);
    if (trc) goto done;
    if (write_items(w, &s, path, e)) goto done;
    if (n_tensors) *n_tensors = s.n;
    rc = 0;
done:
    gguf_w_free(w);
    free(s.v);
    return rc;
}

/* ---- mmproj ------------------------------------------------------------------------------- */

static int map_vl(const char *n, char *g, size_t cap, int *split)
{
    static const struct { const char *hf, *gg; } M[] = {
        {"norm1", "ln1"}, {"norm2", "ln2"}, {"attn.proj", "attn_out"}, {"mlp.fc1", "ffn_up"}, {"mlp.fc2", "ffn_down"},
        {"attn.qkv", "attn_qkv"}};
    *split = 0;
    int il, off = 0;
    if (sscanf(n, "blocks.%d.%n", &il, &off) == 1 && off > 0) {
        const char *r = n + off, *dot = strrchr(r, '.');
        for (size_t i = 0; dot && i < sizeof M / sizeof M[0]; i++)
            if ((size_t)(dot - r) == strlen(M[i].hf) && !strncmp(r, M[i].hf, (size_t)(dot - r))) {
                *split = i == 5;
                return snprintf(g, cap, "v.blk.%d.%s.%s", il, M[i].gg, dot + 1) >= (int)cap ? -1 : 0;
            }
        return -1;
    }
    if (!strncmp(n, "merger.ln_q.", 12)) return snprintf(g, cap, "v.post_ln.%s", n + 12) >= (int)cap ? -1 : 0;
    if (!strncmp(n, "merger.mlp.0.", 13)) return snprintf(g, cap, "mm.0.%s", n + 13) >= (int)cap ? -1 : 0;
    if (!strncmp(n, "merger.mlp.2.", 13)) return snprintf(g, cap, "mm.2.%s", n + 13) >= (int)cap ? -1 : 0;
    if (!strcmp(n, "patch_embed.proj.weight")) return snprintf(g, cap, "v.patch_embd.weight"), 0;
    return -1;
}

static int map_audio(const char *n, char *g, size_t cap)
{
    static const struct { const char *hf, *gg; } M[] = {
        {"self_attn_layer_norm", "ln1"}, {"final_layer_norm", "ln2"}, {"self_attn.q_proj", "attn_q"},
        {"self_attn.k_proj", "attn_k"}, {"self_attn.v_proj", "attn_v"}, {"self_attn.out_proj", "attn_out"},
        {"fc1", "ffn_up"}, {"fc2", "ffn_down"}};
    int il, off = 0;
    if (sscanf(n, "layers.%d.%n", &il, &off) == 1 && off > 0) {
        const char *r = n + off, *dot = strrchr(r, '.');
        for (size_t i = 0; dot && i < sizeof M / sizeof M[0]; i++)
            if ((size_t)(dot - r) == strlen(M[i].hf) && !strncmp(r, M[i].hf, (size_t)(dot - r)))
                return snprintf(g, cap, "a.blk.%d.%s.%s", il, M[i].gg, dot + 1) >= (int)cap ? -1 : 0;
        return -1;
    }
    if (!strncmp(n, "conv1.", 6)) return snprintf(g, cap, "a.conv1d.1.%s", n + 6) >= (int)cap ? -1 : 0;
    if (!strncmp(n, "conv2.", 6)) return snprintf(g, cap, "a.conv1d.2.%s", n + 6) >= (int)cap ? -1 : 0;
    if (!strcmp(n, "embed_positions.weight")) return snprintf(g, cap, "a.position_embd.weight"), 0;
    if (!strncmp(n, "layer_norm.", 11)) return snprintf(g, cap, "a.post_ln.%s", n + 11) >= (int)cap ? -1 : 0;
    if (!strncmp(n, "multi_modal_projector.linear.", 29))
        return snprintf(g, cap, "mm.a.fc.%s", n + 29) >= (int)cap ? -1 : 0;
    return -1;
}

/* The converter's types: F32 with --outtype f32; else 1-D tensors and
 * positions F32, matrices F16 (bf16 with BF16); Whisper's conv kernels F16
 * always (WhisperEncoderModel.tensor_force_quant). */
static int mmproj_type(const export_mix *mix, const item *it)
{
    if (strstr(it->name, ".conv1d.") && strstr(it->name, ".weight")) return DT_F16;
    if (mix->def == DT_F32 || it->n_dims < 2 || strstr(it->name, "position_embd") || it->ne[0] == 1) return DT_F32;
    if (strstr(it->name, "patch_embd")) return DT_F16;
    return mix->def == DT_BF16 ? DT_BF16 : DT_F16;
}

static int json_f32_arr(const json_t *a, float *out, int n)
{
    if (!json_is_array(a) || (int)json_array_size(a) != n) return -1;
    for (int i = 0; i < n; i++) out[i] = (float)json_number_value(json_array_get(a, (size_t)i));
    return 0;
}

static int mmproj_keys(const mm_base *b, gguf_w *w, dlm_err *e)
{
    const json_t *v = b->vision;
    long long x;
    double d;
    if (b->kind == MM_QWEN2VL) {
        int depth, embed, heads, hidden, patch;
        if (need_int(v, "depth", b->dir, &depth, e) || need_int(v, "embed_dim", b->dir, &embed, e)
            || need_int(v, "num_heads", b->dir, &heads, e) || need_int(v, "hidden_size", b->dir, &hidden, e)
            || need_int(v, "patch_size", b->dir, &patch, e))
            return -1;
        char p[4200];
        snprintf(p, sizeof p, "%s/preprocessor_config.json", b->dir);
        json_t *pp = json_load_path(p, 16u << 20, e);
        if (!pp) return err_prefix(e, "the image mean and std"), -1;
        float mean[3], std[3];
        int bad = json_f32_arr(json_object_get(pp, "image_mean"), mean, 3) || json_f32_arr(json_object_get(pp, "image_std"), std, 3);
        json_decref(pp);
        if (bad) return err_set(e, "ExportError", "%s: no image_mean / image_std of 3 values", p);
        gguf_w_bool(w, "clip.has_vision_encoder", 1);
        gguf_w_u32(w, "clip.vision.projection_dim", (uint32_t)b->d_model);
        gguf_w_u32(w, "clip.vision.image_size", !jget_int(v, "image_size", &x) && x > 0 ? (uint32_t)x : 560);
        gguf_w_u32(w, "clip.vision.patch_size", (uint32_t)patch);
        gguf_w_u32(w, "clip.vision.embedding_length", (uint32_t)embed);
        /* the converter's rename: Qwen2-VL's vision hidden_size (the merger's output) is its feed_forward_length */
        gguf_w_u32(w, "clip.vision.feed_forward_length", (uint32_t)hidden);
        gguf_w_u32(w, "clip.vision.block_count", (uint32_t)depth);
        gguf_w_u32(w, "clip.vision.attention.head_count", (uint32_t)heads);
        gguf_w_arr_f32(w, "clip.vision.image_mean", mean, 3);
        gguf_w_arr_f32(w, "clip.vision.image_std", std, 3);
        gguf_w_str(w, "clip.projector_type", "qwen2vl_merger");
        gguf_w_f32(w, "clip.vision.attention.layer_norm_epsilon", jget_num(b->cfg, "rms_norm_eps", &d) ? 1e-6f : (float)d);
    } else {
        int dm, ffn, layers, heads, mel;
        if (need_int(v, "d_model", b->dir, &dm, e) || need_int(v, "encoder_ffn_dim", b->dir, &ffn, e)
            || need_int(v, "encoder_layers", b->dir, &layers, e) || need_int(v, "encoder_attention_heads", b->dir, &heads, e)
            || need_int(v, "num_mel_bins", b->dir, &mel, e))
            return -1;
        gguf_w_bool(w, "clip.has_audio_encoder", 1);
        gguf_w_u32(w, "clip.audio.projection_dim", (uint32_t)b->d_model);
        gguf_w_u32(w, "clip.audio.embedding_length", (uint32_t)dm);
        gguf_w_u32(w, "clip.audio.feed_forward_length", (uint32_t)ffn);
        gguf_w_u32(w, "clip.audio.block_count", (uint32_t)layers);
        gguf_w_u32(w, "clip.audio.attention.head_count", (uint32_t)heads);
        gguf_w_str(w, "clip.projector_type", "qwen2a");
        gguf_w_u32(w, "clip.audio.num_mel_bins", (uint32_t)mel);
        gguf_w_f32(w, "clip.audio.attention.layer_norm_epsilon", jget_num(v, "layer_norm_eps", &d) ? 1e-5f : (float)d);
    }
    gguf_w_u32(w, "general.quantization_version", 2);
    return 0;
}

int mm_write_mmproj(const mm_base *b, const export_mix *mix, const char *name, const char *path, int *n_tensors,
                    dlm_err *e)
{
    items s = {0};
    gguf_w *w = gguf_w_new();
    int rc = -1;
    if (!w) { err_set(e, "MemoryError", "out of memory"); goto done; }
    for (int i = 0; i < st_count(b->st); i++) {
        const st_tensor *t = st_at(b->st, i);
        const char *n = tower_name(b, t->name);
        if (!n) continue;
        char g[GGUF_MAX_NAME];
        int split = 0;
        if ((b->kind == MM_QWEN2VL ? map_vl(n, g, sizeof g, &split) : map_audio(n, g, sizeof g))) {
            err_set(e, "ExportError", "%s: no llama.cpp name for encoder tensor %s", b->dir, t->name);
            goto done;
        }
        if (float_src(t, e)) goto done;
        if (split) {   /* attn.qkv: rows q, k, v */
            if (t->shape[0] % 3) { err_set(e, "ExportError", "%s: %lld rows, not 3 equal parts", t->name, (long long)t->shape[0]); goto done; }
            for (int q = 0; q < 3; q++) {
                char sn[GGUF_MAX_NAME];
                const char *part = q == 0 ? "attn_q" : q == 1 ? "attn_k" : "attn_v";
                char *at = strstr(g, "attn_qkv");
                snprintf(sn, sizeof sn, "%.*s%s%s", (int)(at - g), g, part, at + 8);
                item *it = items_add(&s, sn, t, e);
                if (!it) goto done;
                /* a weight: rows q·R.. of R = 3C/3; a bias: one row of R elements, element q·R */
                int64_t rows = t->shape[0] / 3;
                if (t->ndim == 2) it->ne[1] = rows;
                else it->ne[0] = rows;
                it->row0 = t->ndim == 2 ? q * rows : q;
            }
            continue;
        }
        if (!strcmp(g, "v.patch_embd.weight")) {   /* Conv3d [C][3][kt][kh][kw] → two Conv2d kernels */
            if (t->ndim != 5 || t->shape[2] != 2) {
                err_set(e, "ExportError", "%s: temporal_patch_size 2 expected (llama.cpp's Qwen2-VL)", t->name);
                goto done;
            }
            for (int q = 0; q < 2; q++) {
                item *it = items_add(&s, q ? "v.patch_embd.weight.1" : "v.patch_embd.weight", t, e);
                if (!it) goto done;
                it->n_dims = 4;
                it->ne[0] = t->shape[4];
                it->ne[1] = t->shape[3];
                it->ne[2] = t->shape[1];
                it->ne[3] = t->shape[0];
                it->t = q;
                it->kt = 2;
            }
            continue;
        }
        item *it = items_add(&s, g, t, e);
        if (!it) goto done;
        if (strstr(g, ".conv1d.") && t->ndim == 1) {   /* bias.unsqueeze(-1): ne {1, C} */
            it->n_dims = 2;
            it->ne[1] = it->ne[0];
            it->ne[0] = 1;
        }
    }
    if (!s.n) { err_set(e, "ExportError", "%s: no encoder tensors", b->dir); goto done; }
    for (int i = 0; i < s.n; i++) s.v[i].type = mmproj_type(mix, &s.v[i]);
    gguf_w_str(w, "general.architecture", "clip");
    gguf_w_str(w, "general.type", "mmproj");
    gguf_w_str(w, "general.name", name ? name : "dlm export");
    gguf_w_u32(w, "general.file_type", mix->def == DT_F32 ? 0 : mix->def == DT_BF16 ? 32 : 1);
    if (mmproj_keys(b, w, e)) goto done;
    if (write_items(w, &s, path, e)) goto done;
    if (n_tensors) *n_tensors = s.n;
    rc = 0;
done:
    gguf_w_free(w);
    free(s.v);
    return rc;
}
