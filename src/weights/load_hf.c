/* load_hf — an HF model folder: config.json + model.safetensors (or the
 * sharded set named by model.safetensors.index.json). Weights are used in
 * place in the read-only mapping. */
#include "weights/model_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/fs.h"

static int st_type(st_dtype d)
{
    switch (d) {
    case ST_F32: return DT_F32;
    case ST_F16: return DT_F16;
    case ST_BF16: return DT_BF16;
    case ST_I8: return 24;
    case ST_I16: return 25;
    case ST_I32: return 26;
    case ST_I64: return 27;
    case ST_F64: return 28;
    default: return -1;
    }
}

static void to_src(const st_tensor *t, src_tensor *s)
{
    memset(s, 0, sizeof *s);
    s->name = t->name;
    s->type = st_type(t->dtype);
    s->type_name = st_dtype_name(t->dtype);
    s->n_dims = t->ndim;
    for (int i = 0; i < 4; i++) s->ne[i] = 1;
    /* torch order → ggml order (innermost first); ranks over 4 keep only
     * their innermost four dims here and never match a weight's rank */
    for (int i = 0; i < t->ndim && i < 4; i++) s->ne[i] = t->shape[t->ndim - 1 - i];
    s->data = t->data;
    s->nbytes = t->nbytes;
}

/* Where a wrapped language model keeps its tensors (model.h's audio and pali):
 * "model.X" is at pre_model + "X", "lm_head.X" at pre_head + "X". */
typedef struct hf_ctx {
    st_file *st;
    const char *pre_model, *pre_head;
} hf_ctx;

static const st_tensor *find_st(const hf_ctx *h, const char *name)
{
    if (!h->pre_model) {
        const st_tensor *t = st_find(h->st, name);
        /* transformers 5 saves a vision-language model's text model under
         * model.language_model. (the hub's Qwen2-VL checkpoints: model.) */
        if (!t && !strncmp(name, "model.", 6)) {
            char alt[512];
            if ((size_t)snprintf(alt, sizeof alt, "model.language_model.%s", name + 6) < sizeof alt)
                t = st_find(h->st, alt);
        }
        return t;
    }
    char n[512];
    if (!strncmp(name, "model.", 6)) snprintf(n, sizeof n, "%s%s", h->pre_model, name + 6);
    else if (!strncmp(name, "lm_head.", 8)) snprintf(n, sizeof n, "%s%s", h->pre_head, name + 8);
    else return NULL;
    return st_find(h->st, n);
}

static int find(void *ctx, const char *name, src_tensor *out)
{
    const st_tensor *t = find_st(ctx, name);
    if (!t) return 1;
    to_src(t, out);
    return 0;
}

/* The canonical name ("model.X", "lm_head.X") of a wrapped language model's
 * tensor; NULL for the others (the audio tower, the projector). */
static const char *canon(const hf_ctx *h, const char *name, char *buf, size_t cap)
{
    if (!h->pre_model) return name;
    size_t a = strlen(h->pre_model), b = strlen(h->pre_head);
    if (!strncmp(name, h->pre_model, a)) snprintf(buf, cap, "model.%s", name + a);
    else if (!strncmp(name, h->pre_head, b)) snprintf(buf, cap, "lm_head.%s", name + b);
    else return NULL;
    return buf;
}

int model_hf_lm_prefix(const st_file *st, const char **pre_model, const char **pre_head)
{
    /* hub checkpoints (transformers 4) and transformers 5's save_pretrained */
    if (st_find(st, "language_model.model.embed_tokens.weight")) {
        *pre_model = "language_model.model.";
        *pre_head = "language_model.lm_head.";
    } else if (st_find(st, "model.language_model.embed_tokens.weight")) {
        *pre_model = "model.language_model.";
        *pre_head = "lm_head.";
    } else {
        return -1;
    }
    return 0;
}

static int enumerate(model *m, const hf_ctx *h, dlm_err *e)
{
    st_file *st = m->storage->st;
    int n = st_count(st);
    model_tensor *v = model_alloc(m, (size_t)(n ? n : 1) * sizeof *v, e);
    if (!v) return -1;
    for (int i = 0; i < n; i++) {
        const st_tensor *t = st_at(st, i);
        src_tensor s;
        to_src(t, &s);
        char g[256], cb[512];
        const char *cn = canon(h, t->name, cb, sizeof cb);
        v[i].name = t->name;
        v[i].hf_name = !cn ? t->name : cn == t->name ? t->name : model_strdup(m, cn, e);
        v[i].gguf_name = !cn || model_name_to_gguf(cn, g, sizeof g) ? "" : model_strdup(m, g, e);
        if (!v[i].gguf_name || !v[i].hf_name) return -1;
        v[i].type = s.type;
        v[i].type_name = s.type_name;
        v[i].n_dims = s.n_dims;
        memcpy(v[i].ne, s.ne, sizeof v[i].ne);
        v[i].data = s.data;
        v[i].nbytes = s.nbytes;
    }
    m->storage->tensors = v;
    m->storage->ntensors = n;
    return 0;
}

int model_load_hf(const char *dir, model *m, dlm_err *e)
{
    char p[4096];
    if (!fs_join(p, sizeof p, dir, "config.json")) return err_set(e, NULL, "path too long: '%s'", dir);
    if (!fs_is_file(p)) {
        err_set(e, "ModelLoadError", "'%s' has no config.json", dir);
        return err_hint(e, "an HF model folder holds config.json and model.safetensors");
    }
    char *txt;
    size_t len;
    if (fs_read_all(p, 16u << 20, &txt, &len, e)) return -1;
    int r = model_config_parse(txt, len, p, &m->cfg, e);
    free(txt);
    if (r) return -1;
    if (st_open(dir, &m->storage->st, e)) return -1;
    hf_ctx h = {m->storage->st, NULL, NULL};
    if ((m->cfg.audio || m->cfg.pali) && model_hf_lm_prefix(h.st, &h.pre_model, &h.pre_head)) {
        err_set(e, "ModelLoadError", "%s: a %s checkpoint without its language model "
                "(no language_model.model.embed_tokens.weight or model.language_model.embed_tokens.weight)", dir,
                m->cfg.audio ? "Qwen2-Audio" : "PaliGemma");
        return err_hint(e, "download the whole checkpoint (every model-*.safetensors shard)");
    }
    loader L = {m, dir, 0, &h, find, e};
    if (model_build(&L)) return -1;
    return enumerate(m, &h, e);
}
