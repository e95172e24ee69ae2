/* kv_pool: several sequences in one step give each the logits a lone
 * session gives (to rounding when prompts share a pass: the pool's rows go
 * through one GEMM, packed into passes differently from the session's); a copied or
 * truncated prefix continues as if the prefix had been evaluated in place
 * (what the server's prefix reuse relies on). A decode step of several
 * sequences (one new token each: the server's steady state) gives each
 * sequence exactly the bits a lone session's decode step gives it
 * (kern_matvec_n: the batch reads the weights once, each row computed as
 * kern_matvec computes it alone), also past kern_matmul's 4-row switch. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "decoder/kvpool.h"
#include "decoder/session.h"
#include "kern/kern.h"

int main(void)
{
    kern_init(1);
    dlm_err e;
    model *m;
    const char *path = DLM_SOURCE_DIR "/models/tiny.gguf";
    if (model_load(path, &m, &e)) {
        fprintf(stderr, "load %s: %s\n", path, e.msg);
        return 1;
    }
    int V = m->cfg.vocab;
    const int32_t A[10] = {1, 50, 300, 7, 99, 1200, 5, 42, 3000, 17};
    const int32_t B[7] = {4, 8, 15, 16, 23, 42, 108};
    float *ra = malloc((size_t)V * sizeof(float)), *rb = malloc((size_t)V * sizeof(float));
    float *lg = malloc((size_t)3 * V * sizeof(float));
    session *s;
    CHECK(session_create(m, NULL, 64, 16, &s, &e) == 0);
    CHECK(session_eval(s, A, 10, ra, 0, &e) == 0);
    session_reset(s);
    CHECK(session_eval(s, B, 7, rb, 0, &e) == 0);

    kv_pool *p;
    CHECK_MSG(kv_pool_create(m, NULL, 3, 64, 16, &p, &e) == 0, "%s", e.msg);
    CHECK_INT(kv_pool_n_seq(p), 3);
    /* two sequences in one step */
    int seq[2] = {0, 1}, nt[2] = {10, 7};
    const int32_t *tk[2] = {A, B};
    CHECK(kv_pool_eval(p, 2, seq, tk, nt, lg, &e) == 0);
    CHECK(check_tensor("seq 0 = session(A)", lg, ra, (size_t)V, 1e-5));
    CHECK(check_tensor("seq 1 = session(B)", lg + V, rb, (size_t)V, 1e-5));
    CHECK_INT(kv_pool_n_past(p, 0), 10);
    CHECK_INT(kv_pool_n_past(p, 1), 7);
    CHECK_INT(kv_pool_n_past(p, 2), 0);
    /* prefix reuse: slot 2 takes A's first 6 positions, then the rest */
    CHECK(kv_pool_copy(p, 2, 0, 6, &e) == 0);
    CHECK_INT(kv_pool_n_past(p, 2), 6);
    int s2 = 2, n4 = 4;
    const int32_t *rest = A + 6;
    CHECK(kv_pool_eval(p, 1, &s2, &rest, &n4, lg, &e) == 0);
    CHECK(check_tensor("copied prefix + rest = session(A)", lg, ra, (size_t)V, 1e-5));
    /* truncate: slot 1 keeps nothing, then A; slot 0 keeps 6, then the rest */
    kv_pool_truncate(p, 1, 0);
    CHECK_INT(kv_pool_n_past(p, 1), 0);
    kv_pool_truncate(p, 0, 6);
    CHECK_INT(kv_pool_n_past(p, 0), 6);
    int seq2[2] = {1, 0}, nt2[2] = {10, 4};
    const int32_t *tk2[2] = {A, A + 6};
    CHECK(kv_pool_eval(p, 2, seq2, tk2, nt2, lg, &e) == 0);
    CHECK(check_tensor("reset slot = session(A)", lg, ra, (size_t)V, 1e-5));
    CHECK(check_tensor("truncated prefix + rest = session(A)", lg + V, ra, (size_t)V, 1e-5));
    /* bad copies and overflow are errors, not corruption */
    CHECK(kv_pool_copy(p, 2, 1, 11, &e) == -1);
    CHECK(kv_pool_copy(p, 2, 5, 1, &e) == -1);
    int one = 1, big = 60;
    CHECK(kv_pool_eval(p, 1, &one, tk, &big, lg, &e) == -1);
    CHECK_INT(kv_pool_n_past(p, 1), 10);
    kv_pool_free(p);

    /* decode steps: 6 sequences, prompts fed one by one (as the session,
     * so the caches hold the same bits), then two steps of all six */
    enum { NS = 6 };
    float *want = malloc((size_t)NS * 2 * V * sizeof(float)), *got = malloc((size_t)NS * V * sizeof(float));
    int plen[NS];
    const int32_t *pr[NS];
    int32_t nx[NS][2];
    for (int k = 0; k < NS; k++) {
        pr[k] = k % 2 ? B + k / 2 : A + k;
        plen[k] = (k % 2 ? 7 : 10) - k / 2 - (k % 2 ? 0 : k / 2);
        nx[k][0] = (int32_t)(100 + 37 * k);
        nx[k][1] = (int32_t)(2000 + 11 * k);
        session_reset(s);
        CHECK(session_eval(s, pr[k], plen[k], lg, 0, &e) == 0);
        CHECK(session_eval(s, &nx[k][0], 1, want + (size_t)(2 * k) * V, 0, &e) == 0);
        CHECK(session_eval(s, &nx[k][1], 1, want + (size_t)(2 * k + 1) * V, 0, &e) == 0);
    }
    CHECK_MSG(kv_pool_create(m, NULL, NS, 64, 16, &p, &e) == 0, "%s", e.msg);
    for (int k = 0; k < NS; k++) CHECK(kv_pool_eval(p, 1, &k, &pr[k], &plen[k], lg, &e) == 0);
    int sq[NS], ones[NS];
    const int32_t *tx[NS];
    for (int step = 0; step < 2; step++) {
        for (int k = 0; k < NS; k++) {
            sq[k] = NS - 1 - k;     /* any order of slots */
            ones[k] = 1;
            tx[k] = &nx[sq[k]][step];
        }
        CHECK(kv_pool_eval(p, NS, sq, tx, ones, got, &e) == 0);
        for (int k = 0; k < NS; k++)
            CHECK_MSG(!memcmp(got + (size_t)k * V, want + (size_t)(2 * sq[k] + step) * V, (size_t)V * sizeof(float)),
                      "decode step %d, sequence %d: batched logits differ from the lone session's", step, sq[k]);
    }
    kv_pool_free(p);
    free(want);
    free(got);
    session_free(s);
    model_free(m);
    free(ra);
    free(rb);
    free(lg);
    return check_done();
}
