/* q8 — block-wise dynamic 8-bit quantization and the 8-bit AdamW step of
 * Dettmers et al., "8-bit Optimizers via Block-wise Quantization"
 * (arXiv 2110.02861; bitsandbytes' Adam8bit with blockwise state). See
 * kern.h for the equations; kern_ref.c holds the plain-loop twins. */
#include "kern/kern_impl.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>

/* ---- the dynamic (tree) map -------------------------------------------------
 * The paper's dynamic (tree) quantization and bitsandbytes'
 * functional.create_dynamic_map(signed, max_exponent_bits=7, total_bits=8):
 * for exponent i = 0..6 the fraction bits cover the linear grid of
 * linspace(0.1, 1, F_i) and each code is the midpoint of two neighbours,
 * scaled by 10^(i−6); F_i = 2^i + 1 boundaries for the signed map (each
 * value also negated), 2^(i+1) + 1 for the unsigned one (the sign bit
 * becomes one more fraction bit). 0 and 1.0 complete the 256 values, sorted
 * ascending. The values here are the midpoints computed in double and
 * rounded once to f32; bitsandbytes builds them in f32 arithmetic
 * (torch.linspace), and about 90 of its 256 entries differ from these by
 * one or two ulps (tests/ref/adamw8/adamw8_ref.py checks both statements). */
static const double POW10[7] = {1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1e0};

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

static void build_map(float *map, int is_signed)
{
    int k = 0;
    for (int i = 0; i < 7; i++) {
        int steps = (is_signed ? 1 << i : 1 << (i + 1));   /* intervals: F_i − 1 */
        for (int j = 0; j < steps; j++) {
            double lo = 0.1 + 0.9 * (double)j / (double)steps;
            double hi = 0.1 + 0.9 * (double)(j + 1) / (double)steps;
            double mid = (lo + hi) / 2.0 * POW10[i];
            map[k++] = (float)mid;
            if (is_signed) map[k++] = (float)-mid;
        }
    }
    map[k++] = 0.0f;
    map[k++] = 1.0f;
    qsort(map, (size_t)k, sizeof(float), cmp_float);
}

static float g_map[2][256];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static void maps_init(void)
{
    build_map(g_map[0], 0);
    build_map(g_map[1], 1);
}

const float *kern_q8_map(int is_signed)
{
    pthread_once(&g_once, maps_init);
    return g_map[is_signed ? 1 : 0];
}

uint8_t kern_q8_zero_code(int is_signed) { return is_signed ? 127 : 0; }

/* The nearest code: the paper's T^Q = argmin_j |Q_j − T/N| (bitsandbytes'
 * kernel finds it by binary search over the sorted map, as here); an exact
 * tie goes to the lower code. The distances
 * are taken in double, where the difference of two floats of similar
 * magnitude is exact. First moment only: a negative value never lands on
 * the code 0 (bitsandbytes' kernel keeps the sign of state1 through
 * quantization: it moves such a code one step down). */
uint8_t kern_q8_encode(const float *map, int is_signed, float x)
{
    if (!(x > map[0])) return 0;              /* also NaN */
    if (x >= map[255]) return 255;
    /* the last code <= x, in 8 fixed steps without a data-dependent branch
     * (the compiler makes each a conditional move): map[lo] <= x < map[lo + 1] */
    int lo = 0;
    for (int step = 128; step > 0; step >>= 1) lo += map[lo + step] <= x ? step : 0;
    int hi = lo + 1;
    int c = ((double)map[hi] - (double)x < (double)x - (double)map[lo]) ? hi : lo;
    if (is_signed && x < 0.0f && map[c] >= 0.0f) c--;
    return (uint8_t)c;
}

/* ---- block quantization -------------------------------------------------------- */

static void quant_block(uint8_t *codes, float *absmax, const float *x, int64_t n, int is_signed, const float *map)
{
    float a = 0.0f;
    for (int64_t i = 0; i < n; i++) a = fmaxf(a, fabsf(x[i]));
    *absmax = a;
    for (int64_t i = 0; i < n; i++)
        codes[i] = a > 0.0f ? kern_q8_encode(map, is_signed, x[i] / a) : kern_q8_zero_code(is_signed);
}

void kern_q8_quantize(uint8_t *codes, float *absmax, const float *x, int64_t n, int is_signed)
{
    const float *map = kern_q8_map(is_signed);
    for (int64_t b = 0; b * KERN_Q8_BLOCK < n; b++) {
        int64_t o = b * KERN_Q8_BLOCK, len = n - o < KERN_Q8_BLOCK ? n - o : KERN_Q8_BLOCK;
        quant_block(codes + o, absmax + b, x + o, len, is_signed, map);
    }
}

void kern_q8_dequantize(float *x, const uint8_t *codes, const float *absmax, int64_t n, int is_signed)
{
    const float *map = kern_q8_map(is_signed);
    for (int64_t i = 0; i < n; i++) x[i] = map[codes[i]] * absmax[i / KERN_Q8_BLOCK];
}

/* ---- the 8-bit AdamW step ------------------------------------------------------- */

void kern_adamw_bnb_scalars(kern_adamw_bnb *s, double lr, double b1, double b2, double eps, double wd, int64_t t)
{
    if (t < 1) t = 1;
    double c1 = 1.0 - pow(b1, (double)t), c2 = sqrt(1.0 - pow(b2, (double)t));
    s->b1 = (float)b1;
    s->omb1 = (float)(1.0 - b1);
    s->b2 = (float)b2;
    s->omb2 = (float)(1.0 - b2);
    s->step_size = (float)(-lr * c2 / c1);
    s->eps_c2 = (float)(eps * c2);
    s->decay = wd > 0 ? (float)(1.0 - lr * wd) : 1.0f;
}

typedef struct q8_job {
    float *p;
    const float *g;
    uint8_t *c1, *c2;
    float *a1, *a2;
    int64_t n;
    kern_adamw_bnb s;
    const float *map1, *map2;
} q8_job;

/* One block: dequantize, update the moments in f32, take the new absmax,
 * update p with the f32 moments, requantize. s1/s2 live in the thread's
 * scratch (2 · 2048 floats). */
static void q8_block(const q8_job *j, int64_t b, float *s1, float *s2)
{
    int64_t o = b * KERN_Q8_BLOCK, len = j->n - o < KERN_Q8_BLOCK ? j->n - o : KERN_Q8_BLOCK;
    const kern_adamw_bnb *s = &j->s;
    float am1 = j->a1[b], am2 = j->a2[b], n1 = 0.0f, n2 = 0.0f;
    for (int64_t i = 0; i < len; i++) {
        float g = j->g[o + i];
        float m = j->map1[j->c1[o + i]] * am1;
        float v = j->map2[j->c2[o + i]] * am2;
        m = m * s->b1 + s->omb1 * g;
        v = v * s->b2 + s->omb2 * g * g;
        s1[i] = m;
        s2[i] = v;
        n1 = fmaxf(n1, fabsf(m));
        n2 = fmaxf(n2, fabsf(v));
    }
    for (int64_t i = 0; i < len; i++) {
        float p = j->p[o + i] + s->step_size * (s1[i] / (sqrtf(s2[i]) + s->eps_c2));
        j->p[o + i] = p * s->decay;
    }
    j->a1[b] = n1;
    j->a2[b] = n2;
    for (int64_t i = 0; i < len; i++) {
        j->c1[o + i] = n1 > 0.0f ? kern_q8_encode(j->map1, 1, s1[i] / n1) : kern_q8_zero_code(1);
        j->c2[o + i] = n2 > 0.0f ? kern_q8_encode(j->map2, 0, s2[i] / n2) : kern_q8_zero_code(0);
    }
}

static void q8_range(void *ctx, int64_t b, int64_t e)
{
    const q8_job *j = ctx;
    float *s1 = kern_scratch(), *s2 = s1 + KERN_Q8_BLOCK;
    for (int64_t k = b; k < e; k++) q8_block(j, k, s1, s2);
}

void kern_adamw8(float *p, const float *g, uint8_t *c1, uint8_t *c2, float *absmax1, float *absmax2, int64_t n,
                 const kern_adamw_bnb *s)
{
    if (n <= 0) return;
    kern_ensure_init();
    q8_job j = {.p = p, .g = g, .c1 = c1, .c2 = c2, .a1 = absmax1, .a2 = absmax2, .n = n, .s = *s,
                .map1 = kern_q8_map(1), .map2 = kern_q8_map(0)};
    int64_t nb = (n + KERN_Q8_BLOCK - 1) / KERN_Q8_BLOCK;
    /* blocks are independent: any split over them gives the same bytes */
    if (nb < 2) q8_range(&j, 0, nb);
    else kern_parallel_for(nb, q8_range, &j);
}

typedef struct f32_job {
    float *p, *m, *v;
    const float *g;
    kern_adamw_bnb s;
} f32_job;

static void f32_range(void *ctx, int64_t b, int64_t e)
{
    const f32_job *j = ctx;
    const kern_adamw_bnb *s = &j->s;
    for (int64_t i = b; i < e; i++) {
        float g = j->g[i];
        float m = j->m[i] * s->b1 + s->omb1 * g;
        float v = j->v[i] * s->b2 + s->omb2 * g * g;
        float p = j->p[i] + s->step_size * (m / (sqrtf(v) + s->eps_c2));
        j->p[i] = p * s->decay;
        j->m[i] = m;
        j->v[i] = v;
    }
}

void kern_adamw32_bnb(float *p, const float *g, float *m, float *v, int64_t n, const kern_adamw_bnb *s)
{
    f32_job j = {.p = p, .m = m, .v = v, .g = g, .s = *s};
    if (n < 16384) f32_range(&j, 0, n);
    else kern_parallel_for(n, f32_range, &j);
}
