/* tcache — see tcache.h. */
#include "tokens/tcache.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <utime.h>

#include "util/fs.h"
#include "util/hash.h"
#include "util/str.h"

#define MAGIC "DLMTC001"
#define MAX_ENTRY (512u << 20)

struct tcache {
    char dir[4096];
    int64_t hits, misses;
};

static void put_field(sha256_ctx *c, const char *tag, const char *s, size_t n)
{
    /* tag + length + bytes: no two different tuples hash alike */
    char len[32];
    int k = snprintf(len, sizeof len, "%s:%zu:", tag, n);
    sha256_update(c, len, (size_t)k);
    if (n) sha256_update(c, s, n);
}

void tcache_key(const tcache_key_parts *p, doc_section_type t, const char *content, size_t len, char out[65])
{
    sha256_ctx c;
    sha256_init(&c);
    char num[64];
    put_field(&c, "v", "1", 1);
    put_field(&c, "tok", p->tokenizer_sha256, strlen(p->tokenizer_sha256));
    put_field(&c, "dialect", p->dialect ? p->dialect : "", p->dialect ? strlen(p->dialect) : 0);
    if (p->system_prompt) put_field(&c, "system", p->system_prompt, strlen(p->system_prompt));
    else put_field(&c, "nosystem", "", 0);
    snprintf(num, sizeof num, "%d/%d", p->loss_on_all, p->seq_len);
    put_field(&c, "loss_seq", num, strlen(num));
    const char *tn = doc_section_type_name(t);
    put_field(&c, "type", tn, strlen(tn));
    put_field(&c, "content", content, len);
    unsigned char d[32];
    sha256_final(&c, d);
    hex_encode(d, 32, out);
    out[64] = 0;
}

void tcache_rows_free(tcache_row *rows, int n)
{
    if (!rows) return;
    for (int i = 0; i < n; i++) { free(rows[i].ids); free(rows[i].mask); }
    free(rows);
}

int tcache_open(const char *store, tcache **out, dlm_err *e)
{
    *out = NULL;
    tcache *c = calloc(1, sizeof *c);
    if (!c) return err_set(e, "MemoryError", "out of memory");
    snprintf(c->dir, sizeof c->dir, "%s/%s/entries", store, TCACHE_DIR);
    if (fs_mkdir_p(c->dir, e)) { free(c); return -1; }
    *out = c;
    return 0;
}

void tcache_counts(const tcache *c, int64_t *hits, int64_t *misses)
{
    *hits = c->hits;
    *misses = c->misses;
}

void tcache_close(tcache *c)
{
    free(c);
}

static int valid_key(const char *k)
{
    for (int i = 0; i < 64; i++)
        if (!((k[i] >= '0' && k[i] <= '9') || (k[i] >= 'a' && k[i] <= 'f'))) return 0;
    return k[64] == 0;
}

static int entry_path(const tcache *c, const char *key, char *out, size_t cap)
{
    int n = snprintf(out, cap, "%s/%.2s/%s.bin", c->dir, key, key);
    return n > 0 && (size_t)n < cap ? 0 : -1;
}

static uint32_t rd32(const unsigned char *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static void wr32(unsigned char *p, uint32_t v) { p[0] = (unsigned char)v; p[1] = (unsigned char)(v >> 8); p[2] = (unsigned char)(v >> 16); p[3] = (unsigned char)(v >> 24); }

/* Decode an entry; -1 on any inconsistency. Public for the fuzz target
 * through tcache_get only (a file in the store). */
static int decode(const unsigned char *b, size_t len, tcache_row **rows, int *n_rows)
{
    *rows = NULL;
    *n_rows = 0;
    if (len < 8 + 4 + 32 || memcmp(b, MAGIC, 8)) return -1;
    unsigned char d[32];
    sha256(b, len - 32, d);
    if (memcmp(d, b + len - 32, 32)) return -1;
    size_t end = len - 32, p = 8;
    uint32_t n = rd32(b + p);
    p += 4;
    if (n > (end - p) / 4) return -1;          /* each row needs at least its length */
    tcache_row *r = calloc(n ? n : 1, sizeof *r);
    if (!r) return -1;
    for (uint32_t i = 0; i < n; i++) {
        if (end - p < 4) goto bad;
        uint32_t k = rd32(b + p);
        p += 4;
        if (k > INT32_MAX / 5 || (size_t)k * 5 > end - p) goto bad;
        r[i].n = (int32_t)k;
        r[i].ids = malloc((size_t)k * 4 + 4);
        r[i].mask = malloc((size_t)k + 1);
        if (!r[i].ids || !r[i].mask) goto bad;
        for (uint32_t j = 0; j < k; j++) r[i].ids[j] = (int32_t)rd32(b + p + 4 * (size_t)j);
        p += 4 * (size_t)k;
        memcpy(r[i].mask, b + p, k);
        p += k;
    }
    if (p != end) goto bad;
    *rows = r;
    *n_rows = (int)n;
    return 0;
bad:
    tcache_rows_free(r, (int)n);
    return -1;
}

int tcache_get(tcache *c, const char key[65], tcache_row **rows, int *n_rows)
{
    *rows = NULL;
    *n_rows = 0;
    char p[4300];
    if (!valid_key(key) || entry_path(c, key, p, sizeof p)) { c->misses++; return 0; }
    char *buf = NULL;
    size_t len = 0;
    dlm_err e;
    if (fs_read_all(p, MAX_ENTRY, &buf, &len, &e)) { c->misses++; return 0; }
    int rc = decode((const unsigned char *)buf, len, rows, n_rows);
    free(buf);
    if (rc) {
        remove(p);     /* corrupt or truncated: rebuilt by the next put */
        c->misses++;
        return 0;
    }
    utime(p, NULL);    /* last use, for prune and the size cap */
    c->hits++;
    return 1;
}

int tcache_put(tcache *c, const char key[65], const tcache_row *rows, int n_rows, dlm_err *e)
{
    if (!valid_key(key)) return err_set(e, "CacheError", "invalid cache key");
    size_t len = 8 + 4 + 32;
    for (int i = 0; i < n_rows; i++) {
        if (rows[i].n < 0) return err_set(e, "CacheError", "negative row length");
        len += 4 + (size_t)rows[i].n * 5;
    }
    if (len > MAX_ENTRY) return 0;   /* not worth caching; never an error */
    unsigned char *b = malloc(len);
    if (!b) return err_set(e, "MemoryError", "out of memory");
    size_t p = 0;
    memcpy(b, MAGIC, 8);
    p = 8;
    wr32(b + p, (uint32_t)n_rows);
    p += 4;
    for (int i = 0; i < n_rows; i++) {
        wr32(b + p, (uint32_t)rows[i].n);
        p += 4;
        for (int j = 0; j < rows[i].n; j++, p += 4) wr32(b + p, (uint32_t)rows[i].ids[j]);
        memcpy(b + p, rows[i].mask, (size_t)rows[i].n);
        p += (size_t)rows[i].n;
    }
    sha256(b, p, b + p);
    char path[4300], dir[4300];
    int rc = entry_path(c, key, path, sizeof path);
    if (!rc) {
        snprintf(dir, sizeof dir, "%s/%.2s", c->dir, key);
        rc = fs_mkdir_p(dir, e) || fs_write_atomic(path, b, len, 0644, e) ? -1 : 0;
    } else rc = err_set(e, "CacheError", "cache path too long");
    free(b);
    return rc;
}

/* ---- maintenance ------------------------------------------------------------- */

typedef struct ent { char path[4400]; double mtime; int64_t size; } ent;

static int list_entries(const char *store, ent **out, int *n, dlm_err *e)
{
    *out = NULL;
    *n = 0;
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/%s/entries", store, TCACHE_DIR);
    if (!fs_is_dir(dir)) return 0;
    char **subs = NULL;
    int ns = fs_list_dir(dir, &subs, e);
    if (ns < 0) return -1;
    int cap = 0;
    ent *v = NULL;
    for (int i = 0; i < ns; i++) {
        char sd[4300];
        snprintf(sd, sizeof sd, "%s/%s", dir, subs[i]);
        char **files = NULL;
        int nf = fs_is_dir(sd) ? fs_list_dir(sd, &files, NULL) : 0;
        for (int j = 0; j < nf; j++) {
            if (!str_endswith(files[j], ".bin")) continue;
            if (*n == cap) {
                cap = cap ? cap * 2 : 64;
                ent *nv = realloc(v, (size_t)cap * sizeof *nv);
                if (!nv) { fs_free_list(files, nf); fs_free_list(subs, ns); free(v); return err_set(e, "MemoryError", "out of memory"); }
                v = nv;
            }
            ent *x = &v[*n];
            snprintf(x->path, sizeof x->path, "%s/%s", sd, files[j]);
            struct stat st;
            if (stat(x->path, &st)) continue;
            x->mtime = (double)st.st_mtim.tv_sec + st.st_mtim.tv_nsec * 1e-9;
            x->size = st.st_size;
            (*n)++;
        }
        if (nf > 0) fs_free_list(files, nf);
    }
    fs_free_list(subs, ns);
    *out = v;
    return 0;
}

int tcache_stat(const char *store, tcache_stats *st, dlm_err *e)
{
    memset(st, 0, sizeof *st);
    ent *v;
    int n;
    if (list_entries(store, &v, &n, e)) return -1;
    for (int i = 0; i < n; i++) {
        st->entries++;
        st->bytes += v[i].size;
        if (!st->oldest || v[i].mtime < st->oldest) st->oldest = v[i].mtime;
        if (v[i].mtime > st->newest) st->newest = v[i].mtime;
    }
    free(v);
    return 0;
}

static int by_mtime(const void *a, const void *b)
{
    const ent *x = a, *y = b;
    if (x->mtime != y->mtime) return x->mtime < y->mtime ? -1 : 1;
    return strcmp(x->path, y->path);
}

int tcache_prune(const char *store, double older_than, int64_t max_bytes, int64_t *removed, int64_t *freed,
                 dlm_err *e)
{
    *removed = 0;
    *freed = 0;
    ent *v;
    int n;
    if (list_entries(store, &v, &n, e)) return -1;
    if (n > 1) qsort(v, (size_t)n, sizeof *v, by_mtime);   /* v is NULL when the cache is empty */
    int64_t total = 0;
    for (int i = 0; i < n; i++) total += v[i].size;
    double now = (double)time(NULL);
    for (int i = 0; i < n; i++) {
        int old = older_than > 0 && v[i].mtime < now - older_than;
        int over = max_bytes > 0 && total > max_bytes;
        if (!old && !over) continue;
        if (remove(v[i].path) && errno != ENOENT) { free(v); return err_sys(e, "cannot remove '%s'", v[i].path); }
        total -= v[i].size;
        (*removed)++;
        *freed += v[i].size;
    }
    free(v);
    return 0;
}

int tcache_clear(const char *store, dlm_err *e)
{
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/%s", store, TCACHE_DIR);
    return fs_remove_tree(dir, e);
}
