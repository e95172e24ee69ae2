/* hub: cache-root precedence, repo folder naming, id validation, and cache
 * resolution without a network (refs → snapshots, .no_exist, offline
 * errors, fallback to the cache when the endpoint is unreachable).
 *
 * Also the driver tests/ref/r0201-hub-download.sh runs against a local
 * server (environment as for dlm: HF_HUB_CACHE, HF_ENDPOINT, HF_TOKEN,
 * HF_HUB_OFFLINE; DLM_HUB_RETRIES / DLM_HUB_BACKOFF_MS tune retries):
 *   test_hub get REPO REV FILE     prints the local path
 *   test_hub snapshot REPO REV     prints the snapshot folder
 *   test_hub base SPEC             base_resolve (registry key, hf:, path)
 * Exit 0 ok, 3 not found, 1 error ("Kind: message" and the hint on stderr). */
#include "check.h"
#include "cmd/commands.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "weights/base.h"
#include "weights/hub.h"
#include "util/fs.h"
#include "util/hash.h"
#include "util/str.h"

static dlm_err E;

static void clear_env(void)
{
    const char *v[] = {"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME", "HF_HUB_OFFLINE",
                       "TRANSFORMERS_OFFLINE", "HF_ENDPOINT", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) unsetenv(v[i]);
}

static void test_root(void)
{
    char r[4096];
    clear_env();
    setenv("HOME", "/home/u", 1);
    cmd_read_env(&E);
    CHECK_INT(hub_cache_root(r, sizeof r, &E), 0);
    CHECK_STR(r, "/home/u/.cache/huggingface/hub");
    setenv("XDG_CACHE_HOME", "/xdg", 1);
    cmd_read_env(&E);
    hub_cache_root(r, sizeof r, &E);
    CHECK_STR(r, "/xdg/huggingface/hub");
    setenv("HF_HOME", "/hfhome", 1);
    cmd_read_env(&E);
    hub_cache_root(r, sizeof r, &E);
    CHECK_STR(r, "/hfhome/hub");
    setenv("HUGGINGFACE_HUB_CACHE", "/legacy", 1);
    cmd_read_env(&E);
    hub_cache_root(r, sizeof r, &E);
    CHECK_STR(r, "/legacy");
    setenv("HF_HUB_CACHE", "/new", 1);
    cmd_read_env(&E);
    hub_cache_root(r, sizeof r, &E);
    CHECK_STR(r, "/new");

    hub_opts o;
    setenv("HF_ENDPOINT", "http://127.0.0.1:9/", 1);
    setenv("HF_TOKEN", "hf_x", 1);
    setenv("TRANSFORMERS_OFFLINE", "1", 1);
    cmd_read_env(&E);
    CHECK_INT(hub_opts_init(&o, &E), 0);
    CHECK_STR(o.endpoint, "http://127.0.0.1:9");
    CHECK_STR(o.token, "hf_x");
    CHECK_INT(o.offline, 1);
    clear_env();
    cmd_read_env(&E);
    CHECK_INT(hub_opts_init(&o, &E), 0);
    CHECK_STR(o.endpoint, "https://huggingface.co");
    CHECK_INT(o.offline, 0);
    CHECK_STR(o.token, "");

    CHECK_INT(hub_repo_dir(&o, "HuggingFaceTB/SmolLM2-135M-Instruct", r, sizeof r, &E), 0);
    CHECK(str_endswith(r, "/models--HuggingFaceTB--SmolLM2-135M-Instruct"));
}

static void test_validation(void)
{
    CHECK(hub_valid_repo("Qwen/Qwen2.5-0.5B-Instruct"));
    CHECK(!hub_valid_repo("Qwen"));
    CHECK(!hub_valid_repo("a/b/c"));
    CHECK(!hub_valid_repo("../b"));
    CHECK(!hub_valid_repo("a/.."));
    CHECK(!hub_valid_repo("a--b/c"));
    CHECK(!hub_valid_repo("a/b c"));
    CHECK(!hub_valid_repo("/b"));
    CHECK(hub_valid_rev("main"));
    CHECK(hub_valid_rev("refs/pr/1"));
    CHECK(!hub_valid_rev("../main"));
    CHECK(!hub_valid_rev("/main"));
    CHECK(!hub_valid_rev(""));
    CHECK(hub_valid_filename("onnx/model.onnx"));
    CHECK(!hub_valid_filename("a/../../etc/passwd"));
    CHECK(!hub_valid_filename("a//b"));
    CHECK(!hub_valid_filename("a\\b"));
}

#define C1 "0123456789abcdef0123456789abcdef01234567"

static void test_cache(void)
{
    const char *root = check_tmpdir("test_hub_cache");
    clear_env();
    setenv("HF_HUB_CACHE", root, 1);
    setenv("HF_ENDPOINT", "http://127.0.0.1:1", 1);   /* nothing listens there */
    hub_opts o;
    cmd_read_env(&E);
    hub_opts_init(&o, &E);
    o.max_retries = 0;
    char p[4096], rd[4096];
    hub_repo_dir(&o, "org/m", rd, sizeof rd, &E);
    snprintf(p, sizeof p, "%s/refs", rd);
    fs_mkdir_p(p, &E);
    snprintf(p, sizeof p, "%s/refs/main", rd);
    fs_write_atomic(p, C1, 40, 0644, &E);
    snprintf(p, sizeof p, "%s/blobs", rd);
    fs_mkdir_p(p, &E);
    snprintf(p, sizeof p, "%s/blobs/abc123", rd);
    fs_write_atomic(p, "{}", 2, 0644, &E);
    snprintf(p, sizeof p, "%s/snapshots/" C1 "/sub", rd);
    fs_mkdir_p(p, &E);
    snprintf(p, sizeof p, "%s/snapshots/" C1 "/config.json", rd);
    CHECK_INT(symlink("../../blobs/abc123", p), 0);
    snprintf(p, sizeof p, "%s/snapshots/" C1 "/sub/x.json", rd);
    CHECK_INT(symlink("../../../blobs/abc123", p), 0);
    snprintf(p, sizeof p, "%s/.no_exist/" C1, rd);
    fs_mkdir_p(p, &E);
    snprintf(p, sizeof p, "%s/.no_exist/" C1 "/generation_config.json", rd);
    fs_write_atomic(p, "", 0, 0644, &E);

    char out[4096], want[4200];
    snprintf(want, sizeof want, "%s/snapshots/" C1 "/config.json", rd);
    /* by commit: no network needed */
    CHECK_INT(hub_resolve_file(&o, "org/m", C1, "config.json", out, sizeof out, &E), 0);
    CHECK_STR(out, want);
    /* by branch while the endpoint is down: falls back to the cache */
    CHECK_INT(hub_resolve_file(&o, "org/m", "main", "config.json", out, sizeof out, &E), 0);
    CHECK_STR(out, want);
    CHECK_INT(hub_resolve_file(&o, "org/m", NULL, "sub/x.json", out, sizeof out, &E), 0);
    /* ... but a file not cached is a network error */
    CHECK_INT(hub_resolve_file(&o, "org/m", "main", "tokenizer.json", out, sizeof out, &E), -1);
    CHECK_STR(E.kind, "HubNetworkError");
    /* offline */
    o.offline = 1;
    CHECK_INT(hub_resolve_file(&o, "org/m", "main", "config.json", out, sizeof out, &E), 0);
    CHECK_STR(out, want);
    CHECK_INT(hub_resolve_file(&o, "org/m", "main", "generation_config.json", out, sizeof out, &E), HUB_NOT_FOUND);
    CHECK_INT(hub_resolve_file(&o, "org/m", "main", "tokenizer.json", out, sizeof out, &E), -1);
    CHECK(strstr(E.msg, "is not in the HF cache and HF_HUB_OFFLINE=1 forbids downloading") != NULL);
    CHECK(E.hint[0] != 0);
    CHECK_INT(hub_resolve_file(&o, "org/other", "main", "config.json", out, sizeof out, &E), -1);
    CHECK_STR(E.kind, "HubOfflineError");
    CHECK_INT(hub_snapshot(&o, "org/m", "main", out, sizeof out, &E), -1);
    CHECK(strstr(E.msg, "tokenizer.json") != NULL);
    /* with the required files cached, the optional ones the cache neither
     * holds nor marks missing (special_tokens_map.json, chat_template.jinja:
     * a save_pretrained folder, the original's cache) are absent offline,
     * as transformers takes them; generation_config.json has its marker */
    {
        const char *files[] = {"tokenizer.json", "tokenizer_config.json", "model.safetensors"};
        for (int i = 0; i < 3; i++) {
            snprintf(p, sizeof p, "%s/snapshots/" C1 "/%s", rd, files[i]);
            fs_write_atomic(p, "{}", 2, 0644, &E);
        }
        char sd[4200];
        snprintf(sd, sizeof sd, "%s/snapshots/" C1, rd);
        CHECK_INT(hub_snapshot(&o, "org/m", "main", out, sizeof out, &E), 0);
        CHECK_STR(out, sd);
        o.offline = 0;   /* online, the same request is a network question, not an absence */
        CHECK_INT(hub_snapshot(&o, "org/m", "main", out, sizeof out, &E), -1);
        o.offline = 1;
    }
    /* bad ids never touch the file system */
    CHECK_INT(hub_resolve_file(&o, "org/../m", "main", "config.json", out, sizeof out, &E), -1);
    CHECK_INT(hub_resolve_file(&o, "org/m", "main", "../config.json", out, sizeof out, &E), -1);
    CHECK_INT(hub_resolve_file(&o, "org/m", "../x", "config.json", out, sizeof out, &E), -1);
}

static void test_base(void)
{
    /* Parsing is tested with the registry (test_store); here: what the
     * model layer adds — supported architectures and resolution. */
    base_ref r;
    char out[4096];
    hub_opts o;
    CHECK(base_arch_supported("LlamaForCausalLM"));
    CHECK(base_arch_supported("Qwen2ForCausalLM"));
    CHECK(base_arch_supported("Qwen3ForCausalLM"));
    CHECK(base_arch_supported("Olmo2ForCausalLM"));
    CHECK(base_arch_supported("SmolLM3ForCausalLM"));
    CHECK(base_arch_supported("Gemma2ForCausalLM"));
    CHECK(base_arch_supported("Phi3ForCausalLM"));
    int supported = 0;
    for (int i = 0; i < registry_count(); i++)
        supported += registry_at(i)->modality == REG_TEXT && base_arch_supported(registry_at(i)->architecture);
    /* the original's 10 llama/qwen2 rows + qwen2.5-coder-7b/14b + tiny + 4 qwen3 rows + olmo2 + smollm3
     * + 2 gemma2 + mixtral-8x7b-instruct + phi-3.5-mini, phi-4-mini-reasoning */
    CHECK_INT(supported, 24);
    CHECK(base_arch_supported("MixtralForCausalLM"));
    cmd_read_env(&E);
    hub_opts_init(&o, &E);
    /* every text row's architecture runs now; the vision rows are refused before it */
    CHECK_INT(base_resolve("mistral-small-3.1-24b-instruct", &o, &r, out, sizeof out, &E), -1);
    CHECK_STR(E.kind, "UnsupportedBaseError");
    /* Qwen2-VL runs: it gets as far as a text row does (the download, gated the same way; no retries) */
    o.max_retries = 0;
    CHECK_INT(base_resolve("qwen2-vl-2b-instruct", &o, &r, out, sizeof out, &E), -1);
    char vl_kind[sizeof E.kind];
    snprintf(vl_kind, sizeof vl_kind, "%s", E.kind);
    CHECK_INT(base_resolve("qwen2.5-0.5b", &o, &r, out, sizeof out, &E), -1);
    CHECK_STR(vl_kind, E.kind);
    CHECK_INT(base_resolve("./missing.gguf", &o, &r, out, sizeof out, &E), -1);
    CHECK(strstr(E.msg, "does not exist") != NULL);
    CHECK_INT(base_resolve("tests/ref/model/fixtures/llama-bf16.q8_0.gguf", &o, &r, out, sizeof out, &E), 0);
    CHECK_INT(r.kind, BASE_PATH);
    /* a registry key resolves through the cache, offline */
    const char *root = check_tmpdir("test_hub_base");
    clear_env();
    setenv("HF_HUB_CACHE", root, 1);
    setenv("HF_HUB_OFFLINE", "1", 1);
    cmd_read_env(&E);
    hub_opts_init(&o, &E);
    CHECK_INT(base_resolve("qwen2.5-0.5b", &o, &r, out, sizeof out, &E), -1);
    CHECK_STR(E.kind, "HubOfflineError");
    CHECK_INT(base_resolve("tests/ref/model/fixtures/qwen2-f32", &o, &r, out, sizeof out, &E), 0);
    CHECK_STR(out, "tests/ref/model/fixtures/qwen2-f32");
    clear_env();
}

static int drive(int argc, char **argv)
{
    hub_opts o;
    if (cmd_read_env(&E) || hub_opts_init(&o, &E)) goto fail;
    const char *r = getenv("DLM_HUB_RETRIES"), *b = getenv("DLM_HUB_BACKOFF_MS");
    if (r) o.max_retries = atoi(r);
    if (b) o.backoff_ms = atoi(b);
    o.progress = 1;
    char out[4096];
    int rc;
    if (!strcmp(argv[1], "get") && argc == 5) rc = hub_resolve_file(&o, argv[2], argv[3], argv[4], out, sizeof out, &E);
    else if (!strcmp(argv[1], "snapshot") && argc == 4) rc = hub_snapshot(&o, argv[2], argv[3], out, sizeof out, &E);
    else if (!strcmp(argv[1], "base") && argc == 3) {
        base_ref ref;
        rc = base_resolve(argv[2], &o, &ref, out, sizeof out, &E);
    }
    else {
        fprintf(stderr, "usage: test_hub get REPO REV FILE | snapshot REPO REV | base SPEC\n");
        return 2;
    }
    if (rc == 0) { printf("%s\n", out); return 0; }
    fprintf(stderr, "%s: %s\n", E.kind, E.msg);
    if (E.hint[0]) fprintf(stderr, "hint: %s\n", E.hint);
    return rc == HUB_NOT_FOUND ? 3 : 1;
fail:
    fprintf(stderr, "%s: %s\n", E.kind, E.msg);
    return 1;
}

int main(int argc, char **argv)
{
    hash_init();
    if (argc > 1) return drive(argc, argv);
    test_root();
    test_validation();
    test_cache();
    test_base();
    return check_done();
}
