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
#include "run/named_mix.h"
#include "store/store.h"
#include "infer/audio_prompt.h"
#include "infer/generate.h"
#include "media/audio.h"
#include "infer/target.h"
#include "infer/vl_prompt.h"
#include "kern/kern.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/str.h"

typedef struct prompt_args {
    int max_tokens, top_k, seed, raw, no_adapter, json, threads, offline, accept;
    double temp, top_p, min_p, repeat;
    const char *base, *adapter, *mix, *gate, *backend;
    opt_list audio;
    opt_list images;
} prompt_args;

static const opt OPTS[] = {
    {"base", 0, OPT_STR, offsetof(prompt_args, base), "BASE", "use this base (without PATH: no document, no adapter)"},
    {"max-tokens", 'n', OPT_INT, offsetof(prompt_args, max_tokens), "N", "tokens to generate (256)"},
    {"temp", 't', OPT_DOUBLE, offsetof(prompt_args, temp), "T", "temperature [0, 5]; 0 = greedy (default 0.7)"},
    {"top-p", 0, OPT_DOUBLE, offsetof(prompt_args, top_p), "P", "nucleus sampling, (0, 1] (1 = off)"},
    {"top-k", 0, OPT_INT, offsetof(prompt_args, top_k), "K", "top-k sampling, >= 0 (0 = off)"},
    {"min-p", 0, OPT_DOUBLE, offsetof(prompt_args, min_p), "P", "min-p sampling, [0, 1] (0 = off)"},
    {"repeat-penalty", 0, OPT_DOUBLE, offsetof(prompt_args, repeat), "R", "repetition penalty, (0, 100] (1 = off)"},
    {"seed", 0, OPT_INT, offsetof(prompt_args, seed), "N", "sampling seed (42)"},
    {"image", 0, OPT_LIST, offsetof(prompt_args, images), "FILE", "an image for a vision-language base (repeatable; docs/images.md)"},
    {"raw", 0, OPT_FLAG, offsetof(prompt_args, raw), NULL, "continue the text as is, no chat template"},
    {"adapter", 0, OPT_STR, offsetof(prompt_args, adapter), "NAME", "one adapter of training.adapters (default: all, equal weights)"},
    {"adapter-mix", 0, OPT_STR, offsetof(prompt_args, mix), "NAME:W,...", "named adapters with these weights (Σ wᵢ·sᵢ·BᵢAᵢ)"},
    {"gate", 0, OPT_STR, offsetof(prompt_args, gate), "auto|off", "training.gate: weights from the trained gate (auto, default) or equal (off)"},
    {"no-adapter", 0, OPT_FLAG, offsetof(prompt_args, no_adapter), NULL, "the base alone, even if an adapter is trained"},
    {"threads", 0, OPT_THREADS, offsetof(prompt_args, threads), "N", "compute threads (default: all cores)"},
    {"offline", 0, OPT_FLAG, offsetof(prompt_args, offline), NULL, "never download the base"},
    {"i-accept-license", 0, OPT_FLAG, offsetof(prompt_args, accept), NULL, "accept a gated base's license for this run"},
    {"json", 0, OPT_FLAG, offsetof(prompt_args, json), NULL, "print {text, tokens, prompt_tokens, stop} as JSON instead of streaming"},
    {"backend", 0, OPT_STR, offsetof(prompt_args, backend), "auto|pytorch", "the original's backend choice: both run dlm's CPU kernels; mlx is refused"},
    {"audio", 0, OPT_LIST, offsetof(prompt_args, audio), "FILE", "an audio clip for an audio-language base (repeatable; docs/audio.md)"},
    {0},
};

const cmd_spec spec_prompt = {
    "prompt", "[PATH] [QUERY | -] [--max-tokens N] [--temp T] [--raw] [--base B]",
    "generate text with the document's trained adapter",
    "QUERY is one user turn rendered with the base's chat template and the document's\n"
    "system_prompt; '-' or no QUERY reads it from stdin. --raw continues plain text.\n"
    "--image FILE (repeatable) prompts a vision-language base: with QUERY \"\" (or\n"
    "--raw) as the original, the images' tokens and a newline, no chat template (the\n"
    "model continues with a caption, as image sections train it); with a question,\n"
    "one chat turn of the images then the question (as a Q/A after an image trains).\n"
    "--audio FILE (repeatable) puts each clip's <|AUDIO|> tokens in front of the query\n"
    "(\"<|AUDIO|>\\nQUERY\"), or where the query writes <|AUDIO|>, with no chat template,\n"
    "as the original and its training rows do.",
    OPTS,
};

static volatile int g_cancel;
static void on_int(int sig) { (void)sig; g_cancel = 1; }

/* A reader that went away (`dlm prompt ... | head -c 20`) stops the
 * generation; main ends quietly on the closed pipe. */
static int emit(void *ctx, const char *s, size_t n)
{
    (void)ctx;
    if (fwrite(s, 1, n, stdout) != n || fflush(stdout)) return -1;
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

/* --audio: the clips decoded as training decodes them (the document's
 * training.audio.auto_resample) and the prompt built around them. */
static int prompt_audio(const infer_target *t, const opt_list *files, const char *query, audio_prompt *ap, dlm_err *e)
{
    if (!t->m->cfg.audio) {
        err_set(e, "ModalityError", "--audio needs an audio-language base; %s is not one", t->base_spec);
        return err_hint(e, "prompt an audio document (base_model: qwen2-audio-7b-instruct), or leave --audio out");
    }
    audio_feat af;
    if (audio_feat_open(&af, t->model_path, e)) return -1;
    int ar = t->doc ? doc_fm(t->doc)->training.audio.auto_resample : 0, rc = 0, n = files->n;
    audio_wave *w = calloc((size_t)n, sizeof *w);
    const float **x = calloc((size_t)n, sizeof *x);
    size_t *len = calloc((size_t)n, sizeof *len);
    if (!w || !x || !len) rc = err_set(e, "MemoryError", "out of memory");
    for (int i = 0; i < n && !rc; i++) {
        dlm_err ie;
        err_clear(&ie);
        if (audio_load(files->v[i], AUDIO_RATE, AUDIO_MAX_SECONDS, ar, &w[i], &ie)) {
            err_set(e, ie.kind[0] ? ie.kind : "AudioError", "audio '%s': %s", files->v[i], ie.msg);
            err_hint(e, "%s", ie.hint[0] ? ie.hint : "give a WAV, FLAC, OGG or MP3 file libsndfile reads");
            rc = -1;
            break;
        }
        x[i] = w[i].x;
        len[i] = w[i].n;
        if (w[i].n < AUDIO_MIN_SAMPLES) {
            err_set(e, "AudioError", "audio '%s': %zu samples give no audio token (at least %d are needed)",
                    files->v[i], w[i].n, AUDIO_MIN_SAMPLES);
            rc = -1;
        }
    }
    if (!rc) rc = audio_prompt_build(t->t, &af, query, len, n, ap, e) || audio_prompt_embed(ap, &af, x, len, e);
    for (int i = 0; w && i < n; i++) audio_wave_free(&w[i]);
    free(w);
    free(x);
    free(len);
    audio_feat_close(&af);
    return rc;
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
    if (cmd_check_backend(&spec_prompt, a.backend)) return EXIT_USAGE;
    if (a.audio.n && a.images.n)   /* as the original: one modality a prompt */
        return cmd_usage_error(&spec_prompt, "--audio and --image are mutually exclusive");
    if (a.max_tokens < 1) return cmd_usage_error(&spec_prompt, "--max-tokens must be >= 1");
    if ((!isnan(a.temp) && cmd_check_sample(&spec_prompt, "--temp", "temperature", a.temp)) ||
        cmd_check_sample(&spec_prompt, "--top-p", "top_p", a.top_p) ||
        cmd_check_sample(&spec_prompt, "--top-k", "top_k", a.top_k) ||
        cmd_check_sample(&spec_prompt, "--min-p", "min_p", a.min_p) ||
        cmd_check_sample(&spec_prompt, "--repeat-penalty", "repetition_penalty", a.repeat))
        return EXIT_USAGE;
    /* `dlm prompt "a question"`: the question was taken for the document;
     * say that, before waiting on stdin for a query */
    if (doc && !fs_exists(doc)) {
        err_set(&e, "DocumentNotFoundError", "no document '%s'%s", doc,
                query ? "" : ": the first argument is the .dlm document, the query comes second");
        err_hint(&e, "dlm prompt PATH.dlm \"your question\" (or --base B \"your question\" for a bare base)");
        e.code = EXIT_USAGE;
        return cmd_fail(ctx, &e);
    }
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
    int rc = EXIT_FAIL;
    if (a.mix && !t.named) {
        err_set(&e, "UnknownAdapterError", "%s declares no training.adapters; --adapter-mix names them", doc);
        err_hint(&e, "mix versions into a file with 'dlm export --adapter-mix'");
        e.code = EXIT_USAGE;
        target_close(&t);
        free(owned);
        return cmd_fail(ctx, &e);
    }
    named_mix used;
    memset(&used, 0, sizeof used);
    const char *gate_err = named_mix_gate_usage(&t, a.gate, a.adapter || a.mix || a.no_adapter);
    if (gate_err) {
        target_close(&t);
        free(owned);
        return cmd_usage_error(&spec_prompt, "%s (got '%s')", gate_err, a.gate);
    }
    if (doc && t.named && !t.adapter_name && !a.no_adapter) {
        /* no --adapter: a mix of the named adapters (run/named_mix.h) */
        int gate_missing;
        nmix_mode mode = named_mix_choose(&t, a.mix, a.gate, 1, &gate_missing);
        if (gate_missing) fprintf(stderr, "note: no gate trained yet ('dlm train %s' trains it); equal weights\n", doc);
        if (named_mix_weights(&t, mode, a.mix, query, &used, &e) || named_mix_build(&t, &used, &mixed, &e)) {
            target_close(&t);
            free(owned);
            return cmd_fail(ctx, &e);
        }
        for (int i = 0; i < used.n_left_out; i++)
            fprintf(stderr, "note: adapter %s has no trained version; left out\n", used.left_out[i]);
        lora_free(t.l);
        t.l = mixed;   /* owned by t from here: target_close frees it */
        if (!ctx->quiet && used.n) {
            char line[1024];
            named_mix_describe(&used, line, sizeof line);
            fprintf(stderr, "%s\n", line);
        }
    }
    if (doc && !t.l && !a.no_adapter) fprintf(stderr, "note: no trained adapter yet; answering with the base\n");
    strbuf text = STRBUF_INIT;
    tok_ids ids = {0};
    session *s = NULL;
    int32_t *out = NULL;
    audio_prompt ap;
    memset(&ap, 0, sizeof ap);
    session_splice sp;
    memset(&sp, 0, sizeof sp);
    vl_prompt vp;
    memset(&vp, 0, sizeof vp);
    if (a.audio.n) {
        if (prompt_audio(&t, &a.audio, query, &ap, &e)) goto done;
        ids = ap.ids;   /* owned by ap */
        sp = audio_prompt_splice(&ap);
    } else if (a.images.n || t.m->cfg.vl) {
        /* a vision-language base takes images, and only with them (as the
         * original: VL bases require --image, text bases refuse it) */
        if (!a.images.n) {
            err_set(&e, "PromptError", "%s is a vision-language base: give the image(s) to ask about", t.base_spec);
            err_hint(&e, "dlm prompt %s --image FILE \"your question\" (\"\" continues with a caption)",
                     doc ? doc : "--base B");
            e.code = EXIT_USAGE;
            goto done;
        }
        vl_chat chat = {a.raw ? NULL : t.dialect, t.system_prompt, t.store};
        if (vl_prompt_build_files(t.m, t.t, &chat, query, a.images.v, a.images.n, &vp, &e)) {
            if (!t.m->cfg.vl) e.code = EXIT_USAGE;
            goto done;
        }
        ids = vp.ids;   /* vp owns them */
        memset(&vp.ids, 0, sizeof vp.ids);
    } else if (a.raw) {
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
    /* PaliGemma's image + prompt block goes through in one piece */
    if (session_create(t.m, t.l, ctxlen, vp.sp.prefix > 512 ? vp.sp.prefix : 512, &s, &e)) goto done;
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
    go.n_stops = gen_stop_ids(t.t, a.raw || a.audio.n || !t.dialect ? NULL : t.dialect->stops, stops, 32);
    go.stops = stops;
    go.emit = a.json ? NULL : emit;
    go.emit_ctx = NULL;
    go.cancel = &g_cancel;
    go.splice = vp.n_embeds ? &vp.sp : a.audio.n ? &sp : NULL;
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
        if (a.images.n) json_object_set_new(j, "images_from_cache", json_integer(vp.n_cached));
        if (used.n) {
            json_t *aw = json_object();
            for (int i = 0; i < used.n; i++) json_object_set_new(aw, used.names[i], json_real(used.w[i]));
            json_object_set_new(j, "adapter_weights", aw);
            json_object_set_new(j, "gate", json_string(used.mode == NMIX_GATE ? "auto" : "off"));
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
    vl_prompt_free(&vp);
    if (a.audio.n) audio_prompt_free(&ap);
    else tok_ids_free(&ids);
    sb_free(&text);
    target_close(&t);
    free(owned);
    return rc;
}
