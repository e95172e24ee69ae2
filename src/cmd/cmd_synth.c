/* dlm synth instructions|apply|revert|list — instruction pairs written by a
 * teacher from the document's own prose (spec §8, §1.5 auto-synth marker).
 *
 * For every prose section the teacher is asked (once per strategy) for a
 * JSON list of {question, answer}; the pairs that parse, are well-formed
 * section bodies and are not near-duplicates (difflib ratio > 0.95 of the
 * normalised "question\nanswer", or equal normalised questions) of the
 * document's pairs or of each other are kept. They are staged in
 * <store>/synth/pending.json, or written at once with --apply, each as an
 * `::instruction::` section carrying
 *   <!-- dlm-auto-synth: synth_teacher="…" synth_strategy="…" synth_at="…"
 *        source_section_id="…" -->
 * `synth revert` removes exactly those sections (the text before --apply
 * comes back byte for byte). */
#include <limits.h>
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
#include "util/fs.h"
#include "util/json.h"
#include "util/timeutil.h"

typedef struct synth_args {
    const char *teacher, *strategy, *filter, *judge, *model;
    int per_section, max_pairs, max_new, seed, apply, dry, json, threads;
    double temp, top_p, threshold, timeout;
    int temp_set, top_p_set;     /* given on the line (anthropic: sent only then) */
} synth_args;

static const opt OPTS[] = {
    {"teacher", 0, OPT_STR, offsetof(synth_args, teacher), "T", "self (the document's adapter), openai:URL, vllm-server:URL, anthropic:MODEL, hf:MODEL or cli:CMD (default self)"},
    {"per-section", 0, OPT_INT, offsetof(synth_args, per_section), "N", "pairs asked for per prose section and strategy (default 3)"},
    {"strategy", 0, OPT_STR, offsetof(synth_args, strategy), "S", "extraction, expansion or both (default extraction)"},
    {"filter", 0, OPT_STR, offsetof(synth_args, filter), "F", "dedup-only (default), none, or judge (with --judge)"},
    {"judge", 0, OPT_STR, offsetof(synth_args, judge), "cli:CMD", "--filter judge: the judge program (see dlm help preference)"},
    {"threshold", 0, OPT_DOUBLE, offsetof(synth_args, threshold), "M", "--filter judge: keep answers scoring M above an empty one (default 0.1)"},
    {"max-pairs", 0, OPT_INT, offsetof(synth_args, max_pairs), "N", "keep at most N pairs in all (default: no limit)"},
    {"max-new-tokens", 0, OPT_INT, offsetof(synth_args, max_new), "N", "reply length limit per request (default 512)"},
    {"temp", 0, OPT_DOUBLE, offsetof(synth_args, temp), "T", "teacher temperature (default 0.0; anthropic: the model's own unless given)"},
    {"top-p", 0, OPT_DOUBLE, offsetof(synth_args, top_p), "P", "teacher top-p (default 1 = off; anthropic: sent only when given)"},
    {"seed", 0, OPT_INT, offsetof(synth_args, seed), "N", "sampling seed (default 42; not for anthropic:)"},
    {"model", 0, OPT_STR, offsetof(synth_args, model), "NAME", "openai: the model name sent (default \"default\"; vllm-server: the server's first); anthropic:/hf: name theirs"},
    {"timeout", 0, OPT_DOUBLE, offsetof(synth_args, timeout), "S", "openai/anthropic/cli: seconds per request (default 300)"},
    {"threads", 0, OPT_THREADS, offsetof(synth_args, threads), "N", "self/hf: compute threads (default: all cores)"},
    {"apply", 0, OPT_FLAG, offsetof(synth_args, apply), NULL, "write the sections into the document now"},
    {"dry-run", 0, OPT_FLAG, offsetof(synth_args, dry), NULL, "show what would be generated; stage nothing"},
    {"json", 0, OPT_FLAG, offsetof(synth_args, json), NULL, "list / instructions: JSON output"},
    {0},
};

const cmd_spec spec_synth = {
    "synth", "instructions PATH [--teacher self|openai:URL|anthropic:MODEL|hf:MODEL|cli:CMD] [--per-section 3] [--strategy extraction|expansion|both]\n"
             "         [--filter dedup-only|none|judge] [--max-pairs N] [--max-new-tokens 512] [--temp 0.0] [--top-p P]\n"
             "         [--seed N] [--apply | --dry-run]\n"
             "       dlm synth apply|revert|list PATH",
    "grow instruction pairs from the document's prose with a teacher model",
    "instructions stages the pairs in <store>/synth/pending.json (apply writes\n"
    "them), or writes them at once with --apply. revert removes every\n"
    "auto-synth section; list shows the staged and the written ones.\n"
    "OPENAI_API_KEY, when set, is sent as the Bearer token to openai:URL.\n"
    "anthropic:MODEL asks Anthropic's Messages API with ANTHROPIC_API_KEY (from\n"
    "the environment only) at ANTHROPIC_BASE_URL (default https://api.anthropic.com),\n"
    "retrying 429/5xx twice as Anthropic's SDK does. hf:MODEL loads a second base\n"
    "in process (ORG/NAME from the HF cache or hub, a registry key or a model\n"
    "folder) and asks it without an adapter.\n"
    "`dlm synth preferences PATH ...` is `dlm preference mine PATH ...` (the\n"
    "original's spelling).\n"
    "A cli:CMD teacher reads {\"system\", \"prompt\", \"max_new_tokens\",\n"
    "\"temperature\", \"top_p\", \"seed\"} on stdin and prints its reply.\n"
    "Exit: 0 pairs staged/written/listed, 1 failure, 2 usage or nothing to do.",
    OPTS,
};

static const char *SYS_EXTRACT =
    "You write training data from a document. Ask only questions that the text answers directly, and answer "
    "them from the text. Reply with a JSON list of objects with the keys \"question\" and \"answer\", and "
    "nothing else.";
static const char *SYS_EXPAND =
    "You write training data from a document. Ask the questions a curious reader would ask next, and answer "
    "them helpfully without contradicting the text. Reply with a JSON list of objects with the keys "
    "\"question\" and \"answer\", and nothing else.";

static int pick_auto_synth(const doc_section *s) { return s->auto_synth; }

typedef struct plan {
    json_t *items;          /* accepted, as pending items */
    int generated, rejected, dups, judged_out, capped, requests, no_json;
} plan;

static int keep_pair(const synth_args *a, plan *p, const dlm_doc *d, const char *q, const char *ans, judge *jg, dlm_err *e)
{
    strbuf tmp = STRBUF_INIT;
    dlm_err ve;
    int ok = !doc_grow_qa_content(&tmp, q, ans, 0, &ve);
    sb_free(&tmp);
    if (!ok) { p->rejected++; return 0; }
    if (strcmp(a->filter, "none")) {
        for (int i = 0; i < doc_nsections(d); i++) {
            const doc_section *s = doc_section_at(d, i);
            if (s->type != DOC_INSTRUCTION) continue;
            for (int k = 0; k < s->n_pairs; k++)
                if (synth_is_near_dup(q, ans, s->pairs[k].question, s->pairs[k].answer)) { p->dups++; return 0; }
        }
        size_t i;
        json_t *it;
        json_array_foreach(p->items, i, it)
            if (synth_is_near_dup(q, ans, jget_str(it, "question"), jget_str(it, "answer"))) { p->dups++; return 0; }
    }
    if (jg) {
        double with, without;
        if (judge_score(jg, q, ans, NULL, &with, e) || judge_score(jg, q, "", NULL, &without, e)) return -1;
        double th = isnan(a->threshold) ? judge_default_threshold(jg) : a->threshold;
        if (with - without < th) { p->judged_out++; return 0; }
    }
    return 1;
}

static int cmd_instructions(dlm_ctx *ctx, const synth_args *a, const char *path)
{
    int both = !strcmp(a->strategy, "both");
    if (!both && strcmp(a->strategy, "extraction") && strcmp(a->strategy, "expansion"))
        return cmd_usage_error(&spec_synth, "--strategy must be extraction, expansion or both");
    if (strcmp(a->filter, "dedup-only") && strcmp(a->filter, "none") && strcmp(a->filter, "judge"))
        return cmd_usage_error(&spec_synth, "--filter must be dedup-only, none or judge");
    if (!strcmp(a->filter, "judge") != !!a->judge)
        return cmd_usage_error(&spec_synth, "--filter judge and --judge cli:CMD go together");
    if (a->per_section < 1 || a->per_section > 100) return cmd_usage_error(&spec_synth, "--per-section must be 1..100");
    if (a->max_pairs < 0) return cmd_usage_error(&spec_synth, "--max-pairs must be >= 1");
    if (a->max_new < 1) return cmd_usage_error(&spec_synth, "--max-new-tokens must be >= 1");
    if (cmd_check_sample(&spec_synth, "--temp", "temperature", a->temp) ||
        cmd_check_sample(&spec_synth, "--top-p", "top_p", a->top_p))
        return EXIT_USAGE;
    if (a->apply && a->dry) return cmd_usage_error(&spec_synth, "--apply and --dry-run are mutually exclusive");
    if (a->model && (!strncmp(a->teacher, "anthropic:", 10) || !strncmp(a->teacher, "hf:", 3)))
        return cmd_usage_error(&spec_synth, "--model is for openai:URL / vllm-server:URL; %s names its model", a->teacher);
    if (strchr(a->teacher, '"') || strchr(a->teacher, '\n'))
        return cmd_usage_error(&spec_synth, "--teacher cannot contain '\"' or newlines (it is written into the marker)");
    dlm_err e;
    err_clear(&e);
    char store[4096], pend[4200];
    if (cmd_doc_store_owned(ctx, path, store, sizeof store, &e)) return cmd_fail(ctx, &e);
    grow_pending_path(store, "synth", pend, sizeof pend);
    dlm_doc *d = doc_load(path, &e);
    if (!d) return cmd_fail(ctx, &e);
    kern_init(a->threads);
    int anthropic = !strncmp(a->teacher, "anthropic:", 10);
    teacher_opts to = {.spec = a->teacher, .doc_path = path, .home = ctx->home, .model = a->model,
                       .api_key = getenv(anthropic ? "ANTHROPIC_API_KEY" : "OPENAI_API_KEY"),
                       .base_url = anthropic ? getenv("ANTHROPIC_BASE_URL") : NULL, .temp = a->temp, .top_p = a->top_p,
                       .temp_set = a->temp_set, .top_p_set = a->top_p_set,
                       .max_new_tokens = a->max_new, .seed = (uint64_t)a->seed, .timeout_s = a->timeout};
    teacher *t = NULL;
    judge *jg = NULL;
    plan p = {.items = json_array()};
    int rc = EXIT_FAIL;
    if (teacher_open(&to, &t, &e) || (a->judge && (judge_open(a->judge, 30, &jg, &e) || judge_bind_teacher(jg, t, &e))))
        goto fail;
    char now[32];
    time_iso_utc(time_now(), now, sizeof now);
    strcat(now, "Z");
    const char *strategies[2] = {both ? "extraction" : a->strategy, "expansion"};
    int done = 0;
    for (int i = 0; i < doc_nsections(d) && !done; i++) {
        const doc_section *s = doc_section_at(d, i);
        if (s->type != DOC_PROSE) continue;
        size_t nonblank = 0;
        for (size_t k = 0; k < s->content_len; k++) nonblank += !strchr(" \t\r\n", s->content[k]);
        if (!nonblank) continue;
        for (int si = 0; si < (both ? 2 : 1) && !done; si++) {
            strbuf user = STRBUF_INIT;
            sb_printf(&user, "%s %d question/answer pairs %s.\n\nReturn only a JSON list.\n\nText:\n%.*s",
                      "Write", a->per_section,
                      !strcmp(strategies[si], "extraction") ? "whose answers the text below states directly"
                                                            : "that expand on the text below without contradicting it",
                      (int)s->content_len, s->content);
            char *reply = NULL;
            p.requests++;
            if (!ctx->quiet) fprintf(stderr, "synth: section %s (line %d), %s...\n", s->id, s->line, strategies[si]);
            const char *sys = !strcmp(strategies[si], "extraction") ? SYS_EXTRACT : SYS_EXPAND;
            if (ctx->verbose) {
                json_t *q = json_pack("{s:s, s:s}", "system", sys, "user", sb_str(&user));
                char *qs = q ? json_dumps(q, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
                if (qs) fprintf(stderr, "synth: ask: %s\n", qs);
                free(qs);
                json_decref(q);
            }
            int r = teacher_ask(t, sys, sb_str(&user), 0, &reply, &e);
            sb_free(&user);
            if (r) { err_prefix(&e, "section %s (line %d)", s->id, s->line); goto fail; }
            synth_pair *pairs;
            int np, nrej, found;
            if (synth_parse_reply(reply, strlen(reply), &pairs, &np, &nrej, &found, &e)) { free(reply); goto fail; }
            if (ctx->verbose) {
                json_t *rs = json_string(reply);
                char *q = rs ? json_dumps(rs, JSON_COMPACT | JSON_ENCODE_ANY | JSON_ENSURE_ASCII) : NULL;
                fprintf(stderr, "synth: reply: %s\n", q ? q : "(not UTF-8)");
                free(q);
                json_decref(rs);
            }
            if (!found) {
                p.no_json++;
                if (ctx->verbose) fprintf(stderr, "synth: no JSON list in the reply\n");
            }
            free(reply);
            p.generated += np;
            p.rejected += nrej;
            int kept = 0;
            for (int k = 0; k < np; k++) {
                int keep = keep_pair(a, &p, d, pairs[k].question, pairs[k].answer, jg, &e);
                if (keep < 0) { synth_pairs_free(pairs, np); goto fail; }
                if (!keep) continue;
                /* limits count kept pairs: a duplicate does not use up a place */
                if (kept >= a->per_section) { p.capped++; continue; }
                if (a->max_pairs && (int)json_array_size(p.items) >= a->max_pairs) { p.capped++; done = 1; continue; }
                kept++;
                json_array_append_new(p.items, json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "question", pairs[k].question,
                                                         "answer", pairs[k].answer, "synth_teacher", teacher_name(t),
                                                         "synth_strategy", strategies[si], "synth_at", now,
                                                         "source_section_id", s->id));
            }
            synth_pairs_free(pairs, np);
        }
    }
    int n = (int)json_array_size(p.items);
    if (a->json) {
        json_t *o = json_pack("{s:O, s:i, s:i, s:i, s:i, s:i, s:i, s:s}", "pairs", p.items, "generated", p.generated,
                              "rejected", p.rejected, "duplicates", p.dups, "judged_out", p.judged_out, "capped",
                              p.capped, "requests", p.requests, "mode",
                              a->dry ? "dry-run" : a->apply ? "applied" : "staged");
        cmd_print_json(o);
    } else {
        printf("synth: %d request%s, %d pairs parsed, %d not pairs, %d near-duplicates, %d over the limits%s → %d new\n",
               p.requests, p.requests == 1 ? "" : "s", p.generated, p.rejected, p.dups, p.capped,
               jg ? "" : "", n);
        if (jg) printf("synth: %d dropped by the judge\n", p.judged_out);
        if (p.no_json) printf("synth: %d repl%s held no JSON list (-v shows them)\n", p.no_json, p.no_json == 1 ? "y" : "ies");
        size_t i;
        json_t *it;
        json_array_foreach(p.items, i, it) {
            char q[100], ans[100];
            grow_first_line(jget_str(it, "question"), q, sizeof q);
            grow_first_line(jget_str(it, "answer"), ans, sizeof ans);
            printf("+ [%s from %s]\n  Q: %s\n  A: %s\n", jget_str(it, "synth_strategy"), jget_str(it, "source_section_id"), q, ans);
        }
    }
    if (!n) {
        if (!a->json) printf("synth: nothing new to add\n");
        rc = EXIT_USAGE;
        goto out;
    }
    if (a->dry) {
        if (!a->json) printf("dry run: nothing staged\n");
    } else if (a->apply) {
        int w;
        if (grow_write_items(path, p.items, "synth", &w, &e)) goto fail;
        if (!a->json) printf("synth: wrote %d auto-synth section%s to %s (dlm synth revert %s removes them)\n", w,
                            w == 1 ? "" : "s", path, path);
    } else {
        int total;
        if (grow_stage_items(pend, "synth", doc_fm(d)->dlm_id, p.items, &total, &e)) goto fail;
        if (!a->json) printf("synth: staged %d pair%s in %s (%d pending); dlm synth apply %s writes them\n", n,
                            n == 1 ? "" : "s", pend, total, path);
    }
    rc = EXIT_OK;
    goto out;
fail:
    rc = cmd_fail(ctx, &e);
out:
    json_decref(p.items);
    judge_close(jg);
    teacher_close(t);
    doc_free(d);
    return rc;
}

static json_t *synth_entry(const doc_section *s)
{
    if (!s->auto_synth) return NULL;
    return json_pack("{s:s, s:i, s:s, s:s, s:s, s:s, s:i}", "section_id", s->id, "line", s->line, "synth_teacher",
                     s->synth_teacher, "synth_strategy", s->synth_strategy, "synth_at", s->synth_at,
                     "source_section_id", s->source_section_id, "pairs", s->n_pairs);
}

static void synth_describe(const json_t *w, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s from %s", jget_str(w, "synth_strategy"), jget_str(w, "source_section_id"));
}

int cmd_synth(int argc, char **argv, dlm_ctx *ctx)
{
    /* the original's `synth preferences` is `preference mine` (same
     * options): hand the rest of the line over */
    if (argc >= 2 && !strcmp(argv[1], "preferences")) {
        char *fw[130];
        if (argc > 128) return cmd_usage_error(&spec_synth, "too many arguments");
        fw[0] = (char *)"preference";
        fw[1] = (char *)"mine";
        for (int i = 2; i < argc; i++) fw[i] = argv[i];
        fw[argc] = NULL;
        return cmd_preference(argc, fw, ctx);
    }
    synth_args a = {.teacher = "self", .strategy = "extraction", .filter = "dedup-only", .per_section = 3, .max_new = 512,
                    .seed = INT_MIN, .temp = NAN, .top_p = NAN, .threshold = NAN, .timeout = 300};
    char *pos[64];
    int npos;
    if (argc > 64) return cmd_usage_error(&spec_synth, "too many arguments");
    int r = opts_parse(&spec_synth, argc, argv, ctx, &a, pos, &npos);
    if (r) return r == 1 ? EXIT_OK : EXIT_USAGE;
    if (a.seed != INT_MIN && !strncmp(a.teacher, "anthropic:", 10))
        return cmd_usage_error(&spec_synth, "--seed: Anthropic's Messages API takes no seed");
    if (a.seed == INT_MIN) a.seed = 42;
    a.temp_set = !isnan(a.temp);
    a.top_p_set = !isnan(a.top_p);
    if (!a.temp_set) a.temp = 0.0;
    if (!a.top_p_set) a.top_p = 1.0;
    if (npos != 2) return cmd_usage_error(&spec_synth, "synth takes a subcommand (instructions, apply, revert, list) and a PATH");
    const char *sub = pos[0], *path = pos[1];
    if (!strcmp(sub, "instructions")) return cmd_instructions(ctx, &a, path);
    if (!strcmp(sub, "apply")) return grow_cmd_apply(ctx, path, "synth", "auto-synth");
    if (!strcmp(sub, "revert")) return grow_cmd_revert(ctx, path, "synth", "auto-synth", pick_auto_synth);
    if (!strcmp(sub, "list"))
        return grow_cmd_list(ctx, path, a.json, "synth", "auto-synth", "question", synth_entry, synth_describe);
    if (!strcmp(sub, "preferences"))
        return cmd_usage_error(&spec_synth, "synth preferences comes first on the line: dlm synth preferences PATH [options] (= dlm preference mine)");
    return cmd_usage_error(&spec_synth, "unknown synth subcommand '%s' (instructions, apply, revert, list)", sub);
}
