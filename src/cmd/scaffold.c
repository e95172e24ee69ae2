/* scaffold — `dlm train DIR`: find or write DIR/.dlm/<name>.dlm, a document
 * whose one training.sources directive is DIR (spec §3.1 step 1, §11).
 *
 *   DIR/.dlm/<name>.dlm exists     → reuse it (its dlm_id, so its store)
 *   only one DIR/.dlm/<x>.dlm and the default name → reuse that one
 *   several and no --name           → refuse, listing them
 *   none (or --rescaffold)          → --base is required; a fresh ULID (the
 *                                     old one on --rescaffold), path = DIR
 *                                     absolute, include from --include or
 *                                     "**" "/" "*" (-r, the default) / "*" (-R)
 *
 * The path is written absolute because "." would anchor at the scaffold's
 * grandparent anyway, and an absolute path keeps the document meaningful
 * when copied elsewhere. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/cmd.h"
#include "doc/doc.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/str.h"
#include "util/ulid.h"
#include "weights/registry.h"

int scaffold_train_target(const char *dir, const scaffold_opts *o, char *out, size_t cap, int *scaffolded, dlm_err *e)
{
    *scaffolded = 0;
    char root[PATH_MAX], sdir[PATH_MAX + 8], path[PATH_MAX + 300];
    if (!realpath(dir, root)) return err_sys(e, "cannot resolve '%s'", dir);
    if (!fs_is_dir(root)) return err_set(e, "ScaffoldError", "scaffold expects a directory, got file: %s", dir);
    const char *name = o->name ? o->name : SCAFFOLD_DEFAULT_NAME;
    if (!*name || strchr(name, '/') || name[0] == '.')
        return err_set(e, "ScaffoldError", "--name '%s' is not a plain file name", name);
    snprintf(sdir, sizeof sdir, "%s/.dlm", root);
    snprintf(path, sizeof path, "%s/%s.dlm", sdir, name);
    int is_default = !o->name || !strcmp(name, SCAFFOLD_DEFAULT_NAME);
    if (!o->rescaffold) {
        if (fs_is_file(path)) {
            snprintf(out, cap, "%s", path);
            return 0;
        }
        char **names = NULL;
        int n = fs_is_dir(sdir) ? fs_list_dir(sdir, &names, e) : 0;
        if (n < 0) return -1;
        int nd = 0, last = -1;
        for (int i = 0; i < n; i++)
            if (str_endswith(names[i], ".dlm") && strlen(names[i]) > 4) { nd++; last = i; }
        if (is_default && nd == 1) {
            snprintf(out, cap, "%s/%s", sdir, names[last]);
            fs_free_list(names, n);
            return 0;
        }
        if (is_default && nd > 1) {
            strbuf sb = STRBUF_INIT;
            for (int i = 0; i < n; i++)
                if (str_endswith(names[i], ".dlm") && strlen(names[i]) > 4)
                    sb_printf(&sb, "%s  dlm train %s --name %.*s", sb.len ? "\n" : "", dir, (int)(strlen(names[i]) - 4),
                              names[i]);
            fs_free_list(names, n);
            err_set(e, "ScaffoldError", "multiple .dlm files found under %s; pass --name to pick one:\n%s", sdir,
                    sb_str(&sb));
            sb_free(&sb);
            return -1;
        }
        fs_free_list(names, n);
    }
    if (!o->base) {
        err_set(e, "ScaffoldError", "first-run scaffold of %s requires --base <key>", dir);
        return err_hint(e, "pick a key from the base registry (e.g. smollm2-135m, qwen2.5-coder-1.5b), "
                           "hf:<org>/<name>, or a local model path");
    }
    base_ref base;
    if (registry_parse_base(o->base, &base, e)) return -1;
    char id[27];
    ulid_new(id);
    if (o->rescaffold && fs_is_file(path)) {
        dlm_doc *old = doc_load(path, e);
        if (!old) return -1;
        snprintf(id, sizeof id, "%s", doc_fm(old)->dlm_id);   /* the store stays the same */
        doc_free(old);
    }
    strbuf sb = STRBUF_INIT;
    sb_printf(&sb, "---\ndlm_id: %s\ndlm_version: %d\nbase_model: ", id, DOC_SCHEMA_VERSION);
    doc_yaml_scalar(&sb, o->base);
    sb_printf(&sb, "\ntraining:\n  sources_policy: %s\n  sources:\n    - path: ", o->policy_strict ? "strict" : "permissive");
    doc_yaml_scalar(&sb, root);
    sb_puts(&sb, "\n      include:\n");
    if (o->include && o->include->n)
        for (int i = 0; i < o->include->n; i++) { sb_puts(&sb, "        - "); doc_yaml_scalar(&sb, o->include->v[i]); sb_putc(&sb, '\n'); }
    else
        sb_printf(&sb, "        - \"%s\"\n", o->recursive ? "**/*" : "*");
    if (o->exclude && o->exclude->n) {
        sb_puts(&sb, "      exclude:\n");
        for (int i = 0; i < o->exclude->n; i++) { sb_puts(&sb, "        - "); doc_yaml_scalar(&sb, o->exclude->v[i]); sb_putc(&sb, '\n'); }
    }
    sb_puts(&sb, "---\n\n# Auto-scaffolded by `dlm train`. Edit the frontmatter above to refine training.\n");
    if (sb.oom) { sb_free(&sb); return err_set(e, "MemoryError", "out of memory"); }
    /* the scaffold must read back as a valid document before it is written */
    dlm_doc *d = doc_parse(path, sb.buf, sb.len, e);
    if (!d) { sb_free(&sb); err_prefix(e, "the scaffold is not a valid document"); return -1; }
    doc_free(d);
    if (o->dry_run) /* a hidden name beside it, removed by scaffold_discard: the tree is left as it was */
        snprintf(path, sizeof path, "%s/.%s.dlm.tmp-%ld", sdir, name, (long)getpid());
    int rc = fs_mkdir_p(sdir, e) || fs_write_atomic(path, sb.buf, sb.len, 0644, e) ? -1 : 0;
    sb_free(&sb);
    if (rc) return -1;
    snprintf(out, cap, "%s", path);
    *scaffolded = o->dry_run ? 2 : 1;
    return 0;
}

void scaffold_discard(const char *path)
{
    char sdir[PATH_MAX + 8];
    unlink(path);
    fs_dirname(sdir, sizeof sdir, path);
    rmdir(sdir);   /* only when the dry run made it: rmdir leaves a folder with files */
}
