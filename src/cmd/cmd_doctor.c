/* dlm doctor — the host's capabilities and the memory plan: for a document,
 * the plan `dlm train` will make (buffer by buffer, with refusals and what
 * to change); without one, what fits for every registry base. Offline.
 * `--json` is documented in docs/doctor.md. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/commands.h"
#include "run/doctor.h"
#include "tokens/pipeline.h"
#include "run/dist.h"
#include "run/probe.h"
#include "kern/cpu.h"
#include "kern/kern.h"
#include "store/store.h"
#include "util/log.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/str.h"
#include "version.h"

typedef struct doctor_args {
    int json;
    const char *max_memory;
    int ranks;
} doctor_args;

static const opt OPTS[] = {
    {"json", 0, OPT_FLAG, offsetof(doctor_args, json), NULL, "machine-readable output (docs/doctor.md)"},
    {"max-memory", 0, OPT_STR, offsetof(doctor_args, max_memory), "SIZE", "plan for this budget instead of the host's (e.g. 8G)"},
    {"ranks", 0, OPT_INT, offsetof(doctor_args, ranks), "N", "the plan of one rank of 'mpirun -np N dlm train' (docs/mpi.md)"},
    {0},
};

const cmd_spec spec_doctor = {
    "doctor", "[PATH] [--json] [--max-memory SIZE] [--ranks N]",
    "host capabilities and the memory plan (for a document, or every base)",
    "With PATH: the plan 'dlm train PATH' makes before it loads the weights (micro-batch,\n"
    "grad accumulation, recomputation, threads, the bytes of every buffer), whether it\n"
    "fits the budget, and if not, what to write in the frontmatter. Without PATH: for\n"
    "each registry base, whether it fits and as what (bf16 as published, or a Q8_0 /\n"
    "Q4_K GGUF). The budget is the smaller of MemAvailable and the cgroup limit.\n"
    "Never downloads: a base not on this machine is planned from its registry shape.",
    OPTS,
};

static const char *hs(uint64_t n, char *buf) { return str_human_size(n, buf, 32); }

/* ---- JSON ---------------------------------------------------------------------- */

static const char *default_precision(prec_choice *c);

static json_t *host_json(const host_info *h)
{
    json_t *gpus = json_array();
    for (int i = 0; i < h->n_gpus; i++) json_array_append_new(gpus, json_string(h->gpus[i]));
    json_t *cg = json_pack("{s:i, s:o, s:I, s:I}", "version", h->cgroup_version, "limit_bytes",
                           h->cgroup_limit ? json_integer((json_int_t)h->cgroup_limit) : json_null(), "usage_bytes",
                           (json_int_t)h->cgroup_usage, "inactive_file_bytes", (json_int_t)h->cgroup_inactive_file);
    json_t *amx = json_pack("{s:b, s:b, s:b, s:b, s:s}", "usable", h->amx, "amx_tile", h->amx_tile, "amx_bf16",
                            h->amx_bf16, "amx_int8", h->amx_int8, "reason", h->amx_reason);
    json_t *o = json_pack("{s:s, s:s, s:s, s:i, s:i, s:o, s:i, s:s, s:{s:b, s:b, s:b, s:b, s:b}, s:o, s:s, s:{s:I, s:I, s:I},"
                     " s:I, s:I, s:o, s:I, s:s, s:o, s:o, s:s, s:s, s:s}",
                     "dlm_version", DLM_VERSION, "cpu_model", h->cpu_model, "kernel", h->kernel, "cores_online",
                     h->cores_online, "cores_physical", h->cores_physical, "cores_quota",
                     h->cores_quota ? json_integer(h->cores_quota) : json_null(), "cores_usable", h->cores_usable,
                     "isa", h->isa, "isa_flags", "avx2", h->avx2, "avx512", h->avx512, "avx512_bf16", h->avx512bf16,
                     "vnni", h->vnni, "f16c", h->f16c, "amx", amx, "dispatch_level", cpu_level_name(cpu_level()), "caches", "l1d",
                     (json_int_t)h->l1d, "l2", (json_int_t)h->l2, "l3", (json_int_t)h->l3, "ram_total_bytes",
                     (json_int_t)h->ram_total, "ram_available_bytes", (json_int_t)h->ram_available, "cgroup", cg,
                     "budget_bytes", (json_int_t)h->budget, "budget_from", h->budget_from, "disk_free_bytes",
                     h->disk_free ? json_integer((json_int_t)h->disk_free) : json_null(), "gpus", gpus,
                     "compute", "cpu", "determinism_class", h->determinism, "disk_path", h->disk_path);
    prec_choice pc;
    json_object_set_new(o, "precision_default", json_string(default_precision(&pc)));
    char bf[96];
    kern_bf16_describe(bf, sizeof bf);
    json_object_set_new(o, "bf16_backend", json_pack("{s:s, s:s}", "name", kern_bf16_backend_name(kern_bf16_backend()),
                                                     "describe", bf));
    return o;
}

/* training.precision null on this host (run/precision.h) */
static const char *default_precision(prec_choice *c)
{
    prec_cpu pc;
    dlm_err e;
    precision_cpu_probe(&pc);
    if (precision_decide(DOC_PREC_AUTO, &pc, c, &e)) return "fp32";
    return c->name;
}

static json_t *precision_json(const doctor_doc *d)
{
    return json_pack("{s:s, s:o, s:o, s:o}", "requested", d->prec_asked, "used",
                     d->prec_refused[0] ? json_null() : json_string(d->prec.name), "how",
                     d->prec_refused[0] ? json_null() : json_string(d->prec.how), "refused",
                     d->prec_refused[0] ? json_string(d->prec_refused) : json_null());
}

static json_t *plan_json(const plan *p, const plan_in *in)
{
    json_t *items = json_array();
    for (int i = 0; i < p->n_items; i++)
        json_array_append_new(items, json_pack("{s:s, s:I}", "name", p->items[i].name, "bytes",
                                               (json_int_t)p->items[i].bytes));
    json_t *rec = p->fits ? json_null()
                : p->rec_seq ? json_pack("{s:i, s:i, s:i, s:s, s:I}", "micro_batch_size", p->rec_mb, "grad_accum",
                                         p->rec_ga, "sequence_len", p->rec_seq, "recompute", "on", "total_bytes",
                                         (json_int_t)p->rec_total)
                             : json_null();
    json_t *j = json_pack("{s:b, s:I, s:I, s:i, s:i, s:i, s:b, s:i, s:i, s:I, s:I, s:I, s:I, s:o, s:s, s:o, s:o, s:o}",
                     "fits", p->fits, "total_bytes", (json_int_t)p->total, "budget_bytes", (json_int_t)in->budget,
                     "micro_batch_size", p->mb, "grad_accum", p->ga, "effective_batch_size", p->mb * p->ga,
                     "recompute", p->recompute, "threads", p->threads, "sequence_len", p->T, "trainable_params",
                     (json_int_t)p->params, "activation_bytes_per_token", (json_int_t)p->act_token,
                     "activation_bytes_per_token_recompute", (json_int_t)p->act_token_rc, "attention_scratch_bytes",
                     (json_int_t)p->attn_scratch, "items", items, "reason", p->fits ? "" : p->reason,
                     "recommendation", rec, "q4_k_total_bytes",
                     p->q4k_total ? json_integer((json_int_t)p->q4k_total) : json_null(), "base",
                     json_pack("{s:s, s:I, s:I, s:b, s:i, s:i, s:i}", "stored_type",
                               in->base.wtype >= 0 ? dtype_name((dtype)in->base.wtype) : "unknown", "tensor_bytes",
                               (json_int_t)in->base.tensor_bytes, "copy_bytes", (json_int_t)in->base.copy_bytes,
                               "tied", in->base.cfg.tied, "layers", in->base.cfg.n_layer, "d_model",
                               in->base.cfg.d_model, "vocab", in->base.cfg.vocab));
    if (in->vl_images)   /* a Qwen2-VL base's images (run/vl_run.h) */
        json_object_set_new(j, "images", json_pack("{s:i, s:I, s:I, s:I}", "count", in->vl_images, "image_tokens",
                                                   (json_int_t)in->vl_image_tokens, "tower_bytes",
                                                   (json_int_t)in->vl_tower_bytes, "feature_bytes",
                                                   (json_int_t)in->vl_feature_bytes));
    return j;
}

/* ---- text ---------------------------------------------------------------------- */

static void print_host(const host_info *h)
{
    char a[32], b[32], c[32];
    printf("dlm %s on %s\n", DLM_VERSION, h->kernel[0] ? h->kernel : "Linux");
    printf("cpu:     %s\n", h->cpu_model[0] ? h->cpu_model : "unknown");
    printf("cores:   %d usable (%d online, %d physical", h->cores_usable, h->cores_online, h->cores_physical);
    if (h->cores_quota) printf(", cgroup quota %d", h->cores_quota);
    printf(")\n");
    printf("isa:     %s; kernels dispatch %s\n", h->isa, cpu_level_name(cpu_level()));
    printf("amx:     %s (%s)\n", h->amx ? "yes" : "no", h->amx_reason);
    printf("caches:  L1d %s, L2 %s, L3 %s\n", hs(h->l1d, a), hs(h->l2, b), hs(h->l3, c));
    printf("memory:  %s total, %s available", hs(h->ram_total, a), hs(h->ram_available, b));
    if (h->cgroup_limit)
        printf("; cgroup v%d limit %s (using %s)", h->cgroup_version, hs(h->cgroup_limit, c), hs(h->cgroup_usage, a));
    printf("\nbudget:  %s (%s)\n", hs(h->budget, a), h->budget_from);
    if (h->disk_free) printf("disk:    %s free at %s\n", hs(h->disk_free, a), h->disk_path);
    if (h->n_gpus) {
        printf("gpus:    ");
        for (int i = 0; i < h->n_gpus; i++) printf("%s%s", i ? ", " : "", h->gpus[i]);
        printf(" (dlm trains on the CPU)\n");
    } else printf("gpus:    none (dlm trains on the CPU)\n");
    printf("determinism: %s (same bytes for any thread count)\n", h->determinism);
    prec_choice pc;
    default_precision(&pc);
    char bf[96];
    kern_bf16_describe(bf, sizeof bf);
    printf("bf16:    %s\n", bf);
    printf("precision: %s; bf16 %s\n", pc.how,
           pc.bf16 ? "is the default here"
                   : "would be emulated here (no AMX or AVX512-BF16): its numerics, no faster");
    printf("mpi:     %s\n", dist_compiled() ? "built in: 'mpirun -np N dlm train' shares each step's micro-batches"
                                             " (grad_accum is per rank; 'dlm doctor PATH --ranks N': one rank's plan)"
                                           : "not built in ('make mpi' builds build-mpi/dlm)");
}

static void print_plan_items(const doctor_doc *d, const plan *p);

static void print_doc_plan(const doctor_doc *d, const char *path)
{
    const plan *p = &d->p;
    char a[32], b[32], c[32];
    printf("\nplan for %s", path);
    if (d->adapter[0]) {   /* a named adapter: its own sections and LoRA shape */
        const lora_config *lc = &d->in.lora;
        printf(", adapter %s (r %d, alpha %g, %s", d->adapter, lc->rank, (double)lc->alpha, lc->dora ? "dora, " : "");
        for (int m = 0, k = 0; m < LM_COUNT; m++)
            if (lc->targets >> m & 1) printf("%s%s", k++ ? "," : "", lora_module_name(m));
        printf(")");
    }
    printf(", phase sft (base %s%s)\n", d->base_spec,
           d->from_files ? "" : ", not downloaded: registry shape, bf16 as published");
    if (d->in.ranks > 1)
        printf("  one rank of %d (mpirun -np %d): the figures are per rank; each step takes %d micro-batches in all\n",
               d->in.ranks, d->in.ranks, d->in.ranks * p->ga);
    if (d->from_files)
        printf("  dataset: %d train + %d validation items, %lld tokens (%lld with a loss), longest %d of"
               " sequence_len %d\n", d->n_train, d->n_val, (long long)d->tokens, (long long)d->loss_tokens, p->T,
               d->seq_cfg);
    if (d->in.vl_images)   /* a Qwen2-VL base (docs/images.md) */
        printf("  images: %d, %lld image tokens; their features are computed once by the frozen tower and kept"
               " in the store's vl-cache/\n", d->in.vl_images, (long long)d->in.vl_image_tokens);
    if (d->from_files && d->split) {   /* the split, and every row it holds out (as train says it) */
        printf("  %s\n", d->split_line);
        const json_t *ho = json_object_get(d->split, "held_out");
        for (size_t i = 0; i < json_array_size(ho); i++) {
            const json_t *r = json_array_get(ho, i);
            held_desc hd = {.kind = jget_str(r, "kind"), .file = jget_str(r, "file"),
                            .line = (int)json_integer_value(json_object_get(r, "line"))};
            snprintf(hd.text, sizeof hd.text, "%s", jget_str(r, "text"));
            char buf[1024];
            pipeline_held_format(&hd, buf, sizeof buf);
            printf("    held out: %s\n", buf);
        }
        if (json_array_size(ho))
            printf("    to train on every row: write training.val_frac: 0 in the frontmatter\n");
    }
    if (d->replay_sections)
        printf("  replay: %d sections in the corpus; train adds a sample of them (not counted here)\n",
               d->replay_sections);
    if (d->from_files) {
        const cpt_choice *cc = &d->cpt;
        const optim_config *oc = &d->optim;
        /* train's replay sample counts in its fraction too (not known here) */
        printf("  schedule: %s (training.cpt.schedule %s; %d prose + %d Q/A train rows%s, %.0f%% prose%s): ",
               cc->dapt ? "dapt" : "sft", cc->setting, cc->text_rows, cc->msg_rows,
               d->replay_sections ? " before replay" : "", 100.0 * cc->fraction,
               strcmp(cc->setting, "auto") ? "" : cc->dapt ? " > 70%" : " <= 70%");
        if (oc->sched == SCHED_COSINE_MIN_LR)
            printf("cosine to %g x lr", oc->min_lr_ratio);
        else
            printf("%s", oc->sched == SCHED_LINEAR ? "linear" : oc->sched == SCHED_CONSTANT ? "constant" : "cosine");
        printf(", lr %g, warmup %lld of %lld steps (--max-steps shortens both)\n", oc->lr,
               (long long)optim_warmup_steps(oc), (long long)oc->total_steps);
        if (cc->embed_warmup_steps > 0)
            printf("  embed warm-up: steps 1..%lld train the embedding and LM head with the LoRA weights (saved"
                   " as modules_to_save; frozen afterwards)\n", (long long)cc->embed_warmup_steps);
        if (d->tag_dropped || d->tag_extra)
            printf("  tag weights: %d row(s) dropped, %d copies added\n", d->tag_dropped, d->tag_extra);
    }
    if (d->prec_refused[0]) printf("  precision: refused: %s\n", d->prec_refused);
    else printf("  precision: %s (training.precision %s)\n", d->prec.how, d->prec_asked);
    printf("  choice: micro_batch_size %d x grad_accum %d (effective %d), recompute %s, %d threads, base stays %s\n",
           p->mb, p->ga, p->mb * p->ga, p->recompute ? "on" : "off", p->threads,
           d->in.base.wtype >= 0 ? dtype_name((dtype)d->in.base.wtype) : "as stored");
    printf("  activations: %s per token kept without recomputation, %s with; attention scratch %s\n",
           hs(p->act_token, a), hs(p->act_token_rc, b), hs(p->attn_scratch, c));
    printf("  trainable parameters: %llu\n", (unsigned long long)p->params);
    print_plan_items(d, p);
    if (d->pref_triples && !d->pref_enabled)
        printf("\nphase preference: not planned (%d triples; training.preference.enabled is false)\n",
               d->pref_triples);
    if (!d->pref_planned) return;
    const plan *q = &d->pref_p;
    printf("\nplan for %s%s%s, phase preference (%s): %d pairs, 2 sequences per pair (chosen + rejected rows),"
           " longest %d\n", path, d->adapter[0] ? ", adapter " : "", d->adapter, d->pref_method, d->pref_pairs, q->T);
    printf("  choice: micro_batch_size %d pairs (%d rows) x grad_accum %d, recompute %s; the reference pass"
           " reuses these buffers (forward only)\n", q->mb, 2 * q->mb, q->ga, q->recompute ? "on" : "off");
    print_plan_items(d, q);
}

static void print_plan_items(const doctor_doc *d, const plan *p)
{
    char a[32];
    for (int i = 0; i < p->n_items; i++) printf("    %-52s %12s\n", p->items[i].name, hs(p->items[i].bytes, a));
    printf("    %-52s %12s\n", "total (predicted peak RSS)", hs(p->total, a));
    printf("  budget: %s (%s): %s\n", hs(d->budget, a), d->budget_from,
           p->fits ? "fits" : "DOES NOT FIT");
    if (!p->fits) {
        printf("  refusal: %s\n", p->reason);
        if (p->rec_seq)
            printf("  write in the frontmatter: training: {micro_batch_size: %d, grad_accum: %d, sequence_len: %d,"
                   " recompute: on} (needs %s)\n", p->rec_mb, p->rec_ga, p->rec_seq, hs(p->rec_total, a));
    }
}

static void print_rows(const doctor_row *rows, int n, uint64_t budget)
{
    char a[32];
    printf("\nbases (default training settings: LoRA r 8 on q,k,v,o; budget %s):\n", hs(budget, a));
    for (int i = 0; i < n; i++) {
        const doctor_row *r = &rows[i];
        if (!r->trainable) {
            printf("  %-26s -  %s\n", r->entry->key, r->note);
            continue;
        }
        const plan *p = &r->p;
        char tname[40];
        snprintf(tname, sizeof tname, "%s%s", r->wtype >= 0 ? dtype_name((dtype)r->wtype) : "?",
                 r->gguf ? " GGUF" : "");
        if (r->fits)
            printf("  %-26s fits as %-10s mb %d x ga %d, recompute %s, seq %d: %s\n", r->entry->key, tname, p->mb,
                   p->ga, p->recompute ? "on " : "off", r->seq, hs(p->total, a));
        else
            printf("  %-26s does not fit: %s\n", r->entry->key, p->reason);
    }
}

int cmd_doctor(int argc, char **argv, dlm_ctx *ctx)
{
    doctor_args a = {0};
    char *pos[64];
    int npos;
    int r = opts_parse(&spec_doctor, argc, argv, ctx, &a, pos, &npos);
    if (r) return r == 1 ? EXIT_OK : EXIT_USAGE;
    if (npos > 1) return cmd_usage_error(&spec_doctor, "doctor takes at most one PATH");
    if (a.ranks < 0 || a.ranks > 65536) return cmd_usage_error(&spec_doctor, "--ranks expects 1 to 65536, got %d", a.ranks);
    unsigned long long maxmem = 0;
    if (a.max_memory && (str_parse_size(a.max_memory, &maxmem) || !maxmem))
        return cmd_usage_error(&spec_doctor, "--max-memory expects a size like 8G or 512M, got '%s'", a.max_memory);
    dlm_err e;
    err_clear(&e);
    if (cmd_setup(ctx, &e)) return cmd_fail(ctx, &e);
    host_info h;
    probe_host(&h, ctx->home[0] && fs_is_dir(ctx->home) ? ctx->home : "/");
    uint64_t budget = maxmem ? maxmem : h.budget;
    if (npos == 1) {
        /* a document of named adapters: one plan per adapter, each with its
         * own sections and LoRA shape, as `dlm train` runs them
         * (run/doctor.h); the top-level plan is the largest of them. A
         * document that does not load is the one error printed. */
        dlm_doc *nd = doc_load(pos[0], &e);
        if (!nd) return cmd_fail(ctx, &e);
        /* doctor reports a gated base's license; the refusal is train's */
        dlm_err le;
        err_clear(&le);
        if (cmd_check_license(ctx, pos[0], NULL, 0, 0, &le)) {
            char where[8192];
            err_format(&le, where, sizeof where);
            log_warn("%s", where);
            if (le.hint[0] && log_level() != LOG_QUIET) fprintf(stderr, "hint: %s\n", le.hint);
        }
        const doc_training *ntr = &doc_fm(nd)->training;
        int na = ntr->adapters ? ntr->n_adapters : 0, top = 0;
        doctor_doc *ds = calloc((size_t)(na ? na : 1), sizeof *ds);
        if (!ds) { doc_free(nd); err_set(&e, "MemoryError", "out of memory"); return cmd_fail(ctx, &e); }
        for (int i = 0; i < (na ? na : 1); i++) {
            if (doctor_plan_document(pos[0], ctx->home, &h, maxmem, na ? ntr->adapters[i].name : NULL, &ds[i], &e)) {
                free(ds);
                doc_free(nd);
                return cmd_fail(ctx, &e);
            }
            if (a.ranks > 1) { /* one rank of an MPI job keeps each of its micro-batches' gradients */
                ds[i].in.ranks = a.ranks;
                ds[i].fits = plan_make(&ds[i].in, &ds[i].p) == 0;
            }
            if (ds[i].p.total > ds[top].p.total) top = i;
        }
        doctor_doc *dp = &ds[top];
        if (a.json) {
            json_t *o = json_pack("{s:o, s:{s:s, s:s, s:s, s:b, s:i, s:i, s:i, s:I, s:I, s:i}, s:o, s:o}",
                                  "capabilities", host_json(&h), "document", "path", pos[0], "base", dp->base_spec,
                                  "model_path", dp->model_path, "planned_from_files", dp->from_files, "sequence_len",
                                  dp->seq_cfg, "train_items", dp->n_train, "val_items", dp->n_val, "tokens",
                                  (json_int_t)dp->tokens, "loss_tokens", (json_int_t)dp->loss_tokens, "replay_sections",
                                  dp->replay_sections, "plan", plan_json(&dp->p, &dp->in), "plan_error",
                                  dp->fits ? json_null() : json_string(dp->p.reason));
            json_object_set_new(json_object_get(o, "document"), "adapters", adapters_view_json(nd, ctx->home));
            json_object_set_new(json_object_get(o, "document"), "gate", adapters_view_gate_json(nd, ctx->home));
            json_t *aps = na ? json_array() : json_null();
            for (int i = 0; i < na; i++) {
                const doctor_doc *x = &ds[i];
                json_t *tg = json_array();
                for (int m = 0; m < LM_COUNT; m++)
                    if (x->in.lora.targets >> m & 1) json_array_append_new(tg, json_string(lora_module_name(m)));
                json_t *ap = json_pack("{s:s, s:{s:i, s:f, s:f, s:o, s:b}, s:i, s:i, s:I, s:I, s:i, s:o, s:o}",
                                       "adapter", x->adapter, "lora", "r", x->in.lora.rank, "alpha",
                                       (double)x->in.lora.alpha, "dropout", (double)x->in.lora.dropout, "target_modules",
                                       tg, "dora", x->in.lora.dora, "train_items", x->n_train, "val_items", x->n_val,
                                       "tokens", (json_int_t)x->tokens, "loss_tokens", (json_int_t)x->loss_tokens,
                                       "replay_sections", x->replay_sections, "plan", plan_json(&x->p, &x->in),
                                       "plan_error", x->fits ? json_null() : json_string(x->p.reason));
                if (x->pref_planned) json_object_set_new(ap, "preference_plan", plan_json(&x->pref_p, &x->pref_in));
                json_array_append_new(aps, ap);
            }
            json_object_set_new(o, "adapter_plans", aps);
            if (dp->from_files) {
                json_object_set_new(o, "cpt", cpt_json(&dp->cpt, &dp->optim));
                json_object_set_new(o, "tag_weights", json_pack("{s:i, s:i}", "rows_dropped", dp->tag_dropped,
                                                                "copies_added", dp->tag_extra));
            }
            if (dp->pref_planned) {
                json_object_set_new(o, "preference_plan", plan_json(&dp->pref_p, &dp->pref_in));
                json_object_set_new(o, "preference", json_pack("{s:s, s:i, s:b}", "method", dp->pref_method, "pairs",
                                                               dp->pref_pairs, "fits", dp->pref_fits));
            }
            json_object_set_new(json_object_get(o, "document"), "precision", precision_json(dp));
            if (dp->split) json_object_set(json_object_get(o, "document"), "validation", dp->split);
            cmd_print_json(o);
        } else {
            print_host(&h);
            for (int i = 0; i < (na ? na : 1); i++) print_doc_plan(&ds[i], pos[0]);
            json_t *av = adapters_view_json(nd, ctx->home), *gv = adapters_view_gate_json(nd, ctx->home);
            adapters_view_print(av, gv);
            json_decref(gv);
            json_decref(av);
        }
        for (int i = 0; i < (na ? na : 1); i++) json_decref(ds[i].split);
        free(ds);
        doc_free(nd);
        return EXIT_OK;
    }
    doctor_row rows[64];
    int n = doctor_plan_registry(&h, maxmem, rows, 64);
    if (a.json) {
        json_t *arr = json_array();
        for (int i = 0; i < n; i++) {
            const doctor_row *rw = &rows[i];
            plan_in in;
            memset(&in, 0, sizeof in);
            in.budget = budget;
            json_t *o = json_pack("{s:s, s:o, s:I, s:b, s:s, s:b}", "key", rw->entry->key, "hf_id",
                                  rw->entry->hf_id ? json_string(rw->entry->hf_id) : json_null(), "params",
                                  (json_int_t)rw->entry->params, "trainable", rw->trainable, "note", rw->note, "fits",
                                  rw->fits);
            if (rw->trainable) {
                json_object_set_new(o, "stored_type", json_string(rw->wtype >= 0 ? dtype_name((dtype)rw->wtype) : "?"));
                json_object_set_new(o, "as_gguf", json_boolean(rw->gguf));
                json_object_set_new(o, "must_quantize", json_boolean(rw->fits && rw->gguf));
                json_object_set_new(o, "sequence_len", json_integer(rw->seq));
                json_object_set_new(o, "micro_batch_size", json_integer(rw->p.mb));
                json_object_set_new(o, "grad_accum", json_integer(rw->p.ga));
                json_object_set_new(o, "recompute", json_boolean(rw->p.recompute));
                json_object_set_new(o, "total_bytes", json_integer((json_int_t)rw->p.total));
                json_object_set_new(o, "reason", rw->fits ? json_null() : json_string(rw->p.reason));
            }
            json_array_append_new(arr, o);
        }
        cmd_print_json(json_pack("{s:o, s:o, s:n, s:n}", "capabilities", host_json(&h), "bases", arr, "plan", "plan_error"));
    } else {
        print_host(&h);
        print_rows(rows, n, budget);
        printf("\n'dlm doctor PATH' plans a document exactly as 'dlm train PATH' will.\n");
    }
    return EXIT_OK;
}
