/* Store: paths, skeleton, manifest, lock, versions, current pointer; base
 * registry and --base parsing. */
#include "check.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "weights/registry.h"
#include "store/store.h"
#include "util/fs.h"
#include "util/json.h"

#define ID "01HZX3K4M5N6P7Q8R9S0T1V2W3"

static void test_paths_and_versions(void)
{
    dlm_err e;
    char dir[4200], p[4300];
    const char *home = check_tmpdir("test_store_home");
    CHECK_INT(store_dir(home, ID, dir, sizeof dir, &e), 0);
    CHECK(str_endswith(dir, "/store/" ID));
    CHECK_INT(store_dir(home, "../../etc", dir + 0, sizeof dir, &e), -1);   /* ids never escape the store */
    CHECK_INT(store_dir(home, ID, dir, sizeof dir, &e), 0);
    CHECK_INT(store_create_skeleton(dir, &e), 0);
    snprintf(p, sizeof p, "%s/adapter/versions", dir); CHECK(fs_is_dir(p));
    snprintf(p, sizeof p, "%s/logs", dir); CHECK(fs_is_dir(p));
    snprintf(p, sizeof p, "%s/exports", dir); CHECK(fs_is_dir(p));
    CHECK_INT(store_exists(dir), 0);
    CHECK_INT(store_next_version(dir, &e), 1);
    CHECK_INT(store_current_version(dir, &e), 0);
    const char *mk[] = {"v0001", "v0003", "v0002-rejected", "v0010", "notes", "vx"};
    for (int i = 0; i < 6; i++) {
        snprintf(p, sizeof p, "%s/adapter/versions/%s", dir, mk[i]);
        fs_mkdir_p(p, &e);
    }
    int *v;
    int n = store_versions(dir, &v, &e);
    CHECK_INT(n, 3);
    if (n == 3) { CHECK_INT(v[0], 1); CHECK_INT(v[1], 3); CHECK_INT(v[2], 10); }
    free(v);
    CHECK_INT(store_next_version(dir, &e), 11);
    CHECK_INT(store_set_current(dir, 3, &e), 0);
    char *buf;
    size_t len;
    snprintf(p, sizeof p, "%s/adapter/current.txt", dir);
    CHECK_INT(fs_read_all(p, 100, &buf, &len, &e), 0);
    CHECK_STR(buf, "adapter/versions/v0003\n");
    free(buf);
    CHECK_INT(store_current_version(dir, &e), 3);
    CHECK_INT(store_set_current(dir, 7, &e), -1);    /* no such version */
    fs_write_atomic(p, "garbage\n", 8, 0644, &e);
    CHECK_INT(store_current_version(dir, &e), -1);
    CHECK_STR(e.kind, "ManifestCorruptError");
    CHECK(store_size(dir) > 0);
}

static void test_manifest(void)
{
    dlm_err e;
    const char *dir = check_tmpdir("test_store_manifest");
    char p[4300];
    snprintf(p, sizeof p, "%s/manifest.json", dir);
    store_license lic = {"2026-01-02T03:04:05", "https://www.llama.com/llama3_2/license/", "Other", "cli_flag"};
    json_t *m = manifest_new(ID, "llama-3.2-1b", "9213176726f574b556790deb65791e0c5aa438b6", "/x/a.dlm", &lic);
    CHECK_INT(manifest_save(p, m, &e), 0);
    json_t *l = manifest_load(p, &e);
    CHECK(l != NULL);
    if (l) {
        CHECK_STR(jget_str(l, "dlm_id"), ID);
        long long v;
        CHECK_INT(jget_int(l, "schema_version", &v), 0);
        CHECK_INT(v, 1);
        CHECK_STR(jget_str(json_object_get(l, "license_acceptance"), "via"), "cli_flag");
        CHECK_INT(manifest_next_run_id(l), 1);
        json_t *run = json_pack("{s:s, s:i, s:i, s:s}", "started_at", "2026-01-02T03:04:05", "adapter_version", 1,
                                "seed", 42, "status", "completed");
        CHECK_INT(manifest_add_run(l, run, &e), 0);
        json_decref(run);
        CHECK_INT(manifest_next_run_id(l), 2);
        json_t *badrun = json_pack("{s:s, s:i, s:i, s:s}", "started_at", "yesterday", "adapter_version", 1, "seed", 1,
                                   "status", "done");
        CHECK_INT(manifest_add_run(l, badrun, &e), -1);
        json_decref(badrun);
        /* byte-identical save → load → save (Python json.dumps layout) */
        CHECK_INT(manifest_save(p, l, &e), 0);
        char *a, *b;
        size_t na, nb;
        fs_read_all(p, 1 << 20, &a, &na, &e);
        json_t *l2 = manifest_load(p, &e);
        json_save_file(p, l2, &e);
        fs_read_all(p, 1 << 20, &b, &nb, &e);
        CHECK_STR(a, b);
        CHECK(strstr(a, "\n  \"adapter_version\": 0,\n") != NULL);
        CHECK(a[na - 1] == '\n');
        free(a);
        free(b);
        json_decref(l2);
        json_decref(l);
    }
    json_decref(m);
    /* corrupt manifests */
    char msg[4600], buf[8192];
    fs_write_atomic(p, "{not json", 9, 0644, &e);
    CHECK(manifest_load(p, &e) == NULL);
    CHECK_STR(e.kind, "ManifestCorruptError");
    err_format(&e, buf, sizeof buf);
    snprintf(msg, sizeof msg, "%s: manifest is corrupt: invalid JSON", p);
    CHECK(!strncmp(buf, msg, strlen(msg)));
    const char *extra = "{\"dlm_id\": \"" ID "\", \"base_model\": \"x\", \"colour\": 1}";
    fs_write_atomic(p, extra, strlen(extra), 0644, &e);
    CHECK(manifest_load(p, &e) == NULL);
    err_format(&e, buf, sizeof buf);
    snprintf(msg, sizeof msg, "%s: manifest is corrupt: schema violation: colour: extra inputs are not permitted", p);
    CHECK_STR(buf, msg);
    const char *v2 = "{\"dlm_id\": \"" ID "\", \"base_model\": \"x\", \"schema_version\": 2}";
    fs_write_atomic(p, v2, strlen(v2), 0644, &e);
    CHECK(manifest_load(p, &e) == NULL);
    CHECK_STR(e.kind, "ManifestVersionError");
    err_format(&e, buf, sizeof buf);
    snprintf(msg, sizeof msg, "%s: manifest is corrupt: schema_version 2 requires migration to 1 before this store can be used", p);
    CHECK_STR(buf, msg);
    /* a run id past 2^53 (hand-edited): refused, so the next id cannot overflow */
    const char *big = "{\"dlm_id\": \"" ID "\", \"base_model\": \"x\", \"training_runs\": [{\"run_id\": "
                      "9223372036854775807, \"started_at\": \"2026-12-01T00:00:00Z\", \"adapter_version\": 1, \"seed\": 1}]}";
    fs_write_atomic(p, big, strlen(big), 0644, &e);
    CHECK(manifest_load(p, &e) == NULL);
    err_format(&e, buf, sizeof buf);
    snprintf(msg, sizeof msg, "%s: manifest is corrupt: schema violation: training_runs.0.run_id: integer out of range (over 2^53)", p);
    CHECK_STR(buf, msg);
    /* a seed is any int (training.seed: 2^63 - 1 is a valid frontmatter value) */
    const char *seed = "{\"dlm_id\": \"" ID "\", \"base_model\": \"x\", \"training_runs\": [{\"run_id\": 1, "
                       "\"started_at\": \"2026-12-01T00:00:00Z\", \"adapter_version\": 1, \"seed\": 9223372036854775807}]}";
    fs_write_atomic(p, seed, strlen(seed), 0644, &e);
    json_t *ms = manifest_load(p, &e);
    CHECK(ms != NULL);
    json_decref(ms);
}

static void test_lock(void)
{
    dlm_err e;
    const char *dir = check_tmpdir("test_store_lock");
    store_lock a, b;
    CHECK_INT(store_lock_acquire(dir, "train", &a, &e), 0);
    store_lock_info info;
    CHECK_INT(store_lock_read(dir, &info), 1);
    CHECK_INT(info.pid, getpid());
    CHECK_STR(info.command, "train");
    CHECK_INT(info.alive, 1);
    /* second writer (same process counts: the file is there) */
    CHECK_INT(store_lock_acquire(dir, "init", &b, &e), -1);
    CHECK_STR(e.kind, "LockHeldError");
    char want[4400];
    snprintf(want, sizeof want, "already locked by PID %ld (dlm train, since ", (long)getpid());
    CHECK(!strncmp(e.msg, want, strlen(want)));
    store_lock_release(&a);
    CHECK_INT(store_lock_read(dir, &info), 0);
    CHECK_INT(store_lock_acquire(dir, "init", &b, &e), 0);
    store_lock_release(&b);

    CHECK_INT(a.kernel, 1);

    /* a child that takes the lock and is killed -9 while holding it: the
     * kernel released it, the next acquire takes it over and names it */
    int pfd[2];
    CHECK_INT(pipe(pfd), 0);
    pid_t holder = fork();
    if (holder == 0) {
        store_lock c;
        dlm_err ce;
        char ok = store_lock_acquire(dir, "train", &c, &ce) == 0 ? 'y' : 'n';
        if (write(pfd[1], &ok, 1) != 1) _exit(2);
        for (;;) pause();
    }
    char got = 0;
    CHECK_INT((int)read(pfd[0], &got, 1), 1);
    CHECK_INT(got, 'y');
    CHECK_INT(store_lock_read(dir, &info), 1);
    CHECK_INT(info.pid, holder);
    CHECK_INT(info.kernel, 1);
    CHECK_INT(info.alive, 1);
    CHECK_INT(store_lock_acquire(dir, "init", &b, &e), -1);
    CHECK_STR(e.kind, "LockHeldError");
    kill(holder, SIGKILL);
    waitpid(holder, NULL, 0);
    close(pfd[0]);
    close(pfd[1]);
    CHECK_INT(store_lock_read(dir, &info), 1);    /* the file stays, its lock is gone */
    CHECK_INT(info.alive, 0);
    CHECK_INT(store_lock_acquire(dir, "export", &b, &e), 0);
    CHECK_INT(b.prev.pid, holder);
    CHECK_STR(b.prev.command, "train");
    CHECK_INT(store_lock_read(dir, &info), 1);
    CHECK_INT(info.pid, getpid());
    CHECK_STR(info.command, "export");
    store_lock_release(&b);
    CHECK_INT(store_lock_read(dir, &info), 0);

    /* a file without the kernel mark (the original tool) and a live pid on
     * this host: held, whatever the kernel lock says */
    char host[256], body[512], p[4300];
    gethostname(host, sizeof host);
    snprintf(p, sizeof p, "%s/.lock", dir);
    snprintf(body, sizeof body, "%d\n%s\n1700000000.5\n", (int)getppid(), host);
    fs_write_atomic(p, body, strlen(body), 0644, &e);
    CHECK_INT(store_lock_acquire(dir, "init", &b, &e), -1);
    CHECK_STR(e.kind, "LockHeldError");
    CHECK(fs_exists(p));

    /* ... and a dead pid: taken over (we hold the kernel lock) */
    pid_t child = fork();
    if (child == 0) _exit(0);
    waitpid(child, NULL, 0);
    snprintf(body, sizeof body, "%d\n%s\n1700000000.5\n", (int)child, host);
    fs_write_atomic(p, body, strlen(body), 0644, &e);
    CHECK_INT(store_lock_acquire(dir, "init", &b, &e), 0);
    CHECK_INT(b.prev.pid, child);
    store_lock_release(&b);
    CHECK(!fs_exists(p));

    /* no kernel locks (the fallback): a dead holder is reported, never taken */
    store_lock_test_hooks(0, 1);
    CHECK_INT(store_lock_acquire(dir, "train", &a, &e), 0);
    CHECK_INT(a.kernel, 0);
    CHECK_INT(store_lock_acquire(dir, "init", &b, &e), -1);
    CHECK_STR(e.kind, "LockHeldError");
    store_lock_release(&a);
    CHECK(!fs_exists(p));
    fs_write_atomic(p, body, strlen(body), 0644, &e);
    CHECK_INT(store_lock_acquire(dir, "init", &b, &e), -1);
    CHECK_STR(e.kind, "StaleLockError");
    snprintf(want, sizeof want, "lock is stale (PID %d not alive; since 2023-11-14T22:13:20 UTC)", (int)child);
    CHECK_STR(e.msg, want);
    snprintf(want, sizeof want, "rm '%s'", p);
    CHECK(strstr(e.hint, want) != NULL);
    CHECK(fs_exists(p));
    unlink(p);
    store_lock_test_hooks(0, 0);

    /* lock-file bytes are untrusted */
    store_lock_info li;
    CHECK_INT(store_lock_parse("12\nh\n1.5\ntrain\nkernel-lock\n", 27, &li), 0);
    CHECK_INT(li.pid, 12);
    CHECK_INT(li.kernel, 1);
    CHECK_STR(li.command, "train");
    CHECK_INT(store_lock_parse("12\nh\n1.5\nkernel-lock\n", 21, &li), 0);
    CHECK_INT(li.kernel, 1);
    CHECK_STR(li.command, "");
    CHECK_INT(store_lock_parse("-3\nh\n1.5\n", 10, &li), -1);
    CHECK_INT(store_lock_parse("12\nh", 4, &li), -1);
}

static void test_registry(void)
{
    dlm_err e;
    base_ref b;
    CHECK(registry_count() >= 30);
    const reg_entry *r = registry_lookup("smollm2-135m");
    CHECK(r && !strcmp(r->hf_id, "HuggingFaceTB/SmolLM2-135M-Instruct"));
    CHECK(r && !strcmp(r->revision, "12fd25f77366fa6b3b4b768ec3050bf629380bac"));
    CHECK(r && r->context_length == 8192 && r->params == 135000000 && r->modality == REG_TEXT);
    r = registry_lookup("phi-3.5-mini");
    CHECK(r && r->n_target_modules == 4 && !strcmp(r->target_modules[0], "qkv_proj"));
    r = registry_lookup("qwen2.5-coder-7b");
    CHECK(r && !strcmp(r->hf_id, "Qwen/Qwen2.5-Coder-7B-Instruct") && !strcmp(r->revision, "main"));
    CHECK(registry_lookup("qwen2.5-coder-14b") != NULL);
    CHECK(registry_lookup("qwen2-vl-2b-instruct")->modality == REG_VISION);
    CHECK(registry_lookup("qwen2-audio-7b-instruct")->modality == REG_AUDIO);

    CHECK_INT(registry_parse_base("tiny", &b, &e), 0);
    CHECK_INT(b.kind, BASE_TINY);
    CHECK_STR(b.entry->path, "models/tiny.gguf");
    CHECK_INT(registry_parse_base("qwen2.5-1.5b", &b, &e), 0);
    CHECK_INT(b.kind, BASE_REGISTRY);
    CHECK_INT(registry_parse_base("hf:Qwen/Qwen2.5-Coder-7B-Instruct@main", &b, &e), 0);
    CHECK_INT(b.kind, BASE_HF);
    CHECK_STR(b.hf_id, "Qwen/Qwen2.5-Coder-7B-Instruct");
    CHECK_STR(b.revision, "main");
    CHECK_INT(registry_parse_base("hf:noslash", &b, &e), -1);
    CHECK_INT(registry_parse_base("./models/base", &b, &e), 0);
    CHECK_INT(b.kind, BASE_PATH);
    CHECK_INT(registry_parse_base("base.gguf", &b, &e), 0);
    CHECK_INT(b.kind, BASE_PATH);
    CHECK_INT(registry_parse_base("qwen2.5-1.5", &b, &e), -1);
    CHECK_STR(e.kind, "UnknownBaseModelError");
    CHECK_STR(e.msg, "unknown base model 'qwen2.5-1.5'. Known keys: qwen2.5-0.5b, qwen2.5-1.5b, qwen2.5-3b, "
                     "qwen2.5-coder-1.5b, qwen3-1.7b, … (24 more). Use `hf:org/name` for models outside the registry.");
    CHECK(strstr(e.hint, "'qwen2.5-1.5b'") != NULL);
    const char *sug[3];
    CHECK(registry_suggest("smollm2-135", sug, 3) >= 1 && !strcmp(sug[0], "smollm2-135m"));

    CHECK_INT(registry_parse_base("qwen2-vl-2b-instruct", &b, &e), 0);
    CHECK_INT(registry_check_trainable(&b, &e), 0);   /* Qwen2-VL trains (docs/images.md) */
    CHECK_INT(registry_parse_base("paligemma-3b-mix-224", &b, &e), 0);
    CHECK_INT(registry_check_trainable(&b, &e), 0);   /* and PaliGemma */
    CHECK_INT(registry_parse_base("mistral-small-3.1-24b-instruct", &b, &e), 0);
    CHECK_INT(registry_check_trainable(&b, &e), -1);
    CHECK_STR(e.msg, "mistral-small-3.1-24b-instruct is a vision-language base; dlm trains text bases, Qwen2-VL, "
                     "PaliGemma and Qwen2-Audio only");
    CHECK_INT(registry_parse_base("llama-3.2-1b", &b, &e), 0);
    CHECK_INT(registry_check_trainable(&b, &e), 0);
    CHECK_INT(registry_check_license(&b, 0, &e), -1);
    CHECK_STR(e.msg, "meta-llama/Llama-3.2-1B-Instruct requires license acceptance. Accept the license and pass "
                     "--i-accept-license (or via dlm init). License: https://www.llama.com/llama3_2/license/");
    CHECK_INT(registry_check_license(&b, 1, &e), 0);
}

int main(void)
{
    test_paths_and_versions();
    test_manifest();
    test_lock();
    test_registry();
    return check_done();
}
