/* The forward pass of a weighted mix of named adapters, as `dlm prompt
 * --adapter-mix` runs it (export/admix.h's linear stacking, then the KV-cache
 * session): Σ wᵢ·sᵢ·BᵢAᵢ on every targeted projection.
 *
 * Default (ctest): on the qwen2-f32 fixture, two random LoRAs of different
 * ranks and targets: mix(L, L) at (0.25, 0.75) gives L's logits, mix(L, L)
 * at (1, -1) the base's, mix(L1, L2) at (w, 0) L1's (max abs diff 1e-5).
 * Reference mode (tests/ref/r1001): DLM_MIX_MODEL, DLM_MIX_A, DLM_MIX_B (adapter
 * folders), DLM_MIX_W ("0.7,0.3"), DLM_MIX_IDS (JSON ids), DLM_MIX_LOGITS
 * (f32 [T,V] from PyTorch with the PEFT-merged weights): max abs error 1e-4. */
#include "check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adapter/adapter.h"
#include "decoder/lora.h"
#include "decoder/session.h"
#include "export/admix.h"
#include "kern/kern.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/log.h"
#include "util/rng.h"
#include "weights/model.h"

static float *logits(const model *m, const lora *l, const int32_t *ids, int T)
{
    dlm_err e;
    session *s;
    float *out = calloc((size_t)T * m->cfg.vocab, 4);
    if (session_create(m, l, T, 8, &s, &e)) { fprintf(stderr, "%s\n", e.msg); return out; }
    int half = T / 2;
    session_eval(s, ids, half, out, 1, &e);
    for (int i = half; i < T; i++) session_eval(s, ids + i, 1, out + (size_t)i * m->cfg.vocab, 1, &e);
    session_free(s);
    return out;
}

static double maxdiff(const float *a, const float *b, size_t n)
{
    double mx = 0;
    for (size_t i = 0; i < n; i++) if (fabs((double)a[i] - b[i]) > mx) mx = fabs((double)a[i] - b[i]);
    return mx;
}

static lora *rand_lora(const model *m, int r, float alpha, unsigned targets, uint64_t seed)
{
    dlm_err e;
    lora_config c = {.rank = r, .alpha = alpha, .targets = targets};
    lora *l = NULL;
    if (lora_create(&m->cfg, &c, &l, &e)) { fprintf(stderr, "%s\n", e.msg); return NULL; }
    for (size_t i = 0; i < l->n; i++) l->w[i] = 0.2f * rng_normal(seed, 7, 0, i);
    return l;
}

static lora *mix(const model *m, lora *a, lora *b, double wa, double wb)
{
    dlm_err e;
    lora *ls[2] = {a, b}, *out = NULL;
    double w[2] = {wa, wb};
    CHECK_MSG(admix_build(m, ls, w, 2, ADMIX_LINEAR, &out, NULL, &e) == 0, "%s", e.msg);
    return out;
}

static void unit(void)
{
    dlm_err e;
    model *m = NULL;
    if (model_load("tests/ref/model/fixtures/qwen2-f32", &m, &e)) { CHECK_MSG(0, "%s", e.msg); return; }
    int32_t ids[12];
    for (int i = 0; i < 12; i++) ids[i] = (int32_t)(rng_u64(3, 1, 0, (uint64_t)i) % (uint64_t)m->cfg.vocab);
    size_t n = (size_t)12 * m->cfg.vocab;
    lora *l1 = rand_lora(m, 4, 8, LM_ALL, 11),
         *l2 = rand_lora(m, 8, 4, LM_ATTN, 12);
    float *base = logits(m, NULL, ids, 12), *f1 = logits(m, l1, ids, 12), *f2 = logits(m, l2, ids, 12);
    CHECK_MSG(maxdiff(base, f1, n) > 1e-2, "the random adapter moves the logits (%g)", maxdiff(base, f1, n));
    lora *x = mix(m, l1, l1, 0.25, 0.75);
    float *fx = logits(m, x, ids, 12);
    CHECK_MSG(maxdiff(fx, f1, n) <= 1e-5, "mix(L, L) 0.25/0.75 vs L: %g", maxdiff(fx, f1, n));
    lora_free(x); free(fx);
    x = mix(m, l1, l1, 1, -1);
    fx = logits(m, x, ids, 12);
    CHECK_MSG(maxdiff(fx, base, n) <= 1e-5, "mix(L, L) 1/-1 vs base: %g", maxdiff(fx, base, n));
    lora_free(x); free(fx);
    x = mix(m, l2, l1, 1, 0);
    fx = logits(m, x, ids, 12);
    CHECK_MSG(maxdiff(fx, f2, n) <= 1e-5, "mix(L2, L1) 1/0 vs L2: %g", maxdiff(fx, f2, n));
    lora_free(x); free(fx);
    free(base); free(f1); free(f2);
    lora_free(l1); lora_free(l2);
    model_free(m);
}

static int reference(void)
{
    dlm_err e;
    model *m = NULL;
    if (model_load(getenv("DLM_MIX_MODEL"), &m, &e)) { fprintf(stderr, "%s\n", e.msg); return 1; }
    lora *a = NULL, *b = NULL;
    CHECK_MSG(adapter_load(getenv("DLM_MIX_A"), m, &a, &e) == 0, "%s", e.msg);
    CHECK_MSG(adapter_load(getenv("DLM_MIX_B"), m, &b, &e) == 0, "%s", e.msg);
    double wa = 0, wb = 0;
    CHECK(sscanf(getenv("DLM_MIX_W"), "%lf,%lf", &wa, &wb) == 2);
    char *ids_text, *lg;
    size_t il, ll;
    if (fs_read_all(getenv("DLM_MIX_IDS"), 1 << 20, &ids_text, &il, &e) ||
        fs_read_all(getenv("DLM_MIX_LOGITS"), 1u << 30, &lg, &ll, &e)) { fprintf(stderr, "%s\n", e.msg); return 1; }
    json_t *arr = json_loads(ids_text, 0, NULL);
    int T = (int)json_array_size(arr), V = m->cfg.vocab;
    int32_t ids[512];
    for (int i = 0; i < T && i < 512; i++) ids[i] = (int32_t)json_integer_value(json_array_get(arr, (size_t)i));
    CHECK_INT((int64_t)ll, (int64_t)T * V * 4);
    lora *x = a && b ? mix(m, a, b, wa, wb) : NULL;
    float *out = logits(m, x, ids, T);
    double d = maxdiff(out, (const float *)lg, (size_t)T * V);
    CHECK_MSG(d <= 1e-4, "mixed logits vs torch: max abs err %.3g", d);
    printf("mix %.2f/%.2f (r %d + %d): %d positions, max abs err vs torch %.3g\n", wa, wb, a ? a->cfg.rank : 0,
           b ? b->cfg.rank : 0, T, d);
    free(out); free(ids_text); free(lg);
    json_decref(arr);
    lora_free(x); lora_free(a); lora_free(b);
    model_free(m);
    return check_done();
}

int main(void)
{
    log_set_level(LOG_QUIET);
    kern_init(2);
    if (getenv("DLM_MIX_MODEL")) return reference();
    unit();
    return check_done();
}
