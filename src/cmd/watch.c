/* watch — `dlm train PATH --watch` / `--listen-rpc`: wait (inotify, and the
 * probe RPC's wake pipe) for a debounced change of the document or of a file
 * under its training.sources roots, or for injected probes, and tell whether
 * the change brought section ids the store has not trained on. */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd/cmd.h"
#include "doc/doc.h"
#include "doc/sources.h"
#include "store/store.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/log.h"
#include "util/timeutil.h"

#define WATCH_MASK (IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_CREATE | IN_DELETE | IN_ATTRIB)
#define WATCH_MAX_DIRS 8192

static void add_tree(int fd, const char *dir, int depth, int *n)
{
    if (*n >= WATCH_MAX_DIRS || depth > 64) return;
    if (inotify_add_watch(fd, dir, WATCH_MASK | IN_ONLYDIR) < 0) return;
    (*n)++;
    char **names = NULL;
    int k = fs_list_dir(dir, &names, NULL);
    for (int i = 0; i < k; i++) {
        /* .git churns on every commit and never trains (default exclude) */
        if (!strcmp(names[i], ".git")) continue;
        char p[PATH_MAX];
        struct stat st;
        if (!fs_join(p, sizeof p, dir, names[i]) || lstat(p, &st) || !S_ISDIR(st.st_mode)) continue;
        add_tree(fd, p, depth + 1, n);
    }
    if (k > 0) fs_free_list(names, k);
}

int watch_wait(const char *doc_path, int debounce_ms, int wake_fd, volatile sig_atomic_t *stop, dlm_err *e)
{
    int fd = doc_path ? inotify_init1(IN_CLOEXEC | IN_NONBLOCK) : -1;
    if (doc_path && fd < 0) return err_sys(e, "inotify");
    char dir[PATH_MAX];
    int n = 0;
    if (doc_path) {
        fs_dirname(dir, sizeof dir, doc_path);
        if (inotify_add_watch(fd, dir, WATCH_MASK) >= 0) n++;
    }
    dlm_doc *d = doc_path ? doc_load(doc_path, e) : NULL;
    if (d) {
        src_report r;
        dlm_err le;
        /* the roots as the expansion resolves them; a bad directive still
         * leaves the document watched, so fixing it triggers a run */
        if (!src_expand(doc_path, doc_fm(d), NULL, NULL, NULL, &r, &le) || r.n_dirs) {
            for (int i = 0; i < r.n_dirs; i++)
                if (r.dirs[i].root && fs_is_dir(r.dirs[i].root)) add_tree(fd, r.dirs[i].root, 0, &n);
        }
        src_report_free(&r);
        doc_free(d);
    }
    if (n >= WATCH_MAX_DIRS) log_warn("watching the first %d directories only", WATCH_MAX_DIRS);
    char buf[16384];
    int changed = 0;
    while (!*stop) {
        /* fd or wake_fd may be -1 (poll skips it) */
        struct pollfd p[2] = {{fd, POLLIN, 0}, {wake_fd, POLLIN, 0}};
        int r = poll(p, 2, changed ? debounce_ms : 1000);
        if (r < 0) {
            if (errno == EINTR) continue;
            if (fd >= 0) close(fd);
            return err_sys(e, "poll");
        }
        if (r == 0) {
            if (changed) break;     /* quiet for debounce_ms after a change */
            continue;
        }
        if (fd >= 0 && (p[0].revents & POLLIN))
            while (read(fd, buf, sizeof buf) > 0) changed = 1;
        if (wake_fd >= 0 && (p[1].revents & POLLIN)) {
            /* a probe arrived: drain the bytes seen so far, so poll sleeps
             * until the next one (the queue itself is inject_drain's) */
            char w[256];
            while (read(wake_fd, w, sizeof w) > 0) {}
            changed = 1;
        }
    }
    if (fd >= 0) close(fd);
    return *stop ? 0 : 1;
}

int watch_new_sections(const char *doc_path, const char *home, const doc_section *extra, int n_extra, int *ok,
                       char **why, int *n_new, int *n_total, char *store_out, size_t store_cap, dlm_err *e)
{
    *n_new = *n_total = 0;
    dlm_doc *d = doc_load(doc_path, e);
    if (!d) return -1;
    for (int i = 0; i < n_extra; i++) {
        dlm_err ae;
        err_clear(&ae);
        ok[i] = !doc_append_section(d, &extra[i], &ae);
        free(why[i]);   /* a batch kept from an earlier try */
        why[i] = ok[i] ? NULL : strdup(ae.msg);
    }
    if (doc_expand_sources(d, e)) { doc_free(d); return -1; }
    char store[4096], mp[4200];
    if (store_dir(home, doc_fm(d)->dlm_id, store, sizeof store, e)) { doc_free(d); return -1; }
    if (store_out) snprintf(store_out, store_cap, "%s", store);
    snprintf(mp, sizeof mp, "%s/manifest.json", store);
    json_t *m = json_load_file(mp, 0, NULL);
    json_t *seen = m ? json_object_get(m, "content_hashes") : NULL;
    for (int i = 0; i < doc_nsections(d); i++) {
        const doc_section *s = doc_section_at(d, i);
        if (s->type != DOC_PROSE && s->type != DOC_INSTRUCTION) continue;
        (*n_total)++;
        if (!json_object_get(seen, s->id)) (*n_new)++;
    }
    json_decref(m);
    doc_free(d);
    return 0;
}
