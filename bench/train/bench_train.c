/* bench_train — one LoRA training configuration timed the way the PyTorch
 * peer (../shared/bench/torch_lora_peer.py --mode train) times it: a
 * random-weight f32 model of a real shape, LoRA rank R on the chosen
 * projections, B×T random tokens, forward + backward + clip + AdamW per
 * step; warmup steps untimed; prints one line
 *   RESULT {"shape":..., "tokens_per_s_median":..., "step_s_median":..., "peak_rss_mb":...}
 *
 * usage: bench_train SHAPE [--seq T] [--batch B] [--rank R] [--steps N] [--warmup W]
 *        [--threads N] [--targets q,k,v,o,gate,up,down] [--recompute] [--dropout P]
 *        [--base f32|bf16] [--prec fp32|bf16] [--pause FIFO]
 * --base bf16 stores the frozen matrices in bf16, the type the published
 * SmolLM2 / Qwen2.5 checkpoints ship in (dlm trains on a base in its stored
 * type), written straight in bf16 (the f32 slab stays untouched, unmapped),
 * so peak RSS is what a bf16 checkpoint costs.
 * --prec bf16 runs the GEMMs on the bf16 back end (kern_set_bf16), as
 * `dlm train` with training.precision: bf16 does.
 * --pause FIFO writes "ready" to FIFO once the model is built and waits
 * for a line back before the first step (bench/train/perf.sh attaches perf
 * in between, so only the steps are sampled). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "kern/kern.h"
#include "decoder/decoder.h"
#include "grad/backward.h"
#include "grad/full.h"
#include "decoder/lora.h"
#include "grad/optim.h"
#include "util/rng.h"
#include "util/timeutil.h"

typedef struct shape { const char *name; int L, C, F, NH, KVH, V; float theta, eps; int tied, bias; } shape;
static const shape SHAPES[] = {
    {"smollm2-135m", 30, 576, 1536, 9, 3, 49152, 100000.0f, 1e-5f, 1, 0},
    {"smollm2-360m", 32, 960, 2560, 15, 5, 49152, 100000.0f, 1e-5f, 1, 0},
    {"qwen2.5-0.5b", 24, 896, 4864, 14, 2, 151936, 1000000.0f, 1e-6f, 1, 1},
    {"qwen2.5-1.5b", 28, 1536, 8960, 12, 2, 151936, 1000000.0f, 1e-6f, 1, 1},
    {"tiny", 2, 64, 160, 4, 2, 256, 10000.0f, 1e-5f, 1, 0},
};

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    const char *pause_fifo = NULL;   /* --pause FIFO: say ready, wait for a line (perf.sh) */
    if (argc < 2) { fprintf(stderr, "usage: bench_train SHAPE [options]\n"); return 2; }
    const shape *sh = NULL;
    for (size_t i = 0; i < sizeof SHAPES / sizeof SHAPES[0]; i++)
        if (!strcmp(argv[1], SHAPES[i].name)) sh = &SHAPES[i];
    if (!sh) { fprintf(stderr, "unknown shape %s\n", argv[1]); return 2; }
    int T = 512, B = 1, R = 8, steps = 10, warm = 2, threads = 2, recompute = 0;
    float dropout = 0.0f;
    int bf16 = 0, prec_bf16 = 0;
    unsigned targets = LM_ALL;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(a, "--seq")) { T = atoi(v); i++; }
        else if (!strcmp(a, "--batch")) { B = atoi(v); i++; }
        else if (!strcmp(a, "--rank")) { R = atoi(v); i++; }
        else if (!strcmp(a, "--steps")) { steps = atoi(v); i++; }
        else if (!strcmp(a, "--warmup")) { warm = atoi(v); i++; }
        else if (!strcmp(a, "--threads")) { threads = atoi(v); i++; }
        else if (!strcmp(a, "--recompute")) recompute = 1;
        else if (!strcmp(a, "--dropout")) { dropout = (float)atof(v); i++; }
        else if (!strcmp(a, "--base")) { bf16 = !strcmp(v, "bf16"); i++; }
        else if (!strcmp(a, "--pause")) { pause_fifo = v; i++; }
        else if (!strcmp(a, "--prec")) { prec_bf16 = !strcmp(v, "bf16"); i++; }
        else if (!strcmp(a, "--targets")) {
            targets = 0;
            char buf[128];
            snprintf(buf, sizeof buf, "%s", v);
            for (char *t = strtok(buf, ","); t; t = strtok(NULL, ",")) targets |= 1u << lora_module_from_name(t);
            i++;
        } else { fprintf(stderr, "unknown option %s\n", a); return 2; }
    }
    kern_init(threads);
    /* the arithmetic of dlm train: denormals flushed (src/run/trainer.c) */
    (void)kern_fp_flush_enter();
    model_config c = {0};
    c.arch = sh->bias ? ARCH_QWEN2 : ARCH_LLAMA;
    c.n_layer = sh->L; c.d_model = sh->C; c.n_ff = sh->F; c.n_head = sh->NH; c.n_kv_head = sh->KVH;
    c.head_dim = sh->C / sh->NH; c.vocab = sh->V; c.max_pos = 8192; c.rms_eps = sh->eps;
    c.rope_theta = sh->theta; c.tied = sh->tied; c.qkv_bias = sh->bias; c.bos_id = c.eos_id = -1;
    dlm_err e;
    full_model *fm;
    double t0 = time_mono();
    if (full_model_new(&c, &fm, &e)) { fprintf(stderr, "%s\n", e.msg); return 1; }
    /* random weights: a cheap xorshift (a Philox draw per weight would take
     * half a minute for 500M weights and this is not what is measured) */
    uint64_t x = 0x9E3779B97F4A7C15ull;
#define RANDW() (x ^= x << 13, x ^= x >> 7, x ^= x << 17, \
                 0.02f * ((float)(x >> 40) * (1.0f / 16777216.0f) * 3.4641f - 1.7320f)) /* unit variance */
    /* with a bf16 base the f32 matrices are never written (their calloc'd
     * pages stay unmapped), so peak RSS is what a bf16 checkpoint costs */
    if (!bf16)
        for (size_t i = 0; i < fm->n; i++) fm->slab[i] = RANDW();
    full_tensor ts[512];
    int nt = full_tensors(&c, &fm->p, ts);
    for (int i = 0; i < nt; i++)
        if (bf16 && ts[i].cols == 1 && !strstr(ts[i].name, "norm"))     /* biases */
            for (int64_t k = 0; k < ts[i].rows; k++) ts[i].p[k] = RANDW();
    for (int i = 0; i < nt; i++)
        if (ts[i].cols == 1 && strstr(ts[i].name, "norm"))
            for (int64_t k = 0; k < ts[i].rows; k++) ts[i].p[k] = 1.0f + 0.1f * rng_normal(5, 9, (uint64_t)i, (uint64_t)k);
    if (bf16) { /* every matrix straight in bf16 */
        layer_weights *lw = fm->m.layers;
        wmat *ms[8 * 64 + 2];
        int nm = 0;
        ms[nm++] = &fm->m.tok_embd;
        if (!c.tied) ms[nm++] = &fm->m.output;
        for (int l = 0; l < c.n_layer && l < 64; l++) {
            wmat *w7[7] = {&lw[l].wq, &lw[l].wk, &lw[l].wv, &lw[l].wo, &lw[l].w_gate, &lw[l].w_up, &lw[l].w_down};
            for (int k = 0; k < 7; k++) ms[nm++] = w7[k];
        }
        for (int k = 0; k < nm; k++) {
            wmat *w = ms[k];
            size_t n = (size_t)w->rows * (size_t)w->cols;
            uint16_t *h = malloc(n * 2);
            if (!h) { fprintf(stderr, "out of memory\n"); return 1; }
            for (size_t i = 0; i < n; i++) h[i] = f32_to_bf16(RANDW());
            w->type = DT_BF16;
            w->row_bytes = (size_t)w->cols * 2;
            w->data = h;
        }
        if (c.tied) fm->m.output = fm->m.tok_embd;
    }
    lora_config lc = {R, 16.0f, dropout, targets, 0};
    lora *l;
    if (lora_create(&c, &lc, &l, &e) || lora_init(l, &fm->m, 1, &e)) { fprintf(stderr, "%s\n", e.msg); return 1; }
    decoder_opts o = {.B = B, .T = T, .recompute = recompute};
    decoder *f;
    if (decoder_create(&fm->m, l, &o, &f, &e)) { fprintf(stderr, "%s\n", e.msg); return 1; }
    float *g = calloc(l->n, 4), *m = calloc(l->n, 4), *v = calloc(l->n, 4);
    int32_t *tok = malloc((size_t)B * T * 4), *tgt = malloc((size_t)B * T * 4), *pos = malloc((size_t)B * T * 4);
    optim_config oc;
    optim_defaults(&oc);
    oc.lr = 1e-3f;
    oc.warmup_ratio = 0;
    oc.sched = SCHED_CONSTANT;
    double setup = time_mono() - t0;
    if (pause_fifo) {               /* a profiler attaches now */
        FILE *fw = fopen(pause_fifo, "w");
        if (fw) { fputs("ready\n", fw); fclose(fw); }
        FILE *fr = fopen(pause_fifo, "r");
        char line[16];
        if (fr) { if (!fgets(line, sizeof line, fr)) line[0] = 0; fclose(fr); }
    }
    kern_set_bf16(prec_bf16);      /* training.precision: bf16 (the GEMMs of src/run/trainer.c) */
    double *dt = calloc((size_t)steps, sizeof(double));
    double loss = 0;
    for (int s = 0; s < warm + steps; s++) {
        for (int i = 0; i < B * T; i++) {
            tok[i] = (int32_t)(rng_u64(1234, 99, (uint64_t)s, (uint64_t)i) % (uint64_t)c.vocab);
            tgt[i] = (int32_t)(rng_u64(1234, 98, (uint64_t)s, (uint64_t)i) % (uint64_t)c.vocab);
            pos[i] = i % T;
        }
        token_batch b = {.B = B, .T = T, .tokens = tok, .targets = tgt, .pos = pos, .seg = NULL};
        double a = time_mono();
        memset(g, 0, l->n * 4);
        int64_t nl;
        loss = backward_step(f, &b, g, NULL, 1.0f / (float)(B * T), 1, (uint64_t)s, &nl) / (double)nl;
        optim_clip(g, l->n, 1.0f);
        optim_adamw_step(&oc, l->w, g, m, v, l->n, 1e-3, s + 1);
        if (s >= warm) dt[s - warm] = time_mono() - a;
    }
#ifdef DECODER_PROFILE
    { void decoder_profile_dump(double steps); decoder_profile_dump(warm + steps); }
#endif
    qsort(dt, (size_t)steps, sizeof *dt, cmp_d);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double med = dt[steps / 2];
    printf("RESULT {\"impl\":\"dlm\",\"shape\":\"%s\",\"seq\":%d,\"batch\":%d,\"rank\":%d,\"threads\":%d,"
           "\"recompute\":%d,\"dropout\":%g,\"base\":\"%s\",\"steps\":%d,\"step_s_min\":%.4f,\"step_s_median\":%.4f,\"step_s_max\":%.4f,"
           "\"tokens_per_s_median\":%.1f,\"tokens_per_s_max\":%.1f,\"peak_rss_mb\":%.1f,\"setup_s\":%.2f,\"loss\":%.4f,"
           "\"activation_mb\":%.1f}\n",
           sh->name, T, B, R, threads, recompute, (double)dropout, bf16 ? "bf16" : "f32", steps, dt[0], med, dt[steps - 1], (double)B * T / med, (double)B * T / dt[0],
           (double)ru.ru_maxrss / 1024.0, setup, loss, (double)decoder_plan_bytes(&c, &lc, &o) / 1048576.0);
    return 0;
}
