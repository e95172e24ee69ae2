#include "adapter/state.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/fs.h"
#include "util/hash.h"
#include "util/str.h"

static const char MAGIC[8] = {'D', 'L', 'M', 'S', 'T', 'A', 'T', 'E'};

static void put_u32(strbuf *b, uint32_t v)
{
    unsigned char x[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16), (unsigned char)(v >> 24)};
    sb_append(b, x, 4);
}
static void put_u64(strbuf *b, uint64_t v)
{
    put_u32(b, (uint32_t)v);
    put_u32(b, (uint32_t)(v >> 32));
}
static void put_f64(strbuf *b, double d)
{
    uint64_t v;
    memcpy(&v, &d, 8);
    put_u64(b, v);
}
static void put_f32s(strbuf *b, const float *p, uint64_t n)
{
    /* The platform is little-endian (x86-64, aarch64): floats go as is. */
    sb_append(b, p, (size_t)n * sizeof(float));
}

size_t state_bytes(uint64_t n, int has_best) { return 96 + (size_t)n * 4 * (has_best ? 4 : 3); }

size_t state_size(const train_state *s)
{
    if (s->optim_kind != STATE_OPTIM_ADAMW8) return state_bytes(s->n, s->best != NULL);
    return 96 + 24 + (size_t)s->n * 4 * (s->best ? 2 : 1) + (size_t)s->n8 * 2 + (size_t)s->nblk * 8 +
           (size_t)s->n32 * 8;
}

int state_save(const char *path, const train_state *s, dlm_err *e)
{
    strbuf b = STRBUF_INIT;
    int rc = state_save_buf(path, s, &b, e);
    sb_free(&b);
    return rc;
}

int state_save_buf(const char *path, const train_state *s, strbuf *bp, dlm_err *e)
{
    strbuf b = *bp;
    sb_reset(&b);
    int k8 = s->optim_kind == STATE_OPTIM_ADAMW8;
    if (sb_reserve(&b, state_size(s))) {
        *bp = b;
        return err_set(e, "MemoryError", "out of memory saving training state");
    }
    sb_append(&b, MAGIC, 8);
    put_u32(&b, k8 ? 2 : 1);
    put_u32(&b, s->best ? 1u : 0u);
    put_u64(&b, s->step);
    put_u64(&b, s->total_steps);
    put_u64(&b, s->micro);
    put_u64(&b, s->seed);
    put_u64(&b, s->n);
    put_f64(&b, s->best_val);
    put_u64(&b, s->best_step);
    put_u32(&b, s->bad_evals);
    put_u32(&b, k8 ? STATE_OPTIM_ADAMW8 : 0);
    put_f64(&b, s->last_loss);
    if (k8) {
        put_u64(&b, s->n8);
        put_u64(&b, s->nblk);
        put_u64(&b, s->n32);
        put_f32s(&b, s->params, s->n);
        sb_append(&b, s->c1, (size_t)s->n8);
        sb_append(&b, s->c2, (size_t)s->n8);
        put_f32s(&b, s->a1, s->nblk);
        put_f32s(&b, s->a2, s->nblk);
        put_f32s(&b, s->m, s->n32);
        put_f32s(&b, s->v, s->n32);
    } else {
        put_f32s(&b, s->params, s->n);
        put_f32s(&b, s->m, s->n);
        put_f32s(&b, s->v, s->n);
    }
    if (s->best) put_f32s(&b, s->best, s->n);
    *bp = b;
    if (b.oom) return err_set(e, "MemoryError", "out of memory saving training state");
    char hex[65], side[4200], line[80];
    sha256_hex(b.buf, b.len, hex);
    if (fs_write_atomic(path, b.buf, b.len, 0644, e)) return -1;
    snprintf(side, sizeof side, "%s.sha256", path);
    snprintf(line, sizeof line, "%s\n", hex);
    return fs_write_atomic(side, line, strlen(line), 0644, e);
}

typedef struct rd { const unsigned char *p; size_t left; } rd;
static int get(rd *r, void *dst, size_t n)
{
    if (r->left < n) return -1;
    memcpy(dst, r->p, n);
    r->p += n;
    r->left -= n;
    return 0;
}
static int get_u32(rd *r, uint32_t *v)
{
    unsigned char x[4];
    if (get(r, x, 4)) return -1;
    *v = (uint32_t)x[0] | (uint32_t)x[1] << 8 | (uint32_t)x[2] << 16 | (uint32_t)x[3] << 24;
    return 0;
}
static int get_u64(rd *r, uint64_t *v)
{
    uint32_t lo, hi;
    if (get_u32(r, &lo) || get_u32(r, &hi)) return -1;
    *v = (uint64_t)hi << 32 | lo;
    return 0;
}
static int get_f64(rd *r, double *d)
{
    uint64_t v;
    if (get_u64(r, &v)) return -1;
    memcpy(d, &v, 8);
    return 0;
}

int state_load(const char *path, train_state *s, dlm_err *e)
{
    memset(s, 0, sizeof *s);
    char side[4200], *sbuf, *buf;
    size_t slen, len;
    snprintf(side, sizeof side, "%s.sha256", path);
    if (fs_read_all(side, 4096, &sbuf, &slen, e)) {
        err_set(e, "ResumeIntegrityError", "training_state.bin has no readable sha256 sidecar (%s)", side);
        return err_hint(e, "start over with 'dlm train PATH --fresh'");
    }
    if (fs_read_all(path, (size_t)1 << 40, &buf, &len, e)) { free(sbuf); return -1; }
    char hex[65];
    sha256_hex(buf, len, hex);
    int ok = slen >= 64 && !memcmp(sbuf, hex, 64);
    free(sbuf);
    if (!ok) {
        free(buf);
        err_set(e, "ResumeIntegrityError", "training_state.bin sha256 mismatch (%s)", path);
        return err_hint(e, "the checkpoint is corrupt; start over with 'dlm train PATH --fresh'");
    }
    rd r = {(const unsigned char *)buf, len};
    char magic[8];
    uint32_t version, flags, reserved;
    if (get(&r, magic, 8) || memcmp(magic, MAGIC, 8)) goto bad;
    if (get_u32(&r, &version) || (version != 1 && version != 2)) {
        free(buf);
        return err_set(e, "ResumeIntegrityError", "training_state.bin version %u is not supported", version);
    }
    if (get_u32(&r, &flags) || get_u64(&r, &s->step) || get_u64(&r, &s->total_steps) ||
        get_u64(&r, &s->micro) || get_u64(&r, &s->seed) || get_u64(&r, &s->n) ||
        get_f64(&r, &s->best_val) || get_u64(&r, &s->best_step) || get_u32(&r, &s->bad_evals) ||
        get_u32(&r, &reserved) || get_f64(&r, &s->last_loss))
        goto bad;
    if (version == 2) {
        if (reserved != STATE_OPTIM_ADAMW8 || get_u64(&r, &s->n8) || get_u64(&r, &s->nblk) || get_u64(&r, &s->n32))
            goto bad;
        s->optim_kind = STATE_OPTIM_ADAMW8;
        /* never trust a count: each is bounded by what is left before any
         * product is formed */
        if (s->n > r.left / 4 || s->n8 > r.left || s->nblk > r.left / 8 || s->n32 > r.left / 8 ||
            s->n8 + s->n32 != s->n || s->nblk < (s->n8 + 2047) / 2048 || s->nblk > s->n8)
            goto bad;
        size_t want = (size_t)s->n * 4 * ((flags & 1) ? 2 : 1) + (size_t)s->n8 * 2 + (size_t)s->nblk * 8 +
                      (size_t)s->n32 * 8;
        if (r.left != want) goto bad;
    } else {
        size_t arrays = (flags & 1) ? 4 : 3;
        if (s->n > r.left / 4 / arrays || r.left != s->n * 4 * arrays) goto bad;
    }
    size_t bytes = (size_t)s->n * 4, mv = s->optim_kind ? (size_t)s->n32 * 4 : bytes;
    s->params = malloc(bytes ? bytes : 1);
    s->m = malloc(mv ? mv : 1);
    s->v = malloc(mv ? mv : 1);
    s->best = (flags & 1) ? malloc(bytes ? bytes : 1) : NULL;
    if (s->optim_kind) {
        s->c1 = malloc(s->n8 ? s->n8 : 1);
        s->c2 = malloc(s->n8 ? s->n8 : 1);
        s->a1 = malloc(s->nblk ? s->nblk * 4 : 1);
        s->a2 = malloc(s->nblk ? s->nblk * 4 : 1);
    }
    if (!s->params || !s->m || !s->v || ((flags & 1) && !s->best) ||
        (s->optim_kind && (!s->c1 || !s->c2 || !s->a1 || !s->a2))) {
        free(buf);
        state_free(s);
        return err_set(e, "MemoryError", "out of memory loading training state");
    }
    get(&r, s->params, bytes);
    if (s->optim_kind) {
        get(&r, s->c1, s->n8);
        get(&r, s->c2, s->n8);
        get(&r, s->a1, s->nblk * 4);
        get(&r, s->a2, s->nblk * 4);
    }
    get(&r, s->m, mv);
    get(&r, s->v, mv);
    if (s->best) get(&r, s->best, bytes);
    free(buf);
    return 0;
bad:
    free(buf);
    state_free(s);
    return err_set(e, "ResumeIntegrityError", "training_state.bin is malformed (%s)", path);
}

void state_free(train_state *s)
{
    free(s->params);
    free(s->m);
    free(s->v);
    free(s->best);
    free(s->c1);
    free(s->c2);
    free(s->a1);
    free(s->a2);
    s->params = s->m = s->v = s->best = s->a1 = s->a2 = NULL;
    s->c1 = s->c2 = NULL;
}
