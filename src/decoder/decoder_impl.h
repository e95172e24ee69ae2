/* decoder_impl — the decoder's buffers and the forward pieces the backward
 * (grad/backward.c) reruns and walks in reverse. Not for other callers:
 * they use decoder/decoder.h. */
#ifndef DLM_DECODER_IMPL_H
#define DLM_DECODER_IMPL_H

#include "decoder/decoder.h"
#include "kern/kern.h"

/* Opt-in per-phase timing for bench/train (compile with -DDECODER_PROFILE;
 * decoder_profile_dump prints seconds per phase). Off in every normal build. */
#ifdef DECODER_PROFILE
void decoder_profile_add(const char *name, double seconds);
double decoder_profile_clock(void);
void decoder_profile_dump(double steps);
#define PROF(name, stmt) do { double t_ = decoder_profile_clock(); stmt; \
                              decoder_profile_add(name, decoder_profile_clock() - t_); } while (0)
#else
#define PROF(name, stmt) stmt
#endif

/* What a layer keeps for its backward. The normalised inputs xn1, xn2 and
 * act = silu(g)·u are not kept: the backward recomputes them (same bits)
 * from x, h, the saved rstd and g, u — a cheap pass instead of 2·C + F
 * floats per token per layer. The inference decoder has one set, reused
 * by every layer as scratch. */
typedef struct layer_acts {
    float *rstd1;             /* [N] */
    float *q, *k, *v;         /* [N,Q] [N,K] [N,K]  (q, k after RoPE) */
    float *qr, *kr;           /* qk_norm: [N,Q] [N,K] the projections before the per-head norm */
    float *rq, *rk;           /* qk_norm: [N·NH] [N·KVH] their rstd (per head; whole projection: [N] each) */
    float *ao, *mo;           /* post_norm: [N,C] each, o_proj and down_proj outputs before their norm
                               * (rstd1 / rstd2 then hold those norms' rstd) */
    float *rstd3, *rstd4;     /* sandwich (gemma2): [N] each, the post norms' rstd (rstd1, rstd2: the pre norms') */
    float *att, *lse;         /* [N,Q] [B,NH,T] (lse: training only) */
    float *h, *rstd2;         /* [N,C] [N] */
    float *g, *u;             /* [N,F] ×2 */
    /* mixtral (decoder/moe.c): the router's logits and choice; g and u
     * then hold the N·k routed rows, grouped by expert */
    float *moe_logits;        /* [N,E] */
    int32_t *moe_sel;         /* [N,k] the chosen experts */
    float *moe_w;             /* [N,k] their weights */
    int32_t *moe_idx;         /* [N·k] n·k + j of each routed row, expert-major */
    int32_t *moe_first;       /* [E+1] each expert's first routed row */
    float *U[LM_COUNT];       /* [N,r] LoRA x·Aᵀ per targeted module */
    uint8_t *keep[LM_COUNT];  /* [N·I bits] LoRA dropout masks (dropout > 0) */
} layer_acts;

struct decoder {
    const model *m;
    const lora *l;
    decoder_opts o;
    int N, C, Q, K, F, V, R, maxI, maxO;
    float *X;                 /* [(L+1), N, C] residual stream (inference: [N, C], updated in place) */
    layer_acts *acts;         /* [n_acts] */
    int n_acts;
    float *rstdf, *xnf;       /* [N] [N,C] */
    float *xn, *act;          /* [N,C] [N,F]: a layer's normalised input, silu(g)·u */
    float *rope_cs, *rope_sn; /* [N, HS/2]: RoPE cos/sin of this batch's positions (phi3: rope_dim/2 used) */
    float *fuse;              /* phi3: [N, max(Q+2K, 2F)] the fused qkv / gate_up product (backward: its gradient) */
    float *logits;            /* [chunk, V] (full mode, a final soft cap, or head_grad) */
    float *logits_cap;        /* [chunk, V] final_softcap: the capped logits (logits then holds their gradient) */
    float *nchunk;            /* [chunk] head_grad: the second pass's NLL (discarded) */
    float *head_scratch;      /* kern_head_xent scratch (LoRA mode: fused head) */
    float *xsel, *dsel;       /* [sel, C] */
    int32_t *rows, *tsel;     /* [N] rows with a target, [sel] their targets */
    float *nsel;              /* [sel] */
    int chunk, sel;           /* logits rows per chunk; rows selected at once */
    /* backward (training only, except tmpC: the bare product of an
     * accumulating projection, also used by inference) */
    float *dres, *dxn, *tmpC, *datt, *dq, *dk, *dv, *dact, *dg, *du;
    float *dqr, *dkr;         /* qk_norm: gradients before the per-head norm */
    /* mixtral: one expert's gathered rows and outputs [N,C] each, fill
     * counters [E]; backward: the routed rows' output gradient [N,C], the
     * router logits' gradient [N,E], the weights' gradient [N·k] */
    float *moe_x, *moe_y, *moe_dy, *moe_dlog, *moe_dw;
    int32_t *moe_fill;
    float *tmpI, *tmpO, *tmpO2, *dU, *xd;
    float *attn_scratch;
    /* DoRA per (layer, module): g = mag/‖W+sBA‖ and the norm, [out] each */
    float *dora_g, *dora_norm, *dora_scratch;
    size_t *dora_off;         /* [L*LM_COUNT] */
    /* inference: K (after RoPE) and V of every cached position, and the
     * positions of the rows being evaluated */
    float *kcache, *vcache;   /* [L, n_ctx, K] each */
    int32_t *pos;             /* [N] */
    void *slab;
    size_t slab_bytes;
    decoder_obs_fn obs;       /* decoder_set_observer, or NULL */
    void *obs_user;
};

/* One pass's settings. */
typedef struct dec_pass {
    int train;                /* dropout on the adapter path */
    uint64_t seed, micro;     /* dropout draws: (seed, RNG_DROPOUT, micro, layer, module) */
    int B, T;                 /* rows N = B·T */
    const int32_t *seg;       /* [B,T] packing segments, or NULL */
    const int32_t *prefix;    /* [B] prefix-LM lengths (tokens/batch.h), or NULL = causal */
    const dec_group *groups;  /* inference: which rows belong to which cached sequence */
    int n_groups;
} dec_pass;

static inline layer_acts *dec_acts_for(decoder *d, int layer) { return &d->acts[d->n_acts == 1 ? 0 : layer]; }
/* Bias of module m (q, k, v only), or NULL. */
const float *dec_mod_bias(const layer_weights *w, int m);
/* dst[N,I] = src ⊙ mask / (1−p) with the mask drawn in the forward. */
void dec_dropout_apply(float *dst, const float *src, int64_t n, float p, const uint8_t *keep);
/* One decoder layer: x [N,C] → xout [N,C] (may be the same buffer), keeping
 * its activations in A. */
void dec_layer_fwd(decoder *d, const dec_pass *p, int layer, layer_acts *A, const float *x, float *xout);
/* The attention of layer il for the pass (training: within each sequence;
 * inference: each group's rows append k, v to its cache and attend over it). */
void dec_attend(decoder *d, const dec_pass *p, int layer, layer_acts *A);
/* The attention shape of a training pass over layer il (also the backward's). */
attn_shape dec_train_attn(const model_config *c, int layer, int B, int T, int K, const int32_t *seg,
                          const int32_t *prefix);
/* The q (kv = 0) or k (kv = 1) norm of a qk_norm model as rows × n. */
void dec_qk_norm_shape(const model_config *c, int N, int kv, int64_t *rows, int *n);
/* RoPE on x [N, H heads] with the pass's table (bwd: the inverse
 * rotation); phi3's partial rotary turns only the first rope_dim dims. */
void dec_rope(decoder *d, float *x, int N, int H, int bwd);
/* phi3: columns [off, off+w) of each row of src [N, W] to dst [N, w]
 * (split), or back (gather: dst [N, W] ← src [N, w]). */
void dec_cols_split(float *dst, const float *src, int N, int W, int off, int w);
void dec_cols_gather(float *dst, const float *src, int N, int W, int off, int w);
/* Embedding, RoPE table from b->pos, every layer, the final norm (into xnf). */
void dec_forward_layers(decoder *d, const dec_pass *p, const token_batch *b);
/* mixtral: out[N,C] += the sparse MoE block of x (decoder/moe.c). */
void dec_moe_fwd(decoder *d, layer_acts *A, int layer, const float *x, float *out, int N);
/* Rows of the layer's MLP activations (g, u, act): N, or N·k routed rows. */
static inline size_t dec_ffn_rows(const model_config *c, int N)
{
    return (size_t)N * (size_t)(c->n_expert ? c->n_expert_used : 1);
}
/* LM head + cross-entropy over the rows that have a target. With
 * want_grad, writes dL/dxnf into d->dxn (zero for rows without loss) and,
 * in full mode, the output-weight gradient into dWout. */
double dec_head_loss(decoder *d, const token_batch *b, int want_grad, float grad_scale, float *dWout,
                     float *nll_out, int64_t *n_loss);

#endif
