/* server — an OpenAI-compatible HTTP API over one loaded model.
 *
 * GET /, /health, /v1/models; POST /v1/chat/completions, /v1/completions
 * (docs/api.md). One model's weights, one adapter per served model id;
 * up to `parallel` requests decode together through decoder/kvpool.h
 * (continuous batching: requests join and leave between steps), each with
 * its own KV slot and sampler; a request whose prompt starts like a
 * cached slot's tokens reuses that prefix. Built on libmicrohttpd, one
 * thread per connection; one scheduler thread runs the model. */
#ifndef DLM_API_SERVER_H
#define DLM_API_SERVER_H

#include <signal.h>
#include <stddef.h>

#include "decoder/lora.h"
#include "tokens/chat.h"
#include "tokens/tok.h"
#include "weights/model.h"
#include "util/err.h"

typedef struct api_model {
    const char *id;               /* the OpenAI "model" name */
    const lora *l;                /* NULL: the base alone */
} api_model;

typedef struct api_opts {
    const char *host;             /* numeric IPv4/IPv6 address, or "localhost" */
    int port;                     /* 0 = any free port (see on_ready) */
    const char *api_key;          /* NULL = no auth */
    int parallel;                 /* sequences decoded together */
    int queue;                    /* waiting requests beyond that (429 when full) */
    size_t max_body;              /* bytes (413 above) */
    int n_ctx;                    /* per sequence */
    int timeout_s;                /* idle connection timeout */
    const model *m;
    tok *t;
    const chat_dialect *dialect;  /* NULL: chat completions are refused */
    const char *system_prompt;    /* the document's, or NULL */
    const char *store;            /* the served document's store: an image it trained on takes its features
                                   * from the store's vl-cache (read only); NULL = none */
    /* an audio-language base's folder (vision/audio_feat.h): chat requests
     * may carry input_audio parts; NULL: a text base, such parts refused */
    const char *audio_base;
    const char *base_name;        /* for messages */
    int audio_resample;           /* the document's training.audio.auto_resample */
    const api_model *models;      /* [0] is the default */
    int n_models;
    int step_delay_ms;            /* test hook: sleep before each decode step */
    volatile sig_atomic_t *stop;  /* set asynchronously: finish in-flight requests, return */
    void (*on_ready)(void *ctx, const char *host, int port);
    void *ready_ctx;
} api_opts;

/* Serve until *o->stop; returns 0 after a clean drain. */
int api_serve(const api_opts *o, dlm_err *e);

/* The chat page served at / (page.c). */
extern const char api_page_html[];

#endif
