/* gguf_out — see gguf_out.h. Keys and tensor names follow
 * convert_hf_to_gguf for a LlamaForCausalLM (docs/reference/formats.md §4.4–4.6). */
#include "gguf_out.h"

#include <stdlib.h>
#include <string.h>

#include "kern/dtype.h"
#include "kern/kern.h"

int tiny_gguf_tokenizer(gguf_w *w, const tiny_vocab *v)
{
    int r = 0;
    r |= gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
    /* llama.cpp knows GPT-2's pre-tokenizer as "gpt-2" and refuses to
     * load a file naming it "gpt2" (tests/ref/r0602) */
    r |= gguf_w_str(w, "tokenizer.ggml.pre", "gpt-2");
    r |= gguf_w_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)v->tokens, NULL, (size_t)v->n_tokens);
    r |= gguf_w_arr_i32(w, "tokenizer.ggml.token_type", v->types, (size_t)v->n_tokens);
    r |= gguf_w_arr_str(w, "tokenizer.ggml.merges", (const char *const *)v->merges, NULL, (size_t)v->n_merges);
    r |= gguf_w_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)v->eot);
    r |= gguf_w_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)v->im_end);
    r |= gguf_w_u32(w, "tokenizer.ggml.padding_token_id", (uint32_t)v->eot);
    r |= gguf_w_bool(w, "tokenizer.ggml.add_bos_token", 0);
    r |= gguf_w_bool(w, "tokenizer.ggml.add_eos_token", 0);
    r |= gguf_w_str(w, "tokenizer.chat_template", TINY_CHAT_TEMPLATE);
    return r ? -1 : 0;
}

/* One tensor to write: f32 source [rows, cols], stored as F16 (matrices)
 * or F32 (vectors); perm_heads > 0 applies llama.cpp's Q/K row order. */
typedef struct out_tensor {
    const float *src;
    int64_t rows, cols;
    int f16;
    int perm_heads;
} out_tensor;

typedef struct out_ctx {
    out_tensor *t;
} out_ctx;

/* dst rows [rows] ← src rows, converted; with permutation
 * out_row[h*hd + 2j + k] = in_row[h*hd + k*hd/2 + j] (docs/reference/formats.md §4.6). */
static int fill(void *ctx, int index, void *dst, size_t nbytes, dlm_err *e)
{
    const out_tensor *t = &((out_ctx *)ctx)->t[index];
    size_t esz = t->f16 ? 2 : 4;
    if (nbytes != (size_t)(t->rows * t->cols) * esz) return err_set(e, "GGUFError", "tensor %d: size mismatch", index);
    int64_t hd = t->perm_heads ? t->rows / t->perm_heads : 0;
    for (int64_t r = 0; r < t->rows; r++) {
        int64_t in = r;
        if (t->perm_heads) {
            int64_t h = r / hd, rem = r % hd, j = rem / 2, k = rem % 2;
            in = h * hd + k * (hd / 2) + j;
        }
        const float *s = t->src + in * t->cols;
        if (t->f16) {
            uint16_t *d = (uint16_t *)dst + r * t->cols;
            for (int64_t c = 0; c < t->cols; c++) d[c] = f32_to_fp16(s[c]);
        } else {
            memcpy((float *)dst + r * t->cols, s, (size_t)t->cols * 4);
        }
    }
    return 0;
}

int tiny_gguf_write(const char *path, const full_model *f, const tiny_vocab *v, const char *name, dlm_err *e)
{
    const model_config *c = &f->m.cfg;
    if (c->arch != ARCH_LLAMA || !c->tied || c->qkv_bias)
        return err_set(e, "GGUFError", "the embedded base is a tied llama model without biases");
    if (v->n_tokens != c->vocab)
        return err_set(e, "GGUFError", "vocabulary has %d tokens but the model %d rows", v->n_tokens, c->vocab);
    gguf_w *w = gguf_w_new();
    if (!w) return err_set(e, "MemoryError", "out of memory");
    gguf_w_str(w, "general.architecture", "llama");
    gguf_w_str(w, "general.type", "model");
    gguf_w_str(w, "general.name", name);
    gguf_w_str(w, "general.license", "Apache-2.0");
    gguf_w_u32(w, "general.file_type", 1); /* MOSTLY_F16 */
    gguf_w_u32(w, "general.quantization_version", 2);
    gguf_w_u32(w, "llama.block_count", (uint32_t)c->n_layer);
    gguf_w_u32(w, "llama.context_length", (uint32_t)c->max_pos);
    gguf_w_u32(w, "llama.embedding_length", (uint32_t)c->d_model);
    gguf_w_u32(w, "llama.feed_forward_length", (uint32_t)c->n_ff);
    gguf_w_u32(w, "llama.attention.head_count", (uint32_t)c->n_head);
    gguf_w_u32(w, "llama.attention.head_count_kv", (uint32_t)c->n_kv_head);
    gguf_w_f32(w, "llama.attention.layer_norm_rms_epsilon", c->rms_eps);
    gguf_w_f32(w, "llama.rope.freq_base", c->rope_theta);
    gguf_w_u32(w, "llama.vocab_size", (uint32_t)c->vocab);
    gguf_w_u32(w, "llama.rope.dimension_count", (uint32_t)c->head_dim);
    tiny_gguf_tokenizer(w, v);

    int n_max = full_tensor_max(c);
    full_tensor *ft = calloc((size_t)n_max, sizeof *ft);
    out_tensor *ot = calloc((size_t)n_max, sizeof *ot);
    int rc = -1;
    if (!ft || !ot) { err_set(e, "MemoryError", "out of memory"); goto done; }
    int n = full_tensors(c, &f->p, ft);
    out_ctx ctx = {ot};
    for (int i = 0; i < n; i++) {
        char gname[128];
        if (model_name_to_gguf(ft[i].name, gname, sizeof gname)) {
            err_set(e, "GGUFError", "no GGUF name for %s", ft[i].name);
            goto done;
        }
        out_tensor *o = &ot[i];
        o->src = ft[i].p;
        o->rows = ft[i].rows;
        o->cols = ft[i].cols;
        o->f16 = ft[i].cols > 1;
        if (strstr(ft[i].name, "q_proj.weight")) o->perm_heads = c->n_head;
        if (strstr(ft[i].name, "k_proj.weight")) o->perm_heads = c->n_kv_head;
        int64_t ne[2] = {o->cols, o->rows};
        int nd = o->cols > 1 ? 2 : 1;
        if (nd == 1) ne[0] = o->rows;
        if (gguf_w_tensor(w, gname, o->f16 ? DT_F16 : DT_F32, nd, ne, NULL, fill, &ctx) != i) {
            err_set(e, "GGUFError", "could not add tensor %s", gname);
            goto done;
        }
    }
    rc = gguf_w_write(w, path, e);
done:
    free(ft);
    free(ot);
    gguf_w_free(w);
    return rc;
}
