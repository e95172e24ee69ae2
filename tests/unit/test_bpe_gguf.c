/* The embedded base's GGUF writer (tools/tiny/gguf_out.c) read back by
 * dlm's GGUF loader: the config from the llama.* keys, and every weight
 * equal to the f16 rounding of the trained f32 value — the Q/K rows come
 * back in HF order only if the writer applied llama.cpp's permutation
 * (docs/reference/formats.md §4.6) that the loader undoes. */
#include <stdlib.h>
#include <string.h>

#include "bpe.h"
#include "check.h"
#include "gguf_out.h"
#include "kern/kern.h"
#include "weights/gguf.h"
#include "recipe.h"

static void check_weights(const char *label, const wmat *w, const float *src, int64_t rows, int64_t cols)
{
    CHECK_INT(w->rows, rows);
    CHECK_INT(w->cols, cols);
    CHECK_INT(w->type, DT_F16);
    float *row = malloc((size_t)cols * sizeof *row);
    int bad = 0;
    for (int64_t r = 0; r < rows && !bad; r++) {
        kern_dequant_row(w->type, (const char *)w->data + (size_t)r * w->row_bytes, row, cols);
        for (int64_t c = 0; c < cols; c++)
            if (row[c] != fp16_to_f32(f32_to_fp16(src[r * cols + c]))) {
                fprintf(stderr, "%s: [%lld,%lld] = %g, want %g\n", label, (long long)r, (long long)c, row[c],
                        src[r * cols + c]);
                bad = 1;
                break;
            }
    }
    CHECK_MSG(!bad, "%s differs", label);
    free(row);
}

int main(void)
{
    dlm_err e;
    /* a vocabulary of exactly 300 tokens */
    bpe_trainer *t;
    CHECK_INT(bpe_new(&t, &e), 0);
    const char *text = "the sea, the ship, the whale and the sailor; the storm came over the sea at night. "
                       "Captains and crews sailed the seas for years, hunting whales in every ocean.";
    CHECK_INT(bpe_add_text(t, text, strlen(text), &e), 0);
    CHECK_INT(bpe_train(t, 297, 1, &e), 0);
    CHECK_INT(bpe_vocab_size(t), 297);
    tiny_vocab v;
    CHECK_INT(tiny_vocab_from_bpe(t, 512, &v, &e), 0);

    model_config c = {0};
    c.arch = ARCH_LLAMA; c.n_layer = 2; c.d_model = 128; c.n_ff = 256; c.n_head = 4; c.n_kv_head = 2;
    c.head_dim = 32; c.vocab = 300; c.max_pos = 512; c.rms_eps = 1e-5f; c.rope_theta = 10000; c.tied = 1;
    c.bos_id = c.eos_id = -1;
    full_model *f;
    CHECK_INT(full_model_new(&c, &f, &e), 0);
    tiny_init_weights(f, 7, 0.5);
    /* norms are not all ones after training: make them distinct too */
    f->p.out_norm[3] = 1.25f;
    f->p.layers[1].attn_norm[5] = 0.75f;
    const char *dir = check_tmpdir("bpe_gguf");
    char path[4096];
    snprintf(path, sizeof path, "%s/tiny.gguf", dir);
    CHECK_MSG(tiny_gguf_write(path, f, &v, "test tiny", &e) == 0, "%s", e.msg);

    /* keys llama.cpp requires, with the exact types */
    gguf_file *g;
    CHECK_MSG(gguf_open(path, &g, &e) == 0, "%s", e.msg);
    static const char *const u32keys[] = {"llama.block_count", "llama.context_length", "llama.embedding_length",
                                          "llama.feed_forward_length", "llama.attention.head_count",
                                          "llama.attention.head_count_kv", "llama.vocab_size",
                                          "llama.rope.dimension_count", "general.file_type",
                                          "tokenizer.ggml.eos_token_id"};
    static const uint32_t want[] = {2, 512, 128, 256, 4, 2, 300, 32, 1, 299};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        int id = gguf_find_key(g, u32keys[i]);
        uint32_t x = 0;
        CHECK_MSG(id >= 0 && gguf_get_u32(g, id, &x, &e) == 0 && x == want[i], "%s = %u", u32keys[i], x);
    }
    CHECK(gguf_find_key(g, "general.architecture") == 0);
    CHECK(gguf_find_tensor(g, "output.weight") == NULL);   /* tied */
    CHECK(gguf_find_tensor(g, "blk.1.attn_norm.weight") && gguf_find_tensor(g, "blk.1.attn_norm.weight")->type == 0);
    CHECK_INT(gguf_tensor_count(g), 1 + 2 * 9 + 1);
    gguf_close(g);

    model *m;
    CHECK_MSG(model_load(path, &m, &e) == 0, "%s", e.msg);
    CHECK_INT(m->cfg.n_layer, 2);
    CHECK_INT(m->cfg.n_head, 4);
    CHECK_INT(m->cfg.n_kv_head, 2);
    CHECK_INT(m->cfg.head_dim, 32);
    CHECK_INT(m->cfg.vocab, 300);
    CHECK_INT(m->cfg.max_pos, 512);
    CHECK_INT(m->cfg.tied, 1);
    CHECK_INT(m->cfg.eos_id, 299);
    CHECK_NEAR(m->cfg.rope_theta, 10000, 0);
    check_weights("token_embd", &m->tok_embd, f->p.tok_embd, 300, 128);
    for (int l = 0; l < 2; l++) {
        const layer_weights *w = &m->layers[l];
        const layer_grads *p = &f->p.layers[l];
        check_weights("wq", &w->wq, p->wq, 128, 128);
        check_weights("wk", &w->wk, p->wk, 64, 128);
        check_weights("wv", &w->wv, p->wv, 64, 128);
        check_weights("wo", &w->wo, p->wo, 128, 128);
        check_weights("w_gate", &w->w_gate, p->w_gate, 256, 128);
        check_weights("w_up", &w->w_up, p->w_up, 256, 128);
        check_weights("w_down", &w->w_down, p->w_down, 128, 256);
        CHECK(!memcmp(w->attn_norm, p->attn_norm, 128 * 4));
        CHECK(!memcmp(w->ffn_norm, p->ffn_norm, 128 * 4));
    }
    CHECK(!memcmp(m->out_norm, f->p.out_norm, 128 * 4));
    model_free(m);
    full_model_free(f);
    tiny_vocab_free(&v);
    bpe_free(t);
    return check_done();
}
