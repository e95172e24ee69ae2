/* plan — see plan.h. The formulas mirror what each owner allocates:
 * fb.c (activations, by purpose via decoder_plan_parts), trainer.c (adapter, gradients,
 * moments, batch and checkpoint buffers), the model loader (mapped weights
 * and copies); tests/unit/test_plan.c checks them against those owners. */
#include "run/plan.h"
#include "grad/optim8.h"

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decoder/decoder.h"
#include "grad/backward.h"
#include "util/str.h"

/* The kernel maps up to 16 already-cached neighbouring pages on a read
 * fault of a file mapping (fault_around_bytes = 64 KiB), and readahead has
 * cached them: each embedding row a step reads can bring 64 KiB into RSS. */
#define FAULT_AROUND (64u << 10)

uint64_t plan_lora_params(const model_config *c, const lora_config *l)
{
    uint64_t n = 0;
    for (int m = 0; m < LM_COUNT; m++) {
        if (!(l->targets >> m & 1)) continue;
        int in, out;
        lora_module_dims(c, m, &in, &out);
        n += (uint64_t)l->rank * (uint64_t)(in + out) + (l->dora ? (uint64_t)out : 0);
    }
    return n * (uint64_t)c->n_layer;
}

int plan_threads(int requested, int cores)
{
    if (requested > 0) return requested;
    return cores > 0 ? cores : 1;
}

static int n_targets(const lora_config *l)
{
    int n = 0;
    for (int m = 0; l && m < LM_COUNT; m++) n += l->targets >> m & 1;
    return n;
}

/* Floats per token one layer keeps for its backward (fb.c layer_acts):
 * h [C], q att [Q] ×2, k v [K] ×2, g u [F] ×2, rstd1 rstd2, lse (one per
 * head), x·Aᵀ [r] per targeted module, and with dropout one mask bit per
 * input of each targeted module. xn1, xn2 and silu(g)·u are recomputed. */
static uint64_t layer_floats(const model_config *c, const lora_config *l)
{
    uint64_t Q = (uint64_t)c->n_head * c->head_dim, K = (uint64_t)c->n_kv_head * c->head_dim;
    uint64_t bits = 0;
    for (int m = 0; l && l->dropout > 0 && m < LM_COUNT; m++)
        if (l->targets >> m & 1) {
            int in, out;
            lora_module_dims(c, m, &in, &out);
            bits += (uint64_t)in;
        }
    return (uint64_t)c->d_model + 2 * Q + 2 * K + 2ull * c->n_ff + 2 + (uint64_t)c->n_head +
           (uint64_t)(l ? l->rank : 0) * (uint64_t)n_targets(l) + (bits + 31) / 32;
}

uint64_t plan_act_per_token(const model_config *c, const lora_config *l, int recompute)
{
    uint64_t layers = recompute ? 1 : (uint64_t)c->n_layer;
    return 4 * ((uint64_t)(c->n_layer + 1) * c->d_model + layers * layer_floats(c, l));
}

int64_t plan_distinct_tokens(const int32_t *tok, int64_t n, int vocab)
{
    if (vocab <= 0) return 0;
    unsigned char *seen = calloc((size_t)vocab / 8 + 1, 1);
    if (!seen) return 0;
    int64_t d = 0;
    for (int64_t i = 0; i < n; i++) {
        int32_t t = tok[i];
        if (t < 0 || t >= vocab || (seen[t / 8] >> (t % 8) & 1)) continue;
        seen[t / 8] |= (unsigned char)(1u << (t % 8));
        d++;
    }
    free(seen);
    return d;
}

uint64_t plan_tokenizer_estimate(int64_t vocab, int64_t merges)
{
    /* token strings, the id→bytes table, the string→id hash, the merge rank
     * hash: calibrated on dlm's tokenizer for the Qwen2.5 and SmolLM2
     * vocabularies (heap after tok_load) */
    return (uint64_t)(vocab > 0 ? vocab : 0) * 160 + (uint64_t)(merges > 0 ? merges : 0) * 72 + (256u << 10);
}

/* ---- the plan ------------------------------------------------------------------ */

static void add(plan *p, const char *name, uint64_t bytes)
{
    if (p->n_items < PLAN_MAX_ITEMS) p->items[p->n_items++] = (plan_item){name, bytes};
    p->total += bytes;
}

/* Resident bytes of the mapped base: everything a step reads. */
static uint64_t weights_resident(const plan_in *in)
{
    const plan_base *b = &in->base;
    uint64_t w = b->tensor_bytes + b->meta_bytes;
    if (!b->cfg.tied && b->embd_bytes) {
        /* an untied embedding is only gathered from, row by row */
        uint64_t rows = in->distinct_tokens > 0 ? (uint64_t)in->distinct_tokens * FAULT_AROUND : b->embd_bytes;
        w = w - b->embd_bytes + (rows < b->embd_bytes ? rows : b->embd_bytes);
    }
    return w;
}

void plan_compute(const plan_in *in, int mb, int ga, int recompute, plan *p)
{
    memset(p, 0, sizeof *p);
    p->mb = mb;
    p->ga = ga;
    p->recompute = recompute;
    p->T = in->seq_len;
    p->threads = plan_threads(in->threads, in->cores);
    const model_config *c = &in->base.cfg;
    const lora_config *l = in->full ? NULL : &in->lora;
    add(p, "runtime (binary, libraries, kernel scratch)", PLAN_RUNTIME_BYTES + (uint64_t)p->threads * PLAN_THREAD_SCRATCH);
    add(p, "base weights (mapped, as stored)", weights_resident(in));
    add(p, "loader copies", in->base.copy_bytes);
    add(p, "tokenizer", in->tokenizer_bytes);
    add(p, "dataset", in->dataset_bytes);
    add(p, "document and records", in->other_bytes);
    uint64_t n = in->full ? (uint64_t)full_grads_carve(c, NULL, NULL) : plan_lora_params(c, &in->lora);
    p->params = n;
    add(p, in->full ? "trainable weights (f32)" : "adapter weights (f32)", n * 4);
    add(p, "gradients", n * 4);
    /* one micro-batch's gradient, summed into the step's in order; a rank
     * of an MPI job keeps each of its micro-batches' until the chain
     * reaches it (run/dist.h) */
    add(p, "micro-batch gradients", n * 4 * (uint64_t)(in->ranks > 1 ? ga : 1));
    if (in->optim8 && !in->full) {
        /* the state optim8_create allocates and training_state.bin v2 holds (adapter/state.h) */
        optim8_counts k;
        optim8_plan_counts(c, &in->lora, &k);
        uint64_t os = optim8_state_bytes(&k);
        add(p, "AdamW moments (8-bit codes + block scales)", os);
        if (in->keep_best) add(p, "best-checkpoint copy", n * 4);
        add(p, "checkpoint buffer", n * 4 * (in->keep_best ? 2 : 1) + os + 96 + 24);
    } else {
        add(p, "AdamW moments", n * 8);
        if (in->keep_best) add(p, "best-checkpoint copy", n * 4);
        add(p, "checkpoint buffer", n * 4 * (in->keep_best ? 4 : 3) + 96);
    }
    int rows = in->pref_pairs > 0 ? 2 * mb : mb;
    decoder_opts o = {.B = rows, .T = in->seq_len, .recompute = recompute, .full = in->full,
                      .head_grad = in->embed_grad_bytes > 0};
    decoder_parts fp;
    decoder_plan_parts(c, l, &o, &fp);
    add(p, recompute ? "activations (layer inputs + one layer, recomputed)" : "activations (every layer kept)",
        fp.acts);
    add(p, "attention scratch", fp.attn);
    add(p, "LM-head chunk", fp.head);
    add(p, "backward scratch", fp.bwd);
    add(p, "batch buffers", (uint64_t)rows * (uint64_t)in->seq_len * (in->vl_images ? 32 : 16) +
                            (uint64_t)mb * sizeof(int));
    if (in->vl_images) {
        add(p, "vision tower (f32, one image's activations)", in->vl_tower_bytes);
        add(p, "image features (vl-cache rows)", in->vl_feature_bytes);
    }
    if (in->pref_pairs > 0)   /* trainer.c allocate(): ref_c/ref_r, nll/scale, pairs, pass_rc/pass_rr */
        add(p, "preference: reference log-probs, per-position NLL and weights",
            (uint64_t)in->pref_pairs * 16 + (uint64_t)rows * (uint64_t)in->seq_len * 8 + (uint64_t)mb * 20);
    if (in->embed_grad_bytes) add(p, "cpt embed warm-up: f32 embedding/head copies, gradients, AdamW moments", in->embed_grad_bytes);
    p->act_token = plan_act_per_token(c, l, 0);
    p->act_token_rc = plan_act_per_token(c, l, 1);
    p->attn_scratch = fp.attn;
    p->fits = !in->budget || p->total <= in->budget;
}

static int auto_ga(const plan_in *in, int mb) { return in->ga > 0 ? in->ga : (mb >= 8 ? 1 : 8 / mb); }

/* The longest sequence (a multiple of 64, or T itself when shorter) with
 * which micro-batch 1 and recomputation fit with 1% to spare (the dataset
 * changes a little when windows get shorter). 0 when none does. */
static int fit_seq(const plan_in *in, uint64_t *total)
{
    plan_in x = *in;
    plan p;
    int hi = in->seq_len, lo = in->seq_len < 64 ? in->seq_len : 64, best = 0;
    uint64_t budget = in->budget - in->budget / 100;
    x.seq_len = lo;
    plan_compute(&x, 1, 8, 1, &p);
    if (p.total > budget) return 0;
    best = lo;
    *total = p.total;
    /* binary search over multiples of 64 in (lo, hi] (hi itself allowed) */
    int a = lo / 64 + 1, b = hi / 64;
    while (a <= b) {
        int mid = (a + b) / 2;
        x.seq_len = mid * 64;
        plan_compute(&x, 1, 8, 1, &p);
        if (p.total <= budget) { best = mid * 64; *total = p.total; a = mid + 1; }
        else b = mid - 1;
    }
    if (best == hi / 64 * 64 && hi % 64) {
        x.seq_len = hi;
        plan_compute(&x, 1, 8, 1, &p);
        if (p.total <= budget) { best = hi; *total = p.total; }
    }
    return best;
}

int plan_make(const plan_in *in, plan *out)
{
    static const int MBS[] = {8, 4, 2, 1};
    int fixed_mb = in->mb > 0, rc_opts[2] = {0, 1}, nrc = 2;
    if (in->recompute == 0) nrc = 1;
    if (in->recompute == 1) { rc_opts[0] = 1; nrc = 1; }
    plan best;
    int have = 0;
    /* Prefer no recomputation (a third less compute) at any micro-batch
     * size before trading compute for memory; grad accumulation keeps the
     * effective batch at 8 either way. The first pass leaves 10% of the
     * budget free (MemAvailable moves; other processes grow), the second
     * takes what fits at all. */
    for (int pass = 0; pass < 2; pass++) {
        uint64_t limit = pass == 0 ? in->budget - in->budget / 10 : in->budget;
        for (int r = 0; r < nrc; r++)
            for (int i = 0; i < 4; i++) {
                int mb = fixed_mb ? in->mb : MBS[i];
                plan_compute(in, mb, auto_ga(in, mb), rc_opts[r], out);
                if (!in->budget || out->total <= limit) return 0;
                if (!have || out->total < best.total) { best = *out; have = 1; }
                if (fixed_mb) break;
            }
    }
    *out = best;
    char need[32], bud[32], w[32];
    str_human_size(best.total, need, sizeof need);
    str_human_size(in->budget, bud, sizeof bud);
    out->rec_mb = 1;
    out->rec_ga = 8;
    out->rec_seq = fit_seq(in, &out->rec_total);
    /* a base stored wider than 4.5 bits: would a Q4_K GGUF of it fit? */
    if (!in->full && in->base.wtype != DT_Q4_K && in->base.wtype != DT_Q4_0) {
        plan_in q = *in;
        plan pq;
        plan_base_shape(&in->base.cfg, DT_Q4_K, 1, &q.base);
        q.seq_len = out->rec_seq ? out->rec_seq : (in->seq_len < 64 ? in->seq_len : 64);
        plan_compute(&q, 1, 8, 1, &pq);
        out->q4k_total = pq.total;
    }
    uint64_t wb = 0;
    for (int i = 0; i < best.n_items; i++)
        if (!strncmp(best.items[i].name, "base weights", 12)) wb = best.items[i].bytes;
    str_human_size(wb, w, sizeof w);
    if (out->rec_seq) {
        snprintf(out->reason, sizeof out->reason,
                 "micro_batch_size %d%s with%s recomputation at sequence_len %d needs %s, more than the %s budget;"
                 " micro_batch_size 1 with recomputation fits at sequence_len %d", best.mb,
                 fixed_mb ? " (fixed)" : "", best.recompute ? "" : "out", in->seq_len, need, bud, out->rec_seq);
    } else {
        char q4[32];
        str_human_size(out->q4k_total, q4, sizeof q4);
        int minseq = in->seq_len < 64 ? in->seq_len : 64;
        if (out->q4k_total && out->q4k_total <= in->budget)
            snprintf(out->reason, sizeof out->reason,
                     "even micro_batch_size 1 with recomputation at sequence_len %d does not fit the %s budget (the"
                     " base weights alone take %s); a Q4_K GGUF of this base would need %s", minseq, bud, w, q4);
        else if (out->q4k_total)
            snprintf(out->reason, sizeof out->reason,
                     "even a Q4_K base with micro_batch_size 1 and recomputation at sequence_len %d needs %s, more"
                     " than the %s budget", minseq, q4, bud);
        else
            snprintf(out->reason, sizeof out->reason,
                     "even micro_batch_size 1 with recomputation at sequence_len %d does not fit the %s budget (the"
                     " %sbase weights alone take %s)", minseq, bud,
                     in->base.wtype == DT_Q4_K ? "Q4_K " : "", w);
    }
    return -1;
}

/* ---- process memory ------------------------------------------------------------- */

uint64_t plan_heap_in_use(void)
{
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
    struct mallinfo2 mi = mallinfo2();
    return (uint64_t)mi.uordblks + (uint64_t)mi.hblkhd;
#else
    return 0;
#endif
}

void plan_heap_trim(void)
{
#if defined(__GLIBC__)
    malloc_trim(0);
#endif
}

static uint64_t status_kb(const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    size_t kl = strlen(key);
    uint64_t v = 0;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, kl) && line[kl] == ':') {
            v = strtoull(line + kl + 1, NULL, 10) * 1024u;
            break;
        }
    fclose(f);
    return v;
}

uint64_t plan_peak_rss(void) { return status_kb("VmHWM"); }
uint64_t plan_current_rss(void) { return status_kb("VmRSS"); }
uint64_t plan_peak_vm(void) { return status_kb("VmPeak"); }
