/* recipe — the embedded base's recipe: hyperparameters (a JSON file,
 * tools/tiny/recipe.json), the corpus, packing, the full-parameter training
 * loop and the instruction set. Everything is a pure function of the recipe
 * file, the corpus bytes and the Q&A file: random draws are Philox keyed by
 * (seed, purpose, ...), the kernels give the same bits for any thread count.
 *
 * The tool is tools/tiny/main.c (tiny-recipe); tools/tiny/make-tiny.sh
 * fetches the corpus and drives it. */
#ifndef DLM_TINY_RECIPE_H
#define DLM_TINY_RECIPE_H

#include <stddef.h>
#include <stdint.h>
#include "weights/model.h"
#include "tokens/tok.h"
#include "decoder/decoder.h"
#include "grad/backward.h"
#include "grad/full.h"
#include "grad/optim.h"
#include "util/err.h"

typedef struct tiny_recipe {
    uint64_t seed;
    int vocab;                  /* total, specials included */
    int64_t bpe_min_count;
    model_config cfg;           /* arch llama, tied; vocab filled from `vocab` */
    int seq_len, batch;
    /* pretraining */
    int pretrain_steps;
    double lr, min_lr_ratio, warmup_ratio, weight_decay, beta2, init_std;
    /* instruction tuning */
    int sft_steps, sft_rows;    /* rows of each batch that are Q&A (the rest: corpus) */
    double sft_lr, sft_warmup_ratio;
    int sft_arith;              /* generated arithmetic pairs */
    /* data and reports */
    int heldout_every;          /* document i is held out when i % k == k - 1 */
    int64_t max_corpus_bytes;   /* 0 = every document; else stop adding documents past this */
    int eval_rows, eval_every, log_every;
} tiny_recipe;

int tiny_recipe_load(const char *path, tiny_recipe *r, dlm_err *e);

/* ---- corpus ------------------------------------------------------------ */
typedef struct tiny_corpus {
    char **docs;
    size_t *lens;
    int n;
} tiny_corpus;

/* Documents listed one path per line in list_path (order kept), CRLF → LF,
 * surrounding whitespace trimmed, empty ones skipped. */
int tiny_corpus_load(const char *list_path, int64_t max_bytes, tiny_corpus *c, dlm_err *e);
void tiny_corpus_free(tiny_corpus *c);

typedef struct tiny_stream {
    int32_t *ids;
    size_t n;
} tiny_stream;

/* Documents i with (i % every == every - 1) == heldout, each followed by
 * <|endoftext|> (eot), encoded with k. */
int tiny_stream_build(const tiny_corpus *c, tok *k, int every, int heldout, int32_t eot, tiny_stream *s, dlm_err *e);

/* ---- training ------------------------------------------------------------ */
typedef struct tiny_trainer {
    full_model *f;
    float *g, *m, *v;
    full_grads fg;
    decoder *ctx;
    full_tensor *ts;
    int nts;
    int B, T;
    int32_t *tok, *tgt, *pos, *seg;   /* [B, T], filled by the caller */
    int64_t adam_t;                   /* optimizer steps taken */
} tiny_trainer;

int tiny_trainer_new(full_model *f, int B, int T, tiny_trainer **out, dlm_err *e);
void tiny_trainer_free(tiny_trainer *t);
/* Normal(0, std) matrices (output projections scaled by 1/sqrt(2L)), unit
 * norms: (seed, RNG_WEIGHT_INIT, tensor index, element). */
void tiny_init_weights(full_model *f, uint64_t seed, double std);
/* One optimizer step on the batch in t->tok/tgt/pos/seg: forward, backward,
 * clip, AdamW (weight decay on matrices only). Returns the mean loss. */
double tiny_train_step(tiny_trainer *t, const optim_config *oc, double lr, uint64_t seed, double *grad_norm);
/* Row r of a stream: tokens [r*T, r*T+T), targets shifted by one. */
void tiny_fill_stream_row(tiny_trainer *t, int b, const tiny_stream *s, size_t r);
size_t tiny_stream_rows(const tiny_stream *s, int T);
/* Mean NLL over the first `rows` rows of s (forward only). */
double tiny_eval(tiny_trainer *t, const tiny_stream *s, int rows, int64_t *n_tok);

/* ---- instruction set ------------------------------------------------------- */
typedef struct tiny_conv {
    int32_t *ids, *tgt;     /* tgt[j] = ids[j+1] where that token is part of an answer, else -1 */
    int n;
} tiny_conv;

/* Q&A pairs from qa_path ("Q: ..." / "A: ..." blocks) plus r->sft_arith
 * generated arithmetic pairs, each rendered as a ChatML conversation (a
 * system turn on some, picked by the seed) and tokenized. */
int tiny_sft_load(const char *qa_path, tok *k, const tiny_recipe *r, tiny_conv **out, int *n, int *n_pairs,
                  dlm_err *e);
void tiny_sft_free(tiny_conv *c, int n);
/* Pack conversations, starting at *cursor in the order perm[], into row b
 * (segments restart positions; the rest is padding without loss). */
void tiny_fill_sft_row(tiny_trainer *t, int b, const tiny_conv *c, const int *perm, int n, int *cursor, int32_t pad);

#endif
