/* dlm perplexity — per-token negative log-likelihood of a file's text under
 * the base (and the document's adapter). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/commands.h"
#include "infer/target.h"
#include "kern/kern.h"
#include "decoder/session.h"
#include "util/fs.h"
#include "util/json.h"

typedef struct perplexity_args {
    int json, no_adapter, ctx, threads, offline;
    const char *base;
} perplexity_args;

static const opt OPTS[] = {
    {"base", 0, OPT_STR, offsetof(perplexity_args, base), "BASE", "score with this base (no document)"},
    {"json", 0, OPT_FLAG, offsetof(perplexity_args, json), NULL, "{tokens, nll_mean, ppl, token_nll} on stdout"},
    {"no-adapter", 0, OPT_FLAG, offsetof(perplexity_args, no_adapter), NULL, "the base alone"},
    {"ctx", 0, OPT_INT, offsetof(perplexity_args, ctx), "N", "window length (default: the model's context, at most 2048)"},
    {"threads", 0, OPT_THREADS, offsetof(perplexity_args, threads), "N", "compute threads"},
    {"offline", 0, OPT_FLAG, offsetof(perplexity_args, offline), NULL, "never download the base"},
    {0},
};

const cmd_spec spec_perplexity = {
    "perplexity", "(--base B | PATH) FILE [--json]",
    "per-token negative log-likelihood and perplexity of a text file",
    "The text is tokenized as is (BOS added when the tokenizer adds one) and scored in\n"
    "consecutive windows of --ctx tokens; the first token of each window has no context\n"
    "and is not scored.",
    OPTS,
};

int cmd_perplexity(int argc, char **argv, dlm_ctx *ctx)
{
    perplexity_args a = {0};
    char *pos[64];
    int npos;
    int r = opts_parse(&spec_perplexity, argc, argv, ctx, &a, pos, &npos);
    if (r) return r == 1 ? EXIT_OK : EXIT_USAGE;
    dlm_err e;
    err_clear(&e);
    if (cmd_setup(ctx, &e)) return cmd_fail(ctx, &e);
    const char *doc = NULL, *file;
    if (a.base && npos == 1) file = pos[0];
    else if (npos == 2) { doc = pos[0]; file = pos[1]; }
    else return cmd_usage_error(&spec_perplexity, "give (--base B | PATH) and one FILE");
    char *text;
    size_t len;
    if (fs_read_all(file, (size_t)1 << 30, &text, &len, &e)) return cmd_fail(ctx, &e);
    kern_init(a.threads);
    target_opts to = {.doc_path = doc, .base = a.base, .home = ctx->home, .use_adapter = !a.no_adapter,
                      .offline = a.offline};
    infer_target t;
    if (target_open(&to, &t, &e)) { free(text); return cmd_fail(ctx, &e); }
    int rc = EXIT_FAIL;
    tok_ids ids = {0};
    session *s = NULL;
    float *logits = NULL, *nll = NULL;
    if (tok_encode_append(t.t, text, len, TOK_PARSE_SPECIAL | TOK_ADD_SPECIAL, &ids, &e)) goto done;
    if (ids.n < 2) { err_set(&e, NULL, "'%s' has fewer than 2 tokens: nothing to score", file); goto done; }
    int W = a.ctx > 0 ? a.ctx : (t.m->cfg.max_pos > 0 && t.m->cfg.max_pos < 2048 ? t.m->cfg.max_pos : 2048);
    if (W < 2) W = 2;
    int V = t.m->cfg.vocab;
    if (session_create(t.m, t.l, W, 256, &s, &e)) goto done;
    logits = malloc((size_t)W * (size_t)V * sizeof(float));
    nll = malloc(ids.n * sizeof(float));
    if (!logits || !nll) { err_set(&e, "MemoryError", "out of memory"); goto done; }
    size_t scored = 0;
    double sum = 0;
    for (size_t w = 0; w + 1 < ids.n; w += (size_t)W) {
        size_t n = ids.n - w < (size_t)W ? ids.n - w : (size_t)W;
        session_reset(s);
        if (session_eval(s, ids.v + w, (int)n, logits, 1, &e)) goto done;
        for (size_t i = 0; i + 1 < n; i++) {
            const float *lg = logits + i * (size_t)V;
            float mx = lg[0];
            for (int k = 1; k < V; k++) if (lg[k] > mx) mx = lg[k];
            double z = 0;
            for (int k = 0; k < V; k++) z += exp((double)(lg[k] - mx));
            double v = -((double)(lg[ids.v[w + i + 1]] - mx) - log(z));
            nll[scored++] = (float)v;
            sum += v;
        }
    }
    double mean = sum / (double)scored;
    if (a.json) {
        json_t *arr = json_array();
        for (size_t i = 0; i < scored; i++) json_array_append_new(arr, json_real(nll[i]));
        json_t *j = json_pack("{s:I, s:f, s:f, s:o}", "tokens", (json_int_t)scored, "nll_mean", mean, "ppl", exp(mean),
                              "token_nll", arr);
        strbuf sb = STRBUF_INIT;
        json_write(&sb, j, JW_SORT | JW_COMPACT);
        printf("%s\n", sb_str(&sb));
        sb_free(&sb);
        json_decref(j);
    } else {
        printf("%zu tokens, nll %.4f, perplexity %.3f%s\n", scored, mean, exp(mean),
               t.version ? " (with the adapter)" : "");
    }
    rc = EXIT_OK;
done:
    if (rc) rc = cmd_fail(ctx, &e);
    free(logits);
    free(nll);
    session_free(s);
    tok_ids_free(&ids);
    target_close(&t);
    free(text);
    return rc;
}
