/* dataset — see dataset.h. */
#include "tokens/dataset.h"

#include "tokens/tcache.h"

#include <stdlib.h>
#include <string.h>

#include "util/hash.h"
#include "vision/mrope.h"
#include "util/rng.h"
#include "util/str.h"

/* ---- growable item/token storage ------------------------------------------ */

static int reserve_tok(dataset *d, int64_t extra)
{
    if (d->n_tok + extra <= d->cap_tok) return 0;
    int64_t cap = d->cap_tok ? d->cap_tok : 4096;
    while (cap < d->n_tok + extra) cap *= 2;
    int32_t *a = realloc(d->tok, (size_t)cap * sizeof *a);
    if (!a) return -1;
    d->tok = a;
    int32_t *b = realloc(d->tgt, (size_t)cap * sizeof *b);
    if (!b) return -1;
    d->tgt = b;
    d->cap_tok = cap;
    return 0;
}

static ds_item *new_item(dataset *d)
{
    if (d->n_items == d->cap_items) {
        int cap = d->cap_items ? d->cap_items * 2 : 256;
        ds_item *a = realloc(d->items, (size_t)cap * sizeof *a);
        if (!a) return NULL;
        d->items = a;
        d->cap_items = cap;
    }
    ds_item *it = &d->items[d->n_items++];
    memset(it, 0, sizeof *it);
    return it;
}

int dataset_is_val(uint64_t seed, const char *sid, int row, double frac)
{
    char buf[128];
    int n = snprintf(buf, sizeof buf, "%llu%c%s%c%d", (unsigned long long)seed, 0, sid, 0, row);
    unsigned char h[32];
    sha256(buf, (size_t)n, h);
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = v << 8 | h[i];
    /* int(0.1 * 2**64) in Python is computed in double, then made exact. */
    double lim = frac * 18446744073709551616.0;
    if (lim >= 18446744073709551615.0) return 1;
    return v < (uint64_t)lim;
}

int dataset_row_copies(uint64_t seed, const char *sid, double w)
{
    if (!(w > 0.0)) return 0;
    if (w > 1e6) w = 1e6;   /* a row a million times is already absurd; keep the count an int */
    int whole = (int)w;
    double frac = w - (double)whole;
    if (frac > 0.0) {
        char buf[128];
        int n = snprintf(buf, sizeof buf, "%llu:%s", (unsigned long long)seed, sid);
        unsigned char h[8];
        blake2b_n(h, 8, buf, (size_t)n);
        uint64_t v = 0;
        for (int i = 0; i < 8; i++) v = v << 8 | h[i];
        /* Python: int / float converts the int to the nearest double */
        if ((double)v / 18446744073709551616.0 < frac) whole++;
    }
    return whole;
}

/* A row: tokens t[0..n) with per-token "is a loss target" flags. Windows of
 * at most L inputs: window k predicts t[kL+1 .. kL+L] from t[kL .. kL+L-1]. */
static int add_row(dataset *d, const int32_t *t, const uint8_t *train, int n, int L, const char *sid,
                   int row, int val, int replay)
{
    if (n < 2) return 0;
    int windows = 0;
    for (int s = 0; s < n - 1; s += L) {
        int len = n - 1 - s < L ? n - 1 - s : L;
        int nl = 0;
        for (int i = 0; i < len; i++) nl += train[s + i + 1] != 0;
        if (!nl) { d->n_dropped++; continue; }   /* nothing to learn here (all prompt) */
        if (reserve_tok(d, len)) return -1;
        ds_item *it = new_item(d);
        if (!it) return -1;
        it->off = d->n_tok;
        it->len = len;
        it->n_loss = nl;
        memcpy(it->sid, sid, 17);
        it->row = row;
        it->val = (uint8_t)val;
        it->replay = (uint8_t)replay;
        for (int i = 0; i < len; i++) {
            d->tok[d->n_tok + i] = t[s + i];
            d->tgt[d->n_tok + i] = train[s + i + 1] ? t[s + i + 1] : -1;
        }
        d->n_tok += len;
        if (len > d->max_len) d->max_len = len;
        windows++;
    }
    if (windows > 1) d->n_windows_split++;
    return 0;
}

/* Python's str.strip() on ASCII whitespace (and the C1/NBSP forms UTF-8
 * text commonly carries are left alone: they are content). */
static void strip(const char *s, size_t n, size_t *b, size_t *e)
{
    size_t i = 0, j = n;
    while (i < j && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r' || s[i] == '\v' || s[i] == '\f')) i++;
    while (j > i && (s[j - 1] == ' ' || s[j - 1] == '\t' || s[j - 1] == '\n' || s[j - 1] == '\r' || s[j - 1] == '\v' || s[j - 1] == '\f')) j--;
    *b = i;
    *e = j;
}

typedef struct rowbuf { tok_ids ids; uint8_t *train; size_t cap; } rowbuf;

static int rb_mark(rowbuf *r, size_t from, uint8_t v)
{
    if (r->ids.n > r->cap) {
        size_t cap = r->cap ? r->cap : 1024;
        while (cap < r->ids.n) cap *= 2;
        uint8_t *t = realloc(r->train, cap);
        if (!t) return -1;
        r->train = t;
        r->cap = cap;
    }
    memset(r->train + from, v, r->ids.n - from);
    return 0;
}

static int encode_seg(tok *t, rowbuf *r, const char *s, size_t n, uint8_t train, dlm_err *e)
{
    size_t from = r->ids.n;
    if (n && tok_encode_append(t, s, n, TOK_PARSE_SPECIAL, &r->ids, e)) return -1;
    return rb_mark(r, from, train) ? err_set(e, "MemoryError", "out of memory") : 0;
}

static int push_id(rowbuf *r, int32_t id, uint8_t train)
{
    if (r->ids.n == r->ids.cap) {
        size_t cap = r->ids.cap ? r->ids.cap * 2 : 256;
        int32_t *v = realloc(r->ids.v, cap * sizeof *v);
        if (!v) return -1;
        r->ids.v = v;
        r->ids.cap = cap;
    }
    r->ids.v[r->ids.n++] = id;
    return rb_mark(r, r->ids.n - 1, train);
}

/* ---- the tokenization cache (tokens/tcache.h) -------------------------------
 * A section's rows come from the cache when its key is there (the same
 * tokens a miss computes, so the dataset and the adapter do not change);
 * a miss tokenizes as usual and keeps the rows for tcache_put. */
typedef struct cached {
    char key[65];
    tcache_row *rows;
    int n_rows, hit;
} cached;

/* 1 hit (cr->rows filled), 0 miss (cr->rows allocated for n rows, or no
 * cache), -1 out of memory. */
static int cache_rows(const ds_opts *o, const doc_section *s, int n, cached *cr)
{
    memset(cr, 0, sizeof *cr);
    if (!o->cache || n <= 0) return 0;
    tcache_key_parts kp = {.tokenizer_sha256 = o->tok_sha256, .dialect = o->dialect_name,
                           .system_prompt = o->system_prompt, .loss_on_all = o->loss_on_all, .seq_len = o->seq_len};
    tcache_key(&kp, s->type, s->content, s->content_len, cr->key);
    tcache_row *rows = NULL;
    int nr = 0;
    if (tcache_get(o->cache, cr->key, &rows, &nr) && nr == n) {
        cr->rows = rows;
        cr->n_rows = nr;
        cr->hit = 1;
        return 1;
    }
    if (rows) tcache_rows_free(rows, nr);
    cr->rows = calloc((size_t)n, sizeof *cr->rows);
    cr->n_rows = n;
    return cr->rows ? 0 : -1;
}

static int cache_keep(cached *cr, int k, const rowbuf *rb)
{
    if (!cr->rows || cr->hit) return 0;
    tcache_row *r = &cr->rows[k];
    r->n = (int32_t)rb->ids.n;
    r->ids = malloc(rb->ids.n * sizeof(int32_t) + 1);
    r->mask = malloc(rb->ids.n + 1);
    if (!r->ids || !r->mask) return -1;
    memcpy(r->ids, rb->ids.v, rb->ids.n * sizeof(int32_t));
    memcpy(r->mask, rb->train, rb->ids.n);
    return 0;
}

static int cache_done(const ds_opts *o, cached *cr, dlm_err *e)
{
    int rc = 0;
    if (cr->rows && !cr->hit) rc = tcache_put(o->cache, cr->key, cr->rows, cr->n_rows, e);
    if (cr->rows) tcache_rows_free(cr->rows, cr->n_rows);
    memset(cr, 0, sizeof *cr);
    return rc;
}

/* An audio section's row (dataset.h): one item, never windowed. */
static int audio_row(dataset *d, const dlm_doc *doc, const doc_section *s, int i, tok *t, const ds_opts *o, rowbuf *rb,
                     int32_t emb_off, dlm_err *e)
{
    int n = o->audio_ntok[i];
    const char *tr = s->media_transcript ? s->media_transcript : "";
    size_t b, en;
    strip(tr, strlen(tr), &b, &en);
    if (n < 1 || b == en) {
        err_at(e, "AudioError", doc_path(doc), s->line, 1, "audio '%s' has %s", s->media_path,
               b == en ? "an empty transcript" : "no audio tokens");
        return err_hint(e, "the transcript is what trains; write what is said");
    }
    rb->ids.n = 0;
    for (int k = 0; k < n; k++)
        if (push_id(rb, o->audio_token, 0)) return err_set(e, "MemoryError", "out of memory");
    /* "\n" + transcript in one piece, as the processor tokenizes the text
     * after the placeholder; the loss starts after the tokens of "\n" */
    tok_ids nl = {0};
    if (tok_encode_append(t, "\n", 1, TOK_PARSE_SPECIAL, &nl, e)) return -1;
    size_t nnl = nl.n;
    tok_ids_free(&nl);
    char *txt = malloc(en - b + 2);
    if (!txt) return err_set(e, "MemoryError", "out of memory");
    txt[0] = '\n';
    memcpy(txt + 1, tr + b, en - b);
    size_t from = rb->ids.n;
    int rc = tok_encode_append(t, txt, en - b + 1, TOK_PARSE_SPECIAL, &rb->ids, e);
    free(txt);
    if (rc || rb_mark(rb, from, 1)) return rc ? -1 : err_set(e, "MemoryError", "out of memory");
    for (size_t k = from; k < from + nnl && k < rb->ids.n; k++) rb->train[k] = 0;
    int len = (int)rb->ids.n - 1;
    if (len > o->seq_len) {
        err_at(e, "AudioError", doc_path(doc), s->line, 1,
               "audio '%s': its %d audio tokens and transcript make %d tokens, more than training.sequence_len %d",
               s->media_path, n, len + 1, o->seq_len);
        return err_hint(e, "raise training.sequence_len (a 30 s clip alone is 750 tokens), or shorten the clip");
    }
    int val = dataset_is_val(o->seed, s->id, 0, o->val_frac < 0 ? DS_VAL_FRAC : o->val_frac);
    int before = d->n_items;
    if (add_row(d, rb->ids.v, rb->train, (int)rb->ids.n, o->seq_len, s->id, 0, val, 0))
        return err_set(e, "MemoryError", "out of memory");
    if (d->n_items > before) {
        d->items[before].emb_off = emb_off;
        d->items[before].n_emb = n;
    }
    d->rows_prose++;   /* a text row for the split and the CPT fraction */
    if (val) d->val_text_rows++; else d->train_text_rows++;
    d->rows_audio++;
    return 0;
}

static int find_image(const ds_vl *vl, const doc_section *s, dlm_err *e)
{
    int k = 0;
    while (k < vl->n_images && strcmp(vl->images[k].sha, s->media_blob_sha)) k++;
    if (k == vl->n_images)
        return err_set(e, "DatasetError", "image section '%s' has no prepared image (blob %.12s)", s->media_path,
                       s->media_blob_sha);
    return k;
}

/* rb's one image token (the rendered text's) becomes the image's n_tok
 * tokens, without a loss; -1 when there is not exactly one */
static int expand_image(rowbuf *rb, int32_t image_id, int n_tok)
{
    size_t at = rb->ids.n, cnt = 0;
    for (size_t i = 0; i < rb->ids.n; i++)
        if (rb->ids.v[i] == image_id) { at = i; cnt++; }
    if (cnt != 1) return -1;
    size_t n = rb->ids.n, tail = n - at - 1;
    for (int i = 1; i < n_tok; i++)
        if (push_id(rb, image_id, 0)) return -1;
    memmove(rb->ids.v + at + n_tok, rb->ids.v + at + 1, tail * sizeof(int32_t));
    memmove(rb->train + at + n_tok, rb->train + at + 1, tail);
    for (int i = 0; i < n_tok; i++) {
        rb->ids.v[at + i] = image_id;
        rb->train[at + i] = 0;
    }
    return 0;
}

/* PaliGemma's Q/A about image k: PaliGemmaProcessor(images, text=question,
 * suffix=answer): the image's tokens, <bos>, the question, "\n" (the
 * prefix-LM block, no loss), then answer + EOS (the loss); no chat
 * template (PaliGemma has none). */
static int add_image_qa_pali(dataset *d, const doc_section *s, const doc_section *im, int k, int replay, tok *t,
                             const ds_opts *o, rowbuf *rb, dlm_err *e)
{
    const ds_vl *vl = o->vl;
    if (tok_bos(t) < 0) return err_set(e, "DatasetError", "the tokenizer has no <bos> token, which PaliGemma's rows need");
    for (int p = 0; p < s->n_pairs; p++) {
        int val = !replay && dataset_is_val(o->seed, s->id, p, o->val_frac < 0 ? DS_VAL_FRAC : o->val_frac);
        rb->ids.n = 0;
        for (int i = 0; i < vl->images[k].n_tok; i++)
            if (push_id(rb, vl->image_id, 0)) return err_set(e, "MemoryError", "out of memory");
        if (push_id(rb, tok_bos(t), 0)) return err_set(e, "MemoryError", "out of memory");
        const char *q = s->pairs[p].question, *a = s->pairs[p].answer;
        if (encode_seg(t, rb, q, strlen(q), 0, e) || encode_seg(t, rb, "\n", 1, 0, e)) return -1;
        int prefix = (int)rb->ids.n;
        if (encode_seg(t, rb, a, strlen(a), 1, e)) return -1;
        if (tok_eos(t) >= 0 && push_id(rb, tok_eos(t), 1)) return err_set(e, "MemoryError", "out of memory");
        int n = (int)rb->ids.n;
        if (n - 1 > o->seq_len || n - 1 > DS_IMAGE_ROW_MAX) {
            err_set(e, "DatasetError", "a Q/A about image '%s' needs %d tokens (%d for the image), more than "
                    "sequence_len %d", im->media_path, n - 1, vl->images[k].n_tok, o->seq_len);
            return err_hint(e, "raise training.sequence_len (a row with an image is never cut)");
        }
        int before = d->n_items;
        if (add_row(d, rb->ids.v, rb->train, n, o->seq_len, s->id, p, val, replay))
            return err_set(e, "MemoryError", "out of memory");
        if (d->n_items > before) {
            d->items[before].image = k + 1;
            d->items[before].prefix = prefix;
        }
        if (replay) d->rows_replay++; else d->rows_instr++;
        d->rows_image_qa++;
        if (val) d->val_msg_rows++; else d->train_msg_rows++;
    }
    return 0;
}

/* The Q/A pairs of an instruction section that follows image section im
 * (dataset.h): the user turn is the image then the question. */
static int add_image_qa(dataset *d, const doc_section *s, const doc_section *im, int replay, tok *t,
                        const chat_dialect *dialect, const ds_opts *o, rowbuf *rb, strbuf *sb, dlm_err *e)
{
    const ds_vl *vl = o->vl;
    int k = find_image(vl, im, e);
    if (k < 0) return -1;
    if (vl->prefix_lm) return add_image_qa_pali(d, s, im, k, replay, t, o, rb, e);
    size_t l0, l1, l2;
    const char *t0 = tok_token_bytes(t, vl->vision_start_id, &l0), *t1 = tok_token_bytes(t, vl->image_id, &l1),
               *t2 = tok_token_bytes(t, vl->vision_end_id, &l2);
    if (!t0 || !t1 || !t2) return err_set(e, "DatasetError", "the tokenizer has no text for the vision tokens");
    strbuf q = STRBUF_INIT;
    int rc = -1;
    for (int p = 0; p < s->n_pairs; p++) {
        int val = !replay && dataset_is_val(o->seed, s->id, p, o->val_frac < 0 ? DS_VAL_FRAC : o->val_frac);
        sb_reset(&q);
        sb_append(&q, t0, l0);
        sb_append(&q, t1, l1);
        sb_append(&q, t2, l2);
        sb_puts(&q, s->pairs[p].question);
        if (q.oom) { err_set(e, "MemoryError", "out of memory"); goto out; }
        chat_msg msgs[2] = {{"user", q.buf}, {"assistant", s->pairs[p].answer}};
        chat_span span;
        size_t nsp = 0;
        sb_reset(sb);
        if (chat_render(dialect, o->system_prompt, msgs, 2, 0, sb, &span, &nsp, e)) goto out;
        if (nsp != 1) { err_set(e, "DatasetError", "chat template gave no assistant turn"); goto out; }
        rb->ids.n = 0;
        uint8_t all = o->loss_on_all ? 1 : 0;
        if (encode_seg(t, rb, sb->buf, span.start, all, e) ||
            encode_seg(t, rb, sb->buf + span.start, span.turn_end - span.start, 1, e) ||
            encode_seg(t, rb, sb->buf + span.turn_end, sb->len - span.turn_end, all, e))
            goto out;
        if (expand_image(rb, vl->image_id, vl->images[k].n_tok)) {
            err_set(e, "DatasetError", "the Q/A about image '%s' does not render its image token once (section line %d)",
                    im->media_path, s->line);
            goto out;
        }
        int n = (int)rb->ids.n;
        if (n - 1 > o->seq_len || n - 1 > DS_IMAGE_ROW_MAX) {
            err_set(e, "DatasetError", "a Q/A about image '%s' needs %d tokens (%d for the image), more than "
                    "sequence_len %d", im->media_path, n - 1, vl->images[k].n_tok, o->seq_len);
            err_hint(e, "raise training.sequence_len (a row with an image is never cut)");
            goto out;
        }
        int before = d->n_items;
        if (add_row(d, rb->ids.v, rb->train, n, o->seq_len, s->id, p, val, replay)) {
            err_set(e, "MemoryError", "out of memory");
            goto out;
        }
        if (d->n_items > before) d->items[before].image = k + 1;
        if (replay) d->rows_replay++; else d->rows_instr++;
        d->rows_image_qa++;
        if (val) d->val_msg_rows++; else d->train_msg_rows++;
    }
    rc = 0;
out:
    sb_free(&q);
    return rc;
}

/* An image section's row (dataset.h): its grid from o->vl by blob. */
static int add_image(dataset *d, const doc_section *s, int replay, tok *t, const ds_opts *o, rowbuf *rb, dlm_err *e)
{
    const ds_vl *vl = o->vl;
    int k = find_image(vl, s, e);
    if (k < 0) return -1;
    rb->ids.n = 0;
    for (int i = 0; i < vl->images[k].n_tok; i++)
        if (push_id(rb, vl->image_id, 0)) return err_set(e, "MemoryError", "out of memory");
    size_t b, en;
    strip(s->content, s->content_len, &b, &en);
    int prefix = 0;
    if (vl->prefix_lm) {
        /* PaliGemma: <bos> "\n" close the prefix; the caption is the suffix */
        if (tok_bos(t) < 0)
            return err_set(e, "DatasetError", "the tokenizer has no <bos> token, which PaliGemma's rows need");
        if (push_id(rb, tok_bos(t), 0)) return err_set(e, "MemoryError", "out of memory");
        if (encode_seg(t, rb, "\n", 1, 0, e)) return -1;
        prefix = (int)rb->ids.n;
        if (encode_seg(t, rb, s->content + b, en - b, 1, e)) return -1;
        goto eos;
    }
    /* "\n" + caption, encoded as one text (the original's f"{image_token}\n{caption}") */
    char *cap = malloc(en - b + 2);
    if (!cap) return err_set(e, "MemoryError", "out of memory");
    cap[0] = '\n';
    memcpy(cap + 1, s->content + b, en - b);
    int rc = encode_seg(t, rb, cap, en - b + 1, 1, e);
    free(cap);
    if (rc) return -1;
eos:
    if (tok_eos(t) >= 0 && push_id(rb, tok_eos(t), 1)) return err_set(e, "MemoryError", "out of memory");
    int n = (int)rb->ids.n;
    if (n - 1 > o->seq_len || n - 1 > DS_IMAGE_ROW_MAX) {
        err_set(e, "DatasetError", "image section '%s' needs %d tokens (%d for the image), more than sequence_len %d",
                s->media_path, n - 1, vl->images[k].n_tok, o->seq_len);
        return err_hint(e, "raise training.sequence_len (an image row is never cut: its tokens belong to the image)");
    }
    int val = !replay && dataset_is_val(o->seed, s->id, 0, o->val_frac < 0 ? DS_VAL_FRAC : o->val_frac);
    int before = d->n_items;
    if (add_row(d, rb->ids.v, rb->train, n, o->seq_len, s->id, 0, val, replay))
        return err_set(e, "MemoryError", "out of memory");
    if (d->n_items > before) {
        d->items[before].image = k + 1;
        d->items[before].prefix = prefix;
    }
    d->rows_image++;
    if (val) d->val_text_rows++; else d->train_text_rows++;
    return 0;
}

static int add_sections(dataset *d, const dlm_doc *doc, int replay, tok *t, const chat_dialect *dialect,
                        const ds_opts *o, rowbuf *rb, strbuf *sb, dlm_err *e)
{
    int L = o->seq_len;
    int32_t emb_off = 0;
    cached cr = {.rows = NULL};
    for (int i = 0; i < doc_nsections(doc); i++) {
        const doc_section *s = doc_section_at(doc, i);
        switch (s->type) {
        case DOC_PROSE: {
            size_t b, en;
            strip(s->content, s->content_len, &b, &en);
            if (b == en) break;
            /* tag weights (sections from training.sources): the row repeated
             * floor(w) times, once more by the seeded coin; each copy is a
             * row of its own for the split (sub_index 0, 1, ...) */
            int copies = s->source_file ? dataset_row_copies(o->seed, s->id, s->source_weight) : 1;
            if (copies != 1) {
                if (copies == 0) d->rows_weight_dropped++;
                else d->rows_weight_extra += copies - 1;
            }
            if (copies == 0) break;
            int hit = cache_rows(o, s, 1, &cr);
            if (hit < 0) goto oom;
            if (!hit) {
                rb->ids.n = 0;
                if (tok_add_bos(t) && tok_bos(t) >= 0 && push_id(rb, tok_bos(t), 1)) goto oom;
                if (encode_seg(t, rb, s->content + b, en - b, 1, e)) goto fail;
                if (tok_eos(t) >= 0 && push_id(rb, tok_eos(t), 1)) goto oom;
                if (cache_keep(&cr, 0, rb)) goto oom;
            }
            const int32_t *ids = hit ? cr.rows[0].ids : rb->ids.v;
            const uint8_t *mask = hit ? cr.rows[0].mask : rb->train;
            int n = hit ? cr.rows[0].n : (int)rb->ids.n;
            for (int k = 0; k < copies; k++) {
                int val = !replay && dataset_is_val(o->seed, s->id, k, o->val_frac < 0 ? DS_VAL_FRAC : o->val_frac);
                if (add_row(d, ids, mask, n, L, s->id, k, val, replay)) goto oom;
                if (replay) d->rows_replay++; else d->rows_prose++;
                if (val) d->val_text_rows++; else d->train_text_rows++;
            }
            if (cache_done(o, &cr, e)) return -1;
            break;
        }
        case DOC_INSTRUCTION: {
            const doc_section *prev = i > 0 ? doc_section_at(doc, i - 1) : NULL;
            if (o->vl && prev && prev->type == DOC_IMAGE) {   /* Q/A about the image before it */
                if (add_image_qa(d, s, prev, replay, t, dialect, o, rb, sb, e)) goto fail;
                break;
            }
            int hit = cache_rows(o, s, s->n_pairs, &cr);
            if (hit < 0) goto oom;
            for (int k = 0; k < s->n_pairs; k++) {
                int val = !replay && dataset_is_val(o->seed, s->id, k, o->val_frac < 0 ? DS_VAL_FRAC : o->val_frac);
                if (val) d->val_msg_rows++; else d->train_msg_rows++;
                if (hit) {
                    if (add_row(d, cr.rows[k].ids, cr.rows[k].mask, cr.rows[k].n, L, s->id, k, val, replay)) goto oom;
                    if (replay) d->rows_replay++; else d->rows_instr++;
                    continue;
                }
                chat_msg msgs[2] = {{"user", s->pairs[k].question}, {"assistant", s->pairs[k].answer}};
                chat_span span;
                size_t nsp = 0;
                sb_reset(sb);
                if (chat_render(dialect, o->system_prompt, msgs, 2, 0, sb, &span, &nsp, e)) goto fail;
                if (nsp != 1) {
                    err_set(e, "DatasetError", "chat template gave no assistant turn");
                    goto fail;
                }
                rb->ids.n = 0;
                uint8_t all = o->loss_on_all ? 1 : 0;
                /* Three segments, cut right after the generation prompt and
                 * after the end-of-turn token: the same tokens a
                 * prompt/completion tokenization gives. */
                if (encode_seg(t, rb, sb->buf, span.start, all, e) ||
                    encode_seg(t, rb, sb->buf + span.start, span.turn_end - span.start, 1, e) ||
                    encode_seg(t, rb, sb->buf + span.turn_end, sb->len - span.turn_end, all, e))
                    goto fail;
                if (add_row(d, rb->ids.v, rb->train, (int)rb->ids.n, L, s->id, k, val, replay)) goto oom;
                if (replay) d->rows_replay++; else d->rows_instr++;
                if (cache_keep(&cr, k, rb)) goto oom;
            }
            if (cache_done(o, &cr, e)) return -1;
            break;
        }
        case DOC_PREFERENCE:
            if (o->no_mined && s->auto_mined) break;   /* train --no-mined */
            if (!replay) d->n_pref_triples += s->n_triples;
            break;
        case DOC_IMAGE:
            if (!o->vl) goto refuse;
            if (add_image(d, s, replay, t, o, rb, e)) goto fail;
            break;
        case DOC_AUDIO:
            if (o->audio_ntok && !replay) {
                if (audio_row(d, doc, s, i, t, o, rb, emb_off, e)) goto fail;
                emb_off += o->audio_ntok[i];
                break;
            }
            if (replay) break;   /* a replayed clip's rows are not in this run's table */
        refuse:
            err_at(e, "ModalityError", doc_path(doc), s->line, 1, "%s sections cannot be trained on this base%s",
                   doc_section_type_name(s->type), s->type == DOC_IMAGE ? " (images train on a Qwen2-VL base)"
                                                                        : " (audio trains on a Qwen2-Audio base)");
            return err_hint(e, "remove the section or move its content into prose");
        }
    }
    return 0;
oom:
    err_set(e, "MemoryError", "out of memory building the dataset");
fail:
    if (cr.rows) tcache_rows_free(cr.rows, cr.n_rows);
    return -1;
}

/* ---- multi-turn rows ----------------------------------------------------------
 * A chat client sends the whole conversation back each turn; a model trained
 * only on single-turn rows has never seen a question after earlier answers
 * and answers it worse there (issue 30). Each training pair therefore also
 * appears as the last turn of o->multi_turn conversations: row r of pair i
 * puts 1 + (i + r) % 3 earlier turns before it (so one row per pair asks
 * the pairs as turn 2, 3, 4, 2, ... in document order, and three rows ask
 * each pair as turns 2, 3 and 4), each one of the
 * document's other training pairs drawn by Philox from (seed, pair, r, turn),
 * with replacement (a short document repeats pairs, as a user asking again
 * does). The loss is on the last answer only: the earlier answers are what a
 * client sends back, not targets (each answer stays the target of 1 +
 * multi_turn rows, whatever the other pairs). A conversation longer than
 * sequence_len loses its oldest turns until it fits; none is dropped into
 * windows that would cut the question from its answer. Validation pairs get
 * no conversation rows and are never drawn as earlier turns, so the
 * validation loss and the split are what they are without multi_turn. */

typedef struct qa_ref { const doc_qa *p; const char *sid; int row; } qa_ref;

static int conv_row(dataset *d, tok *t, const chat_dialect *dialect, const ds_opts *o, const qa_ref *pool,
                    const int *ctx, int n_ctx, const qa_ref *q, rowbuf *rb, strbuf *sb, dlm_err *e)
{
    chat_msg msgs[2 * 4 + 2];
    chat_span spans[8];
    for (int drop = 0; drop < n_ctx; drop++) {
        size_t n = 0, nsp = 0;
        for (int m = drop; m < n_ctx; m++) {
            msgs[n++] = (chat_msg){"user", pool[ctx[m]].p->question};
            msgs[n++] = (chat_msg){"assistant", pool[ctx[m]].p->answer};
        }
        msgs[n++] = (chat_msg){"user", q->p->question};
        msgs[n++] = (chat_msg){"assistant", q->p->answer};
        sb_reset(sb);
        if (chat_render(dialect, o->system_prompt, msgs, n, 0, sb, spans, &nsp, e)) return -1;
        if (nsp != n / 2) return err_set(e, "DatasetError", "chat template gave %zu assistant turns for %zu", nsp, n / 2);
        const chat_span *last = &spans[nsp - 1];
        rb->ids.n = 0;
        uint8_t all = o->loss_on_all ? 1 : 0;
        if (encode_seg(t, rb, sb->buf, last->start, all, e) ||
            encode_seg(t, rb, sb->buf + last->start, last->turn_end - last->start, 1, e) ||
            encode_seg(t, rb, sb->buf + last->turn_end, sb->len - last->turn_end, all, e))
            return -1;
        if ((int)rb->ids.n - 1 > o->seq_len) continue;   /* too long: one earlier turn less */
        if (add_row(d, rb->ids.v, rb->train, (int)rb->ids.n, o->seq_len, q->sid, q->row, 0, 0))
            return err_set(e, "MemoryError", "out of memory building the dataset");
        d->rows_conv++;
        d->rows_conv_short += drop > 0;
        return 0;
    }
    return 0;   /* not even one earlier turn fits: the single-turn row stands alone */
}

/* Section i is a Q/A about the image before it (add_image_qa). */
static int about_image(const dlm_doc *doc, int i, const ds_opts *o)
{
    return o->vl && i > 0 && doc_section_at(doc, i - 1)->type == DOC_IMAGE;
}

static int add_conversations(dataset *d, const dlm_doc *doc, tok *t, const chat_dialect *dialect, const ds_opts *o,
                             rowbuf *rb, strbuf *sb, dlm_err *e)
{
    int n = 0;
    for (int i = 0; i < doc_nsections(doc); i++) {
        const doc_section *s = doc_section_at(doc, i);
        if (s->type == DOC_INSTRUCTION && !about_image(doc, i, o)) n += s->n_pairs;
    }
    if (n < 2) return 0;
    /* the split dataset_build decides: with training.val_frac null a small
     * document holds nothing out, a larger one DS_VAL_FRAC (rows counted
     * so far are this document's own; replay comes after) */
    double frac = o->val_frac >= 0 ? o->val_frac
                  : d->rows_prose + d->rows_instr < DS_VAL_MIN_ROWS ? 0 : DS_VAL_FRAC;
    qa_ref *pool = malloc((size_t)n * sizeof *pool);
    if (!pool) return err_set(e, "MemoryError", "out of memory");
    int np = 0;
    for (int i = 0; i < doc_nsections(doc); i++) {
        const doc_section *s = doc_section_at(doc, i);
        if (s->type != DOC_INSTRUCTION || about_image(doc, i, o)) continue;
        for (int k = 0; k < s->n_pairs; k++)
            if (!dataset_is_val(o->seed, s->id, k, frac)) pool[np++] = (qa_ref){&s->pairs[k], s->id, k};
    }
    int rc = 0;
    for (int i = 0; i < np && np >= 2 && !rc; i++)
        for (int r = 0; r < o->multi_turn && !rc; r++) {
            int ctx[3], n_ctx = 1 + (i + r) % 3;
            for (int m = 0; m < n_ctx; m++) {
                /* one of the np - 1 other pairs */
                int j = (int)(rng_u64(o->seed, RNG_CONVERSATION, (uint64_t)i, (uint64_t)r * 8 + (uint64_t)m) %
                              (uint64_t)(np - 1));
                ctx[m] = j < i ? j : j + 1;
            }
            rc = conv_row(d, t, dialect, o, pool, ctx, n_ctx, &pool[i], rb, sb, e);
        }
    free(pool);
    return rc;
}

int dataset_build(const dlm_doc *doc, const dlm_doc *replay, tok *t, const chat_dialect *dialect,
                  const ds_opts *o, dataset **out, dlm_err *e)
{
    *out = NULL;
    dataset *d = calloc(1, sizeof *d);
    if (!d) return err_set(e, "MemoryError", "out of memory");
    d->vl = o->vl;
    rowbuf rb = {{0}, NULL, 0};
    strbuf sb = STRBUF_INIT;
    int rc = add_sections(d, doc, 0, t, dialect, o, &rb, &sb, e);
    if (!rc && o->multi_turn > 0) rc = add_conversations(d, doc, t, dialect, o, &rb, &sb, e);
    if (!rc && replay) rc = add_sections(d, replay, 1, t, dialect, o, &rb, &sb, e);
    tok_ids_free(&rb.ids);
    free(rb.train);
    sb_free(&sb);
    if (rc) { dataset_free(d); return -1; }
    if (d->rows_weight_dropped && !d->rows_prose && !d->rows_instr && !d->rows_replay && !d->n_pref_triples &&
        !d->rows_image) {
        dataset_free(d);
        err_set(e, "DatasetError", "weights dropped every row");
        return err_hint(e, "check the `weights` of the .dlm/training.yaml files for zeros across all tag values");
    }
    d->val_frac = o->val_frac < 0 ? DS_VAL_FRAC : o->val_frac;
    if (o->val_frac < 0 && d->rows_prose + d->rows_instr + d->rows_image < DS_VAL_MIN_ROWS) {
        /* auto and a small document: every row trains (dataset.h) */
        for (int i = 0; i < d->n_items; i++) d->items[i].val = 0;
        d->train_text_rows += d->val_text_rows;
        d->train_msg_rows += d->val_msg_rows;
        d->val_text_rows = d->val_msg_rows = 0;
        d->val_frac = 0;
        d->val_off_small = 1;
    }
    d->train = malloc((size_t)(d->n_items + 1) * sizeof(int));
    d->val = malloc((size_t)(d->n_items + 1) * sizeof(int));
    d->perm = malloc((size_t)(d->n_items + 1) * sizeof(int));
    d->perm_epoch = -1;
    if (!d->train || !d->val || !d->perm) { dataset_free(d); return err_set(e, "MemoryError", "out of memory"); }
    for (int i = 0; i < d->n_items; i++) {
        if (d->items[i].val) { d->val[d->n_val++] = i; d->val_loss_tokens += d->items[i].n_loss; }
        else { d->train[d->n_train++] = i; d->train_loss_tokens += d->items[i].n_loss; }
    }
    if (d->n_train == 0 && d->n_val > 0) {
        /* A tiny document whose every row hashed into validation: train on
         * them instead of on nothing, and skip evaluation. */
        for (int i = 0; i < d->n_val; i++) { d->train[i] = d->val[i]; d->items[d->val[i]].val = 0; }
        d->n_train = d->n_val;
        d->train_loss_tokens = d->val_loss_tokens;
        d->train_text_rows += d->val_text_rows;
        d->train_msg_rows += d->val_msg_rows;
        d->val_text_rows = d->val_msg_rows = 0;
        d->n_val = 0;
        d->val_loss_tokens = 0;
        d->val_all_in = 1;
    }
    int32_t pad = tok_pad(t);
    if (pad < 0 || pad == tok_eos(t)) pad = tok_unk(t);
    if (pad < 0 || pad == tok_eos(t)) pad = 0;
    d->pad_id = pad;
    *out = d;
    return 0;
}

void dataset_free(dataset *d)
{
    if (!d) return;
    free(d->tok);
    free(d->tgt);
    free(d->items);
    free(d->train);
    free(d->val);
    free(d->perm);
    free(d);
}

/* ---- batching ----------------------------------------------------------------- */

int dataset_steps_per_epoch(const dataset *d, int mb, int ga)
{
    int per = mb * ga;
    return per > 0 ? (d->n_train + per - 1) / per : 0;
}

/* Epoch e's order: a Fisher–Yates shuffle keyed by (seed, e), rebuilt in the
 * buffer allocated at build time whenever the epoch changes (no allocation
 * in the step loop). */
int dataset_micro_items(dataset *d, uint64_t seed, int epoch, int step, int micro, int mb, int ga, int *out)
{
    int n = d->n_train, *perm = d->perm;
    if (d->perm_epoch != epoch || d->perm_seed != seed) {
        for (int i = 0; i < n; i++) perm[i] = d->train[i];
        for (int i = n - 1; i > 0; i--) {
            int j = (int)(rng_u64(seed, RNG_SHUFFLE, (uint64_t)epoch, (uint64_t)i) % (uint64_t)(i + 1));
            int tmp = perm[i]; perm[i] = perm[j]; perm[j] = tmp;
        }
        d->perm_epoch = epoch;
        d->perm_seed = seed;
    }
    int from = step * mb * ga + micro * mb, cnt = 0;
    for (int i = from; i < from + mb && i < n; i++) out[cnt++] = perm[i];
    return cnt;
}

int dataset_fill(const dataset *d, const int *items, int n, int packing, int B_cap, int T_cap,
                 int32_t *toks, int32_t *tgts, int32_t *pos, int32_t *seg, token_batch *b, int64_t *n_loss)
{
    int fill[256], nb = 0, T = 0;
    if (B_cap > 256) B_cap = 256;
    /* Assign items to sequences: first fit (packing) or one each. */
    int where[256], start[256];
    uint8_t solo[256];   /* a PaliGemma image row: alone in its row (its prefix is the row's, dataset.h) */
    for (int i = 0; i < n && i < 256; i++) {
        int len = d->items[items[i]].len, k = -1;
        int own = d->vl && d->vl->prefix_lm && d->items[items[i]].image;
        if (packing && !own)
            for (int j = 0; j < nb; j++)
                if (!solo[j] && fill[j] + len <= T_cap) { k = j; break; }
        if (k < 0) {
            if (nb == B_cap) return -1;
            k = nb++;
            fill[k] = 0;
            solo[k] = (uint8_t)own;
        }
        where[i] = k;
        start[i] = fill[k];
        fill[k] += len;
        if (fill[k] > T) T = fill[k];
    }
    if (T < 1) T = 1;
    for (int r = 0; r < nb; r++)
        for (int c = 0; c < T; c++) {
            size_t p = (size_t)r * T + c;
            toks[p] = d->pad_id;
            tgts[p] = -1;
            pos[p] = c;
            seg[p] = -1 - c; /* each pad position is its own segment: nothing attends to it */
        }
    int64_t nl = 0;
    for (int i = 0; i < n; i++) {
        const ds_item *it = &d->items[items[i]];
        size_t p = (size_t)where[i] * T + start[i];
        for (int k = 0; k < it->len; k++) {
            toks[p + k] = d->tok[it->off + k];
            tgts[p + k] = d->tgt[it->off + k];
            pos[p + k] = k;
            seg[p + k] = i;
        }
        nl += it->n_loss;
    }
    *b = (token_batch){.B = nb, .T = T, .tokens = toks, .targets = tgts, .pos = pos, .seg = seg};
    *n_loss = nl;
    return 0;
}

int dataset_fill_audio(const dataset *d, const int *items, int n, const float *emb,
                       int n_emb, int32_t *embed_row, token_batch *b)
{
    int any = 0;
    for (int i = 0; i < n; i++) any |= d->items[items[i]].n_emb > 0;
    if (!any) return 0;
    for (int p = 0; p < b->B * b->T; p++) embed_row[p] = -1;
    /* the same placement dataset_fill made: an item's positions are those
     * whose seg is its index i, from its start (pos 0) */
    int spliced = 0;
    for (int r = 0; r < b->B; r++)
        for (int c = 0; c < b->T; c++) {
            int p = r * b->T + c, i = b->seg[p];
            if (i < 0 || i >= n) continue;
            const ds_item *it = &d->items[items[i]];
            if (b->pos[p] < it->n_emb) {
                embed_row[p] = it->emb_off + b->pos[p];
                spliced++;
            }
        }
    b->embeds = emb;
    b->n_embeds = n_emb;
    b->embed_row = embed_row;
    return spliced;
}

int dataset_fill_vl(const dataset *d, const int *items, int n, int packing, int B_cap, int T_cap, int32_t *toks,
                    int32_t *tgts, int32_t *pos, int32_t *seg, int32_t *embed_row, int32_t *pos3, int32_t *prefix,
                    const float *feats, token_batch *b, int64_t *n_loss)
{
    if (dataset_fill(d, items, n, packing, B_cap, T_cap, toks, tgts, pos, seg, b, n_loss)) return -1;
    const ds_vl *vl = d->vl;
    if (!vl) return 0;
    int64_t N = (int64_t)b->B * b->T;
    if (vl->prefix_lm) {
        /* PaliGemma: an image item opens its row (dataset_fill); its rows
         * of features in order, its prefix; positions from 1 */
        for (int r = 0; r < b->B; r++) {
            size_t p0 = (size_t)r * b->T;
            const ds_item *it = seg[p0] >= 0 ? &d->items[items[seg[p0]]] : NULL;
            prefix[r] = it && it->image ? it->prefix : 0;
            for (int c = 0, k = 0; c < b->T; c++) {
                embed_row[p0 + c] = -1;
                if (it && it->image && c < it->len && toks[p0 + c] == vl->image_id)
                    embed_row[p0 + c] = (int32_t)(vl->images[it->image - 1].row0 + k++);
                pos[p0 + c] += 1;
            }
        }
        b->embeds = feats;
        b->embed_row = embed_row;
        b->n_embeds = (int)vl->n_rows;
        b->prefix = prefix;
        return 0;
    }
    for (int64_t i = 0; i < N; i++) {
        embed_row[i] = -1;
        for (int s = 0; s < 3; s++) pos3[s * N + i] = pos[i];
    }
    /* each image item: its rows of features, and get_rope_index's
     * positions over the item (which starts at position 0, as pos does) */
    for (int64_t i = 0; i < N;) {
        if (pos[i] != 0 || seg[i] < 0 || !d->items[items[seg[i]]].image) { i++; continue; }
        const ds_item *it = &d->items[items[seg[i]]];
        const ds_image *im = &vl->images[it->image - 1];
        static _Thread_local int32_t p3[3 * DS_IMAGE_ROW_MAX];   /* one item's [3][len], no allocation */
        int len = it->len;
        int64_t delta;
        if (len > DS_IMAGE_ROW_MAX || qwen2vl_rope_index(toks + i, len, vl->image_id, (const int (*)[3])im->grid, 1, vl->merge,
                                             p3, &delta, NULL))
            return -1;
        for (int k = 0, r = 0; k < len; k++) {
            for (int s = 0; s < 3; s++) pos3[s * N + i + k] = p3[s * len + k];
            if (toks[i + k] == vl->image_id) embed_row[i + k] = (int32_t)(im->row0 + r++);
        }
        i += len;
    }
    b->embeds = feats;
    b->embed_row = embed_row;
    b->n_embeds = (int)vl->n_rows;
    b->pos3 = pos3;
    return 0;
}

/* ---- preference pairs ------------------------------------------------------ */

static int pref_push(pref_set *p, const rowbuf *rb, int L, pref_seq *out, int *cut)
{
    int n = (int)rb->ids.n;
    if (n < 2) return 0;
    int len = n - 1 < L ? n - 1 : L;
    if (len < n - 1) *cut = 1;
    if (p->n_tok + len > p->cap_tok) {
        int64_t cap = p->cap_tok ? p->cap_tok : 4096;
        while (cap < p->n_tok + len) cap *= 2;
        int32_t *a = realloc(p->tok, (size_t)cap * sizeof *a);
        if (!a) return -1;
        p->tok = a;
        int32_t *b = realloc(p->tgt, (size_t)cap * sizeof *b);
        if (!b) return -1;
        p->tgt = b;
        p->cap_tok = cap;
    }
    int nl = 0;
    for (int i = 0; i < len; i++) {
        p->tok[p->n_tok + i] = rb->ids.v[i];
        p->tgt[p->n_tok + i] = rb->train[i + 1] ? rb->ids.v[i + 1] : -1;
        nl += rb->train[i + 1] != 0;
    }
    *out = (pref_seq){p->n_tok, len, nl};
    p->n_tok += len;
    if (len > p->max_len) p->max_len = len;
    return 0;
}

/* One (prompt, completion) sequence: the three segments cut as for Q/A
 * rows (dataset.c add_sections), the loss on the assistant turn only. */
static int pref_render(tok *t, const chat_dialect *dialect, const char *sys, const char *prompt, const char *compl,
                       rowbuf *rb, strbuf *sb, dlm_err *e)
{
    chat_msg msgs[2] = {{"user", prompt}, {"assistant", compl}};
    chat_span span;
    size_t nsp = 0;
    sb_reset(sb);
    if (chat_render(dialect, sys, msgs, 2, 0, sb, &span, &nsp, e)) return -1;
    if (nsp != 1) return err_set(e, "DatasetError", "chat template gave no assistant turn");
    rb->ids.n = 0;
    if (encode_seg(t, rb, sb->buf, span.start, 0, e) ||
        encode_seg(t, rb, sb->buf + span.start, span.turn_end - span.start, 1, e) ||
        encode_seg(t, rb, sb->buf + span.turn_end, sb->len - span.turn_end, 0, e))
        return -1;
    return 0;
}

int pref_build(const dlm_doc *doc, tok *t, const chat_dialect *dialect, const ds_opts *o, pref_set **out,
               dlm_err *e)
{
    return pref_build_replay(doc, NULL, t, dialect, o, out, e);
}

int pref_build_replay(const dlm_doc *doc0, const dlm_doc *rdoc, tok *t, const chat_dialect *dialect, const ds_opts *o,
                      pref_set **out, dlm_err *e)
{
    *out = NULL;
    pref_set *p = calloc(1, sizeof *p);
    if (!p) return err_set(e, "MemoryError", "out of memory");
    rowbuf rb = {{0}, NULL, 0};
    strbuf sb = STRBUF_INIT;
    int rc = 0, cap = 0;
    /* the document's pairs, then the replayed ones (the original
     * concatenates doc_ds and replay_ds) */
    for (int di = 0; di < 2 && !rc; di++) {
        const dlm_doc *doc = di ? rdoc : doc0;
        for (int i = 0; doc && i < doc_nsections(doc) && !rc; i++) {
            const doc_section *s = doc_section_at(doc, i);
            if (s->type != DOC_PREFERENCE) continue;
            if (o->no_mined && s->auto_mined) continue;   /* train --no-mined */
            for (int k = 0; k < s->n_triples && !rc; k++) {
                const doc_triple *tr = &s->triples[k];
                if (p->n_pairs == cap) {
                    cap = cap ? cap * 2 : 64;
                    pref_pair *a = realloc(p->pairs, (size_t)cap * sizeof *a);
                    if (!a) { rc = err_set(e, "MemoryError", "out of memory"); break; }
                    p->pairs = a;
                }
                pref_pair *pp = &p->pairs[p->n_pairs];
                memset(pp, 0, sizeof *pp);
                memcpy(pp->sid, s->id, 17);
                pp->row = k;
                int cut = 0;
                if (pref_render(t, dialect, o->system_prompt, tr->prompt, tr->chosen, &rb, &sb, e) ||
                    pref_push(p, &rb, o->seq_len, &pp->c, &cut) ||
                    pref_render(t, dialect, o->system_prompt, tr->prompt, tr->rejected, &rb, &sb, e) ||
                    pref_push(p, &rb, o->seq_len, &pp->r, &cut)) {
                    if (!e->kind[0]) err_set(e, "MemoryError", "out of memory");
                    rc = -1;
                    break;
                }
                if ((!pp->c.n_loss || !pp->r.n_loss) && di) continue;   /* a replayed pair that cannot fit: left out */
                if (!pp->c.n_loss || !pp->r.n_loss) {   /* the prompt alone fills sequence_len */
                    rc = err_at(e, "DatasetError", doc_path(doc), tr->prompt_line, 1,
                                "the preference prompt leaves no room for its completions within sequence_len %d",
                                o->seq_len);
                    err_hint(e, "shorten the prompt or raise training.sequence_len");
                    break;
                }
                p->n_truncated += cut;
                p->n_pairs++;
                if (di) p->n_replay++;
            }
        }
    }
    tok_ids_free(&rb.ids);
    free(rb.train);
    sb_free(&sb);
    p->perm = malloc((size_t)(p->n_pairs + 1) * sizeof(int));
    p->perm_epoch = -1;
    if (!rc && !p->perm) rc = err_set(e, "MemoryError", "out of memory");
    if (rc) { pref_free(p); return -1; }
    int32_t pad = tok_pad(t);
    if (pad < 0 || pad == tok_eos(t)) pad = tok_unk(t);
    if (pad < 0 || pad == tok_eos(t)) pad = 0;
    p->pad_id = pad;
    *out = p;
    return 0;
}

void pref_free(pref_set *p)
{
    if (!p) return;
    free(p->tok);
    free(p->tgt);
    free(p->pairs);
    free(p->perm);
    free(p);
}

int pref_micro_pairs(pref_set *p, uint64_t seed, int epoch, int step, int micro, int mb, int ga, int *out)
{
    int n = p->n_pairs, *perm = p->perm;
    if (p->perm_epoch != epoch || p->perm_seed != seed) {
        for (int i = 0; i < n; i++) perm[i] = i;
        for (int i = n - 1; i > 0; i--) {
            int j = (int)(rng_u64(seed, RNG_SHUFFLE, (uint64_t)epoch, (uint64_t)i) % (uint64_t)(i + 1));
            int tmp = perm[i]; perm[i] = perm[j]; perm[j] = tmp;
        }
        p->perm_epoch = epoch;
        p->perm_seed = seed;
    }
    int from = step * mb * ga + micro * mb, cnt = 0;
    for (int i = from; i < from + mb && i < n; i++) out[cnt++] = perm[i];
    return cnt;
}

void pref_fill(const pref_set *p, const int *pairs, int n, int T_cap, int32_t *toks, int32_t *tgts, int32_t *pos,
               int32_t *seg, token_batch *b)
{
    int T = 1;
    for (int i = 0; i < n; i++) {
        const pref_pair *pp = &p->pairs[pairs[i]];
        if (pp->c.len > T) T = pp->c.len;
        if (pp->r.len > T) T = pp->r.len;
    }
    if (T > T_cap) T = T_cap;
    for (int i = 0; i < 2 * n; i++) {
        const pref_pair *pp = &p->pairs[pairs[i / 2]];
        const pref_seq *s = i % 2 ? &pp->r : &pp->c;
        for (int c = 0; c < T; c++) {
            size_t q = (size_t)i * T + c;
            int in = c < s->len;
            toks[q] = in ? p->tok[s->off + c] : p->pad_id;
            tgts[q] = in ? p->tgt[s->off + c] : -1;
            pos[q] = c;
            seg[q] = in ? 0 : -1 - c;   /* each pad position is its own segment */
        }
    }
    *b = (token_batch){.B = 2 * n, .T = T, .tokens = toks, .targets = tgts, .pos = pos, .seg = seg};
}
