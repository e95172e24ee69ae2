/* calib — the export's importance matrix: calibration text from the
 * document's replay corpus, the cache in the store, the build on a miss
 * (export/calib.h; the original's src/dlm/export/imatrix.py). */
#include "export/calib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/store.h"
#include "tokens/replay.h"
#include "util/fs.h"
#include "util/hash.h"
#include "util/json.h"
#include "util/log.h"
#include "util/str.h"
#include "util/timeutil.h"

/* The original's max_chars: chunks × chunk size × 4 characters a token. */
#define CALIB_MAX_CHARS ((size_t)IMATRIX_CHUNKS * IMATRIX_CHUNK_SIZE * 4)

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

/* calibration_text_from_replay: every entry's content, stripped, joined by
 * a blank line, cut at CALIB_MAX_CHARS (a cut never splits a UTF-8
 * character). */
static int calib_text(const char *store, strbuf *out, dlm_err *e)
{
    replay *rp;
    if (replay_open(store, &rp, e)) return -1;
    size_t total = 0;
    for (int i = 0; i < replay_count(rp) && total < CALIB_MAX_CHARS; i++) {
        char *c;
        size_t len;
        if (replay_read(rp, i, &c, &len, e)) {
            replay_free(rp);
            return -1;
        }
        size_t a = 0, b = len;
        while (a < b && is_space(c[a])) a++;
        while (b > a && is_space(c[b - 1])) b--;
        if (b > a) {
            size_t n = b - a;
            if (total + n > CALIB_MAX_CHARS) {
                n = CALIB_MAX_CHARS - total;
                while (n > 0 && ((unsigned char)c[a + n] & 0xC0) == 0x80) n--;
            }
            if (out->len) sb_append(out, "\n\n", 2);
            sb_append(out, c + a, n);
            total += n;
        }
        free(c);
    }
    replay_free(rp);
    return out->oom ? err_set(e, "MemoryError", "out of memory") : 0;
}

static json_t *meta_for(const calib_opts *o, const calib_result *r, const char *sha)
{
    char now[32];
    time_iso_utc(time_now(), now, sizeof now);
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:i, s:i, s:i, s:I, s:s}", "path", "imatrix.gguf", "sha256", sha,
                     "base_key", o->base_key, "corpus_sha256", r->corpus_sha256, "weights_key", o->weights_key,
                     "chunks", IMATRIX_CHUNKS, "chunk_size", IMATRIX_CHUNK_SIZE, "chunks_used", r->chunks, "tokens",
                     (json_int_t)r->tokens, "built_at", now);
}

/* resolve_imatrix: a hit needs the file, its sidecar, every key equal and
 * the file's sha256 as recorded (a changed file is rebuilt). */
static int cache_hit(const char *gpath, const char *mpath, const calib_opts *o, calib_result *r, imatrix **out)
{
    if (!fs_exists(gpath) || !fs_exists(mpath)) return 0;
    json_t *m = json_load_path(mpath, 1 << 16, NULL);
    if (!m) return 0;
    const char *bk = jget_str(m, "base_key"), *cs = jget_str(m, "corpus_sha256"), *wk = jget_str(m, "weights_key");
    const char *sha = jget_str(m, "sha256");
    long long ch = 0, sz = 0, used = 0, toks = 0;
    int ok = bk && cs && wk && sha && !strcmp(bk, o->base_key) && !strcmp(cs, r->corpus_sha256) &&
             !strcmp(wk, o->weights_key) && !jget_int(m, "chunks", &ch) && ch == IMATRIX_CHUNKS &&
             !jget_int(m, "chunk_size", &sz) && sz == IMATRIX_CHUNK_SIZE;
    char got[65];
    if (ok) ok = sha256_file_hex(gpath, got, NULL) == 0 && !strcmp(got, sha);
    if (ok) {
        dlm_err e;
        ok = imatrix_read(gpath, out, &e) == 0;
        if (!ok) log_warn("export: the cached imatrix is unreadable (%s); computing it again", e.msg);
    }
    if (ok) {
        memcpy(r->sha256, got, 65);
        r->chunks = imatrix_chunks(*out);
        r->chunk_size = imatrix_chunk_size(*out);
        if (!jget_int(m, "chunks_used", &used) && !jget_int(m, "tokens", &toks)) r->tokens = toks;
    }
    json_decref(m);
    return ok;
}

int calib_imatrix(const calib_opts *o, imatrix **out, calib_result *r, dlm_err *e)
{
    *out = NULL;
    memset(r, 0, sizeof *r);
    char corpus[4200], dir[4200], gpath[4300], mpath[4300];
    if (store_path(o->store, "replay/corpus.zst", corpus, sizeof corpus, e) ||
        store_path(o->store, "exports/imatrix", dir, sizeof dir, e))
        return -1;
    snprintf(gpath, sizeof gpath, "%s/imatrix.gguf", dir);
    snprintf(mpath, sizeof mpath, "%s/imatrix.meta.json", dir);
    if (!fs_exists(corpus)) {
        r->reason = "no replay corpus";
        return 0;
    }
    if (sha256_file_hex(corpus, r->corpus_sha256, e)) return -1;
    if (cache_hit(gpath, mpath, o, r, out)) {
        r->used = r->cached = 1;
        return 0;
    }
    strbuf text = STRBUF_INIT;
    if (calib_text(o->store, &text, e)) {
        sb_free(&text);
        return -1;
    }
    if (!text.len) {
        sb_free(&text);
        r->reason = "empty replay corpus";
        return 0;
    }
    /* common_tokenize(add_special = true): BOS first when llama.cpp adds one */
    int32_t *ids = NULL;
    size_t n = 0;
    int rc = tok_encode(o->t, text.buf, text.len, 0, &ids, &n, e);
    sb_free(&text);
    if (rc) return -1;
    int32_t *all = malloc((n + 1) * sizeof *all);
    if (!all) {
        free(ids);
        return err_set(e, "MemoryError", "out of memory");
    }
    size_t k = 0;
    if (o->bos >= 0) all[k++] = o->bos;
    memcpy(all + k, ids, n * sizeof *ids);
    k += n;
    free(ids);
    char ds[96];
    snprintf(ds, sizeof ds, "replay:%s", r->corpus_sha256);
    imatrix_opts io = {.bos = o->bos, .dataset = ds};
    log_info("export: computing the importance matrix over %zu calibration tokens", k);
    rc = imatrix_collect(o->m, o->merge, all, k, &io, out, e);
    free(all);
    if (rc) return -1;
    r->chunks = imatrix_chunks(*out);
    r->chunk_size = imatrix_chunk_size(*out);
    r->tokens = (int64_t)r->chunks * r->chunk_size;
    r->used = 1;
    json_t *m = NULL;
    if (fs_mkdir_p(dir, e) || imatrix_write(*out, gpath, e) || sha256_file_hex(gpath, r->sha256, e) ||
        !(m = meta_for(o, r, r->sha256)) || json_save_file(mpath, m, e)) {
        if (!m && !e->msg[0]) err_set(e, "MemoryError", "out of memory");
        json_decref(m);
        imatrix_free(*out);
        *out = NULL;
        return -1;
    }
    json_decref(m);
    return 0;
}
