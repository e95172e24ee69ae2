/* base — a base's shape and stored bytes for the plan, from the file
 * headers only: config.json + safetensors headers, or the GGUF header.
 * model_load validates everything later; this reads just what the plan
 * needs and never touches a weight page (a 7B plan must cost nothing). */
#include "run/plan.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "weights/gguf.h"
#include "weights/safetensors.h"
#include "util/fs.h"

/* Fill derived fields every source shares. */
static void finish_cfg(model_config *c)
{
    if (c->n_kv_head <= 0) c->n_kv_head = c->n_head;
    if (c->head_dim <= 0 && c->n_head > 0) c->head_dim = c->d_model / c->n_head;
}

static int gguf_int(const gguf_file *g, const char *arch, const char *suffix, int64_t *out)
{
    char k[160];
    snprintf(k, sizeof k, "%s.%s", arch, suffix);
    int id = gguf_find_key(g, k);
    return id < 0 ? 1 : gguf_get_int(g, id, out, NULL) ? -1 : 0;
}

static int read_gguf(const char *path, plan_base *b, dlm_err *e)
{
    gguf_file *g;
    if (gguf_open(path, &g, e)) return -1;
    model_config *c = &b->cfg;
    int id = gguf_find_key(g, "general.architecture");
    const char *arch = NULL;
    int rc = -1;
    if (id < 0 || gguf_get_str(g, id, &arch, NULL, e)) {
        err_set(e, "ModelLoadError", "%s: no general.architecture", path);
        goto out;
    }
    if (!strcmp(arch, "llama")) c->arch = ARCH_LLAMA;
    else if (!strcmp(arch, "qwen2")) c->arch = ARCH_QWEN2;
    else if (!strcmp(arch, "qwen3")) c->arch = ARCH_QWEN3;
    else if (!strcmp(arch, "olmo2")) c->arch = ARCH_OLMO2;
    else if (!strcmp(arch, "smollm3")) c->arch = ARCH_SMOLLM3;
    else if (!strcmp(arch, "gemma2")) c->arch = ARCH_GEMMA2;
    else if (!strcmp(arch, "gemma")) c->arch = ARCH_GEMMA;
    else if (!strcmp(arch, "phi3")) c->arch = ARCH_PHI3;
    else {
        err_set(e, "UnsupportedArchitectureError", "%s: unsupported GGUF architecture '%s'", path, arch);
        goto out;
    }
    int64_t L = 0, C = 0, F = 0, NH = 0, KVH = 0, ctx = 0, kl = 0;
    if (gguf_int(g, arch, "block_count", &L) || gguf_int(g, arch, "embedding_length", &C) ||
        gguf_int(g, arch, "feed_forward_length", &F) || gguf_int(g, arch, "attention.head_count", &NH)) {
        err_set(e, "ModelLoadError", "%s: the GGUF lacks the model hyperparameters", path);
        goto out;
    }
    gguf_int(g, arch, "attention.head_count_kv", &KVH);
    gguf_int(g, arch, "context_length", &ctx);
    gguf_int(g, arch, "attention.key_length", &kl);
    const gguf_tensor *emb = gguf_find_tensor(g, "token_embd.weight");
    if (!emb || L < 1 || L > 1024 || C < 1 || C > (1 << 17) || F < 1 || F > (1 << 20) || NH < 1 || NH > 1024 ||
        KVH < 0 || KVH > NH || ctx < 0 || ctx > (1 << 24) || kl < 0 || kl > 4096 || emb->ne[1] < 1 ||
        emb->ne[1] > (1 << 22)) {
        err_set(e, "ModelLoadError", "%s: model hyperparameters out of range", path);
        goto out;
    }
    c->n_layer = (int)L;
    c->d_model = (int)C;
    c->n_ff = (int)F;
    c->n_head = (int)NH;
    c->n_kv_head = (int)KVH;
    c->head_dim = (int)kl;
    c->max_pos = ctx > 0 ? (int)ctx : 2048;
    c->vocab = (int)emb->ne[1];
    c->tied = gguf_find_tensor(g, "output.weight") == NULL;
    c->qkv_bias = gguf_find_tensor(g, "blk.0.attn_q.bias") != NULL;
    c->qk_norm = c->arch == ARCH_QWEN3 ? QK_NORM_HEAD : c->arch == ARCH_OLMO2 ? QK_NORM_FULL : 0;
    c->post_norm = c->arch == ARCH_OLMO2;
    c->nope_every = c->arch == ARCH_SMOLLM3 ? 4 : 0;
    c->fused = c->arch == ARCH_PHI3;   /* the fused products' buffers */
    finish_cfg(c);
    if (c->arch == ARCH_GEMMA2) model_config_gemma2(c);   /* the plan needs the shape's buffers only */
    if (c->arch == ARCH_GEMMA) model_config_gemma(c);
    b->gguf = 1;
    b->meta_bytes = gguf_data_offset(g);
    b->embd_bytes = emb->nbytes;
    b->embd_row_bytes = emb->nbytes / (uint64_t)emb->ne[1];
    const gguf_tensor *up = gguf_find_tensor(g, "blk.0.ffn_up.weight");
    b->wtype = up ? up->type : -1;
    for (int i = 0; i < gguf_tensor_count(g); i++) {
        const gguf_tensor *t = gguf_tensor_at(g, i);
        b->tensor_bytes += t->nbytes;
        /* 1-D tensors (norms, biases, rope factors) become owned f32 */
        if (t->n_dims == 1) b->copy_bytes += (uint64_t)t->ne[0] * 4;
        /* llama.cpp permutes llama Q/K rows; the loader copies them back */
        if (model_arch_permutes_qk(c->arch) && t->n_dims == 2 &&
            (strstr(t->name, ".attn_q.weight") || strstr(t->name, ".attn_k.weight")))
            b->copy_bytes += t->nbytes;
    }
    rc = 0;
out:
    gguf_close(g);
    return rc;
}

static int read_hf(const char *dir, plan_base *b, dlm_err *e)
{
    char p[4200], *txt;
    size_t len;
    snprintf(p, sizeof p, "%s/config.json", dir);
    if (fs_read_all(p, 1 << 24, &txt, &len, e)) return -1;
    int rc = model_config_parse(txt, len, p, &b->cfg, e);
    free(txt);
    if (rc) return -1;
    finish_cfg(&b->cfg);
    st_file *f;
    if (st_open(dir, &f, e)) return -1;
    b->gguf = 0;
    b->wtype = -1;
    uint64_t files = 0;
    for (int i = 0; i < st_shard_count(f); i++) {
        struct stat st;
        if (stat(st_shard_path(f, i), &st) == 0) files += (uint64_t)st.st_size;
    }
    /* Qwen2-Audio: the language model's names under its wrapper's prefix */
    const char *pm = "model.", *ph = "lm_head.";
    if (b->cfg.audio && model_hf_lm_prefix(f, &pm, &ph)) pm = "model.";
    size_t pl = strlen(pm);
    for (int i = 0; i < st_count(f); i++) {
        const st_tensor *t = st_at(f, i);
        const char *nm = !strncmp(t->name, pm, pl) ? t->name + pl : "";
        b->tensor_bytes += t->nbytes;
        int es = st_dtype_bits(t->dtype) / 8;
        if (t->ndim == 1) b->copy_bytes += t->nbytes / (uint64_t)(es > 0 ? es : 1) * 4;
        else if (es > 1 && (uintptr_t)t->data % (uintptr_t)es) b->copy_bytes += t->nbytes; /* unaligned: copied */
        if (!strcmp(nm, "embed_tokens.weight")) {
            b->embd_bytes = t->nbytes;
            b->embd_row_bytes = t->ndim == 2 && t->shape[0] > 0 ? t->nbytes / (uint64_t)t->shape[0] : 0;
        }
        if (!strcmp(nm, "layers.0.mlp.up_proj.weight") || !strcmp(nm, "layers.0.block_sparse_moe.experts.0.w3.weight"))
            b->wtype = t->dtype == ST_BF16 ? DT_BF16 : t->dtype == ST_F16 ? DT_F16 : t->dtype == ST_F32 ? DT_F32 : -1;
    }
    b->meta_bytes = files > b->tensor_bytes ? files - b->tensor_bytes : 0;
    st_close(f);
    return 0;
}

int plan_base_read(const char *path, plan_base *b, dlm_err *e)
{
    memset(b, 0, sizeof *b);
    if (fs_is_dir(path)) return read_hf(path, b, e);
    if (!strcmp(fs_basename(path), "config.json")) {
        char dir[4096];
        fs_dirname(dir, sizeof dir, path);
        return read_hf(dir, b, e);
    }
    return read_gguf(path, b, e);
}

/* Bytes of a rows×cols weight stored as t; a width the block does not
 * divide falls back as llama.cpp's quantizer does (Q8_0, then F16). */
static uint64_t mat_bytes(dtype t, int64_t rows, int64_t cols)
{
    size_t rb = dtype_row_bytes(t, cols);
    if (!rb) rb = dtype_row_bytes(DT_Q8_0, cols);
    if (!rb) rb = dtype_row_bytes(DT_F16, cols);
    return (uint64_t)rb * (uint64_t)rows;
}

void plan_base_shape(const model_config *c0, dtype t, int gguf, plan_base *b)
{
    memset(b, 0, sizeof *b);
    b->cfg = *c0;
    model_config *c = &b->cfg;
    finish_cfg(c);
    b->wtype = (int)t;
    b->gguf = gguf;
    int64_t C = c->d_model, F = c->n_ff, V = c->vocab;
    int64_t Q = (int64_t)c->n_head * c->head_dim, K = (int64_t)c->n_kv_head * c->head_dim;
    uint64_t vb = gguf ? 4 : (t == DT_F32 ? 4 : 2); /* GGUF keeps vectors f32; HF in the model's dtype */
    uint64_t vec = (uint64_t)(2 * C + (c->qkv_bias ? Q + 2 * K : 0) +
                              (c->qk_norm == QK_NORM_FULL ? Q + K : c->qk_norm ? 2 * c->head_dim : 0));
    /* mixtral: every expert's three matrices and the router are resident
     * (only the active experts' activations count, decoder_plan_parts) */
    uint64_t E = c->n_expert ? (uint64_t)c->n_expert : 1;
    uint64_t layer = mat_bytes(t, Q, C) + 2 * mat_bytes(t, K, C) + mat_bytes(t, C, Q) +
                     E * (2 * mat_bytes(t, F, C) + mat_bytes(t, C, F)) + vec * vb +
                     (c->n_expert ? mat_bytes(t, c->n_expert, C) : 0);
    b->embd_bytes = mat_bytes(t, V, C);
    b->embd_row_bytes = V ? b->embd_bytes / (uint64_t)V : 0;
    b->tensor_bytes = layer * (uint64_t)c->n_layer + b->embd_bytes + (uint64_t)C * vb + (c->tied ? 0 : b->embd_bytes);
    b->copy_bytes = (vec * (uint64_t)c->n_layer + (uint64_t)C) * 4;
    if (gguf && model_arch_permutes_qk(c->arch)) b->copy_bytes += (mat_bytes(t, Q, C) + mat_bytes(t, K, C)) * (uint64_t)c->n_layer;
    /* GGUF header: the token list (≈ 8-byte length + ~7 bytes + type each)
     * and the merges dominate; safetensors headers ≈ 150 bytes a tensor */
    b->meta_bytes = gguf ? (uint64_t)V * 24 + (64u << 10) : (uint64_t)(c->n_layer * 12 + 4) * 150;
}
