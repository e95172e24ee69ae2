/* quantize — store a loaded model's projections in a quantized type, in
 * memory: `adapter: qlora` on an F16/BF16/F32 base (or as BF16 for
 * training.precision: bf16, model_bf16_projections). The adapter then trains
 * on 4-bit weights (dequantized tile by tile in the matmuls), the way QLoRA
 * fits 7B and 14B bases in little memory. Rows whose width does not suit the
 * type fall back as llama.cpp's quantizer does (Q4_K→Q5_0, Q5_K→Q5_0,
 * Q6_K→Q8_0; not a multiple of 32 → left as is). */
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kern/kern.h"
#include "weights/model.h"
#include "weights/model_impl.h"

static dtype fallback(dtype t, int64_t cols)
{
    if (dtype_row_bytes(t, cols)) return t;
    dtype f = t == DT_Q6_K ? DT_Q8_0 : DT_Q5_0;
    return dtype_row_bytes(f, cols) ? f : (dtype)-1;
}

static void release_pages(const void *p, size_t n)
{
    uintptr_t a = (uintptr_t)p, pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t b = (a + pg - 1) & ~(pg - 1), e = (a + n) & ~(pg - 1);
    if (e > b) madvise((void *)b, e - b, MADV_DONTNEED);
}

static int quantize_one(model *m, wmat *w, dtype target, float *row, dlm_err *e)
{
    if (dtype_is_quant(w->type) || !w->rows) return 0; /* already quantized: keep; mixtral's empty dense MLP */
    if (target == DT_BF16 && w->type != DT_F32 && w->type != DT_F16) return 0;   /* BF16 already */
    dtype t = fallback(target, w->cols);
    if ((int)t < 0) return 0;
    size_t rb = dtype_row_bytes(t, w->cols);
    unsigned char *q = model_alloc(m, rb * (size_t)w->rows, e);
    if (!q) return -1;
    for (int64_t r = 0; r < w->rows; r++) {
        kern_dequant_row(w->type, (const char *)w->data + (size_t)r * w->row_bytes, row, w->cols);
        kern_quant_row(t, row, q + (size_t)r * rb, w->cols);
    }
    /* The source is never read again through this wmat: give its pages back
     * (a private read-only file mapping simply re-reads them if something
     * else, e.g. an export, touches them later). Owned buffers are left. */
    release_pages(w->data, (size_t)w->rows * w->row_bytes);
    w->type = t;
    w->row_bytes = rb;
    w->data = q;
    return 0;
}

static int restore_all(model *m, dtype target, dlm_err *e);

int model_quantize_projections(model *m, dtype target, dlm_err *e)
{
    if (!dtype_is_quant(target)) return err_set(e, "QuantizeError", "%s is not a quantized type", dtype_name(target));
    return restore_all(m, target, e);
}

int model_bf16_projections(model *m, dlm_err *e) { return restore_all(m, DT_BF16, e); }

static int restore_all(model *m, dtype target, dlm_err *e)
{
    int64_t maxc = 0;
    for (int l = 0; l < m->cfg.n_layer; l++) {
        layer_weights *w = &m->layers[l];
        wmat *ws[] = {&w->wq, &w->wk, &w->wv, &w->wo, &w->w_gate, &w->w_up, &w->w_down};
        for (int j = 0; j < 7; j++) if (ws[j]->cols > maxc) maxc = ws[j]->cols;
        if (m->cfg.n_expert && w->exp_down[0].cols > maxc) maxc = w->exp_down[0].cols;
    }
    float *row = model_alloc(m, (size_t)maxc * sizeof(float), e);
    if (!row) return -1;
    for (int l = 0; l < m->cfg.n_layer; l++) {
        layer_weights *w = &m->layers[l];
        wmat *ws[] = {&w->wq, &w->wk, &w->wv, &w->wo, &w->w_gate, &w->w_up, &w->w_down};
        for (int j = 0; j < 7; j++)   /* phi3's fused model has no wk, wv, w_up of their own */
            if (ws[j]->data && quantize_one(m, ws[j], target, row, e)) return -1;
        /* mixtral: every expert's three matrices (the router stays, as llama.cpp keeps ffn_gate_inp) */
        for (int x = 0; x < m->cfg.n_expert; x++)
            if (quantize_one(m, &w->exp_gate[x], target, row, e) || quantize_one(m, &w->exp_up[x], target, row, e) ||
                quantize_one(m, &w->exp_down[x], target, row, e))
                return -1;
    }
    return 0;
}
