/* load — model_load: dispatch on the source, then one builder shared by the
 * HF and GGUF paths that fetches every tensor by role, checks its dtype and
 * shape against the config, and wires the model struct. Source-specific
 * work (reading config, naming, the llama GGUF Q/K permutation) is in
 * load_hf.c and load_gguf.c. */
#include "weights/model_impl.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/fs.h"
#include "util/log.h"
#include "util/progress.h"
#include "util/str.h"

#define KIND "ModelLoadError"

/* ---- storage ---------------------------------------------------------------- */

void *model_alloc(model *m, size_t n, dlm_err *e)
{
    struct model_storage *s = m->storage;
    if (s->nowned == s->owned_cap) {
        int nc = s->owned_cap ? s->owned_cap * 2 : 64;
        void **no = realloc(s->owned, (size_t)nc * sizeof *no);
        if (!no) { err_set(e, "MemoryError", "out of memory loading the model"); return NULL; }
        s->owned = no;
        s->owned_cap = nc;
    }
    void *p = calloc(1, n ? n : 1);
    if (!p) { err_set(e, "MemoryError", "out of memory loading the model (%zu bytes)", n); return NULL; }
    s->owned[s->nowned++] = p;
    return p;
}

const char *model_strdup(model *m, const char *s, dlm_err *e)
{
    size_t n = strlen(s);
    char *p = model_alloc(m, n + 1, e);
    if (p) memcpy(p, s, n + 1);
    return p;
}

const struct st_file *model_safetensors(const model *m) { return m->storage ? m->storage->st : NULL; }

void model_free(model *m)
{
    if (!m) return;
    struct model_storage *s = m->storage;
    if (s) {
        for (int i = 0; i < s->nowned; i++) free(s->owned[i]);
        free(s->owned);
        st_close(s->st);
        gguf_close(s->gg);
        free(s);
    }
    free(m);
}

int model_tensor_count(const model *m) { return m->storage->ntensors; }
const model_tensor *model_tensor_at(const model *m, int i)
{
    return i >= 0 && i < m->storage->ntensors ? &m->storage->tensors[i] : NULL;
}

float model_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0x1f) bits = sign | 0x7f800000u | (man << 13);
    else if (exp) bits = sign | ((exp + 112) << 23) | (man << 13);
    else if (!man) bits = sign;
    else {
        /* subnormal: normalise */
        int e = -1;
        do { e++; man <<= 1; } while (!(man & 0x400));
        bits = sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3ff) << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

float model_bf16_to_f32(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* ---- config ranges (both sources) -------------------------------------------- */

int model_config_validate(const model_config *c, const char *path, dlm_err *e)
{
    const char *bad = NULL;
    if (c->n_layer < 1 || c->n_layer > 1024) bad = "layer count";
    else if (c->d_model < 1 || c->d_model > (1 << 17)) bad = "hidden size";
    else if (c->n_ff < 1 || c->n_ff > (1 << 20)) bad = "feed-forward size";
    else if (c->n_head < 1 || c->n_head > 1024) bad = "head count";
    else if (c->n_kv_head < 1 || c->n_kv_head > c->n_head || c->n_head % c->n_kv_head) bad = "kv head count";
    else if (c->head_dim < 2 || c->head_dim > 4096 || c->head_dim % 2) bad = "head dim";
    else if (c->vocab < 1 || c->vocab > (1 << 22)) bad = "vocab size";
    else if (c->max_pos < 1 || c->max_pos > (1 << 24)) bad = "context length";
    else if (!(c->rms_eps > 0 && c->rms_eps < 1)) bad = "rms epsilon";
    else if (!(c->rope_theta > 1 && isfinite(c->rope_theta))) bad = "rope theta";
    if (!bad) return 0;
    return err_at(e, KIND, path, 0, 0,
                  "invalid %s (layers %d, hidden %d, ffn %d, heads %d/%d, head dim %d, vocab %d, ctx %d)", bad,
                  c->n_layer, c->d_model, c->n_ff, c->n_head, c->n_kv_head, c->head_dim, c->vocab, c->max_pos);
}

/* ---- the builder ----------------------------------------------------------------- */

static int supported(const loader *L, int type)
{
    if (type == DT_F32 || type == DT_F16 || type == DT_BF16) return 1;
    if (!L->gguf) return 0;
    /* Q4_1/Q5_1: llama-quantize's fallback for Q5_K rows that do not fill a 256 block */
    return type == DT_Q8_0 || type == DT_Q4_0 || type == DT_Q4_1 || type == DT_Q5_0 || type == DT_Q5_1 ||
           type == DT_Q4_K || type == DT_Q5_K || type == DT_Q6_K;
}

static int fetch(loader *L, tensor_role r, int il, int required, src_tensor *t, char *name, size_t cap)
{
    if (!model_role_name(r, il, L->gguf, name, cap)) return 1;
    int f = L->find(L->ctx, name, t);
    if (f < 0) return -1;
    if (f == 1) {
        if (!required) return 1;
        err_at(L->e, KIND, L->path, 0, 0, "missing tensor '%s'", name);
        err_hint(L->e, "the weights do not match the model's configuration (or the file is damaged)");
        return -1;
    }
    return 0;
}

/* "[a, b]" in the source's own order: torch order for HF, ne order for GGUF. */
static void fmt_shape(const loader *L, char *buf, size_t cap, int nd, const int64_t *ne)
{
    size_t n = 0;
    n += (size_t)snprintf(buf + n, cap - n, "%s[", L->gguf ? "ne " : "");
    for (int i = 0; i < nd && n < cap; i++) {
        int64_t v = L->gguf ? ne[i] : ne[nd - 1 - i];
        n += (size_t)snprintf(buf + n, cap - n, "%s%lld", i ? ", " : "", (long long)v);
    }
    if (n < cap) snprintf(buf + n, cap - n, "]");
}

static int shape_error(loader *L, const char *name, const src_tensor *t, int nd, const int64_t *want)
{
    char got[96], exp[96];
    fmt_shape(L, got, sizeof got, t->n_dims, t->ne);
    fmt_shape(L, exp, sizeof exp, nd, want);
    err_at(L->e, KIND, L->path, 0, 0, "tensor '%s' has shape %s, expected %s", name, got, exp);
    return err_hint(L->e, "the weights do not match the model's configuration");
}

static int type_error(loader *L, const char *name, const src_tensor *t)
{
    err_at(L->e, KIND, L->path, 0, 0, "tensor '%s' has type %s, which dlm cannot load", name, t->type_name);
    return err_hint(L->e, L->gguf ? "supported GGUF types: F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q4_K Q5_K Q6_K"
                                  : "supported safetensors dtypes: F32 F16 BF16");
}

/* A [rows, cols] weight. Returns 1 if absent and optional. */
static int get_mat(loader *L, tensor_role r, int il, int64_t rows, int64_t cols, int required, wmat *w)
{
    char name[256];
    src_tensor t;
    int f = fetch(L, r, il, required, &t, name, sizeof name);
    if (f) return f;
    if (!supported(L, t.type)) return type_error(L, name, &t);
    int64_t want[2] = {cols, rows};
    if (t.n_dims != 2 || t.ne[0] != cols || t.ne[1] != rows) return shape_error(L, name, &t, 2, want);
    w->type = (dtype)t.type;
    w->rows = rows;
    w->cols = cols;
    w->row_bytes = dtype_row_bytes(w->type, cols);
    if (!w->row_bytes) return shape_error(L, name, &t, 2, want);
    w->data = t.data;
    /* Kernels read f32/f16 through typed pointers: copy a tensor that sits
     * at an address not aligned to its element (safetensors does not
     * promise alignment; a GGUF with general.alignment 1 neither). */
    size_t need = w->type == DT_F32 ? 4 : 2;
    if ((uintptr_t)t.data % need) {
        void *p = model_alloc(L->m, (size_t)t.nbytes, L->e);
        if (!p) return -1;
        memcpy(p, t.data, (size_t)t.nbytes);
        w->data = p;
    }
    return 0;
}

/* ---- mixtral: the router and the experts --------------------------------------------
 * HF: model.layers.N.block_sparse_moe.gate.weight [E, C] and
 * block_sparse_moe.experts.X.w1 / w3 / w2.weight ([F, C] [F, C] [C, F]:
 * gate, up, down); GGUF (llama.cpp's llama arch with experts):
 * blk.N.ffn_gate_inp.weight ne {C, E} and one 3-D tensor per projection,
 * ffn_gate_exps / ffn_up_exps ne {C, F, E}, ffn_down_exps ne {F, C, E},
 * whose E slices are the experts' matrices. */
static int moe_tensor(loader *L, const char *name, int nd, const int64_t *want, src_tensor *t)
{
    int f = L->find(L->ctx, name, t);
    if (f < 0) return -1;
    if (f == 1) {
        err_at(L->e, KIND, L->path, 0, 0, "missing tensor '%s'", name);
        return err_hint(L->e, "the weights do not match the model's configuration (num_local_experts)");
    }
    if (!supported(L, t->type)) return type_error(L, name, t);
    int ok = t->n_dims == nd;
    for (int i = 0; ok && i < nd; i++) ok = t->ne[i] == want[i];
    return ok ? 0 : shape_error(L, name, t, nd, want);
}

static int moe_mat(loader *L, const char *name, const src_tensor *t, const void *data, int64_t rows, int64_t cols,
                   wmat *w)
{
    w->type = (dtype)t->type;
    w->rows = rows;
    w->cols = cols;
    w->row_bytes = dtype_row_bytes(w->type, cols);
    int64_t want[2] = {cols, rows};
    if (!w->row_bytes) return shape_error(L, name, t, 2, want);
    w->data = data;
    size_t need = w->type == DT_F32 ? 4 : 2, bytes = (size_t)rows * w->row_bytes;
    if ((uintptr_t)data % need) {
        void *p = model_alloc(L->m, bytes, L->e);
        if (!p) return -1;
        memcpy(p, data, bytes);
        w->data = p;
    }
    return 0;
}

static int get_moe(loader *L, int il, layer_weights *w)
{
    const model_config *c = &L->m->cfg;
    int64_t C = c->d_model, F = c->n_ff, E = c->n_expert;
    w->exp_gate = model_alloc(L->m, (size_t)E * sizeof(wmat), L->e);
    w->exp_up = model_alloc(L->m, (size_t)E * sizeof(wmat), L->e);
    w->exp_down = model_alloc(L->m, (size_t)E * sizeof(wmat), L->e);
    if (!w->exp_gate || !w->exp_up || !w->exp_down) return -1;
    char name[256];
    src_tensor t;
    int64_t rw[2] = {C, E};
    snprintf(name, sizeof name, L->gguf ? "blk.%d.ffn_gate_inp.weight" : "model.layers.%d.block_sparse_moe.gate.weight", il);
    if (moe_tensor(L, name, 2, rw, &t) || moe_mat(L, name, &t, t.data, E, C, &w->moe_router)) return -1;
    static const char *const HF[3] = {"w1", "w3", "w2"}, *const GG[3] = {"gate", "up", "down"};
    wmat *dst[3] = {w->exp_gate, w->exp_up, w->exp_down};
    for (int k = 0; k < 3; k++) {
        int64_t rows = k == 2 ? C : F, cols = k == 2 ? F : C;
        if (L->gguf) {
            snprintf(name, sizeof name, "blk.%d.ffn_%s_exps.weight", il, GG[k]);
            int64_t want[3] = {cols, rows, E};
            if (moe_tensor(L, name, 3, want, &t)) return -1;
            size_t rb = dtype_row_bytes((dtype)t.type, cols);
            for (int64_t x = 0; x < E; x++)
                if (moe_mat(L, name, &t, (const char *)t.data + (size_t)x * rows * rb, rows, cols, &dst[k][x])) return -1;
        } else {
            for (int64_t x = 0; x < E; x++) {
                snprintf(name, sizeof name, "model.layers.%d.block_sparse_moe.experts.%d.%s.weight", il, (int)x, HF[k]);
                int64_t want[2] = {cols, rows};
                if (moe_tensor(L, name, 2, want, &t) || moe_mat(L, name, &t, t.data, rows, cols, &dst[k][x])) return -1;
            }
        }
    }
    return 0;
}

/* A [n] float vector (norm weight, bias, rope factors) as owned f32. */
static int get_vec(loader *L, tensor_role r, int il, int64_t n, int required, float **out)
{
    char name[256];
    src_tensor t;
    *out = NULL;
    int f = fetch(L, r, il, required, &t, name, sizeof name);
    if (f) return f;
    if (t.type != DT_F32 && t.type != DT_F16 && t.type != DT_BF16) {
        err_at(L->e, KIND, L->path, 0, 0, "tensor '%s' has type %s, expected F32, F16 or BF16", name, t.type_name);
        return -1;
    }
    int64_t want[1] = {n};
    if (t.n_dims != 1 || t.ne[0] != n) return shape_error(L, name, &t, 1, want);
    float *v = model_alloc(L->m, (size_t)n * sizeof *v, L->e);
    if (!v) return -1;
    const unsigned char *p = t.data;
    for (int64_t i = 0; i < n; i++) {
        if (t.type == DT_F32) {
            memcpy(&v[i], p + 4 * i, 4);
        } else {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            v[i] = t.type == DT_F16 ? model_f16_to_f32(h) : model_bf16_to_f32(h);
        }
    }
    *out = v;
    return 0;
}

/* llama-arch GGUF Q/K rows back into HF's order (gguf_qk_hf_row). */
static int unpermute_mat(loader *L, wmat *w, int heads, int hs)
{
    unsigned char *dst = model_alloc(L->m, (size_t)w->rows * w->row_bytes, L->e);
    if (!dst) return -1;
    const unsigned char *src = w->data;
    for (int64_t r = 0; r < (int64_t)heads * hs; r++)
        memcpy(dst + (size_t)gguf_qk_hf_row(r, hs) * w->row_bytes, src + (size_t)r * w->row_bytes, w->row_bytes);
    w->data = dst;
    return 0;
}

static int unpermute_vec(loader *L, float *v, int heads, int hs)
{
    float *tmp = malloc((size_t)heads * hs * sizeof *tmp);
    if (!tmp) return err_set(L->e, "MemoryError", "out of memory");
    memcpy(tmp, v, (size_t)heads * hs * sizeof *tmp);
    for (int64_t r = 0; r < (int64_t)heads * hs; r++) v[gguf_qk_hf_row(r, hs)] = tmp[r];
    free(tmp);
    return 0;
}

int model_build(loader *L)
{
    model *m = L->m;
    model_config *c = &m->cfg;
    if (model_config_validate(c, L->path, L->e)) return -1;
    int64_t C = c->d_model, V = c->vocab, F = c->n_ff;
    int64_t QD = (int64_t)c->n_head * c->head_dim, KD = (int64_t)c->n_kv_head * c->head_dim;

    if (get_mat(L, T_EMBD, 0, V, C, 1, &m->tok_embd)) return -1;
    int r = c->tied && !L->gguf ? 1 : get_mat(L, T_OUTPUT, 0, V, C, 0, &m->output);
    if (r < 0) return -1;
    if (r == 1) {
        if (!c->tied && !L->gguf) {
            err_at(L->e, KIND, L->path, 0, 0, "missing tensor 'lm_head.weight' (tie_word_embeddings is false)");
            return err_hint(L->e, "the weights do not match config.json");
        }
        /* GGUF: no output.weight means the embedding is reused (llama.cpp) */
        c->tied = 1;
        m->output = m->tok_embd;
    }
    if (get_vec(L, T_OUT_NORM, 0, C, 1, &m->out_norm)) return -1;

    if (model_norm_plus1(c) && !L->gguf)
        for (int64_t i = 0; i < C; i++) m->out_norm[i] += 1.0f;   /* (1 + w), as the layers' norms */
    m->layers = model_alloc(m, (size_t)c->n_layer * sizeof *m->layers, L->e);
    if (!m->layers) return -1;
    int permute = L->gguf && model_arch_permutes_qk(c->arch);
    for (int il = 0; il < c->n_layer; il++) {
        layer_weights *w = &m->layers[il];
        if (c->fused) {
            /* phi3: wq is qkv_proj, w_gate is gate_up_proj (model.h) */
            if (get_mat(L, T_QKV, il, QD + 2 * KD, C, 1, &w->wq) || get_mat(L, T_O, il, C, QD, 1, &w->wo) ||
                get_mat(L, T_GATE_UP, il, 2 * F, C, 1, &w->w_gate) || get_mat(L, T_DOWN, il, C, F, 1, &w->w_down))
                return -1;
        } else if (get_mat(L, T_Q, il, QD, C, 1, &w->wq) || get_mat(L, T_K, il, KD, C, 1, &w->wk) ||
                   get_mat(L, T_V, il, KD, C, 1, &w->wv) || get_mat(L, T_O, il, C, QD, 1, &w->wo))
            return -1;
        if (!c->fused && (c->n_expert ? get_moe(L, il, w)
                                      : get_mat(L, T_GATE, il, F, C, 1, &w->w_gate) ||
                                            get_mat(L, T_UP, il, F, C, 1, &w->w_up) ||
                                            get_mat(L, T_DOWN, il, C, F, 1, &w->w_down)))
            return -1;
        if (c->sandwich && (get_vec(L, T_ATTN_NORM, il, C, 1, &w->attn_norm) ||
                            get_vec(L, L->gguf ? T_FFN_NORM : T_FFN_PRE, il, C, 1, &w->ffn_norm)))
            return -1;
        if (c->post_norm ? get_vec(L, T_ATTN_POST, il, C, 1, &w->post_attn_norm) ||
                               get_vec(L, T_FFN_POST, il, C, 1, &w->post_ffn_norm)
                         : get_vec(L, T_ATTN_NORM, il, C, 1, &w->attn_norm) ||
                               get_vec(L, T_FFN_NORM, il, C, 1, &w->ffn_norm))
            return -1;
        if (c->qkv_bias && (get_vec(L, T_QB, il, QD, 1, &w->bq) || get_vec(L, T_KB, il, KD, 1, &w->bk) ||
                            get_vec(L, T_VB, il, KD, 1, &w->bv)))
            return -1;
        if (model_norm_plus1(c) && !L->gguf) {
            /* GemmaRMSNorm / Gemma2RMSNorm multiply by (1 + w); llama.cpp's
             * GGUF stores the 1 + w, and so does dlm in memory */
            float *nv[4] = {w->attn_norm, w->ffn_norm, w->post_attn_norm, w->post_ffn_norm};
            for (int k = 0; k < 4; k++)
                for (int64_t i = 0; nv[k] && i < C; i++) nv[k][i] += 1.0f;
        }
        int full = c->qk_norm == QK_NORM_FULL;
        if (c->qk_norm && (get_vec(L, T_QN, il, full ? QD : c->head_dim, 1, &w->q_norm) ||
                           get_vec(L, T_KN, il, full ? KD : c->head_dim, 1, &w->k_norm)))
            return -1;
        if (permute) {
            if (unpermute_mat(L, &w->wq, c->n_head, c->head_dim) ||
                unpermute_mat(L, &w->wk, c->n_kv_head, c->head_dim))
                return -1;
            if (w->bq && (unpermute_vec(L, w->bq, c->n_head, c->head_dim) ||
                          unpermute_vec(L, w->bk, c->n_kv_head, c->head_dim)))
                return -1;
        }
    }

    int half = model_rope_dim(c) / 2;
    if (L->gguf && c->fused) {
        /* phi3: LongRoPE's factors travel as two global tensors (llama.cpp's
         * rope_factors_long / rope_factors_short, [rope_dim/2] each) */
        float *fl, *fs;
        int rl = get_vec(L, T_ROPE_LONG, 0, half, 0, &fl), rs = get_vec(L, T_ROPE_SHORT, 0, half, 0, &fs);
        if (rl < 0 || rs < 0) return -1;
        if (rl != rs)
            return err_at(L->e, KIND, L->path, 0, 0, "rope_factors_%s.weight without rope_factors_%s.weight",
                          rl ? "short" : "long", rl ? "long" : "short");
        if (!rl) {
            if (half > MODEL_MAX_ROPE_FACTORS)
                return err_at(L->e, KIND, L->path, 0, 0, "%d RoPE factors are more than dlm supports", half);
            for (int i = 0; i < half; i++) {
                if (!(fl[i] > 0 && isfinite(fl[i]) && fs[i] > 0 && isfinite(fs[i])))
                    return err_at(L->e, KIND, L->path, 0, 0, "RoPE factor %d is not a positive number", i);
                c->rope_long[i] = fl[i];
                c->rope_short[i] = fs[i];
            }
            c->n_rope_factors = half;
        }
    }
    m->rope_inv_freq = model_alloc(m, (size_t)half * sizeof(double), L->e);
    if (!m->rope_inv_freq) return -1;
    model_rope_freqs(c, m->rope_inv_freq);
    if (c->n_rope_factors) {
        m->rope_inv_freq_long = model_alloc(m, (size_t)half * sizeof(double), L->e);
        if (!m->rope_inv_freq_long) return -1;
        model_rope_freqs_longrope(c, 1, m->rope_inv_freq_long);
    }
    if (L->gguf) {
        /* llama3 scaling travels as per-frequency divisors (docs/reference/formats.md §1.4) */
        float *div;
        r = get_vec(L, T_ROPE_FREQS, 0, half, 0, &div);
        if (r < 0) return -1;
        if (r == 0) {
            float mx = 1.0f;
            for (int i = 0; i < half; i++) {
                if (!(div[i] > 0 && isfinite(div[i])))
                    return err_at(L->e, KIND, L->path, 0, 0, "rope_freqs.weight[%d] = %g is not a positive number",
                                  i, (double)div[i]);
                m->rope_inv_freq[i] = m->rope_inv_freq[i] / div[i];
                if (div[i] > mx) mx = div[i];
            }
            c->rope_llama3 = 1;
            c->rope_custom = 1;
            c->rope_factor = mx;
        }
    }
    return 0;
}

/* ---- dispatch ---------------------------------------------------------------- */

/* Bytes of the file at path in the page cache (mincore over a mapping
 * that is never touched), and its size in *size. */
static uint64_t cached_bytes(const char *path, uint64_t *size)
{
    *size = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    struct stat st;
    uint64_t in = 0;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
        *size = (uint64_t)st.st_size;
        size_t pg = (size_t)sysconf(_SC_PAGESIZE), np = (*size + pg - 1) / pg;
        void *p = mmap(NULL, (size_t)*size, PROT_READ, MAP_PRIVATE, fd, 0);
        unsigned char *vec = p != MAP_FAILED ? malloc(np) : NULL;
        if (vec && mincore(p, (size_t)*size, vec) == 0)
            for (size_t k = 0; k < np; k++) in += vec[k] & 1 ? pg : 0;
        else in = *size;   /* cannot tell: count it as cached, read nothing */
        free(vec);
        if (p != MAP_FAILED) munmap(p, (size_t)*size);
    }
    close(fd);
    return in;
}

/* A base that is not in the page cache is read in first, file by file, with
 * progress ("reading base"): otherwise a 7B on a cold cache loads silently
 * inside the first forward, for minutes. read() into a small buffer fills
 * the page cache without mapping a page into this process, so the peak RSS
 * (and qlora's convert-and-release of each matrix) is unchanged. Skipped
 * when the files are (nearly) all cached already, and when they would not
 * fit in half the RAM (the cache would evict its own start). dir: an HF
 * folder (its .safetensors), else one file. */
static void read_in(const char *path, int dir)
{
    char **names = NULL;
    int n = 1;
    if (dir && (n = fs_list_dir(path, &names, NULL)) < 0) return;
    uint64_t all = 0, in = 0;
    char f[4200];
    for (int i = 0; i < n; i++) {
        if (dir && !str_endswith(names[i], ".safetensors")) continue;
        snprintf(f, sizeof f, "%s%s%s", path, dir ? "/" : "", dir ? names[i] : "");
        uint64_t sz;
        in += cached_bytes(f, &sz);
        all += sz;
    }
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    uint64_t ram = pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz : 0;
    log_debug("base: %llu of %llu bytes in the page cache", (unsigned long long)in, (unsigned long long)all);
    if (all && in < all - all / 50 && !(ram && all > ram / 2)) {
        progress p;
        progress_begin(&p, "reading base", all, PROGRESS_BYTES);
        static __thread char buf[1 << 20];
        for (int i = 0; i < n; i++) {
            if (dir && !str_endswith(names[i], ".safetensors")) continue;
            snprintf(f, sizeof f, "%s%s%s", path, dir ? "/" : "", dir ? names[i] : "");
            int fd = open(f, O_RDONLY | O_CLOEXEC);
            if (fd < 0) continue;
            ssize_t r;
            while ((r = read(fd, buf, sizeof buf)) > 0) progress_add(&p, (uint64_t)r);
            close(fd);
        }
        progress_end(&p);
    }
    if (dir) fs_free_list(names, n);
}

int model_load(const char *path, model **out, dlm_err *e)
{
    *out = NULL;
    model *m = calloc(1, sizeof *m);
    if (m) m->storage = calloc(1, sizeof *m->storage);
    if (!m || !m->storage) {
        model_free(m);
        return err_set(e, "MemoryError", "out of memory");
    }
    snprintf(m->source, sizeof m->source, "%s", path);
    int rc;
    char dir[4096];
    if (fs_is_dir(path)) {
        read_in(path, 1);
        rc = model_load_hf(path, m, e);
    } else if (!strcmp(fs_basename(path), "config.json")) {
        fs_dirname(dir, sizeof dir, path);
        snprintf(m->source, sizeof m->source, "%s", dir);
        read_in(dir, 1);
        rc = model_load_hf(dir, m, e);
    } else if (!fs_exists(path)) {
        rc = err_set(e, KIND, "'%s' does not exist", path);
    } else if (str_endswith(path, ".safetensors") || str_endswith(path, ".safetensors.index.json")) {
        rc = err_set(e, KIND, "'%s' is a weights file, not a model", path);
        err_hint(e, "give the model folder (the one with config.json)");
    } else {
        m->from_gguf = 1;
        read_in(path, 0);
        rc = model_load_gguf(path, m, e);
    }
    if (rc) {
        model_free(m);
        return -1;
    }
    *out = m;
    return 0;
}
