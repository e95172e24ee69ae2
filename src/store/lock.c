/* lock — the exclusive store lock (docs/reference/original-spec.md §2.4).
 *
 * <store>/.lock is created with O_CREAT|O_EXCL and holds
 * "PID\nhostname\nepoch_float\ncommand\n" (the original writes the first
 * three lines and ignores extra ones, so stores stay interchangeable).
 * A lock whose holder is dead is reported with the exact `rm` command and
 * never removed behind the user's back: a wrong liveness guess would let two
 * writers in. */
#include "store/store.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util/fs.h"
#include "util/json.h"
#include "util/timeutil.h"

static void my_host(char *out, size_t cap)
{
    if (gethostname(out, cap) != 0) snprintf(out, cap, "unknown");
    out[cap - 1] = 0;
}

static int parse_lock(const char *buf, store_lock_info *info)
{
    memset(info, 0, sizeof *info);
    char *copy = strdup(buf), *save = NULL;
    if (!copy) return -1;
    char *l1 = strtok_r(copy, "\n", &save), *l2 = strtok_r(NULL, "\n", &save), *l3 = strtok_r(NULL, "\n", &save);
    char *l4 = strtok_r(NULL, "\n", &save);
    int ok = -1;
    if (l1 && l2 && l3) {
        char *end;
        long pid = strtol(l1, &end, 10);
        double t = strtod(l3, NULL);
        if (*end == 0 && end != l1) {
            info->pid = pid;
            snprintf(info->host, sizeof info->host, "%s", l2);
            info->since = t;
            if (l4) snprintf(info->command, sizeof info->command, "%s", l4);
            ok = 0;
        }
    }
    free(copy);
    return ok;
}

int store_lock_read(const char *store, store_lock_info *info)
{
    char p[4200];
    memset(info, 0, sizeof *info);
    if (!fs_join(p, sizeof p, store, ".lock")) return -1;
    if (!fs_exists(p)) return 0;
    char *buf;
    size_t len;
    if (fs_read_all(p, 4096, &buf, &len, NULL)) return -1;
    int r = parse_lock(buf, info);
    free(buf);
    if (r) return -1;
    char host[256];
    my_host(host, sizeof host);
    if (strcmp(host, info->host)) info->alive = -1;
    else info->alive = info->pid > 0 && (kill((pid_t)info->pid, 0) == 0 || errno == EPERM);
    return 1;
}

int store_lock_acquire(const char *store, const char *command, store_lock *lk, dlm_err *e)
{
    memset(lk, 0, sizeof *lk);
    if (!fs_join(lk->path, sizeof lk->path, store, ".lock")) return err_set(e, NULL, "store path too long");
    if (fs_mkdir_p(store, e)) return -1;
    int fd = open(lk->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) {
        char host[256], t[40], body[512];
        my_host(host, sizeof host);
        json_fmt_double(time_now(), t, sizeof t);
        int n = snprintf(body, sizeof body, "%ld\n%s\n%s\n%s\n", (long)getpid(), host, t, command ? command : "");
        ssize_t w = write(fd, body, (size_t)n);
        int bad = w != n || fsync(fd) != 0;
        close(fd);
        if (bad) {
            unlink(lk->path);
            return err_sys(e, "cannot write lock file '%s'", lk->path);
        }
        lk->held = 1;
        return 0;
    }
    if (errno != EEXIST) return err_sys(e, "cannot create lock file '%s'", lk->path);

    /* Someone holds it. A holder may be between create and write: give a
     * malformed file a moment before calling it broken. */
    store_lock_info info;
    int r = -1;
    for (int tries = 0; tries < 20; tries++) {
        r = store_lock_read(store, &info);
        if (r != -1) break;
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    if (r == 0) {
        /* Released meanwhile: try once more. */
        return store_lock_acquire(store, command, lk, e);
    }
    if (r < 0) {
        err_at(e, "StaleLockError", lk->path, 0, 0, "lock file is unreadable (expected 'PID\\nhost\\ntime')");
        return err_hint(e, "if no dlm command is running on this store, remove it: rm '%s'", lk->path);
    }
    char when[32];
    time_iso_utc(info.since, when, sizeof when);
    char who[128];
    if (info.command[0]) snprintf(who, sizeof who, "dlm %s, since %s UTC", info.command, when);
    else snprintf(who, sizeof who, "since %s UTC", when);
    if (info.alive == 0) {
        err_at(e, "StaleLockError", lk->path, 0, 0, "lock is stale (PID %ld not alive; %s)", info.pid, who);
        return err_hint(e, "the process that took it is gone; if nothing else is writing this store, "
                           "remove it: rm '%s'", lk->path);
    }
    if (info.alive < 0) {
        err_at(e, "LockHeldError", lk->path, 0, 0, "already locked by PID %ld on host %s (%s)", info.pid, info.host, who);
        return err_hint(e, "wait for that command to finish; if that host is gone for good: rm '%s'", lk->path);
    }
    err_at(e, "LockHeldError", lk->path, 0, 0, "already locked by PID %ld (%s)", info.pid, who);
    return err_hint(e, "another dlm command is writing this store; wait for it to finish and run this again");
}

void store_lock_release(store_lock *lk)
{
    if (!lk->held) return;
    const char *hold = getenv("DLM_TEST_HOLD_LOCK_MS");
    if (hold && *hold) {
        long ms = strtol(hold, NULL, 10);
        if (ms > 0 && ms < 600000) {
            struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
            while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
        }
    }
    char *buf;
    size_t len;
    if (!fs_read_all(lk->path, 4096, &buf, &len, NULL)) {
        store_lock_info info;
        if (!parse_lock(buf, &info) && info.pid == (long)getpid()) {
            unlink(lk->path);
            char dir[4200];
            fs_dirname(dir, sizeof dir, lk->path);
            fs_fsync_dir(dir, NULL);
        }
        free(buf);
    }
    lk->held = 0;
}
