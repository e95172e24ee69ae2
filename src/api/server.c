/* server — HTTP front (libmicrohttpd, a thread per connection) and the
 * scheduler thread that owns the model.
 *
 * A request becomes a job: the HTTP thread parses and tokenizes it, queues
 * it and then waits on the job (whole answer) or streams from it (SSE).
 * The scheduler admits queued jobs into free slots between steps, feeds
 * every running job one chunk (a prompt part, or its last sampled token)
 * through kv_pool_eval, samples, and publishes text. A job has two owners
 * (HTTP side and scheduler), counted in refs; the last one frees it. */
#include "api/server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "api/request.h"
#include "decoder/kvpool.h"
#include "infer/audio_prompt.h"
#include "infer/vl_prompt.h"
#include "infer/generate.h"
#include "media/audio.h"
#include "infer/sample.h"
#include "util/json.h"
#include "util/net.h"
#include "util/str.h"

#define N_BATCH 512

typedef struct job job;
struct job {
    /* fixed at creation */
    api_kind kind;
    int model;
    int32_t *hist;                /* prompt, then generated ids; capacity n_ctx */
    int n_prompt;
    sample_params sp;
    int max_tokens;
    char *stop[API_MAX_STOP];
    int n_stop;
    int stream, include_usage;
    char id[48];
    long created;
    /* input_audio parts: the prompt's spliced rows (ap.emb filled by the
     * scheduler, which alone drives the kernels) and the clips' samples */
    audio_prompt ap;
    float *wx[API_MAX_AUDIO];
    size_t wn[API_MAX_AUDIO];
    int n_wav, first_spliced, audio_failed;
    /* scheduler only */
    int slot, n_fed, nh, n_gen, want_logits;
    int n_cached;                 /* prompt tokens reused from a cached slot */
    vl_prompt *vp;                /* a request with images (infer/vl_prompt.h): its rows, or NULL */
    kv_splice ks;                 /* this step's slice of them */
    /* shared, under srv->mu */
    strbuf gen;                   /* generated text; [0, ready) may be sent */
    size_t ready, sent;
    int started, done, cancelled, refs;
    const char *finish;           /* "stop" | "length" | "error" */
    pthread_cond_t cv;
    job *next;
};

typedef struct pool {
    kv_pool *kv;
    int32_t **toks;               /* [slot] what its cache holds */
    job **owner;                  /* [slot] NULL = free */
    uint64_t *used;               /* [slot] last use (LRU) */
} pool;

typedef struct server {
    const api_opts *o;
    pthread_mutex_t mu, tok_mu;
    pthread_mutex_t kern_mu;      /* kern's thread pool runs one job at a time: the decode steps and a
                                   * request's vision tower (job_new) take turns */
    pthread_cond_t sched_cv;
    job *pending, *pending_tail;
    int n_pending, n_active, n_jobs, quit;
    job **active;
    pool *pools;                  /* [n_models], created on first use */
    int32_t stops_chat[32], stops_raw[32];
    int n_stops_chat, n_stops_raw;
    int V, MV;
    uint64_t tick, seq;
    long started;
    audio_feat af;                /* o->audio_base's encoder */
    int have_af;
} server;

typedef struct conn {
    strbuf body;
    int too_big;
} conn;

/* ---- jobs ----------------------------------------------------------------- */

static void job_audio_free(job *j)
{
    audio_prompt_free(&j->ap);
    for (int i = 0; i < j->n_wav; i++) free(j->wx[i]);
    j->n_wav = 0;
}

static void job_free_vl(job *j)
{
    if (j->vp) vl_prompt_free(j->vp);
    free(j->vp);
    j->vp = NULL;
}

static void job_unref(server *s, job *j)    /* with s->mu held */
{
    if (--j->refs > 0) return;
    job_audio_free(j);
    job_free_vl(j);
    free(j->hist);
    for (int i = 0; i < j->n_stop; i++) free(j->stop[i]);
    sb_free(&j->gen);
    pthread_cond_destroy(&j->cv);
    free(j);
    s->n_jobs--;
    pthread_cond_broadcast(&s->sched_cv);
}

static void job_finish(job *j, const char *why)   /* with mu held */
{
    j->finish = why;
    j->ready = j->gen.len;
    j->done = 1;
    pthread_cond_broadcast(&j->cv);
}

/* ---- scheduler ------------------------------------------------------------ */

static int lcp(const int32_t *a, int na, const int32_t *b, int nb)
{
    int n = na < nb ? na : nb, i = 0;
    while (i < n && a[i] == b[i]) i++;
    return i;
}

/* Rows per pass: PaliGemma's prefix-LM block (an image's tokens and the
 * prompt) goes through one pass whole, so its pool takes an image more. */
static int pool_batch(const server *s)
{
    const model_config *c = &s->o->m->cfg;
    return c->vl == VL_PALI ? N_BATCH + c->pali_tokens : N_BATCH;
}

static int pool_ensure(server *s, int mi, dlm_err *e)
{
    pool *p = &s->pools[mi];
    if (p->kv) return 0;
    int n = s->o->parallel;
    pthread_mutex_lock(&s->kern_mu);   /* its DoRA scales run on kern's pool */
    int rc = kv_pool_create(s->o->m, s->o->models[mi].l, n, s->o->n_ctx, pool_batch(s), &p->kv, e);
    pthread_mutex_unlock(&s->kern_mu);
    if (rc) return -1;
    p->toks = calloc((size_t)n, sizeof *p->toks);
    p->owner = calloc((size_t)n, sizeof *p->owner);
    p->used = calloc((size_t)n, sizeof *p->used);
    if (!p->toks || !p->owner || !p->used) return err_set(e, "MemoryError", "out of memory");
    for (int i = 0; i < n; i++)
        if (!(p->toks[i] = malloc((size_t)s->o->n_ctx * sizeof(int32_t))))
            return err_set(e, "MemoryError", "out of memory");
    return 0;
}

/* Put j in a free slot of its pool, reusing the longest cached prefix: the
 * free slot's own, or a copy from any slot whose cache shares more. */
static int admit(server *s, job *j, dlm_err *e)
{
    if (pool_ensure(s, j->model, e)) return -1;
    pool *p = &s->pools[j->model];
    int n = kv_pool_n_seq(p->kv), best = -1, best_l = -1, src = -1, src_l = 0;
    /* the last prompt token is always fed, for its logits; a prompt with
     * images reuses nothing (its image tokens' ids say nothing of the image),
     * one with audio nothing from its first clip on (likewise) */
    int cap = j->vp ? 0 : j->n_prompt - 1;
    if (j->n_wav && cap > j->first_spliced) cap = j->first_spliced;
    for (int i = 0; i < n; i++) {
        int l = lcp(p->toks[i], kv_pool_n_past(p->kv, i), j->hist, cap);
        if (p->owner[i]) {
            if (l > src_l) { src = i; src_l = l; }
        } else if (l > best_l || (l == best_l && p->used[i] < p->used[best])) {
            best = i;
            best_l = l;
        }
    }
    if (best < 0) return err_set(e, NULL, "no free slot");
    if (src >= 0 && src_l > best_l) {
        if (kv_pool_copy(p->kv, best, src, src_l, e)) return -1;
        memcpy(p->toks[best], p->toks[src], (size_t)src_l * sizeof(int32_t));
        best_l = src_l;
    } else {
        kv_pool_truncate(p->kv, best, best_l);
    }
    p->owner[best] = j;
    p->used[best] = ++s->tick;
    j->slot = best;
    j->n_fed = j->n_cached = best_l;
    return 0;
}

static void release(server *s, job *j)
{
    pool *p = &s->pools[j->model];
    if (j->slot >= 0) p->owner[j->slot] = NULL;
    /* image rows in the cache: no later prompt may reuse them as a prefix */
    if (j->slot >= 0 && j->vp) kv_pool_truncate(p->kv, j->slot, 0);
    j->slot = -1;
}

/* Longest k < |stop| with text ending in stop[0..k): bytes held back
 * because they may yet become a stop string. */
static size_t stop_hold(const job *j)
{
    size_t hold = 0, n = j->gen.len;
    for (int i = 0; i < j->n_stop; i++) {
        size_t sl = strlen(j->stop[i]);
        for (size_t k = sl - 1; k > hold; k--)
            if (k <= n && !memcmp(j->gen.buf + n - k, j->stop[i], k)) { hold = k; break; }
    }
    return hold;
}

/* After a token: the finish reason, or NULL to go on. Runs under mu
 * (it moves j->ready). */
static const char *after_token(server *s, job *j, int32_t id)
{
    const tok *t = s->o->t;
    if (!tok_is_special(t, id)) {
        size_t bl;
        const char *b = tok_token_bytes(t, id, &bl);
        if (b && bl) {
            size_t from = j->gen.len;
            sb_append(&j->gen, b, bl);
            for (int i = 0; i < j->n_stop; i++) {
                size_t sl = strlen(j->stop[i]);
                size_t st = from + 1 > sl ? from + 1 - sl : 0;
                char *hit = memmem(j->gen.buf + st, j->gen.len - st, j->stop[i], sl);
                if (hit) {
                    j->gen.len = (size_t)(hit - j->gen.buf);
                    j->gen.buf[j->gen.len] = 0;
                    return "stop";
                }
            }
        }
    }
    if (j->n_gen >= j->max_tokens) return "length";
    if (j->nh >= s->o->n_ctx) return "length";
    size_t safe = j->gen.len - stop_hold(j);
    safe = str_utf8_complete((const unsigned char *)j->gen.buf, safe);
    if (safe > j->ready) {
        j->ready = safe;
        pthread_cond_broadcast(&j->cv);
    }
    return NULL;
}

static int is_stop_id(server *s, const job *j, int32_t id)
{
    int chat = j->kind == API_CHAT && !j->n_wav;   /* an audio prompt has no chat template */
    const int32_t *st = chat ? s->stops_chat : s->stops_raw;
    int n = chat ? s->n_stops_chat : s->n_stops_raw;
    for (int i = 0; i < n; i++)
        if (st[i] == id) return 1;
    return 0;
}

static void *scheduler(void *arg)
{
    server *s = arg;
    const api_opts *o = s->o;
    int P = o->parallel;
    float *logits = malloc((size_t)P * s->MV * sizeof(float));
    void *scratch = malloc(sample_scratch_bytes(s->MV));
    int *seq = malloc((size_t)P * sizeof(int)), *ntok = malloc((size_t)P * sizeof(int));
    const int32_t **toks = malloc((size_t)P * sizeof *toks);
    job **batch = malloc((size_t)P * sizeof *batch);
    const kv_splice **sps = malloc((size_t)P * sizeof *sps);
    if (!logits || !scratch || !seq || !ntok || !toks || !batch || !sps) abort();
    dlm_err e;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->quit && !s->n_active && !s->pending) pthread_cond_wait(&s->sched_cv, &s->mu);
        if (s->quit && !s->n_active && !s->pending) break;
        /* leave: cancelled jobs (client gone) free their slot now */
        for (int i = 0; i < s->n_active;) {
            job *j = s->active[i];
            if (j->cancelled) {
                release(s, j);
                job_finish(j, "cancelled");
                s->active[i] = s->active[--s->n_active];
                job_unref(s, j);
            } else i++;
        }
        /* join */
        while (s->pending && s->n_active < P) {
            job *j = s->pending;
            s->pending = j->next;
            if (!s->pending) s->pending_tail = NULL;
            s->n_pending--;
            if (j->cancelled) { job_finish(j, "cancelled"); job_unref(s, j); continue; }
            err_clear(&e);
            if (admit(s, j, &e)) {
                job_finish(j, "error");
                job_unref(s, j);
                continue;
            }
            j->started = 1;
            s->active[s->n_active++] = j;
        }
        int na = s->n_active;
        memcpy(batch, s->active, (size_t)na * sizeof *batch);
        pthread_mutex_unlock(&s->mu);
        if (o->step_delay_ms > 0) usleep((useconds_t)o->step_delay_ms * 1000);
        /* a new audio request's encoder rows, on this thread (the kernels' driver) */
        for (int i = 0; i < na; i++) {
            job *j = batch[i];
            if (!j->n_wav || j->ap.emb || j->audio_failed) continue;
            err_clear(&e);
            pthread_mutex_lock(&s->kern_mu);
            if (audio_prompt_embed(&j->ap, &s->af, (const float *const *)j->wx, j->wn, &e)) j->audio_failed = 1;
            pthread_mutex_unlock(&s->kern_mu);
        }

        /* one step per pool (each model id has its own) */
        int failed = 0;
        for (int mi = 0; mi < o->n_models; mi++) {
            int n = 0;
            for (int i = 0; i < na; i++) {
                job *j = batch[i];
                if (j->model != mi || j->audio_failed) continue;
                pool *p = &s->pools[mi];
                int at = kv_pool_n_past(p->kv, j->slot);
                sps[n] = NULL;
                if (j->n_fed < j->n_prompt) {
                    int c = j->n_prompt - j->n_fed;
                    if (c > N_BATCH) c = N_BATCH;
                    if (j->vp) {   /* the prompt's image rows and M-RoPE positions from n_fed on */
                        /* PaliGemma: the prefix-LM block (image + prompt) in the first piece, whole */
                        int pre = j->n_fed == 0 ? j->vp->sp.prefix : 0;
                        if (c < pre) c = pre;
                        j->ks = (kv_splice){.embeds = j->vp->embeds, .embed_row = j->vp->row + j->n_fed,
                                            .pos3 = j->vp->pos3 ? j->vp->pos3 + j->n_fed : NULL,
                                            .pos3_stride = j->n_prompt, .delta = j->vp->sp.delta, .prefix = pre};
                        sps[n] = &j->ks;
                    }
                    toks[n] = j->hist + j->n_fed;
                    ntok[n] = c;
                    if (j->n_wav) {   /* the clips' rows from n_fed on (1-D positions) */
                        j->ks = (kv_splice){.embeds = j->ap.emb, .embed_row = j->ap.embed_row + j->n_fed};
                        sps[n] = &j->ks;
                    }
                    j->n_fed += c;
                    j->want_logits = j->n_fed == j->n_prompt;
                } else {
                    toks[n] = j->hist + j->nh - 1;
                    ntok[n] = 1;
                    j->want_logits = 1;
                }
                memcpy(p->toks[j->slot] + at, toks[n], (size_t)ntok[n] * sizeof(int32_t));
                /* spliced rows match no later prompt's tokens (prefix reuse) */
                for (int k = 0; j->n_wav && sps[n] && k < ntok[n]; k++)
                    if (sps[n]->embed_row[k] >= 0) p->toks[j->slot][at + k] = -2;
                seq[n] = j->slot;
                batch[i]->n_fed = j->n_fed;
                n++;
            }
            if (!n) continue;
            err_clear(&e);
            pthread_mutex_lock(&s->kern_mu);
            int erc = kv_pool_eval_splice(s->pools[mi].kv, n, seq, toks, ntok, sps, logits, &e);
            pthread_mutex_unlock(&s->kern_mu);
            if (erc) {
                failed = 1;
                break;
            }
            /* sample, in the order the batch was built */
            int k = 0;
            for (int i = 0; i < na; i++) {
                job *j = batch[i];
                if (j->model != mi || j->audio_failed) continue;
                float *lg = logits + (size_t)k++ * s->MV;
                if (!j->want_logits) continue;
                for (int v = s->V; v < s->MV; v++) lg[v] = -1e30f;
                int32_t id = sample_next(&j->sp, lg, s->MV, j->hist, j->nh, (uint64_t)j->nh, scratch);
                pthread_mutex_lock(&s->mu);
                const char *why = NULL;
                if (is_stop_id(s, j, id)) why = "stop";
                else {
                    j->hist[j->nh++] = id;
                    j->n_gen++;
                    why = after_token(s, j, id);
                }
                if (why) {
                    release(s, j);
                    job_finish(j, why);
                }
                pthread_mutex_unlock(&s->mu);
            }
        }
        pthread_mutex_lock(&s->mu);
        for (int i = 0; i < s->n_active;) {
            job *j = s->active[i];
            if ((failed || j->audio_failed) && !j->done) {
                release(s, j);
                job_finish(j, "error");
            }
            if (j->done) {
                s->active[i] = s->active[--s->n_active];
                job_unref(s, j);
            } else i++;
        }
    }
    pthread_mutex_unlock(&s->mu);
    free(logits);
    free(scratch);
    free(seq);
    free(ntok);
    free(toks);
    free(batch);
    free(sps);
    return NULL;
}

/* ---- JSON bodies ---------------------------------------------------------- */

/* jansson wants valid UTF-8: ill-formed sequences become U+FFFD
 * (str_utf8_lossy, as the repl's conversation), and so does NUL, which
 * clients reading C strings would cut the text at. */
static json_t *text_json(const char *p, size_t n)
{
    strbuf sb = STRBUF_INIT;
    str_utf8_lossy(&sb, p, n);
    strbuf out = STRBUF_INIT;
    for (size_t i = 0; i < sb.len; i++) {
        if (sb.buf[i]) sb_putc(&out, sb.buf[i]);
        else sb_puts(&out, "\xEF\xBF\xBD");
    }
    sb_free(&sb);
    json_t *j = json_stringn(out.buf ? out.buf : "", out.len);
    sb_free(&out);
    return j;
}

static json_t *usage_json(const job *j)
{
    return json_pack("{s:i, s:i, s:i, s:{s:i}}", "prompt_tokens", j->n_prompt, "completion_tokens", j->n_gen,
                     "total_tokens", j->n_prompt + j->n_gen, "prompt_tokens_details", "cached_tokens",
                     j->n_cached);
}

static const char *finish_name(const job *j) { return j->finish && !strcmp(j->finish, "length") ? "length" : "stop"; }

static json_t *chunk_json(server *s, const job *j, json_t *text, const char *finish, int first)
{
    const char *mid = s->o->models[j->model].id;
    json_t *fin = finish ? json_string(finish) : json_null();
    if (j->kind == API_CHAT) {
        json_t *delta = json_object();
        if (first) json_object_set_new(delta, "role", json_string("assistant"));
        if (text) json_object_set_new(delta, "content", text);
        return json_pack("{s:s, s:s, s:i, s:s, s:s, s:[{s:i, s:o, s:n, s:o}]}", "id", j->id, "object",
                         "chat.completion.chunk", "created", (int)j->created, "model", mid, "system_fingerprint",
                         "dlm", "choices", "index", 0, "delta", delta, "logprobs", "finish_reason", fin);
    }
    return json_pack("{s:s, s:s, s:i, s:s, s:[{s:o, s:i, s:n, s:o}]}", "id", j->id, "object", "text_completion",
                     "created", (int)j->created, "model", mid, "choices", "text", text ? text : json_string(""),
                     "index", 0, "logprobs", "finish_reason", fin);
}

static json_t *whole_json(server *s, const job *j)
{
    const char *mid = s->o->models[j->model].id;
    json_t *text = text_json(j->gen.buf ? j->gen.buf : "", j->gen.len);
    if (j->kind == API_CHAT)
        return json_pack("{s:s, s:s, s:i, s:s, s:s, s:[{s:i, s:{s:s, s:o}, s:n, s:s}], s:o}", "id", j->id, "object",
                         "chat.completion", "created", (int)j->created, "model", mid, "system_fingerprint", "dlm",
                         "choices", "index", 0, "message", "role", "assistant", "content", text, "logprobs",
                         "finish_reason", finish_name(j), "usage", usage_json(j));
    return json_pack("{s:s, s:s, s:i, s:s, s:[{s:o, s:i, s:n, s:s}], s:o}", "id", j->id, "object",
                     "text_completion", "created", (int)j->created, "model", mid, "choices", "text", text, "index",
                     0, "logprobs", "finish_reason", finish_name(j), "usage", usage_json(j));
}

/* X-Dlm-Images-From-Cache: of a request's images, how many took their
 * features from the served document's vl-cache (docs/api.md); "" = none */
static enum MHD_Result send_json_cached(struct MHD_Connection *c, int status, json_t *j, const char *cached)
{
    strbuf sb = STRBUF_INIT;
    json_write(&sb, j, JW_COMPACT);
    json_decref(j);
    struct MHD_Response *r = MHD_create_response_from_buffer(sb.len, sb.buf, MHD_RESPMEM_MUST_FREE);
    sb.buf = NULL;
    MHD_add_response_header(r, "Content-Type", "application/json");
    if (cached[0]) MHD_add_response_header(r, "X-Dlm-Images-From-Cache", cached);
    enum MHD_Result rc = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    return rc;
}

static enum MHD_Result send_json(struct MHD_Connection *c, int status, json_t *j)
{
    return send_json_cached(c, status, j, "");
}

static enum MHD_Result send_error(struct MHD_Connection *c, const api_error *err)
{
    return send_json(c, err->status, api_error_json(err));
}

/* ---- client liveness ------------------------------------------------------- */

static int client_gone(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return 0;
    char b;
    ssize_t r = recv(ci->connect_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

static void wait_job(server *s, job *j)   /* mu held; at most 100 ms */
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 100 * 1000000L;
    if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
    pthread_cond_timedwait(&j->cv, &s->mu, &ts);
}

/* ---- streaming ---------------------------------------------------------- */

typedef struct stream {
    server *s;
    job *j;
    struct MHD_Connection *c;
    strbuf out;
    size_t off;
    int sent_first, finished;
} stream;

static void sse(strbuf *out, json_t *j)
{
    sb_puts(out, "data: ");
    json_write(out, j, JW_COMPACT);
    json_decref(j);
    sb_puts(out, "\n\n");
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    stream *st = cls;
    server *s = st->s;
    job *j = st->j;
    (void)pos;
    while (st->off >= st->out.len) {
        if (st->finished) return MHD_CONTENT_READER_END_OF_STREAM;
        sb_reset(&st->out);
        st->off = 0;
        pthread_mutex_lock(&s->mu);
        while (!j->done && j->sent >= j->ready) {
            if (client_gone(st->c)) {
                j->cancelled = 1;
                pthread_cond_broadcast(&s->sched_cv);
                pthread_mutex_unlock(&s->mu);
                return MHD_CONTENT_READER_END_WITH_ERROR;
            }
            wait_job(s, j);
        }
        size_t a = j->sent, b = j->ready;
        json_t *text = b > a ? text_json(j->gen.buf + a, b - a) : NULL;
        j->sent = b;
        int done = j->done;
        pthread_mutex_unlock(&s->mu);
        if (!st->sent_first && j->kind == API_CHAT) {
            sse(&st->out, chunk_json(s, j, json_string(""), NULL, 1));
            st->sent_first = 1;
        }
        if (text) sse(&st->out, chunk_json(s, j, text, NULL, 0));
        if (done) {
            if (!strcmp(j->finish, "error")) {
                api_error err;
                api_error_set(&err, 500, "server_error", NULL, NULL, "generation failed");
                sse(&st->out, api_error_json(&err));
            } else {
                sse(&st->out, chunk_json(s, j, NULL, finish_name(j), 0));
                if (j->include_usage) {
                    json_t *u = chunk_json(s, j, NULL, NULL, 0);
                    json_object_set_new(u, "choices", json_array());
                    json_object_set_new(u, "usage", usage_json(j));
                    sse(&st->out, u);
                }
            }
            sb_puts(&st->out, "data: [DONE]\n\n");
            st->finished = 1;
        }
    }
    size_t n = st->out.len - st->off;
    if (n > max) n = max;
    memcpy(buf, st->out.buf + st->off, n);
    st->off += n;
    return (ssize_t)n;
}

static void stream_free(void *cls)
{
    stream *st = cls;
    server *s = st->s;
    pthread_mutex_lock(&s->mu);
    if (!st->j->done) st->j->cancelled = 1;
    pthread_cond_broadcast(&s->sched_cv);
    job_unref(s, st->j);
    pthread_mutex_unlock(&s->mu);
    sb_free(&st->out);
    free(st);
}

/* ---- requests -------------------------------------------------------------- */

static int find_model(server *s, const char *id)
{
    if (!id) return 0;
    for (int i = 0; i < s->o->n_models; i++)
        if (!strcmp(s->o->models[i].id, id)) return i;
    return -1;
}

/* A request's input_audio parts: each decoded as training decodes a clip
 * (through a private temporary file: libsndfile reads files), the prompt
 * built as `dlm prompt --audio` builds it from the last user message's
 * text. Fills a->ap (ids, embed_row; the rows come later), a->wx/wn. */
static int job_audio(server *s, const api_request *r, job *a, api_error *err)
{
    const api_opts *o = s->o;
    if (!s->have_af)
        return api_error_set(err, 400, "invalid_request_error", "messages", "audio_not_supported",
                             "input_audio parts need an audio-language base; %s is not one",
                             o->base_name ? o->base_name : "the served base");
    for (int i = 0; i < r->n_audio; i++) {
        const char *td = getenv("TMPDIR");
        char path[4096];
        snprintf(path, sizeof path, "%s/dlm-api-audio.XXXXXX", td && *td ? td : "/tmp");
        int fd = mkstemp(path);
        if (fd < 0) return api_error_set(err, 500, "server_error", NULL, NULL, "cannot write a temporary file");
        size_t off = 0;
        while (off < r->audio[i].n) {
            ssize_t w = write(fd, r->audio[i].data + off, r->audio[i].n - off);
            if (w <= 0) break;
            off += (size_t)w;
        }
        close(fd);
        audio_wave w;
        dlm_err e;
        err_clear(&e);
        int rc = off == r->audio[i].n ? audio_load(path, AUDIO_RATE, AUDIO_MAX_SECONDS, o->audio_resample, &w, &e)
                                      : err_set(&e, NULL, "cannot write a temporary file");
        unlink(path);
        if (rc)
            return api_error_set(err, 400, "invalid_request_error", "messages", "invalid_audio",
                                 "input_audio %d (%s): %s", i + 1, r->audio[i].format, e.msg);
        a->wx[a->n_wav] = w.x;
        a->wn[a->n_wav++] = w.n;
        w.x = NULL;
        audio_wave_free(&w);
    }
    dlm_err e;
    err_clear(&e);
    pthread_mutex_lock(&s->tok_mu);
    int rc = audio_prompt_build(o->t, &s->af, r->msgs[r->n_msgs - 1].content, a->wn, a->n_wav, &a->ap, &e);
    pthread_mutex_unlock(&s->tok_mu);
    if (rc) return api_error_set(err, 400, "invalid_request_error", "messages", "invalid_audio", "%s", e.msg);
    a->first_spliced = 0;
    while (a->first_spliced < (int)a->ap.ids.n && a->ap.embed_row[a->first_spliced] < 0) a->first_spliced++;
    return 0;
}

/* Tokenize the request into a new job (not queued). NULL with err set. */
static job *job_new(server *s, const api_request *r, api_error *err)
{
    const api_opts *o = s->o;
    int mi = find_model(s, r->model);
    if (mi < 0) {
        api_error_set(err, 404, "invalid_request_error", "model", "model_not_found",
                      "The model '%s' does not exist; GET /v1/models lists the served ones", r->model);
        return NULL;
    }
    tok_ids ids = {0};
    dlm_err e;
    err_clear(&e);
    int rc;
    job au;   /* the audio part of the job, moved into it below */
    memset(&au, 0, sizeof au);
    vl_prompt *vp = NULL;
    if (r->n_audio && job_audio(s, r, &au, err)) {
        job_audio_free(&au);
        return NULL;
    }
    if (r->n_images) {
        /* images: the prompt `dlm prompt --image` builds (infer/vl_prompt.h) */
        if (!o->m->cfg.vl) {
            api_error_set(err, 400, "invalid_request_error", "messages", NULL,
                          "image parts need a vision-language base; this server's base is a text model (docs/images.md)");
            return NULL;
        }
        vl_image_in in[API_MAX_IMAGES];
        char label[API_MAX_IMAGES][64];
        int img_msg[API_MAX_IMAGES];
        for (int i = 0; i < r->n_images; i++) {
            snprintf(label[i], sizeof label[i], "messages[%zu].content[%zu]", r->images[i].msg, r->images[i].part);
            in[i] = (vl_image_in){r->images[i].data, r->images[i].n, label[i]};
            img_msg[i] = (int)r->images[i].msg;
        }
        vp = calloc(1, sizeof *vp);
        vl_chat chat = {o->dialect, o->system_prompt, o->store};
        pthread_mutex_lock(&s->kern_mu);
        pthread_mutex_lock(&s->tok_mu);
        rc = !vp || vl_prompt_build_msgs(o->m, o->t, &chat, r->msgs, r->n_msgs, img_msg, in, r->n_images, vp, &e);
        pthread_mutex_unlock(&s->tok_mu);
        pthread_mutex_unlock(&s->kern_mu);
        if (rc) {
            api_error_set(err, 400, "invalid_request_error", "messages", NULL, "%s", vp ? e.msg : "out of memory");
            free(vp);
            return NULL;
        }
        if (vp->sp.prefix > pool_batch(s)) {
            api_error_set(err, 400, "invalid_request_error", "messages", "context_length_exceeded",
                          "the images and the prompt make a %d-token prefix-LM block; this server feeds at most %d "
                          "tokens in one pass (send fewer images or a shorter prompt)", vp->sp.prefix, pool_batch(s));
            vl_prompt_free(vp);
            free(vp);
            return NULL;
        }
        ids = vp->ids;
        memset(&vp->ids, 0, sizeof vp->ids);
        goto have_ids;
    }
    pthread_mutex_lock(&s->tok_mu);
    if (au.n_wav) {
        ids.v = malloc((au.ap.ids.n + 1) * sizeof *ids.v);
        rc = ids.v ? 0 : err_set(&e, "MemoryError", "out of memory");
        if (ids.v) {
            memcpy(ids.v, au.ap.ids.v, au.ap.ids.n * sizeof *ids.v);
            ids.n = ids.cap = au.ap.ids.n;
        }
    } else if (r->kind == API_CHAT) {
        strbuf text = STRBUF_INIT;
        rc = chat_render(o->dialect, o->system_prompt, r->msgs, r->n_msgs, 1, &text, NULL, NULL, &e) ||
             tok_encode_append(o->t, text.buf ? text.buf : "", text.len, TOK_PARSE_SPECIAL, &ids, &e);
        sb_free(&text);
    } else {
        rc = tok_encode_append(o->t, r->prompt, strlen(r->prompt), TOK_PARSE_SPECIAL | TOK_ADD_SPECIAL, &ids, &e);
    }
    pthread_mutex_unlock(&s->tok_mu);
    if (rc) {
        api_error_set(err, 400, "invalid_request_error", r->kind == API_CHAT ? "messages" : "prompt", NULL, "%s",
                      e.msg);
        tok_ids_free(&ids);
        job_audio_free(&au);
        return NULL;
    }
have_ids:
    if ((int)ids.n >= o->n_ctx || ids.n == 0) {
        api_error_set(err, 400, "invalid_request_error", r->kind == API_CHAT ? "messages" : "prompt",
                      "context_length_exceeded",
                      "This model's maximum context length is %d tokens. However, your %s resulted in %zu tokens.",
                      o->n_ctx, r->kind == API_CHAT ? "messages" : "prompt", ids.n);
        tok_ids_free(&ids);
        job_audio_free(&au);
        if (vp) vl_prompt_free(vp);
        free(vp);
        return NULL;
    }
    job *j = calloc(1, sizeof *j);
    if (!j || !(j->hist = malloc((size_t)o->n_ctx * sizeof(int32_t)))) {
        free(j);
        job_audio_free(&au);
        tok_ids_free(&ids);
        if (vp) vl_prompt_free(vp);
        free(vp);
        api_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
        return NULL;
    }
    memcpy(j->hist, ids.v, ids.n * sizeof(int32_t));
    j->n_prompt = j->nh = (int)ids.n;
    j->ap = au.ap;
    memcpy(j->wx, au.wx, sizeof j->wx);
    memcpy(j->wn, au.wn, sizeof j->wn);
    j->n_wav = au.n_wav;
    j->first_spliced = au.first_spliced;
    j->vp = vp;
    tok_ids_free(&ids);
    j->kind = r->kind;
    j->model = mi;
    sample_defaults(&j->sp);
    j->sp.temp = (float)r->temperature;
    j->sp.top_p = (float)r->top_p;
    pthread_mutex_lock(&s->mu);
    uint64_t n = ++s->seq;
    pthread_mutex_unlock(&s->mu);
    j->sp.seed = r->has_seed ? r->seed : ((uint64_t)time(NULL) << 20) ^ (n * 0x9E3779B97F4A7C15ull);
    /* OpenAI's defaults: 16 tokens for completions, the rest of the context for chat */
    j->max_tokens = r->max_tokens ? r->max_tokens : r->kind == API_CHAT ? o->n_ctx : 16;
    for (int i = 0; i < r->n_stop; i++) j->stop[j->n_stop++] = strdup(r->stop[i]);
    j->stream = r->stream;
    j->include_usage = r->include_usage;
    snprintf(j->id, sizeof j->id, "%s-%lx%06llx", r->kind == API_CHAT ? "chatcmpl" : "cmpl", (long)time(NULL),
             (unsigned long long)n);
    j->created = (long)time(NULL);
    j->slot = -1;
    j->refs = 2;
    pthread_cond_init(&j->cv, NULL);
    return j;
}

static int enqueue(server *s, job *j, api_error *err)
{
    pthread_mutex_lock(&s->mu);
    if (s->quit) {
        pthread_mutex_unlock(&s->mu);
        return api_error_set(err, 503, "server_error", NULL, NULL, "the server is shutting down");
    }
    if (s->n_active + s->n_pending >= s->o->parallel + s->o->queue) {
        pthread_mutex_unlock(&s->mu);
        return api_error_set(err, 429, "rate_limit_error", NULL, "queue_full",
                             "%d requests are running and %d waiting; try again shortly", s->n_active, s->n_pending);
    }
    if (s->pending_tail) s->pending_tail->next = j;
    else s->pending = j;
    s->pending_tail = j;
    s->n_pending++;
    s->n_jobs++;
    pthread_cond_broadcast(&s->sched_cv);
    pthread_mutex_unlock(&s->mu);
    return 0;
}

static void job_discard(job *j)   /* never queued */
{
    job_audio_free(j);
    job_free_vl(j);
    free(j->hist);
    for (int i = 0; i < j->n_stop; i++) free(j->stop[i]);
    pthread_cond_destroy(&j->cv);
    free(j);
}

static enum MHD_Result completions(server *s, struct MHD_Connection *c, api_kind kind, const conn *cn)
{
    api_request r;
    api_error err;
    if (kind == API_CHAT && !s->o->dialect) {
        api_error_set(&err, 400, "invalid_request_error", NULL, NULL,
                      "the base has no chat template dlm can render; use /v1/completions");
        return send_error(c, &err);
    }
    if (api_request_parse(kind, cn->body.buf ? cn->body.buf : "", cn->body.len, &r, &err)) return send_error(c, &err);
    job *j = job_new(s, &r, &err);
    api_request_free(&r);
    if (!j) return send_error(c, &err);
    char cached[16] = "";
    if (j->vp) snprintf(cached, sizeof cached, "%d", j->vp->n_cached);
    if (enqueue(s, j, &err)) {
        job_discard(j);
        return send_error(c, &err);
    }
    if (j->stream) {
        stream *st = calloc(1, sizeof *st);
        st->s = s;
        st->j = j;
        st->c = c;
        struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, st,
                                                                      stream_free);
        MHD_add_response_header(resp, "Content-Type", "text/event-stream");
        MHD_add_response_header(resp, "Cache-Control", "no-cache");
        if (cached[0]) MHD_add_response_header(resp, "X-Dlm-Images-From-Cache", cached);
        enum MHD_Result rc = MHD_queue_response(c, MHD_HTTP_OK, resp);
        MHD_destroy_response(resp);
        return rc;
    }
    pthread_mutex_lock(&s->mu);
    while (!j->done) {
        if (client_gone(c)) {
            j->cancelled = 1;
            pthread_cond_broadcast(&s->sched_cv);
            job_unref(s, j);
            pthread_mutex_unlock(&s->mu);
            return MHD_NO;
        }
        wait_job(s, j);
    }
    pthread_mutex_unlock(&s->mu);
    json_t *body;
    int status = 200;
    if (!strcmp(j->finish, "error")) {
        api_error_set(&err, 500, "server_error", NULL, NULL, "generation failed");
        body = api_error_json(&err);
        status = 500;
    } else body = whole_json(s, j);
    pthread_mutex_lock(&s->mu);
    job_unref(s, j);
    pthread_mutex_unlock(&s->mu);
    return send_json_cached(c, status, body, cached);
}

static enum MHD_Result models_list(server *s, struct MHD_Connection *c)
{
    json_t *data = json_array();
    for (int i = 0; i < s->o->n_models; i++)
        json_array_append_new(data, json_pack("{s:s, s:s, s:i, s:s}", "id", s->o->models[i].id, "object", "model",
                                              "created", (int)s->started, "owned_by", "dlm"));
    return send_json(c, 200, json_pack("{s:s, s:o}", "object", "list", "data", data));
}

static enum MHD_Result health(server *s, struct MHD_Connection *c)
{
    pthread_mutex_lock(&s->mu);
    /* a job that finished this step has answered its client already; the
     * scheduler drops it from active[] only at the step's end */
    int busy = 0;
    for (int i = 0; i < s->n_active; i++) busy += !s->active[i]->done;
    json_t *j = json_pack("{s:s, s:i, s:i, s:i}", "status", s->quit ? "shutting_down" : "ok", "slots_total",
                          s->o->parallel, "slots_processing", busy, "queued", s->n_pending);
    pthread_mutex_unlock(&s->mu);
    return send_json(c, 200, j);
}

static int authorized(server *s, struct MHD_Connection *c)
{
    if (!s->o->api_key) return 1;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    return h && !strncmp(h, "Bearer ", 7) && !strcmp(h + 7, s->o->api_key);
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                              const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
    server *s = cls;
    api_error err;
    int post = !strcmp(method, "POST"), get = !strcmp(method, "GET");
    conn *cn = *con_cls;
    if (!cn) {
        cn = calloc(1, sizeof *cn);
        if (!cn) return MHD_NO;
        *con_cls = cn;
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (cl && strtoull(cl, NULL, 10) > s->o->max_body) {
            api_error_set(&err, 413, "invalid_request_error", NULL, "request_too_large",
                          "the request body is larger than %zu bytes", s->o->max_body);
            return send_error(c, &err);
        }
        return MHD_YES;
    }
    if (*upload_size) {
        if (cn->body.len + *upload_size > s->o->max_body) cn->too_big = 1;
        else sb_append(&cn->body, upload, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    if (cn->too_big) {
        api_error_set(&err, 413, "invalid_request_error", NULL, "request_too_large",
                      "the request body is larger than %zu bytes", s->o->max_body);
        return send_error(c, &err);
    }
    if (get && !strcmp(url, "/")) {
        struct MHD_Response *r = MHD_create_response_from_buffer(strlen(api_page_html), (void *)api_page_html,
                                                                 MHD_RESPMEM_PERSISTENT);
        MHD_add_response_header(r, "Content-Type", "text/html; charset=utf-8");
        enum MHD_Result rc = MHD_queue_response(c, MHD_HTTP_OK, r);
        MHD_destroy_response(r);
        return rc;
    }
    if (get && !strcmp(url, "/health")) return health(s, c);
    int v1 = !strncmp(url, "/v1/", 4);
    if (v1 && !authorized(s, c)) {
        api_error_set(&err, 401, "invalid_request_error", NULL, "invalid_api_key",
                      "Incorrect API key provided (send Authorization: Bearer KEY)");
        return send_error(c, &err);
    }
    int is_models = !strcmp(url, "/v1/models"), is_chat = !strcmp(url, "/v1/chat/completions"),
        is_comp = !strcmp(url, "/v1/completions");
    if (get && is_models) return models_list(s, c);
    if (get && !strncmp(url, "/v1/models/", 11)) {
        int mi = find_model(s, url + 11);
        if (mi < 0) {
            api_error_set(&err, 404, "invalid_request_error", "model", "model_not_found",
                          "The model '%.200s' does not exist", url + 11);
            return send_error(c, &err);
        }
        return send_json(c, 200, json_pack("{s:s, s:s, s:i, s:s}", "id", s->o->models[mi].id, "object", "model",
                                           "created", (int)s->started, "owned_by", "dlm"));
    }
    if (post && (is_chat || is_comp)) return completions(s, c, is_chat ? API_CHAT : API_COMPLETION, cn);
    if (is_models || is_chat || is_comp) {
        api_error_set(&err, 405, "invalid_request_error", NULL, "method_not_allowed", "%s is not allowed on %s",
                      method, url);
        return send_error(c, &err);
    }
    api_error_set(&err, 404, "invalid_request_error", NULL, "not_found", "no such endpoint: %s %.200s", method, url);
    return send_error(c, &err);
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe)
{
    conn *cn = *con_cls;
    if (!cn) return;
    sb_free(&cn->body);
    free(cn);
    *con_cls = NULL;
}

/* Token events are small writes: without TCP_NODELAY, Nagle's algorithm
 * and delayed ACKs hold each one back by up to 40 ms. */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_ctx,
                          enum MHD_ConnectionNotificationCode code)
{
    if (code != MHD_CONNECTION_NOTIFY_STARTED) return;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    int one = 1;
    if (ci) setsockopt(ci->connect_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/* ---- serve ------------------------------------------------------------------ */

int api_serve(const api_opts *o, dlm_err *e)
{
    server S;
    memset(&S, 0, sizeof S);
    server *s = &S;
    s->o = o;
    s->started = (long)time(NULL);
    s->V = (int)tok_vocab_size(o->t);
    s->MV = o->m->cfg.vocab;
    if (s->V > s->MV) s->V = s->MV;
    s->n_stops_chat = gen_stop_ids(o->t, o->dialect ? o->dialect->stops : NULL, s->stops_chat, 32);
    s->n_stops_raw = gen_stop_ids(o->t, NULL, s->stops_raw, 32);
    if (o->audio_base) {
        if (audio_feat_open(&s->af, o->audio_base, e)) return -1;
        s->have_af = 1;
    }
    s->active = calloc((size_t)o->parallel, sizeof *s->active);
    s->pools = calloc((size_t)o->n_models, sizeof *s->pools);
    if (!s->active || !s->pools) {
        free(s->active);
        free(s->pools);
        if (s->have_af) audio_feat_close(&s->af);
        return err_set(e, "MemoryError", "out of memory");
    }
    pthread_mutex_init(&s->mu, NULL);
    pthread_mutex_init(&s->tok_mu, NULL);
    pthread_mutex_init(&s->kern_mu, NULL);
    pthread_cond_init(&s->sched_cv, NULL);
    int rc = -1;
    /* the default model's slots up front, so a bad size fails at start */
    if (pool_ensure(s, 0, e)) goto out_pools;

    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC;
    struct sockaddr_storage ss;
    int af = net_listen_addr(o->host, o->port, &ss);
    if (af == AF_INET6) flags |= MHD_USE_IPv6;
    if (af < 0) {
        err_set(e, "ServeError", "--host %s is not a numeric IPv4 or IPv6 address", o->host);
        err_hint(e, "use 127.0.0.1 (the default), 0.0.0.0 or ::");
        goto out_pools;
    }
    pthread_t th;
    if (pthread_create(&th, NULL, scheduler, s)) {
        err_set(e, NULL, "cannot start the scheduler thread");
        goto out_pools;
    }
    struct MHD_Daemon *d = MHD_start_daemon(
        flags, (uint16_t)o->port, NULL, NULL, handle, s, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
        MHD_OPTION_NOTIFY_COMPLETED, completed, s, MHD_OPTION_NOTIFY_CONNECTION, on_connection, s, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)o->timeout_s, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)(o->parallel + o->queue + 64), MHD_OPTION_END);
    if (!d) {
        err_set(e, "ServeError", "cannot listen on %s port %d", o->host, o->port);
        err_hint(e, "is another server on that port? try --port 0 for any free one");
    } else {
        const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
        if (o->on_ready) o->on_ready(o->ready_ctx, o->host, di ? di->port : o->port);
        while (!*o->stop) usleep(50 * 1000);
        /* stop accepting, let every accepted request finish, then close */
        MHD_socket ls = MHD_quiesce_daemon(d);
        if (ls != MHD_INVALID_SOCKET) close(ls);
        pthread_mutex_lock(&s->mu);
        while (s->n_jobs > 0) pthread_cond_wait(&s->sched_cv, &s->mu);
        pthread_mutex_unlock(&s->mu);
        MHD_stop_daemon(d);
        rc = 0;
    }
    pthread_mutex_lock(&s->mu);
    s->quit = 1;
    pthread_cond_broadcast(&s->sched_cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(th, NULL);
out_pools:
    for (int i = 0; i < o->n_models; i++) {
        pool *p = &s->pools[i];
        if (p->toks)
            for (int k = 0; k < o->parallel; k++) free(p->toks[k]);
        free(p->toks);
        free(p->owner);
        free(p->used);
        kv_pool_free(p->kv);
    }
    free(s->pools);
    free(s->active);
    if (s->have_af) audio_feat_close(&s->af);
    pthread_mutex_destroy(&s->mu);
    pthread_mutex_destroy(&s->tok_mu);
    pthread_mutex_destroy(&s->kern_mu);
    pthread_cond_destroy(&s->sched_cv);
    return rc;
}
