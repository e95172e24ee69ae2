/* tiny-recipe — builds the embedded base (models/tiny.gguf) from a recipe:
 *
 *   tiny-recipe build --recipe R.json --corpus LIST --qa QA.txt --work DIR --out OUT.gguf
 *                     [--threads N] [--from-pretrain]
 *
 * 1. the corpus documents (LIST: one path per line) split into training and
 *    held-out documents (every heldout_every-th),
 * 2. a byte-level BPE tokenizer trained on the training documents
 *    (DIR/tokenizer/tokenizer.json + tokenizer_config.json),
 * 3. full-parameter pretraining of a llama model from scratch, held-out
 *    perplexity every eval_every steps (DIR/pretrain.f32 keeps the weights;
 *    --from-pretrain starts from it and skips this stage),
 * 4. instruction tuning on the Q&A pairs rendered as ChatML (loss on the
 *    answers), mixed with corpus rows so the model keeps its prose,
 * 5. OUT.gguf (F16) and DIR/report.json (sizes, speeds, perplexities).
 *
 * A hidden build tool (not a dlm command): make-tiny.sh drives it. It
 * prints progress on stderr; the exit code is 0 on success. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf_out.h"
#include "kern/kern.h"
#include "recipe.h"
#include "util/fs.h"
#include "util/hash.h"
#include "util/json.h"
#include "util/rng.h"
#include "util/timeutil.h"
#include "vocab.h"

typedef struct args {
    const char *recipe, *corpus, *qa, *work, *out;
    int threads, from_pretrain;
} args;

static int usage(void)
{
    fprintf(stderr, "usage: tiny-recipe build --recipe R.json --corpus LIST --qa QA.txt --work DIR --out OUT.gguf\n"
                    "                         [--threads N] [--from-pretrain]\n");
    return 2;
}

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("tiny: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static void shuffle(int64_t *perm, int64_t n, uint64_t seed, uint64_t key)
{
    for (int64_t i = 0; i < n; i++) perm[i] = i;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)(rng_u64(seed, RNG_SHUFFLE, key, (uint64_t)i) % (uint64_t)(i + 1));
        int64_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}

/* Corpus rows in a shuffled order, a new permutation per pass. */
typedef struct row_order {
    int64_t *perm, n, next, epoch;
    uint64_t seed;
} row_order;

static int64_t next_row(row_order *o)
{
    if (o->next == o->n) {
        o->epoch++;
        o->next = 0;
    }
    if (o->next == 0) shuffle(o->perm, o->n, o->seed, (uint64_t)o->epoch);
    return o->perm[o->next++];
}

static int write_heldout(const tiny_corpus *c, int every, const char *path, dlm_err *e)
{
    strbuf sb = STRBUF_INIT;
    for (int i = 0; i < c->n; i++)
        if (i % every == every - 1) {
            if (sb.len) sb_puts(&sb, "\n\n");
            sb_append(&sb, c->docs[i], c->lens[i]);
        }
    sb_putc(&sb, '\n');
    int rc = sb.oom ? err_set(e, "MemoryError", "out of memory") : fs_write_atomic(path, sb.buf, sb.len, 0644, e);
    sb_free(&sb);
    return rc;
}

static int run(const args *a, dlm_err *e)
{
    tiny_recipe r;
    if (tiny_recipe_load(a->recipe, &r, e)) return -1;
    char path[4096];
    if (fs_mkdir_p(a->work, e)) return -1;
    double t_start = time_mono();
    kern_init(a->threads);
    /* fp32 numerics whatever the CPU (the recipe's "precision", checked by
     * tiny_recipe_load): the committed sha256 is reproduced with or without AMX */
    kern_set_bf16(0);
    json_t *rep = json_object();
    int rc = -1;
    tiny_corpus corpus = {0};
    bpe_trainer *bpe = NULL;
    tiny_vocab voc = {0};
    tok *k = NULL;
    tiny_stream train = {0}, held = {0};
    full_model *f = NULL;
    tiny_trainer *tr = NULL;
    tiny_conv *conv = NULL;
    int n_conv = 0, n_pairs = 0;
    int64_t *perm = NULL;
    int *cperm = NULL;

    /* 1. corpus */
    if (tiny_corpus_load(a->corpus, r.max_corpus_bytes, &corpus, e)) goto done;
    size_t bytes_train = 0, bytes_held = 0;
    int docs_held = 0;
    for (int i = 0; i < corpus.n; i++) {
        if (i % r.heldout_every == r.heldout_every - 1) { bytes_held += corpus.lens[i]; docs_held++; }
        else bytes_train += corpus.lens[i];
    }
    note("corpus: %d documents, %zu bytes for training, %d documents (%zu bytes) held out", corpus.n, bytes_train,
         docs_held, bytes_held);
    snprintf(path, sizeof path, "%s/heldout.txt", a->work);
    if (write_heldout(&corpus, r.heldout_every, path, e)) goto done;

    /* 2. tokenizer */
    double t0 = time_mono();
    if (bpe_new(&bpe, e)) goto done;
    for (int i = 0; i < corpus.n; i++)
        if (i % r.heldout_every != r.heldout_every - 1 && bpe_add_text(bpe, corpus.docs[i], corpus.lens[i], e)) goto done;
    if (bpe_train(bpe, r.vocab - 3, r.bpe_min_count, e)) goto done;
    if (bpe_vocab_size(bpe) != r.vocab - 3) {
        err_set(e, "RecipeError", "the corpus yields only %d tokens (wanted %d): lower vocab or bpe_min_count",
                bpe_vocab_size(bpe) + 3, r.vocab);
        goto done;
    }
    if (tiny_vocab_from_bpe(bpe, r.cfg.max_pos, &voc, e)) goto done;
    snprintf(path, sizeof path, "%s/tokenizer", a->work);
    if (fs_mkdir_p(path, e) || tiny_vocab_write_hf(&voc, path, e)) goto done;
    tok_spec spec;
    tiny_vocab_spec(&voc, &spec);
    if (tok_build(&spec, &k, e)) goto done;
    if (tiny_stream_build(&corpus, k, r.heldout_every, 0, voc.eot, &train, e) ||
        tiny_stream_build(&corpus, k, r.heldout_every, 1, voc.eot, &held, e))
        goto done;
    note("tokenizer: %d tokens (%zu distinct pre-tokens) in %.1f s; %zu training tokens (%.2f bytes/token), %zu held out",
         voc.n_tokens, bpe_n_words(bpe), time_mono() - t0, train.n, (double)bytes_train / (double)train.n, held.n);
    json_object_set_new(rep, "precision", json_string("fp32"));
    json_object_set_new(rep, "vocab", json_integer(voc.n_tokens));
    json_object_set_new(rep, "corpus_documents", json_integer(corpus.n));
    json_object_set_new(rep, "heldout_documents", json_integer(docs_held));
    json_object_set_new(rep, "train_tokens", json_integer((json_int_t)train.n));
    json_object_set_new(rep, "heldout_tokens", json_integer((json_int_t)held.n));
    json_object_set_new(rep, "bytes_per_token", json_real((double)bytes_train / (double)train.n));

    /* 3. model + pretraining */
    if (full_model_new(&r.cfg, &f, e)) goto done;
    snprintf(f->m.source, sizeof f->m.source, "tiny-recipe");
    note("model: llama, %d layers, d_model %d, ffn %d, %d/%d heads x %d, vocab %d: %zu parameters", r.cfg.n_layer,
         r.cfg.d_model, r.cfg.n_ff, r.cfg.n_head, r.cfg.n_kv_head, r.cfg.head_dim, r.cfg.vocab, f->n);
    json_object_set_new(rep, "parameters", json_integer((json_int_t)f->n));
    if (tiny_trainer_new(f, r.batch, r.seq_len, &tr, e)) goto done;
    size_t nrows = tiny_stream_rows(&train, r.seq_len);
    if (nrows < (size_t)r.batch) { err_set(e, "RecipeError", "corpus too small: %zu rows of %d", nrows, r.seq_len); goto done; }
    perm = malloc(nrows * sizeof *perm);
    if (!perm) { err_set(e, "MemoryError", "out of memory"); goto done; }
    row_order ro = {perm, (int64_t)nrows, 0, 0, r.seed};
    optim_config oc;
    optim_defaults(&oc);
    oc.lr = (float)r.lr;
    oc.beta2 = (float)r.beta2;
    oc.weight_decay = (float)r.weight_decay;
    oc.sched = SCHED_COSINE_MIN_LR;
    oc.min_lr_ratio = r.min_lr_ratio;
    oc.warmup_ratio = r.warmup_ratio;
    oc.total_steps = r.pretrain_steps;
    snprintf(path, sizeof path, "%s/pretrain.f32", a->work);
    int64_t tokens_seen = 0;
    double t_pre = 0, loss = NAN, gn = 0;
    int64_t ne;
    if (a->from_pretrain) {
        char *buf;
        size_t len;
        if (fs_read_all(path, f->n * 4 + 16, &buf, &len, e)) goto done;
        if (len != f->n * 4) { free(buf); err_set(e, "RecipeError", "%s does not match the recipe's shape", path); goto done; }
        memcpy(f->slab, buf, len);
        free(buf);
        /* the SFT corpus rows continue where pretraining stopped */
        for (int64_t i = 0; i < (int64_t)r.pretrain_steps * r.batch; i++) next_row(&ro);
        note("pretraining skipped: weights from %s", path);
    } else {
        tiny_init_weights(f, r.seed, r.init_std);
        t0 = time_mono();
        double t_log = t0;
        int64_t tok_log = 0;
        for (int step = 0; step < r.pretrain_steps; step++) {
            for (int b = 0; b < r.batch; b++) tiny_fill_stream_row(tr, b, &train, (size_t)next_row(&ro));
            double lr = optim_lr_at(&oc, step);
            loss = tiny_train_step(tr, &oc, lr, r.seed, &gn);
            tokens_seen += (int64_t)r.batch * r.seq_len;
            tok_log += (int64_t)r.batch * r.seq_len;
            if (!isfinite(loss)) { err_set(e, "TrainError", "loss is %g at step %d", loss, step); goto done; }
            if ((step + 1) % r.log_every == 0 || step + 1 == r.pretrain_steps) {
                double now = time_mono();
                note("pretrain step %d/%d loss %.4f lr %.2e |g| %.2f %.0f tok/s (%.0f s)", step + 1, r.pretrain_steps, loss,
                     lr, gn, (double)tok_log / (now - t_log), now - t0);
                t_log = now;
                tok_log = 0;
            }
            if (r.eval_every && (step + 1) % r.eval_every == 0 && step + 1 < r.pretrain_steps) {
                double hl = tiny_eval(tr, &held, r.eval_rows, &ne);
                note("  held-out loss %.4f ppl %.2f (%lld tokens)", hl, exp(hl), (long long)ne);
            }
        }
        t_pre = time_mono() - t0;
        if (fs_write_atomic(path, f->slab, f->n * 4, 0644, e)) goto done;
    }
    double held_pre = tiny_eval(tr, &held, r.eval_rows, &ne);
    note("pretraining: %lld tokens in %.0f s (%.0f tok/s), last loss %.4f, held-out loss %.4f ppl %.2f on %lld tokens",
         (long long)tokens_seen, t_pre, t_pre > 0 ? (double)tokens_seen / t_pre : 0, loss, held_pre, exp(held_pre),
         (long long)ne);
    json_object_set_new(rep, "pretrain_steps", json_integer(r.pretrain_steps));
    json_object_set_new(rep, "pretrain_tokens", json_integer(tokens_seen));
    json_object_set_new(rep, "pretrain_seconds", json_real(round(t_pre)));
    json_object_set_new(rep, "pretrain_tokens_per_second", json_real(t_pre > 0 ? round((double)tokens_seen / t_pre) : 0));
    json_object_set_new(rep, "heldout_eval_tokens", json_integer(ne));
    json_object_set_new(rep, "heldout_ppl_pretrained", json_real(round(exp(held_pre) * 100) / 100));

    /* 4. instruction tuning */
    if (tiny_sft_load(a->qa, k, &r, &conv, &n_conv, &n_pairs, e)) goto done;
    int64_t sft_tokens = 0;
    for (int i = 0; i < n_conv; i++)
        for (int j = 0; j < conv[i].n; j++) sft_tokens += conv[i].tgt[j] >= 0;
    note("instructions: %d written Q&A pairs + %d arithmetic drills, %lld answer tokens", n_pairs, r.sft_arith,
         (long long)sft_tokens);
    cperm = malloc((size_t)n_conv * sizeof *cperm);
    int64_t *cp64 = malloc((size_t)n_conv * sizeof *cp64);
    if (!cperm || !cp64) { free(cp64); err_set(e, "MemoryError", "out of memory"); goto done; }
    optim_config os = oc;
    os.lr = (float)r.sft_lr;
    os.warmup_ratio = r.sft_warmup_ratio;
    os.total_steps = r.sft_steps;
    /* A new phase, a new optimizer: moments and step count start over, so
     * --from-pretrain (which has no moments) gives the same bytes. */
    memset(tr->m, 0, f->n * sizeof(float));
    memset(tr->v, 0, f->n * sizeof(float));
    tr->adam_t = 0;
    int cursor = 0, cepoch = -1;
    t0 = time_mono();
    double sl = NAN;
    for (int step = 0; step < r.sft_steps; step++) {
        for (int b = 0; b < r.batch; b++) {
            if (b < r.sft_rows) {
                if (cursor / n_conv != cepoch) {
                    cepoch = cursor / n_conv;
                    shuffle(cp64, n_conv, r.seed, 1u << 20 | (uint64_t)cepoch);
                    for (int i = 0; i < n_conv; i++) cperm[i] = (int)cp64[i];
                }
                tiny_fill_sft_row(tr, b, conv, cperm, n_conv, &cursor, voc.eot);
            } else {
                tiny_fill_stream_row(tr, b, &train, (size_t)next_row(&ro));
            }
        }
        double lr = optim_lr_at(&os, step);
        sl = tiny_train_step(tr, &os, lr, r.seed, &gn);
        if (!isfinite(sl)) { free(cp64); err_set(e, "TrainError", "SFT loss is %g at step %d", sl, step); goto done; }
        if ((step + 1) % r.log_every == 0 || step + 1 == r.sft_steps)
            note("sft step %d/%d loss %.4f lr %.2e (%.0f s, %d passes over the pairs)", step + 1, r.sft_steps, sl, lr,
                 time_mono() - t0, cursor / n_conv);
    }
    free(cp64);
    double t_sft = time_mono() - t0;
    double held_fin = tiny_eval(tr, &held, r.eval_rows, &ne);
    note("instruction tuning: %d steps in %.0f s; held-out loss %.4f ppl %.2f", r.sft_steps, t_sft, held_fin,
         exp(held_fin));
    json_object_set_new(rep, "sft_pairs_written", json_integer(n_pairs));
    json_object_set_new(rep, "sft_pairs_arithmetic", json_integer(r.sft_arith));
    json_object_set_new(rep, "sft_steps", json_integer(r.sft_steps));
    json_object_set_new(rep, "sft_seconds", json_real(round(t_sft)));
    json_object_set_new(rep, "sft_last_loss", json_real(round(sl * 1e4) / 1e4));
    json_object_set_new(rep, "heldout_ppl_final", json_real(round(exp(held_fin) * 100) / 100));

    /* 5. the GGUF */
    if (tiny_gguf_write(a->out, f, &voc, "dlm tiny", e)) goto done;
    char hex[65];
    if (sha256_file_hex(a->out, hex, e)) goto done;
    json_object_set_new(rep, "gguf_sha256", json_string(hex));
    json_object_set_new(rep, "gguf_bytes", json_integer(fs_file_size(a->out)));
    json_object_set_new(rep, "total_seconds", json_real(round(time_mono() - t_start)));
    snprintf(path, sizeof path, "%s/report.json", a->work);
    if (json_save_file(path, rep, e)) goto done;
    note("wrote %s (%lld bytes, sha256 %s) in %.0f s", a->out, (long long)fs_file_size(a->out), hex,
         time_mono() - t_start);
    rc = 0;
done:
    json_decref(rep);
    free(perm);
    free(cperm);
    tiny_sft_free(conv, n_conv);
    tiny_trainer_free(tr);
    full_model_free(f);
    free(train.ids);
    free(held.ids);
    tok_free(k);
    tiny_vocab_free(&voc);
    bpe_free(bpe);
    tiny_corpus_free(&corpus);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "build")) return usage();
    args a = {0};
    for (int i = 2; i < argc; i++) {
        const char *o = argv[i];
        const char **dst = !strcmp(o, "--recipe") ? &a.recipe : !strcmp(o, "--corpus") ? &a.corpus
                         : !strcmp(o, "--qa") ? &a.qa : !strcmp(o, "--work") ? &a.work
                         : !strcmp(o, "--out") ? &a.out : NULL;
        if (dst && i + 1 < argc) *dst = argv[++i];
        else if (!strcmp(o, "--threads") && i + 1 < argc) a.threads = atoi(argv[++i]);
        else if (!strcmp(o, "--from-pretrain")) a.from_pretrain = 1;
        else return usage();
    }
    if (!a.recipe || !a.corpus || !a.qa || !a.work || !a.out || a.threads < 0) return usage();
    hash_init();
    dlm_err e;
    err_clear(&e);
    if (run(&a, &e)) {
        fprintf(stderr, "tiny-recipe: error: %s%s%s\n", e.file[0] ? e.file : "", e.file[0] ? ": " : "", e.msg);
        if (e.hint[0]) fprintf(stderr, "hint: %s\n", e.hint);
        return 1;
    }
    return 0;
}
