/* quant_mix — llama.cpp's per-tensor type rules and the Q4_1/Q5_1
 * reference quantizers (see quant_mix.h). */
#include "export/quant_mix.h"

#include <float.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "kern/kern.h"

/* LlamaFileType values (docs/reference/formats.md §4.2). */
static const export_mix MIXES[] = {
    {"Q4_K_M", 15, DT_Q4_K, 1},
    {"Q5_K_M", 17, DT_Q5_K, 1},
    {"Q6_K", 18, DT_Q6_K, 1},
    {"Q8_0", 7, DT_Q8_0, 1},
    {"Q4_0", 2, DT_Q4_0, 1},
    {"F16", 1, DT_F16, 0},
    {"BF16", 32, DT_BF16, 0},
    {"F32", 0, DT_F32, 0},
};
#define N_MIXES (sizeof MIXES / sizeof MIXES[0])

size_t export_mix_count(void) { return N_MIXES; }
const export_mix *export_mix_at(size_t i) { return i < N_MIXES ? &MIXES[i] : NULL; }

const export_mix *export_mix_find(const char *name)
{
    for (size_t i = 0; name && i < N_MIXES; i++)
        if (!strcasecmp(MIXES[i].name, name)) return &MIXES[i];
    return NULL;
}

int export_use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !memcmp(s + a - b, suf, b);
}

dtype export_tensor_type(const export_mix *m, export_qstate *s, const char *name, int64_t ne0, int n_dims)
{
    /* llama_model_quantize_impl: only 2-D+ tensors named "...weight" that
     * are not norms are quantized; everything else keeps F32. */
    if (n_dims < 2 || !ends_with(name, "weight") || strstr(name, "_norm.weight")) return DT_F32;
    /* "do not quantize expert gating tensors": mixtral's router stays F32 */
    if (strstr(name, "ffn_gate_inp.weight")) return DT_F32;
    dtype t = m->def;
    if (!m->k_mix) return t; /* F32/F16/BF16: no per-tensor rules */
    int is_q4km = m->ftype == 15, is_q5km = m->ftype == 17;
    if (!strcmp(name, "output.weight") || (!s->has_output && !strcmp(name, "token_embd.weight"))) {
        /* a tied model quantizes its embedding with the output's rule */
        if (ne0 % (int64_t)dtype_block_elems(t)) t = DT_Q8_0;
        else if (t != DT_Q8_0) t = DT_Q6_K;
    } else if (!strcmp(name, "token_embd.weight")) {
        /* default type */
    } else if (strstr(name, "attn_qkv.weight")) {
        /* phi3's fused q, k, v (llama-quant.cpp ATTENTION_QKV) */
        if (is_q4km) t = DT_Q5_K;
        else if (is_q5km) t = DT_Q6_K;
    } else if (strstr(name, "attn_v.weight")) {
        if ((is_q4km || is_q5km) && export_use_more_bits(s->i_attention_wv, s->n_attention_wv)) t = DT_Q6_K;
        s->i_attention_wv++;
    } else if (strstr(name, "ffn_down")) {
        if ((is_q4km || is_q5km) && export_use_more_bits(s->i_ffn_down, s->n_layer)) t = DT_Q6_K;
        s->i_ffn_down++;
    }
    if (ne0 % (int64_t)dtype_block_elems(t)) {
        /* llama.cpp's fallbacks for rows that do not fill a 256 block */
        switch (t) {
        case DT_Q4_K: t = DT_Q5_0; break;
        case DT_Q5_K: t = DT_Q5_1; break;
        case DT_Q6_K: t = DT_Q8_0; break;
        default: t = DT_F16; break; /* llama.cpp throws "Unsupported tensor size" */
        }
        if (ne0 % (int64_t)dtype_block_elems(t)) t = DT_F16;
        s->n_fallback++;
    }
    return t;
}

static int layer_of(const char *s)
{
    int l = -1;
    if (sscanf(s, "blk.%d.", &l) != 1) l = -1;
    return l;
}

int export_name_cmp(const char *a, const char *b)
{
    int la = layer_of(a), lb = layer_of(b);
    if (la != lb) return la < lb ? -1 : 1;
    return strcmp(a, b);
}

/* ---- Q4_1 / Q5_1 (ggml-quants.c quantize_row_q4_1_ref / _q5_1_ref) ----------
 * Per block of 32: min and max of the block, d = (max - min) / (2^bits - 1),
 * q = (x - min) / d rounded half up (truncation of + 0.5), stored with
 * fp16 d and fp16 min. Layouts (ggml-common.h):
 *   block_q4_1 { half d; half m; u8 qs[16]; }            20 bytes
 *   block_q5_1 { half d; half m; u8 qh[4]; u8 qs[16]; }  24 bytes
 * qs[j] = q[j] | q[j + 16] << 4; Q5_1's fifth bits go to qh (LE u32),
 * bit j for element j, bit j + 16 for element j + 16. */

static void put_h(uint8_t *p, float f)
{
    uint16_t h = f32_to_fp16(f);
    memcpy(p, &h, 2);
}

static void block_minmax(const float *x, float *mn, float *mx)
{
    float lo = FLT_MAX, hi = -FLT_MAX;
    for (int j = 0; j < 32; j++) {
        if (x[j] < lo) lo = x[j];
        if (x[j] > hi) hi = x[j];
    }
    *mn = lo;
    *mx = hi;
}

static void quant_q4_1(const float *x, uint8_t *y, int64_t n)
{
    for (int64_t i = 0; i < n / 32; i++, x += 32, y += 20) {
        float mn, mx;
        block_minmax(x, &mn, &mx);
        const float d = (mx - mn) / ((1 << 4) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        put_h(y, d);
        put_h(y + 2, mn);
        for (int j = 0; j < 16; j++) {
            const float x0 = (x[j] - mn) * id, x1 = (x[j + 16] - mn) * id;
            const int a = kern_trunc_i8(x0 + 0.5f), b = kern_trunc_i8(x1 + 0.5f);
            const uint8_t xi0 = (uint8_t)(a < 15 ? a : 15), xi1 = (uint8_t)(b < 15 ? b : 15);
            y[4 + j] = (uint8_t)(xi0 | xi1 << 4);
        }
    }
}

static void quant_q5_1(const float *x, uint8_t *y, int64_t n)
{
    for (int64_t i = 0; i < n / 32; i++, x += 32, y += 24) {
        float mn, mx;
        block_minmax(x, &mn, &mx);
        const float d = (mx - mn) / ((1 << 5) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        put_h(y, d);
        put_h(y + 2, mn);
        uint32_t qh = 0;
        for (int j = 0; j < 16; j++) {
            const float x0 = (x[j] - mn) * id, x1 = (x[j + 16] - mn) * id;
            /* ggml: (int8_t) then uint8_t; kern_trunc_i8 keeps NaN/Inf rows defined */
            const uint8_t xi0 = (uint8_t)kern_trunc_i8(x0 + 0.5f), xi1 = (uint8_t)kern_trunc_i8(x1 + 0.5f);
            y[8 + j] = (uint8_t)((xi0 & 0x0F) | (xi1 & 0x0F) << 4);
            qh |= (uint32_t)((xi0 & 0x10u) >> 4) << j;
            qh |= (uint32_t)((xi1 & 0x10u) >> 4) << (j + 16);
        }
        uint8_t q[4] = {(uint8_t)qh, (uint8_t)(qh >> 8), (uint8_t)(qh >> 16), (uint8_t)(qh >> 24)};
        memcpy(y + 4, q, 4);
    }
}

size_t export_quant_row(dtype t, const float *src, void *dst, int64_t n)
{
    if (t != DT_Q4_1 && t != DT_Q5_1) return kern_quant_row(t, src, dst, n);
    size_t bytes = dtype_row_bytes(t, n);
    if (!bytes) return 0;
    if (t == DT_Q4_1) quant_q4_1(src, dst, n);
    else quant_q5_1(src, dst, n);
    return bytes;
}

size_t export_quant_row_w(dtype t, const float *src, void *dst, int64_t n, const float *qw)
{
    return qw ? kern_quant_row_w(t, src, dst, n, qw) : export_quant_row(t, src, dst, n);
}
