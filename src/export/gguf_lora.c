/* gguf_lora — the adapter as a llama.cpp LoRA GGUF (docs/reference/formats.md §5.1).
 *
 * llama.cpp computes y = W·x + (alpha / rank)·B·(A·x) with rank = B.ne[0],
 * the same scale dlm trains with, so A and B go out as they are in F32
 * (PEFT's [r, in] and [out, r] row-major are exactly ggml's ne [in, r] and
 * [r, out]). For the llama arch the rows of lora_b of q and k are permuted
 * like the base's q/k rows, lora_a is not (§5.1). */
#include "export/export_gguf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weights/gguf.h"

typedef struct ad_t {
    char name[64];
    const float *data;      /* [rows, cols] row-major */
    int64_t rows, cols;
    int perm_hs;            /* rows permuted (lora_b of llama q/k) */
} ad_t;

static int ad_cmp(const void *a, const void *b) { return export_name_cmp(((const ad_t *)a)->name, ((const ad_t *)b)->name); }

static int fill_b(void *ctx, int index, void *dst, size_t nbytes, dlm_err *e)
{
    const ad_t *x = &((const ad_t *)ctx)[index];
    if (nbytes != (size_t)(x->rows * x->cols) * 4) return err_set(e, "ExportError", "tensor '%s': size mismatch", x->name);
    float *out = dst;
    for (int64_t r = 0; r < x->rows; r++)
        memcpy(out + r * x->cols, x->data + gguf_qk_hf_row(r, x->perm_hs) * x->cols, (size_t)x->cols * 4);
    return 0;
}

int export_write_adapter(const model *m, const lora *l, const char *name, const char *path, dlm_err *e)
{
    if (l->cfg.dora) {
        err_set(e, "ExportError", "a DoRA adapter cannot be exported as a separate llama.cpp adapter "
                                  "(llama.cpp has no magnitude vectors)");
        return err_hint(e, "export it merged: dlm export PATH --merged");
    }
    if (l->n_layer != m->cfg.n_layer)
        return err_set(e, "ExportError", "the adapter has %d layers, the base %d", l->n_layer, m->cfg.n_layer);
    int n = 0, cap = 2 * l->n_layer * LM_COUNT;
    ad_t *t = calloc((size_t)(cap ? cap : 1), sizeof *t);
    if (!t) return err_set(e, "MemoryError", "out of memory");
    int llama = model_arch_permutes_qk(m->cfg.arch);
    for (int il = 0; il < l->n_layer; il++)
        for (int mm = 0; mm < LM_COUNT; mm++) {
            const lora_mod *md = lora_mod_at(l, il, mm);
            if (!md) continue;
            char base[64];
            model_proj_name_for(&m->cfg, mm, il, 1, base, sizeof base);   /* phi3: attn_qkv, the fused ffn_up */
            ad_t *a = &t[n++], *b = &t[n++];
            snprintf(a->name, sizeof a->name, "%s.lora_a", base);
            a->data = l->w + md->off_a;
            a->rows = l->cfg.rank;
            a->cols = md->in;
            snprintf(b->name, sizeof b->name, "%s.lora_b", base);
            b->data = l->w + md->off_b;
            b->rows = md->out;
            b->cols = l->cfg.rank;
            b->perm_hs = llama && (mm == LM_Q || mm == LM_K) ? m->cfg.head_dim : 0;
        }
    qsort(t, (size_t)n, sizeof *t, ad_cmp);
    gguf_w *w = gguf_w_new();
    if (!w) { free(t); return err_set(e, "MemoryError", "out of memory"); }
    gguf_w_str(w, "general.architecture", model_arch_name(m->cfg.arch));
    gguf_w_str(w, "general.type", "adapter");
    gguf_w_str(w, "general.name", name && *name ? name : "dlm adapter");
    gguf_w_u32(w, "general.file_type", 0);
    gguf_w_u32(w, "general.quantization_version", 2);
    gguf_w_str(w, "adapter.type", "lora");
    gguf_w_f32(w, "adapter.lora.alpha", l->cfg.alpha);
    for (int i = 0; i < n; i++) {
        int64_t ne[2] = {t[i].cols, t[i].rows};
        if (t[i].perm_hs) gguf_w_tensor(w, t[i].name, DT_F32, 2, ne, NULL, fill_b, t);
        else gguf_w_tensor(w, t[i].name, DT_F32, 2, ne, t[i].data, NULL, NULL);
    }
    int rc = gguf_w_write(w, path, e);
    gguf_w_free(w);
    free(t);
    return rc;
}
