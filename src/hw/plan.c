#include "hw/plan.h"

#include <stdio.h>
#include <string.h>

#include "train/fb.h"
#include "util/str.h"

/* What the process costs before any model: the binary, libc, libraries,
 * thread stacks. Measured on this build (RSS of `dlm --version` plus the
 * thread pool): about 12 MiB; kept as a constant. */
#define BASE_OVERHEAD (12ull << 20)

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

static void add(plan *p, const char *name, uint64_t bytes)
{
    if (p->n_items < PLAN_MAX_ITEMS) p->items[p->n_items++] = (plan_item){name, bytes};
    p->total += bytes;
}

void plan_compute(const plan_in *in, int mb, int ga, int recompute, plan *p)
{
    memset(p, 0, sizeof *p);
    p->mb = mb;
    p->ga = ga;
    p->recompute = recompute;
    const model_config *c = &in->cfg;
    add(p, "base weights (stored type)", in->weight_bytes);
    add(p, "loader copies", in->weight_copies);
    uint64_t n = in->full ? (uint64_t)fb_full_carve(c, NULL, NULL) : plan_lora_params(c, &in->lora);
    const char *pn = in->full ? "trainable weights (f32)" : "adapter weights (f32)";
    add(p, pn, n * 4);
    add(p, "gradients", n * 4);
    add(p, "AdamW moments", n * 8);
    if (in->keep_best) add(p, "best-checkpoint copy", n * 4);
    add(p, "checkpoint buffer", n * 4 * (in->keep_best ? 4 : 3));
    fb_opts o = {mb, in->seq_len, recompute, in->full, 0};
    add(p, recompute ? "activations (recomputed per layer)" : "activations", fb_plan_bytes(c, in->full ? NULL : &in->lora, &o));
    add(p, "batch buffers", (uint64_t)mb * (uint64_t)in->seq_len * 16);
    add(p, "dataset", (uint64_t)in->dataset_tokens * 8 + (1u << 20));
    add(p, "tokenizer", in->tokenizer_bytes);
    add(p, "runtime", BASE_OVERHEAD);
    p->fits = !in->budget || p->total <= in->budget;
}

int plan_make(const plan_in *in, plan *out)
{
    static const int MBS[] = {8, 4, 2, 1};
    int fixed_mb = in->mb > 0, rc_opts[2] = {0, 1}, nrc = 2;
    if (in->recompute == 0) nrc = 1;
    if (in->recompute == 1) { rc_opts[0] = 1; nrc = 1; }
    plan best;
    int have = 0;
    /* Prefer no recomputation (faster on CPU) at any micro-batch size before
     * trading compute for memory; grad accumulation keeps the effective
     * batch at 8 either way. */
    for (int r = 0; r < nrc; r++)
        for (int i = 0; i < 4; i++) {
            int mb = fixed_mb ? (int)in->mb : MBS[i];
            int ga = in->ga > 0 ? in->ga : (mb >= 8 ? 1 : 8 / mb);
            plan_compute(in, mb, ga, rc_opts[r], out);
            if (out->fits) return 0;
            if (!have || out->total < best.total) { best = *out; have = 1; }
            if (fixed_mb) break;
        }
    *out = best;
    char need[32], bud[32];
    str_human_size(best.total, need, sizeof need);
    str_human_size(in->budget, bud, sizeof bud);
    snprintf(out->reason, sizeof out->reason,
             "even micro_batch_size %d with%s recomputation needs %s, more than the %s available", best.mb,
             best.recompute ? "" : "out", need, bud);
    return -1;
}
