/* kv_pool: several sequences in one step give each the logits a lone
 * session gives (to rounding: the pool's rows go through one GEMM, packed
 * into passes differently from the session's, and its head multiplies the
 * gathered last rows where a session takes kern_matvec); a copied or
 * truncated prefix continues as if the prefix had been evaluated in place
 * (what the server's prefix reuse relies on). */
#include <stdlib.h>

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
    session_free(s);
    model_free(m);
    free(ra);
    free(rb);
    free(lg);
    return check_done();
}
