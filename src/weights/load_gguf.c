/* load_gguf — a llama.cpp GGUF (llama / qwen2 / qwen3 / olmo2 / smollm3 arch): config from the
 * <arch>.* keys (docs/reference/formats.md §4.4), tensors by GGUF name (§4.5). Weights stay
 * in their stored type in the mapping; load.c undoes the llama Q/K
 * permutation. */
#include "weights/model_impl.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define KIND "ModelLoadError"

static void to_src(const gguf_tensor *t, src_tensor *s)
{
    memset(s, 0, sizeof *s);
    s->name = t->name;
    s->type = t->type;
    s->type_name = gguf_type_name(t->type);
    s->n_dims = t->n_dims;
    memcpy(s->ne, t->ne, sizeof s->ne);
    s->data = t->data;
    s->nbytes = t->nbytes;
}

static int find(void *ctx, const char *name, src_tensor *out)
{
    const gguf_tensor *t = gguf_find_tensor(ctx, name);
    if (!t) return 1;
    to_src(t, out);
    return 0;
}

/* An integer key "<arch>.<suffix>": 0 read, 1 absent (when !required). */
static int key_int(gguf_file *g, const char *arch, const char *suffix, int required, int64_t *out, dlm_err *e)
{
    char k[256];
    snprintf(k, sizeof k, "%s%s%s", arch, arch[0] ? "." : "", suffix);
    int id = gguf_find_key(g, k);
    if (id < 0) {
        if (!required) return 1;
        err_at(e, KIND, gguf_path(g), 0, 0, "missing key '%s'", k);
        return err_hint(e, "the GGUF lacks the model hyperparameters llama.cpp needs");
    }
    return gguf_get_int(g, id, out, e) ? -1 : 0;
}

static int key_num(gguf_file *g, const char *arch, const char *suffix, int required, double *out, dlm_err *e)
{
    char k[256];
    snprintf(k, sizeof k, "%s.%s", arch, suffix);
    int id = gguf_find_key(g, k);
    if (id < 0) {
        if (!required) return 1;
        return err_at(e, KIND, gguf_path(g), 0, 0, "missing key '%s'", k);
    }
    return gguf_get_num(g, id, out, e) ? -1 : 0;
}

/* Narrow to int, refusing what does not fit (validation comes later). */
static int as_int(int64_t v, int *out)
{
    if (v < INT32_MIN || v > INT32_MAX) return -1;
    *out = (int)v;
    return 0;
}

/* gemma2 as llama.cpp's llama_model_gemma2 reads it (src/models/gemma2.cpp
 * of node-llama-cpp 3.21.1's bundle): window 4096 unless the key says,
 * sliding on even layers (sliding_window_pattern 2), the caps from their
 * keys (absent: off), and the query scale llama.cpp derives, since no key
 * carries query_pre_attn_scalar: 1/√(n_embd/n_head) for the 46-layer 27B,
 * 1/√head_dim otherwise. */
static int gemma2_config(gguf_file *g, const char *arch, model_config *c, dlm_err *e)
{
    int64_t sw = 4096, pat = 2;
    double acap = 0, fcap = 0;
    if (key_int(g, arch, "attention.sliding_window", 0, &sw, e) < 0 ||
        key_int(g, arch, "attention.sliding_window_pattern", 0, &pat, e) < 0 ||
        key_num(g, arch, "attn_logit_softcapping", 0, &acap, e) < 0 ||
        key_num(g, arch, "final_logit_softcapping", 0, &fcap, e) < 0)
        return -1;
    if (pat != 2)
        return err_at(e, KIND, gguf_path(g), 0, 0, "%s.attention.sliding_window_pattern = %lld is not supported", arch,
                      (long long)pat);
    if (sw < 0 || sw > (1 << 24) || !(acap >= 0 && acap < 1e6) || !(fcap >= 0 && fcap < 1e6))
        return err_at(e, KIND, gguf_path(g), 0, 0, "gemma2 hyperparameters out of range");
    int tied = c->tied;
    model_config_gemma2(c);
    c->tied = tied;
    c->sliding_window = (int)sw;
    c->attn_softcap = (float)acap;
    c->final_softcap = (float)fcap;
    return 0;
}

static int read_config(gguf_file *g, model_config *c, dlm_err *e)
{
    const char *path = gguf_path(g), *arch;
    int id = gguf_find_key(g, "general.architecture");
    if (id < 0) return err_at(e, KIND, path, 0, 0, "missing key 'general.architecture'");
    if (gguf_get_str(g, id, &arch, NULL, e)) return -1;
    if (!strcmp(arch, "llama")) c->arch = ARCH_LLAMA;
    else if (!strcmp(arch, "qwen2")) c->arch = ARCH_QWEN2;
    else if (!strcmp(arch, "qwen3")) c->arch = ARCH_QWEN3;
    else if (!strcmp(arch, "olmo2")) c->arch = ARCH_OLMO2;
    else if (!strcmp(arch, "smollm3")) c->arch = ARCH_SMOLLM3;
    else if (!strcmp(arch, "gemma2")) c->arch = ARCH_GEMMA2;
    else if (!strcmp(arch, "gemma")) c->arch = ARCH_GEMMA;
    else if (!strcmp(arch, "phi3")) c->arch = ARCH_PHI3;
    else {
        err_at(e, "UnsupportedArchitectureError", path, 0, 0, "unsupported GGUF architecture '%s'", arch);
        return err_hint(e, "supported: llama, qwen2, qwen3, olmo2, smollm3, gemma, gemma2, phi3");
    }
    int64_t L, C, F, NH, KVH = -1, ctx, kl = -1, vl = -1, rd = -1, sw = -1;
    double eps, theta = 10000.0;
    if (key_int(g, arch, "block_count", 1, &L, e) || key_int(g, arch, "embedding_length", 1, &C, e) ||
        key_int(g, arch, "feed_forward_length", 1, &F, e) || key_int(g, arch, "attention.head_count", 1, &NH, e) ||
        key_int(g, arch, "context_length", 1, &ctx, e) < 0 ||
        key_num(g, arch, "attention.layer_norm_rms_epsilon", 1, &eps, e))
        return -1;
    if (key_int(g, arch, "attention.head_count_kv", 0, &KVH, e) < 0 ||
        key_num(g, arch, "rope.freq_base", 0, &theta, e) < 0 ||
        key_int(g, arch, "attention.key_length", 0, &kl, e) < 0 ||
        key_int(g, arch, "attention.value_length", 0, &vl, e) < 0 ||
        key_int(g, arch, "rope.dimension_count", 0, &rd, e) < 0 ||
        key_int(g, arch, "attention.sliding_window", 0, &sw, e) < 0)
        return -1;
    /* phi3: llama.cpp's src/models/phi3.cpp turns the window off whatever
     * the key says (its converter writes the config's value), so dlm does too */
    if (sw > 0 && sw <= (1 << 24) && c->arch != ARCH_PHI3) c->sliding_window = (int)sw;
    /* mixtral: llama.cpp's llama arch with experts */
    int64_t ne = 0, nu = 0;
    if (key_int(g, arch, "expert_count", 0, &ne, e) < 0 || key_int(g, arch, "expert_used_count", 0, &nu, e) < 0)
        return -1;
    if (ne > 0) {
        if (c->arch != ARCH_LLAMA || ne > 256 || nu < 1 || nu > ne || nu > MODEL_MAX_EXPERT_USED)
            return err_at(e, KIND, path, 0, 0, "%s.expert_count %lld / expert_used_count %lld are not supported", arch,
                          (long long)ne, (long long)nu);
        c->n_expert = (int)ne;
        c->n_expert_used = (int)nu;
    }
    if (KVH < 0) KVH = NH;
    if (as_int(L, &c->n_layer) || as_int(C, &c->d_model) || as_int(F, &c->n_ff) || as_int(NH, &c->n_head) ||
        as_int(KVH, &c->n_kv_head) || as_int(ctx, &c->max_pos) || NH < 1)
        return err_at(e, KIND, path, 0, 0, "model hyperparameters out of range");
    c->head_dim = kl > 0 ? (int)(kl < 1 << 20 ? kl : 0) : c->d_model / c->n_head;
    if (kl > 0 && vl > 0 && kl != vl)
        return err_at(e, KIND, path, 0, 0, "key_length %lld != value_length %lld is not supported",
                      (long long)kl, (long long)vl);
    if (kl <= 0 && c->d_model % c->n_head)
        return err_at(e, KIND, path, 0, 0, "embedding_length %d is not a multiple of head_count %d", c->d_model,
                      c->n_head);
    if (c->arch == ARCH_PHI3) {
        /* Phi3MiniModel (llama.cpp conversion/phi.py): rope.dimension_count
         * = partial_rotary_factor·head_dim, the LongRoPE attention factor
         * and original context; the factors themselves are tensors (load.c) */
        double af = 1.0;
        int64_t orig = 0;
        if (key_num(g, arch, "rope.scaling.attn_factor", 0, &af, e) < 0 ||
            key_int(g, arch, "rope.scaling.original_context_length", 0, &orig, e) < 0)
            return -1;
        if (!(af > 0 && af < 100) || orig < 0 || orig > (1 << 24) || (rd >= 0 && (rd < 2 || rd > c->head_dim || rd % 2)))
            return err_at(e, KIND, path, 0, 0, "phi3 RoPE hyperparameters out of range");
        c->fused = 1;
        c->rope_dim = rd > 0 && rd < c->head_dim ? (int)rd : 0;
        c->rope_attn = af != 1.0 ? (float)af : 0.0f;
        c->rope_orig_ctx = (int)orig;
    } else if (rd >= 0 && rd != c->head_dim)
        return err_at(e, KIND, path, 0, 0, "%s.rope.dimension_count %lld != head dim %d (partial RoPE is not supported)",
                      arch, (long long)rd, c->head_dim);
    c->rms_eps = (float)eps;
    c->rope_theta = (float)theta;

    /* vocab = rows of the embedding; the token list must agree */
    const gguf_tensor *emb = gguf_find_tensor(g, "token_embd.weight");
    if (!emb) return err_at(e, KIND, path, 0, 0, "missing tensor 'token_embd.weight'");
    if (emb->ne[1] < 1 || emb->ne[1] > (1 << 22)) return err_at(e, KIND, path, 0, 0, "token_embd.weight has a bad shape");
    c->vocab = (int)emb->ne[1];
    uint64_t ntok;
    int tk = gguf_find_key(g, "tokenizer.ggml.tokens");
    if (tk >= 0 && gguf_arr_info(g, tk, NULL, &ntok, NULL) == 0 && ntok != (uint64_t)c->vocab)
        return err_at(e, KIND, path, 0, 0, "tokenizer.ggml.tokens has %llu entries but token_embd.weight has %d rows",
                      (unsigned long long)ntok, c->vocab);
    int64_t v;
    c->bos_id = c->eos_id = -1;
    if (key_int(g, "", "tokenizer.ggml.bos_token_id", 0, &v, e) == 0 && v >= 0 && v <= INT32_MAX) c->bos_id = (int)v;
    if (key_int(g, "", "tokenizer.ggml.eos_token_id", 0, &v, e) == 0 && v >= 0 && v <= INT32_MAX) {
        c->eos_id = (int)v;
        c->eos_ids[0] = (int)v;
        c->n_eos = 1;
    }
    /* q/k/v biases are optional for llama.cpp; present in Qwen2 files */
    c->qkv_bias = gguf_find_tensor(g, "blk.0.attn_q.bias") != NULL;
    c->tied = gguf_find_tensor(g, "output.weight") == NULL;
    /* qwen3 / olmo2: llama.cpp always writes attn_q_norm / attn_k_norm */
    c->qk_norm = c->arch == ARCH_QWEN3 ? QK_NORM_HEAD : c->arch == ARCH_OLMO2 ? QK_NORM_FULL : 0;
    c->post_norm = c->arch == ARCH_OLMO2;
    /* smollm3: llama.cpp fixes the NoPE step at 4 (no key carries it) */
    c->nope_every = c->arch == ARCH_SMOLLM3 ? 4 : 0;
    if (c->arch == ARCH_GEMMA2 && gemma2_config(g, arch, c, e)) return -1;
    if (c->arch == ARCH_GEMMA) {   /* llama.cpp's gemma: GeGLU, √hidden embedding scale */
        int tied = c->tied;
        model_config_gemma(c);
        c->tied = tied;
    }
    int ft = gguf_find_key(g, "general.file_type");
    int64_t ftv;
    if (ft >= 0 && gguf_get_int(g, ft, &ftv, NULL) == 0)
        snprintf(c->src_dtype, sizeof c->src_dtype, "gguf-ftype-%lld", (long long)ftv);
    return 0;
}

static int enumerate(model *m, dlm_err *e)
{
    gguf_file *g = m->storage->gg;
    int n = gguf_tensor_count(g);
    model_tensor *v = model_alloc(m, (size_t)(n ? n : 1) * sizeof *v, e);
    if (!v) return -1;
    for (int i = 0; i < n; i++) {
        const gguf_tensor *t = gguf_tensor_at(g, i);
        char h[256];
        v[i].name = t->name;
        v[i].gguf_name = t->name;
        v[i].hf_name = model_name_to_hf(t->name, h, sizeof h) ? "" : model_strdup(m, h, e);
        if (!v[i].hf_name) return -1;
        v[i].type = t->type;
        v[i].type_name = gguf_type_name(t->type);
        v[i].n_dims = t->n_dims;
        memcpy(v[i].ne, t->ne, sizeof v[i].ne);
        v[i].data = t->data;
        v[i].nbytes = t->nbytes;
    }
    m->storage->tensors = v;
    m->storage->ntensors = n;
    return 0;
}

int model_load_gguf(const char *path, model *m, dlm_err *e)
{
    if (gguf_open(path, &m->storage->gg, e)) return -1;
    if (read_config(m->storage->gg, &m->cfg, e)) return -1;
    loader L = {m, path, 1, m->storage->gg, find, e};
    if (model_build(&L)) return -1;
    return enumerate(m, e);
}
