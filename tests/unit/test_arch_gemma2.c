/* Gemma 2 pieces below the decoder (the whole model is checked against
 * PyTorch and llama.cpp in tests/ref/r0407): google/gemma-2-2b-it's
 * config.json and Gemma2Config's refusals; the GeGLU, the logit soft cap and
 * the soft-capped attention kernel (kern/attn_cap.c) against double-precision
 * formulas written here and their central differences; a decode step equals
 * the last row of the full causal pass. */
#include "check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kern/kern.h"
#include "weights/model.h"

static dlm_err E;

/* google/gemma-2-2b-it config.json at the registry's pinned commit */
static const char GEMMA2_2B[] =
    "{\"architectures\": [\"Gemma2ForCausalLM\"], \"attention_bias\": false, \"attention_dropout\": 0.0,"
    " \"attn_logit_softcapping\": 50.0, \"bos_token_id\": 2, \"cache_implementation\": \"hybrid\","
    " \"eos_token_id\": [1, 107], \"final_logit_softcapping\": 30.0, \"head_dim\": 256,"
    " \"hidden_act\": \"gelu_pytorch_tanh\", \"hidden_activation\": \"gelu_pytorch_tanh\", \"hidden_size\": 2304,"
    " \"initializer_range\": 0.02, \"intermediate_size\": 9216, \"max_position_embeddings\": 8192,"
    " \"model_type\": \"gemma2\", \"num_attention_heads\": 8, \"num_hidden_layers\": 26,"
    " \"num_key_value_heads\": 4, \"pad_token_id\": 0, \"query_pre_attn_scalar\": 256, \"rms_norm_eps\": 1e-06,"
    " \"rope_theta\": 10000.0, \"sliding_window\": 4096, \"torch_dtype\": \"float32\","
    " \"transformers_version\": \"4.42.4\", \"use_cache\": true, \"vocab_size\": 256000}";

#define SMALL "\"model_type\":\"gemma2\",\"num_hidden_layers\":2,\"intermediate_size\":128,\"vocab_size\":300," \
              "\"hidden_size\":64,\"num_attention_heads\":4,\"head_dim\":16"

static int parse(const char *txt, model_config *c)
{
    err_clear(&E);
    return model_config_parse(txt, strlen(txt), "config.json", c, &E);
}

static void refuse(const char *txt, const char *want)
{
    model_config c;
    CHECK_MSG(parse(txt, &c) == -1, "accepted: %s", txt);
    CHECK_MSG(strstr(E.msg, want) != NULL, "'%s' lacks '%s'", E.msg, want);
}

static void test_config(void)
{
    model_config c;
    CHECK_MSG(parse(GEMMA2_2B, &c) == 0, "%s", E.msg);
    CHECK_INT(c.arch, ARCH_GEMMA2);
    CHECK_INT(c.n_layer, 26);
    CHECK_INT(c.head_dim, 256);
    CHECK_INT(c.tied, 1);                   /* absent: Gemma2Config ties */
    CHECK(c.sandwich && c.post_norm && c.act_gelu && c.swa_even);
    CHECK_NEAR(c.embd_scale, 48.0, 1e-5);   /* √2304 */
    CHECK_NEAR(c.attn_scale, 1.0 / 16, 1e-9);
    CHECK_NEAR(c.attn_softcap, 50.0, 0);
    CHECK_NEAR(c.final_softcap, 30.0, 0);
    CHECK_INT(model_layer_window(&c, 0), 4096);
    CHECK_INT(model_layer_window(&c, 1), 0);
    CHECK_INT(model_layer_window(&c, 24), 4096);
    CHECK_INT(c.n_eos, 2);
    CHECK_INT(c.eos_ids[1], 107);
    CHECK_STR(model_arch_name(c.arch), "gemma2");
    CHECK(!model_arch_permutes_qk(c.arch));  /* llama.cpp runs gemma2 with NEOX RoPE */
    /* Gemma2Config's defaults; null switches a cap or the window off */
    CHECK_INT(parse("{" SMALL "}", &c), 0);
    CHECK_NEAR(c.attn_scale, 1.0 / 16, 1e-9);   /* query_pre_attn_scalar 256 */
    CHECK_INT(c.sliding_window, 4096);
    CHECK_INT(parse("{" SMALL ",\"attn_logit_softcapping\":null,\"final_logit_softcapping\":null,"
                    "\"sliding_window\":null,\"query_pre_attn_scalar\":24,\"tie_word_embeddings\":false}", &c), 0);
    CHECK(c.attn_softcap == 0 && c.final_softcap == 0 && c.sliding_window == 0 && !c.tied);
    CHECK_NEAR(c.attn_scale, 1.0 / sqrt(24.0), 1e-7);
    CHECK_INT(parse("{" SMALL ",\"layer_types\":[\"sliding_attention\",\"full_attention\"]}", &c), 0);
    /* the 27B's scale as llama.cpp derives it: 1/√(4608/32) */
    model_config g = {.n_layer = 46, .d_model = 4608, .n_head = 32, .head_dim = 128};
    model_config_gemma2(&g);
    CHECK_NEAR(g.attn_scale, 1.0 / 12, 1e-7);
    refuse("{" SMALL ",\"hidden_activation\":\"gelu\"}", "hidden_activation 'gelu'");
    refuse("{" SMALL ",\"attention_bias\":true}", "attention_bias=true");
    refuse("{" SMALL ",\"layer_types\":[\"full_attention\",\"full_attention\"]}", "layer_types");
    refuse("{" SMALL ",\"layer_types\":[\"sliding_attention\"]}", "one type per layer");
    refuse("{" SMALL ",\"query_pre_attn_scalar\":0}", "query_pre_attn_scalar");
    refuse("{" SMALL ",\"attn_logit_softcapping\":-1}", "soft-capping");
}

/* ---- kernels ------------------------------------------------------------------------------ */

static uint64_t rs = 0x9E3779B97F4A7C15ull;
static float rnd(void)
{
    rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17;
    return (float)((double)(rs >> 11) / 9007199254740992.0 * 2 - 1);
}

static double gelu_d(double x) { return 0.5 * x * (1 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }

static void test_geglu_softcap(void)
{
    enum { N = 9000 };   /* above the threaded split */
    float *g = malloc(N * 4), *u = malloc(N * 4), *h = malloc(N * 4), *dh = malloc(N * 4), *dg = malloc(N * 4),
          *du = malloc(N * 4);
    for (int i = 0; i < N; i++) { g[i] = 4 * rnd(); u[i] = rnd(); dh[i] = rnd(); }
    kern_geglu_fwd(h, g, u, N);
    kern_geglu_bwd(dg, du, dh, g, u, N);
    double ef = 0, eg = 0, eu = 0;
    for (int i = 0; i < N; i++) {
        double x = g[i], e = 1e-4;
        ef = fmax(ef, fabs(h[i] - gelu_d(x) * u[i]));
        eg = fmax(eg, fabs(dg[i] - dh[i] * u[i] * (gelu_d(x + e) - gelu_d(x - e)) / (2 * e)));
        eu = fmax(eu, fabs(du[i] - dh[i] * gelu_d(x)));
    }
    CHECK_MSG(ef < 1e-5 && eg < 1e-4 && eu < 1e-5, "geglu: fwd %.3g dg %.3g du %.3g", ef, eg, eu);
    /* soft cap: y = c·tanh(x/c), dy/dx = 1 − (y/c)² */
    for (int i = 0; i < N; i++) h[i] = 20 * rnd();
    memcpy(dg, h, N * 4);
    kern_softcap(h, N, 5.0f);
    for (int i = 0; i < N; i++) du[i] = 1.0f;
    kern_softcap_bwd(du, h, N, 5.0f);
    double ey = 0, ed = 0;
    for (int i = 0; i < N; i++) {
        double x = dg[i], e = 1e-4;
        ey = fmax(ey, fabs(h[i] - 5 * tanh(x / 5)));
        ed = fmax(ed, fabs(du[i] - (5 * tanh((x + e) / 5) - 5 * tanh((x - e) / 5)) / (2 * e)));
    }
    CHECK_MSG(ey < 1e-5 && ed < 1e-4, "softcap: fwd %.3g bwd %.3g", ey, ed);
    free(g); free(u); free(h); free(dh); free(dg); free(du);
}

/* Σ R·out of the capped attention in double (q [T,NH,HS], k, v [T,KVH,HS]). */
enum { T = 11, NH = 4, KVH = 2, HS = 8 };
typedef struct att_in { double q[T * NH * HS], k[T * KVH * HS], v[T * KVH * HS], R[T * NH * HS]; } att_in;

static double att_loss(const att_in *a, double scale, double cap, int win, float *out)
{
    double L = 0;
    for (int i = 0; i < T; i++)
        for (int h = 0; h < NH; h++) {
            int kh = h / (NH / KVH);
            double s[T], mx = -INFINITY, sum = 0;
            for (int j = 0; j <= i; j++) {
                s[j] = -INFINITY;
                if (win && i - j >= win) continue;
                double d = 0;
                for (int c = 0; c < HS; c++) d += a->q[(i * NH + h) * HS + c] * a->k[(j * KVH + kh) * HS + c];
                s[j] = cap * tanh(d * scale / cap);
                mx = fmax(mx, s[j]);
            }
            for (int j = 0; j <= i; j++) sum += s[j] == -INFINITY ? 0 : exp(s[j] - mx);
            for (int c = 0; c < HS; c++) {
                double o = 0;
                for (int j = 0; j <= i; j++)
                    if (s[j] != -INFINITY) o += exp(s[j] - mx) / sum * a->v[(j * KVH + kh) * HS + c];
                if (out) out[(i * NH + h) * HS + c] = (float)o;
                L += a->R[(i * NH + h) * HS + c] * o;
            }
        }
    return L;
}

static void fd(const char *label, att_in *a, double *x, int n, const float *got, double scale, double cap, int win)
{
    double worst = 0;
    for (int i = 0; i < n; i++) {
        double x0 = x[i], e = 1e-5;
        x[i] = x0 + e;
        double lp = att_loss(a, scale, cap, win, NULL);
        x[i] = x0 - e;
        double lm = att_loss(a, scale, cap, win, NULL);
        x[i] = x0;
        double want = (lp - lm) / (2 * e), err = fabs(got[i] - want) / (fabs(want) + 1e-3);
        if (err > worst) worst = err;
    }
    CHECK_MSG(worst < 1e-3, "%s: worst relative error %.3g", label, worst);
}

static void test_attn_cap(void)
{
    static att_in a;
    float q[T * NH * HS], k[T * KVH * HS], v[T * KVH * HS], R[T * NH * HS], out[T * NH * HS], want[T * NH * HS];
    float lse[NH * T], dq[T * NH * HS], dk[T * KVH * HS], dv[T * KVH * HS], dec[NH * HS];
    for (int i = 0; i < T * NH * HS; i++) { q[i] = 2 * rnd(); R[i] = rnd(); a.q[i] = q[i]; a.R[i] = R[i]; }
    for (int i = 0; i < T * KVH * HS; i++) { k[i] = 2 * rnd(); v[i] = rnd(); a.k[i] = k[i]; a.v[i] = v[i]; }
    const double scale = 1.0 / sqrt(24.0), cap = 1.5;
    for (int win = 0; win <= 4; win += 4) {
        attn_shape s = {.B = 1, .Tq = T, .Tk = T, .NH = NH, .KVH = KVH, .HS = HS, .kv_bstride = (int64_t)T * KVH * HS,
                        .window = win, .scale = (float)scale, .softcap = (float)cap};
        float *scr = calloc(kern_attn_bwd_scratch(&s) + 16, 4);
        kern_attn_fwd(out, lse, q, k, v, &s, scr);
        att_loss(&a, scale, cap, win, want);
        double e = 0;
        for (int i = 0; i < T * NH * HS; i++) e = fmax(e, fabs(out[i] - want[i]));
        CHECK_MSG(e < 1e-5, "capped attention (window %d): max abs err %.3g", win, e);
        /* a decode step: the last query over the cache = the last row */
        attn_shape sd = s;
        sd.Tq = 1;
        sd.q_off = T - 1;
        kern_attn_fwd(dec, NULL, q + (T - 1) * NH * HS, k, v, &sd, scr);
        CHECK_MSG(!memcmp(dec, out + (T - 1) * NH * HS, sizeof dec), "decode step != last row (window %d)", win);
        kern_attn_bwd(dq, dk, dv, R, out, lse, q, k, v, &s, scr);
        char l[64];
        snprintf(l, sizeof l, "capped attention dq (window %d)", win);
        fd(l, &a, a.q, T * NH * HS, dq, scale, cap, win);
        snprintf(l, sizeof l, "capped attention dk (window %d)", win);
        fd(l, &a, a.k, T * KVH * HS, dk, scale, cap, win);
        snprintf(l, sizeof l, "capped attention dv (window %d)", win);
        fd(l, &a, a.v, T * KVH * HS, dv, scale, cap, win);
        free(scr);
    }
}

int main(void)
{
    test_config();
    test_geglu_softcap();
    test_attn_cap();
    return check_done();
}
