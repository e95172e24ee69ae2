/* lock — the exclusive store lock (docs/reference/original-spec.md §2.4).
 *
 * <store>/.lock holds "PID\nhostname\nepoch_float\ncommand\nkernel-lock\n"
 * (the original writes the first three lines and ignores extra ones, so
 * stores stay interchangeable). Exclusion is a kernel lock on the file: an
 * open-file-description fcntl lock (F_OFD_SETLK), which the kernel drops
 * when its holder dies, however it dies. So a lock file whose kernel lock
 * is free was left by a dead process: the next command takes it over and
 * says who died (lk->prev), with no manual step.
 *
 * Why OFD locks: they conflict between two opens in one process (as the
 * unit tests and a second writer in the same process need), F_OFD_GETLK
 * tests one without taking it (a `dlm show` probe never makes a writer
 * fail), and they work over NFS where flock(2) may not.
 *
 * A file without the "kernel-lock" line was written by a holder that does
 * not use kernel locks (the original tool, or dlm on a filesystem where the
 * kernel refuses them): its pid decides, and a dead one is taken over only
 * on this host. Where the kernel refuses locks (EINVAL, ENOLCK, EOPNOTSUPP,
 * ENOSYS) the lock falls back to the exclusive-create file, and a dead
 * holder is reported with the exact `rm` command, never removed: without a
 * kernel lock a wrong liveness guess would let two writers in. */
#include "store/store.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/fs.h"
#include "util/json.h"
#include "util/log.h"
#include "util/timeutil.h"

#define KERNEL_MARK "kernel-lock"
#ifdef F_OFD_SETLK
#define SETLK_CMD F_OFD_SETLK
#else
#define SETLK_CMD 0
#endif

static int g_hold_ms, g_no_kernel;

void store_lock_test_hooks(int hold_ms, int no_kernel_lock)
{
    g_hold_ms = hold_ms > 0 && hold_ms < 600000 ? hold_ms : 0;
    g_no_kernel = no_kernel_lock;
}

static void my_host(char *out, size_t cap)
{
    if (gethostname(out, cap) != 0) snprintf(out, cap, "unknown");
    out[cap - 1] = 0;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

static int parse_lock(const char *buf, store_lock_info *info)
{
    memset(info, 0, sizeof *info);
    char *copy = strdup(buf), *save = NULL;
    if (!copy) return -1;
    char *l1 = strtok_r(copy, "\n", &save), *l2 = strtok_r(NULL, "\n", &save), *l3 = strtok_r(NULL, "\n", &save);
    char *l4 = strtok_r(NULL, "\n", &save), *l5 = strtok_r(NULL, "\n", &save);
    int ok = -1;
    if (l1 && l2 && l3) {
        char *end;
        errno = 0;
        long pid = strtol(l1, &end, 10);
        double t = strtod(l3, NULL);
        if (*end == 0 && end != l1 && errno == 0 && pid > 0) {
            info->pid = pid;
            snprintf(info->host, sizeof info->host, "%s", l2);
            info->since = t;
            /* the original's file has three lines: a fourth that is the
             * kernel mark means the command was not recorded */
            if (l4 && !strcmp(l4, KERNEL_MARK)) l5 = l4, l4 = NULL;
            if (l4) snprintf(info->command, sizeof info->command, "%s", l4);
            info->kernel = l5 && !strcmp(l5, KERNEL_MARK);
            ok = 0;
        }
    }
    free(copy);
    return ok;
}

int store_lock_parse(const char *buf, size_t len, store_lock_info *info)
{
    if (len > 4096 || memchr(buf, 0, len)) return -1;
    char tmp[4097];
    memcpy(tmp, buf, len);
    tmp[len] = 0;
    return parse_lock(tmp, info);
}

static int lock_whole(int fd, int cmd, short type)
{
#ifdef F_OFD_SETLK
    struct flock fl = {.l_type = type, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
    return fcntl(fd, cmd, &fl);
#else
    (void)fd, (void)cmd, (void)type;
    errno = ENOSYS;
    return -1;
#endif
}

static int unsupported(int err)
{
    return err == EINVAL || err == ENOLCK || err == EOPNOTSUPP || err == ENOSYS;
}

/* Kernel-lock state of an existing lock file: 1 held by someone, 0 free,
 * -1 unknown (no kernel locks here). Tests without taking it. */
static int probe(const char *path)
{
#ifdef F_OFD_GETLK
    if (g_no_kernel) return -1;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
    int r = fcntl(fd, F_OFD_GETLK, &fl);
    close(fd);
    if (r != 0) return -1;
    return fl.l_type != F_UNLCK;
#else
    (void)path;
    return -1;
#endif
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
    int k = info->kernel ? probe(p) : -1;
    if (k >= 0) info->alive = k;   /* the kernel knows, whatever the host */
    else if (strcmp(host, info->host)) info->alive = -1;
    else info->alive = info->pid > 0 && !fs_pid_gone(info->pid);
    return 1;
}

static void holder_text(const store_lock_info *info, char *who, size_t cap)
{
    char when[32];
    time_iso_utc(info->since, when, sizeof when);
    if (info->command[0]) snprintf(who, cap, "dlm %s, since %s UTC", info->command, when);
    else snprintf(who, cap, "since %s UTC", when);
}

static int held_error(store_lock *lk, const store_lock_info *info, int same_host, dlm_err *e)
{
    char who[128];
    holder_text(info, who, sizeof who);
    if (!same_host) {
        err_at(e, "LockHeldError", lk->path, 0, 0, "already locked by PID %ld on host %s (%s)", info->pid, info->host, who);
        return err_hint(e, "wait for that command to finish; if that host is gone for good: rm '%s'", lk->path);
    }
    err_at(e, "LockHeldError", lk->path, 0, 0, "already locked by PID %ld (%s)", info->pid, who);
    return err_hint(e, "another dlm command is writing this store; wait for it to finish and run this again");
}

static int write_body(int fd, const char *command, int kernel)
{
    char host[256], t[40], body[512];
    my_host(host, sizeof host);
    json_fmt_double(time_now(), t, sizeof t);
    int n = snprintf(body, sizeof body, "%ld\n%s\n%s\n%s\n%s", (long)getpid(), host, t, command ? command : "",
                     kernel ? KERNEL_MARK "\n" : "");
    if (n <= 0 || (size_t)n >= sizeof body) return -1;
    if (kernel && ftruncate(fd, 0) != 0) return -1;
    ssize_t w = pwrite(fd, body, (size_t)n, 0);
    return w == n && fsync(fd) == 0 ? 0 : -1;
}

/* Today's exclusive-create file, for filesystems without kernel locks. */
static int acquire_file(const char *store, const char *command, store_lock *lk, dlm_err *e, int depth)
{
    int fd = open(lk->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) {
        int bad = write_body(fd, command, 0);
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
        sleep_ms(50);
    }
    if (r == 0 && depth < 5) return acquire_file(store, command, lk, e, depth + 1); /* released meanwhile */
    if (r <= 0) {
        err_at(e, "StaleLockError", lk->path, 0, 0, "lock file is unreadable (expected 'PID\\nhost\\ntime')");
        return err_hint(e, "if no dlm command is running on this store, remove it: rm '%s'", lk->path);
    }
    if (info.alive == 0) {
        char who[128];
        holder_text(&info, who, sizeof who);
        err_at(e, "StaleLockError", lk->path, 0, 0, "lock is stale (PID %ld not alive; %s)", info.pid, who);
        return err_hint(e, "the process that took it is gone and this filesystem has no kernel locks to prove it; "
                           "if nothing else is writing this store, remove it: rm '%s'", lk->path);
    }
    return held_error(lk, &info, info.alive > 0, e);
}

/* pid in a temp name: "<x>.tmp.<pid>.<hex>", "<x>.tmp.<pid>.signal",
 * ".tmp-<pid>", ".<x>.tmp-<pid>"; 0 when the name is not a temp name. */
static long temp_pid(const char *name)
{
    const char *t = strstr(name, ".tmp");
    if (!t || (t[4] != '.' && t[4] != '-')) return 0;
    char *end;
    errno = 0;
    long pid = strtol(t + 5, &end, 10);
    if (errno || end == t + 5 || pid <= 0) return 0;
    if (*end && *end != '.') return 0;
    return pid;
}

static int sweep(const char *dir, int depth)
{
    char **names;
    int n = fs_list_dir(dir, &names, NULL), removed = 0;
    for (int i = 0; i < n; i++) {
        char p[4400];
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        long pid = temp_pid(names[i]);
        if (fs_pid_gone(pid)) {
            if (!fs_remove_tree(p, NULL)) removed++;
        } else if (depth > 0 && !pid && fs_is_dir(p)) {
            removed += sweep(p, depth - 1);
        }
    }
    if (n > 0) fs_free_list(names, n);
    return removed;
}

int store_sweep_temp(const char *dir)
{
    return fs_is_dir(dir) ? sweep(dir, 4) : 0;
}

int store_lock_acquire(const char *store, const char *command, store_lock *lk, dlm_err *e)
{
    memset(lk, 0, sizeof *lk);
    lk->fd = -1;
    if (!fs_join(lk->path, sizeof lk->path, store, ".lock")) return err_set(e, NULL, "store path too long");
    if (fs_mkdir_p(store, e)) return -1;
    char host[256];
    my_host(host, sizeof host);
    for (int attempt = 0; attempt < 50; attempt++) {
        int created = 1;
        int fd = open(lk->path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0 && errno == EEXIST) {
            created = 0;
            fd = open(lk->path, O_RDWR | O_CLOEXEC);
            if (fd < 0 && errno == ENOENT) continue;   /* released meanwhile */
        }
        if (fd < 0) return err_sys(e, "cannot open lock file '%s'", lk->path);
        int r = g_no_kernel ? (errno = ENOLCK, -1) : lock_whole(fd, SETLK_CMD, F_WRLCK);
        int err = errno;
        /* the file at the path must still be the one we locked: a releaser
         * unlinks it before its lock goes */
        struct stat a, b;
        int same = fstat(fd, &a) == 0 && stat(lk->path, &b) == 0 && a.st_ino == b.st_ino && a.st_dev == b.st_dev;
        if (r != 0 && unsupported(err)) {
            /* no kernel locks on this filesystem. A file we just created
             * empty would read as unreadable to the fallback: remove it. */
            if (created) unlink(lk->path);
            close(fd);
            return acquire_file(store, command, lk, e, 0);
        }
        if (!same) {   /* released and replaced under us: look again */
            close(fd);
            sleep_ms(2);
            continue;
        }
        char buf[4097];
        ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
        buf[n > 0 ? n : 0] = 0;
        store_lock_info info;
        int parsed = n > 0 && parse_lock(buf, &info) == 0;
        if (r != 0) {
            close(fd);
            if (err != EAGAIN && err != EACCES) {
                errno = err;
                return err_sys(e, "cannot lock '%s'", lk->path);
            }
            if (!parsed) {   /* the holder is between open and write */
                sleep_ms(20);
                continue;
            }
            return held_error(lk, &info, info.kernel || !strcmp(info.host, host), e);
        }
        /* We hold the kernel lock. What the file says is a previous holder. */
        if (parsed && !info.kernel && (long)getpid() != info.pid) {
            /* a holder without kernel locks: only its pid can tell */
            int same_host = !strcmp(info.host, host);
            int alive = same_host && !fs_pid_gone(info.pid);
            if (!same_host || alive) {
                close(fd);
                return held_error(lk, &info, same_host, e);
            }
        }
        if (write_body(fd, command, 1)) {
            int se = errno;
            close(fd);
            errno = se;
            return err_sys(e, "cannot write lock file '%s'", lk->path);
        }
        if (parsed) {
            lk->prev = info;
            lk->prev.alive = 0;
            char who[128];
            holder_text(&info, who, sizeof who);
            log_warn("the previous holder of this store (PID %ld, %s) died without releasing it; "
                     "the kernel released its lock", info.pid, who);
            int nt = store_sweep_temp(store);
            if (nt) log_info("removed %d temp file%s left by dead processes", nt, nt == 1 ? "" : "s");
        }
        lk->fd = fd;
        lk->kernel = 1;
        lk->held = 1;
        return 0;
    }
    err_at(e, "LockHeldError", lk->path, 0, 0, "the lock file keeps changing under this command");
    return err_hint(e, "other dlm commands are taking and releasing this store; run this again");
}

void store_lock_release(store_lock *lk)
{
    if (!lk->held) return;
    if (g_hold_ms) sleep_ms(g_hold_ms);
    char dir[4200];
    fs_dirname(dir, sizeof dir, lk->path);
    if (lk->kernel) {
        /* unlink while still holding: a waiter that opened this inode sees
         * it gone and looks again */
        unlink(lk->path);
        fs_fsync_dir(dir, NULL);
        close(lk->fd);
        lk->fd = -1;
        lk->held = 0;
        return;
    }
    char *buf;
    size_t len;
    if (!fs_read_all(lk->path, 4096, &buf, &len, NULL)) {
        store_lock_info info;
        if (!parse_lock(buf, &info) && info.pid == (long)getpid()) {
            unlink(lk->path);
            fs_fsync_dir(dir, NULL);
        }
        free(buf);
    }
    lk->held = 0;
}
