/* unpack — a verified pack installed as a store (pack.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sodium.h>
#include <unistd.h>

#include "doc/doc.h"
#include "share/pack.h"
#include "store/store.h"
#include "util/fs.h"
#include "util/hash.h"
#include "util/json.h"
#include "util/log.h"
#include "weights/hub.h"

#define MAX_DOC_BYTES (64u << 20)

/* 1 when a and b hold the same bytes. */
static int same_file(const char *a, const char *b)
{
    char ha[65], hb[65];
    dlm_err e;
    err_clear(&e);
    return !sha256_file_hex(a, ha, &e) && !sha256_file_hex(b, hb, &e) && !strcmp(ha, hb);
}

/* The pack's base (manifest.json "base", checked against the base/ members
 * by pack_read) as a hub_install from the staging folder. */
static int base_install(const pack_contents *c, const char *staging, int force, int check_only, unpack_result *res,
                        dlm_err *e)
{
    json_t *b = json_object_get(c->manifest, "base");
    if (!json_is_object(b)) return 0;
    json_t *files = json_object_get(b, "files"), *absent = json_object_get(b, "absent"), *v;
    size_t nf = json_object_size(files), na = json_array_size(absent), i = 0;
    hub_file *f = calloc(nf ? nf : 1, sizeof *f);
    char(*ab)[256] = calloc(na ? na : 1, sizeof *ab);
    int rc = -1, replaced = 0;
    const char *k;
    if (!f || !ab) { err_set(e, "OOMError", "out of memory"); goto out; }
    json_object_foreach(files, k, v) {
        snprintf(f[i].name, sizeof f[i].name, "%s", k);
        snprintf(f[i].blob, sizeof f[i].blob, "%s", jget_str(v, "blob"));
        snprintf(f[i].sha256, sizeof f[i].sha256, "%s", jget_str(v, "sha256"));
        snprintf(f[i].path, sizeof f[i].path, "%s/base/%s", staging, k);
        i++;
    }
    json_array_foreach(absent, i, v) snprintf(ab[i], sizeof *ab, "%s", json_string_value(v));
    hub_opts ho;
    if (hub_opts_init(&ho, e)) goto out;
    hub_install in = {.repo = jget_str(b, "repo"), .rev = jget_str(b, "revision"), .commit = jget_str(b, "commit"),
                      .files = f, .n = (int)nf, .absent = (const char(*)[256])ab, .nabsent = (int)na, .force = force};
    if (hub_install_snapshot(&ho, &in, check_only, &replaced, e)) {
        err_prefix(e, "the pack's base %s", in.repo);
        goto out;
    }
    res->base_files = (int)nf;
    res->base_replaced = replaced;
    snprintf(res->base_repo, sizeof res->base_repo, "%s", in.repo);
    snprintf(res->base_cache, sizeof res->base_cache, "%s", ho.cache);
    rc = 0;
out:
    free(f);
    free(ab);
    return rc;
}

/* 1 when the decimal pid at s (ending at end or at stop) names no process. */
static int dead_pid(const char *s, char stop)
{
    char *end;
    errno = 0;
    long pid = strtol(s, &end, 10);
    if (errno || end == s || (*end && *end != stop)) return 0;
    return fs_pid_gone(pid);
}

/* What an unpack killed part-way leaves next to the stores, put right by
 * the next one: its staging folder ".unpack-<pid>-<hex>" is removed; a
 * store it had moved aside, "<dlm_id>.old-<pid>", is put back when the
 * kill came before the new store was in place (nothing else is at
 * <dlm_id>), else removed (the new store was installed). Only names whose
 * pid is dead are touched, so a running unpack is left alone. */
static void sweep_dead_unpacks(const char *stores)
{
    char **names;
    int n = fs_list_dir(stores, &names, NULL);
    for (int i = 0; i < n; i++) {
        const char *nm = names[i], *old = strstr(nm, ".old-");
        char p[4400], target[4400];
        dlm_err e;
        err_clear(&e);
        snprintf(p, sizeof p, "%s/%s", stores, nm);
        if (!strncmp(nm, ".unpack-", 8) && dead_pid(nm + 8, '-')) {
            if (!fs_remove_tree(p, &e)) log_info("removed %s, left by an unpack that did not finish", p);
        } else if (old && old - nm == 26 && dead_pid(old + 5, 0)) {
            snprintf(target, sizeof target, "%s/%.26s", stores, nm);
            if (!pack_valid_dlm_id(fs_basename(target))) continue;
            if (fs_exists(target)) {
                if (!fs_remove_tree(p, &e)) log_info("removed %s, the store an unpack --force had replaced", p);
            } else if (!rename(p, target) && !fs_fsync_dir(stores, &e)) {
                log_warn("an unpack --force died before installing its store; the previous store was put back at %s",
                         target);
            }
        }
    }
    if (n > 0) fs_free_list(names, n);
}

int unpack_run(const unpack_opts *o, unpack_result *res, dlm_err *e)
{
    memset(res, 0, sizeof *res);
    hash_init();
    char stores[4096], staging[4200], old[4300] = "", sdoc[8192], sstore[4300], target[4096], outdir[4096];
    if (!fs_join(stores, sizeof stores, o->home, "store")) return err_set(e, "PackError", "home path too long");
    if (fs_mkdir_p(stores, e)) return -1;
    sweep_dead_unpacks(stores);
    uint32_t nonce = randombytes_random();
    snprintf(staging, sizeof staging, "%s/.unpack-%ld-%08x", stores, (long)getpid(), nonce);
    pack_contents *c = pack_read_file(o->pack_path, staging, &o->limits, e);
    if (!c) return -1;
    int rc = -1, installed = 0;
    json_t *sm = NULL;
    dlm_doc *d = NULL;
    const char *docname = c->dlm_rel + 4;
    snprintf(sdoc, sizeof sdoc, "%s/%s", staging, c->dlm_rel);
    snprintf(sstore, sizeof sstore, "%s/store", staging);
    if (store_dir(o->home, c->dlm_id, target, sizeof target, e)) goto out;
    if (o->out_dir) snprintf(outdir, sizeof outdir, "%s", o->out_dir);
    else fs_dirname(outdir, sizeof outdir, o->pack_path);
    snprintf(res->doc_path, sizeof res->doc_path, "%s/%s", outdir, docname);

    /* the pack's pieces must agree with each other */
    char mp[4400];
    snprintf(mp, sizeof mp, "%s/manifest.json", sstore);
    if (!(sm = manifest_load(mp, e))) { err_prefix(e, "in the pack"); goto out; }
    const char *sid = jget_str(sm, "dlm_id");
    if (!sid || strcmp(sid, c->dlm_id)) {
        err_at(e, "PackIntegrityError", o->pack_path, 0, 0, "store/manifest.json is for %s, the pack for %s",
               sid ? sid : "(none)", c->dlm_id);
        goto out;
    }
    if (!(d = doc_load(sdoc, e))) { err_prefix(e, "the pack's document"); goto out; }
    if (strcmp(doc_fm(d)->dlm_id, c->dlm_id)) {
        err_at(e, "PackIntegrityError", o->pack_path, 0, 0, "%s has dlm_id %s, the pack is for %s", c->dlm_rel,
               doc_fm(d)->dlm_id, c->dlm_id);
        goto out;
    }

    /* refusals before anything moves */
    if (fs_exists(res->doc_path) && !o->force && !same_file(res->doc_path, sdoc)) {
        err_set(e, "PackTargetExistsError", "%s already exists and differs from the pack's document", res->doc_path);
        err_hint(e, "pass --force to replace it, or --out DIR to put the document elsewhere");
        goto out;
    }
    if (fs_exists(target)) {
        if (!o->force) {
            err_set(e, "PackTargetExistsError", "a store for %s already exists at %s", c->dlm_id, target);
            err_hint(e, "pass --force to replace it (the old store is kept until the new one is in place)");
            goto out;
        }
        store_lock_info li;
        if (store_lock_read(target, &li) == 1 && li.alive != 0) {
            err_set(e, "LockHeldError", "%s/.lock: already locked by PID %ld (dlm %s)", target, li.pid,
                    li.command[0] ? li.command : "?");
            err_hint(e, "wait for that command to finish, then unpack again");
            goto out;
        }
    }
    if (base_install(c, staging, o->force, 1, res, e)) goto out;
    if (fs_mkdir_p(outdir, e) || store_create_skeleton(sstore, e)) goto out;

    /* the base first: a store is only installed once what it runs on is */
    if (base_install(c, staging, o->force, 0, res, e)) goto out;

    /* install: old store aside, new one in, document copied */
    if (fs_exists(target)) {
        snprintf(old, sizeof old, "%s.old-%ld", target, (long)getpid());
        if (rename(target, old)) { err_sys(e, "cannot move %s aside", target); old[0] = 0; goto out; }
        res->replaced = 1;
    }
    if (rename(sstore, target)) { err_sys(e, "cannot install %s", target); goto restore; }
    installed = 1;
    if (fs_fsync_dir(stores, e)) goto restore;
    if (fs_exists(res->doc_path) && same_file(res->doc_path, sdoc)) {
        /* already there, byte for byte */
    } else if (fs_copy_file(sdoc, res->doc_path, e)) goto restore;
    if (old[0]) {
        dlm_err e2;
        err_clear(&e2);
        fs_remove_tree(old, &e2);
    }
    snprintf(res->dlm_id, sizeof res->dlm_id, "%s", c->dlm_id);
    snprintf(res->store, sizeof res->store, "%s", target);
    long long av = 0;
    jget_int(c->manifest, "adapter_version", &av);
    res->adapter_version = (int)av;
    for (int i = 0; i < c->n; i++) res->n_files += !c->m[i].is_dir;
    rc = 0;
    goto out;
restore:
    if (installed) {
        /* put the new store back into staging, to be removed with it */
        if (rename(target, sstore)) {
            dlm_err e2;
            err_clear(&e2);
            fs_remove_tree(target, &e2);
        }
    }
    if (old[0] && rename(old, target) == 0) err_hint(e, "the previous store was put back at %s", target);
    else if (old[0]) err_hint(e, "the previous store is at %s; move it back to %s", old, target);
out:
    {
        dlm_err e2;
        err_clear(&e2);
        fs_remove_tree(staging, &e2);
    }
    doc_free(d);
    json_decref(sm);
    pack_contents_free(c);
    return rc;
}
