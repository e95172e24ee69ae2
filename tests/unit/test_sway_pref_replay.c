/* test_sway_pref_replay — the preference phase's replay draw
 * (tokens/replay.h replay_sample_pref) against the original
 * DocumentLanguageModel 0.10.0's dlm.replay.sampler:
 *   - replay_weight(weight, age) is _recency_weight's value, bit for bit,
 *     on the table below (printed by the original's function with
 *     added_at = now − age days);
 *   - k = max(8, 2 · the document's triples) sections, every one (in id
 *     order) when the corpus has no more;
 *   - the draw follows the weights as the original's A-ExpJ does: 20
 *     sections of weight 0.1 (age 9) and 20 of weight 1 (age 0), k = 8:
 *     the original's sample() over 20000 seeded Randoms picks the recent
 *     ones 0.8948 of the time; dlm's draw over 2000 seeds within 0.02;
 *   - sections of the current document and non-preference ones are never
 *     drawn; the same seed draws the same sections. */
#include "check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doc/doc.h"
#include "tokens/replay.h"

static const struct { double w, age, want; } W[] = {
    {1.0, 0, 1.0}, {1.0, 0.5, 0.6666666666666666}, {1.0, 1, 0.5}, {1.0, 3, 0.25}, {1.0, 9, 0.1},
    {1.0, 99, 0.01}, {1.0, 1000, 0.01}, {0.5, 0, 0.5}, {0.5, 0.5, 0.3333333333333333}, {0.5, 1, 0.25},
    {0.5, 3, 0.125}, {0.5, 9, 0.05}, {0.5, 99, 0.01}, {2.0, 0, 2.0}, {2.0, 0.5, 1.3333333333333333},
    {2.0, 1, 1.0}, {2.0, 3, 0.5}, {2.0, 9, 0.2}, {2.0, 99, 0.02}, {2.0, 1000, 0.01}, {0.001, 0, 0.01},
    {0.001, 9, 0.01},
};

/* a document of preference sections "Question a..b" (plus one prose section) */
static dlm_doc *pref_doc(int a, int b)
{
    strbuf sb = {0};
    sb_puts(&sb, "---\ndlm_id: 01JD0000000000000000000000\nbase_model: tiny\n---\nSome prose.\n");
    for (int i = a; i <= b; i++)
        sb_printf(&sb, "\n::preference::\n### Prompt\nQuestion %d?\n### Chosen\nYes %d.\n### Rejected\nNo %d.\n", i, i, i);
    dlm_err e;
    dlm_doc *d = doc_parse("t.dlm", sb.buf, sb.len, &e);
    sb_free(&sb);
    return d;
}

int main(void)
{
    for (size_t i = 0; i < sizeof W / sizeof W[0]; i++)
        CHECK_MSG(replay_weight(W[i].w, W[i].age) == W[i].want, "w %g age %g: %.17g, want %.17g", W[i].w, W[i].age,
                  replay_weight(W[i].w, W[i].age), W[i].want);
    CHECK(replay_weight(1.0, -3) == 1.0);

    const char *dir = check_tmpdir("sway_pref_replay");
    dlm_err e;
    replay *r = NULL;
    CHECK_INT(replay_open(dir, &r, &e), 0);
    dlm_doc *old = pref_doc(1, 20), *recent = pref_doc(21, 40), *cur = pref_doc(41, 41);
    CHECK(old && recent && cur);
    /* run 1 trains the old sections, run 10 the recent ones: at run 10 their
     * ages are 9 and 0 runs, weights 0.1 and 1 */
    CHECK_INT(replay_commit(r, old, 1, 1u << 30, &e), 0);
    CHECK_INT(replay_commit(r, recent, 10, 1u << 30, &e), 0);
    replay_free(r);
    CHECK_INT(replay_open(dir, &r, &e), 0);
    CHECK_INT(replay_count(r), 41);   /* 40 preference sections, one prose (the same text in both) */
    const char *ids[64];
    int n_ids = 0;
    for (int i = 0; i < doc_nsections(cur); i++) ids[n_ids++] = doc_section_at(cur, i)->id;
    /* the recent sections' ids */
    char recent_ids[40][17];
    for (int i = 0; i < doc_nsections(recent); i++) memcpy(recent_ids[i], doc_section_at(recent, i)->id, 17);
    long hits = 0, total = 0;
    int *first = NULL, nfirst = 0;
    for (uint64_t seed = 0; seed < 2000; seed++) {
        int *idx = NULL;
        int k = replay_sample_pref(r, ids, n_ids, 1, 0, seed, 10, &idx, &e);
        CHECK_INT(k, 8);
        for (int j = 0; j < k; j++) {
            const replay_entry *x = replay_at(r, idx[j]);
            CHECK(!strcmp(x->type, "preference"));
            int is_recent = 0;
            for (int q = 1; q < doc_nsections(recent); q++) is_recent |= !strcmp(x->sid, recent_ids[q]);
            hits += is_recent;
            total++;
        }
        if (seed == 7) { first = idx; nfirst = k; idx = NULL; }
        free(idx);
    }
    double share = (double)hits / (double)total;
    CHECK_MSG(share > 0.8948 - 0.02 && share < 0.8948 + 0.02, "recent share %.4f, the original's 0.8948", share);
    /* the same seed, the same draw */
    int *again = NULL;
    CHECK_INT(replay_sample_pref(r, ids, n_ids, 1, 0, 7, 10, &again, &e), nfirst);
    CHECK(first && again && !memcmp(first, again, (size_t)nfirst * sizeof *first));
    free(first);
    free(again);
    /* k = 2n for a document of 6 triples; every entry, in id order, for 30 */
    int *idx = NULL;
    CHECK_INT(replay_sample_pref(r, ids, n_ids, 6, 0, 1, 10, &idx, &e), 12);
    free(idx);
    CHECK_INT(replay_sample_pref(r, ids, n_ids, 30, 0, 1, 10, &idx, &e), 40);
    for (int j = 1; j < 40; j++) CHECK(strcmp(replay_at(r, idx[j - 1])->sid, replay_at(r, idx[j])->sid) < 0);
    free(idx);
    /* a section of the document is never replayed */
    const char *all_ids[64];
    int na = 0;
    for (int i = 0; i < doc_nsections(recent); i++) all_ids[na++] = doc_section_at(recent, i)->id;
    CHECK_INT(replay_sample_pref(r, all_ids, na, 30, 0, 1, 10, &idx, &e), 20);
    for (int j = 0; j < 20; j++)
        for (int q = 0; q < na; q++) CHECK(strcmp(replay_at(r, idx[j])->sid, all_ids[q]));
    free(idx);
    replay_free(r);
    doc_free(old);
    doc_free(recent);
    doc_free(cur);
    return check_done();
}
