/* peer — the pack server behind `dlm serve` (peer.h), on libmicrohttpd. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sodium.h>
#include <sys/socket.h>
#include <unistd.h>

#include "share/peer.h"
#include "util/fs.h"
#include "util/hash.h"
#include "util/timeutil.h"

#define TOKEN_RAW 52
#define MAX_SLOTS 1024

typedef struct slot {
    unsigned char nonce[12];
    double window_start;
    int count, active, used;
} slot;

struct peer_server {
    peer_opts o;
    char path[4096], id[27];
    unsigned char secret[32];
    struct MHD_Daemon *d;
    pthread_mutex_t mu;
    slot slots[MAX_SLOTS];
    int64_t size;
};

void peer_token_make(const unsigned char secret[32], const char *dlm_id, const unsigned char nonce[12],
                     unsigned long long expires, char *out, size_t cap)
{
    unsigned char raw[TOKEN_RAW];
    memcpy(raw, nonce, 12);
    for (int i = 0; i < 8; i++) raw[12 + i] = (unsigned char)(expires >> (56 - 8 * i));
    crypto_auth_hmacsha256_state st;
    crypto_auth_hmacsha256_init(&st, secret, 32);
    crypto_auth_hmacsha256_update(&st, raw, 20);
    crypto_auth_hmacsha256_update(&st, (const unsigned char *)dlm_id, strlen(dlm_id));
    crypto_auth_hmacsha256_final(&st, raw + 20);
    sodium_bin2base64(out, cap, raw, sizeof raw, sodium_base64_VARIANT_URLSAFE_NO_PADDING);
}

int peer_token_check(const unsigned char secret[32], const char *dlm_id, const char *token, double now,
                     unsigned char nonce[12])
{
    hash_init();
    unsigned char raw[TOKEN_RAW], mac[32];
    size_t got = 0;
    if (!token || strlen(token) > 2 * PEER_TOKEN_CHARS ||
        sodium_base642bin(raw, sizeof raw, token, strlen(token), NULL, &got, NULL,
                          sodium_base64_VARIANT_URLSAFE_NO_PADDING) ||
        got != TOKEN_RAW)
        return -1;
    crypto_auth_hmacsha256_state st;
    crypto_auth_hmacsha256_init(&st, secret, 32);
    crypto_auth_hmacsha256_update(&st, raw, 20);
    crypto_auth_hmacsha256_update(&st, (const unsigned char *)dlm_id, strlen(dlm_id));
    crypto_auth_hmacsha256_final(&st, mac);
    if (sodium_memcmp(mac, raw + 20, 32)) return -1;
    unsigned long long exp = 0;
    for (int i = 0; i < 8; i++) exp = exp << 8 | raw[12 + i];
    memcpy(nonce, raw, 12);
    return now >= (double)exp ? 1 : 0;
}

void peer_issue(peer_server *s, char *out, size_t cap)
{
    unsigned char nonce[12];
    randombytes_buf(nonce, sizeof nonce);
    double exp = time_now() + s->o.ttl_s;
    peer_token_make(s->secret, s->id, nonce, (unsigned long long)(exp + 0.999), out, cap);
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned code, const char *text)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", "text/plain; charset=utf-8");
    enum MHD_Result ok = MHD_queue_response(c, code, r);
    MHD_destroy_response(r);
    return ok;
}

/* The token's slot (created on first use), or NULL when the table is full. */
static slot *slot_of(peer_server *s, const unsigned char nonce[12])
{
    slot *free_slot = NULL;
    for (int i = 0; i < MAX_SLOTS; i++) {
        if (s->slots[i].used && !memcmp(s->slots[i].nonce, nonce, 12)) return &s->slots[i];
        if (!s->slots[i].used && !free_slot) free_slot = &s->slots[i];
    }
    if (!free_slot) {
        /* forget an idle token whose minute is over */
        double now = time_now();
        for (int i = 0; i < MAX_SLOTS && !free_slot; i++)
            if (!s->slots[i].active && now - s->slots[i].window_start >= 60) free_slot = &s->slots[i];
        if (!free_slot) return NULL;
    }
    memset(free_slot, 0, sizeof *free_slot);
    memcpy(free_slot->nonce, nonce, 12);
    free_slot->used = 1;
    free_slot->window_start = time_now();
    return free_slot;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
    peer_server *s = cls;
    (void)version;
    (void)upload;
    if (strcmp(method, "GET") && strcmp(method, "HEAD")) return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, "GET only\n");
    if (*upload_size) return reply(c, MHD_HTTP_BAD_REQUEST, "no body expected\n");
    if (url[0] != '/' || strcmp(url + 1, s->id)) return reply(c, MHD_HTTP_NOT_FOUND, "no such document here\n");
    const char *tok = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "token");
    unsigned char nonce[12];
    int t = peer_token_check(s->secret, s->id, tok, time_now(), nonce);
    if (t) return reply(c, MHD_HTTP_FORBIDDEN, t > 0 ? "token expired\n" : "bad token\n");
    pthread_mutex_lock(&s->mu);
    slot *sl = slot_of(s, nonce);
    double now = time_now();
    int limited = 1;
    if (sl) {
        if (now - sl->window_start >= 60) {
            sl->window_start = now;
            sl->count = 0;
        }
        sl->count++;
        limited = sl->count > s->o.rate_limit || sl->active >= s->o.max_concurrency;
        if (!limited) sl->active++;
    }
    pthread_mutex_unlock(&s->mu);
    if (limited) {
        struct MHD_Response *r = MHD_create_response_from_buffer(13, (void *)"rate limited\n", MHD_RESPMEM_PERSISTENT);
        if (!r) return MHD_NO;
        MHD_add_response_header(r, "Retry-After", "60");
        enum MHD_Result ok = MHD_queue_response(c, MHD_HTTP_TOO_MANY_REQUESTS, r);
        MHD_destroy_response(r);
        return ok;
    }
    *con_cls = sl;     /* released when the request completes */
    int fd = open(s->path, O_RDONLY | O_CLOEXEC);
    struct MHD_Response *r = fd >= 0 ? MHD_create_response_from_fd((uint64_t)s->size, fd) : NULL;
    if (!r) {
        if (fd >= 0) close(fd);
        return reply(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "cannot read the pack\n");
    }
    char disp[128];
    snprintf(disp, sizeof disp, "attachment; filename=\"%s.dlm.pack\"", s->id);
    MHD_add_response_header(r, "Content-Type", "application/octet-stream");
    MHD_add_response_header(r, "Content-Disposition", disp);
    enum MHD_Result ok = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ok;
}

static void on_done(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode why)
{
    peer_server *s = cls;
    (void)c;
    (void)why;
    slot *sl = *con_cls;
    if (!sl) return;
    pthread_mutex_lock(&s->mu);
    if (sl->active > 0) sl->active--;
    pthread_mutex_unlock(&s->mu);
    *con_cls = NULL;
}

peer_server *peer_start(const peer_opts *o, dlm_err *e)
{
    hash_init();
    peer_server *s = calloc(1, sizeof *s);
    if (!s) return err_set(e, "OOMError", "out of memory"), NULL;
    s->o = *o;
    snprintf(s->path, sizeof s->path, "%s", o->pack_path);
    snprintf(s->id, sizeof s->id, "%s", o->dlm_id);
    randombytes_buf(s->secret, sizeof s->secret);
    pthread_mutex_init(&s->mu, NULL);
    s->size = fs_file_size(o->pack_path);
    if (s->size < 0) {
        err_sys(e, "cannot read %s", o->pack_path);
        free(s);
        return NULL;
    }
    struct sockaddr_in sa = {0};
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)o->port);
    if (inet_pton(AF_INET, o->bind, &sa.sin_addr) != 1) {
        err_set(e, "ServeError", "bad bind address '%s'", o->bind);
        free(s);
        return NULL;
    }
    s->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD, (uint16_t)o->port, NULL, NULL, on_request, s,
                            MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa, MHD_OPTION_NOTIFY_COMPLETED, on_done, s,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)64, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)60,
                            MHD_OPTION_END);
    if (!s->d) {
        err_set(e, "ServeError", "cannot listen on %s:%d (in use, or not allowed)", o->bind, o->port);
        err_hint(e, "pick another port with --port");
        free(s);
        return NULL;
    }
    return s;
}

int peer_port(const peer_server *s)
{
    const union MHD_DaemonInfo *i = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    return i ? i->port : s->o.port;
}

void peer_stop(peer_server *s)
{
    if (!s) return;
    MHD_stop_daemon(s->d);
    sodium_memzero(s->secret, sizeof s->secret);
    pthread_mutex_destroy(&s->mu);
    free(s);
}
