/* templates — see templates.h. */
#include "doc/templates.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/fs.h"
#include "util/json.h"
#include "util/str.h"

void doc_templates_free(doc_template_set *set)
{
    for (int i = 0; i < set->n; i++) {
        free((char *)set->v[i].name);
        free((char *)set->v[i].summary);
        free((char *)set->v[i].meta);
        free((char *)set->v[i].text);
    }
    free(set->v);
    set->v = NULL;
    set->n = 0;
}

static int push(doc_template_set *set, const char *name, const char *summary, const char *meta, const char *text)
{
    doc_template *nv = realloc(set->v, (size_t)(set->n + 1) * sizeof *nv);
    if (!nv) return -1;
    set->v = nv;
    nv[set->n].name = strdup(name);
    nv[set->n].summary = strdup(summary);
    nv[set->n].meta = strdup(meta);
    nv[set->n].text = strdup(text);
    if (!nv[set->n].name || !nv[set->n].summary || !nv[set->n].meta || !nv[set->n].text) return -1;
    set->n++;
    return 0;
}

/* Load the templates listed in <dir>/index.json (in that order). Entries
 * without a name or whose .dlm is missing are skipped, as a half-edited
 * directory should not hide the others. */
static int load_dir(doc_template_set *set, const char *dir)
{
    char p[4200];
    if (!fs_join(p, sizeof p, dir, "index.json") || !fs_is_file(p)) return 0;
    json_t *idx = json_load_path(p, 1 << 20, NULL);
    if (!idx) return 0;
    size_t i;
    json_t *m;
    int rc = 0;
    json_array_foreach(idx, i, m) {
        const char *name = jget_str(m, "name"), *summary = jget_str(m, "summary");
        if (!name || !*name || strchr(name, '/') || !summary) continue;
        char f[4400], *text;
        size_t tl;
        if (snprintf(f, sizeof f, "%s/%s.dlm", dir, name) >= (int)sizeof f) continue;
        if (fs_read_all(f, 1 << 20, &text, &tl, NULL)) continue;
        strbuf mj = STRBUF_INIT;
        json_write(&mj, m, JW_COMPACT);
        int r = mj.oom ? -1 : push(set, name, summary, sb_str(&mj), text);
        sb_free(&mj);
        free(text);
        if (r) { rc = -1; break; }
    }
    json_decref(idx);
    if (set->n) snprintf(set->source, sizeof set->source, "%s", dir);
    return rc;
}

static char g_dir[4096];

void doc_templates_set_dir(const char *dir) { snprintf(g_dir, sizeof g_dir, "%s", dir ? dir : ""); }

int doc_templates_load(doc_template_set *set, dlm_err *e)
{
    memset(set, 0, sizeof *set);
    const char *env = g_dir;
    if (*env) {
        if (load_dir(set, env)) goto oom;
        if (!set->n) return err_set(e, NULL, "DLM_TEMPLATES=%s has no templates (index.json + <name>.dlm)", env);
        return 0;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        char bin[PATH_MAX], dir[PATH_MAX + 16];
        fs_dirname(bin, sizeof bin, exe);
        snprintf(dir, sizeof dir, "%s/../templates", bin);
        if (load_dir(set, dir)) goto oom;
        if (set->n) return 0;
    }
#ifdef DLM_SOURCE_DIR
    if (load_dir(set, DLM_SOURCE_DIR "/templates")) goto oom;
    if (set->n) return 0;
#endif
    for (int i = 0; i < doc_templates_embedded_len; i++) {
        const doc_template *t = &doc_templates_embedded[i];
        if (push(set, t->name, t->summary, t->meta, t->text)) goto oom;
    }
    snprintf(set->source, sizeof set->source, "(embedded)");
    return 0;
oom:
    doc_templates_free(set);
    return err_set(e, "MemoryError", "out of memory loading templates");
}

const doc_template *doc_templates_find(const doc_template_set *set, const char *name)
{
    for (int i = 0; i < set->n; i++)
        if (!strcmp(set->v[i].name, name)) return &set->v[i];
    return NULL;
}

int doc_template_render(const doc_template *t, const char *dlm_id, const char *base_model, char **out, dlm_err *e)
{
    strbuf sb = STRBUF_INIT;
    const char *p = t->text;
    while (*p) {
        if (!strncmp(p, "{{DLM_ID}}", 10)) { sb_puts(&sb, dlm_id); p += 10; continue; }
        if (!strncmp(p, "{{BASE_MODEL}}", 14)) { sb_puts(&sb, base_model); p += 14; continue; }
        sb_putc(&sb, *p++);
    }
    if (sb.oom) { sb_free(&sb); return err_set(e, "MemoryError", "out of memory"); }
    *out = sb_detach(&sb, NULL);
    return *out ? 0 : err_set(e, "MemoryError", "out of memory");
}
