#include "tokens/replay.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "util/cbor.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/rng.h"
#include "util/timeutil.h"

#define MAX_RECORD (64u << 20)

/* dlm's own bookkeeping beside the original's index.json, which forbids
 * extra keys: {section_id: {section_type, first_run, last_run}} */
#define SIDECAR "dlm-runs.json"

struct replay {
    char dir[4096], corpus[4200], index[4200], side[4200];
    replay_entry *e;
    int n, cap;
};

static int read_frame(const char *path, int64_t off, int64_t len, json_t **rec, dlm_err *e);

static int cmp_entry(const void *a, const void *b)
{
    return strcmp(((const replay_entry *)a)->sid, ((const replay_entry *)b)->sid);
}

static replay_entry *push(replay *r)
{
    if (r->n == r->cap) {
        int cap = r->cap ? r->cap * 2 : 64;
        replay_entry *a = realloc(r->e, (size_t)cap * sizeof *a);
        if (!a) return NULL;
        r->e = a;
        r->cap = cap;
    }
    replay_entry *x = &r->e[r->n++];
    memset(x, 0, sizeof *x);
    return x;
}

int replay_open(const char *store, replay **out, dlm_err *e)
{
    *out = NULL;
    replay *r = calloc(1, sizeof *r);
    if (!r) return err_set(e, "MemoryError", "out of memory");
    snprintf(r->dir, sizeof r->dir, "%s/replay", store);
    snprintf(r->corpus, sizeof r->corpus, "%s/corpus.zst", r->dir);
    snprintf(r->index, sizeof r->index, "%s/index.json", r->dir);
    snprintf(r->side, sizeof r->side, "%s/" SIDECAR, r->dir);
    if (fs_is_file(r->index)) {
        json_t *a = json_load_path(r->index, 256u << 20, e), *side = NULL;
        if (!a) { replay_free(r); return -1; }
        if (fs_is_file(r->side) && !(side = json_load_path(r->side, 256u << 20, e))) {
            json_decref(a);
            replay_free(r);
            return -1;
        }
        if (!json_is_array(a)) {
            json_decref(a);
            json_decref(side);
            err_set(e, "ReplayCorruptError", "%s: not a JSON array", r->index);   /* before r goes */
            replay_free(r);
            return -1;
        }
        int64_t csize = fs_file_size(r->corpus);
        size_t i;
        json_t *it;
        json_array_foreach(a, i, it) {
            const char *sid = jget_str(it, "section_id"), *ty = jget_str(it, "section_type"),
                       *at = jget_str(it, "added_at");
            long long off, len, fr = 0, lr = 0;
            double w = 1.0;
            json_t *st = sid ? json_object_get(side, sid) : NULL;
            if (!ty && st) ty = jget_str(st, "section_type");
            /* off + len could overflow: compare against what is left */
            if (!sid || strlen(sid) != 16 || jget_int(it, "byte_offset", &off) ||
                jget_int(it, "length", &len) || off < 0 || len <= 0 || off > csize || len > csize - off) {
                json_decref(a);
                json_decref(side);
                err_set(e, "ReplayCorruptError", "%s: entry %zu is malformed or points past the corpus", r->index, i);
                err_hint(e, "move %s aside to start a new replay corpus", r->dir);
                replay_free(r);   /* after the message: it names r's paths */
                return -1;
            }
            json_t *src = json_object_get(it, "first_run") ? it : st;
            json_t *rec = NULL;
            if (!ty || !src) {
                /* the original's index: the type and the runs are in the
                 * record (section_type, training_runs_seen) */
                if (read_frame(r->corpus, off, len, &rec, e)) { json_decref(a); json_decref(side); replay_free(r); return -1; }
                if (!ty) ty = jget_str(rec, "section_type");
                json_t *runs = json_object_get(rec, "training_runs_seen"), *v;
                size_t k;
                json_array_foreach(runs, k, v) {
                    long long x = json_integer_value(v);
                    if (!fr || x < fr) fr = x;
                    if (x > lr) lr = x;
                }
            }
            if (!ty || strlen(ty) >= sizeof ((replay_entry *)0)->type) {
                json_decref(rec);
                json_decref(a);
                json_decref(side);
                err_set(e, "ReplayCorruptError", "%s: entry %zu has no section_type", r->index, i);
                err_hint(e, "move %s aside to start a new replay corpus", r->dir);
                replay_free(r);
                return -1;
            }
            if (src) {
                jget_int(src, "first_run", &fr);
                jget_int(src, "last_run", &lr);
            }
            jget_num(it, "weight", &w);
            replay_entry *x = push(r);
            if (!x) { json_decref(rec); json_decref(a); json_decref(side); replay_free(r); return err_set(e, "MemoryError", "out of memory"); }
            memcpy(x->sid, sid, 17);
            snprintf(x->type, sizeof x->type, "%s", ty);
            snprintf(x->added_at, sizeof x->added_at, "%s", at ? at : "");
            json_decref(rec);
            x->off = off;
            x->len = len;
            x->first_run = fr;
            x->last_run = lr;
            x->weight = w;
        }
        json_decref(a);
        json_decref(side);
        if (r->n > 1) qsort(r->e, (size_t)r->n, sizeof *r->e, cmp_entry);   /* e is NULL when the corpus is empty */
    }
    *out = r;
    return 0;
}

void replay_free(replay *r)
{
    if (!r) return;
    free(r->e);
    free(r);
}

int replay_count(const replay *r) { return r->n; }
const replay_entry *replay_at(const replay *r, int i) { return i >= 0 && i < r->n ? &r->e[i] : NULL; }

int replay_find(const replay *r, const char *sid)
{
    int lo = 0, hi = r->n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2, c = strcmp(r->e[mid].sid, sid);
        if (!c) return mid;
        if (c < 0) lo = mid + 1; else hi = mid - 1;
    }
    return -1;
}

uint64_t replay_bytes(const replay *r)
{
    int64_t s = fs_file_size(r->corpus);
    return s > 0 ? (uint64_t)s : 0;
}

static int read_frame(const char *path, int64_t off, int64_t len, json_t **rec, dlm_err *e)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return err_sys(e, "cannot open '%s'", path);
    void *buf = malloc((size_t)len);
    if (!buf) { close(fd); return err_set(e, "MemoryError", "out of memory"); }
    ssize_t got = pread(fd, buf, (size_t)len, off);
    close(fd);
    if (got != len) { free(buf); return err_set(e, "ReplayCorruptError", "%s: short read at %lld", path, (long long)off); }
    unsigned long long sz = ZSTD_getFrameContentSize(buf, (size_t)len);
    if (sz == ZSTD_CONTENTSIZE_ERROR || sz == ZSTD_CONTENTSIZE_UNKNOWN || sz > MAX_RECORD) {
        free(buf);
        return err_set(e, "ReplayCorruptError", "%s: bad zstd frame at %lld", path, (long long)off);
    }
    char *out = malloc((size_t)sz + 1);
    if (!out) { free(buf); return err_set(e, "MemoryError", "out of memory"); }
    size_t n = ZSTD_decompress(out, (size_t)sz, buf, (size_t)len);
    free(buf);
    if (ZSTD_isError(n) || n != sz) { free(out); return err_set(e, "ReplayCorruptError", "%s: corrupt frame at %lld", path, (long long)off); }
    /* CBOR (the original's framing, which dlm writes too) or JSON (what
     * dlm wrote before): a CBOR map never starts with '{' */
    if (n && out[0] == '{') {
        json_error_t je;
        *rec = json_loadb(out, n, 0, &je);
        free(out);
        if (!*rec) return err_set(e, "ReplayCorruptError", "%s: bad record at %lld: %s", path, (long long)off, je.text);
        return 0;
    }
    dlm_err ce;
    err_clear(&ce);
    int rc = cbor_to_json((const uint8_t *)out, n, rec, &ce);
    free(out);
    if (rc || !json_is_object(*rec)) {
        json_decref(*rec);
        *rec = NULL;
        return err_set(e, "ReplayCorruptError", "%s: bad record at %lld: %s", path, (long long)off,
                       rc ? ce.msg : "not a map");
    }
    return 0;
}

int replay_read(const replay *r, int i, char **content, size_t *len, dlm_err *e)
{
    json_t *rec;
    if (read_frame(r->corpus, r->e[i].off, r->e[i].len, &rec, e)) return -1;
    json_t *c = json_object_get(rec, "content");
    if (!json_is_string(c)) { json_decref(rec); return err_set(e, "ReplayCorruptError", "record without content"); }
    *len = json_string_length(c);
    *content = malloc(*len + 1);
    if (!*content) { json_decref(rec); return err_set(e, "MemoryError", "out of memory"); }
    memcpy(*content, json_string_value(c), *len);
    (*content)[*len] = 0;
    json_decref(rec);
    return 0;
}

static int in_list(const char *sid, const char *const *ids, int n)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(ids[i], sid)) return 1;
    return 0;
}

typedef struct keyed { double key; int idx; } keyed;
static int cmp_key(const void *a, const void *b)
{
    const keyed *x = a, *y = b;
    if (x->key > y->key) return -1;
    if (x->key < y->key) return 1;
    return x->idx - y->idx;
}

double replay_weight(double weight, double age)
{
    if (age < 0) age = 0;
    double w = weight * (1.0 / (1.0 + age));   /* entry.weight * base, as the original rounds it */
    return w < 0.01 ? 0.01 : w;
}

/* The record's auto_mined flag (1, 0; -1 with e set when unreadable) */
static int record_mined(const replay *r, int i, dlm_err *e)
{
    json_t *rec;
    if (read_frame(r->corpus, r->e[i].off, r->e[i].len, &rec, e)) return -1;
    int m = json_is_true(json_object_get(rec, "auto_mined"));
    json_decref(rec);
    return m;
}

/* The Efraimidis–Spirakis draw over the entries of `type` (NULL: prose and
 * instruction) not in cur_ids: key ln(u)/w, the k largest; every entry, in
 * id order, when there are no more than k. pass keeps the SFT and the
 * preference draws apart. */
static int sample_kind(const replay *r, const char *const *cur_ids, int n_cur, const char *type, int no_mined, int k,
                       uint64_t seed, uint64_t pass, int64_t run_id, int **out, dlm_err *e)
{
    *out = NULL;
    keyed *c = malloc((size_t)(r->n + 1) * sizeof *c);
    if (!c) return err_set(e, "MemoryError", "out of memory");
    int n = 0;
    for (int i = 0; i < r->n; i++) {
        if (in_list(r->e[i].sid, cur_ids, n_cur)) continue;
        if (type ? strcmp(r->e[i].type, type) : strcmp(r->e[i].type, "prose") && strcmp(r->e[i].type, "instruction"))
            continue;
        if (no_mined) {
            int m = record_mined(r, i, e);
            if (m < 0) { free(c); return -1; }
            if (m) continue;
        }
        double w = replay_weight(r->e[i].weight, (double)(run_id - r->e[i].last_run));
        /* u from the section id, so the draw of one entry never depends on
         * which other entries exist. */
        uint64_t h = 0;
        for (int j = 0; j < 16; j++) h = h * 16 + (uint64_t)(r->e[i].sid[j] <= '9' ? r->e[i].sid[j] - '0' : r->e[i].sid[j] - 'a' + 10);
        double u = rng_uniform_d(seed, RNG_REPLAY, h, pass);
        if (u <= 0) u = 1e-300;
        c[n].key = log(u) / w;
        c[n].idx = i;
        n++;
    }
    if (k < n) qsort(c, (size_t)n, sizeof *c, cmp_key);
    else k = n; /* take all, in id order */
    int *o = malloc((size_t)(k ? k : 1) * sizeof *o);
    if (!o) { free(c); return err_set(e, "MemoryError", "out of memory"); }
    for (int i = 0; i < k; i++) o[i] = c[i].idx;
    free(c);
    *out = o;
    return k;
}

int replay_sample(const replay *r, const char *const *cur_ids, int n_cur, int n_new, uint64_t seed,
                  int64_t run_id, int **out, dlm_err *e)
{
    int k = 2 * n_new > 32 ? 2 * n_new : 32;
    return sample_kind(r, cur_ids, n_cur, NULL, 0, k, seed, 0, run_id, out, e);
}

int replay_sample_pref(const replay *r, const char *const *cur_ids, int n_cur, int n_doc_pairs, int no_mined,
                       uint64_t seed, int64_t run_id, int **out, dlm_err *e)
{
    int k = 2 * n_doc_pairs > 8 ? 2 * n_doc_pairs : 8;   /* dpo_phase / orpo_phase: max(8, 2 * len(doc_ds)) */
    return sample_kind(r, cur_ids, n_cur, "preference", no_mined, k, seed, 1, run_id, out, e);
}

dlm_doc *replay_doc(const replay *r, const int *idx, int n, dlm_err *e)
{
    if (n <= 0) return NULL;
    static const char HDR[] = "---\ndlm_id: \"00000000000000000000000000\"\nbase_model: tiny\n---\n";
    dlm_doc *d = doc_parse("<replay>", HDR, sizeof HDR - 1, e);
    if (!d) return NULL;
    for (int i = 0; i < n; i++) {
        char *content;
        size_t len;
        if (replay_read(r, idx[i], &content, &len, e)) { doc_free(d); return NULL; }
        doc_section s;
        memset(&s, 0, sizeof s);
        s.type = !strcmp(r->e[idx[i]].type, "instruction") ? DOC_INSTRUCTION
               : !strcmp(r->e[idx[i]].type, "preference") ? DOC_PREFERENCE : DOC_PROSE;
        s.content = content;
        s.content_len = len;
        int rc = doc_append_section(d, &s, e);
        free(content);
        if (rc) { err_prefix(e, "replay section %s", r->e[idx[i]].sid); doc_free(d); return NULL; }
    }
    return d;
}

static int save_index(replay *r, dlm_err *e)
{
    if (r->n > 1) qsort(r->e, (size_t)r->n, sizeof *r->e, cmp_entry);   /* e is NULL when the corpus is empty */
    /* index.json exactly as the original's IndexEntry (extra="forbid");
     * the run bookkeeping goes to the sidecar, written first (an entry the
     * index lacks is ignored, one the sidecar lacks reads its record) */
    json_t *a = json_array(), *side = json_object();
    for (int i = 0; i < r->n; i++) {
        replay_entry *x = &r->e[i];
        json_array_append_new(a, json_pack("{s:s, s:I, s:I, s:s, s:f}", "section_id", x->sid, "byte_offset",
                                           (json_int_t)x->off, "length", (json_int_t)x->len, "added_at",
                                           x->added_at, "weight", x->weight));
        json_object_set_new(side, x->sid, json_pack("{s:s, s:I, s:I}", "section_type", x->type, "first_run",
                                                    (json_int_t)x->first_run, "last_run", (json_int_t)x->last_run));
    }
    int rc = json_save_file(r->side, side, e) || json_save_file(r->index, a, e) ? -1 : 0;
    json_decref(a);
    json_decref(side);
    return rc;
}

static int write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t w = write(fd, c, n);
        if (w < 0) { if (errno == EINTR) continue; return -1; }
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Rewrite the corpus keeping only entries [0, n) (compaction after
 * eviction), crash-safely: new file, then the index pointing into it. */
static int compact(replay *r, dlm_err *e)
{
    strbuf sb = STRBUF_INIT;
    int fd = open(r->corpus, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return err_sys(e, "cannot open '%s'", r->corpus);
    for (int i = 0; i < r->n; i++) {
        size_t at = sb.len;
        if (sb_reserve(&sb, (size_t)r->e[i].len)) { close(fd); sb_free(&sb); return err_set(e, "MemoryError", "out of memory"); }
        if (pread(fd, sb.buf + at, (size_t)r->e[i].len, r->e[i].off) != r->e[i].len) {
            close(fd);
            sb_free(&sb);
            return err_set(e, "ReplayCorruptError", "%s: short read", r->corpus);
        }
        sb.len += (size_t)r->e[i].len;
        r->e[i].off = (int64_t)at;
    }
    close(fd);
    int rc = fs_write_atomic(r->corpus, sb.buf ? sb.buf : "", sb.len, 0644, e);
    sb_free(&sb);
    return rc ? -1 : save_index(r, e);
}

/* One section as the original's SectionSnapshot, cbor2.dumps(...,
 * canonical=True, timezone=UTC): keys shorter first then bytewise, the
 * datetimes as tag 0 strings ("2026-12-05T08:22:17Z"). */
static void record_cbor(strbuf *sb, const doc_section *s, const char *stamp, int64_t run_id)
{
    const char *ty = doc_section_type_name(s->type);
    cbor_put_map(sb, 7);
    cbor_put_text(sb, "content", 7);
    cbor_put_text(sb, s->content, s->content_len);
    cbor_put_text(sb, "auto_mined", 10);
    cbor_put_bool(sb, s->type == DOC_PREFERENCE && s->auto_mined);
    cbor_put_text(sb, "section_id", 10);
    cbor_put_text(sb, s->id, strlen(s->id));
    cbor_put_text(sb, "last_seen_at", 12);
    cbor_put_tag(sb, 0);
    cbor_put_text(sb, stamp, strlen(stamp));
    cbor_put_text(sb, "section_type", 12);
    cbor_put_text(sb, ty, strlen(ty));
    cbor_put_text(sb, "first_seen_at", 13);
    cbor_put_tag(sb, 0);
    cbor_put_text(sb, stamp, strlen(stamp));
    cbor_put_text(sb, "training_runs_seen", 18);
    cbor_put_array(sb, 1);
    cbor_put_uint(sb, (uint64_t)run_id);
}

int replay_commit(replay *r, const dlm_doc *doc, int64_t run_id, uint64_t max_bytes, dlm_err *e)
{
    if (fs_mkdir_p(r->dir, e)) return -1;
    int fd = open(r->corpus, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return err_sys(e, "cannot open '%s'", r->corpus);
    int64_t end = fs_file_size(r->corpus);
    char now[24], stamp[32];
    time_iso_utc(time_now(), now, sizeof now);
    snprintf(stamp, sizeof stamp, "%sZ", now);
    int n_cur = doc_nsections(doc);
    for (int i = 0; i < n_cur; i++) {
        const doc_section *s = doc_section_at(doc, i);
        if (s->type != DOC_PROSE && s->type != DOC_INSTRUCTION && s->type != DOC_PREFERENCE) continue;
        int k = replay_find(r, s->id);
        if (k >= 0) { r->e[k].last_run = run_id; continue; }
        strbuf rec = STRBUF_INIT;
        record_cbor(&rec, s, stamp, run_id);
        if (rec.oom) { sb_free(&rec); close(fd); return err_set(e, "MemoryError", "out of memory"); }
        size_t cap = ZSTD_compressBound(rec.len);
        void *z = malloc(cap);
        size_t zn = z ? ZSTD_compress(z, cap, rec.buf, rec.len, 3) : 0;
        sb_free(&rec);
        if (!z || ZSTD_isError(zn)) { free(z); close(fd); return err_set(e, "ReplayError", "zstd compression failed"); }
        if (write_all(fd, z, zn)) { free(z); close(fd); return err_sys(e, "cannot append to '%s'", r->corpus); }
        free(z);
        replay_entry *x = push(r);
        if (!x) { close(fd); return err_set(e, "MemoryError", "out of memory"); }
        memcpy(x->sid, s->id, 17);
        snprintf(x->type, sizeof x->type, "%s", doc_section_type_name(s->type));
        x->off = end;
        x->len = (int64_t)zn;
        snprintf(x->added_at, sizeof x->added_at, "%s", now);
        x->first_run = x->last_run = run_id;
        x->weight = 1.0;
        end += (int64_t)zn;
        if (r->n > 1) qsort(r->e, (size_t)r->n, sizeof *r->e, cmp_entry);   /* e is NULL when the corpus is empty */
    }
    if (fsync(fd) != 0) { close(fd); return err_sys(e, "cannot fsync '%s'", r->corpus); }
    close(fd);
    /* Evict oldest (first_run, then id) non-current entries past the cap. */
    uint64_t total = 0;
    for (int i = 0; i < r->n; i++) total += (uint64_t)r->e[i].len;
    int evicted = 0;
    while (total > max_bytes) {
        int victim = -1;
        for (int i = 0; i < r->n; i++) {
            int cur = 0;
            for (int j = 0; j < n_cur && !cur; j++) cur = !strcmp(doc_section_at(doc, j)->id, r->e[i].sid);
            if (cur) continue;
            if (victim < 0 || r->e[i].first_run < r->e[victim].first_run) victim = i;
        }
        if (victim < 0) break;
        total -= (uint64_t)r->e[victim].len;
        r->e[victim] = r->e[--r->n];
        evicted++;
    }
    if (evicted) {
        /* keep corpus order = offset order for compaction */
        for (int i = 1; i < r->n; i++)
            for (int j = i; j > 0 && r->e[j - 1].off > r->e[j].off; j--) {
                replay_entry t = r->e[j]; r->e[j] = r->e[j - 1]; r->e[j - 1] = t;
            }
        return compact(r, e);
    }
    return save_index(r, e);
}
