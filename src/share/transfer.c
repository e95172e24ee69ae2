/* transfer — push and pull (transfer.h). */
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sodium.h>
#include <unistd.h>

#include "share/hf_share.h"
#include "share/provenance.h"
#include "share/transfer.h"
#include "util/progress.h"
#include "util/fs.h"
#include "util/hash.h"
#include "util/json.h"
#include "util/str.h"
#include "version.h"

#define SIG_MAX (64u << 10)

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init_once(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

typedef struct sink {
    FILE *f;
    uint64_t n, max;
    int over;
} sink;

static size_t on_data(char *p, size_t sz, size_t nm, void *ud)
{
    sink *s = ud;
    size_t n = sz * nm;
    if (s->n + n > s->max) {
        s->over = 1;
        return 0;
    }
    s->n += n;
    return fwrite(p, 1, n, s->f);
}

/* libcurl's transfer callbacks: bytes downloaded / uploaded so far */
static int on_down(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow)
{
    progress *p = ud;
    (void)ultotal, (void)ulnow;
    if (!p->total && dltotal > 0) p->total = (uint64_t)dltotal;
    progress_update(p, (uint64_t)dlnow);
    return 0;
}

static int on_up(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow)
{
    progress *p = ud;
    (void)dltotal, (void)dlnow, (void)ultotal;
    progress_update(p, (uint64_t)ulnow);
    return 0;
}

static void with_progress(CURL *c, progress *p, int up)
{
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, up ? on_up : on_down);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, p);
}

static CURL *handle(const share_http *h, const char *url, struct curl_slist **hl)
{
    pthread_once(&curl_once, curl_init_once);
    CURL *c = curl_easy_init();
    if (!c) return NULL;
    int plain = !strncmp(url, "http://", 7);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "dlm/" DLM_VERSION);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 30L);
    if (h->timeout_s > 0) curl_easy_setopt(c, CURLOPT_TIMEOUT, h->timeout_s);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, plain ? "http" : "https");
    /* never downgraded: an https pull only follows https redirects */
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, plain ? 0L : 1L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, 5L);
    curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "https");
    if (h->ca_file) curl_easy_setopt(c, CURLOPT_CAINFO, h->ca_file);
    *hl = NULL;
    if (h->auth && *h->auth) {
        strbuf a = STRBUF_INIT;
        sb_printf(&a, "Authorization: %s", h->auth);
        *hl = curl_slist_append(*hl, sb_str(&a));
        sb_free(&a);
    }
    return c;
}

/* The URL without its query (tokens stay out of messages). */
static void redact(const char *url, char *out, size_t cap)
{
    snprintf(out, cap, "%.*s", (int)strcspn(url, "?"), url);
}

int share_http_get(const share_http *h, const char *url, const char *path, uint64_t max_bytes, long *status,
                   dlm_err *e)
{
    *status = 0;
    struct curl_slist *hl;
    CURL *c = handle(h, url, &hl);
    if (!c) return err_set(e, "OOMError", "out of memory");
    FILE *f = fopen(path, "wbx");
    if (!f) {
        curl_easy_cleanup(c);
        curl_slist_free_all(hl);
        return err_sys(e, "cannot create %s", path);
    }
    sink s = {f, 0, max_bytes, 0};
    char errbuf[CURL_ERROR_SIZE] = "", shown[2048];
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    progress pg;
    progress_begin(&pg, "downloading pack", 0, PROGRESS_BYTES);
    with_progress(c, &pg, 0);
    CURLcode rc = curl_easy_perform(c);
    if (rc == CURLE_OK) progress_end(&pg);
    else progress_abort(&pg);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
    curl_easy_cleanup(c);
    curl_slist_free_all(hl);
    int bad = fclose(f) != 0;
    redact(url, shown, sizeof shown);
    int r = 0;
    if (s.over)
        r = err_set(e, "PackTooLargeError", "%s: the download is larger than %llu bytes", shown,
                    (unsigned long long)max_bytes);
    else if (rc != CURLE_OK)
        r = err_set(e, "NetworkError", "%s: %s", shown, errbuf[0] ? errbuf : curl_easy_strerror(rc));
    else if (bad) r = err_sys(e, "cannot write %s", path);
    if (r || *status < 200 || *status > 299) unlink(path);
    return r;
}

static size_t on_read(char *p, size_t sz, size_t nm, void *ud)
{
    return fread(p, 1, sz * nm, (FILE *)ud);
}

static size_t on_discard(char *p, size_t sz, size_t nm, void *ud)
{
    (void)p;
    (void)ud;
    return sz * nm;
}

int share_http_post(const share_http *h, const char *url, const char *path, long *status, dlm_err *e)
{
    *status = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return err_sys(e, "cannot open %s", path);
    struct curl_slist *hl;
    CURL *c = handle(h, url, &hl);
    if (!c) {
        fclose(f);
        return err_set(e, "OOMError", "out of memory");
    }
    hl = curl_slist_append(hl, "Content-Type: application/octet-stream");
    /* ask first: a server that refuses (bad Authorization, too large)
     * answers before a possibly large body is sent */
    hl = curl_slist_append(hl, "Expect: 100-continue");
    char errbuf[CURL_ERROR_SIZE] = "", shown[2048];
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(c, CURLOPT_POST, 1L);
    curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
    curl_easy_setopt(c, CURLOPT_READDATA, f);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)fs_file_size(path));
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_discard);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    progress pg;
    progress_begin(&pg, "uploading pack", (uint64_t)fs_file_size(path), PROGRESS_BYTES);
    with_progress(c, &pg, 1);
    CURLcode rc = curl_easy_perform(c);
    if (rc == CURLE_OK) progress_end(&pg);
    else progress_abort(&pg);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
    curl_easy_cleanup(c);
    curl_slist_free_all(hl);
    fclose(f);
    redact(url, shown, sizeof shown);
    /* a server that refuses (401, 413, ...) may answer before reading the
     * body and close: the upload then breaks, but its answer is the news */
    if (rc == CURLE_SEND_ERROR && *status >= 400) return 0;
    if (rc != CURLE_OK) return err_set(e, "NetworkError", "%s: %s", shown, errbuf[0] ? errbuf : curl_easy_strerror(rc));
    return 0;
}

/* <home>/tmp/<what>-<pid>-<nonce> */
static int make_tmp(const char *home, const char *what, char *out, size_t cap, dlm_err *e)
{
    hash_init();
    snprintf(out, cap, "%s/tmp/%s-%ld-%08x", home, what, (long)getpid(), randombytes_random());
    return fs_mkdir_p(out, e);
}

static void rm_tmp(const char *dir)
{
    dlm_err e;
    err_clear(&e);
    if (dir[0]) fs_remove_tree(dir, &e);
}

/* peer://host:port/<id>?token=T → http://host:port/<id>?token=T */
static int peer_url(const char *src, char *out, size_t cap, dlm_err *e)
{
    const char *p = src + 7, *slash = strchr(p, '/');
    if (!slash || slash == p || !strchr(p, ':') || strchr(p, ':') > slash)
        return err_set(e, "PeerURLError", "'%s' is not peer://HOST:PORT/<dlm_id>?token=...", src);
    for (const char *q = p; q < slash; q++)
        if (!(('a' <= *q && *q <= 'z') || ('A' <= *q && *q <= 'Z') || ('0' <= *q && *q <= '9') || strchr(".-:[]", *q)))
            return err_set(e, "PeerURLError", "bad host in '%.*s'", (int)(slash - src), src);
    char id[32];
    size_t il = strcspn(slash + 1, "?");
    snprintf(id, sizeof id, "%.*s", (int)(il < 31 ? il : 31), slash + 1);
    if (!pack_valid_dlm_id(id) || strncmp(slash + 1 + il, "?token=", 7))
        return err_set(e, "PeerURLError", "'%s' is not peer://HOST:PORT/<dlm_id>?token=...", src),
               err_hint(e, "copy the whole URL that `dlm serve` printed");
    snprintf(out, cap, "http://%s", p);
    return 0;
}

static int http_status_error(long st, const char *what, const char *url, int peer, dlm_err *e)
{
    char shown[2048];
    redact(url, shown, sizeof shown);
    if (peer && st == 403)
        return err_set(e, "PeerTokenError", "%s: the token is invalid or expired (HTTP 403)", shown),
               err_hint(e, "ask for a fresh URL from `dlm serve`");
    if (peer && st == 429)
        return err_set(e, "PeerRateLimitError", "%s: too many requests (HTTP 429)", shown),
               err_hint(e, "wait a minute and pull again");
    if (st == 404) return err_set(e, "PullNotFoundError", "%s: %s not found (HTTP 404)", shown, what);
    return err_set(e, "NetworkError", "%s: HTTP %ld", shown, st);
}

int pull_run(const pull_opts *o, pull_result *r, dlm_err *e)
{
    memset(r, 0, sizeof *r);
    char tmp[4096] = "", pack[4300], sig[4400] = "", url[4096];
    const char *src = o->source;
    int rc = -1;
    int hf = !strncmp(src, "hf:", 3);
    char repo[256];
    if (hf && hf_share_parse(src, repo, sizeof repo, e)) return -1;
    if (!strncmp(src, "http://", 7)) {
        err_set(e, "PullSourceError", "%s: plain http is refused for packs", src);
        err_hint(e, "use https://, or peer:// for a `dlm serve` on your network");
        return -1;
    }
    int peer = !strncmp(src, "peer://", 7), https = !strncmp(src, "https://", 8);
    if (hf) {
        hub_opts ho;
        int have_sig;
        if (hub_opts_init(&ho, e) || make_tmp(o->home, "pull", tmp, sizeof tmp, e)) return -1;
        snprintf(pack, sizeof pack, "%s/pulled.dlm.pack", tmp);
        snprintf(sig, sizeof sig, "%s.minisig", pack);
        if (hf_pull(&ho, repo, pack, sig, o->limits.max_total, &have_sig, e)) goto out;
        if (!have_sig) sig[0] = 0;
    } else if (peer || https) {
        if (peer && peer_url(src, url, sizeof url, e)) return -1;
        if (https) snprintf(url, sizeof url, "%s", src);
        if (make_tmp(o->home, "pull", tmp, sizeof tmp, e)) return -1;
        snprintf(pack, sizeof pack, "%s/pulled.dlm.pack", tmp);
        long st;
        if (share_http_get(&o->http, url, pack, o->limits.max_total, &st, e)) goto out;
        if (st < 200 || st > 299) { http_status_error(st, "pack", url, peer, e); goto out; }
        if (https) {
            char su[4200];
            snprintf(sig, sizeof sig, "%s.minisig", pack);
            snprintf(su, sizeof su, "%s.minisig", url);
            if (share_http_get(&o->http, su, sig, SIG_MAX, &st, e)) goto out;
            if (st == 404) sig[0] = 0;
            else if (st < 200 || st > 299) { http_status_error(st, "signature", su, 0, e); goto out; }
        }
    } else {
        snprintf(pack, sizeof pack, "%s", src);
        if (!fs_is_file(pack)) {
            err_set(e, "PullSourceError", "%s: no such pack", src);
            err_hint(e, "pull a .dlm.pack file, https://URL or peer://HOST:PORT/<dlm_id>?token=...");
            return -1;
        }
        snprintf(sig, sizeof sig, "%s.minisig", pack);
        if (!fs_exists(sig)) sig[0] = 0;
    }
    r->sig = PULL_UNSIGNED;
    if (sig[0]) {
        verify_result vr;
        dlm_err ve;
        err_clear(&ve);
        int v = verify_detached(pack, sig, o->trusted_dir, &vr, &ve);
        snprintf(r->signer_id, sizeof r->signer_id, "%s", vr.signer_id);
        if (v == VERIFY_OK) r->sig = PULL_VERIFIED;
        else if (v == VERIFY_UNTRUSTED) {
            r->sig = PULL_UNVERIFIED;
            err_format(&ve, r->sig_note, sizeof r->sig_note);
        } else {
            *e = ve;
            err_prefix(e, "refusing to install");
            if (!e->hint[0]) err_hint(e, "the pack or its signature was altered; get a fresh copy from its author");
            goto out;
        }
    }
    unpack_opts uo = {.pack_path = pack, .home = o->home, .out_dir = o->out_dir, .force = o->force,
                      .limits = o->limits};
    if (unpack_run(&uo, &r->u, e)) goto out;
    rc = 0;
out:
    rm_tmp(tmp);
    return rc;
}

/* The original's model card for a dlm repository (hf_sink._render_readme),
 * its fields from the pack's manifest. */
static char *hf_readme(const char *repo, const char *pack, const pack_limits *lim, dlm_err *e)
{
    pack_contents *c = pack_read_file(pack, NULL, lim, e);
    if (!c) return NULL;
    const char *bm = jget_str(c->manifest, "base_model");
    json_t *av = json_object_get(c->manifest, "adapter_version");
    char ver[32] = "(unknown)";
    if (json_is_integer(av)) snprintf(ver, sizeof ver, "%lld", (long long)json_integer_value(av));
    strbuf sb = STRBUF_INIT;
    sb_printf(&sb,
              "---\nlibrary_name: dlm\ntags:\n  - dlm\n  - lora-adapter\n---\n\n# %s\n\n"
              "Packed via [`dlm`](https://github.com/tenseleyFlow/DocumentLanguageModel)\n"
              "\u2014 a text file that becomes a locally-trained LoRA adapter.\n\n## Contents\n\n"
              "- **`%s`** \u2014 the signed, content-addressed bundle\n"
              "  (`.dlm.pack`). Includes the source `.dlm` document, the trained\n"
              "  adapter, the training-state sidecar, and a per-run manifest.\n\n## Identity\n\n"
              "| Field | Value |\n|---|---|\n| `dlm_id` | `%s` |\n| `base_model` | `%s` |\n"
              "| `adapter_version` | `%s` |\n\n## License\n\nSee the base model's license.\n\n## Install\n\n"
              "```bash\ndlm pull hf:%s\n```\n\n"
              "This downloads the pack + unpacks it into your local `dlm` store,\n"
              "ready for `dlm prompt`, `dlm train --resume`, or `dlm export`.\n",
              repo, HF_PACK_NAME, c->dlm_id[0] ? c->dlm_id : "(unknown)", bm ? bm : "(unknown)", ver, repo);
    pack_contents_free(c);
    char *s = sb_detach(&sb, NULL);
    if (!s) err_set(e, "OOMError", "out of memory");
    return s;
}

int push_run(const push_opts *o, push_result *r, dlm_err *e)
{
    memset(r, 0, sizeof *r);
    const char *to = o->to;
    if (!strncmp(to, "peer://", 7))
        return err_set(e, "PushDestinationError", "peer destinations are refused"),
               err_hint(e, "to share over your network run `dlm serve PATH` and give out its peer:// URL");
    int hf = !strncmp(to, "hf:", 3);
    char repo[256];
    if (hf) {
        hub_opts ho;
        if (hf_share_parse(to, repo, sizeof repo, e) || hub_opts_init(&ho, e) || hf_push_ready(&ho, repo, e)) return -1;
    }
    if (!strncmp(to, "http://", 7))
        return err_set(e, "PushDestinationError", "%s: plain http is refused for packs", to), err_hint(e, "use https://");
    char tmp[4096] = "", pack[4300], sig[4400] = "", base[1200];
    int rc = -1;
    if (make_tmp(o->home, "push", tmp, sizeof tmp, e)) return -1;
    if (str_endswith(o->path, ".dlm")) {
        snprintf(base, sizeof base, "%s.pack", fs_basename(o->path));
        snprintf(pack, sizeof pack, "%s/%s", tmp, base);
        pack_opts po = {.doc_path = o->path, .home = o->home, .out = pack, .include_exports = o->include_exports,
                        .include_base = o->include_base, .include_logs = o->include_logs,
                        .licensee_url = o->licensee_url, .signer = o->signer, .now = o->now};
        pack_result pr;
        if (pack_write(&po, &pr, e)) goto out;
        snprintf(r->dlm_id, sizeof r->dlm_id, "%s", pr.dlm_id);
    } else {
        snprintf(base, sizeof base, "%s", fs_basename(o->path));
        snprintf(pack, sizeof pack, "%s", o->path);
        /* never send what unpack would refuse */
        pack_contents *c = pack_read_file(pack, NULL, &o->limits, e);
        if (!c) goto out;
        snprintf(r->dlm_id, sizeof r->dlm_id, "%s", c->dlm_id);
        pack_contents_free(c);
    }
    if (o->signer) {
        strbuf s = STRBUF_INIT;
        char tc[1400];
        snprintf(tc, sizeof tc, "timestamp:%lld\tfile:%s\thashed", (long long)o->now, base);
        snprintf(sig, sizeof sig, "%s/%s.minisig", tmp, base);
        int bad = minisign_sign_file(o->signer, pack, tc, &s, e) || fs_write_atomic(sig, s.buf, s.len, 0644, e);
        sb_free(&s);
        if (bad) goto out;
    }
    if (hf) {
        hub_opts ho;
        hf_push_result hr;
        char *readme = hf_readme(repo, pack, &o->limits, e);
        int bad = !readme || hub_opts_init(&ho, e) ||
                  hf_push(&ho, repo, pack, sig[0] ? sig : NULL, readme, "Upload " HF_PACK_NAME " via dlm push", &hr, e);
        free(readme);
        if (bad) goto out;
        snprintf(r->dest, sizeof r->dest, "hf:%s", repo);
        if (sig[0]) snprintf(r->sig_dest, sizeof r->sig_dest, "hf:%s/" HF_SIG_NAME, repo);
        snprintf(r->commit, sizeof r->commit, "%s", hr.commit);
        r->created = hr.created;
    } else if (!strncmp(to, "https://", 8)) {
        long st;
        snprintf(r->dest, sizeof r->dest, "%s", to);
        if (share_http_post(&o->http, to, pack, &st, e)) goto out;
        r->status = st;
        if (st < 200 || st > 299) { err_set(e, "PushHTTPError", "%s: HTTP %ld", to, st); goto out; }
        if (sig[0]) {
            snprintf(r->sig_dest, sizeof r->sig_dest, "%s.minisig", to);
            if (share_http_post(&o->http, r->sig_dest, sig, &st, e)) goto out;
            if (st < 200 || st > 299) { err_set(e, "PushHTTPError", "%s: HTTP %ld", r->sig_dest, st); goto out; }
        }
    } else {
        if (fs_mkdir_p(to, e)) goto out;
        if (!fs_join(r->dest, sizeof r->dest, to, base)) { err_set(e, "PushError", "path too long"); goto out; }
        snprintf(r->sig_dest, sizeof r->sig_dest, "%s.minisig", r->dest);
        if (fs_copy_file(pack, r->dest, e)) goto out;
        if (sig[0]) {
            if (fs_copy_file(sig, r->sig_dest, e)) goto out;
        } else {
            /* a signature of an earlier pack would now fail to verify */
            if (fs_exists(r->sig_dest) && unlink(r->sig_dest)) { err_sys(e, "cannot remove %s", r->sig_dest); goto out; }
            r->sig_dest[0] = 0;
        }
    }
    rc = 0;
out:
    rm_tmp(tmp);
    return rc;
}
