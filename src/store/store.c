/* store — paths, skeleton, adapter versions, current pointer, size. */
#include "store/store.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/fs.h"
#include "util/ulid.h"

int store_dir(const char *home, const char *dlm_id, char *out, size_t cap, dlm_err *e)
{
    /* The id names a directory: only a valid ULID may (no "..", no "/"). */
    if (!ulid_valid(dlm_id)) return err_set(e, NULL, "'%s' is not a valid dlm_id", dlm_id);
    int n = snprintf(out, cap, "%s/store/%s", home, dlm_id);
    if (n < 0 || (size_t)n >= cap) return err_set(e, NULL, "store path too long");
    return 0;
}

int store_path(const char *store, const char *rel, char *out, size_t cap, dlm_err *e)
{
    if (!fs_join(out, cap, store, rel)) return err_set(e, NULL, "store path too long");
    return 0;
}

int store_exists(const char *store)
{
    char p[4200];
    return fs_join(p, sizeof p, store, "manifest.json") && fs_is_file(p);
}

int store_create_skeleton(const char *store, dlm_err *e)
{
    static const char *const dirs[] = {"adapter/versions", "logs", "exports"};
    char p[4200];
    if (fs_mkdir_p(store, e)) return -1;
    for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++) {
        if (!fs_join(p, sizeof p, store, dirs[i])) return err_set(e, NULL, "store path too long");
        if (fs_mkdir_p(p, e)) return -1;
    }
    return 0;
}

void store_version_name(int v, char *out, size_t cap)
{
    snprintf(out, cap, "v%04d", v);
}

/* "v" + digits only; returns the number or -1. */
static int parse_vname(const char *s)
{
    if (s[0] != 'v' || !s[1]) return -1;
    long v = 0;
    for (const char *p = s + 1; *p; p++) {
        if (*p < '0' || *p > '9') return -1;
        v = v * 10 + (*p - '0');
        if (v > 1000000) return -1;
    }
    return (int)v;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* "adapter" or "adapter/<name>", relative to the store; the name was
 * checked against the grammar ^[a-z][a-z0-9_]{0,31}$ by the caller's
 * document, checked again here because it names a directory. */
static int tree_rel(const char *name, char *out, size_t cap, dlm_err *e)
{
    if (!name) {
        snprintf(out, cap, "adapter");
        return 0;
    }
    size_t n = strlen(name);
    int ok = n >= 1 && n <= 32 && name[0] >= 'a' && name[0] <= 'z';
    for (size_t i = 1; ok && i < n; i++)
        ok = (name[i] >= 'a' && name[i] <= 'z') || (name[i] >= '0' && name[i] <= '9') || name[i] == '_';
    if (!ok) return err_set(e, "UnknownAdapterError", "'%s' is not a valid adapter name", name);
    snprintf(out, cap, "adapter/%s", name);
    return 0;
}

int store_adapter_dir(const char *store, const char *name, char *out, size_t cap, dlm_err *e)
{
    char rel[64];
    if (tree_rel(name, rel, sizeof rel, e)) return -1;
    if (!fs_join(out, cap, store, rel)) return err_set(e, NULL, "store path too long");
    return 0;
}

int store_versions_of(const char *store, const char *name, int **out, dlm_err *e)
{
    *out = NULL;
    char t[4200], p[4300];
    if (store_adapter_dir(store, name, t, sizeof t, e)) return -1;
    if (!fs_join(p, sizeof p, t, "versions")) return err_set(e, NULL, "store path too long");
    if (!fs_is_dir(p)) return 0;
    char **names;
    int n = fs_list_dir(p, &names, e);
    if (n < 0) return -1;
    int *v = malloc(sizeof(int) * (size_t)(n ? n : 1)), k = 0;
    if (!v) { fs_free_list(names, n); return err_set(e, "MemoryError", "out of memory"); }
    for (int i = 0; i < n; i++) {
        char q[4400];
        int x = parse_vname(names[i]);
        if (x >= 1 && fs_join(q, sizeof q, p, names[i]) && fs_is_dir(q)) v[k++] = x;
    }
    fs_free_list(names, n);
    qsort(v, (size_t)k, sizeof *v, cmp_int);
    *out = v;
    return k;
}

int store_next_version_of(const char *store, const char *name, dlm_err *e)
{
    int *v;
    int n = store_versions_of(store, name, &v, e);
    if (n < 0) return -1;
    int next = n ? v[n - 1] + 1 : 1;
    free(v);
    return next;
}

int store_current_version_of(const char *store, const char *name, dlm_err *e)
{
    char rel[64], pre[80], p[4200];
    if (tree_rel(name, rel, sizeof rel, e)) return -1;
    snprintf(pre, sizeof pre, "%s/current.txt", rel);
    if (!fs_join(p, sizeof p, store, pre)) return err_set(e, NULL, "store path too long");
    if (!fs_is_file(p)) return 0;
    char *buf;
    size_t len;
    if (fs_read_all(p, 4096, &buf, &len, e)) return -1;
    while (len && (buf[len - 1] == '\n' || buf[len - 1] == ' ' || buf[len - 1] == '\r')) buf[--len] = 0;
    snprintf(pre, sizeof pre, "%s/versions/", rel);
    int v = -1;
    if (!strncmp(buf, pre, strlen(pre))) v = parse_vname(buf + strlen(pre));
    free(buf);
    if (v < 1) return err_at(e, "ManifestCorruptError", p, 0, 0, "does not name %svNNNN", pre);
    return v;
}

int store_set_current_of(const char *store, const char *name, int v, dlm_err *e)
{
    char rel[64], p[4200], vdir[4300], body[160], vn[16];
    if (tree_rel(name, rel, sizeof rel, e)) return -1;
    store_version_name(v, vn, sizeof vn);
    snprintf(body, sizeof body, "%s/versions/%s\n", rel, vn);
    snprintf(vdir, sizeof vdir, "%s/%s/versions/%s", store, rel, vn);
    if (!fs_is_dir(vdir)) return err_set(e, NULL, "no adapter version %s in %s/%s", vn, store, rel);
    snprintf(p, sizeof p, "%s/%s/current.txt", store, rel);
    return fs_write_atomic(p, body, strlen(body), 0644, e);
}

int store_versions(const char *store, int **out, dlm_err *e) { return store_versions_of(store, NULL, out, e); }
int store_next_version(const char *store, dlm_err *e) { return store_next_version_of(store, NULL, e); }
int store_current_version(const char *store, dlm_err *e) { return store_current_version_of(store, NULL, e); }
int store_set_current(const char *store, int v, dlm_err *e) { return store_set_current_of(store, NULL, v, e); }

uint64_t store_size(const char *store)
{
    return fs_tree_size(store);
}
