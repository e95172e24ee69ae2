/* dlm serve — share a trained document over HTTP for `dlm pull peer://...`
 * (src/share/peer.h). Packs the store to a temp file, serves it at
 * /<dlm_id> with HMAC tokens, prints the peer:// URL, runs until Ctrl-C. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cmd/commands.h"
#include "share/pack.h"
#include "share/peer.h"
#include "util/fs.h"
#include "util/timeutil.h"

typedef struct serve_args {
    int port, public, i_know, conc, rate;
    double ttl;
} serve_args;

static const opt OPTS[] = {
    {"port", 0, OPT_INT, offsetof(serve_args, port), "N", "TCP port (7337; 0 = any free port)"},
    {"public", 0, OPT_FLAG, offsetof(serve_args, public), NULL, "listen on all interfaces (with --i-know-this-is-public)"},
    {"i-know-this-is-public", 0, OPT_FLAG, offsetof(serve_args, i_know), NULL, "confirm --public"},
    {"max-concurrency", 0, OPT_INT, offsetof(serve_args, conc), "N", "downloads at once per token (4)"},
    {"rate-limit", 0, OPT_INT, offsetof(serve_args, rate), "N", "requests per minute per token (30)"},
    {"token-ttl-minutes", 0, OPT_DOUBLE, offsetof(serve_args, ttl), "M", "token lifetime in minutes (15)"},
    {0},
};

const cmd_spec spec_serve = {
    "serve", "PATH [--port 7337] [--public --i-know-this-is-public]",
    "serve a trained document's pack to `dlm pull peer://...` until Ctrl-C",
    "Listens on 127.0.0.1 unless --public --i-know-this-is-public (0.0.0.0).\n"
    "Prints peer://HOST:PORT/<dlm_id>?token=...; the token is an HMAC over a\n"
    "secret that dies with the server. Past the limits the answer is 429, a bad\n"
    "or expired token gets 403. See docs/share.md.",
    OPTS,
};

int cmd_serve(int argc, char **argv, dlm_ctx *ctx)
{
    serve_args a = {.port = 7337, .conc = 4, .rate = 30, .ttl = 15};
    char *pos[64];
    int npos;
    int r = opts_parse(&spec_serve, argc, argv, ctx, &a, pos, &npos);
    if (r) return r == 1 ? EXIT_OK : EXIT_USAGE;
    if (npos != 1) return cmd_usage_error(&spec_serve, npos ? "too many arguments" : "serve needs a PATH");
    if (a.public && !a.i_know)
        return cmd_usage_error(&spec_serve, "--public listens on every interface; add --i-know-this-is-public");
    if (a.port < 0 || a.port > 65535) return cmd_usage_error(&spec_serve, "--port must be 0..65535");
    if (a.conc < 1 || a.rate < 1 || !(a.ttl > 0))
        return cmd_usage_error(&spec_serve, "--max-concurrency, --rate-limit and --token-ttl-minutes must be positive");
    dlm_err e;
    err_clear(&e);
    if (cmd_setup(ctx, &e)) return cmd_fail(ctx, &e);
    char tmp[4200], pack[4400];
    snprintf(tmp, sizeof tmp, "%s/tmp/serve-%ld", ctx->home, (long)getpid());
    if (fs_mkdir_p(tmp, &e)) return cmd_fail(ctx, &e);
    snprintf(pack, sizeof pack, "%s/%s.pack", tmp, fs_basename(pos[0]));
    pack_opts po = {.doc_path = pos[0], .home = ctx->home, .out = pack, .now = time_now()};
    pack_result pr;
    int rc = EXIT_FAIL;
    peer_server *s = NULL;
    if (pack_write(&po, &pr, &e)) goto out;
    if (pr.adapter_version == 0) {
        err_set(&e, "ServeError", "%s has no trained adapter to share", pos[0]);
        err_hint(&e, "run `dlm train %s` first", pos[0]);
        goto out;
    }
    /* Ctrl-C / SIGTERM are taken by sigwait below, in this thread only */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    peer_opts o = {.pack_path = pack, .dlm_id = pr.dlm_id, .bind = a.public ? "0.0.0.0" : "127.0.0.1",
                   .port = a.port, .max_concurrency = a.conc, .rate_limit = a.rate, .ttl_s = a.ttl * 60};
    if (!(s = peer_start(&o, &e))) goto out;
    char host[256] = "127.0.0.1", tok[PEER_TOKEN_CHARS];
    if (a.public && gethostname(host, sizeof host)) snprintf(host, sizeof host, "0.0.0.0");
    peer_issue(s, tok, sizeof tok);
    printf("peer://%s:%d/%s?token=%s\n", host, peer_port(s), pr.dlm_id, tok);
    if (!ctx->quiet)
        fprintf(stderr, "serving %s (adapter v%04d, %llu bytes) on %s:%d; token valid %g min; Ctrl-C stops\n",
                pr.dlm_id, pr.adapter_version, (unsigned long long)pr.bytes_out, o.bind, peer_port(s), a.ttl);
    fflush(stdout);
    int sig = 0;
    sigwait(&set, &sig);
    rc = sig == SIGINT ? EXIT_INTERRUPTED : EXIT_OK;
out:
    peer_stop(s);
    {
        dlm_err e2;
        err_clear(&e2);
        fs_remove_tree(tmp, &e2);
    }
    if (rc == EXIT_FAIL) return cmd_fail(ctx, &e);
    return rc;
}
