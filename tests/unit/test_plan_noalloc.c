/* "Nothing allocates inside the step loop": this test replaces malloc and
 * friends for the whole process (glibc allows an executable to interpose
 * them; the replacements count, then forward to __libc_*), builds a real
 * run on the fixture base (tokenizer, dataset, LoRA, fb, optimizer, the
 * preallocated checkpoint buffer, the heartbeat), and counts allocations
 * over several steps of exactly what the trainer's loop does: batch
 * selection and fill, forward + backward with and without recomputation,
 * clipping, AdamW (32-bit, and the 8-bit optimizer of grad/optim8.h in
 * the recomputation variant), evaluation, checkpoint serialisation and write, the
 * heartbeat rewrite. The count must be zero. A positive control proves the
 * counter sees allocations made inside shared libraries too.
 *
 * Under AddressSanitizer (which owns malloc) the interposition is left out
 * and the loop only runs. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tokens/chat.h"
#include "tokens/dataset.h"
#include "doc/doc.h"
#include "kern/kern.h"
#include "weights/model.h"
#include "tokens/tok.h"
#include "tokens/tok_gguf.h"
#include "decoder/decoder.h"
#include "grad/backward.h"
#include "grad/optim8.h"
#include "run/heartbeat.h"
#include "decoder/lora.h"
#include "grad/optim.h"
#include "adapter/state.h"
#include "util/json.h"
#include "util/str.h"

#if defined(__SANITIZE_ADDRESS__)
#define NO_HOOK 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define NO_HOOK 1
#endif
#endif

static int g_counting;
static long g_allocs;

#ifndef NO_HOOK
extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t a, size_t b);
extern void *__libc_realloc(void *p, size_t n);
extern void *__libc_memalign(size_t al, size_t n);
extern void __libc_free(void *p);

static void count(void)
{
    if (__atomic_load_n(&g_counting, __ATOMIC_RELAXED)) __atomic_fetch_add(&g_allocs, 1, __ATOMIC_RELAXED);
}
void *malloc(size_t n) { count(); return __libc_malloc(n); }
void *calloc(size_t a, size_t b) { count(); return __libc_calloc(a, b); }
void *realloc(void *p, size_t n) { count(); return __libc_realloc(p, n); }
void free(void *p) { __libc_free(p); }
void *aligned_alloc(size_t al, size_t n) { count(); return __libc_memalign(al, n); }
void *memalign(size_t al, size_t n) { count(); return __libc_memalign(al, n); }
int posix_memalign(void **out, size_t al, size_t n)
{
    count();
    void *p = __libc_memalign(al, n);
    if (!p) return ENOMEM;
    *out = p;
    return 0;
}
#endif

#define FIX DLM_SOURCE_DIR "/tests/ref/model/fixtures/qwen2-f32"

static const char *DOC = "---\ndlm_id: 01JD0000000000000000000000\ndlm_version: 15\nbase_model: tiny\n---\n"
                         "# Capitals\n\nParis is the capital of France. Berlin is the capital of Germany.\n"
                         "Madrid is the capital of Spain, and Lisbon the capital of Portugal. Rome is the capital\n"
                         "of Italy and Vienna the capital of Austria; Warsaw is the capital of Poland.\n\n"
                         "::instruction::\n### Q\nWhat is the capital of France?\n### A\nParis.\n\n"
                         "### Q\nWhat is the capital of Germany?\n### A\nBerlin.\n\n"
                         "### Q\nWhat is the capital of Spain?\n### A\nMadrid.\n\n"
                         "### Q\nWhat is the capital of Italy?\n### A\nRome.\n";

static void run(int recompute, int threads)
{
    dlm_err e;
    kern_init(threads);
    model *m = NULL;
    tok *t = NULL;
    CHECK(model_load(FIX, &m, &e) == 0);
    CHECK(tok_load_for_model(FIX, &t, &e) == 0);
    if (!m || !t) return;
    dlm_doc *doc = doc_parse("noalloc.dlm", DOC, strlen(DOC), &e);
    CHECK(doc != NULL);
    const chat_dialect *dl = chat_dialect_find("chatml");
    ds_opts o = {.seq_len = 64, .seed = 7, .val_frac = 0.3};
    dataset *ds = NULL;
    CHECK_MSG(dataset_build(doc, NULL, t, dl, &o, &ds, &e) == 0, "%s", e.msg);
    if (!ds) return;
    CHECK(ds->n_train > 2);
    lora_config lc = {4, 8, 0.1f, LM_ALL, 0};
    lora *l = NULL;
    CHECK(lora_create(&m->cfg, &lc, &l, &e) == 0 && lora_init(l, m, 7, &e) == 0);
    const int mb = 2, ga = 2, T = ds->max_len;
    size_t n = l->n, bt = (size_t)mb * T;
    float *g = calloc(n, 4), *mo = calloc(n, 4), *ve = calloc(n, 4);
    int32_t *bt_tok = malloc(bt * 4), *bt_tgt = malloc(bt * 4), *bt_pos = malloc(bt * 4), *bt_seg = malloc(bt * 4);
    int *items = malloc(mb * sizeof(int));
    strbuf ck = STRBUF_INIT;
    /* the recomputation variant trains with the 8-bit optimizer */
    optim8 *o8 = NULL;
    if (recompute) CHECK(optim8_create(l, &o8, &e) == 0);
    train_state s8 = {.n = n, .optim_kind = o8 ? STATE_OPTIM_ADAMW8 : STATE_OPTIM_ADAMW};
    if (o8) {
        s8.n8 = o8->k.n8, s8.nblk = o8->k.nblk, s8.n32 = o8->k.n32;
        s8.c1 = o8->c1, s8.c2 = o8->c2, s8.a1 = o8->a1, s8.a2 = o8->a2, s8.m = o8->m, s8.v = o8->v;
    }
    CHECK(sb_reserve(&ck, state_size(&s8)) == 0);
    decoder_opts fo = {.B = mb, .T = T, .recompute = recompute};
    decoder *f = NULL;
    CHECK(decoder_create(m, l, &fo, &f, &e) == 0);
    optim_config oc;
    optim_defaults(&oc);
    oc.lr = 1e-3f;
    oc.total_steps = 12;
    const char *dir = check_tmpdir(recompute ? "noalloc_rc" : "noalloc");
    char ckpath[4200];
    snprintf(ckpath, sizeof ckpath, "%s/training_state.bin", dir);
    heartbeat *hb = NULL;
    hb_opts ho = {"noalloc.dlm", NULL, 0};
    CHECK(hb_start(dir, 1, &ho, &hb, &e) == 0);
    int spe = dataset_steps_per_epoch(ds, mb, ga);
    double first = 0, last = 0;

    __atomic_store_n(&g_allocs, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&g_counting, 1, __ATOMIC_RELAXED);
    for (int64_t step = 0; step < 12; step++) {
        int64_t tl = 0;
        for (int mi = 0; mi < ga; mi++) {
            int c = dataset_micro_items(ds, 7, (int)(step / spe), (int)(step % spe), mi, mb, ga, items);
            for (int i = 0; i < c; i++) tl += ds->items[items[i]].n_loss;
        }
        memset(g, 0, n * 4);
        double sum = 0;
        for (int mi = 0; mi < ga && tl > 0; mi++) {
            int c = dataset_micro_items(ds, 7, (int)(step / spe), (int)(step % spe), mi, mb, ga, items);
            if (c <= 0) continue;
            token_batch b;
            int64_t nl, got;
            dataset_fill(ds, items, c, 1, mb, T, bt_tok, bt_tgt, bt_pos, bt_seg, &b, &nl);
            sum += backward_step(f, &b, g, NULL, 1.0f / (float)tl, 7, (uint64_t)step * ga + (uint64_t)mi, &got);
        }
        double loss = tl ? sum / (double)tl : 0;
        if (step == 0) first = loss;
        last = loss;
        optim_clip(g, n, oc.max_grad_norm);
        if (o8) optim8_step(o8, &oc, l->w, g, optim_lr_at(&oc, step), step + 1);
        else optim_adamw_step(&oc, l->w, g, mo, ve, n, optim_lr_at(&oc, step), step + 1);
        train_progress p = {PHASE_TRAINING, step + 1, 12, loss, NAN, 1e-3, 100, 1, 2, 0, 1, "x.jsonl", "sft", NULL, NAN, NAN};
        hb_update(hb, &p);
        if (step % 4 == 3) {
            /* evaluation and a checkpoint, as the loop does every few steps */
            for (int i = 0; i < ds->n_val; i += mb) {
                int c = ds->n_val - i < mb ? ds->n_val - i : mb;
                token_batch b;
                int64_t nl, got;
                dataset_fill(ds, ds->val + i, c, 1, mb, T, bt_tok, bt_tgt, bt_pos, bt_seg, &b, &nl);
                decoder_loss(f, &b, NULL, NULL, &got);
            }
            train_state s = {(uint64_t)step + 1, 12, 0, 7, n, INFINITY, 0, 0, loss, l->w, mo, ve, NULL, .optim_kind = STATE_OPTIM_ADAMW};
            if (o8) {
                s8.step = (uint64_t)step + 1, s8.total_steps = 12, s8.seed = 7, s8.best_val = INFINITY;
                s8.last_loss = loss, s8.params = l->w;
                s = s8;
            }
            CHECK(state_save_buf(ckpath, &s, &ck, &e) == 0);
        }
    }
    __atomic_store_n(&g_counting, 0, __ATOMIC_RELAXED);
    long inside = __atomic_load_n(&g_allocs, __ATOMIC_RELAXED);
#ifndef NO_HOOK
    CHECK_MSG(inside == 0, "%ld allocations inside the step loop (recompute %d, %d threads)", inside, recompute,
              threads);
    /* positive control: an allocation in dlm code and one inside a shared
     * library (jansson) are both seen */
    __atomic_store_n(&g_counting, 1, __ATOMIC_RELAXED);
    char *s1 = str_ndup("abc", 3);
    json_t *j = json_object();
    __atomic_store_n(&g_counting, 0, __ATOMIC_RELAXED);
    CHECK_MSG(__atomic_load_n(&g_allocs, __ATOMIC_RELAXED) >= 2, "the counter missed allocations (%ld)",
              __atomic_load_n(&g_allocs, __ATOMIC_RELAXED));
    free(s1);
    json_decref(j);
#else
    (void)inside;
    fprintf(stderr, "note: allocation counting is off under AddressSanitizer\n");
#endif
    CHECK(isfinite(first) && isfinite(last) && last < first);
    train_outcome oc2 = {"completed", 0, NULL, 1, 12, 12, NULL};
    CHECK(hb_finish(hb, &oc2, "done", &e) == 0);
    hb_free(hb);
    sb_free(&ck);
    decoder_free(f);
    free(g);
    free(mo);
    optim8_free(o8);
    free(ve);
    free(bt_tok);
    free(bt_tgt);
    free(bt_pos);
    free(bt_seg);
    free(items);
    lora_free(l);
    dataset_free(ds);
    doc_free(doc);
    tok_free(t);
    model_free(m);
}

int main(void)
{
    run(0, 2);
    run(1, 1);
    return check_done();
}
