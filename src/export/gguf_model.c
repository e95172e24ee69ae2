/* gguf_model — a base model (merged or not) as a llama.cpp GGUF file.
 *
 * Plan first: one entry per output tensor with its source (a weight matrix
 * in its stored type, an f32 vector, raw bytes), its llama-arch row
 * permutation, the LoRA module merged into it, and its target type from the
 * mix. Entries are sorted as llama.cpp's weights_map sorts them (that is the
 * order llama-quantize writes and the order its attn_v counter walks). The
 * GGUF writer then asks for each tensor's bytes as it writes it, so memory
 * holds one tensor at a time; rows are converted in parallel (each row is
 * independent, so any thread count gives the same bytes). */
#include "export/export_gguf.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weights/gguf.h"
#include "kern/kern.h"
#include "weights/gguf.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/progress.h"
#include "util/str.h"

enum { SRC_MAT, SRC_VEC, SRC_RAW, SRC_EXPS };

typedef struct plan_t {
    char name[64];
    int kind;
    const wmat *w;          /* SRC_MAT; SRC_EXPS: the first expert's */
    const wmat *exps;       /* SRC_EXPS: [ne[2]] experts' matrices, stacked into one 3-D tensor */
    const float *v;         /* SRC_VEC: [n] */
    const void *raw;        /* SRC_RAW: F32 bytes */
    int64_t n;              /* SRC_VEC/RAW elements */
    int n_dims;
    int64_t ne[3];
    int perm_hs;            /* > 0: llama Q/K row permutation with this head size */
    int layer, mod;         /* merged LoRA module, mod = -1 for none */
    dtype type;
    const float *qw;        /* the imatrix's importance [ne[2]·ne[0]] (export/imatrix.h), or NULL */
} plan_t;

typedef struct plan {
    plan_t *t;
    int n, cap;
    float rope[2048];       /* computed llama3 divisors (HF sources) */
} plan;

static plan_t *plan_add(plan *p, const char *name, int kind, dlm_err *e)
{
    if (p->n == p->cap) {
        int cap = p->cap ? p->cap * 2 : 64;
        plan_t *t = realloc(p->t, (size_t)cap * sizeof *t);
        if (!t) { err_set(e, "MemoryError", "out of memory"); return NULL; }
        p->t = t;
        p->cap = cap;
    }
    plan_t *x = &p->t[p->n++];
    memset(x, 0, sizeof *x);
    snprintf(x->name, sizeof x->name, "%s", name);
    x->kind = kind;
    x->mod = -1;
    return x;
}

static int add_mat(plan *p, const char *name, const wmat *w, int perm_hs, int layer, int mod, dlm_err *e)
{
    plan_t *x = plan_add(p, name, SRC_MAT, e);
    if (!x) return -1;
    x->w = w;
    x->n_dims = 2;
    x->ne[0] = w->cols;
    x->ne[1] = w->rows;
    x->perm_hs = perm_hs;
    x->layer = layer;
    x->mod = mod;
    return 0;
}

static int add_vec(plan *p, const char *name, const float *v, int64_t n, int perm_hs, dlm_err *e)
{
    plan_t *x = plan_add(p, name, SRC_VEC, e);
    if (!x) return -1;
    x->v = v;
    x->n = n;
    x->n_dims = 1;
    x->ne[0] = n;
    x->ne[1] = 1;
    x->perm_hs = perm_hs;
    return 0;
}

/* llama3 rope divisors as convert_hf_to_gguf computes them (docs/reference/formats.md §1.4). */
static void rope_divisors(const model_config *c, float *out)
{
    int hd = c->head_dim;
    double lo = c->rope_low_freq_factor, hi = c->rope_high_freq_factor, orig = c->rope_orig_ctx;
    for (int i = 0; i < hd / 2; i++) {
        double freq = 1.0 / pow(c->rope_theta, 2.0 * i / hd), wl = 2 * M_PI / freq, f;
        if (wl < orig / hi) f = 1.0;
        else if (wl > orig / lo) f = c->rope_factor;
        else {
            double s = (orig / wl - lo) / (hi - lo);
            f = 1.0 / ((1 - s) / c->rope_factor + s);
        }
        out[i] = (float)f;
    }
}

/* mixtral: the router as blk.N.ffn_gate_inp and each projection's experts
 * as one 3-D tensor ne {cols, rows, E} (llama.cpp's ffn_gate_exps /
 * ffn_up_exps / ffn_down_exps; convert_hf_to_gguf stacks experts.X.w1 /
 * w3 / w2 the same way). */
static int add_moe(plan *p, const model_config *c, const layer_weights *w, int il, dlm_err *e)
{
    char nm[64];
    snprintf(nm, sizeof nm, "blk.%d.ffn_gate_inp.weight", il);
    if (add_mat(p, nm, &w->moe_router, 0, il, -1, e)) return -1;
    static const char *const NAMES[3] = {"gate", "up", "down"};
    const wmat *ex[3] = {w->exp_gate, w->exp_up, w->exp_down};
    for (int k = 0; k < 3; k++) {
        snprintf(nm, sizeof nm, "blk.%d.ffn_%s_exps.weight", il, NAMES[k]);
        for (int x = 1; x < c->n_expert; x++)
            if (ex[k][x].type != ex[k][0].type)
                return err_set(e, "ExportError", "the experts of layer %d store %s in different types", il, NAMES[k]);
        if (add_mat(p, nm, &ex[k][0], 0, il, -1, e)) return -1;
        plan_t *t = &p->t[p->n - 1];
        t->kind = SRC_EXPS;
        t->exps = ex[k];
        t->n_dims = 3;
        t->ne[2] = c->n_expert;
    }
    return 0;
}

static int build_plan(const model *m, const lora *l, plan *p, dlm_err *e)
{
    const model_config *c = &m->cfg;
    int llama = model_arch_permutes_qk(c->arch), hs = c->head_dim;
    char nm[64];
    /* merged with modules_to_save: the adapter's trained matrices (docs/cpt.md);
     * a tied base whose adapter untied them gets an output.weight, which
     * llama.cpp loads in place of the tied one */
    const wmat *E = lora_embd(l, m), *O = lora_head(l, m);
    if (add_mat(p, "token_embd.weight", E, 0, -1, -1, e)) return -1;
    if ((!c->tied || O->data != E->data) && add_mat(p, "output.weight", O, 0, -1, -1, e)) return -1;
    if (add_vec(p, "output_norm.weight", m->out_norm, c->d_model, 0, e)) return -1;
    if (c->rope_llama3) {
        /* a GGUF source carries the divisors as a tensor: reuse its bytes */
        const model_tensor *rt = NULL;
        for (int i = 0; i < model_tensor_count(m); i++) {
            const model_tensor *x = model_tensor_at(m, i);
            if (!strcmp(x->gguf_name, "rope_freqs.weight")) rt = x;
        }
        if (hs / 2 > (int)(sizeof p->rope / sizeof p->rope[0]))
            return err_set(e, "ExportError", "head dim %d is too large for rope_freqs", hs);
        plan_t *x = plan_add(p, "rope_freqs.weight", SRC_RAW, e);
        if (!x) return -1;
        if (rt && rt->type == DT_F32 && rt->n_dims == 1 && rt->ne[0] == hs / 2) {
            x->raw = rt->data;
        } else {
            rope_divisors(c, p->rope);
            x->raw = p->rope;
        }
        x->n = hs / 2;
        x->n_dims = 1;
        x->ne[0] = hs / 2;
        x->ne[1] = 1;
    }
    if (c->n_rope_factors) {
        /* phi3's LongRoPE factors (llama.cpp conversion/phi.py Phi3MiniModel
         * generate_extra_tensors: rope_factors_long / rope_factors_short, F32) */
        const float *f[2] = {c->rope_long, c->rope_short};
        const char *fn[2] = {"rope_factors_long.weight", "rope_factors_short.weight"};
        for (int k = 0; k < 2; k++) {
            plan_t *x = plan_add(p, fn[k], SRC_RAW, e);
            if (!x) return -1;
            x->raw = f[k];
            x->n = c->n_rope_factors;
            x->n_dims = 1;
            x->ne[0] = c->n_rope_factors;
            x->ne[1] = 1;
        }
    }
    for (int il = 0; il < c->n_layer; il++) {
        const layer_weights *w = &m->layers[il];
        const wmat *mats[LM_COUNT] = {&w->wq, &w->wk, &w->wv, &w->wo, &w->w_gate, &w->w_up, &w->w_down};
        if (c->n_expert && add_moe(p, c, w, il, e)) return -1;
        for (int mm = 0; mm < (c->n_expert ? LM_GATE : LM_COUNT); mm++) {
            /* phi3: wq is attn_qkv, w_gate the fused ffn_up; no k, v, up of their own */
            if (!model_proj_name_for(c, mm, il, 1, nm, sizeof nm)) continue;
            int perm = llama && (mm == LM_Q || mm == LM_K) ? hs : 0;
            int merged = l && lora_mod_at(l, il, mm) ? mm : -1;
            if (add_mat(p, nm, mats[mm], perm, il, merged, e)) return -1;
        }
        if (c->sandwich) {   /* gemma2: the pre norms too (held as 1 + w, as llama.cpp stores them) */
            snprintf(nm, sizeof nm, "blk.%d.attn_norm.weight", il);
            if (add_vec(p, nm, w->attn_norm, c->d_model, 0, e)) return -1;
            snprintf(nm, sizeof nm, "blk.%d.ffn_norm.weight", il);
            if (add_vec(p, nm, w->ffn_norm, c->d_model, 0, e)) return -1;
        }
        if (c->post_norm) {   /* olmo2, gemma2 */
            snprintf(nm, sizeof nm, "blk.%d.post_attention_norm.weight", il);
            if (add_vec(p, nm, w->post_attn_norm, c->d_model, 0, e)) return -1;
            snprintf(nm, sizeof nm, "blk.%d.post_ffw_norm.weight", il);
            if (add_vec(p, nm, w->post_ffn_norm, c->d_model, 0, e)) return -1;
        } else {
            snprintf(nm, sizeof nm, "blk.%d.attn_norm.weight", il);
            if (add_vec(p, nm, w->attn_norm, c->d_model, 0, e)) return -1;
            snprintf(nm, sizeof nm, "blk.%d.ffn_norm.weight", il);
            if (add_vec(p, nm, w->ffn_norm, c->d_model, 0, e)) return -1;
        }
        if (w->q_norm) {   /* per head (qwen3) or over the whole projection (olmo2) */
            int full = c->qk_norm == QK_NORM_FULL;
            snprintf(nm, sizeof nm, "blk.%d.attn_q_norm.weight", il);
            if (add_vec(p, nm, w->q_norm, full ? (int64_t)c->n_head * hs : hs, 0, e)) return -1;
            snprintf(nm, sizeof nm, "blk.%d.attn_k_norm.weight", il);
            if (add_vec(p, nm, w->k_norm, full ? (int64_t)c->n_kv_head * hs : hs, 0, e)) return -1;
        }
        if (w->bq) {
            int64_t qd = (int64_t)c->n_head * hs, kd = (int64_t)c->n_kv_head * hs;
            snprintf(nm, sizeof nm, "blk.%d.attn_q.bias", il);
            if (add_vec(p, nm, w->bq, qd, llama ? hs : 0, e)) return -1;
            snprintf(nm, sizeof nm, "blk.%d.attn_k.bias", il);
            if (add_vec(p, nm, w->bk, kd, llama ? hs : 0, e)) return -1;
            snprintf(nm, sizeof nm, "blk.%d.attn_v.bias", il);
            if (add_vec(p, nm, w->bv, kd, 0, e)) return -1;
        }
    }
    return 0;
}

static int plan_cmp(const void *a, const void *b)
{
    return export_name_cmp(((const plan_t *)a)->name, ((const plan_t *)b)->name);
}

/* ---- filling one tensor ------------------------------------------------------------------ */

typedef struct fill_ctx {
    const model *m;
    const lora *l;
    const export_gguf_opts *o;
    plan *p;
    export_gguf_info *info;
    progress *prog;         /* tensors written so far */
    /* per tensor, for the parallel row loop */
    const plan_t *cur;
    uint8_t *dst;
    size_t dst_row;
    int bad;                /* a row failed (no memory, non-finite value) */
    int64_t bad_row;
} fill_ctx;

/* Rows [r0, r1) of the current matrix tensor into dst. */
static void fill_rows(void *vctx, int64_t r0, int64_t r1)
{
    fill_ctx *F = vctx;
    const plan_t *x = F->cur;
    const wmat *W = x->w;
    int64_t cols = W->cols, rows = x->ne[1];
    const lora_mod *md = x->mod >= 0 ? lora_mod_at(F->l, x->layer, x->mod) : NULL;
    int copy = !md && W->type == x->type;
    float *row = NULL;
    if (!copy) {
        row = malloc((size_t)cols * sizeof *row);
        if (!row) { __atomic_store_n(&F->bad, 1, __ATOMIC_RELAXED); return; }
    }
    for (int64_t r = r0; r < r1; r++) {
        int64_t h = x->perm_hs ? gguf_qk_hf_row(r, x->perm_hs) : r;
        if (x->exps) {   /* a stacked expert tensor: row r of expert r / rows */
            W = &x->exps[r / rows];
            h = r % rows;
        }
        const uint8_t *src = (const uint8_t *)W->data + (size_t)h * W->row_bytes;
        uint8_t *out = F->dst + (size_t)r * F->dst_row;
        if (copy) {
            memcpy(out, src, W->row_bytes);
            continue;
        }
        kern_dequant_row(W->type, src, row, cols);
        if (md) {
            /* W' = W + s·B·A (DoRA: scaled to mag / ‖W + s·B·A‖ per row),
             * the sums in the order lora_dora_norm uses */
            const lora *l = F->l;
            int rk = l->cfg.rank;
            const float *A = l->w + md->off_a, *B = l->w + md->off_b + (size_t)h * rk;
            double acc = 0;
            for (int64_t i = 0; i < cols; i++) {
                float ba = 0;
                for (int k = 0; k < rk; k++) ba += B[k] * A[(size_t)k * cols + i];
                row[i] = row[i] + l->scale * ba;
                acc += (double)row[i] * row[i];
            }
            if (l->cfg.dora) {
                float g = l->w[md->off_mag + (size_t)h] / (float)sqrt(acc);
                for (int64_t i = 0; i < cols; i++) row[i] *= g;
            }
            if (F->o->merge_f16)
                for (int64_t i = 0; i < cols; i++) row[i] = fp16_to_f32(f32_to_fp16(row[i]));
            for (int64_t i = 0; i < cols; i++)
                if (!isfinite(row[i])) {
                    /* rows run on several threads: any failing row will do */
                    __atomic_store_n(&F->bad_row, h, __ATOMIC_RELAXED);
                    __atomic_store_n(&F->bad, 2, __ATOMIC_RELAXED);
                    break;
                }
        }
        const float *qw = x->qw && x->exps ? x->qw + (size_t)(r / rows) * (size_t)cols : x->qw;
        export_quant_row_w(x->type, row, out, cols, qw);
    }
    free(row);
}

static int fill_one(void *vctx, int index, void *dst, size_t nbytes, dlm_err *e)
{
    fill_ctx *F = vctx;
    const plan_t *x = &F->p->t[index];
    if (x->kind == SRC_MAT || x->kind == SRC_EXPS) {
        int64_t rows = x->ne[1] * (x->kind == SRC_EXPS ? x->ne[2] : 1);
        F->cur = x;
        F->dst = dst;
        F->dst_row = dtype_row_bytes(x->type, x->ne[0]);
        F->bad = 0;
        if (F->dst_row * (size_t)rows != nbytes)
            return err_set(e, "ExportError", "tensor '%s': size mismatch", x->name);
        kern_parallel_for(rows, fill_rows, F);
        if (F->bad == 1) return err_set(e, "MemoryError", "out of memory converting '%s'", x->name);
        if (F->bad == 2) {
            err_set(e, "ExportError", "merging the adapter into '%s' gives a non-finite weight (row %lld)", x->name,
                    (long long)F->bad_row);
            return err_hint(e, "the adapter has diverged; retrain it, or export it unmerged");
        }
        return 0;
    }
    /* vectors are F32 */
    float *out = dst;
    if (nbytes != (size_t)x->n * 4) return err_set(e, "ExportError", "tensor '%s': size mismatch", x->name);
    if (x->kind == SRC_RAW) {
        memcpy(out, x->raw, nbytes);
        return 0;
    }
    for (int64_t i = 0; i < x->n; i++) out[i] = x->v[x->perm_hs ? gguf_qk_hf_row(i, x->perm_hs) : i];
    return 0;
}

/* Each tensor converted (quantized, merged) as the writer reaches it. */
static int fill(void *vctx, int index, void *dst, size_t nbytes, dlm_err *e)
{
    fill_ctx *F = vctx;
    if (fill_one(vctx, index, dst, nbytes, e)) return -1;
    progress_update(F->prog, (uint64_t)index + 1);
    return 0;
}

/* ---- metadata ------------------------------------------------------------------------------ */

/* An array of strings built in one arena (token texts may come from a
 * per-thread buffer that the next call overwrites). */
typedef struct strarr {
    strbuf arena;
    size_t *off, *len;
    size_t n;
} strarr;

static int strarr_init(strarr *a, size_t n)
{
    memset(a, 0, sizeof *a);
    a->off = malloc((n ? n : 1) * sizeof *a->off);
    a->len = malloc((n ? n : 1) * sizeof *a->len);
    return a->off && a->len ? 0 : -1;
}

static void strarr_push(strarr *a, const char *s, size_t n)
{
    a->off[a->n] = a->arena.len;
    a->len[a->n] = n;
    sb_append(&a->arena, s, n);
    sb_putc(&a->arena, 0);
    a->n++;
}

static int strarr_write(gguf_w *w, const char *key, strarr *a)
{
    if (a->arena.oom) return -1;
    const char **v = malloc((a->n ? a->n : 1) * sizeof *v);
    if (!v) return -1;
    for (size_t i = 0; i < a->n; i++) v[i] = a->arena.buf + a->off[i];
    int rc = gguf_w_arr_str(w, key, v, a->len, a->n);
    free(v);
    return rc;
}

static void strarr_free(strarr *a)
{
    sb_free(&a->arena);
    free(a->off);
    free(a->len);
}

/* A SentencePiece-style vocabulary as llama.cpp's `llama` vocabulary, the
 * keys convert_hf_to_gguf.py writes for one (_set_vocab_sentencepiece /
 * _set_vocab_llama_hf in its conversion/base.py): model "llama", pre
 * "default", tokens, scores (tok_spm_scores: the order HF merges in),
 * token types with <0xNN> as BYTE, add_space_prefix; no merges. */
static int write_spm_vocab(gguf_w *w, const tok *t, strarr *toks, const int32_t *types, size_t V, dlm_err *e)
{
    float *scores = malloc(V * sizeof *scores);
    if (!scores || tok_spm_scores(t, scores, V)) {
        free(scores);
        return err_set(e, "MemoryError", "out of memory");
    }
    gguf_w_str(w, "tokenizer.ggml.model", "llama");
    gguf_w_str(w, "tokenizer.ggml.pre", "default");
    int rc = strarr_write(w, "tokenizer.ggml.tokens", toks);
    if (!rc) {
        gguf_w_arr_f32(w, "tokenizer.ggml.scores", scores, V);
        gguf_w_arr_i32(w, "tokenizer.ggml.token_type", types, V);
        gguf_w_bool(w, "tokenizer.ggml.add_space_prefix", tok_add_space_prefix(t));
    }
    free(scores);
    return rc ? err_set(e, "MemoryError", "out of memory") : 0;
}

/* A byte-level BPE vocabulary as llama.cpp's `gpt2` vocabulary (merges as "a b"). */
static int write_bpe_vocab(gguf_w *w, const tok *t, const export_gguf_opts *o, strarr *toks, strarr *merges,
                           const int32_t *types, size_t V, dlm_err *e)
{
    strbuf mb = STRBUF_INIT;
    for (size_t i = 0; i < tok_n_merges(t); i++) {
        if (tok_merge_str(t, i, &mb)) break;
        strarr_push(merges, mb.buf, mb.len);
    }
    sb_free(&mb);
    if (merges->n != tok_n_merges(t)) return err_set(e, "MemoryError", "out of memory");
    gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
    gguf_w_str(w, "tokenizer.ggml.pre", o->pre);
    if (strarr_write(w, "tokenizer.ggml.tokens", toks)) return err_set(e, "MemoryError", "out of memory");
    gguf_w_arr_i32(w, "tokenizer.ggml.token_type", types, V);
    if (merges->n && strarr_write(w, "tokenizer.ggml.merges", merges)) return err_set(e, "MemoryError", "out of memory");
    return 0;
}

/* tokenizer.* keys (docs/reference/formats.md §4.4). The token list has exactly one entry
 * per embedding row: ids the tokenizer lacks become "[PAD<id>]" UNUSED, as
 * the converter writes them. */
int export_write_tokenizer(gguf_w *w, const tok *t, int vocab, int cfg_bos, int cfg_eos, const char *template_alt,
                           const export_gguf_opts *o, dlm_err *e)
{
    size_t V = (size_t)vocab, nt = tok_vocab_size(t);
    if (nt > V)
        return err_set(e, "ExportError", "preflight: the tokenizer has %zu tokens but the embedding has %zu rows", nt, V);
    strarr toks, merges;
    int32_t *types = malloc(V * sizeof *types);
    int rc = -1;
    if (strarr_init(&toks, V) || strarr_init(&merges, tok_n_merges(t)) || !types) {
        err_set(e, "MemoryError", "out of memory");
        goto done;
    }
    for (size_t i = 0; i < V; i++) {
        size_t len = 0;
        const char *s = i < nt ? tok_token_str(t, (int32_t)i, &len) : NULL;
        char pad[32];
        if (!s) {
            len = (size_t)snprintf(pad, sizeof pad, "[PAD%zu]", i);
            s = pad;
        }
        strarr_push(&toks, s, len);
        int ty = i < nt ? tok_token_type(t, (int32_t)i) : TOK_TYPE_UNUSED;
        types[i] = ty == TOK_TYPE_UNDEFINED ? TOK_TYPE_UNUSED : ty;
    }
    if (tok_is_spm(t)) {
        if (write_spm_vocab(w, t, &toks, types, V, e)) goto done;
    } else if (write_bpe_vocab(w, t, o, &toks, &merges, types, V, e)) goto done;
    /* special ids: the tokenizer's own, then config.json's (converter order) */
    int32_t bos = tok_bos(t) >= 0 ? tok_bos(t) : cfg_bos, eos = tok_eos(t) >= 0 ? tok_eos(t) : cfg_eos;
    int32_t ids[4] = {bos, eos, tok_unk(t), tok_pad(t)};
    const char *keys[4] = {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                           "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.padding_token_id"};
    for (int i = 0; i < 4; i++)
        if (ids[i] >= 0 && (size_t)ids[i] < V) gguf_w_u32(w, keys[i], (uint32_t)ids[i]);
    if (o->add_bos >= 0) gguf_w_bool(w, "tokenizer.ggml.add_bos_token", o->add_bos);
    if (o->add_eos >= 0) gguf_w_bool(w, "tokenizer.ggml.add_eos_token", o->add_eos);
    const char *tmpl = tok_chat_template(t);
    if (!tmpl || !*tmpl) tmpl = template_alt;
    if (o->chat_template && tmpl && *tmpl) gguf_w_str(w, "tokenizer.chat_template", tmpl);
    rc = 0;
done:
    strarr_free(&toks);
    strarr_free(&merges);
    free(types);
    return rc;
}

static int write_tokenizer(gguf_w *w, const model *m, const tok *t, const export_gguf_opts *o, dlm_err *e)
{
    return export_write_tokenizer(w, t, m->cfg.vocab, m->cfg.bos_id, m->cfg.eos_id, NULL, o, e);
}

/* No GGUF key carries gemma2's query_pre_attn_scalar: llama.cpp derives the
 * scale from the shape (weights/load_gguf.c's gemma2_config), so a model
 * whose config says otherwise would run differently there. */
static int gemma2_check_scale(const model_config *c, dlm_err *e)
{
    float want = c->n_layer == 46 ? 1.0f / sqrtf((float)(c->d_model / c->n_head)) : 1.0f / sqrtf((float)c->head_dim);
    if (fabsf(c->attn_scale - want) <= 1e-6f * want) return 0;
    err_set(e, "ExportError", "this gemma2's query scale 1/%.6g is not the 1/%.6g llama.cpp derives from its shape",
            1.0 / ((double)c->attn_scale * c->attn_scale), 1.0 / ((double)want * want));
    return err_hint(e, "query_pre_attn_scalar must equal head_dim (n_embd / n_head for a 46-layer model) for a GGUF");
}

static void write_arch(gguf_w *w, const model *m)
{
    const model_config *c = &m->cfg;
    const char *a = model_arch_name(c->arch);
    char k[96];
#define KEY(s) (snprintf(k, sizeof k, "%s.%s", a, s), k)
    gguf_w_u32(w, KEY("block_count"), (uint32_t)c->n_layer);
    gguf_w_u32(w, KEY("context_length"), (uint32_t)c->max_pos);
    gguf_w_u32(w, KEY("embedding_length"), (uint32_t)c->d_model);
    gguf_w_u32(w, KEY("feed_forward_length"), (uint32_t)c->n_ff);
    gguf_w_u32(w, KEY("attention.head_count"), (uint32_t)c->n_head);
    gguf_w_u32(w, KEY("attention.head_count_kv"), (uint32_t)c->n_kv_head);
    gguf_w_f32(w, KEY("rope.freq_base"), c->rope_theta);
    gguf_w_f32(w, KEY("attention.layer_norm_rms_epsilon"), c->rms_eps);
    if (c->head_dim * c->n_head != c->d_model || c->arch == ARCH_GEMMA2) {
        gguf_w_u32(w, KEY("attention.key_length"), (uint32_t)c->head_dim);
        gguf_w_u32(w, KEY("attention.value_length"), (uint32_t)c->head_dim);
    }
    if (c->sliding_window > 0)   /* mistral: llama.cpp's llama arch ignores it; dlm reads it back */
        gguf_w_u32(w, KEY("attention.sliding_window"), (uint32_t)c->sliding_window);
    if (c->arch == ARCH_GEMMA2) {   /* Gemma2Model's keys; llama.cpp defaults the caps to off without them */
        gguf_w_f32(w, KEY("attn_logit_softcapping"), c->attn_softcap);
        gguf_w_f32(w, KEY("final_logit_softcapping"), c->final_softcap);
    }
    if (c->n_expert) {   /* mixtral: llama with experts (convert_hf_to_gguf's MixtralModel keys) */
        gguf_w_u32(w, KEY("expert_count"), (uint32_t)c->n_expert);
        gguf_w_u32(w, KEY("expert_used_count"), (uint32_t)c->n_expert_used);
    }
    if (c->arch == ARCH_PHI3) {   /* Phi3MiniModel.set_gguf_parameters / generate_extra_tensors */
        gguf_w_u32(w, KEY("rope.dimension_count"), (uint32_t)model_rope_dim(c));
        if (c->rope_orig_ctx > 0) gguf_w_u32(w, KEY("rope.scaling.original_context_length"), (uint32_t)c->rope_orig_ctx);
        if (c->n_rope_factors) gguf_w_f32(w, KEY("rope.scaling.attn_factor"), c->rope_attn > 0 ? c->rope_attn : 1.0f);
    }
    if (model_arch_permutes_qk(c->arch)) {   /* LlamaModel's keys (llama, smollm3) */
        gguf_w_u32(w, KEY("vocab_size"), (uint32_t)c->vocab);
        gguf_w_u32(w, KEY("rope.dimension_count"), (uint32_t)c->head_dim);
    }
#undef KEY
}

int export_write_model(const model *m, const tok *t, const export_gguf_opts *o, const char *path,
                       export_gguf_info *info, dlm_err *e)
{
    export_gguf_info dummy;
    if (!info) info = &dummy;
    memset(info, 0, sizeof *info);
    plan p;
    memset(&p, 0, sizeof p);
    gguf_w *w = NULL;
    int rc = -1;
    if (o->merge && o->merge->n_layer != m->cfg.n_layer) {
        err_set(e, "ExportError", "the adapter has %d layers, the base %d", o->merge->n_layer, m->cfg.n_layer);
        goto done;
    }
    if (m->cfg.arch == ARCH_GEMMA2 && gemma2_check_scale(&m->cfg, e)) goto done;
    if (build_plan(m, o->merge, &p, e)) goto done;
    qsort(p.t, (size_t)p.n, sizeof *p.t, plan_cmp);
    export_qstate qs = {.has_output = !m->cfg.tied, .n_layer = m->cfg.n_layer};
    for (int i = 0; i < p.n; i++)
        if (strstr(p.t[i].name, "attn_v.weight")) qs.n_attention_wv++;
    for (int i = 0; i < p.n; i++) {
        plan_t *x = &p.t[i];
        x->type = export_tensor_type(o->mix, &qs, x->name, x->ne[0], x->n_dims);
        if ((x->kind == SRC_MAT || x->kind == SRC_EXPS) && x->mod < 0 && x->type == x->w->type) info->n_copied++;
        if (o->imatrix && (x->kind == SRC_MAT || x->kind == SRC_EXPS) && dtype_is_quant(x->type)) {
            /* llama-quantize: a weight without an entry is quantized without
             * one; an entry of another shape is an error (but token_embd) */
            int64_t nmat = x->kind == SRC_EXPS ? x->ne[2] : 1, ic, im;
            x->qw = imatrix_weights(o->imatrix, x->name, x->ne[0], nmat);
            if (!x->qw && !imatrix_shape(o->imatrix, x->name, &ic, &im) && strcmp(x->name, "token_embd.weight")) {
                err_set(e, "ExportError", "the importance matrix of '%s' is %lld x %lld, the tensor has %lld columns x %lld",
                        x->name, (long long)ic, (long long)im, (long long)x->ne[0], (long long)nmat);
                err_hint(e, "it was computed for another model; export with --no-imatrix or delete the cached imatrix.gguf");
                goto done;
            }
            if (x->qw) info->n_imatrix++;
        }
        info->n_by_type[x->type]++;
    }
    info->n_fallback = qs.n_fallback;
    info->n_tensors = p.n;

    w = gguf_w_new();
    if (!w) { err_set(e, "MemoryError", "out of memory"); goto done; }
    gguf_w_str(w, "general.architecture", model_arch_name(m->cfg.arch));
    gguf_w_str(w, "general.type", "model");
    gguf_w_str(w, "general.name", o->name && *o->name ? o->name : "dlm export");
    gguf_w_u32(w, "general.file_type", o->mix->ftype);
    gguf_w_u32(w, "general.quantization_version", 2);
    write_arch(w, m);
    if (write_tokenizer(w, m, t, o, e)) goto done;
    if (o->imatrix) {   /* what llama-quantize --imatrix adds (tools/quantize: kv overrides, ints as u32) */
        gguf_w_str(w, "quantize.imatrix.file", "imatrix.gguf");
        if (imatrix_dataset(o->imatrix)[0]) gguf_w_str(w, "quantize.imatrix.dataset", imatrix_dataset(o->imatrix));
        gguf_w_u32(w, "quantize.imatrix.entries_count", (uint32_t)imatrix_count(o->imatrix));
        if (imatrix_chunks(o->imatrix) > 0) gguf_w_u32(w, "quantize.imatrix.chunks_count", (uint32_t)imatrix_chunks(o->imatrix));
    }
    progress pg;
    char label[64];
    snprintf(label, sizeof label, "writing %.52s", fs_basename(path));
    progress_begin_count(&pg, label, (uint64_t)p.n, "tensors");
    fill_ctx F = {.m = m, .l = o->merge, .o = o, .p = &p, .info = info, .prog = &pg};
    for (int i = 0; i < p.n; i++) {
        plan_t *x = &p.t[i];
        if (gguf_w_tensor(w, x->name, (int)x->type, x->n_dims, x->ne, NULL, fill, &F) < 0) break;
    }
    rc = gguf_w_write(w, path, e);
    if (rc) progress_abort(&pg);
    else progress_end(&pg);
done:
    gguf_w_free(w);
    free(p.t);
    return rc;
}

/* ---- pre-tokenizer name -------------------------------------------------------------------- */

int export_pre_name(const tok *t, const char *override, const char **out, dlm_err *e)
{
    /* llama.cpp's names for the pipelines dlm's tokenizer rebuilds from a
     * GGUF (tok_build); dlm calls GPT-2's "gpt2", llama.cpp "gpt-2" */
    static const char *const KNOWN[] = {"gpt-2", "llama-bpe", "qwen2", "smollm"};
    *out = NULL;
    if (override) {
        for (size_t i = 0; i < sizeof KNOWN / sizeof KNOWN[0]; i++)
            if (!strcmp(override, KNOWN[i])) { *out = KNOWN[i]; return 0; }
        err_set(e, "ExportError", "--pre-tokenizer '%s' is not one of gpt-2, llama-bpe, qwen2, smollm", override);
        return -1;
    }
    if (tok_is_spm(t)) {
        /* a `llama` vocabulary: llama.cpp splits no pre-tokens, "default" is its name */
        if (override && strcmp(override, "default")) {
            err_set(e, "ExportError", "--pre-tokenizer '%s' does not apply: the base's vocabulary is SentencePiece-style "
                                      "(exported as llama.cpp's `llama` vocabulary)", override);
            return err_hint(e, "leave --pre-tokenizer out for this base");
        }
        *out = "default";
        return 0;
    }
    const char *name;
    dlm_err te;
    if (tok_pre_name(t, &name, &te) == 0) {
        *out = !strcmp(name, "gpt2") ? "gpt-2" : !strcmp(name, "llama3") ? "llama-bpe" : name;
        for (size_t i = 0; i < sizeof KNOWN / sizeof KNOWN[0]; i++)
            if (!strcmp(*out, KNOWN[i])) return 0;
    }
    err_set(e, "ExportError",
            "preflight: unknown pre-tokenizer hash: the base's pre-tokenizer is none of the pipelines llama.cpp "
            "knows by name (gpt-2, llama-bpe, qwen2, smollm), so llama.cpp would split text differently from training");
    return err_hint(e, "if you know which llama.cpp pre-tokenizer the base uses, name it with --pre-tokenizer NAME; "
                       "otherwise export a base with one of these tokenizers");
}

/* ---- add_bos / add_eos ------------------------------------------------------------------- */

void export_special_flags(const char *model_path, const tok *t, int vocab, int *add_bos, int *add_eos)
{
    *add_bos = *add_eos = -1;
    if (fs_is_dir(model_path)) {
        char p[4200];
        snprintf(p, sizeof p, "%s/tokenizer_config.json", model_path);
        json_t *c = fs_is_file(p) ? json_load_path(p, 64u << 20, NULL) : NULL;
        int v;
        if (c && !jget_bool(c, "add_bos_token", &v)) *add_bos = v;
        if (c && !jget_bool(c, "add_eos_token", &v)) *add_eos = v;
        json_decref(c);
        /* a post-processor that adds the token states it too */
        if (*add_bos < 0 && tok_add_bos(t)) *add_bos = 1;
        if (*add_eos < 0 && tok_add_eos(t)) *add_eos = 1;
    } else {
        gguf_file *g;
        if (gguf_open(model_path, &g, NULL) == 0) {
            int id = gguf_find_key(g, "tokenizer.ggml.add_bos_token"), v;
            if (id >= 0 && !gguf_get_bool(g, id, &v, NULL)) *add_bos = v;
            id = gguf_find_key(g, "tokenizer.ggml.add_eos_token");
            if (id >= 0 && !gguf_get_bool(g, id, &v, NULL)) *add_eos = v;
            gguf_close(g);
        }
    }
    if (vocab == 49152) *add_bos = 0; /* convert_hf_to_gguf's SmolLM2 rule */
}

/* llama.cpp's defaults when the GGUF does not say: BOS for llama-bpe and
 * for `llama` (SPM) vocabularies (llama-vocab.cpp, LLAMA_VOCAB_TYPE_SPM) */
int export_llama_add_bos(int add_bos, const char *pre)
{
    return add_bos >= 0 ? add_bos : !strcmp(pre, "llama-bpe") || !strcmp(pre, "default");
}
