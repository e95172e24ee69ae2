/* vocab — see vocab.h. */
#include "vocab.h"

#include <stdlib.h>
#include <string.h>

#include "util/fs.h"
#include "util/json.h"

static const char *const SPECIALS[3] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};

int tiny_vocab_from_bpe(const bpe_trainer *t, int model_max_length, tiny_vocab *v, dlm_err *e)
{
    memset(v, 0, sizeof *v);
    int nb = bpe_vocab_size(t), nm = bpe_n_merges(t);
    v->n_tokens = nb + 3;
    v->n_merges = nm;
    v->model_max_length = model_max_length;
    v->tokens = calloc((size_t)v->n_tokens, sizeof *v->tokens);
    v->types = calloc((size_t)v->n_tokens, sizeof *v->types);
    v->merges = calloc((size_t)(nm ? nm : 1), sizeof *v->merges);
    if (!v->tokens || !v->types || !v->merges) goto oom;
    strbuf sb = STRBUF_INIT;
    for (int i = 0; i < nb; i++) {
        size_t len;
        const char *raw = bpe_token(t, i, &len);
        sb_reset(&sb);
        if (bpe_byte_level(raw, len, &sb) || !(v->tokens[i] = str_ndup(sb_str(&sb), sb.len))) {
            sb_free(&sb);
            goto oom;
        }
        v->types[i] = TOK_TYPE_NORMAL;
    }
    for (int i = 0; i < nm; i++) {
        int a, b;
        bpe_merge(t, i, &a, &b);
        sb_reset(&sb);
        sb_printf(&sb, "%s %s", v->tokens[a], v->tokens[b]);
        if (sb.oom || !(v->merges[i] = str_ndup(sb_str(&sb), sb.len))) {
            sb_free(&sb);
            goto oom;
        }
    }
    sb_free(&sb);
    for (int k = 0; k < 3; k++) {
        if (!(v->tokens[nb + k] = str_ndup(SPECIALS[k], strlen(SPECIALS[k])))) goto oom;
        v->types[nb + k] = TOK_TYPE_CONTROL;
    }
    v->eot = nb;
    v->im_start = nb + 1;
    v->im_end = nb + 2;
    return 0;
oom:
    tiny_vocab_free(v);
    return err_set(e, "MemoryError", "out of memory building the vocabulary");
}

void tiny_vocab_free(tiny_vocab *v)
{
    if (v->tokens)
        for (int i = 0; i < v->n_tokens; i++) free(v->tokens[i]);
    if (v->merges)
        for (int i = 0; i < v->n_merges; i++) free(v->merges[i]);
    free(v->tokens);
    free(v->types);
    free(v->merges);
    memset(v, 0, sizeof *v);
}

void tiny_vocab_spec(const tiny_vocab *v, tok_spec *s)
{
    memset(s, 0, sizeof *s);
    s->n_tokens = (size_t)v->n_tokens;
    s->tokens = (const char *const *)v->tokens;
    s->token_types = v->types;
    s->n_merges = (size_t)v->n_merges;
    s->merges = (const char *const *)v->merges;
    s->pre = "gpt2";
    s->bos_id = v->eot;
    s->eos_id = v->im_end;
    s->pad_id = v->eot;
    s->unk_id = -1;
    s->add_bos = 0;
    s->add_eos = 0;
    s->chat_template = TINY_CHAT_TEMPLATE;
}

static json_t *added_token(int id, const char *content)
{
    json_t *o = json_object();
    json_object_set_new(o, "id", json_integer(id));
    json_object_set_new(o, "content", json_string(content));
    json_object_set_new(o, "single_word", json_false());
    json_object_set_new(o, "lstrip", json_false());
    json_object_set_new(o, "rstrip", json_false());
    json_object_set_new(o, "normalized", json_false());
    json_object_set_new(o, "special", json_true());
    return o;
}

static json_t *byte_level(int add_prefix_space, int trim_offsets)
{
    json_t *o = json_object();
    json_object_set_new(o, "type", json_string("ByteLevel"));
    json_object_set_new(o, "add_prefix_space", json_boolean(add_prefix_space));
    json_object_set_new(o, "trim_offsets", json_boolean(trim_offsets));
    json_object_set_new(o, "use_regex", json_true());
    return o;
}

static int save(const char *dir, const char *name, json_t *root, dlm_err *e)
{
    char path[4096];
    if (!fs_join(path, sizeof path, dir, name)) return err_set(e, "PathError", "path too long");
    strbuf sb = STRBUF_INIT;
    json_write(&sb, root, 0);
    sb_putc(&sb, '\n');
    int rc = sb.oom ? err_set(e, "MemoryError", "out of memory") : fs_write_atomic(path, sb.buf, sb.len, 0644, e);
    sb_free(&sb);
    return rc;
}

int tiny_vocab_write_hf(const tiny_vocab *v, const char *dir, dlm_err *e)
{
    int nb = v->eot;
    /* tokenizer.json: HF's own layout for a GPT-2 style ByteLevel BPE */
    json_t *root = json_object(), *added = json_array(), *model = json_object(), *vocab = json_object(),
           *merges = json_array();
    json_object_set_new(root, "version", json_string("1.0"));
    json_object_set_new(root, "truncation", json_null());
    json_object_set_new(root, "padding", json_null());
    for (int k = 0; k < 3; k++) json_array_append_new(added, added_token(nb + k, v->tokens[nb + k]));
    json_object_set_new(root, "added_tokens", added);
    json_object_set_new(root, "normalizer", json_null());
    json_object_set_new(root, "pre_tokenizer", byte_level(0, 1));
    json_object_set_new(root, "post_processor", byte_level(1, 0));
    json_object_set_new(root, "decoder", byte_level(1, 1));
    json_object_set_new(model, "type", json_string("BPE"));
    json_object_set_new(model, "dropout", json_null());
    json_object_set_new(model, "unk_token", json_null());
    json_object_set_new(model, "continuing_subword_prefix", json_null());
    json_object_set_new(model, "end_of_word_suffix", json_null());
    json_object_set_new(model, "fuse_unk", json_false());
    json_object_set_new(model, "byte_fallback", json_false());
    json_object_set_new(model, "ignore_merges", json_false());
    for (int i = 0; i < nb; i++) json_object_set_new(vocab, v->tokens[i], json_integer(i));
    json_object_set_new(model, "vocab", vocab);
    for (int i = 0; i < v->n_merges; i++) json_array_append_new(merges, json_string(v->merges[i]));
    json_object_set_new(model, "merges", merges);
    json_object_set_new(root, "model", model);
    int rc = save(dir, "tokenizer.json", root, e);
    json_decref(root);
    if (rc) return rc;

    /* tokenizer_config.json */
    json_t *cfg = json_object(), *dec = json_object();
    json_object_set_new(cfg, "add_bos_token", json_false());
    json_object_set_new(cfg, "add_eos_token", json_false());
    json_object_set_new(cfg, "add_prefix_space", json_false());
    for (int k = 0; k < 3; k++) {
        json_t *a = added_token(nb + k, v->tokens[nb + k]);
        char id[16];
        snprintf(id, sizeof id, "%d", nb + k);
        json_object_del(a, "id");
        json_object_set_new(dec, id, a);
    }
    json_object_set_new(cfg, "added_tokens_decoder", dec);
    json_object_set_new(cfg, "bos_token", json_string(v->tokens[v->eot]));
    json_object_set_new(cfg, "chat_template", json_string(TINY_CHAT_TEMPLATE));
    json_object_set_new(cfg, "clean_up_tokenization_spaces", json_false());
    json_object_set_new(cfg, "eos_token", json_string(v->tokens[v->im_end]));
    json_object_set_new(cfg, "model_max_length", json_integer(v->model_max_length));
    json_object_set_new(cfg, "pad_token", json_string(v->tokens[v->eot]));
    json_object_set_new(cfg, "tokenizer_class", json_string("GPT2TokenizerFast"));
    json_object_set_new(cfg, "unk_token", json_null());
    rc = save(dir, "tokenizer_config.json", cfg, e);
    json_decref(cfg);
    return rc;
}
