/* plan — the memory plan, shared by `dlm doctor` and `dlm train`.
 *
 * From the base (its config and stored weight bytes, read from the file
 * headers without touching a weight), the adapter and training settings,
 * what the tokenizer and the dataset hold, and the host budget, it computes
 * the resident bytes of a training run, buffer by buffer:
 *
 *   runtime        binary + libraries, and 6 MiB of kernel scratch per thread
 *   base weights   every matrix the steps read, as stored (mmap'd pages
 *                  count in RSS once touched); an untied embedding only for
 *                  the rows the dataset uses (at fault-around granularity)
 *   loader copies  llama-GGUF Q/K rows un-permuted into owned memory, f32
 *                  norms and biases
 *   tokenizer, dataset, records   heap measured by the caller (mallinfo2
 *                  deltas) or estimated from the vocabulary
 *   adapter, gradients, AdamW m and v, best-checkpoint copy, checkpoint
 *                  serialisation buffer   4 bytes per parameter each; the
 *                  8-bit optimizers: m and v take 2 bytes per value of a
 *                  tensor of >= 4096 values plus 8 per block of 2048, and
 *                  8 bytes per value of the smaller tensors (grad/optim8.h)
 *   activations    decoder_plan_parts: exactly what decoder_create allocates, by
 *                  purpose from fb's own carving (what the forward keeps,
 *                  attention scratch, LM-head buffers, backward scratch)
 *   batch buffers  4 int32 arrays of micro_batch × sequence (a Qwen2-VL
 *                  base: 4 more, the splice's embed_row and M-RoPE streams)
 *   images         a Qwen2-VL base (run/vl_run.h): the frozen tower in f32
 *                  with one image's activations (while the features are
 *                  computed, before step 1; counted as resident) and every
 *                  image's features, n image tokens × d_model f32
 *
 * `train` allocates these buffers once, before step 1 (nothing is allocated
 * in the step loop), so the plan is both the OOM guard and the prediction
 * of peak RSS that bench/memory checks against measurement. */
#ifndef DLM_PLAN_H
#define DLM_PLAN_H

#include <stdint.h>
#include "kern/dtype.h"
#include "weights/model.h"
#include "decoder/lora.h"
#include "util/err.h"

/* What the plan needs to know about a base. */
typedef struct plan_base {
    model_config cfg;
    int wtype;                  /* stored type of the projections (dtype), -1 unknown */
    uint64_t tensor_bytes;      /* every tensor as stored */
    uint64_t embd_bytes;        /* token_embd as stored */
    uint64_t embd_row_bytes;
    uint64_t meta_bytes;        /* file headers the loader reads (GGUF KVs + tensor infos, safetensors headers) */
    uint64_t copy_bytes;        /* owned copies the loader makes */
    int gguf;                   /* 1 GGUF, 0 safetensors, -1 a shape with no file */
} plan_base;

/* Read a base's config and tensor sizes from its headers (an HF folder with
 * config.json + safetensors, or a .gguf); no weight page is touched. */
int plan_base_read(const char *model_path, plan_base *b, dlm_err *e);
/* Bytes of a base of this shape stored as `t` (2-D weights; norms and
 * biases f32 as the converters write them): for bases not on disk and for
 * the "would a Q4_K GGUF fit" question. gguf selects the layout. */
void plan_base_shape(const model_config *c, dtype t, int gguf, plan_base *b);

typedef struct plan_in {
    plan_base base;
    int full;                   /* every weight trainable (f32 copy of the model) */
    lora_config lora;           /* when !full */
    int seq_len;                /* T: longest item (<= training.sequence_len) */
    int mb, ga;                 /* 0 = auto */
    int recompute;              /* -1 auto, 0 off, 1 on */
    int threads;                /* compute threads (0 = cores) */
    int cores;                  /* usable cores (auto threads) */
    uint64_t tokenizer_bytes;   /* what the tokenizer's tables hold (tok_mem_bytes) */
    uint64_t dataset_bytes;     /* what the dataset holds (pipeline_mem_bytes) */
    uint64_t other_bytes;       /* the document, plus PLAN_RECORDS_BYTES */
    int64_t distinct_tokens;    /* token ids the dataset uses (0 = unknown: the whole embedding) */
    uint64_t budget;            /* bytes we may use (0 = unknown: everything fits) */
    int keep_best;              /* a validation split: early stopping keeps the best params */
    int pref_pairs;             /* > 0: the preference phase over this many pairs: a pass holds a pair per
                                 * micro-batch slot (chosen + rejected rows), seq_len = the longest pair
                                 * sequence; the reference pass reuses the same buffers */
    uint64_t embed_grad_bytes;  /* training.cpt.embed_warmup_steps: embedding (+ untied head) f32 copies, gradients, moments */
    int ranks;                  /* MPI ranks sharing a step (0 or 1: one process); the figure is per rank */
    int optim8;                 /* training.optimizer adamw_bnb_8bit / paged_adamw_8bit: 8-bit block-wise
                                 * moments (grad/optim8.h) instead of 8 bytes per parameter */
    int vl_images;              /* a Qwen2-VL base: distinct images of the document (0 = none) */
    int64_t vl_image_tokens;    /* their image tokens (the features' rows) */
    uint64_t vl_tower_bytes;    /* the tower in f32 + the largest image's activations */
    uint64_t vl_feature_bytes;  /* the features, image tokens × d_model f32 */
} plan_in;

#define PLAN_MAX_ITEMS 24
typedef struct plan_item {
    const char *name;
    uint64_t bytes;
} plan_item;

typedef struct plan {
    int mb, ga, recompute, threads, T;
    uint64_t total;
    plan_item items[PLAN_MAX_ITEMS];
    int n_items;
    uint64_t params;            /* trainable parameters */
    uint64_t act_token;         /* activations kept per token without recomputation */
    uint64_t act_token_rc;      /* ... with recomputation (layer inputs + one layer) */
    uint64_t attn_scratch;      /* attention forward/backward scratch */
    int fits;                   /* total <= budget (or no budget) */
    char reason[512];           /* why it does not fit, and what would */
    /* what to write in the frontmatter when it does not fit (rec_seq 0: nothing does) */
    int rec_mb, rec_ga, rec_seq;
    uint64_t rec_total;
    /* a Q4_K GGUF of the same base, when the base is stored wider and does not fit */
    uint64_t q4k_total;
} plan;

/* Bytes for fixed choices. */
void plan_compute(const plan_in *in, int mb, int ga, int recompute, plan *out);
/* Choose mb/ga/recompute/threads for `auto` (honouring the fixed ones;
 * effective batch 8, no recomputation whenever it fits) and fill out.
 * Returns 0 when it fits, -1 otherwise: out holds the smallest
 * configuration tried, out->reason says why, rec_* what would fit. */
int plan_make(const plan_in *in, plan *out);
/* LoRA parameter count for a config (no allocation). */
uint64_t plan_lora_params(const model_config *c, const lora_config *l);
/* Threads for a run: the request (--threads, training.threads) or the
 * usable cores. */
int plan_threads(int requested, int cores);
/* Bytes per token of the activations fb keeps for the backward pass
 * (without / with recomputation), from the shapes (not from fb). */
uint64_t plan_act_per_token(const model_config *c, const lora_config *l, int recompute);
/* Distinct ids among n tokens in [0, vocab): the rows of an untied
 * embedding the steps read. 0 when the bitmap cannot be had. */
int64_t plan_distinct_tokens(const int32_t *tok, int64_t n, int vocab);
/* Estimate of a byte-level BPE tokenizer's heap from its vocabulary and
 * merges (when it is not loaded). */
uint64_t plan_tokenizer_estimate(int64_t vocab, int64_t merges);

/* Heap bytes in use now (glibc mallinfo2: arena + mmap'd chunks); 0 where
 * unknown. Callers take deltas around tokenizer / dataset construction. */
uint64_t plan_heap_in_use(void);
/* Give freed heap back to the OS (malloc_trim), so a loader's transient
 * peak does not stay resident under the run's buffers. */
void plan_heap_trim(void);
/* Peak and current resident set of this process (VmHWM / VmRSS), 0 unknown. */
uint64_t plan_peak_rss(void);
uint64_t plan_current_rss(void);
/* Peak virtual size (VmPeak): what RLIMIT_AS limits. */
uint64_t plan_peak_vm(void);

/* Process overhead before any model (binary, libraries, stacks): measured
 * on this build as the RSS of a run with a tiny base; plus the kernels'
 * shared packing buffer (KERN_SHARED_BYTES, 12 MiB, touched by large
 * GEMMs). */
#define PLAN_RUNTIME_BYTES ((14ull << 20) + (12ull << 20))
/* Kernel scratch per thread (kern_impl.h KERN_SCRATCH_BYTES; a unit test
 * keeps the two equal). */
#define PLAN_THREAD_SCRATCH (6ull << 20)
/* The run's records besides the document: manifest, lock, run record, log
 * and path buffers (measured at about 40 KB on a run of the embedded base;
 * a constant, so the plan is one number in doctor and train). */
#define PLAN_RECORDS_BYTES (64ull << 10)

#endif
