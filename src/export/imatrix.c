/* imatrix — llama.cpp's importance matrix, computed through dlm's decoder
 * and stored in llama.cpp's GGUF imatrix format (see imatrix.h; the
 * collector is tools/imatrix/imatrix.cpp IMatrixCollector::collect_imatrix,
 * the file save_imatrix, the importance tools/quantize load_imatrix). */
#include "export/imatrix.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decoder/decoder.h"
#include "weights/gguf.h"
#include "util/progress.h"

typedef struct im_entry {
    char name[GGUF_MAX_NAME];
    int64_t ncols, nmat;
    double *sum;                /* [nmat·ncols] while collecting */
    double *cnt;                /* [nmat] */
    float *in_sum2, *counts;    /* as stored in the file */
    float *qw;                  /* in_sum2 / counts, the quantizer's weights */
} im_entry;

struct imatrix {
    im_entry *e;
    int n, cap;
    int chunks, chunk_size;
    char dataset[256];
    int *slot;                  /* collecting: [L·(LM_COUNT+1)] entry of (layer, module), -1 none */
    const model *m;
    int failed;                 /* out of memory in the observer */
};

void imatrix_free(imatrix *im)
{
    if (!im) return;
    for (int i = 0; i < im->n; i++) {
        free(im->e[i].sum);
        free(im->e[i].cnt);
        free(im->e[i].in_sum2);
        free(im->e[i].counts);
        free(im->e[i].qw);
    }
    free(im->e);
    free(im->slot);
    free(im);
}

static im_entry *add_entry(imatrix *im, const char *name, int64_t ncols, int64_t nmat)
{
    if (im->n == im->cap) {
        int cap = im->cap ? im->cap * 2 : 64;
        im_entry *ne = realloc(im->e, (size_t)cap * sizeof *ne);
        if (!ne) return NULL;
        im->e = ne;
        im->cap = cap;
    }
    im_entry *x = &im->e[im->n];
    memset(x, 0, sizeof *x);
    snprintf(x->name, sizeof x->name, "%s", name);
    x->ncols = ncols;
    x->nmat = nmat;
    im->n++;
    return x;
}

/* ---- collecting ---------------------------------------------------------------------------- */

static im_entry *entry_for(imatrix *im, int layer, int module, int64_t ncols)
{
    int *s = &im->slot[layer * (LM_COUNT + 1) + module];
    if (*s >= 0) return &im->e[*s];
    const model_config *c = &im->m->cfg;
    int experts = c->n_expert > 0 && module != DECODER_OBS_ROUTER && module >= LM_GATE;
    char nm[GGUF_MAX_NAME];
    static const char *const MOE[3] = {"gate", "up", "down"};
    if (module == DECODER_OBS_ROUTER) snprintf(nm, sizeof nm, "blk.%d.ffn_gate_inp.weight", layer);
    else if (experts) snprintf(nm, sizeof nm, "blk.%d.ffn_%s_exps.weight", layer, MOE[module - LM_GATE]);
    /* phi3's fused products are one weight each: attn_qkv, and ffn_up (gate
     * rows then up rows), as llama.cpp stores them */
    else if (!model_proj_name_for(c, module, layer, 1, nm, sizeof nm)) return NULL;
    int64_t nmat = experts ? c->n_expert : 1;
    im_entry *x = add_entry(im, nm, ncols, nmat);
    if (!x) return NULL;
    x->sum = calloc((size_t)(nmat * ncols), sizeof *x->sum);
    x->cnt = calloc((size_t)nmat, sizeof *x->cnt);
    if (!x->sum || !x->cnt) return NULL;
    *s = im->n - 1;
    return x;
}

/* collect_imatrix: acc[j] += x[j]² per row, the row count per matrix
 * (dense: one; MUL_MAT_ID: the rows routed to each expert). Summed in
 * double, in pass order (one thread), so the result does not depend on the
 * thread count. */
static void observe(void *user, int layer, int module, int expert, const float *x, int n_rows, int n_cols)
{
    imatrix *im = user;
    if (im->failed) return;
    im_entry *en = entry_for(im, layer, module, n_cols);
    if (!en || en->ncols != n_cols) {
        im->failed = 1;
        return;
    }
    int mat = expert >= 0 ? expert : 0;
    double *acc = en->sum + (size_t)mat * (size_t)n_cols;
    for (int r = 0; r < n_rows; r++) {
        const float *xr = x + (size_t)r * (size_t)n_cols;
        for (int j = 0; j < n_cols; j++) acc[j] += (double)xr[j] * xr[j];
    }
    en->cnt[mat] += n_rows;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(((const im_entry *)a)->name, ((const im_entry *)b)->name);
}

/* The stored floats and the quantizer's weights from them: tools/quantize
 * divides the file's in_sum2 by its counts (rounded to an integer, then as
 * float); a count of 0 gives 1. */
static int finish_entry(im_entry *x)
{
    size_t nv = (size_t)(x->ncols * x->nmat);
    x->qw = malloc(nv * sizeof *x->qw);
    if (!x->qw) return -1;
    for (int64_t k = 0; k < x->nmat; k++) {
        float c = (float)llroundf(x->counts[k]);
        for (int64_t j = 0; j < x->ncols; j++) {
            size_t i = (size_t)(k * x->ncols + j);
            x->qw[i] = c > 0.0f ? x->in_sum2[i] / c : 1.0f;
        }
    }
    return 0;
}

static int isfinite_all(const im_entry *x)
{
    for (int64_t i = 0; i < x->ncols * x->nmat; i++)
        if (!isfinite(x->in_sum2[i]) || !isfinite(x->qw[i])) return 0;
    for (int64_t k = 0; k < x->nmat; k++)
        if (!isfinite(x->counts[k]) || x->counts[k] < 0) return 0;
    return 1;
}

int imatrix_collect(const model *m, const lora *l, const int32_t *tokens, size_t n, const imatrix_opts *o,
                    imatrix **out, dlm_err *e)
{
    *out = NULL;
    int cs = o->chunk_size > 0 ? o->chunk_size : IMATRIX_CHUNK_SIZE;
    int maxc = o->max_chunks > 0 ? o->max_chunks : IMATRIX_CHUNKS;
    if (!n) return err_set(e, "ImatrixError", "no calibration tokens");
    size_t nch = n / (size_t)cs;
    if (!nch) {   /* shorter than one chunk: one chunk of what there is */
        cs = (int)n;
        nch = 1;
    }
    if (nch > (size_t)maxc) nch = (size_t)maxc;
    imatrix *im = calloc(1, sizeof *im);
    if (!im) return err_set(e, "MemoryError", "out of memory");
    im->m = m;
    im->chunk_size = cs;
    im->chunks = (int)nch;
    snprintf(im->dataset, sizeof im->dataset, "%s", o->dataset ? o->dataset : "");
    size_t ns = (size_t)m->cfg.n_layer * (LM_COUNT + 1);
    im->slot = malloc(ns * sizeof *im->slot);
    float *logits = malloc((size_t)m->cfg.vocab * sizeof *logits);
    int32_t *buf = malloc((size_t)cs * sizeof *buf);
    if (!im->slot || !logits || !buf) {
        free(logits);
        free(buf);
        imatrix_free(im);
        return err_set(e, "MemoryError", "out of memory");
    }
    for (size_t i = 0; i < ns; i++) im->slot[i] = -1;
    decoder_opts dop = {.B = 1, .T = cs, .n_ctx = cs};
    decoder *d;
    if (decoder_create(m, l, &dop, &d, e)) {
        free(logits);
        free(buf);
        imatrix_free(im);
        return -1;
    }
    decoder_set_observer(d, observe, im);
    progress pg;
    progress_begin_count(&pg, "importance matrix", (uint64_t)nch, "chunks");
    for (size_t c = 0; c < nch && !im->failed; c++) {
        memcpy(buf, tokens + c * (size_t)cs, (size_t)cs * sizeof *buf);
        if (o->bos >= 0) buf[0] = o->bos;
        decoder_eval(d, buf, cs, 0, logits, 0);
        progress_update(&pg, (uint64_t)c + 1);
    }
    if (im->failed) progress_abort(&pg);
    else progress_end(&pg);
    decoder_free(d);
    free(logits);
    free(buf);
    if (im->failed) {
        imatrix_free(im);
        return err_set(e, "MemoryError", "out of memory accumulating the importance matrix");
    }
    if (im->n) qsort(im->e, (size_t)im->n, sizeof *im->e, name_cmp);
    for (int i = 0; i < im->n; i++) {
        im_entry *x = &im->e[i];
        size_t nv = (size_t)(x->ncols * x->nmat);
        x->in_sum2 = malloc(nv * sizeof *x->in_sum2);
        x->counts = malloc((size_t)x->nmat * sizeof *x->counts);
        if (!x->in_sum2 || !x->counts) {
            imatrix_free(im);
            return err_set(e, "MemoryError", "out of memory");
        }
        for (size_t j = 0; j < nv; j++) x->in_sum2[j] = (float)x->sum[j];
        for (int64_t k = 0; k < x->nmat; k++) x->counts[k] = (float)x->cnt[k];
        free(x->sum);
        free(x->cnt);
        x->sum = x->cnt = NULL;
        if (finish_entry(x) || !isfinite_all(x)) {
            int nf = x->qw != NULL;
            imatrix_free(im);
            if (!nf) return err_set(e, "MemoryError", "out of memory");
            err_set(e, "ImatrixError", "non-finite activations feeding a weight");
            return err_hint(e, "the base (or the merged adapter) produces inf/NaN on the calibration text; export with --no-imatrix");
        }
    }
    *out = im;
    return 0;
}

/* ---- the file ------------------------------------------------------------------------------ */

int imatrix_write(const imatrix *im, const char *path, dlm_err *e)
{
    gguf_w *w = gguf_w_new();
    if (!w) return err_set(e, "MemoryError", "out of memory");
    gguf_w_str(w, "general.type", "imatrix");
    const char *ds[1] = {im->dataset};
    gguf_w_arr_str(w, "imatrix.datasets", ds, NULL, im->dataset[0] ? 1 : 0);
    gguf_w_u32(w, "imatrix.chunk_count", (uint32_t)im->chunks);
    gguf_w_u32(w, "imatrix.chunk_size", (uint32_t)im->chunk_size);
    for (int i = 0; i < im->n; i++) {
        const im_entry *x = &im->e[i];
        char a[GGUF_MAX_NAME + 16], b[GGUF_MAX_NAME + 16];
        snprintf(a, sizeof a, "%s.in_sum2", x->name);
        snprintf(b, sizeof b, "%s.counts", x->name);
        int64_t ns[2] = {x->ncols, x->nmat}, nc[2] = {1, x->nmat};
        if (strlen(a) >= GGUF_MAX_NAME || gguf_w_tensor(w, a, DT_F32, 2, ns, x->in_sum2, NULL, NULL) < 0 ||
            gguf_w_tensor(w, b, DT_F32, 2, nc, x->counts, NULL, NULL) < 0) {
            gguf_w_free(w);
            return err_set(e, "ImatrixError", "cannot store the importance of '%s'", x->name);
        }
    }
    int rc = gguf_w_write(w, path, e);
    gguf_w_free(w);
    return rc;
}

static int ends_with(const char *s, const char *suf, size_t *stem)
{
    size_t a = strlen(s), b = strlen(suf);
    if (a <= b || memcmp(s + a - b, suf, b)) return 0;
    *stem = a - b;
    return 1;
}

static int from_gguf(gguf_file *g, imatrix **out, dlm_err *e)
{
    const char *label = gguf_path(g);
    int id = gguf_find_key(g, "general.type");
    const char *ty = NULL;
    size_t tl;
    if (id < 0 || gguf_get_str(g, id, &ty, &tl, e) || strcmp(ty, "imatrix")) {
        err_set(e, "ImatrixError", "%s: not an imatrix file (general.type is not \"imatrix\")", label);
        return err_hint(e, "delete it; dlm export computes a new one");
    }
    imatrix *im = calloc(1, sizeof *im);
    if (!im) return err_set(e, "MemoryError", "out of memory");
    int64_t v;
    if ((id = gguf_find_key(g, "imatrix.chunk_count")) >= 0 && !gguf_get_int(g, id, &v, NULL) && v >= 0 && v < INT32_MAX)
        im->chunks = (int)v;
    if ((id = gguf_find_key(g, "imatrix.chunk_size")) >= 0 && !gguf_get_int(g, id, &v, NULL) && v >= 0 && v < INT32_MAX)
        im->chunk_size = (int)v;
    if ((id = gguf_find_key(g, "imatrix.datasets")) >= 0) {
        gguf_vtype et;
        uint64_t cnt;
        size_t len;
        const char *s0;
        if (!gguf_arr_info(g, id, &et, &cnt, NULL) && et == GGUF_STR && cnt > 0 && (s0 = gguf_arr_str(g, id, 0, &len)))
            snprintf(im->dataset, sizeof im->dataset, "%.*s", (int)(len < 255 ? len : 255), s0);
    }
    int nt = gguf_tensor_count(g);
    for (int i = 0; i < nt; i++) {
        const gguf_tensor *t = gguf_tensor_at(g, i);
        size_t stem;
        if (!ends_with(t->name, ".in_sum2", &stem)) {
            if (ends_with(t->name, ".counts", &stem)) {
                char nm[GGUF_MAX_NAME + 16];
                snprintf(nm, sizeof nm, "%.*s.in_sum2", (int)stem, t->name);
                if (!gguf_find_tensor(g, nm)) {
                    err_set(e, "ImatrixError", "%s: '%s' has no matching .in_sum2", label, t->name);
                    goto bad;
                }
            }
            continue;
        }
        char nm[GGUF_MAX_NAME + 16];
        snprintf(nm, sizeof nm, "%.*s.counts", (int)stem, t->name);
        const gguf_tensor *c = gguf_find_tensor(g, nm);
        if (!c) {
            err_set(e, "ImatrixError", "%s: '%s' has no matching .counts", label, t->name);
            goto bad;
        }
        if (t->type != DT_F32 || c->type != DT_F32) {
            err_set(e, "ImatrixError", "%s: sums and counts of '%.*s' must be F32", label, (int)stem, t->name);
            goto bad;
        }
        int64_t ncols = t->ne[0], nmat = t->ne[1] * t->ne[2] * t->ne[3];
        int64_t ncnt = c->ne[0] * c->ne[1] * c->ne[2] * c->ne[3];
        if (ncols < 1 || nmat < 1 || ncnt != nmat || nmat > (1 << 16) || ncols > (int64_t)1 << 24) {
            err_set(e, "ImatrixError", "%s: '%.*s': %lld counts for %lld matrices", label, (int)stem, t->name,
                    (long long)ncnt, (long long)nmat);
            goto bad;
        }
        char base[GGUF_MAX_NAME];
        snprintf(base, sizeof base, "%.*s", (int)stem, t->name);
        im_entry *x = add_entry(im, base, ncols, nmat);
        if (!x) goto oom;
        size_t nv = (size_t)(ncols * nmat);
        x->in_sum2 = malloc(nv * sizeof *x->in_sum2);
        x->counts = malloc((size_t)nmat * sizeof *x->counts);
        if (!x->in_sum2 || !x->counts) goto oom;
        memcpy(x->in_sum2, t->data, nv * sizeof(float));
        memcpy(x->counts, c->data, (size_t)nmat * sizeof(float));
        for (int64_t k = 0; k < nmat; k++)
            if (!(x->counts[k] >= 0.0f && x->counts[k] < 9e18f)) {
                err_set(e, "ImatrixError", "%s: '%s' has a bad count", label, base);
                goto bad;
            }
        if (finish_entry(x)) goto oom;
        if (!isfinite_all(x)) {
            err_set(e, "ImatrixError", "%s: '%s' holds non-finite values", label, base);
            goto bad;
        }
    }
    if (im->n) qsort(im->e, (size_t)im->n, sizeof *im->e, name_cmp);
    *out = im;
    return 0;
oom:
    err_set(e, "MemoryError", "out of memory");
bad:
    imatrix_free(im);
    return -1;
}

int imatrix_parse(const void *buf, size_t len, const char *label, imatrix **out, dlm_err *e)
{
    *out = NULL;
    gguf_file *g;
    if (gguf_parse_buffer(buf, len, label, &g, e)) return -1;
    int rc = from_gguf(g, out, e);
    gguf_close(g);
    return rc;
}

int imatrix_read(const char *path, imatrix **out, dlm_err *e)
{
    *out = NULL;
    gguf_file *g;
    if (gguf_open(path, &g, e)) return -1;
    int rc = from_gguf(g, out, e);
    gguf_close(g);
    return rc;
}

int imatrix_count(const imatrix *im) { return im->n; }
const char *imatrix_name(const imatrix *im, int i) { return i >= 0 && i < im->n ? im->e[i].name : NULL; }
int imatrix_chunks(const imatrix *im) { return im->chunks; }
int imatrix_chunk_size(const imatrix *im) { return im->chunk_size; }
const char *imatrix_dataset(const imatrix *im) { return im->dataset; }

static const im_entry *find(const imatrix *im, const char *name)
{
    int lo = 0, hi = im ? im->n - 1 : -1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2, c = strcmp(im->e[mid].name, name);
        if (!c) return &im->e[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return NULL;
}

const float *imatrix_weights(const imatrix *im, const char *name, int64_t ncols, int64_t nmat)
{
    const im_entry *x = find(im, name);
    return x && x->ncols == ncols && x->nmat == nmat ? x->qw : NULL;
}

int imatrix_shape(const imatrix *im, const char *name, int64_t *ncols, int64_t *nmat)
{
    const im_entry *x = find(im, name);
    if (!x) return -1;
    *ncols = x->ncols;
    *nmat = x->nmat;
    return 0;
}

int imatrix_entry(const imatrix *im, int i, int64_t *ncols, int64_t *nmat, const float **in_sum2,
                  const float **counts)
{
    if (i < 0 || i >= im->n) return -1;
    *ncols = im->e[i].ncols;
    *nmat = im->e[i].nmat;
    *in_sum2 = im->e[i].in_sum2;
    *counts = im->e[i].counts;
    return 0;
}
