#include "util/fs.h"
#include "util/progress.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <unistd.h>
#include <sodium.h>

int fs_read_all(const char *path, size_t max_bytes, char **out, size_t *len, dlm_err *e)
{
    *out = NULL;
    if (len) *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return err_sys(e, "cannot open '%s'", path);
    struct stat st;
    if (fstat(fd, &st) != 0) { close(fd); return err_sys(e, "cannot stat '%s'", path); }
    if (S_ISDIR(st.st_mode)) { close(fd); return err_set(e, NULL, "'%s' is a directory", path); }
    if (st.st_size < 0 || (uint64_t)st.st_size > max_bytes) {
        close(fd);
        return err_set(e, NULL, "'%s' is too large (%lld bytes, limit %zu)", path,
                       (long long)st.st_size, max_bytes);
    }
    /* Read until EOF rather than trusting st_size (pipes, /proc, races). */
    size_t cap = (size_t)st.st_size + 1, n = 0;
    char *buf = malloc(cap);
    if (!buf) { close(fd); return err_set(e, "MemoryError", "out of memory reading '%s'", path); }
    for (;;) {
        if (n + 1 >= cap) {
            if (cap > max_bytes) { free(buf); close(fd); return err_set(e, NULL, "'%s' is too large", path); }
            size_t nc = cap * 2;
            char *nb = realloc(buf, nc);
            if (!nb) { free(buf); close(fd); return err_set(e, "MemoryError", "out of memory reading '%s'", path); }
            buf = nb;
            cap = nc;
        }
        ssize_t r = read(fd, buf + n, cap - 1 - n);
        if (r < 0) {
            if (errno == EINTR) continue;
            free(buf);
            close(fd);
            return err_sys(e, "cannot read '%s'", path);
        }
        if (r == 0) break;
        n += (size_t)r;
    }
    close(fd);
    if (n > max_bytes) { free(buf); return err_set(e, NULL, "'%s' is too large", path); }
    buf[n] = 0;
    *out = buf;
    if (len) *len = n;
    return 0;
}

static char g_fault[256];

void fs_inject_write_failure(const char *substring)
{
    snprintf(g_fault, sizeof g_fault, "%s", substring ? substring : "");
}

static char g_fault_rm[256];

void fs_inject_remove_failure(const char *substring)
{
    snprintf(g_fault_rm, sizeof g_fault_rm, "%s", substring ? substring : "");
}

int fs_fault_injected(const char *path)
{
    return g_fault[0] && strstr(path, g_fault) != NULL;
}

char *fs_dirname(char *dst, size_t cap, const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash) { snprintf(dst, cap, "."); return dst; }
    size_t n = (size_t)(slash - path);
    if (n == 0) n = 1; /* "/x" → "/" */
    if (n >= cap) n = cap - 1;
    memcpy(dst, path, n);
    dst[n] = 0;
    return dst;
}

const char *fs_basename(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

char *fs_join(char *dst, size_t cap, const char *a, const char *b)
{
    int n;
    if (b[0] == '/' || !a[0]) n = snprintf(dst, cap, "%s", b);
    else if (a[strlen(a) - 1] == '/') n = snprintf(dst, cap, "%s%s", a, b);
    else n = snprintf(dst, cap, "%s/%s", a, b);
    if (n < 0 || (size_t)n >= cap) return NULL;
    return dst;
}

int fs_fsync_dir(const char *dir, dlm_err *e)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return err_sys(e, "cannot open directory '%s'", dir);
    int r = fsync(fd);
    int saved = errno;
    close(fd);
    /* Some filesystems refuse fsync on directories (EINVAL): not fatal. */
    if (r != 0 && saved != EINVAL && saved != EROFS) {
        errno = saved;
        return err_sys(e, "cannot fsync directory '%s'", dir);
    }
    return 0;
}

int fs_fsync_path(const char *path, dlm_err *e)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return err_sys(e, "cannot open '%s'", path);
    int r = fsync(fd);
    int saved = errno;
    close(fd);
    if (r != 0 && saved != EINVAL) { errno = saved; return err_sys(e, "cannot fsync '%s'", path); }
    return 0;
}

static int write_full(int fd, const void *data, size_t len)
{
    const char *p = data;
    while (len) {
        ssize_t w = write(fd, p, len);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

uint64_t fs_free_bytes(const char *path)
{
    char p[4096];
    snprintf(p, sizeof p, "%s", path);
    for (int i = 0; i < 64; i++) {
        struct statvfs v;
        if (statvfs(p, &v) == 0) return (uint64_t)v.f_bavail * (uint64_t)v.f_frsize;
        char up[4096];
        fs_dirname(up, sizeof up, p);
        if (!strcmp(up, p)) break;
        snprintf(p, sizeof p, "%s", up);
    }
    return UINT64_MAX;
}

static void human(uint64_t n, char *out, size_t cap)
{
    const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)n;
    int i = 0;
    while (v >= 1024 && i < 4) v /= 1024, i++;
    if (i == 0) snprintf(out, cap, "%llu B", (unsigned long long)n);
    else snprintf(out, cap, "%.1f %s", v, u[i]);
}

int fs_err_write(dlm_err *e, const char *path, uint64_t need)
{
    int saved = errno;
    if (saved != ENOSPC && saved != EDQUOT) return err_sys(e, "cannot write '%s'", path);
    char dir[4096], hn[32], hf[32];
    fs_dirname(dir, sizeof dir, path);
    uint64_t fr = fs_free_bytes(dir);
    human(need, hn, sizeof hn);
    if (fr == UINT64_MAX) snprintf(hf, sizeof hf, "unknown");
    else human(fr, hf, sizeof hf);
    err_set(e, "DiskFullError", "disk full: cannot write '%s': it needs %s (%llu bytes), %s free there%s", path, hn,
            (unsigned long long)need, hf, saved == EDQUOT ? " (disk quota exceeded)" : "");
    /* name the mount point: the folder being written may be a temp one that
     * is gone by the time the user reads this */
    char mnt[4096], up[4096];
    struct stat st, su;
    snprintf(mnt, sizeof mnt, "%s", dir);
    if (stat(mnt, &st) == 0) {
        for (int i = 0; i < 256; i++) {
            fs_dirname(up, sizeof up, mnt);
            if (!strcmp(up, mnt) || stat(up, &su) != 0 || su.st_dev != st.st_dev) break;
            snprintf(mnt, sizeof mnt, "%s", up);
        }
    }
    errno = saved;
    return err_hint(e, "free at least %s on the filesystem mounted at '%s' and run the command again", hn, mnt);
}

/* path.tmp.<pid>.<nonce>: the temp name every atomic write uses, which
 * store_sweep_temp recognises (and removes once <pid> is gone). */
static int tmp_name(const char *path, char *tmp, size_t cap, dlm_err *e)
{
    unsigned char nonce[4];
    randombytes_buf(nonce, sizeof nonce);
    int n = snprintf(tmp, cap, "%s.tmp.%d.%02x%02x%02x%02x", path, (int)getpid(), nonce[0], nonce[1], nonce[2],
                     nonce[3]);
    if (n < 0 || (size_t)n >= cap) return err_set(e, NULL, "path too long: '%s'", path);
    return 0;
}

int fs_write_atomic(const char *path, const void *data, size_t len, int mode, dlm_err *e)
{
    char dir[4096], tmp[4200];
    fs_dirname(dir, sizeof dir, path);
    if (tmp_name(path, tmp, sizeof tmp, e)) return -1;

    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd < 0) return err_sys(e, "cannot create '%s'", tmp);
    if (write_full(fd, data, len) != 0) goto fail;
    if (fsync(fd) != 0) goto fail;
    if (close(fd) != 0) { fd = -1; goto fail; }
    fd = -1;
    if (fs_fault_injected(path)) { errno = EIO; goto fail; }
    if (rename(tmp, path) != 0) goto fail;
    return fs_fsync_dir(dir, e);

fail:;
    int saved = errno;
    if (fd >= 0) close(fd);
    unlink(tmp);
    errno = saved;
    return fs_err_write(e, path, len);
}

int fs_mkdir_p(const char *path, dlm_err *e)
{
    char buf[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof buf) return err_set(e, NULL, "bad directory path '%s'", path);
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] == '/' || buf[i] == 0) {
            char c = buf[i];
            buf[i] = 0;
            if (mkdir(buf, 0755) != 0 && errno != EEXIST)
                return err_sys(e, "cannot create directory '%s'", buf);
            buf[i] = c;
        }
    }
    if (!fs_is_dir(path)) return err_set(e, NULL, "'%s' exists and is not a directory", path);
    return 0;
}

int fs_exists(const char *path) { struct stat st; return lstat(path, &st) == 0; }
int fs_is_dir(const char *path) { struct stat st; return stat(path, &st) == 0 && S_ISDIR(st.st_mode); }
int fs_is_file(const char *path) { struct stat st; return stat(path, &st) == 0 && S_ISREG(st.st_mode); }

int64_t fs_file_size(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0) return -1;
    return (int64_t)st.st_size;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int fs_list_dir(const char *dir, char ***names, dlm_err *e)
{
    *names = NULL;
    DIR *d = opendir(dir);
    if (!d) return err_sys(e, "cannot open directory '%s'", dir);
    int n = 0, cap = 0;
    char **v = NULL;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            char **nv = realloc(v, (size_t)cap * sizeof *v);
            if (!nv) goto oom;
            v = nv;
        }
        v[n] = strdup(de->d_name);
        if (!v[n]) goto oom;
        n++;
    }
    closedir(d);
    if (n) qsort(v, (size_t)n, sizeof *v, cmp_str);
    *names = v;
    return n;
oom:
    closedir(d);
    fs_free_list(v, n);
    return err_set(e, "MemoryError", "out of memory listing '%s'", dir);
}

void fs_free_list(char **names, int n)
{
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
}

uint64_t fs_tree_size(const char *dir)
{
    struct stat st;
    if (lstat(dir, &st) != 0) return 0;
    if (!S_ISDIR(st.st_mode)) return S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0;
    char **names;
    int n = fs_list_dir(dir, &names, NULL);
    if (n < 0) return 0;
    uint64_t total = 0;
    char p[4096];
    for (int i = 0; i < n; i++)
        if (fs_join(p, sizeof p, dir, names[i])) total += fs_tree_size(p);
    fs_free_list(names, n);
    return total;
}

int fs_remove_tree(const char *path, dlm_err *e)
{
    struct stat st;
    if (lstat(path, &st) != 0) return errno == ENOENT ? 0 : err_sys(e, "cannot stat '%s'", path);
    if (S_ISDIR(st.st_mode)) {
        char **names;
        int n = fs_list_dir(path, &names, e);
        if (n < 0) return -1;
        char p[4096];
        for (int i = 0; i < n; i++) {
            if (!fs_join(p, sizeof p, path, names[i]) || fs_remove_tree(p, e)) {
                fs_free_list(names, n);
                return -1;
            }
        }
        fs_free_list(names, n);
        if (rmdir(path) != 0) return err_sys(e, "cannot remove '%s'", path);
        return 0;
    }
    if (g_fault_rm[0] && strstr(path, g_fault_rm)) {   /* as a kill here would leave it */
        errno = EIO;
        return err_sys(e, "cannot remove '%s'", path);
    }
    if (unlink(path) != 0) return err_sys(e, "cannot remove '%s'", path);
    return 0;
}

int fs_discard_tree(const char *path, dlm_err *e)
{
    struct stat st;
    if (lstat(path, &st) != 0) return errno == ENOENT ? 0 : err_sys(e, "cannot stat '%s'", path);
    char parent[4096], trash[4400];
    if (!fs_dirname(parent, sizeof parent, path)) return err_set(e, NULL, "path too long: '%s'", path);
    snprintf(trash, sizeof trash, "%s/.%s.tmp-%d", parent, fs_basename(path), (int)getpid());
    if (fs_remove_tree(trash, e)) return -1;
    if (rename(path, trash) != 0) return err_sys(e, "cannot rename '%s' to '%s'", path, trash);
    if (fs_fsync_dir(parent, e)) return -1;
    return fs_remove_tree(trash, e);
}

int fs_copy_file(const char *src, const char *dst, dlm_err *e)
{
    /* streamed in 1 MiB pieces (a pack with its base is gigabytes), to a
     * temp name, fsync'd and renamed as fs_write_atomic writes */
    enum { CHUNK = 1 << 20 };
    int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0) return err_sys(e, "cannot open '%s'", src);
    struct stat st;
    if (fstat(in, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(in);
        return err_set(e, NULL, "'%s' is not a regular file", src);
    }
    char dir[4096], tmp[4200];
    fs_dirname(dir, sizeof dir, dst);
    char *buf = malloc(CHUNK);
    if (!buf) { close(in); return err_set(e, "MemoryError", "out of memory"); }
    if (tmp_name(dst, tmp, sizeof tmp, e)) { free(buf); close(in); return -1; }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) { err_sys(e, "cannot create '%s'", tmp); free(buf); close(in); return -1; }
    char label[64];
    snprintf(label, sizeof label, "copying %s", fs_basename(src));
    progress p;
    progress_begin(&p, label, (uint64_t)st.st_size, PROGRESS_BYTES);
    uint64_t done = 0;
    for (;;) {
        ssize_t r = read(in, buf, CHUNK);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) { err_sys(e, "cannot read '%s'", src); goto fail_read; }
        if (r == 0) break;
        if (write_full(fd, buf, (size_t)r) != 0) goto fail;
        done += (uint64_t)r;
        progress_update(&p, done);
    }
    if (fsync(fd) != 0) goto fail;
    if (close(fd) != 0) { fd = -1; goto fail; }
    fd = -1;
    if (fs_fault_injected(dst)) { errno = EIO; goto fail; }
    if (rename(tmp, dst) != 0) goto fail;
    progress_end(&p);
    free(buf);
    close(in);
    return fs_fsync_dir(dir, e);

fail:
    fs_err_write(e, dst, (uint64_t)st.st_size);
fail_read:
    progress_abort(&p);
    if (fd >= 0) close(fd);
    unlink(tmp);
    free(buf);
    close(in);
    return -1;
}

int fs_pid_gone(long pid)
{
    if (pid <= 0 || pid == (long)getpid()) return 0;
    return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}
