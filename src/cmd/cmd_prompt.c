/* dlm prompt — generate from the document's current adapter (or a bare
 * base), streaming tokens to stdout as they come. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "adapter/adapter.h"
#include "cmd/commands.h"
#include "export/admix.h"
#include "run/gate_run.h"
#include "store/store.h"
#include "infer/generate.h"
#include "infer/target.h"
#include "kern/kern.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/str.h"

typedef struct prompt_args {
    int max_tokens, top_k, seed, raw, no_adapter, json, threads, offline, accept;
    double temp, top_p, min_p, repeat;
    const char *base, *adapter, *mix, *gate;
} prompt_args;

static const opt OPTS[] = {
    {"base", 0, OPT_STR, offsetof(prompt_args, base), "BASE", "use this base (without PATH: no document, no adapter)"},
    {"max-tokens", 'n', OPT_INT, offsetof(prompt_args, max_tokens), "N", "tokens to generate (256)"},
    {"temp", 't', OPT_DOUBLE, offsetof(prompt_args, temp), "T", "temperature; 0 = greedy (default 0.7)"},
    {"top-p", 0, OPT_DOUBLE, offsetof(prompt_args, top_p), "P", "nucleus sampling (1 = off)"},
    {"top-k", 0, OPT_INT, offsetof(prompt_args, top_k), "K", "top-k sampling (0 = off)"},
    {"min-p", 0, OPT_DOUBLE, offsetof(prompt_args, min_p), "P", "min-p sampling (0 = off)"},
    {"repeat-penalty", 0, OPT_DOUBLE, offsetof(prompt_args, repeat), "R", "repetition penalty (1 = off)"},
    {"seed", 0, OPT_INT, offsetof(prompt_args, seed), "N", "sampling seed (42)"},
    {"raw", 0, OPT_FLAG, offsetof(prompt_args, raw), NULL, "continue the text as is, no chat template"},
    {"adapter", 0, OPT_STR, offsetof(prompt_args, adapter), "NAME", "one adapter of training.adapters (default: all, equal weights)"},
    {"adapter-mix", 0, OPT_STR, offsetof(prompt_args, mix), "NAME:W,...", "named adapters with these weights (Σ wᵢ·sᵢ·BᵢAᵢ)"},
    {"gate", 0, OPT_STR, offsetof(prompt_args, gate), "auto|off", "training.gate: weights from the trained gate (auto, default) or equal (off)"},
    {"no-adapter", 0, OPT_FLAG, offsetof(prompt_args, no_adapter), NULL, "the base alone, even if an adapter is trained"},
    {"threads", 0, OPT_INT, offsetof(prompt_args, threads), "N", "compute threads (default: all cores)"},
    {"offline", 0, OPT_FLAG, offsetof(prompt_args, offline), NULL, "never download the base"},
    {"i-accept-license", 0, OPT_FLAG, offsetof(prompt_args, accept), NULL, "accept a gated base's license for this run"},
    {"json", 0, OPT_FLAG, offsetof(prompt_args, json), NULL, "print {text, tokens, prompt_tokens, stop} as JSON instead of streaming"},
    {0},
};

const cmd_spec spec_prompt = {
    "prompt", "[PATH] [QUERY | -] [--max-tokens N] [--temp T] [--raw] [--base B]",
    "generate text with the document's trained adapter",
    "QUERY is one user turn rendered with the base's chat template and the document's\n"
    "system_prompt; '-' or no QUERY reads it from stdin. --raw continues plain text.",
    OPTS,
};

/* A document with training.adapters and no --adapter: the adapters mixed
 * as Σ wᵢ·sᵢ·BᵢAᵢ (export/admix.h's exact linear stacking), with the
 * --adapter-mix weights or equal ones over every trained adapter. Adapters
 * without a trained version are left out of the equal mix (said on stderr). */
static int named_mix(infer_target *t, const char *mix, const char *query, int gate_auto, lora **out, int *n_used,
                     admix_spec *used, dlm_err *e)
{
    const doc_training *tr = &doc_fm(t->doc)->training;
    admix_spec sp;
    memset(&sp, 0, sizeof sp);
    if (mix) {
        if (admix_parse(mix, &sp, e)) return -1;
        for (int i = 0; i < sp.n; i++)
            if (doc_adapter_index(doc_fm(t->doc), sp.src[i]) < 0)
                return doc_scope_adapter(t->doc, sp.src[i], e);   /* its UnknownAdapterError */
    } else if (gate_auto) {
        /* the trained gate's weights for this prompt (or its uniform mode) */
        const char *names[GATE_MAX];
        int trained;
        if (tr->n_adapters > ADMIX_MAX) return err_set(e, "PromptError", "more than %d adapters: use --adapter-mix", ADMIX_MAX);
        for (int i = 0; i < tr->n_adapters; i++) {
            names[i] = tr->adapters[i].name;
            snprintf(sp.src[i], sizeof sp.src[0], "%s", names[i]);
        }
        sp.n = tr->n_adapters;
        if (gate_weights(t, query, names, sp.n, sp.w, &trained, e)) return -1;
    } else {
        for (int i = 0; i < tr->n_adapters; i++) {
            int v = store_current_version_of(t->store, tr->adapters[i].name, NULL);
            if (v <= 0) {
                fprintf(stderr, "note: adapter %s has no trained version; left out\n", tr->adapters[i].name);
                continue;
            }
            if (sp.n == ADMIX_MAX) return err_set(e, "PromptError", "more than %d trained adapters: use --adapter-mix", ADMIX_MAX);
            snprintf(sp.src[sp.n++], sizeof sp.src[0], "%s", tr->adapters[i].name);
        }
        for (int i = 0; i < sp.n; i++) sp.w[i] = 1.0 / sp.n;
    }
    *n_used = sp.n;
    *used = sp;
    if (!sp.n) return 0;
    lora *ls[ADMIX_MAX] = {0};
    int rc = -1;
    for (int i = 0; i < sp.n; i++) {
        char ad[4200], dir[4300], vn[16];
        int v = store_current_version_of(t->store, sp.src[i], e);
        if (v < 0) goto done;
        if (!v) {
            err_set(e, "PromptError", "adapter %s has no trained version", sp.src[i]);
            err_hint(e, "train it: dlm train %s --adapter %s", doc_path(t->doc), sp.src[i]);
            goto done;
        }
        store_version_name(v, vn, sizeof vn);
        if (store_adapter_dir(t->store, sp.src[i], ad, sizeof ad, e)) goto done;
        snprintf(dir, sizeof dir, "%s/versions/%s", ad, vn);
        if (adapter_load(dir, t->m, &ls[i], e)) goto done;
    }
    rc = admix_build(t->m, ls, sp.w, sp.n, ADMIX_LINEAR, out, NULL, e);
done:
    for (int i = 0; i < sp.n; i++) lora_free(ls[i]);
    return rc;
}

static volatile int g_cancel;
static void on_int(int sig) { (void)sig; g_cancel = 1; }

static int emit(void *ctx, const char *s, size_t n)
{
    (void)ctx;
    fwrite(s, 1, n, stdout);
    fflush(stdout);
    return 0;
}

static char *read_stdin(void)
{
    strbuf sb = STRBUF_INIT;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, stdin)) > 0) sb_append(&sb, buf, n);
    return sb_detach(&sb, NULL);
}

int cmd_prompt(int argc, char **argv, dlm_ctx *ctx)
{
    prompt_args a = {.max_tokens = 256, .seed = 42, .temp = NAN, .top_p = 1.0, .min_p = 0.0, .repeat = 1.0};
    char *pos[64];
    int npos;
    int r = opts_parse(&spec_prompt, argc, argv, ctx, &a, pos, &npos);
    if (r) return r == 1 ? EXIT_OK : EXIT_USAGE;
    dlm_err e;
    err_clear(&e);
    if (cmd_setup(ctx, &e)) return cmd_fail(ctx, &e);
    const char *doc = NULL, *query = NULL;
    if (a.base) {
        /* --base B [QUERY]  or  --base B PATH QUERY */
        if (npos == 2) { doc = pos[0]; query = pos[1]; }
        else if (npos == 1) query = pos[0];
        else if (npos > 2) return cmd_usage_error(&spec_prompt, "too many arguments");
    } else {
        if (npos < 1) return cmd_usage_error(&spec_prompt, "prompt needs a PATH (or --base B)");
        doc = pos[0];
        if (npos == 2) query = pos[1];
        if (npos > 2) return cmd_usage_error(&spec_prompt, "too many arguments (quote the query)");
    }
    if (a.max_tokens < 1) return cmd_usage_error(&spec_prompt, "--max-tokens must be >= 1");
    char *owned = NULL;
    if (!query || !strcmp(query, "-")) {
        owned = read_stdin();
        query = owned;
        if (!query || !*query) { free(owned); return cmd_usage_error(&spec_prompt, "empty query"); }
    }
    if (cmd_check_license(ctx, doc, a.base, a.accept, 0, &e)) { free(owned); return cmd_fail(ctx, &e); }
    kern_init(a.threads);
    if ((a.adapter || a.mix) && (a.no_adapter || !doc)) {
        free(owned);
        return cmd_usage_error(&spec_prompt, "--adapter/--adapter-mix need a document and no --no-adapter");
    }
    if (a.adapter && a.mix) {
        free(owned);
        return cmd_usage_error(&spec_prompt, "--adapter and --adapter-mix are mutually exclusive");
    }
    target_opts to = {.doc_path = doc, .base = a.base, .home = ctx->home, .use_adapter = !a.no_adapter,
                      .offline = a.offline, .adapter = a.adapter};
    infer_target t;
    if (target_open(&to, &t, &e)) { free(owned); return cmd_fail(ctx, &e); }
    lora *mixed = NULL;
    int rc = EXIT_FAIL, n_mixed = 0;
    if (a.mix && !t.named) {
        err_set(&e, "UnknownAdapterError", "%s declares no training.adapters; --adapter-mix names them", doc);
        err_hint(&e, "mix versions into a file with 'dlm export --adapter-mix'");
        e.code = EXIT_USAGE;
        target_close(&t);
        free(owned);
        return cmd_fail(ctx, &e);
    }
    int gate_auto = 0;
    admix_spec used;
    memset(&used, 0, sizeof used);
    if (a.gate) {
        if (strcmp(a.gate, "auto") && strcmp(a.gate, "off")) {
            target_close(&t);
            free(owned);
            return cmd_usage_error(&spec_prompt, "--gate expects auto or off, got '%s'", a.gate);
        }
        if (!t.named || !doc_fm(t.doc)->training.gate.enabled || a.adapter || a.mix || a.no_adapter) {
            target_close(&t);
            free(owned);
            return cmd_usage_error(&spec_prompt, "--gate applies to a document with training.gate enabled, without"
                                                 " --adapter/--adapter-mix/--no-adapter");
        }
    }
    if (doc && t.named && !t.adapter_name && !a.no_adapter && !a.mix && doc_fm(t.doc)->training.gate.enabled &&
        (!a.gate || !strcmp(a.gate, "auto"))) {
        char gp[4400];
        snprintf(gp, sizeof gp, "%s/adapter/_gate/gate_config.json", t.store);
        gate_auto = fs_is_file(gp);
        if (!gate_auto) fprintf(stderr, "note: no gate trained yet ('dlm train %s' trains it); equal weights\n", doc);
    }
    if (doc && t.named && !t.adapter_name && !a.no_adapter) {
        if (named_mix(&t, a.mix, query, gate_auto, &mixed, &n_mixed, &used, &e)) {
            target_close(&t);
            free(owned);
            return cmd_fail(ctx, &e);
        }
        lora_free(t.l);
        t.l = mixed;   /* owned by t from here: target_close frees it */
        if (!ctx->quiet && used.n) {
            fprintf(stderr, "%s:", gate_auto ? "gate" : "mix");
            for (int i = 0; i < used.n; i++) fprintf(stderr, "%s %s %.3f", i ? "," : "", used.src[i], used.w[i]);
            fprintf(stderr, "\n");
        }
    }
    if (doc && !t.l && !a.no_adapter) fprintf(stderr, "note: no trained adapter yet; answering with the base\n");
    strbuf text = STRBUF_INIT;
    tok_ids ids = {0};
    session *s = NULL;
    int32_t *out = NULL;
    if (a.raw) {
        if (tok_encode_append(t.t, query, strlen(query), TOK_PARSE_SPECIAL | TOK_ADD_SPECIAL, &ids, &e)) goto done;
    } else {
        if (!t.dialect) {
            err_set(&e, "PromptError", "the base has no chat template dlm can render");
            err_hint(&e, "use --raw to continue plain text");
            goto done;
        }
        chat_msg m = {"user", query};
        if (chat_render(t.dialect, t.system_prompt, &m, 1, 1, &text, NULL, NULL, &e) ||
            tok_encode_append(t.t, text.buf, text.len, TOK_PARSE_SPECIAL, &ids, &e))
            goto done;
    }
    int ctxlen = t.m->cfg.max_pos > 0 ? t.m->cfg.max_pos : 4096;
    int want = (int)ids.n + a.max_tokens;
    if (want < ctxlen) ctxlen = want;
    if ((int)ids.n >= ctxlen) {
        err_set(&e, "PromptError", "the prompt has %zu tokens; the model's context is %d", ids.n, ctxlen);
        goto done;
    }
    if (session_create(t.m, t.l, ctxlen, 512, &s, &e)) goto done;
    int32_t stops[32];
    gen_opts go;
    sample_defaults(&go.sp);
    go.sp.temp = isnan(a.temp) ? 0.7f : (float)a.temp;
    go.sp.top_k = a.top_k;
    go.sp.top_p = (float)a.top_p;
    go.sp.min_p = (float)a.min_p;
    go.sp.repeat_penalty = (float)a.repeat;
    go.sp.seed = (uint64_t)a.seed;
    go.max_tokens = a.max_tokens;
    go.n_stops = gen_stop_ids(t.t, a.raw || !t.dialect ? NULL : t.dialect->stops, stops, 32);
    go.stops = stops;
    go.emit = a.json ? NULL : emit;
    go.emit_ctx = NULL;
    go.cancel = &g_cancel;
    signal(SIGINT, on_int);
    out = malloc((size_t)a.max_tokens * sizeof(int32_t));
    int nout;
    int32_t stop;
    if (!out) { err_set(&e, "MemoryError", "out of memory"); goto done; }
    if (generate(s, t.t, ids.v, (int)ids.n, &go, out, &nout, &stop, &e)) goto done;
    if (a.json) {
        strbuf dec = STRBUF_INIT;
        tok_decode(t.t, out, (size_t)nout, 1, &dec);
        json_t *arr = json_array(), *pa = json_array();
        for (int i = 0; i < nout; i++) json_array_append_new(arr, json_integer(out[i]));
        for (size_t i = 0; i < ids.n; i++) json_array_append_new(pa, json_integer(ids.v[i]));
        json_t *j = json_pack("{s:s, s:o, s:o, s:o, s:i}", "text", sb_str(&dec), "tokens", arr, "prompt_tokens", pa,
                              "stop", stop >= 0 ? json_integer(stop) : json_null(), "adapter_version", t.version);
        if (used.n) {
            json_t *aw = json_object();
            for (int i = 0; i < used.n; i++) json_object_set_new(aw, used.src[i], json_real(used.w[i]));
            json_object_set_new(j, "adapter_weights", aw);
            json_object_set_new(j, "gate", json_string(gate_auto ? "auto" : "off"));
        }
        strbuf js = STRBUF_INIT;
        json_write(&js, j, JW_SORT);
        printf("%s\n", sb_str(&js));
        sb_free(&js);
        sb_free(&dec);
        json_decref(j);
    } else {
        printf("\n");
    }
    rc = g_cancel ? EXIT_INTERRUPTED : EXIT_OK;
done:
    if (rc == EXIT_FAIL) rc = cmd_fail(ctx, &e);
    free(out);
    session_free(s);
    tok_ids_free(&ids);
    sb_free(&text);
    target_close(&t);
    free(owned);
    return rc;
}
