/* dlm preference mine|apply|revert|list — preference triples mined from the
 * trained adapter's own answers (spec §8, §1.5 auto-mined marker).
 *
 * mine: for every instruction question (first occurrence), N answers are
 * sampled from the document's current adapter; every pair of distinct
 * answers whose difflib ratio is at most 0.95 is judged, and the pair with
 * the largest score margin becomes a triple (chosen = higher score) when
 * the margin reaches the threshold. Triples are staged in
 * <store>/preference/pending.json, or written at once with --apply, each as
 * a `::preference::` section carrying
 *   <!-- dlm-auto-mined: judge_name="…" judge_score_chosen="F"
 *        judge_score_rejected="F" mined_at="…" mined_run_id="N" -->
 * revert removes exactly those sections; `dlm train --no-mined` leaves them
 * out of the dataset. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/commands.h"
#include "cmd/grow_cmd.h"
#include "doc/doc.h"
#include "doc/grow.h"
#include "infer/synth.h"
#include "infer/teacher.h"
#include "kern/kern.h"
#include "store/store.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/timeutil.h"

typedef struct preference_args {
    const char *judge, *adapter, *backend;
    int samples, max_pairs, max_new, seed, apply, json, threads;
    double temp, top_p, threshold, timeout;
} preference_args;

static const opt OPTS[] = {
    {"samples", 0, OPT_INT, offsetof(preference_args, samples), "N", "answers sampled per question (>= 2, default 4)"},
    {"judge", 0, OPT_STR, offsetof(preference_args, judge), "J", "cli:CMD (stdin {prompt, candidate}, stdout {score}), ref (default) or sway (the adapter's log-probability); hf: is refused"},
    {"threshold", 0, OPT_DOUBLE, offsetof(preference_args, threshold), "M", "smallest score margin kept (default 0.1)"},
    {"max-pairs", 0, OPT_INT, offsetof(preference_args, max_pairs), "N", "mine at most N triples (default: no limit)"},
    {"max-new-tokens", 0, OPT_INT, offsetof(preference_args, max_new), "N", "answer length limit (default 256)"},
    {"temp", 0, OPT_DOUBLE, offsetof(preference_args, temp), "T", "sampling temperature (default 0.7)"},
    {"top-p", 0, OPT_DOUBLE, offsetof(preference_args, top_p), "P", "top-p (default 1 = off)"},
    {"seed", 0, OPT_INT, offsetof(preference_args, seed), "N", "sampling seed (default 42)"},
    {"timeout", 0, OPT_DOUBLE, offsetof(preference_args, timeout), "S", "cli judge: seconds per call (default 30)"},
    {"threads", 0, OPT_THREADS, offsetof(preference_args, threads), "N", "compute threads (default: all cores)"},
    {"adapter", 0, OPT_STR, offsetof(preference_args, adapter), "NAME", "mine this adapter of training.adapters (required there)"},
    {"backend", 0, OPT_STR, offsetof(preference_args, backend), "auto|pytorch", "the original's backend choice: both run dlm's CPU kernels; mlx is refused"},
    {"apply", 0, OPT_FLAG, offsetof(preference_args, apply), NULL, "write the triples into the document now"},
    {"json", 0, OPT_FLAG, offsetof(preference_args, json), NULL, "JSON output"},
    {0},
};

const cmd_spec spec_preference = {
    "preference", "mine PATH [--samples 4] [--judge cli:CMD|ref|sway] [--threshold M] [--max-pairs N] [--temp 0.7]\n"
                  "         [--top-p P] [--apply]\n"
                  "       dlm preference apply|revert|list PATH",
    "mine preference triples from the trained adapter's own answers",
    "The judge `ref` scores an answer by its difflib ratio to the question's\n"
    "answer in the document; cli:CMD runs a program once per answer (JSON on\n"
    "stdin, {\"score\": N} on stdout, as the original). Needs a trained\n"
    "adapter. Exit: 0 triples staged/written/listed, 1 failure, 2 usage or\n"
    "nothing to do.",
    OPTS,
};

static int pick_auto_mined(const doc_section *s) { return s->auto_mined; }

/* The id of the document's last training run (manifest), 0 when none. */
static int64_t last_run_id(const char *store, dlm_err *e)
{
    char mp[4200];
    snprintf(mp, sizeof mp, "%s/manifest.json", store);
    if (!fs_exists(mp)) return 0;   /* never trained nor initialised */
    json_t *m = manifest_load(mp, e);
    if (!m) return -1;
    int64_t r = manifest_next_run_id(m) - 1;
    json_decref(m);
    return r;
}

typedef struct mine_stats { int prompts, dup_prompts, no_variety, too_similar, below, present, capped; } mine_stats;

static int cmd_mine(dlm_ctx *ctx, const preference_args *a, const char *path)
{
    if (a->samples < 2 || a->samples > 64) return cmd_usage_error(&spec_preference, "--samples must be 2..64");
    if (a->max_pairs < 0) return cmd_usage_error(&spec_preference, "--max-pairs must be >= 1");
    if (a->max_new < 1) return cmd_usage_error(&spec_preference, "--max-new-tokens must be >= 1");
    if (cmd_check_sample(&spec_preference, "--temp", "temperature", a->temp) ||
        cmd_check_sample(&spec_preference, "--top-p", "top_p", a->top_p))
        return EXIT_USAGE;
    if (!isnan(a->threshold) && a->threshold < 0) return cmd_usage_error(&spec_preference, "--threshold must be >= 0");
    if (cmd_check_backend(&spec_preference, a->backend)) return EXIT_USAGE;
    if (strchr(a->judge, '"') || strchr(a->judge, '\n'))
        return cmd_usage_error(&spec_preference, "--judge cannot contain '\"' or newlines (it is written into the marker)");
    dlm_err e;
    err_clear(&e);
    judge *probe;   /* a judge dlm cannot run (hf:) is refused before any work */
    if (judge_open(a->judge, a->timeout, &probe, &e)) return cmd_fail(ctx, &e);
    judge_close(probe);
    dlm_doc *d = doc_load(path, &e);
    if (!d) return cmd_fail(ctx, &e);
    /* as the original: --adapter names one of training.adapters, which a
     * document declaring them needs (mining samples one adapter) */
    int ads = doc_fm(d)->training.adapters != NULL;
    if (a->adapter && !ads) {
        doc_free(d);
        return cmd_usage_error(&spec_preference, "--adapter is only valid on documents that declare training.adapters");
    }
    if (!a->adapter && ads) {
        doc_free(d);
        return cmd_usage_error(&spec_preference, "%s declares training.adapters: pass --adapter NAME to pick the one to mine", path);
    }
    if (a->adapter && doc_adapter_index(doc_fm(d), a->adapter) < 0) {
        doc_free(d);
        return cmd_usage_error(&spec_preference, "--adapter '%s' is not declared in training.adapters", a->adapter);
    }
    char store[4096], pend[4200];
    if (cmd_doc_store_owned(ctx, path, store, sizeof store, &e)) { doc_free(d); return cmd_fail(ctx, &e); }
    grow_pending_path(store, "preference", pend, sizeof pend);
    int64_t run = last_run_id(store, &e);
    if (run <= 0) {
        if (run == 0) {
            err_set(&e, "PreferenceError", "%s has no training run to mine", path);
            err_hint(&e, "train first: dlm train %s", path);
        }
        doc_free(d);
        return cmd_fail(ctx, &e);
    }
    kern_init(a->threads);
    judge *jg = NULL;
    teacher *t = NULL;
    teacher_opts to = {.spec = "self", .doc_path = path, .home = ctx->home, .temp = a->temp, .top_p = a->top_p,
                       .max_new_tokens = a->max_new, .seed = (uint64_t)a->seed,
                       .adapter_name = a->adapter};
    json_t *items = json_array();
    mine_stats st = {0};
    int rc = EXIT_FAIL;
    char **cand = calloc((size_t)a->samples, sizeof *cand);
    double *score = calloc((size_t)a->samples, sizeof *score);
    if (!cand || !score) { err_set(&e, "MemoryError", "out of memory"); goto fail; }
    if (judge_open(a->judge, a->timeout, &jg, &e) || teacher_open(&to, &t, &e) || judge_bind_teacher(jg, t, &e))
        goto fail;
    double th = isnan(a->threshold) ? judge_default_threshold(jg) : a->threshold;
    char now[32];
    time_iso_utc(time_now(), now, sizeof now);
    strcat(now, "Z");
    int stop = 0;
    for (int i = 0; i < doc_nsections(d) && !stop; i++) {
        const doc_section *s = doc_section_at(d, i);
        if (s->type != DOC_INSTRUCTION) continue;
        for (int k = 0; k < s->n_pairs && !stop; k++) {
            const char *q = s->pairs[k].question, *ref = s->pairs[k].answer;
            int seen = 0;   /* first occurrence of a question only */
            for (int i2 = 0; i2 <= i && !seen; i2++) {
                const doc_section *s2 = doc_section_at(d, i2);
                if (s2->type != DOC_INSTRUCTION) continue;
                for (int k2 = 0; k2 < s2->n_pairs && !seen; k2++)
                    if ((i2 < i || k2 < k) && !strcmp(s2->pairs[k2].question, q)) seen = 1;
            }
            if (seen) { st.dup_prompts++; continue; }
            if (a->max_pairs && (int)json_array_size(items) >= a->max_pairs) { st.capped++; stop = 1; break; }
            st.prompts++;
            if (!ctx->quiet) fprintf(stderr, "mine: %.60s (%d samples)...\n", q, a->samples);
            int nc = 0;
            for (int sidx = 0; sidx < a->samples; sidx++) {
                char *r;
                if (teacher_ask(t, "", q, sidx, &r, &e)) goto fail;
                /* unique, non-empty, stripped */
                char *b = r;
                while (*b && strchr(" \t\r\n", *b)) b++;
                size_t n = strlen(b);
                while (n && strchr(" \t\r\n", b[n - 1])) n--;
                b[n] = 0;
                int dup = !*b;
                for (int c = 0; c < nc && !dup; c++) dup = !strcmp(cand[c], b);
                if (dup) { free(r); continue; }
                memmove(r, b, n + 1);
                cand[nc] = r;
                if (judge_score(jg, q, cand[nc], ref, &score[nc], &e)) { nc++; goto fail_c; }
                nc++;
            }
            if (nc < 2) { st.no_variety++; goto next; }
            int bc = -1, br = -1;
            double bm = -INFINITY;
            int any = 0;
            for (int x = 0; x < nc; x++)
                for (int y = x + 1; y < nc; y++) {
                    if (synth_ratio(cand[x], cand[y]) > 0.95) continue;
                    any = 1;
                    if (score[x] == score[y]) continue;
                    int c = score[x] > score[y] ? x : y, r = c == x ? y : x;
                    if (score[c] - score[r] > bm) { bm = score[c] - score[r]; bc = c; br = r; }
                }
            if (!any || bc < 0) { st.too_similar++; goto next; }
            if (bm < th) { st.below++; goto next; }
            strbuf chk = STRBUF_INIT;
            dlm_err ve;
            int ok = !doc_grow_pref_content(&chk, q, cand[bc], cand[br], &ve);
            sb_free(&chk);
            if (!ok || doc_grow_has_triple(d, q, cand[bc], cand[br])) { st.present++; goto next; }
            json_array_append_new(items, json_pack("{s:s, s:s, s:s, s:s, s:f, s:f, s:s, s:I}", "prompt", q, "chosen",
                                                   cand[bc], "rejected", cand[br], "judge_name", judge_name(jg),
                                                   "judge_score_chosen", score[bc], "judge_score_rejected", score[br],
                                                   "mined_at", now, "mined_run_id", (json_int_t)run));
        next:
            for (int c = 0; c < nc; c++) { free(cand[c]); cand[c] = NULL; }
            continue;
        fail_c:
            for (int c = 0; c < nc; c++) { free(cand[c]); cand[c] = NULL; }
            goto fail;
        }
    }
    int n = (int)json_array_size(items);
    if (a->json) {
        json_t *o = json_pack("{s:O, s:i, s:i, s:i, s:i, s:i, s:s}", "triples", items, "prompts", st.prompts,
                              "insufficient_variety", st.no_variety, "too_similar", st.too_similar, "below_threshold",
                              st.below, "already_present", st.present, "mode", a->apply ? "applied" : "staged");
        cmd_print_json(o);
    } else {
        printf("preference mine: %d prompt%s, %d mined, %d without 2 distinct answers, %d too similar, "
               "%d below the margin %g, %d already present (judge %s, run %lld)\n",
               st.prompts, st.prompts == 1 ? "" : "s", n, st.no_variety, st.too_similar, st.below, th, st.present,
               judge_name(jg), (long long)run);
        size_t i;
        json_t *it;
        json_array_foreach(items, i, it) {
            char p[100], c[100], r[100];
            double sc, sr;
            grow_first_line(jget_str(it, "prompt"), p, sizeof p);
            grow_first_line(jget_str(it, "chosen"), c, sizeof c);
            grow_first_line(jget_str(it, "rejected"), r, sizeof r);
            jget_num(it, "judge_score_chosen", &sc);
            jget_num(it, "judge_score_rejected", &sr);
            printf("+ ::preference:: margin %.3f\n  prompt:   %s\n  chosen:   %s\n  rejected: %s\n", sc - sr, p, c, r);
        }
    }
    if (!n) {
        if (!a->json) printf("preference mine: nothing to add\n");
        rc = EXIT_USAGE;
        goto out;
    }
    if (a->apply) {
        int w;
        if (grow_write_items(path, items, "preference", &w, &e)) goto fail;
        if (!a->json) printf("preference: wrote %d auto-mined section%s to %s (dlm preference revert %s removes them)\n",
                            w, w == 1 ? "" : "s", path, path);
    } else {
        int total;
        if (grow_stage_items(pend, "preference", doc_fm(d)->dlm_id, items, &total, &e)) goto fail;
        if (!a->json) printf("preference: staged %d triple%s in %s (%d pending); dlm preference apply %s writes them\n",
                            n, n == 1 ? "" : "s", pend, total, path);
    }
    rc = EXIT_OK;
    goto out;
fail:
    rc = cmd_fail(ctx, &e);
out:
    free(cand);
    free(score);
    json_decref(items);
    judge_close(jg);
    teacher_close(t);
    doc_free(d);
    return rc;
}

static json_t *mined_entry(const doc_section *s)
{
    if (!s->auto_mined) return NULL;
    return json_pack("{s:s, s:i, s:s, s:f, s:f, s:s, s:I}", "section_id", s->id, "line", s->line, "judge_name",
                     s->judge_name, "judge_score_chosen", s->judge_score_chosen, "judge_score_rejected",
                     s->judge_score_rejected, "mined_at", s->mined_at, "mined_run_id", (json_int_t)s->mined_run_id);
}

static void mined_describe(const json_t *w, char *buf, size_t cap)
{
    snprintf(buf, cap, "judge %s", jget_str(w, "judge_name"));
}

int cmd_preference(int argc, char **argv, dlm_ctx *ctx)
{
    preference_args a = {.judge = "ref", .samples = 4, .max_new = 256, .seed = 42,
                         .temp = 0.7, .top_p = 1.0, .threshold = NAN, .timeout = 30};
    char *pos[64];
    int npos;
    if (argc > 64) return cmd_usage_error(&spec_preference, "too many arguments");
    int r = opts_parse(&spec_preference, argc, argv, ctx, &a, pos, &npos);
    if (r) return r == 1 ? EXIT_OK : EXIT_USAGE;
    if (npos != 2) return cmd_usage_error(&spec_preference, "preference takes a subcommand (mine, apply, revert, list) and a PATH");
    const char *sub = pos[0], *path = pos[1];
    if (!strcmp(sub, "mine")) return cmd_mine(ctx, &a, path);
    if (!strcmp(sub, "apply")) return grow_cmd_apply(ctx, path, "preference", "auto-mined");
    if (!strcmp(sub, "revert")) return grow_cmd_revert(ctx, path, "preference", "auto-mined", pick_auto_mined);
    if (!strcmp(sub, "list"))
        return grow_cmd_list(ctx, path, a.json, "preference", "auto-mined", "prompt", mined_entry, mined_describe);
    return cmd_usage_error(&spec_preference, "unknown preference subcommand '%s' (mine, apply, revert, list)", sub);
}
