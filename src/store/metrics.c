#include "store/metrics.h"

#include <math.h>
#include <stdio.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sqlite3.h>

#include "util/fs.h"
#include "util/log.h"
#include "util/timeutil.h"

struct metrics {
    sqlite3 *db;
    sqlite3_stmt *step, *eval, *pref;
    int in_tx;
    double tx_start;
    int strict;         /* metrics_set_strict: a failed row write fails the run */
    int failed;         /* a row or commit write failed (first one in why) */
    char why[512];
};

/* A step/eval row or a commit did not reach the file: remember the first
 * failure; without --strict-metrics say it once and train on, as the
 * original's recorder does. */
static void row_done(metrics *m, int rc, const char *what)
{
    if (rc == SQLITE_DONE || rc == SQLITE_OK || m->failed) return;
    m->failed = 1;
    snprintf(m->why, sizeof m->why, "%s: %s", what, sqlite3_errmsg(m->db));
    if (!m->strict)
        log_warn("metrics.sqlite: %s; training goes on without those rows (train --strict-metrics makes this an error)",
                 m->why);
}

void metrics_set_strict(metrics *m, int strict)
{
    if (m) m->strict = strict;
}

int metrics_check(const metrics *m, dlm_err *e)
{
    if (!m || !m->strict || !m->failed) return 0;
    err_set(e, "MetricsError", "metrics.sqlite: %s", m->why);
    return err_hint(e, "--strict-metrics stops the run when a metrics row cannot be written; without it the run "
                       "goes on and warns");
}

static const char *SCHEMA =
    "CREATE TABLE IF NOT EXISTS runs(run_id INTEGER PRIMARY KEY, started_at TEXT, ended_at TEXT,"
    " adapter_version INTEGER, phase TEXT, seed INTEGER, status TEXT);"
    "CREATE TABLE IF NOT EXISTS steps(run_id INTEGER, step INTEGER, loss REAL, lr REAL, grad_norm REAL,"
    " tokens_per_sec REAL, peak_vram_mb REAL, at TEXT, PRIMARY KEY(run_id, step));"
    "CREATE TABLE IF NOT EXISTS evals(run_id INTEGER, step INTEGER, val_loss REAL, perplexity REAL,"
    " retention REAL, at TEXT, PRIMARY KEY(run_id, step));"
    /* the preference phase's per-step rewards (TRL's rewards/...), beside
     * steps so older stores keep their tables */
    "CREATE TABLE IF NOT EXISTS preference_steps(run_id INTEGER, step INTEGER, rewards_chosen REAL,"
    " rewards_rejected REAL, rewards_margins REAL, rewards_accuracies REAL, PRIMARY KEY(run_id, step));"
    /* what a completed run committed (dlm's, beside the original's runs
     * table): the step whose weights the version holds, the steps run, the
     * run's first loss, the committed step's loss and validation loss */
    "CREATE TABLE IF NOT EXISTS run_results(run_id INTEGER PRIMARY KEY, committed_step INTEGER, steps INTEGER,"
    " first_loss REAL, final_loss REAL, val_loss REAL, early_stopped INTEGER);";

/* SQLite reports a full disk as SQLITE_FULL, or as an I/O error whose
 * system errno is ENOSPC: either way the user needs to hear "disk full". */
static int disk_full(sqlite3 *db, dlm_err *e)
{
    if (!db) return 0;
    int se = sqlite3_system_errno(db);
    if (sqlite3_errcode(db) != SQLITE_FULL && se != ENOSPC && se != EDQUOT) return 0;
    const char *path = sqlite3_db_filename(db, "main");
    char dir[4096];
    fs_dirname(dir, sizeof dir, path ? path : "metrics.sqlite");
    uint64_t fr = fs_free_bytes(dir);
    err_set(e, "DiskFullError", "disk full: cannot write '%s': No space left on device (%llu bytes free there)",
            path ? path : "metrics.sqlite", fr == UINT64_MAX ? 0ull : (unsigned long long)fr);
    err_hint(e, "free space on the filesystem of '%s' and run the command again", dir);
    return 1;
}

static int fail(sqlite3 *db, dlm_err *e, const char *what)
{
    if (disk_full(db, e)) return -1;
    return err_set(e, "MetricsError", "metrics.sqlite: %s: %s", what, db ? sqlite3_errmsg(db) : "cannot open");
}

int metrics_open(const char *store, metrics **out, dlm_err *e)
{
    *out = NULL;
    char path[4200];
    snprintf(path, sizeof path, "%s/metrics.sqlite", store);
    metrics *m = calloc(1, sizeof *m);
    if (!m) return err_set(e, "MemoryError", "out of memory");
    if (sqlite3_open(path, &m->db) != SQLITE_OK) {
        int r = fail(m->db, e, "open");
        sqlite3_close(m->db);
        free(m);
        return r;
    }
    sqlite3_busy_timeout(m->db, 5000);
    char *msg = NULL;
    if (sqlite3_exec(m->db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;", NULL, NULL, &msg) != SQLITE_OK ||
        sqlite3_exec(m->db, SCHEMA, NULL, NULL, &msg) != SQLITE_OK) {
        if (!disk_full(m->db, e)) err_set(e, "MetricsError", "metrics.sqlite: %s", msg ? msg : "schema");
        sqlite3_free(msg);
        sqlite3_close(m->db);
        free(m);
        return -1;
    }
    sqlite3_prepare_v2(m->db, "INSERT OR REPLACE INTO steps(run_id, step, loss, lr, grad_norm, tokens_per_sec, at)"
                              " VALUES(?,?,?,?,?,?,?)", -1, &m->step, NULL);
    sqlite3_prepare_v2(m->db, "INSERT OR REPLACE INTO evals(run_id, step, val_loss, perplexity, at) VALUES(?,?,?,?,?)",
                       -1, &m->eval, NULL);
    sqlite3_prepare_v2(m->db, "INSERT OR REPLACE INTO preference_steps(run_id, step, rewards_chosen, rewards_rejected,"
                              " rewards_margins, rewards_accuracies) VALUES(?,?,?,?,?,?)", -1, &m->pref, NULL);
    if (!m->step || !m->eval || !m->pref) row_done(m, SQLITE_ERROR, "cannot prepare the row inserts");
    *out = m;
    return 0;
}

void metrics_flush(metrics *m)
{
    if (m && m->in_tx) {
        row_done(m, sqlite3_exec(m->db, "COMMIT", NULL, NULL, NULL), "commit");
        m->in_tx = 0;
    }
}

void metrics_close(metrics *m)
{
    if (!m) return;
    metrics_flush(m);
    sqlite3_finalize(m->step);
    sqlite3_finalize(m->eval);
    sqlite3_finalize(m->pref);
    sqlite3_close(m->db);
    free(m);
}

static void begin(metrics *m)
{
    if (m->in_tx && time_mono() - m->tx_start > 5.0) metrics_flush(m);
    if (!m->in_tx) {
        int rc = sqlite3_exec(m->db, "BEGIN", NULL, NULL, NULL);
        row_done(m, rc, "begin");
        m->in_tx = rc == SQLITE_OK;
        m->tx_start = time_mono();
    }
}

int metrics_run_start(metrics *m, int64_t run_id, const char *started_at, int adapter_version,
                      const char *phase, int64_t seed, dlm_err *e)
{
    metrics_flush(m);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(m->db, "INSERT OR REPLACE INTO runs(run_id, started_at, adapter_version, phase, seed, status)"
                                  " VALUES(?,?,?,?,?,'running')", -1, &st, NULL) != SQLITE_OK)
        return fail(m->db, e, "run start");
    sqlite3_bind_int64(st, 1, run_id);
    sqlite3_bind_text(st, 2, started_at, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int(st, 3, adapter_version);
    sqlite3_bind_text(st, 4, phase, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 5, seed);
    int rc = sqlite3_step(st) == SQLITE_DONE ? 0 : fail(m->db, e, "run start");
    sqlite3_finalize(st);
    return rc;
}

int metrics_run_end(metrics *m, int64_t run_id, const char *ended_at, const char *status, int adapter_version,
                    dlm_err *e)
{
    metrics_flush(m);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(m->db, "UPDATE runs SET ended_at=?, status=?, adapter_version=? WHERE run_id=?", -1, &st,
                           NULL) != SQLITE_OK)
        return fail(m->db, e, "run end");
    sqlite3_bind_text(st, 1, ended_at, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 2, status, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int(st, 3, adapter_version);
    sqlite3_bind_int64(st, 4, run_id);
    int rc = sqlite3_step(st) == SQLITE_DONE ? 0 : fail(m->db, e, "run end");
    sqlite3_finalize(st);
    return rc;
}

int metrics_run_result(metrics *m, int64_t run_id, int64_t committed_step, int64_t steps, double first_loss,
                       double final_loss, double val_loss, int early_stopped, dlm_err *e)
{
    metrics_flush(m);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(m->db, "INSERT OR REPLACE INTO run_results(run_id, committed_step, steps, first_loss,"
                                  " final_loss, val_loss, early_stopped) VALUES(?,?,?,?,?,?,?)", -1, &st, NULL) != SQLITE_OK)
        return fail(m->db, e, "run result");
    sqlite3_bind_int64(st, 1, run_id);
    sqlite3_bind_int64(st, 2, committed_step);
    sqlite3_bind_int64(st, 3, steps);
    sqlite3_bind_double(st, 4, first_loss);
    sqlite3_bind_double(st, 5, final_loss);
    if (isfinite(val_loss)) sqlite3_bind_double(st, 6, val_loss);
    else sqlite3_bind_null(st, 6);
    sqlite3_bind_int(st, 7, early_stopped);
    int rc = sqlite3_step(st) == SQLITE_DONE ? 0 : fail(m->db, e, "run result");
    sqlite3_finalize(st);
    return rc;
}

void metrics_step(metrics *m, int64_t run_id, int64_t step, double loss, double lr, double grad_norm,
                  double tokens_per_sec, const char *at)
{
    if (!m || !m->step) return;
    begin(m);
    sqlite3_reset(m->step);
    sqlite3_bind_int64(m->step, 1, run_id);
    sqlite3_bind_int64(m->step, 2, step);
    sqlite3_bind_double(m->step, 3, loss);
    sqlite3_bind_double(m->step, 4, lr);
    sqlite3_bind_double(m->step, 5, grad_norm);
    sqlite3_bind_double(m->step, 6, tokens_per_sec);
    sqlite3_bind_text(m->step, 7, at, -1, SQLITE_TRANSIENT);
    row_done(m, sqlite3_step(m->step), "a steps row");
}

void metrics_pref_step(metrics *m, int64_t run_id, int64_t step, double chosen, double rejected, double margins,
                       double accuracies)
{
    if (!m || !m->pref) return;
    begin(m);
    sqlite3_reset(m->pref);
    sqlite3_bind_int64(m->pref, 1, run_id);
    sqlite3_bind_int64(m->pref, 2, step);
    sqlite3_bind_double(m->pref, 3, chosen);
    sqlite3_bind_double(m->pref, 4, rejected);
    sqlite3_bind_double(m->pref, 5, margins);
    sqlite3_bind_double(m->pref, 6, accuracies);
    row_done(m, sqlite3_step(m->pref), "a preference_steps row");
}

void metrics_eval(metrics *m, int64_t run_id, int64_t step, double val_loss, const char *at)
{
    if (!m || !m->eval) return;
    begin(m);
    sqlite3_reset(m->eval);
    sqlite3_bind_int64(m->eval, 1, run_id);
    sqlite3_bind_int64(m->eval, 2, step);
    sqlite3_bind_double(m->eval, 3, val_loss);
    sqlite3_bind_double(m->eval, 4, val_loss < 50 ? exp(val_loss) : 0);
    sqlite3_bind_text(m->eval, 5, at, -1, SQLITE_TRANSIENT);
    row_done(m, sqlite3_step(m->eval), "an evals row");
}

int metrics_query(const char *store, const char *table, const metrics_filter *f, metrics_row_fn fn, void *ctx,
                  dlm_err *e)
{
    static const metrics_filter none = {0};
    if (!f) f = &none;
    int runs = !strcmp(table, "runs");
    if (!runs && strcmp(table, "steps") && strcmp(table, "evals"))
        return err_set(e, "MetricsError", "unknown metrics table '%s'", table);
    char path[4200], sql[2048];
    snprintf(path, sizeof path, "%s/metrics.sqlite", store);
    if (!fs_is_file(path)) return err_set(e, "MetricsError", "no metrics yet (%s does not exist)", path);
    sqlite3 *db;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
        int r = fail(db, e, "open");
        sqlite3_close(db);
        return r;
    }
    sqlite3_busy_timeout(db, 5000);
    /* Values are bound, never spliced; only the fixed table name is. Every
     * condition is always present, disabled by its NULL parameter. */
    const char *at = runs ? "t.started_at" : "t.at";
    const char *asc = runs ? "t.run_id" : "t.run_id, t.step";
    const char *desc = runs ? "t.run_id DESC" : "t.run_id DESC, t.step DESC";
    /* a preference phase's steps carry their rewards (TRL's rewards/...) */
    int rewards = f->phase && strcmp(f->phase, "sft") && !strcmp(table, "steps");
    /* runs: what each committed (run_results; a store from before it has none) */
    int results = 0;
    if (runs) {
        sqlite3_stmt *t;
        if (sqlite3_prepare_v2(db, "SELECT 1 FROM sqlite_master WHERE type='table' AND name='run_results'", -1, &t,
                               NULL) == SQLITE_OK) {
            results = sqlite3_step(t) == SQLITE_ROW;
            sqlite3_finalize(t);
        }
    }
    const char *rcols = !runs ? "" : results ? ", x.committed_step, x.first_loss, x.final_loss, x.val_loss, x.early_stopped"
                        : ", NULL AS committed_step, NULL AS first_loss, NULL AS final_loss, NULL AS val_loss,"
                          " NULL AS early_stopped";
    snprintf(sql, sizeof sql,
             "SELECT t.*%s%s FROM %s t LEFT JOIN runs r ON r.run_id = t.run_id%s%s"
             " WHERE (?1 IS NULL OR t.run_id = ?1) AND (?2 IS NULL OR r.phase = ?2)"
             " AND (?3 IS NULL OR %s >= ?3) AND (?4 IS NULL OR %s > ?4)"
             " ORDER BY %s LIMIT ?5",
             rewards ? ", p.rewards_chosen AS \"rewards/chosen\", p.rewards_rejected AS \"rewards/rejected\","
                       " p.rewards_margins AS \"rewards/margins\", p.rewards_accuracies AS \"rewards/accuracies\""
                     : "",
             rcols, runs ? "runs" : table,
             rewards ? " LEFT JOIN preference_steps p ON p.run_id = t.run_id AND p.step = t.step" : "",
             results ? " LEFT JOIN run_results x ON x.run_id = t.run_id" : "", at,
             runs ? "-1" : "t.step", f->limit > 0 ? desc : asc);
    char outer[2200];
    const char *q = sql;
    if (f->limit > 0) {   /* the last N, shown oldest first */
        snprintf(outer, sizeof outer, "SELECT * FROM (%s) ORDER BY %s", sql, runs ? "run_id" : "run_id, step");
        q = outer;
    }
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, q, -1, &st, NULL) != SQLITE_OK) {
        int r = fail(db, e, "query");
        sqlite3_close(db);
        return r;
    }
    if (f->run_id > 0) sqlite3_bind_int64(st, 1, f->run_id);
    if (f->phase) sqlite3_bind_text(st, 2, f->phase, -1, SQLITE_TRANSIENT);
    if (f->since) sqlite3_bind_text(st, 3, f->since, -1, SQLITE_TRANSIENT);
    if (f->after_step > 0 && !runs) sqlite3_bind_int64(st, 4, f->after_step);
    sqlite3_bind_int64(st, 5, f->limit > 0 ? f->limit : -1);
    int nc = sqlite3_column_count(st);
    const char *names[16], *vals[16];
    if (nc > 16) nc = 16;
    for (int i = 0; i < nc; i++) names[i] = sqlite3_column_name(st, i);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        for (int i = 0; i < nc; i++) vals[i] = (const char *)sqlite3_column_text(st, i);
        fn(ctx, nc, names, vals);
    }
    int r = rc == SQLITE_DONE ? 0 : fail(db, e, "query");
    sqlite3_finalize(st);
    sqlite3_close(db);
    return r;
}
