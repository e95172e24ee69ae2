#include "tokens/tok_gguf.h"

#include <stdlib.h>
#include <string.h>

#include "util/fs.h"
#include "util/hash.h"
#include "util/str.h"

static int32_t opt_id(const gguf_file *g, const char *key)
{
    int id = gguf_find_key(g, key);
    int64_t v;
    if (id < 0 || gguf_get_int(g, id, &v, NULL) || v < 0 || v > INT32_MAX) return -1;
    return (int32_t)v;
}

static int opt_bool(const gguf_file *g, const char *key, int def)
{
    int id = gguf_find_key(g, key), v;
    if (id < 0 || gguf_get_bool(g, id, &v, NULL)) return def;
    return v;
}

int tok_from_gguf(const gguf_file *g, tok **out, dlm_err *e)
{
    *out = NULL;
    const char *path = gguf_path(g);
    int id = gguf_find_key(g, "tokenizer.ggml.model");
    const char *model = NULL;
    size_t ml;
    if (id < 0 || gguf_get_str(g, id, &model, &ml, e))
        return err_set(e, "TokenizerError", "%s: no tokenizer.ggml.model key", path);
    int llama = !strcmp(model, "llama");
    if (strcmp(model, "gpt2") && !llama)
        return err_set(e, "TokenizerError",
                       "%s: tokenizer model '%s' is not supported (dlm reads 'gpt2' byte-level BPE and 'llama' SentencePiece)",
                       path, model);
    int tid = gguf_find_key(g, "tokenizer.ggml.tokens"), mid = gguf_find_key(g, "tokenizer.ggml.merges");
    gguf_vtype et;
    uint64_t nt = 0, nm = 0;
    if (tid < 0 || gguf_arr_info(g, tid, &et, &nt, e) || et != GGUF_STR)
        return err_set(e, "TokenizerError", "%s: tokenizer.ggml.tokens is missing or not a string array", path);
    if (mid >= 0 && (gguf_arr_info(g, mid, &et, &nm, e) || et != GGUF_STR))
        return err_set(e, "TokenizerError", "%s: tokenizer.ggml.merges is not a string array", path);
    if (nt > TOK_MAX_VOCAB || nm > TOK_MAX_MERGES)
        return err_set(e, "TokenizerError", "%s: tokenizer too large", path);
    const char **toks = calloc(nt ? nt : 1, sizeof *toks), **merges = calloc(nm ? nm : 1, sizeof *merges);
    size_t *lens = calloc(nt ? nt : 1, sizeof *lens);
    int32_t *types = NULL;
    float *scores = NULL;
    char **mcopy = calloc(nm ? nm : 1, sizeof *mcopy);
    int rc = -1;
    if (!toks || !merges || !lens || !mcopy) { err_set(e, "MemoryError", "out of memory"); goto done; }
    for (uint64_t i = 0; i < nt; i++) toks[i] = gguf_arr_str(g, tid, i, &lens[i]);
    /* Merges are NUL-free strings in the file but not NUL-terminated in the
     * mapping: copy them so tok_build can treat them as C strings. */
    for (uint64_t i = 0; i < nm; i++) {
        size_t l;
        const char *s = gguf_arr_str(g, mid, i, &l);
        mcopy[i] = str_ndup(s, l);
        if (!mcopy[i]) { err_set(e, "MemoryError", "out of memory"); goto done; }
        merges[i] = mcopy[i];
    }
    int yid = gguf_find_key(g, "tokenizer.ggml.token_type");
    uint64_t ny = 0;
    if (yid >= 0 && !gguf_arr_info(g, yid, &et, &ny, NULL) && ny == nt) {
        types = malloc(nt * sizeof *types);
        if (!types) { err_set(e, "MemoryError", "out of memory"); goto done; }
        for (uint64_t i = 0; i < nt; i++) {
            int64_t v = 1;
            gguf_arr_int(g, yid, i, &v);
            types[i] = (int32_t)v;
        }
    }
    int sid = gguf_find_key(g, "tokenizer.ggml.scores");
    uint64_t nsc = 0;
    if (llama) {
        if (sid < 0 || gguf_arr_info(g, sid, &et, &nsc, NULL) || nsc != nt) {
            err_set(e, "TokenizerError", "%s: a 'llama' vocabulary needs tokenizer.ggml.scores, one per token", path);
            goto done;
        }
        scores = malloc(nt * sizeof *scores);
        if (!scores) { err_set(e, "MemoryError", "out of memory"); goto done; }
        for (uint64_t i = 0; i < nt; i++) {
            double v = 0;
            if (gguf_arr_num(g, sid, i, &v)) {
                err_set(e, "TokenizerError", "%s: tokenizer.ggml.scores is not numeric", path);
                goto done;
            }
            scores[i] = (float)v;
        }
    }
    const char *pre = "gpt2", *tmpl = NULL;
    size_t sl;
    int pid = gguf_find_key(g, "tokenizer.ggml.pre");
    char prebuf[64];
    if (pid >= 0 && !gguf_get_str(g, pid, &pre, &sl, NULL)) {
        snprintf(prebuf, sizeof prebuf, "%.*s", (int)sl, pre);
        pre = prebuf;
    }
    char *tcopy = NULL;
    int cid = gguf_find_key(g, "tokenizer.chat_template");
    if (cid >= 0 && !gguf_get_str(g, cid, &tmpl, &sl, NULL)) tmpl = tcopy = str_ndup(tmpl, sl);
    tok_spec sp = {0};
    sp.model = model;
    sp.scores = scores;
    sp.add_space_prefix = opt_bool(g, "tokenizer.ggml.add_space_prefix", 1);
    sp.n_tokens = nt;
    sp.tokens = toks;
    sp.token_lens = lens;
    sp.token_types = types;
    sp.n_merges = nm;
    sp.merges = merges;
    sp.pre = pre;
    sp.bos_id = opt_id(g, "tokenizer.ggml.bos_token_id");
    sp.eos_id = opt_id(g, "tokenizer.ggml.eos_token_id");
    sp.pad_id = opt_id(g, "tokenizer.ggml.padding_token_id");
    sp.unk_id = opt_id(g, "tokenizer.ggml.unknown_token_id");
    sp.add_bos = opt_bool(g, "tokenizer.ggml.add_bos_token", 0);
    sp.add_eos = opt_bool(g, "tokenizer.ggml.add_eos_token", 0);
    sp.chat_template = tmpl;
    rc = tok_build(&sp, out, e);
    if (rc) err_prefix(e, "%s", path);
    free(tcopy);
done:
    if (mcopy)
        for (uint64_t i = 0; i < nm; i++) free(mcopy[i]);
    free(mcopy);
    free(toks);
    free(merges);
    free(lens);
    free(types);
    free(scores);
    return rc;
}

int tok_load_gguf(const char *path, tok **out, dlm_err *e)
{
    gguf_file *g;
    if (gguf_open(path, &g, e)) return -1;
    int rc = tok_from_gguf(g, out, e);
    gguf_close(g);
    return rc;
}

int tok_load_for_model(const char *model_path, tok **out, dlm_err *e)
{
    if (fs_is_dir(model_path)) {
        char p[4200];
        snprintf(p, sizeof p, "%s/tokenizer.json", model_path);
        if (!fs_is_file(p)) {
            err_set(e, "TokenizerError", "%s has no tokenizer.json", model_path);
            return err_hint(e, "an HF model folder needs tokenizer.json (and tokenizer_config.json)");
        }
        return tok_load(p, NULL, out, e);
    }
    return tok_load_gguf(model_path, out, e);
}

/* What the tokenizer is made of, hashed: an HF folder's tokenizer.json and
 * tokenizer_config.json, or a GGUF file's header and key/value metadata
 * (everything before the tensor data: tokenizer.ggml.* lives there), so a
 * multi-gigabyte base is not read to key the tokenization cache. */
int tok_source_sha256(const char *model_path, char out[65], dlm_err *e)
{
    sha256_ctx c;
    sha256_init(&c);
    char p[4200];
    if (fs_is_dir(model_path)) {
        const char *names[2] = {"tokenizer.json", "tokenizer_config.json"};
        for (int i = 0; i < 2; i++) {
            char *buf = NULL;
            size_t len = 0;
            snprintf(p, sizeof p, "%s/%s", model_path, names[i]);
            if (!fs_is_file(p)) continue;
            if (fs_read_all(p, 1u << 30, &buf, &len, e)) return -1;
            sha256_update(&c, names[i], strlen(names[i]) + 1);
            sha256_update(&c, buf, len);
            free(buf);
        }
    } else {
        gguf_file *g;
        if (gguf_open(model_path, &g, e)) return -1;
        uint64_t n = gguf_data_offset(g);
        FILE *f = fopen(model_path, "rb");
        if (!f) {
            gguf_close(g);
            return err_set(e, "TokenizerError", "cannot read %s", model_path);
        }
        char buf[1 << 16];
        while (n > 0) {
            size_t want = n < sizeof buf ? (size_t)n : sizeof buf, got = fread(buf, 1, want, f);
            if (got != want) break;
            sha256_update(&c, buf, got);
            n -= got;
        }
        fclose(f);
        gguf_close(g);
        if (n) return err_set(e, "TokenizerError", "%s: short read", model_path);
    }
    unsigned char d[32];
    sha256_final(&c, d);
    hex_encode(d, 32, out);
    return 0;
}
