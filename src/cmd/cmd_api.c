/* dlm api — serve a document's adapters (or a bare base) over an
 * OpenAI-compatible HTTP API, with a chat page at / (docs/api.md). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adapter/adapter.h"
#include "api/server.h"
#include "cmd/commands.h"
#include "infer/target.h"
#include "kern/kern.h"
#include "run/named_mix.h"
#include "store/store.h"
#include "util/fs.h"

typedef struct api_args {
    const char *base, *host, *api_key, *adapter, *mix, *gate;
    int port, parallel, queue, ctx, threads, offline, no_adapter, timeout;
    int max_body_kib;
} api_args;

static const opt OPTS[] = {
    {"base", 0, OPT_STR, offsetof(api_args, base), "BASE", "serve this base (without PATH: no document, no adapter)"},
    {"host", 0, OPT_STR, offsetof(api_args, host), "ADDR", "address to bind (127.0.0.1; 0.0.0.0 or :: exposes it to the network)"},
    {"port", 0, OPT_INT, offsetof(api_args, port), "N", "TCP port (8000; 0 = any free port)"},
    {"api-key", 0, OPT_STR, offsetof(api_args, api_key), "KEY", "require Authorization: Bearer KEY on /v1/*"},
    {"parallel", 0, OPT_INT, offsetof(api_args, parallel), "N", "requests decoded together (4)"},
    {"queue", 0, OPT_INT, offsetof(api_args, queue), "N", "requests waiting beyond those, then 429 (4 x parallel)"},
    {"ctx", 0, OPT_INT, offsetof(api_args, ctx), "N", "context per request in tokens (the model's, at most 4096)"},
    {"max-body", 0, OPT_INT, offsetof(api_args, max_body_kib), "KIB", "largest request body in KiB, then 413 (1024)"},
    {"timeout", 0, OPT_INT, offsetof(api_args, timeout), "S", "close a connection idle this many seconds (60)"},
    {"no-adapter", 0, OPT_FLAG, offsetof(api_args, no_adapter), NULL, "serve only the base, even if adapters are trained"},
    {"adapter", 0, OPT_STR, offsetof(api_args, adapter), "NAME", "training.adapters: the default model is this adapter"},
    {"adapter-mix", 0, OPT_STR, offsetof(api_args, mix), "NAME:W,...", "training.adapters: the default model is this mix"},
    {"gate", 0, OPT_STR, offsetof(api_args, gate), "auto|off", "training.gate: the default model mixes with the gate's mean"
                                                              " weights (auto, default) or equal ones (off)"},
    {"threads", 0, OPT_THREADS, offsetof(api_args, threads), "N", "compute threads (default: all cores)"},
    {"offline", 0, OPT_FLAG, offsetof(api_args, offline), NULL, "never download the base"},
    {0},
};

const cmd_spec spec_api = {
    "api", "PATH | --base BASE [--host ADDR] [--port N] [--api-key KEY] [--parallel N]",
    "serve an OpenAI-compatible HTTP API and a chat page",
    "Endpoints: GET /v1/models, POST /v1/chat/completions, POST /v1/completions\n"
    "(stream: true for server-sent events), GET /health, and a chat page at /.\n"
    "Model ids: the document's name (its current adapter), NAME@vNNNN for each\n"
    "trained version, and the base's name; with training.adapters: the document's\n"
    "name (a mix, or --adapter's) and NAME@ADAPTER per trained adapter.\n"
    "SIGTERM or Ctrl-C finishes the requests in flight and exits. See docs/api.md.",
    OPTS,
};

static volatile sig_atomic_t g_stop;
static void on_stop(int sig) { (void)sig; g_stop = 1; }

static void on_ready(void *ctx, const char *host, int port)
{
    (void)ctx;
    fprintf(stderr, "dlm api: listening on http://%s:%d/ (Ctrl-C or SIGTERM to stop)\n",
            strchr(host, ':') ? "[::1]" : host, port);
    printf("http://%s:%d/\n", strchr(host, ':') ? "[::1]" : host, port);
    fflush(stdout);
}

/* The document's name for model ids: its file name without ".dlm". */
static void doc_stem(const char *path, char *out, size_t cap)
{
    snprintf(out, cap, "%s", fs_basename(path));
    size_t n = strlen(out);
    if (n > 4 && !strcmp(out + n - 4, ".dlm")) out[n - 4] = 0;
}

int cmd_api(int argc, char **argv, dlm_ctx *ctx)
{
    api_args a = {.host = "127.0.0.1", .port = 8000, .parallel = 4, .queue = -1, .timeout = 60, .max_body_kib = 1024};
    char *pos[64];
    int npos;
    int r = opts_parse(&spec_api, argc, argv, ctx, &a, pos, &npos);
    if (r) return r == 1 ? EXIT_OK : EXIT_USAGE;
    if (npos > 1) return cmd_usage_error(&spec_api, "too many arguments");
    if (!npos && !a.base) return cmd_usage_error(&spec_api, "api needs a PATH (or --base B)");
    if (a.parallel < 1 || a.parallel > 256) return cmd_usage_error(&spec_api, "--parallel must be 1..256");
    if (a.queue < 0) a.queue = 4 * a.parallel;
    if (a.port < 0 || a.port > 65535) return cmd_usage_error(&spec_api, "--port must be 0..65535");
    if (a.max_body_kib < 1) return cmd_usage_error(&spec_api, "--max-body must be >= 1");
    if (a.timeout < 1) return cmd_usage_error(&spec_api, "--timeout must be >= 1");
    if (a.ctx < 0) return cmd_usage_error(&spec_api, "--ctx must be >= 1");
    dlm_err e;
    err_clear(&e);
    if (cmd_setup(ctx, &e)) return cmd_fail(ctx, &e);
    kern_init(a.threads);
    const char *doc = npos ? pos[0] : NULL;
    if ((a.adapter || a.mix || a.gate) && (!doc || a.no_adapter))
        return cmd_usage_error(&spec_api, "--adapter/--adapter-mix/--gate need a document and no --no-adapter");
    if (a.adapter && a.mix) return cmd_usage_error(&spec_api, "--adapter and --adapter-mix are mutually exclusive");
    target_opts to = {.doc_path = doc, .base = a.base, .home = ctx->home, .use_adapter = !a.no_adapter,
                      .offline = a.offline, .adapter = a.adapter};
    infer_target t;
    if (target_open(&to, &t, &e)) return cmd_fail(ctx, &e);
    if (a.mix && !t.named) {
        err_set(&e, "UnknownAdapterError", "%s declares no training.adapters; --adapter-mix names them", doc);
        e.code = EXIT_USAGE;
        target_close(&t);
        return cmd_fail(ctx, &e);
    }
    const char *gate_err = doc ? named_mix_gate_usage(&t, a.gate, a.adapter || a.mix) : NULL;
    if (gate_err) {
        target_close(&t);
        return cmd_usage_error(&spec_api, "%s (got '%s')", gate_err, a.gate);
    }
    int rc = EXIT_FAIL;
    enum { MAXM = 34 };
    api_model models[MAXM];
    char ids[MAXM][300];
    lora *owned[MAXM];
    int nm = 0, nowned = 0;
    char stem[256];
    if (doc) doc_stem(doc, stem, sizeof stem);
    if (doc && t.named && !a.no_adapter) {
        /* the default model: --adapter's adapter (t.l), else a mix as dlm
         * prompt's (run/named_mix.h) with fixed weights: a served model is
         * one adapter for every request, so the gate gives its mean over the
         * document's prompts (as export's static_mean); then each trained
         * adapter as STEM@NAME, which a request picks by its "model" */
        const doc_training *tr = &doc_fm(t.doc)->training;
        lora *mixl = NULL;
        if (!t.adapter_name) {
            int gate_missing;
            named_mix m;
            nmix_mode mode = named_mix_choose(&t, a.mix, a.gate, 0, &gate_missing);
            if (gate_missing) fprintf(stderr, "note: no gate trained yet ('dlm train %s' trains it); equal weights\n", doc);
            if (named_mix_weights(&t, mode, a.mix, NULL, &m, &e) || named_mix_build(&t, &m, &mixl, &e)) {
                target_close(&t);
                return cmd_fail(ctx, &e);
            }
            for (int i = 0; i < m.n_left_out; i++)
                fprintf(stderr, "note: adapter %s has no trained version; left out\n", m.left_out[i]);
            if (mixl) {
                char line[1024];
                named_mix_describe(&m, line, sizeof line);
                fprintf(stderr, "dlm api: model %s is the %s\n", stem, line);
                owned[nowned++] = mixl;
            }
        }
        const lora *def = t.adapter_name ? t.l : mixl;
        if (!def) fprintf(stderr, "note: no trained adapter yet; answering with the base\n");
        else {
            snprintf(ids[nm], sizeof ids[nm], "%s", stem);
            models[nm] = (api_model){ids[nm], def};
            nm++;
        }
        for (int i = 0; i < tr->n_adapters && nm < MAXM - 1; i++) {
            const char *an = tr->adapters[i].name;
            int v = store_current_version_of(t.store, an, NULL);
            if (v <= 0) continue;
            lora *l = t.l;
            if (!t.adapter_name || strcmp(t.adapter_name, an)) {
                char ad[4200], dir[4300], vn[16];
                store_version_name(v, vn, sizeof vn);
                if (store_adapter_dir(t.store, an, ad, sizeof ad, &e)) break;
                snprintf(dir, sizeof dir, "%s/versions/%s", ad, vn);
                if (adapter_load(dir, t.m, &l, &e)) {
                    fprintf(stderr, "warning: adapter %s not served: %s\n", an, e.msg);
                    err_clear(&e);
                    continue;
                }
                owned[nowned++] = l;
            }
            snprintf(ids[nm], sizeof ids[nm], "%s@%s", stem, an);
            models[nm] = (api_model){ids[nm], l};
            nm++;
        }
        err_clear(&e);
    } else if (doc && !t.l && !a.no_adapter)
        fprintf(stderr, "note: no trained adapter yet; answering with the base\n");
    if (doc && t.l && !t.named) {
        snprintf(ids[nm], sizeof ids[nm], "%s", stem);
        models[nm] = (api_model){ids[nm], t.l};
        nm++;
        /* every committed version, newest first, as NAME@vNNNN */
        for (int v = t.version; v >= 1 && nm < MAXM - 1; v--) {
            char vn[16], dir[4200];
            store_version_name(v, vn, sizeof vn);
            snprintf(dir, sizeof dir, "%s/adapter/versions/%s", t.store, vn);
            if (!fs_is_dir(dir)) continue;
            lora *l = t.l;
            if (v != t.version) {
                if (adapter_load(dir, t.m, &l, &e)) {
                    fprintf(stderr, "warning: adapter %s not served: %s\n", vn, e.msg);
                    err_clear(&e);
                    continue;
                }
                owned[nowned++] = l;
            }
            snprintf(ids[nm], sizeof ids[nm], "%s@%s", stem, vn);
            models[nm] = (api_model){ids[nm], l};
            nm++;
        }
    }
    snprintf(ids[nm], sizeof ids[nm], "%s", t.base.entry ? t.base_spec : fs_basename(t.base_spec));
    models[nm] = (api_model){ids[nm], NULL};
    nm++;
    int n_ctx = a.ctx ? a.ctx : (t.m->cfg.max_pos < 4096 ? t.m->cfg.max_pos : 4096);
    if (n_ctx > t.m->cfg.max_pos) n_ctx = t.m->cfg.max_pos;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    api_opts ao = {
        .host = a.host,
        .port = a.port,
        .api_key = a.api_key,
        .parallel = a.parallel,
        .queue = a.queue,
        .max_body = (size_t)a.max_body_kib * 1024,
        .n_ctx = n_ctx,
        .timeout_s = a.timeout,
        .m = t.m,
        .t = t.t,
        .dialect = t.dialect,
        .system_prompt = t.system_prompt,
        .store = t.store,
        .audio_base = t.m->cfg.audio ? t.model_path : NULL,
        .base_name = t.base_spec,
        .audio_resample = t.doc ? doc_fm(t.doc)->training.audio.auto_resample : 0,
        .models = models,
        .n_models = nm,
        .step_delay_ms = getenv("DLM_TEST_API_STEP_MS") ? atoi(getenv("DLM_TEST_API_STEP_MS")) : 0,
        .stop = &g_stop,
        .on_ready = on_ready,
        .ready_ctx = NULL,
    };
    if (api_serve(&ao, &e) == 0) {
        fprintf(stderr, "dlm api: stopped\n");
        rc = EXIT_OK;
    }
    if (rc == EXIT_FAIL) rc = cmd_fail(ctx, &e);
    for (int i = 0; i < nowned; i++) lora_free(owned[i]);
    target_close(&t);
    return rc;
}
