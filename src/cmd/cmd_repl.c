/* dlm repl — a multi-turn chat with a document's adapter (spec §5): libedit
 * line editing with a history file in the store, the base's chat dialect
 * with the document's system prompt, streamed answers, Ctrl-C cancels a
 * generation (the partial answer is kept, marked " [cancelled]"), Ctrl-D
 * exits. The KV cache carries over between turns: each turn renders the
 * whole conversation, keeps the cached prefix it shares with the last one
 * and evaluates only the tokens after it. */
#include <editline/readline.h>
#include <errno.h>
#include <langinfo.h>
#include <locale.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "adapter/adapter.h"
#include "cmd/commands.h"
#include "infer/audio_prompt.h"
#include "infer/generate.h"
#include "media/audio.h"
#include "infer/sample.h"
#include "infer/target.h"
#include "infer/vl_prompt.h"
#include "kern/kern.h"
#include "run/named_mix.h"
#include "store/store.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/str.h"

typedef struct repl_args {
    const char *base, *adapter, *mix, *gate, *backend;
    int max_tokens, seed, threads, offline, ctx;
    double temp;
} repl_args;

static const opt OPTS[] = {
    {"adapter", 0, OPT_STR, offsetof(repl_args, adapter), "NAME", "current (default), base (no adapter) or a version vNNNN;"
                                                                 " with training.adapters: one of them, or mix"},
    {"adapter-mix", 0, OPT_STR, offsetof(repl_args, mix), "NAME:W,...", "named adapters with these weights (Σ wᵢ·sᵢ·BᵢAᵢ)"},
    {"gate", 0, OPT_STR, offsetof(repl_args, gate), "auto|off", "training.gate: weights from the trained gate per turn (auto,"
                                                               " default) or equal (off)"},
    {"base", 0, OPT_STR, offsetof(repl_args, base), "BASE", "use this base (without PATH: no document, no adapter)"},
    {"max-tokens", 'n', OPT_INT, offsetof(repl_args, max_tokens), "N", "tokens per answer (256)"},
    {"temp", 't', OPT_DOUBLE, offsetof(repl_args, temp), "T", "temperature [0, 5]; 0 = greedy (0.7)"},
    {"seed", 0, OPT_INT, offsetof(repl_args, seed), "N", "sampling seed (42)"},
    {"ctx", 0, OPT_INT, offsetof(repl_args, ctx), "N", "context in tokens (the model's, at most 4096)"},
    {"threads", 0, OPT_THREADS, offsetof(repl_args, threads), "N", "compute threads (default: all cores)"},
    {"backend", 0, OPT_STR, offsetof(repl_args, backend), "auto|pytorch", "the original's backend choice: both run dlm's CPU kernels; mlx is refused"},
    {"offline", 0, OPT_FLAG, offsetof(repl_args, offline), NULL, "never download the base"},
    {0},
};

const cmd_spec spec_repl = {
    "repl", "PATH | --base BASE [--adapter NAME | --adapter-mix NAME:W,...] [--gate auto|off]",
    "chat with the document's trained adapter, turn after turn",
    "Ctrl-C cancels an answer (the part written so far is kept), Ctrl-D exits.\n"
    "Commands: /help /exit /clear /save PATH /adapter NAME /params key=value\n"
    "/model /history /image FILE. /params keys: temperature, top_p, repetition_penalty,\n"
    "top_k, min_p (the ranges of dlm prompt, README.md), max_new_tokens.\n"
    "Sampled bytes that are not UTF-8 show and are kept as U+FFFD. The line history is kept in the store (repl_history).\n"
    "A document with training.adapters: --adapter NAME uses one; without it the\n"
    "adapters are mixed as by dlm prompt (the gate's weights for each turn's text,\n"
    "or equal ones; docs/adapters.md); /adapter NAME|mix|base switches.",
    OPTS,
};

static volatile int g_cancel;
static void on_int(int sig) { (void)sig; g_cancel = 1; }

/* libedit's key reader (rl_getc_function): one UTF-8 character from the
 * terminal as its code point, whatever the locale (libedit's own reader
 * dropped every non-ASCII byte under the C locale), and end of input once
 * Ctrl-C has set g_cancel — libedit's reader retried the first EINTR, and
 * its own SIGINT handler put the terminal in cooked mode and re-raised
 * the signal, so a Ctrl-C at the prompt sometimes swallowed the next line
 * (t0702 failed so in CI). An invalid sequence reads as U+FFFD. */
static int repl_getc(FILE *in)
{
    int fd = fileno(in), need = 0;
    uint32_t cp = 0;
    for (;;) {
        unsigned char c;
        ssize_t n = read(fd, &c, 1);
        if (n == 0) return -1;
        if (n < 0) {
            if (errno == EINTR && !g_cancel) continue;
            return -1;
        }
        if (!need) {
            if (c < 0x80) return c;
            if (c >= 0xC2 && c <= 0xDF) { cp = c & 0x1F; need = 1; }
            else if (c >= 0xE0 && c <= 0xEF) { cp = c & 0x0F; need = 2; }
            else if (c >= 0xF0 && c <= 0xF4) { cp = c & 0x07; need = 3; }
            else return 0xFFFD;
            continue;
        }
        if ((c & 0xC0) != 0x80) return 0xFFFD;
        cp = cp << 6 | (c & 0x3F);
        if (--need == 0) return cp < 0x110000 && (cp < 0xD800 || cp > 0xDFFF) ? (int)cp : 0xFFFD;
    }
}

typedef struct repl {
    infer_target t;
    lora *own;                  /* an adapter /adapter loaded (not t.l) */
    const lora *l;              /* in use; NULL = base */
    char adapter_name[80];
    /* a document with training.adapters, /adapter mix: the named adapters
     * mixed (run/named_mix.h); in NMIX_GATE mode the weights follow each
     * turn's text and the mix is rebuilt when they change */
    int mixing;
    nmix_mode mode;
    const char *mix_arg;
    named_mix cur;
    session *s;
    int n_ctx;
    int32_t *cached;            /* what s holds, [n_ctx] */
    int n_cached;
    chat_msg *msgs;             /* the conversation; contents owned */
    size_t n_msgs, cap_msgs;
    sample_params sp;
    int max_tokens;
    int stream;                 /* stdout is a terminal */
    int verbose;
    /* /audio FILE: clips for the next line (an audio-language base) */
    char pend[8][1024];
    int n_pend;
    char *images[8];            /* /image FILE: sent with the next message (a vision-language base) */
    int n_images;
} repl;

/* test hook ($DLM_TEST_EMIT_DELAY_MS): a pause after each streamed piece,
 * so a terminal test sees an answer grow on any machine speed */
static int g_emit_delay_ms;

/* Sampling can draw byte tokens that do not form UTF-8 (a high
 * temperature on a byte-level vocabulary): the answer is repaired as the
 * API repairs its bodies (str_utf8_lossy, U+FFFD), so what is shown, kept
 * in the conversation, re-encoded on the next turn and /saved is valid
 * text. generate() cuts pieces on character boundaries, so a piece repairs
 * as the whole answer would. */
static int emit(void *ctx, const char *p, size_t n)
{
    strbuf *sb = ctx;
    size_t from = sb->len;
    str_utf8_lossy(sb, p, n);
    fwrite(sb->buf + from, 1, sb->len - from, stdout);
    fflush(stdout);
    if (g_emit_delay_ms > 0) usleep((useconds_t)g_emit_delay_ms * 1000);
    return 0;
}

static int emit_quiet(void *ctx, const char *p, size_t n)
{
    str_utf8_lossy(ctx, p, n);
    return 0;
}

static void conv_push(repl *r, const char *role, const char *content)
{
    if (r->n_msgs == r->cap_msgs) {
        size_t nc = r->cap_msgs ? 2 * r->cap_msgs : 16;
        chat_msg *m = realloc(r->msgs, nc * sizeof *m);
        if (!m) return;
        r->msgs = m;
        r->cap_msgs = nc;
    }
    /* valid UTF-8 whatever came in (a piped line is not checked by the
     * line editor), so the next turn's encode cannot refuse it */
    strbuf sb = STRBUF_INIT;
    str_utf8_lossy(&sb, content, strlen(content));
    char *c = sb_detach(&sb, NULL);
    if (!c) return;
    r->msgs[r->n_msgs].role = role;
    r->msgs[r->n_msgs].content = c;
    r->n_msgs++;
}

static void conv_clear(repl *r)
{
    for (size_t i = 0; i < r->n_msgs; i++) free((char *)r->msgs[i].content);
    r->n_msgs = 0;
}

static void conv_pop(repl *r)
{
    if (r->n_msgs) free((char *)r->msgs[--r->n_msgs].content);
}

/* (Re)build the session for the adapter in use; the cache starts empty. */
static int open_session(repl *r, dlm_err *e)
{
    session_free(r->s);
    r->s = NULL;
    r->n_cached = 0;
    return session_create(r->t.m, r->l, r->n_ctx, 512, &r->s, e);
}

/* The named adapters mixed with m's weights as the adapter in use. */
static int use_mix(repl *r, const named_mix *m, dlm_err *e)
{
    lora *nl = NULL;
    if (named_mix_build(&r->t, m, &nl, e)) return -1;
    lora_free(r->own);
    r->own = nl;
    r->l = nl;
    r->cur = *m;
    return open_session(r, e);
}

/* /adapter on a document with training.adapters: base | mix | current (the
 * mix) | a declared name (its current version) */
static int use_named(repl *r, const char *name, dlm_err *e)
{
    const doc_frontmatter *fm = doc_fm(r->t.doc);
    if (!strcmp(name, "base")) {
        lora_free(r->own);
        r->own = NULL;
        r->l = NULL;
        r->mixing = 0;
        snprintf(r->adapter_name, sizeof r->adapter_name, "base");
        return open_session(r, e);
    }
    if (!strcmp(name, "mix") || !strcmp(name, "current")) {
        named_mix m;
        r->mixing = 1;
        snprintf(r->adapter_name, sizeof r->adapter_name, "mix");
        memset(&r->cur, 0, sizeof r->cur);
        if (r->mode == NMIX_GATE) {   /* the weights come with the next turn's text (gate_turn) */
            session_free(r->s);        /* it may hold the adapter freed below */
            r->s = NULL;
            r->n_cached = 0;
            lora_free(r->own);
            r->own = NULL;
            r->l = NULL;
            return 0;
        }
        if (named_mix_weights(&r->t, r->mode, r->mix_arg, NULL, &m, e)) return -1;
        for (int i = 0; i < m.n_left_out; i++)
            fprintf(stderr, "note: adapter %s has no trained version; left out\n", m.left_out[i]);
        if (!m.n) fprintf(stderr, "note: no trained adapter yet; answering with the base\n");
        char line[1024];
        named_mix_describe(&m, line, sizeof line);
        if (m.n) fprintf(stderr, "%s\n", line);
        return use_mix(r, &m, e);
    }
    int k = doc_adapter_index(fm, name);
    if (k < 0) return doc_scope_adapter(r->t.doc, name, e);   /* its UnknownAdapterError with the declared names */
    int v = store_current_version_of(r->t.store, name, e);
    if (v < 0) return -1;
    if (!v) {
        err_set(e, "PromptError", "adapter %s has no trained version", name);
        return err_hint(e, "train it: dlm train %s --adapter %s", doc_path(r->t.doc), name);
    }
    char ad[4200], dir[4300], vn[16];
    store_version_name(v, vn, sizeof vn);
    if (store_adapter_dir(r->t.store, name, ad, sizeof ad, e)) return -1;
    snprintf(dir, sizeof dir, "%s/versions/%s", ad, vn);
    lora *nl = NULL;
    if (adapter_load(dir, r->t.m, &nl, e)) return -1;
    lora_free(r->own);
    r->own = nl;
    r->l = nl;
    r->mixing = 0;
    snprintf(r->adapter_name, sizeof r->adapter_name, "%s %s", fm->training.adapters[k].name, vn);
    return open_session(r, e);
}

/* Before a turn in NMIX_GATE mode: the gate's weights for the text; a new
 * mix (and an empty cache) only when they changed. */
static int gate_turn(repl *r, const char *text, dlm_err *e)
{
    if (!r->mixing || r->mode != NMIX_GATE) return 0;
    named_mix m;
    if (named_mix_weights(&r->t, NMIX_GATE, NULL, text, &m, e)) return -1;
    int same = r->l && m.n == r->cur.n;
    for (int i = 0; same && i < m.n; i++) same = m.w[i] == r->cur.w[i];
    if (same) return 0;
    char line[1024];
    named_mix_describe(&m, line, sizeof line);
    fprintf(stderr, "%s\n", line);
    return use_mix(r, &m, e);
}

/* /adapter NAME: base | current | vNNNN */
static int use_adapter(repl *r, const char *name, dlm_err *e)
{
    if (r->t.named) return use_named(r, name, e);
    lora *nl = NULL;
    const lora *use;
    char label[32];
    if (!strcmp(name, "base")) {
        use = NULL;
        snprintf(label, sizeof label, "base");
    } else if (!strcmp(name, "current")) {
        if (!r->t.l) return err_set(e, NULL, "no trained adapter yet");
        use = r->t.l;
        snprintf(label, sizeof label, "current");
    } else {
        int v = 0;
        if (name[0] != 'v' || sscanf(name + 1, "%d", &v) != 1 || v < 1) {
            err_set(e, NULL, "unknown adapter '%s'", name);
            return err_hint(e, "use base, current or a version such as v0001");
        }
        if (!r->t.doc) return err_set(e, NULL, "adapter versions need a document");
        char vn[16], dir[4200];
        store_version_name(v, vn, sizeof vn);
        snprintf(dir, sizeof dir, "%s/adapter/versions/%s", r->t.store, vn);
        if (!fs_is_dir(dir)) return err_set(e, NULL, "no trained version %s", vn);
        if (v == r->t.version) use = r->t.l;
        else {
            if (adapter_load(dir, r->t.m, &nl, e)) return -1;
            use = nl;
        }
        snprintf(label, sizeof label, "%s", vn);
    }
    lora_free(r->own);
    r->own = nl;
    r->l = use;
    snprintf(r->adapter_name, sizeof r->adapter_name, "%s", label);
    return open_session(r, e);
}

static int set_param(repl *r, const char *kv)
{
    const char *eq = strchr(kv, '=');
    if (!eq) return -1;
    char key[64];
    snprintf(key, sizeof key, "%.*s", (int)(eq - kv), kv);
    char *end;
    double d = strtod(eq + 1, &end);
    if (end == eq + 1 || *end) return -1;
    if (!strcmp(key, "max_new_tokens")) {
        if (!(d >= 1 && d == floor(d) && d < 1e7)) return -1;
        r->max_tokens = (int)d;
        return 0;
    }
    char why[160];
    if (sample_check(key, d, why, sizeof why)) {
        if (strncmp(why, "unknown", 7)) printf("%s\n", why);
        return -1;
    }
    if (!strcmp(key, "temperature")) r->sp.temp = (float)d;
    else if (!strcmp(key, "top_p")) r->sp.top_p = (float)d;
    else if (!strcmp(key, "repetition_penalty")) r->sp.repeat_penalty = (float)d;
    else if (!strcmp(key, "top_k")) r->sp.top_k = (int)d;
    else if (!strcmp(key, "min_p")) r->sp.min_p = (float)d;
    else return -1;
    return 0;
}

static void print_params(const repl *r)
{
    printf("temperature=%g top_p=%g top_k=%d min_p=%g repetition_penalty=%g max_new_tokens=%d\n", r->sp.temp,
           r->sp.top_p, r->sp.top_k, r->sp.min_p, r->sp.repeat_penalty, r->max_tokens);
}

/* Every message or none: a message jansson refuses is an error, never a
 * shorter file under "saved N messages". */
static int save_conv(const repl *r, const char *path, dlm_err *e)
{
    json_t *a = json_array();
    for (size_t i = 0; i < r->n_msgs; i++) {
        json_t *m = json_pack("{s:s, s:s}", "role", r->msgs[i].role, "content", r->msgs[i].content);
        if (!m || json_array_append_new(a, m)) {
            json_decref(a);
            return err_set(e, "ReplError", "message %zu (%s) cannot be written as JSON text", i + 1, r->msgs[i].role);
        }
    }
    strbuf sb = STRBUF_INIT;
    json_write(&sb, a, 0);
    sb_putc(&sb, '\n');
    json_decref(a);
    int rc = fs_write_atomic(path, sb.buf, sb.len, 0644, e);
    sb_free(&sb);
    return rc;
}

/* /audio FILE: checked now (decodes at the base's rate), used by the next line */
static int queue_audio(repl *r, const char *file, dlm_err *e)
{
    if (!r->t.m->cfg.audio) {
        err_set(e, "ModalityError", "/audio needs an audio-language base; %s is not one", r->t.base_spec);
        return err_hint(e, "open an audio document (base_model: qwen2-audio-7b-instruct)");
    }
    if (r->n_pend == 8) return err_set(e, "ReplError", "8 clips are queued already; ask about them first");
    audio_wave w;
    dlm_err ie;
    err_clear(&ie);
    int ar = r->t.doc ? doc_fm(r->t.doc)->training.audio.auto_resample : 0;
    if (audio_load(file, AUDIO_RATE, AUDIO_MAX_SECONDS, ar, &w, &ie)) {
        err_set(e, ie.kind[0] ? ie.kind : "AudioError", "audio '%s': %s", file, ie.msg);
        if (ie.hint[0]) err_hint(e, "%s", ie.hint);
        return -1;
    }
    size_t n = w.n;
    audio_wave_free(&w);
    if (n < AUDIO_MIN_SAMPLES)
        return err_set(e, "AudioError", "audio '%s': %zu samples give no audio token (at least %d)", file, n,
                       AUDIO_MIN_SAMPLES);
    snprintf(r->pend[r->n_pend++], sizeof r->pend[0], "%s", file);
    return 0;
}

/* A line after /audio: asked as `dlm prompt --audio` asks it ("<|AUDIO|>"
 * per clip + "\n" + the line, no chat template, as the original), the
 * cache started over (the clip's rows are not tokens). */
static int audio_turn(repl *r, const char *text, dlm_err *e)
{
    audio_feat af;
    if (audio_feat_open(&af, r->t.model_path, e)) return -1;
    audio_wave w[8];
    memset(w, 0, sizeof w);
    const float *x[8];
    size_t len[8];
    int rc = 0, ar = r->t.doc ? doc_fm(r->t.doc)->training.audio.auto_resample : 0;
    for (int i = 0; i < r->n_pend && !rc; i++) {
        rc = audio_load(r->pend[i], AUDIO_RATE, AUDIO_MAX_SECONDS, ar, &w[i], e);
        x[i] = w[i].x;
        len[i] = w[i].n;
    }
    audio_prompt ap;
    memset(&ap, 0, sizeof ap);
    if (!rc) rc = audio_prompt_build(r->t.t, &af, text, len, r->n_pend, &ap, e) || audio_prompt_embed(&ap, &af, x, len, e);
    for (int i = 0; i < r->n_pend; i++) audio_wave_free(&w[i]);
    audio_feat_close(&af);
    if (rc) return -1;
    strbuf answer = STRBUF_INIT;
    int n = (int)ap.ids.n, max = r->max_tokens;
    if (n >= r->n_ctx) {
        audio_prompt_free(&ap);
        return err_set(e, "ContextError", "the clips and the line make %d tokens; the context holds %d", n, r->n_ctx);
    }
    if (max > r->n_ctx - n) max = r->n_ctx - n;
    int32_t *out = malloc((size_t)max * sizeof(int32_t)), stops[32], stop;
    session_splice sp = audio_prompt_splice(&ap);
    gen_opts go = {.sp = r->sp, .max_tokens = max, .stops = stops, .n_stops = gen_stop_ids(r->t.t, NULL, stops, 32),
                   .emit = r->stream ? emit : emit_quiet, .emit_ctx = &answer, .cancel = &g_cancel};
    g_cancel = 0;
    session_reset(r->s);
    r->n_cached = 0;
    int nout = 0;
    rc = out ? generate_splice(r->s, r->t.t, ap.ids.v, n, &sp, &go, out, &nout, &stop, e)
             : err_set(e, "MemoryError", "out of memory");
    session_reset(r->s);   /* the next chat turn starts from its own tokens */
    if (!rc) {
        if (r->stream) printf("\n");
        else printf("%s\n", sb_str(&answer));
        strbuf u = STRBUF_INIT;
        for (int i = 0; i < r->n_pend; i++) sb_printf(&u, "[audio %s] ", r->pend[i]);
        sb_puts(&u, text);
        conv_push(r, "user", sb_str(&u));
        conv_push(r, "assistant", sb_str(&answer));
        sb_free(&u);
    }
    r->n_pend = 0;
    free(out);
    sb_free(&answer);
    audio_prompt_free(&ap);
    return rc;
}

static void drop_images(repl *r)
{
    for (int i = 0; i < r->n_images; i++) free(r->images[i]);
    r->n_images = 0;
}

/* A message with /image attachments: the prompt `dlm prompt --image`
 * builds (infer/vl_prompt.h: a caption for an empty line, else one chat
 * turn of the images and the text), evaluated from an empty cache; the turn
 * joins the history as "[image FILE] text". */
static int image_turn(repl *r, const char *text, dlm_err *e)
{
    vl_prompt vp;
    strbuf answer = STRBUF_INIT, shown = STRBUF_INIT;
    int32_t *out = NULL;
    int rc = -1;
    vl_chat chat = {r->t.dialect, r->t.system_prompt, r->t.store};
    if (vl_prompt_build_files(r->t.m, r->t.t, &chat, text, (const char *const *)r->images, r->n_images, &vp, e)) {
        drop_images(r);
        return -1;
    }
    int n = (int)vp.ids.n, max = r->max_tokens;
    if (n >= r->n_ctx) {
        err_set(e, "ContextError", "the message and its images have %d tokens; the context holds %d", n, r->n_ctx);
        goto out;
    }
    if (max > r->n_ctx - n) max = r->n_ctx - n;
    session_reset(r->s);
    r->n_cached = 0;   /* the cache holds image rows no text prefix matches */
    out = malloc((size_t)max * sizeof(int32_t));
    if (!out) { err_set(e, "MemoryError", "out of memory"); goto out; }
    int32_t stops[32];
    gen_opts go = {.sp = r->sp, .max_tokens = max, .stops = stops,
                   .n_stops = gen_stop_ids(r->t.t, NULL, stops, 32), .emit = r->stream ? emit : emit_quiet,
                   .emit_ctx = &answer, .cancel = &g_cancel, .splice = &vp.sp};
    g_cancel = 0;
    int nout;
    int32_t stop;
    if (generate(r->s, r->t.t, vp.ids.v, n, &go, out, &nout, &stop, e)) goto out;
    if (r->stream) printf("%s\n", g_cancel ? " [cancelled]" : "");
    else printf("%s\n", sb_str(&answer));
    for (int i = 0; i < r->n_images; i++) sb_printf(&shown, "[image %s] ", r->images[i]);
    sb_puts(&shown, text);
    conv_push(r, "user", sb_str(&shown));
    conv_push(r, "assistant", sb_str(&answer));
    rc = 0;
out:
    drop_images(r);
    g_cancel = 0;
    free(out);
    vl_prompt_free(&vp);
    sb_free(&answer);
    sb_free(&shown);
    return rc;
}

/* One turn: the user's text in, the answer streamed out. */
static int turn(repl *r, const char *text, dlm_err *e)
{
    if (r->n_pend) return audio_turn(r, text, e);
    if (r->n_images) return image_turn(r, text, e);
    if (gate_turn(r, text, e)) return -1;
    conv_push(r, "user", text);
    strbuf rendered = STRBUF_INIT, answer = STRBUF_INIT;
    tok_ids ids = {0};
    int32_t *out = NULL;
    int rc = -1;
    if (chat_render(r->t.dialect, r->t.system_prompt, r->msgs, r->n_msgs, 1, &rendered, NULL, NULL, e) ||
        tok_encode_append(r->t.t, rendered.buf, rendered.len, TOK_PARSE_SPECIAL, &ids, e))
        goto out;
    int n = (int)ids.n;
    if (n >= r->n_ctx) {
        err_set(e, "ContextError", "the conversation has %d tokens; the context holds %d", n, r->n_ctx);
        err_hint(e, "/clear starts over");
        goto out;
    }
    /* keep the cached prefix; the last prompt token is always evaluated */
    int keep = 0, cap = n - 1 < r->n_cached ? n - 1 : r->n_cached;
    while (keep < cap && r->cached[keep] == ids.v[keep]) keep++;
    if (keep) session_copy_prefix(r->s, r->s, keep);
    else session_reset(r->s);
    int max = r->max_tokens;
    if (max > r->n_ctx - n) max = r->n_ctx - n;
    out = malloc((size_t)max * sizeof(int32_t));
    if (!out) { err_set(e, "MemoryError", "out of memory"); goto out; }
    int32_t stops[32];
    gen_opts go = {
        .sp = r->sp,
        .max_tokens = max,
        .stops = stops,
        .n_stops = gen_stop_ids(r->t.t, r->t.dialect->stops, stops, 32),
        .emit = r->stream ? emit : emit_quiet,
        .emit_ctx = &answer,
        .cancel = &g_cancel,
    };
    g_cancel = 0;
    int nout;
    int32_t stop;
    int grc = generate(r->s, r->t.t, ids.v + keep, n - keep, &go, out, &nout, &stop, e);
    /* what the cache now holds: the prompt and the answer ids fed so far */
    int past = session_n_past(r->s);
    memcpy(r->cached, ids.v, (size_t)n * sizeof(int32_t));
    if (past > n) memcpy(r->cached + n, out, (size_t)(past - n) * sizeof(int32_t));
    r->n_cached = past;
    if (grc) goto out;
    if (g_cancel) sb_puts(&answer, " [cancelled]");
    if (r->stream) printf("%s\n", g_cancel ? " [cancelled]" : "");
    else printf("%s\n", sb_str(&answer));
    if (r->verbose)
        fprintf(stderr, "[%d prompt tokens, %d from the cache, %d generated]\n", n, keep, nout);
    conv_push(r, "assistant", sb_str(&answer));
    rc = 0;
out:
    if (rc) conv_pop(r);
    g_cancel = 0;
    free(out);
    tok_ids_free(&ids);
    sb_free(&rendered);
    sb_free(&answer);
    return rc;
}

static void help(void)
{
    printf("/help                this list\n"
           "/exit                leave (Ctrl-D too)\n"
           "/clear               forget the conversation\n"
           "/save PATH           write the conversation as JSON\n"
           "/adapter NAME        base, current or a version vNNNN (named adapters: NAME, mix or base)\n"
           "/params [key=value]  temperature, top_p, repetition_penalty, top_k, min_p, max_new_tokens\n"
           "/model               the base, adapter and context in use\n"
           "/history             the conversation so far\n"
           "/image FILE          send an image with the next message (a vision-language base; repeatable)\n"
           "/audio FILE          a clip for the next line (audio-language bases; repeatable)\n"
           "Ctrl-C cancels an answer; Ctrl-D exits.\n");
}

/* A slash command; 1 = exit. */
static int command(repl *r, char *line)
{
    char *cmd = strtok(line, " \t"), *arg = strtok(NULL, "");
    while (arg && (*arg == ' ' || *arg == '\t')) arg++;
    dlm_err e;
    err_clear(&e);
    if (!strcmp(cmd, "/exit") || !strcmp(cmd, "/quit")) return 1;
    if (!strcmp(cmd, "/help")) help();
    else if (!strcmp(cmd, "/clear")) {
        conv_clear(r);
        printf("conversation cleared\n");
    } else if (!strcmp(cmd, "/save")) {
        if (!arg || !*arg) printf("usage: /save PATH\n");
        else if (save_conv(r, arg, &e)) err_print(stderr, &e, 0);
        else printf("saved %zu messages to %s\n", r->n_msgs, arg);
    } else if (!strcmp(cmd, "/adapter")) {
        if (!arg || !*arg) printf("adapter: %s\n", r->adapter_name);
        else if (use_adapter(r, arg, &e)) err_print(stderr, &e, 0);
        else printf("adapter: %s\n", r->adapter_name);
    } else if (!strcmp(cmd, "/params")) {
        for (char *kv = arg ? strtok(arg, " \t") : NULL; kv; kv = strtok(NULL, " \t"))
            if (set_param(r, kv)) printf("bad parameter '%s' (key=value; keys: temperature top_p "
                                         "repetition_penalty top_k min_p max_new_tokens)\n", kv);
        print_params(r);
    } else if (!strcmp(cmd, "/model")) {
        printf("base: %s\nadapter: %s\ndialect: %s\ncontext: %d tokens (%d cached)\n", r->t.base_spec,
               r->adapter_name, r->t.dialect->name, r->n_ctx, r->n_cached);
    } else if (!strcmp(cmd, "/image")) {
        if (!arg || !*arg) printf("usage: /image FILE\n");
        else if (!r->t.m->cfg.vl)
            printf("/image needs a vision-language base; %s is a text model (docs/images.md)\n", r->t.base_spec);
        else if (!fs_is_file(arg)) printf("%s: no such image file\n", arg);
        else if (r->n_images == 8) printf("at most 8 images per message\n");
        else {
            r->images[r->n_images++] = strdup(arg);
            printf("image %d attached: %s (sent with the next message)\n", r->n_images, arg);
        }
    } else if (!strcmp(cmd, "/audio")) {
        if (!arg || !*arg) printf("usage: /audio FILE\n");
        else if (queue_audio(r, arg, &e)) err_print(stderr, &e, 0);
        else printf("audio %s queued (%d): the next line asks about it\n", arg, r->n_pend);
    } else if (!strcmp(cmd, "/history")) {
        if (!r->n_msgs) printf("(empty)\n");
        for (size_t i = 0; i < r->n_msgs; i++) printf("%s: %s\n", r->msgs[i].role, r->msgs[i].content);
    } else printf("unknown command %s (/help lists them)\n", cmd);
    return 0;
}

int cmd_repl(int argc, char **argv, dlm_ctx *ctx)
{
    repl_args a = {.max_tokens = 256, .seed = 42, .temp = 0.7};
    char *pos[64];
    int npos;
    int rc0 = opts_parse(&spec_repl, argc, argv, ctx, &a, pos, &npos);
    if (rc0) return rc0 == 1 ? EXIT_OK : EXIT_USAGE;
    if (cmd_check_backend(&spec_repl, a.backend)) return EXIT_USAGE;
    if (npos > 1) return cmd_usage_error(&spec_repl, "too many arguments");
    if (!npos && !a.base) return cmd_usage_error(&spec_repl, "repl needs a PATH (or --base B)");
    if (a.max_tokens < 1) return cmd_usage_error(&spec_repl, "--max-tokens must be >= 1");
    if (cmd_check_sample(&spec_repl, "--temp", "temperature", a.temp)) return EXIT_USAGE;
    dlm_err e;
    err_clear(&e);
    if (cmd_setup(ctx, &e)) return cmd_fail(ctx, &e);
    kern_init(a.threads);
    repl R;
    memset(&R, 0, sizeof R);
    repl *r = &R;
    const char *doc = npos ? pos[0] : NULL;
    target_opts to = {.doc_path = doc, .base = a.base, .home = ctx->home, .use_adapter = 1, .offline = a.offline};
    if (target_open(&to, &r->t, &e)) return cmd_fail(ctx, &e);
    int rc = EXIT_FAIL;
    char hist[4200] = "";
    if (!r->t.dialect) {
        err_set(&e, "PromptError", "the base has no chat template dlm can render");
        err_hint(&e, "dlm prompt --raw continues plain text");
        goto done;
    }
    if ((a.mix || a.gate) && (!doc || a.base)) {
        rc = cmd_usage_error(&spec_repl, "--adapter-mix/--gate need a document");
        goto done;
    }
    if (a.mix && !r->t.named) {
        err_set(&e, "UnknownAdapterError", "%s declares no training.adapters; --adapter-mix names them", doc);
        e.code = EXIT_USAGE;
        goto done;
    }
    if (a.adapter && a.mix) {
        rc = cmd_usage_error(&spec_repl, "--adapter and --adapter-mix are mutually exclusive");
        goto done;
    }
    const char *gate_err = r->t.doc ? named_mix_gate_usage(&r->t, a.gate, a.adapter || a.mix) : NULL;
    if (gate_err) {
        rc = cmd_usage_error(&spec_repl, "%s (got '%s')", gate_err, a.gate);
        goto done;
    }
    if (r->t.named) {
        int gate_missing;
        r->mix_arg = a.mix;
        r->mode = named_mix_choose(&r->t, a.mix, a.gate, 1, &gate_missing);
        if (gate_missing && !a.adapter)
            fprintf(stderr, "note: no gate trained yet ('dlm train %s' trains it); equal weights\n", doc);
    } else if (doc && !r->t.l) fprintf(stderr, "note: no trained adapter yet; answering with the base\n");
    r->n_ctx = a.ctx > 0 ? a.ctx : r->t.m->cfg.max_pos < 4096 ? r->t.m->cfg.max_pos : 4096;
    if (r->n_ctx > r->t.m->cfg.max_pos) r->n_ctx = r->t.m->cfg.max_pos;
    r->cached = malloc((size_t)r->n_ctx * sizeof(int32_t));
    if (!r->cached) { err_set(&e, "MemoryError", "out of memory"); goto done; }
    sample_defaults(&r->sp);
    r->sp.temp = (float)a.temp;
    r->sp.seed = (uint64_t)a.seed;
    r->max_tokens = a.max_tokens;
    r->stream = isatty(STDOUT_FILENO);
    const char *dl = getenv("DLM_TEST_EMIT_DELAY_MS");
    g_emit_delay_ms = dl ? atoi(dl) : 0;
    r->verbose = ctx->verbose;
    if (use_adapter(r, a.adapter ? a.adapter : r->t.named ? "mix" : r->t.l ? "current" : "base", &e)) goto done;

    /* line history: in the document's store once it has one (training
     * makes it), else in DLM_HOME */
    if (doc && fs_is_dir(r->t.store)) snprintf(hist, sizeof hist, "%s/repl_history", r->t.store);
    else {
        snprintf(hist, sizeof hist, "%s/repl_history", ctx->home);
        if (fs_mkdir_p(ctx->home, &e)) hist[0] = 0;
    }
    err_clear(&e);
    /* before the first libedit call (using_history initializes it): our
     * key reader, no libedit signal handlers (SIGINT only sets a flag: it
     * cancels a generation, and at the prompt it abandons the line being
     * typed), and a UTF-8 character type so the line comes back as typed */
    setlocale(LC_CTYPE, "");
    if (strcmp(nl_langinfo(CODESET), "UTF-8")) setlocale(LC_CTYPE, "C.UTF-8");
    rl_getc_function = repl_getc;
    rl_catch_signals = 0;
    using_history();
    stifle_history(1000);
    if (hist[0]) read_history(hist);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_int;
    sigaction(SIGINT, &sa, NULL);
    printf("dlm repl: %s%s%s, adapter %s. /help for commands, Ctrl-D to exit.\n",
           doc ? doc : r->t.base_spec, doc ? " on " : "", doc ? r->t.base_spec : "", r->adapter_name);
    for (;;) {
        g_cancel = 0;
        char *line = readline(">>> ");
        if (!line) {
            if (g_cancel) { printf("\n"); continue; }   /* Ctrl-C at the prompt */
            printf("\n");
            break;                                      /* Ctrl-D */
        }
        char *p = line;
        while (*p == ' ' || *p == '\t') p++;
        size_t n = strlen(p);
        while (n && (p[n - 1] == ' ' || p[n - 1] == '\t' || p[n - 1] == '\n')) p[--n] = 0;
        if (g_cancel) {   /* Ctrl-C after some typing: the reader ended the line there */
            printf("\n");
            free(line);
            continue;
        }
        if (!*p && !r->n_images) { free(line); continue; }   /* an empty line sends pending images (a caption) */
        add_history(p);
        if (hist[0]) write_history(hist);
        if (p[0] == '/') {
            int quit = command(r, p);
            free(line);
            if (quit) break;
            continue;
        }
        if (turn(r, p, &e)) {
            err_print(stderr, &e, ctx->verbose);
            err_clear(&e);
        }
        free(line);
    }
    rc = EXIT_OK;
done:
    if (rc == EXIT_FAIL) rc = cmd_fail(ctx, &e);
    conv_clear(r);
    drop_images(r);
    free(r->msgs);
    free(r->cached);
    session_free(r->s);
    lora_free(r->own);
    target_close(&r->t);
    return rc;
}
