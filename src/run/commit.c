/* commit — checkpoints, resume, the version commit and the run's records.
 *
 * Checkpoints live in <store>/adapter[/<name>]/checkpoints/step-NNNNNN/ (the last two
 * are kept): training_state.bin (+ .sha256) and progress.json, which pins
 * what a bit-exact continuation needs to be the same (seed, batch shape,
 * total steps, a signature of the dataset). A version is written into a
 * hidden temp folder, fsynced, renamed to adapter/versions/vNNNN, and only
 * then made current by the atomic rewrite of adapter/current.txt. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kern/cpu.h"
#include "weights/base.h"
#include "adapter/adapter.h"
#include "run/run.h"
#include "run/vl_run.h"
#include "run/dist.h"
#include "doc/sources.h"
#include "adapter/state.h"
#include "tokens/tcache.h"
#include "util/fs.h"
#include "util/hash.h"
#include "util/json.h"
#include "util/log.h"
#include "util/timeutil.h"
#include "version.h"

static void ckpt_dir(const run *R, char *out, size_t cap)
{
    snprintf(out, cap, "%s/checkpoints", R->adir);
}

/* Newest checkpoint step (0 none); name into out. */
static int64_t newest_ckpt(const run *R, char *out, size_t cap)
{
    char dir[4200], **names;
    ckpt_dir(R, dir, sizeof dir);
    int n = fs_is_dir(dir) ? fs_list_dir(dir, &names, NULL) : 0;
    int64_t best = 0;
    for (int i = 0; i < n; i++) {
        long long s;
        char extra;
        if (sscanf(names[i], "step-%lld%c", &s, &extra) == 1 && s > best) {
            best = s;
            snprintf(out, cap, "%s/%s", dir, names[i]);
        }
    }
    if (n > 0) fs_free_list(names, n);
    return best;
}

/* A version the original DocumentLanguageModel trained keeps its optimizer
 * state as training_state.pt (a torch pickle of torch.optim's layout), and
 * the original's --resume continues from it: say that dlm cannot, and what
 * it does instead. -1 with e set for such a version, else 0. */
static int original_state(const run *R, int v, dlm_err *e)
{
    char vn[16], pt[4500], bin[4500];
    store_version_name(v, vn, sizeof vn);
    snprintf(pt, sizeof pt, "%s/versions/%s/training_state.pt", R->adir, vn);
    snprintf(bin, sizeof bin, "%s/versions/%s/training_state.bin", R->adir, vn);
    if (fs_exists(bin) || !fs_is_file(pt)) return 0;
    err_set(e, "ResumeError", "%s was trained by the original DocumentLanguageModel: its optimizer state "
            "(training_state.pt, a PyTorch pickle) cannot be continued by dlm", vn);
    return err_hint(e, "train on without --resume: 'dlm train %s' trains the next version after %s, "
                       "with the replay corpus the original wrote", R->o->doc_path, vn);
}
/* `--resume` with no checkpoint: say what the last run of this adapter did
 * instead of training on silently (issue 30) */
int run_check_resumable(run *R, dlm_err *e)
{
    if (!R->o->resume || !R->o->need_ckpt) return 0;
    store_sweep_temp(R->adir);
    char path[4400];
    if (newest_ckpt(R, path, sizeof path)) return 0;
    const json_t *runs = json_object_get(R->manifest, "training_runs"), *last = NULL;
    for (size_t i = 0; runs && i < json_array_size(runs); i++) {
        const json_t *r = json_array_get(runs, i);
        const char *an = jget_str(r, "adapter_name");
        if ((an && R->aname && !strcmp(an, R->aname)) || (!an && !R->aname)) last = r;
    }
    int v = store_current_version_of(R->store, R->aname, NULL);
    const char *st = last ? jget_str(last, "status") : NULL;
    long long rid = 0, av = 0;
    if (last) {
        jget_int(last, "run_id", &rid);
        jget_int(last, "adapter_version", &av);
    }
    if (v > 0 && original_state(R, v, e)) return -1;
    if (!last && v <= 0)
        err_set(e, "ResumeError", "nothing to resume: no run has started yet");
    else if (st && !strcmp(st, "completed") && av > 0)
        err_set(e, "ResumeError", "nothing to resume: the last run completed as v%04lld", av);
    else if (st)
        err_set(e, "ResumeError", "nothing to resume: the last run (run %lld) was %s before its first checkpoint", rid, st);
    else
        err_set(e, "ResumeError", "nothing to resume: there is no checkpoint");
    if (v > 0)
        return err_hint(e, "'dlm train %s' trains a new version from the base (--fresh also drops a leftover checkpoint);"
                        " 'dlm train %s --continue' trains v%04d further", R->o->doc_path, R->o->doc_path, v);
    return err_hint(e, "'dlm train %s' starts a run", R->o->doc_path);
}

int run_check_interrupted(run *R, dlm_err *e)
{
    /* what a process that is gone left half-removed or half-written here
     * (a failed fs_discard_tree, a killed commit) goes first */
    store_sweep_temp(R->adir);
    char path[4400];
    int64_t s = newest_ckpt(R, path, sizeof path);
    if (s && R->o->resume) {
        /* whose checkpoint: an SFT run of --phase all steps aside for the
         * preference phase's; any other mismatch is an error */
        char pj[4500];
        snprintf(pj, sizeof pj, "%s/progress.json", path);
        json_t *p = json_load_path(pj, 1 << 20, NULL);
        const char *ph = p ? jget_str(p, "phase") : NULL;
        int ck_pref = ph && strcmp(ph, "sft");
        int me_pref = R->o->phase == TRAIN_PREFERENCE;
        json_decref(p);
        if (ck_pref && !me_pref && R->o->phase_all) { R->defer = 1; return 0; }
        if (ck_pref != me_pref) {
            err_set(e, "ResumeIntegrityError", "the checkpoint at %s belongs to the %s phase", path,
                    ck_pref ? "preference" : "SFT");
            return err_hint(e, "resume it with 'dlm train %s --resume --phase %s'", R->o->doc_path,
                            ck_pref ? "preference" : "sft");
        }
    }
    if (!s || R->o->resume) return 0;
    if (R->o->fresh) {
        char dir[4200];
        ckpt_dir(R, dir, sizeof dir);
        return fs_discard_tree(dir, e);
    }
    char pj[4500];
    snprintf(pj, sizeof pj, "%s/progress.json", path);
    json_t *p = json_load_path(pj, 1 << 20, NULL);
    long long total = 0;
    if (p) jget_int(p, "total", &total);
    json_decref(p);
    err_set(e, "InterruptedRunError", "a previous run stopped after step %lld of %lld and left a checkpoint (%s)",
            (long long)s, total, path);
    return err_hint(e, "continue it exactly with 'dlm train %s --resume', or start over with --fresh", R->o->doc_path);
}

/* sha256 of the base weights: the HF cache names LFS blobs by their sha256,
 * so a symlink into blobs/<64 hex> is read, not hashed; other files are
 * hashed once per content and remembered in <home>/cache/weights.json by
 * (path, size, inode, mtime, ctime), so every document on that base, and
 * every later start, reads the digest instead (-v says which). */
static int file_sha(run *R, const char *path, char out[65], dlm_err *e)
{
    char target[4096];
    ssize_t n = readlink(path, target, sizeof target - 1);
    if (n > 0) {
        target[n] = 0;
        const char *b = fs_basename(target);
        if (strlen(b) == 64 && strspn(b, "0123456789abcdef") == 64) { memcpy(out, b, 65); return 0; }
    }
    char real[4096];
    if (!realpath(path, real)) snprintf(real, sizeof real, "%s", path);
    struct stat st;
    if (stat(real, &st) != 0) return err_sys(e, "cannot stat '%s'", real);
    char cache[4200], key[4400];
    snprintf(cache, sizeof cache, "%s/cache/weights.json", R->o->home);
    /* nanosecond mtime and ctime plus the inode: a same-second rewrite or a
     * replaced file is never mistaken for the hashed one */
    snprintf(key, sizeof key, "%s|%lld|%lld|%lld.%09ld|%lld.%09ld", real, (long long)st.st_size,
             (long long)st.st_ino, (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec, (long long)st.st_ctim.tv_sec,
             st.st_ctim.tv_nsec);
    json_t *c = fs_is_file(cache) ? json_load_path(cache, 1 << 20, NULL) : NULL;
    if (!json_is_object(c)) { json_decref(c); c = json_object(); }
    const char *hit = jget_str(c, key);
    if (hit && strlen(hit) == 64) {
        memcpy(out, hit, 65);
        json_decref(c);
        log_debug("base sha256: %.12s… of %s from %s (not re-read)", out, real, cache);
        return 0;
    }
    char label[64];
    snprintf(label, sizeof label, "hashing %.48s", fs_basename(real));
    if (sha256_file_hex_progress(real, label, out, e)) { json_decref(c); return -1; }
    log_debug("base sha256: %.12s… of %s hashed (%lld bytes read), remembered in %s", out, real,
              (long long)st.st_size, cache);
    json_object_set_new(c, key, json_string(out));
    char cdir[4200];
    snprintf(cdir, sizeof cdir, "%s/cache", R->o->home);
    if (!fs_mkdir_p(cdir, NULL)) json_save_file(cache, c, NULL);
    json_decref(c);
    return 0;
}

static int weights_sha(run *R, dlm_err *e)
{
    if (!fs_is_dir(R->model_path)) return file_sha(R, R->model_path, R->weights_sha, e);
    char **names;
    int n = fs_list_dir(R->model_path, &names, e);
    if (n < 0) return -1;
    sha256_ctx c;
    sha256_init(&c);
    for (int i = 0; i < n; i++) {
        if (!str_endswith(names[i], ".safetensors")) continue;
        char p[4400], h[65];
        snprintf(p, sizeof p, "%s/%s", R->model_path, names[i]);
        if (file_sha(R, p, h, e)) { fs_free_list(names, n); return -1; }
        sha256_update(&c, names[i], strlen(names[i]));
        sha256_update(&c, "\n", 1);
        sha256_update(&c, h, 64);
        sha256_update(&c, "\n", 1);
    }
    fs_free_list(names, n);
    unsigned char d[32];
    sha256_final(&c, d);
    hex_encode(d, 32, R->weights_sha);
    return 0;
}

int run_lock_facts(run *R, dlm_err *e)
{
    size_t len;
    const char *raw = doc_raw(R->doc, &len);
    sha256_hex(raw, len, R->dlm_sha);
    if (weights_sha(R, e)) return -1;
    if (R->base.kind == BASE_REGISTRY) snprintf(R->revision, sizeof R->revision, "%s", R->base.entry->revision);
    else if (R->base.kind == BASE_HF) snprintf(R->revision, sizeof R->revision, "%s", R->base.revision[0] ? R->base.revision : "main");
    else snprintf(R->revision, sizeof R->revision, "local:%.16s", R->weights_sha);
    R->facts = (lock_facts){doc_fm(R->doc)->dlm_id, R->dlm_sha, R->base_spec, R->revision, R->weights_sha,
                            (int64_t)R->seed, cpu_level_name(cpu_level()), "strong", R->run_id, dist_size(),
                            R->prec.name};
    /* A signature of everything the batches are made of. */
    sha256_ctx c;
    sha256_init(&c);
    sha256_update(&c, R->P.data.ds->tok, (size_t)R->P.data.ds->n_tok * sizeof(int32_t));
    if (R->pref) {   /* the preference phase trains on the pairs */
        sha256_update(&c, "pref", 4);
        sha256_update(&c, R->ps->tok, (size_t)R->ps->n_tok * sizeof(int32_t));
        sha256_update(&c, R->ps->tgt, (size_t)R->ps->n_tok * sizeof(int32_t));
    }
    sha256_update(&c, R->P.data.ds->tgt, (size_t)R->P.data.ds->n_tok * sizeof(int32_t));
    for (int i = 0; i < R->P.data.ds->n_items; i++) {
        const ds_item *it = &R->P.data.ds->items[i];
        int64_t v[3] = {it->off, it->len, it->val};
        sha256_update(&c, v, sizeof v);
    }
    unsigned char d[32];
    sha256_final(&c, d);
    hex_encode(d, 32, R->data_sig);
    return 0;
}

/* The newest checkpoint older than `below` whose progress.json parses and
 * whose training_state.bin passes its sha256 and structure checks (0 none). */
static int64_t older_intact(const run *R, int64_t below, char *out, size_t cap)
{
    char dir[4200], **names;
    ckpt_dir(R, dir, sizeof dir);
    int n = fs_is_dir(dir) ? fs_list_dir(dir, &names, NULL) : 0;
    int64_t best = 0;
    for (int i = 0; i < n; i++) {
        long long s;
        char extra;
        if (sscanf(names[i], "step-%lld%c", &s, &extra) != 1 || s >= below || s <= best) continue;
        char p[4600];
        snprintf(p, sizeof p, "%s/%s/progress.json", dir, names[i]);
        json_t *pj = json_load_path(p, 1 << 20, NULL);
        if (!pj) continue;
        json_decref(pj);
        snprintf(p, sizeof p, "%s/%s/training_state.bin", dir, names[i]);
        train_state st;
        dlm_err e2;
        err_clear(&e2);
        if (state_load(p, &st, &e2)) continue;
        state_free(&st);
        best = s;
        snprintf(out, cap, "%s/%s", dir, names[i]);
    }
    if (n > 0) fs_free_list(names, n);
    return best;
}

/* The newest checkpoint is corrupt: name an intact older one and the
 * command that resumes from it (the corrupt one is set aside, not deleted:
 * a name other than step-NNNNNN is never read as a checkpoint). */
static int corrupt_ckpt(run *R, const char *newest, dlm_err *e)
{
    if (!strcmp(e->kind, "MemoryError")) return -1;
    char older[4400];
    int64_t s = older_intact(R, INT64_MAX, older, sizeof older);
    char nb[4400];
    snprintf(nb, sizeof nb, "%s", newest);
    if (!s || !strcmp(older, nb)) {
        if (strcmp(e->kind, "ResumeIntegrityError")) {
            char msg[sizeof e->msg];
            snprintf(msg, sizeof msg, "%s", e->msg);
            err_set(e, "ResumeIntegrityError", "%s", msg);
        }
        return err_hint(e, "no intact checkpoint is left; start over with 'dlm train %s --fresh'", R->o->doc_path);
    }
    char msg[sizeof e->msg];
    snprintf(msg, sizeof msg, "%s; the older checkpoint %s (step %lld) is intact", e->msg, older, (long long)s);
    err_set(e, "ResumeIntegrityError", "%s", msg);
    /* the run's --max-steps too: the checkpoint pins its number of steps */
    char ms[40] = "";
    if (R->o->max_steps > 0) snprintf(ms, sizeof ms, " --max-steps %lld", (long long)R->o->max_steps);
    return err_hint(e, "resume from it: mv '%s' '%s-corrupt' && dlm train %s --resume%s", nb, nb, R->o->doc_path, ms);
}

/* --resume continues bytes trained with one numerics: a checkpoint or
 * version of the other precision is refused (records from before
 * training.precision was honoured trained in fp32). */
static int same_precision(const run *R, const char *was, const char *what, dlm_err *e)
{
    if (!was) was = "fp32";
    if (!strcmp(was, R->prec.name)) return 0;
    err_set(e, "ResumeIntegrityError", "%s was trained with precision %s; this run would train with %s", what, was,
            R->prec.name);
    return err_hint(e, "set training.precision: %s in %s to continue it, or start over with 'dlm train %s --fresh'",
                    was, R->o->doc_path, R->o->doc_path);
}

int run_start_or_resume(run *R, dlm_err *e)
{
    char path[4400], sp[4600];
    time_iso_utc(time_now(), R->started_at, sizeof R->started_at);
    if (!R->o->resume) return R->pref ? pref_init_policy(R, e) : lora_init(R->l, R->m, R->seed, e);
    train_state st;
    int64_t step = newest_ckpt(R, path, sizeof path);
    if (step) {
        char pj[4500];
        snprintf(pj, sizeof pj, "%s/progress.json", path);
        json_t *p = json_load_path(pj, 1 << 20, e);
        if (!p) {
            err_set(e, "ResumeIntegrityError", "%s is unreadable: %s", pj, e->msg);
            return corrupt_ckpt(R, path, e);
        }
        long long rid = 0, tot = 0, mb = 0, ga = 0, seed = 0;
        const char *sig = jget_str(p, "data_signature"), *lp = jget_str(p, "log_path"), *sa = jget_str(p, "started_at");
        jget_int(p, "run_id", &rid);
        jget_int(p, "total", &tot);
        jget_int(p, "micro_batch_size", &mb);
        jget_int(p, "grad_accum", &ga);
        jget_int(p, "seed", &seed);
        char what[64];
        snprintf(what, sizeof what, "the checkpoint at step %lld", (long long)step);
        if (same_precision(R, jget_str(p, "precision"), what, e)) {
            json_decref(p);
            return -1;
        }
        const char *why = !sig || strcmp(sig, R->data_sig) ? "the document or the tokenizer changed"
                          : tot != R->total ? "the number of steps changed"
                          : mb != R->micro_batch || ga != R->grad_accum ? "micro_batch_size/grad_accum changed"
                          : (uint64_t)seed != R->seed ? "the seed changed" : NULL;
        if (why) {
            json_decref(p);
            err_set(e, "ResumeIntegrityError", "cannot continue the checkpoint at step %lld exactly: %s", (long long)step, why);
            return err_hint(e, "restore what changed, or start over with 'dlm train %s --fresh'", R->o->doc_path);
        }
        R->run_id = rid;
        const json_t *fl = json_object_get(p, "first_loss"), *bl = json_object_get(p, "best_loss");
        if (json_is_number(fl)) {
            R->first_loss = json_number_value(fl);
            R->have_first = 1;
        }
        if (json_is_number(bl)) R->best_loss = json_number_value(bl);
        if (lp) snprintf(R->log_path, sizeof R->log_path, "%s", lp);
        if (sa) snprintf(R->started_at, sizeof R->started_at, "%s", sa);
        json_decref(p);
        snprintf(sp, sizeof sp, "%s/training_state.bin", path);
        if (pref_load_ref(R, path, e)) return -1;
        if (run_embed_load(R, path, e)) return corrupt_ckpt(R, path, e);
    } else if (R->pref) {
        /* no preference checkpoint: the phase starts from the current version */
        return pref_init_policy(R, e);
    } else {
        int v = store_current_version_of(R->store, R->aname, NULL);
        if (v <= 0) {
            err_set(e, "ResumeError", "nothing to resume: no checkpoint and no trained version");
            return err_hint(e, "train first with 'dlm train %s'", R->o->doc_path);
        }
        char vn[16];
        store_version_name(v, vn, sizeof vn);
        if (original_state(R, v, e)) return -1;
        char tj[4500], what[64];
        snprintf(tj, sizeof tj, "%s/versions/%s/training_run.json", R->adir, vn);
        dlm_err je;   /* an unreadable record: the state's own checks decide */
        json_t *trj = fs_is_file(tj) ? json_load_path(tj, 1 << 24, &je) : NULL;
        snprintf(what, sizeof what, "version %s", vn);
        int bad = same_precision(R, trj ? jget_str(trj, "precision") : NULL, what, e);
        json_decref(trj);
        if (bad) return -1;
        snprintf(sp, sizeof sp, "%s/versions/%s/training_state.bin", R->adir, vn);
        char vd[4400];
        snprintf(vd, sizeof vd, "%s/versions/%s", R->adir, vn);
        if (run_embed_from_version(R, vd, e)) return -1;   /* its modules_to_save, if any */
    }
    if (state_load(sp, &st, e)) return step ? corrupt_ckpt(R, path, e) : -1;
    if (st.n != R->l->n) {
        state_free(&st);
        err_set(e, "ResumeIntegrityError", "training_state.bin holds %llu parameters, this adapter has %zu",
                (unsigned long long)st.n, R->l->n);
        return err_hint(e, "the adapter settings changed; start over with 'dlm train %s --fresh'", R->o->doc_path);
    }
    if (run_optim_restore(R, &st, sp, e)) {
        state_free(&st);
        return -1;
    }
    memcpy(R->l->w, st.params, st.n * 4);
    R->resumed = 1;
    if (step) {
        R->start_step = (int64_t)st.step;
        R->best_val = st.best_val;
        R->best_step = (int64_t)st.best_step;
        R->bad_evals = (int)st.bad_evals;
        R->last_loss = st.last_loss;
        if (st.best && R->best) memcpy(R->best, st.best, st.n * 4);
    } else {
        /* continuing a committed version: a new run, Adam's step count goes on */
        R->t_offset = (int64_t)st.step;
    }
    state_free(&st);
    return 0;
}

int run_begin_records(run *R, dlm_err *e)
{
    if (!R->log_path[0]) {
        char stamp[24];
        time_stamp_utc(time_now(), stamp, sizeof stamp);
        snprintf(R->log_path, sizeof R->log_path, "%s/logs/train-%06lld-%s.jsonl", R->store, (long long)R->run_id, stamp);
    }
    R->log = fopen(R->log_path, "a");
    if (!R->log) return err_sys(e, "cannot open the run log '%s'", R->log_path);
    json_t *b = json_pack("{s:s, s:I, s:s, s:s, s:s, s:I, s:I, s:I, s:i, s:i, s:i, s:b, s:I, s:i, s:I, s:I, s:s, s:s}",
                          "type", R->resumed && R->start_step ? "resume" : "banner", "run_id", (json_int_t)R->run_id,
                          "dlm_version", DLM_VERSION, "base_model", R->base_spec, "model_path", R->model_path,
                          "seed", (json_int_t)R->seed, "start_step", (json_int_t)R->start_step, "total_steps",
                          (json_int_t)R->total, "micro_batch_size", R->micro_batch, "grad_accum", R->grad_accum, "seq_len", R->T,
                          "recompute", R->plan.recompute, "train_items", (json_int_t)R->P.data.ds->n_train, "val_items",
                          R->P.data.ds->n_val, "train_loss_tokens", (json_int_t)R->P.data.ds->train_loss_tokens, "plan_bytes",
                          (json_int_t)R->plan.total, "isa", cpu_level_name(cpu_level()), "at", R->started_at);
    /* the plan buffer by buffer, so a log says where the memory went */
    json_t *items = json_object();
    for (int i = 0; i < R->plan.n_items; i++)
        json_object_set_new(items, R->plan.items[i].name, json_integer((json_int_t)R->plan.items[i].bytes));
    json_object_set_new(b, "plan_items", items);
    json_object_set_new(b, "threads", json_integer(R->threads));
    json_object_set_new(b, "precision", json_string(R->prec.name));
    json_object_set_new(b, "precision_how", json_string(R->prec.how));
    if (!R->pref) json_object_set_new(b, "cpt", cpt_json(&R->cpt, &R->optim));
    /* the validation split and every row it holds out (issue 30) */
    if (!R->pref) json_object_set_new(b, "validation", pipeline_split_json(&R->P.data, R->doc));
    char *s = json_dumps(b, JSON_COMPACT);
    fprintf(R->log, "%s\n", s);
    fflush(R->log);
    free(s);
    json_decref(b);
    if (metrics_open(R->store, &R->met, e)) return -1;
    metrics_set_strict(R->met, R->o->strict_metrics);
    return metrics_run_start(R->met, R->run_id, R->started_at, 0, pref_phase_name(R), (int64_t)R->seed, e);
}

void run_log_step(run *R, int64_t step, double loss, double gn, double tps, double step_s)
{
    char now[24];
    time_iso_utc(time_now(), now, sizeof now);
    if (R->log) {
        char l[32], g[32], r[32];
        json_fmt_double(loss, l, sizeof l);
        json_fmt_double(gn, g, sizeof g);
        json_fmt_double(R->last_lr, r, sizeof r);
        char rw[256] = "";
        if (R->pref) {
            char a[32], b[32], c[32], d[32];
            json_fmt_double(R->rw_chosen, a, sizeof a);
            json_fmt_double(R->rw_rejected, b, sizeof b);
            json_fmt_double(R->rw_margin, c, sizeof c);
            json_fmt_double(R->rw_acc, d, sizeof d);
            snprintf(rw, sizeof rw, "\"rewards/chosen\":%s,\"rewards/rejected\":%s,\"rewards/margins\":%s,"
                     "\"rewards/accuracies\":%s,", a, b, c, d);
        } else {
            /* rows the step's items filled: training.packing puts several
             * short items in one row (the math is the same either way) */
            snprintf(rw, sizeof rw, "\"rows\":%lld,", (long long)R->step_rows);
        }
        fprintf(R->log, "{\"type\":\"step\",\"step\":%lld,\"total\":%lld,\"loss\":%s,\"grad_norm\":%s,\"lr\":%s,"
                        "%s\"tokens_per_sec\":%.1f,\"step_s\":%.4f,\"at\":\"%s\"}\n",
                (long long)step, (long long)R->total, l, g, r, rw, tps, step_s, now);
        fflush(R->log);
    }
    metrics_step(R->met, R->run_id, step, loss, R->last_lr, gn, tps, now);
    if (R->pref) metrics_pref_step(R->met, R->run_id, step, R->rw_chosen, R->rw_rejected, R->rw_margin, R->rw_acc);
}

void run_log_eval(run *R, int64_t step, double val)
{
    char now[24], v[32];
    time_iso_utc(time_now(), now, sizeof now);
    json_fmt_double(val, v, sizeof v);
    if (R->log) {
        fprintf(R->log, "{\"type\":\"eval\",\"step\":%lld,\"val_loss\":%s,\"at\":\"%s\"}\n", (long long)step, v, now);
        fflush(R->log);
    }
    metrics_eval(R->met, R->run_id, step, val, now);
}

static train_state make_state(run *R, int64_t step)
{
    train_state s = {.step = (uint64_t)step, .total_steps = (uint64_t)R->total,
                     .micro = (uint64_t)step * (uint64_t)R->grad_accum, .seed = R->seed, .n = R->l->n,
                     .best_val = R->best_val, .best_step = (uint64_t)R->best_step, .bad_evals = (uint32_t)R->bad_evals,
                     .last_loss = R->last_loss, .params = R->l->w, .best = R->best};
    run_optim_fill_state(R, &s);   /* the moments: 32-bit or 8-bit (run/optstate.c) */
    return s;
}

int run_checkpoint(run *R, int64_t step, dlm_err *e)
{
    char dir[4200], tmp[4400], fin[4400], p[4600];
    ckpt_dir(R, dir, sizeof dir);
    if (fs_mkdir_p(dir, e)) return -1;
    snprintf(tmp, sizeof tmp, "%s/.tmp-%d", dir, (int)getpid());
    snprintf(fin, sizeof fin, "%s/step-%06lld", dir, (long long)step);
    fs_remove_tree(tmp, NULL);
    if (fs_mkdir_p(tmp, e)) return -1;
    train_state s = make_state(R, step);
    snprintf(p, sizeof p, "%s/training_state.bin", tmp);
    if (state_save_buf(p, &s, &R->ckbuf, e) || pref_save_ref(R, tmp, e) || run_embed_save(R, tmp, e)) goto fail;
    json_t *pj = json_pack("{s:s, s:I, s:I, s:I, s:I, s:i, s:i, s:s, s:s, s:s}", "phase", pref_phase_name(R), "run_id", (json_int_t)R->run_id, "step",
                           (json_int_t)step, "total", (json_int_t)R->total, "seed", (json_int_t)R->seed,
                           "micro_batch_size", R->micro_batch, "grad_accum", R->grad_accum, "data_signature", R->data_sig, "log_path",
                           R->log_path, "started_at", R->started_at);
    json_object_set_new(pj, "precision", json_string(R->prec.name));
    /* the run's first loss and the best evaluation's step loss: a resumed
     * run reports the same numbers as an uninterrupted one */
    json_object_set_new(pj, "first_loss", json_real(R->first_loss));
    json_object_set_new(pj, "best_loss", isfinite(R->best_loss) ? json_real(R->best_loss) : json_null());
    snprintf(p, sizeof p, "%s/progress.json", tmp);
    int rc = json_save_file(p, pj, e);
    json_decref(pj);
    if (rc) goto fail;
    if (fs_discard_tree(fin, e)) goto fail;
    if (rename(tmp, fin) != 0) { err_sys(e, "cannot rename checkpoint to '%s'", fin); goto fail; }
    if (fs_fsync_dir(dir, e)) return -1;
    /* keep the last two */
    char **names;
    int n = fs_list_dir(dir, &names, NULL), kept = 0;
    for (int i = n - 1; i >= 0; i--) {
        if (strncmp(names[i], "step-", 5)) continue;
        if (++kept > 2) {
            snprintf(p, sizeof p, "%s/%s", dir, names[i]);
            fs_discard_tree(p, NULL);   /* never a half-removed step-NNNNNN */
        }
    }
    if (n > 0) fs_free_list(names, n);
    if (R->log) {
        fprintf(R->log, "{\"type\":\"checkpoint\",\"step\":%lld,\"path\":\"%s\"}\n", (long long)step, fin);
        fflush(R->log);
    }
    return 0;
fail:
    fs_remove_tree(tmp, NULL);
    return -1;
}

static int write_version(run *R, const char *tmp, dlm_err *e)
{
    adapter_meta meta = {R->base.kind == BASE_REGISTRY ? R->base.entry->hf_id
                         : R->base.kind == BASE_HF ? R->base.hf_id : R->model_path,
                         R->base.kind == BASE_PATH || R->base.kind == BASE_TINY ? NULL : R->revision};
    if (adapter_save(tmp, R->l, &meta, e)) return -1;
    char p[4600];
    /* the base's tokenizer files beside the adapter, as the original's
     * tokenizer.save_pretrained(adapter_dir) leaves them: its prompt,
     * export and retrain load the tokenizer from the version folder */
    static const char *const TOKF[] = {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                                       "chat_template.jinja", "tokenizer.model"};
    for (size_t i = 0; fs_is_dir(R->model_path) && i < sizeof TOKF / sizeof TOKF[0]; i++) {
        char src[4400];
        snprintf(src, sizeof src, "%s/%s", R->model_path, TOKF[i]);
        snprintf(p, sizeof p, "%s/%s", tmp, TOKF[i]);
        if (fs_is_file(src) && fs_copy_file(src, p, e)) return -1;
    }
    train_state s = make_state(R, R->steps_done);
    snprintf(p, sizeof p, "%s/training_state.bin", tmp);
    if (state_save_buf(p, &s, &R->ckbuf, e)) return -1;
    json_t *cfg = doc_frontmatter_json(R->doc);
    /* the adapter was trained on a quantized base when any projection it
     * adapts is stored quantized: the exporter refuses to merge it then */
    int quant = 0;
    for (int l = 0; l < R->m->cfg.n_layer; l++)
        for (int mm = 0; mm < LM_COUNT; mm++)
            if (lora_mod_at(R->l, l, mm) && dtype_is_quant(lora_base_weight(R->m, l, mm)->type)) quant = 1;
    /* the original's sidecar, for its tools (run/ptstate.c) */
    if (run_write_torch_state(R, tmp, &s, quant, e)) { json_decref(cfg); return -1; }
    json_t *tr = json_pack("{s:s, s:b, s:s, s:s, s:s, s:I, s:I, s:i, s:i, s:i, s:b, s:I, s:I, s:i, s:i, s:o}",
                           "phase", pref_phase_name(R), "use_qlora", quant, "base_model", R->base_spec, "base_model_revision", R->revision,
                           "base_model_sha256", R->weights_sha, "seed", (json_int_t)R->seed, "steps",
                           (json_int_t)R->steps_done, "micro_batch_size", R->micro_batch, "grad_accum", R->grad_accum, "seq_len", R->T,
                           "recompute", R->plan.recompute, "train_items", (json_int_t)R->P.data.ds->n_train,
                           "train_loss_tokens", (json_int_t)R->P.data.ds->train_loss_tokens, "replay_sections", R->P.data.n_replay,
                           "new_sections", R->P.data.n_new, "frontmatter", cfg ? cfg : json_null());
    if (R->pref) {   /* the preference phase's pairs: the document's, and those replayed (tokens/replay.h) */
        json_object_set_new(tr, "replay_sections", json_integer(R->pref_replay_sections));
        json_object_set_new(tr, "pref_pairs", json_pack("{s:i, s:i}", "document", R->ps->n_pairs - R->ps->n_replay,
                                                        "replay", R->ps->n_replay));
    }
    /* the numerics the adapter was trained with (run/precision.h) */
    json_object_set_new(tr, "precision", json_string(R->prec.name));
    /* the optimizer the moments were kept with (run/optstate.c) */
    json_object_set_new(tr, "optimizer", json_string(doc_optimizer_names[doc_fm(R->doc)->training.optimizer]));
    /* training.cpt: the schedule chosen and why (run/cpt.h) */
    if (!R->pref) json_object_set_new(tr, "cpt", cpt_json(&R->cpt, &R->optim));
    if (!R->pref && (R->P.data.ds->rows_weight_dropped || R->P.data.ds->rows_weight_extra))
        json_object_set_new(tr, "tag_weights", json_pack("{s:i, s:i}", "rows_dropped", R->P.data.ds->rows_weight_dropped,
                                                          "copies_added", R->P.data.ds->rows_weight_extra));
    /* training.multi_turn: the conversation rows trained (tokens/dataset.h) */
    if (!R->pref && R->P.data.ds->rows_conv)
        json_object_set_new(tr, "multi_turn", json_pack("{s:i, s:i, s:i}", "rows_per_pair",
                                                        (int)doc_fm(R->doc)->training.multi_turn, "rows",
                                                        R->P.data.ds->rows_conv, "shortened", R->P.data.ds->rows_conv_short));
    /* what training.sources contributed: per-directive counts, each kept file's path, size, sha256 */
    const src_report *srcs = doc_sources_report(R->doc);
    if (srcs) json_object_set_new(tr, "sources", src_report_json(srcs, 2));
    if (R->cache) {   /* training.cache: how many sections came from it */
        int64_t hits, misses;
        tcache_counts(R->cache, &hits, &misses);
        json_object_set_new(tr, "tokenization_cache", json_pack("{s:I, s:I}", "hits", (json_int_t)hits, "misses",
                                                                (json_int_t)misses));
    }
    /* --listen-rpc: the probes this cycle trained (cmd_train.c) */
    if (R->o->injected) json_object_set(tr, "injected_probes", (json_t *)R->o->injected);
    snprintf(p, sizeof p, "%s/training_run.json", tmp);
    int rc = json_save_file(p, tr, e);
    json_decref(tr);
    return rc;
}

int run_commit(run *R, dlm_err *e)
{
    R->commit_step = R->steps_done;
    R->commit_loss = R->last_loss;
    R->commit_val = !R->pref && R->P.data.ds->n_val ? R->last_val : NAN;
    if (R->early && R->best && R->best_step > 0) {
        memcpy(R->l->w, R->best, R->l->n * sizeof(float));
        run_embed_restore_best(R);   /* the embeddings of that evaluation too */
        R->last_val = R->best_val;
        R->commit_step = R->best_step;
        R->commit_loss = R->best_loss;
        R->commit_val = R->best_val;
    }
    int v = store_next_version_of(R->store, R->aname, e);
    if (v <= 0) return -1;
    char vdir[4200], tmp[4400], vn[16];
    store_version_name(v, vn, sizeof vn);
    snprintf(vdir, sizeof vdir, "%s/versions/%s", R->adir, vn);
    snprintf(tmp, sizeof tmp, "%s/versions/.%s.tmp-%d", R->adir, vn, (int)getpid());
    fs_remove_tree(tmp, NULL);
    if (fs_mkdir_p(tmp, e)) return -1;
    if (write_version(R, tmp, e)) {
        fs_remove_tree(tmp, NULL);
        err_prefix(e, "commit of %s failed (the current version is unchanged)", vn);
        return -1;
    }
    if (rename(tmp, vdir) != 0) {
        err_sys(e, "cannot rename '%s' to '%s'", tmp, vdir);
        fs_remove_tree(tmp, NULL);
        return -1;
    }
    char vparent[4200];
    snprintf(vparent, sizeof vparent, "%s/versions", R->adir);
    fs_fsync_dir(vparent, NULL);
    if (!lora_all_finite(R->l)) {
        char rej[4300];
        for (int k = 0;; k++) {
            if (k) snprintf(rej, sizeof rej, "%s-rejected-%d", vdir, k);
            else snprintf(rej, sizeof rej, "%s-rejected", vdir);
            if (!fs_exists(rej)) break;
        }
        rename(vdir, rej);
        err_set(e, "NaNWeightsError", "the trained adapter has non-finite weights; kept for inspection at %s", rej);
        return err_hint(e, "lower training.learning_rate; the previous version stays current");
    }
    if (store_set_current_of(R->store, R->aname, v, e)) return -1;
    R->version = v;
    snprintf(R->version_dir, sizeof R->version_dir, "%s", vdir);
    /* From here the version is committed: the records below must not undo it. */
    dlm_err e2;
    const doc_training *tr = &doc_fm(R->doc)->training;
    if (replay_commit(R->P.data.rp, R->doc, R->run_id, (uint64_t)tr->replay.max_bytes, &e2))
        log_warn("replay corpus not updated: %s", e2.msg);
    char now[24], stamp[24], sum_rel[256], sum_path[4400], sha[65], csha[65], p[4600];
    time_iso_utc(time_now(), now, sizeof now);
    time_stamp_utc(time_now(), stamp, sizeof stamp);
    snprintf(sum_rel, sizeof sum_rel, "logs/train-%06lld-%s.summary.json", (long long)R->run_id, stamp);
    snprintf(sum_path, sizeof sum_path, "%s/%s", R->store, sum_rel);
    double val = R->commit_val;
    json_t *wd = R->pref ? NULL : src_weight_distribution(doc_sources_report(R->doc));
    json_t *rec = json_pack("{s:I, s:s, s:s, s:i, s:s, s:I, s:I, s:f, s:o, s:s, s:{}, s:s, s:n, s:o}",
                            "run_id", (json_int_t)R->run_id, "started_at", R->started_at, "ended_at", now,
                            "adapter_version", v, "base_model_revision", R->revision, "seed", (json_int_t)R->seed,
                            "steps", (json_int_t)R->steps_done, "final_train_loss", R->commit_loss, "final_val_loss",
                            isfinite(val) ? json_real(val) : json_null(), "status", "completed", "pinned_versions",
                            "summary_path", sum_rel, "adapter_name", "weight_distribution", wd ? wd : json_null());
    if (rec && R->aname) json_object_set_new(rec, "adapter_name", json_string(R->aname));
    json_t *m = R->manifest;
    if (manifest_add_run(m, rec, &e2)) log_warn("manifest: %s", e2.msg);
    json_decref(rec);
    /* the top-level adapter_* fields describe the flat adapter; a named
     * adapter's version is in its run record and its current.txt */
    if (!R->aname) {
        json_object_set_new(m, "adapter_version", json_integer(v));
        snprintf(p, sizeof p, "%s/adapter_model.safetensors", vdir);
        if (!sha256_file_hex(p, sha, NULL)) json_object_set_new(m, "adapter_sha256", json_string(sha));
        snprintf(p, sizeof p, "%s/adapter_config.json", vdir);
        if (!sha256_file_hex(p, csha, NULL)) json_object_set_new(m, "adapter_config_sha256", json_string(csha));
    }
    json_object_set_new(m, "base_model", json_string(R->base_spec));
    json_object_set_new(m, "base_model_revision", json_string(R->revision));
    json_object_set_new(m, "base_model_sha256", json_string(R->weights_sha));
    /* a named adapter trained a share of the sections: the others' stay */
    json_t *old = R->aname ? json_object_get(m, "content_hashes") : NULL;
    json_t *ch = json_is_object(old) ? json_deep_copy(old) : json_object();
    for (int i = 0; i < doc_nsections(R->doc); i++) {
        const char *id = doc_section_at(R->doc, i)->id;
        json_object_set_new(ch, id, json_string(id));
    }
    json_object_set_new(m, "content_hashes", ch);
    json_t *pv = json_object_get(m, "pinned_versions");
    if (json_is_object(pv)) json_object_set_new(pv, "dlm", json_string(DLM_VERSION));
    if (manifest_save(R->manifest_path, m, &e2)) log_warn("manifest not saved: %s", e2.msg);
    if (R->o->lock != LOCK_IGNORE) {
        R->facts.last_run_id = R->run_id;
        if (dlmlock_write(R->rdir, &R->facts, &e2)) log_warn("dlm.lock not written: %s", e2.msg);
    }
    json_t *sum = json_pack("{s:I, s:i, s:s, s:I, s:I, s:f, s:f, s:o, s:f, s:i, s:i, s:i, s:I, s:i, s:i, s:b}",
                            "run_id", (json_int_t)R->run_id, "adapter_version", v, "version_dir", vdir, "steps",
                            (json_int_t)R->steps_done, "total_steps", (json_int_t)R->total, "first_loss",
                            R->first_loss, "final_loss", R->commit_loss, "val_loss",
                            isfinite(val) ? json_real(val) : json_null(), "seconds", time_mono() - R->t0,
                            "train_items", R->P.data.ds->n_train, "val_items", R->P.data.ds->n_val, "replay_sections", R->P.data.n_replay,
                            "train_loss_tokens", (json_int_t)R->P.data.ds->train_loss_tokens, "micro_batch_size", R->micro_batch,
                            "grad_accum", R->grad_accum, "early_stopped", R->early);
    json_object_set_new(sum, "committed_step", json_integer((json_int_t)R->commit_step));
    json_save_file(sum_path, sum, NULL);
    json_decref(sum);
    if (R->log) {
        fprintf(R->log, "{\"type\":\"run_complete\",\"version\":%d,\"steps\":%lld,\"at\":\"%s\"}\n", v,
                (long long)R->steps_done, now);
        fflush(R->log);
    }
    if (R->met) metrics_run_end(R->met, R->run_id, now, "completed", v, &e2);
    if (R->met && metrics_run_result(R->met, R->run_id, R->commit_step, R->steps_done, R->first_loss, R->commit_loss,
                                     R->commit_val, R->early, &e2))
        log_warn("metrics: %s", e2.msg);
    char cdir[4200];
    ckpt_dir(R, cdir, sizeof cdir);
    /* a kill here must not leave a step-NNNNNN without its progress.json
     * that the next --resume would take for the newest checkpoint */
    fs_discard_tree(cdir, NULL);
    return 0;
}

void run_end_records(run *R, const char *status)
{
    char now[24];
    time_iso_utc(time_now(), now, sizeof now);
    if (R->log) {
        fprintf(R->log, "{\"type\":\"run_%s\",\"step\":%lld,\"at\":\"%s\"}\n", status, (long long)R->steps_done, now);
        fflush(R->log);
    }
    dlm_err e2;
    if (R->met) metrics_run_end(R->met, R->run_id, now, status, 0, &e2);
}

void run_log_memory(run *R)
{
    if (!R->log) return;
    fprintf(R->log, "{\"type\":\"memory\",\"plan_bytes\":%llu,\"peak_rss_bytes\":%llu,\"peak_vm_bytes\":%llu,"
                    "\"threads\":%d}\n",
            (unsigned long long)R->plan.total, (unsigned long long)plan_peak_rss(),
            (unsigned long long)plan_peak_vm(), R->threads);
    fflush(R->log);
}

void run_free(run *R)
{
    sb_free(&R->ckbuf);
    pref_free_run(R);
    if (R->log) fclose(R->log);
    metrics_close(R->met);
    decoder_free(R->dec);
    free(R->g);
    free(R->mom);
    free(R->vel);
    run_optim_free(R);
    free(R->best);
    free(R->btok);
    free(R->aemb);
    free(R->antok);
    free(R->bemb);
    free(R->btgt);
    free(R->bpos);
    free(R->bseg);
    vl_run_free(R);
    free(R->items);
    free(R->emb_g);
    free(R->emb_m);
    free(R->emb_v);
    free(R->emb_best);
    lora_free(R->l);
    prep_free(&R->P);
    tcache_close(R->cache);
    model_free(R->m);
    json_decref(R->manifest);
    if (R->lk.held) store_lock_release(&R->lk);
    doc_free(R->doc);
    free(R);
}

int run_ckpt_grad_accum(run *R)
{
    char path[4400], pj[4500];
    if (!newest_ckpt(R, path, sizeof path)) return 0;
    snprintf(pj, sizeof pj, "%s/progress.json", path);
    dlm_err e = {0};
    json_t *p = json_load_path(pj, 1 << 20, &e);
    if (!p) return 0;    /* run_start_or_resume reports it */
    long long ga = 0;
    jget_int(p, "grad_accum", &ga);
    json_decref(p);
    return ga > 0 && ga <= INT32_MAX ? (int)ga : 0;
}
