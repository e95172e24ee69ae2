/* dataset — from a document's sections to training items and batches.
 *
 *   prose        → [BOS if the tokenizer adds one] + text + EOS, loss on all tokens
 *   Q/A pair     → the base's chat template over (system_prompt?, user Q,
 *                  assistant A); loss on the assistant turn (content + its
 *                  end-of-turn token) unless training.loss_on: all
 *   conversation → training.multi_turn rows per Q/A pair (not of the
 *                  validation split): the pair asked after 1 to 3 earlier
 *                  pairs of the document, drawn by the seed from
 *                  its other training pairs; loss on the last assistant
 *                  turn only (or on all with loss_on: all)
 *   preference   → kept aside for the preference phase (not SFT)
 *   image        → on a vision-language base (ds_opts.vl, docs/images.md),
 *                  the original's `<image>\n<caption>` row: the image's
 *                  tokens, then "\n" + caption + EOS with the loss on the
 *                  caption (from "\n" on); never cut into windows.
 *                  PaliGemma: the image's tokens, <bos>, "\n" (the
 *                  bidirectional prefix, no loss), then caption + EOS
 *                  (the loss), as PaliGemmaProcessor(text="", suffix=caption)
 *   Q/A after an image → on a vision-language base, an instruction section
 *                  that directly follows an image section asks about that
 *                  image: each user turn's content is the image
 *                  (<|vision_start|><|image_pad|><|vision_end|>, the
 *                  Qwen2-VL template's image item) then the question; loss
 *                  as any Q/A pair; never cut into windows; left out of the
 *                  multi-turn rows
 *   audio        → on an audio-language base (ds_opts.audio_ntok): the
 *                  original's "<|AUDIO|>\n<transcript>" with the placeholder
 *                  expanded to the clip's n tokens, as the processor does:
 *                  [audio_token] x n + tokens("\n" + transcript stripped),
 *                  loss on the transcript's tokens only (the original's
 *                  collator puts it on every token, placeholders included:
 *                  an encoder row has no next-token to learn); the item's
 *                  first n inputs take rows emb_off.. of the clips' table
 *                  (vision/audio_feat.h), which dataset_fill hands to the
 *                  batch as embed_row. A row longer than sequence_len is
 *                  refused (a window without its clip teaches nothing).
 *   image/audio  → refused otherwise
 *
 * A row longer than sequence_len becomes several windows (never truncated);
 * each window is an *item*. Items are split train/validation by the spec's
 * hash rule on (seed, section id, row index). Batches are made of items, as
 * the original made them of rows, so the number of optimizer steps does not
 * depend on packing; packing only lays a micro-batch's items end to end in
 * as few sequences as possible, with attention confined to each item and
 * positions restarting at 0, so no item's loss changes. */
#ifndef DLM_DATASET_H
#define DLM_DATASET_H

#include <stddef.h>
#include <stdint.h>
#include "tokens/chat.h"
#include "doc/doc.h"
#include "tokens/tok.h"
#include "tokens/batch.h"
#include "util/err.h"

typedef struct ds_item {
    int64_t off;            /* into tok/tgt */
    int32_t len;            /* inputs (= targets) in this item, <= seq_len */
    int32_t n_loss;         /* targets that carry a loss */
    char sid[17];           /* section id */
    int32_t row;            /* row index within its section */
    uint8_t val;            /* in the validation split */
    uint8_t replay;         /* from the replay corpus */
    int32_t emb_off, n_emb; /* an audio row: inputs 0..n_emb-1 are rows emb_off.. of the clips' table; n_emb 0 = none */
    int32_t image;          /* 1 + the index of its image in ds_opts.vl, 0 = a text item */
    int32_t prefix;         /* PaliGemma: the bidirectional block (image + <bos> + "\n"), 0 = causal */
} ds_item;

/* The images of a document on a vision-language base (Qwen2-VL), prepared
 * by the trainer (run/vl_run.c): per distinct blob, its grid in patches and
 * its rows in the features array the batches point into. */
typedef struct ds_image {
    char sha[65];           /* the blob */
    int grid[3];            /* image_grid_thw */
    int n_tok;              /* image tokens: t·h·w / merge² */
    int64_t row0;           /* its first row in the features */
} ds_image;
#define DS_IMAGE_ROW_MAX 32768   /* tokens of an image row, image included */
typedef struct ds_vl {
    int32_t image_id;       /* the image token */
    int32_t vision_start_id, vision_end_id;   /* around an image in a chat turn */
    int merge;
    /* PaliGemma (prefix_lm): rows as PaliGemmaProcessor(images, text="",
     * suffix=caption) lays them out, positions from 1, the prefix-LM mask;
     * no M-RoPE. 0 = Qwen2-VL. */
    int prefix_lm;
    const ds_image *images;
    int n_images;
    int64_t n_rows;         /* rows of features in all */
} ds_vl;

typedef struct dataset {
    int32_t *tok, *tgt;     /* concatenated items: inputs and next-token targets (-1 = no loss) */
    int64_t n_tok, cap_tok;
    ds_item *items;
    int n_items, cap_items;
    int *train, n_train;    /* item indices */
    int *val, n_val;
    int max_len;            /* longest item */
    /* statistics for the summary and the warnings */
    int rows_prose, rows_instr, rows_replay, n_pref_triples, n_windows_split, n_dropped;
    int rows_audio;         /* of rows_prose, audio rows */
    int64_t train_loss_tokens, val_loss_tokens;
    /* rows (not windows) per split, by kind, tag-weight copies counted: the
     * CPT fraction of run/cpt.h is train text / (train text + train messages) */
    int train_text_rows, train_msg_rows, val_text_rows, val_msg_rows;
    int rows_weight_dropped, rows_weight_extra;   /* tag weights: rows dropped, copies added */
    /* the split as decided: the fraction used, and why there is none
     * (val_off_small: auto and fewer than DS_VAL_MIN_ROWS rows) */
    double val_frac;
    int val_off_small;
    int val_all_in;         /* every row fell into the split: they train instead, no validation */
    int rows_conv;          /* multi-turn rows (training.multi_turn); not in train_msg_rows */
    int rows_image;         /* image rows (ds_opts.vl); counted as text rows for the split and CPT */
    int rows_image_qa;      /* Q/A rows about an image (counted in rows_instr too) */
    const ds_vl *vl;        /* ds_opts.vl */
    int rows_conv_short;    /* of them, with fewer earlier turns than drawn (sequence_len) */
    int32_t pad_id;
    int *perm;              /* [n_train] this epoch's order (allocated at build) */
    int perm_epoch;         /* epoch perm holds, -1 none */
    uint64_t perm_seed;
} dataset;

/* The validation split (training.val_frac, a dlm extension). The original
 * always holds out 10% of the rows by hash (its splitter with val_frac=0.1);
 * null (auto) does that only for documents of DS_VAL_MIN_ROWS rows or more:
 * below that the split would hold out 0-2 rows, too few for a validation
 * loss that means anything, and each one a lesson the adapter never sees,
 * so every row trains and there is no validation or early stopping. */
#define DS_VAL_FRAC 0.1
#define DS_VAL_MIN_ROWS 20

typedef struct ds_opts {
    int seq_len;
    int loss_on_all;
    uint64_t seed;
    const char *system_prompt;       /* NULL = none */
    double val_frac;                 /* training.val_frac; < 0 = auto (DS_VAL_MIN_ROWS) */
    int no_mined;                    /* drop auto-mined preference sections (train --no-mined) */
    struct tcache *cache;            /* tokenized sections kept in the store (tokens/tcache.h), or NULL */
    const char *tok_sha256;          /* the tokenizer's source hash (tok_source_sha256), with cache */
    const char *dialect_name;        /* with cache: part of the key */
    int multi_turn;                  /* conversation rows per Q/A pair (training.multi_turn), 0 = none */
    /* an audio-language base: per section (document order) the clip's
     * <|AUDIO|> count, 0 for the others; the clips' rows lie in the table
     * in document order (section i's at the sum of the counts before it).
     * NULL: audio sections are refused. */
    const int32_t *audio_ntok;
    int32_t audio_token;
    const ds_vl *vl;                 /* a vision-language base's images, or NULL (image sections refused) */
} ds_opts;

/* Sections of the document, then the replay sections (already sampled; a
 * scratch document holding them, may be NULL). */
int dataset_build(const dlm_doc *doc, const dlm_doc *replay, tok *t, const chat_dialect *dialect,
                  const ds_opts *o, dataset **out, dlm_err *e);
void dataset_free(dataset *d);

/* Tag weights (§1.10, the original's data/weighted_rows.py): how many
 * times a row of weight w appears: 0 when w <= 0, else floor(w), plus one
 * when u64_be(blake2b(f"{seed}:{sid}", 8 bytes)) / 2^64 < frac(w). */
int dataset_row_copies(uint64_t seed, const char *sid, double w);

/* The spec's split rule: u64_be(sha256("{seed}\0{sid}\0{row}")[:8]) < frac·2^64. */
int dataset_is_val(uint64_t seed, const char *sid, int row, double frac);

/* ---- batching ------------------------------------------------------------
 * Epoch e visits the train items in a permutation keyed by (seed, e). An
 * optimizer step takes the next mb·ga items; micro-batch j of it the j-th
 * run of mb. Everything is a pure function of its indices, so a resumed
 * run sees exactly the batches an uninterrupted one would. */
int dataset_steps_per_epoch(const dataset *d, int mb, int ga);
/* Items of micro-batch `micro` (0..ga-1) of step `step` (0-based within
 * epoch `epoch`): writes up to mb indices into out, returns the count. */
int dataset_micro_items(dataset *d, uint64_t seed, int epoch, int step, int micro, int mb, int ga, int *out);
/* Lay items out as a batch of up to B_cap sequences of up to T_cap tokens
 * (packed or one item per sequence). Buffers are [B_cap*T_cap]. Returns the
 * batch (B, T as used) in *b; *n_loss its targets with a loss. */
int dataset_fill(const dataset *d, const int *items, int n, int packing, int B_cap, int T_cap,
                 int32_t *toks, int32_t *tgts, int32_t *pos, int32_t *seg, token_batch *b, int64_t *n_loss);
/* After dataset_fill of the same items: embed_row [B_cap*T_cap] for the
 * batch's audio rows (-1 elsewhere), pointed at by b with the clips' table
 * emb (n_emb rows). Returns the number of spliced positions (0: b is left a
 * text batch, embed_row unused). */
int dataset_fill_audio(const dataset *d, const int *items, int n, const float *emb,
                       int n_emb, int32_t *embed_row, token_batch *b);
/* dataset_fill, then the splice of a vision-language dataset (d->vl): the
 * image tokens' rows of features (embed_row [B_cap*T_cap]) and every row's
 * M-RoPE positions (pos3 [3*B_cap*T_cap]; each item's from 0, as pos).
 * feats: [d->vl->n_rows][d_model]. Without d->vl it is dataset_fill.
 * PaliGemma (prefix_lm): every image item gets a row of its own (packing
 * applies to the text items only), prefix [B_cap] its block's length (0 on
 * text rows), pos counts from 1, no pos3. */
int dataset_fill_vl(const dataset *d, const int *items, int n, int packing, int B_cap, int T_cap, int32_t *toks,
                    int32_t *tgts, int32_t *pos, int32_t *seg, int32_t *embed_row, int32_t *pos3, int32_t *prefix,
                    const float *feats, token_batch *b, int64_t *n_loss);

/* ---- preference pairs ------------------------------------------------------
 * Each triple of the document's preference sections becomes two sequences,
 * (prompt as a user turn after the system prompt, chosen as the assistant
 * turn) and (the same prompt, rejected), rendered in the base's chat
 * dialect. Targets carry the assistant turn only (content + end-of-turn
 * token): a completion's log-probability is minus the sum of its targets'
 * NLL. A sequence longer than seq_len keeps its first seq_len inputs (the
 * completion's tail is cut; n_truncated counts the pairs). */
typedef struct pref_seq { int64_t off; int32_t len, n_loss; } pref_seq;
typedef struct pref_pair { pref_seq c, r; char sid[17]; int32_t row; } pref_pair;
typedef struct pref_set {
    int32_t *tok, *tgt;     /* concatenated sequences: inputs and targets (-1 = no loss) */
    int64_t n_tok, cap_tok;
    pref_pair *pairs;
    int n_pairs, max_len, n_truncated;
    int n_replay;           /* of n_pairs, the last ones: from replayed sections */
    int32_t pad_id;
    int *perm;              /* [n_pairs] this epoch's order */
    int perm_epoch;
    uint64_t perm_seed;
} pref_set;

int pref_build(const dlm_doc *doc, tok *t, const chat_dialect *dialect, const ds_opts *o, pref_set **out,
               dlm_err *e);
/* The same with the pairs of rdoc's preference sections (the replay
 * sample, tokens/replay.h) after the document's; rdoc may be NULL. */
int pref_build_replay(const dlm_doc *doc, const dlm_doc *rdoc, tok *t, const chat_dialect *dialect, const ds_opts *o,
                      pref_set **out, dlm_err *e);
void pref_free(pref_set *p);
/* The pairs of step `step` of epoch `epoch` (mb·ga per step, epoch order a
 * shuffle keyed by (seed, epoch) as for items): micro-batch `micro` gets up
 * to mb pair indices in out; returns the count. */
int pref_micro_pairs(pref_set *p, uint64_t seed, int epoch, int step, int micro, int mb, int ga, int *out);
/* Lay pairs out as a batch: row 2i = pair i's chosen, row 2i+1 its
 * rejected, padded to the longest. Buffers hold [2·n·T_cap]. */
void pref_fill(const pref_set *p, const int *pairs, int n, int T_cap, int32_t *toks, int32_t *tgts, int32_t *pos,
               int32_t *seg, token_batch *b);

#endif
