/* test_tcache — the tokenization cache (tokens/tcache.h): every key part
 * changes the key; rows round-trip exactly; a corrupt, truncated or foreign
 * entry is a miss (and is removed), never a crash; prune by age and by the
 * size cap (oldest first); clear. The entry's layout is checked byte for
 * byte against the documented format (magic, counts, sha256 trailer via
 * libsodium's one-shot sha256, not the writer's streaming code). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <utime.h>

#include "check.h"
#include "tokens/tcache.h"
#include "util/fs.h"
#include "util/hash.h"

static void test_key(void)
{
    tcache_key_parts p = {"aa11", "chatml", NULL, 0, 2048};
    char k0[65], k[65];
    tcache_key(&p, DOC_PROSE, "hello", 5, k0);
    CHECK_INT(strlen(k0), 64);
    tcache_key(&p, DOC_PROSE, "hello", 5, k);
    CHECK_STR(k, k0);
    tcache_key_parts q = p;
    q.tokenizer_sha256 = "aa12";
    tcache_key(&q, DOC_PROSE, "hello", 5, k);
    CHECK(strcmp(k, k0));
    q = p; q.dialect = "llama3";
    tcache_key(&q, DOC_PROSE, "hello", 5, k);
    CHECK(strcmp(k, k0));
    q = p; q.system_prompt = "";
    tcache_key(&q, DOC_PROSE, "hello", 5, k);
    CHECK(strcmp(k, k0));
    char k2[65];
    q.system_prompt = "be brief";
    tcache_key(&q, DOC_PROSE, "hello", 5, k2);
    CHECK(strcmp(k2, k0) && strcmp(k2, k));
    q = p; q.loss_on_all = 1;
    tcache_key(&q, DOC_PROSE, "hello", 5, k);
    CHECK(strcmp(k, k0));
    q = p; q.seq_len = 1024;
    tcache_key(&q, DOC_PROSE, "hello", 5, k);
    CHECK(strcmp(k, k0));
    tcache_key(&p, DOC_INSTRUCTION, "hello", 5, k);
    CHECK(strcmp(k, k0));
    tcache_key(&p, DOC_PROSE, "hellp", 5, k);
    CHECK(strcmp(k, k0));
    /* length-prefixed fields: moving bytes between fields changes the key */
    tcache_key_parts a = {"ab", "c", NULL, 0, 1}, b = {"a", "bc", NULL, 0, 1};
    tcache_key(&a, DOC_PROSE, "", 0, k);
    tcache_key(&b, DOC_PROSE, "", 0, k2);
    CHECK(strcmp(k, k2));
}

static void age(const char *path, double secs)
{
    struct utimbuf t;
    t.actime = t.modtime = time(NULL) - (time_t)secs;
    utime(path, &t);
}

static void test_store(void)
{
    const char *store = check_tmpdir("tcache");
    tcache *c;
    dlm_err e;
    CHECK_INT(tcache_open(store, &c, &e), 0);
    int32_t ids0[] = {1, 2, 3, -1, 151643}, ids1[] = {7};
    uint8_t m0[] = {1, 1, 0, 0, 1}, m1[] = {1};
    tcache_row rows[2] = {{ids0, m0, 5}, {ids1, m1, 1}};
    tcache_key_parts p = {"ff", "chatml", NULL, 0, 64};
    char key[65], key2[65];
    tcache_key(&p, DOC_PROSE, "x", 1, key);
    tcache_key(&p, DOC_PROSE, "y", 1, key2);
    tcache_row *got;
    int n;
    CHECK_INT(tcache_get(c, key, &got, &n), 0);
    CHECK_INT(tcache_put(c, key, rows, 2, &e), 0);
    CHECK_INT(tcache_get(c, key, &got, &n), 1);
    CHECK_INT(n, 2);
    if (n == 2) {
        CHECK_INT(got[0].n, 5);
        CHECK(!memcmp(got[0].ids, ids0, sizeof ids0) && !memcmp(got[0].mask, m0, sizeof m0));
        CHECK_INT(got[1].n, 1);
        CHECK_INT(got[1].ids[0], 7);
    }
    tcache_rows_free(got, n);
    int64_t h, m;
    tcache_counts(c, &h, &m);
    CHECK_INT(h, 1);
    CHECK_INT(m, 1);

    /* the layout, independently: magic, n_rows, rows, sha256 trailer */
    char path[4400];
    snprintf(path, sizeof path, "%s/tokenized-cache/entries/%.2s/%s.bin", store, key, key);
    char *buf;
    size_t len;
    CHECK_INT(fs_read_all(path, 1 << 20, &buf, &len, &e), 0);
    CHECK_INT(len, 8 + 4 + (4 + 25) + (4 + 5) + 32);
    CHECK(!memcmp(buf, "DLMTC001", 8));
    CHECK_INT((unsigned char)buf[8], 2);
    unsigned char d[32];
    sha256(buf, len - 32, d);
    CHECK(!memcmp(d, buf + len - 32, 32));
    /* ids[3] = -1 little-endian at 8+4+4+12 */
    CHECK(!memcmp(buf + 28, "\xff\xff\xff\xff", 4));

    /* corruption: every single-byte flip and every truncation is a miss */
    int crashes = 0;
    for (size_t i = 0; i < len; i++) {
        buf[i] ^= 0x5a;
        fs_write_atomic(path, buf, len, 0644, &e);
        buf[i] ^= 0x5a;
        if (tcache_get(c, key, &got, &n) != 0) crashes++;
        CHECK(!fs_exists(path));   /* removed */
    }
    for (size_t k = 0; k < len; k += 3) {
        fs_write_atomic(path, buf, k, 0644, &e);
        if (tcache_get(c, key, &got, &n) != 0) crashes++;
    }
    CHECK_INT(crashes, 0);
    free(buf);
    char evil[65] = "../../etc/passwd";
    CHECK_INT(tcache_get(c, evil, &got, &n), 0);

    /* prune: by age, then by size (oldest first) */
    CHECK_INT(tcache_put(c, key, rows, 2, &e), 0);
    CHECK_INT(tcache_put(c, key2, rows, 1, &e), 0);
    char path2[4400];
    snprintf(path2, sizeof path2, "%s/tokenized-cache/entries/%.2s/%s.bin", store, key2, key2);
    age(path, 10 * 86400.0);
    age(path2, 1 * 86400.0);
    tcache_stats st;
    CHECK_INT(tcache_stat(store, &st, &e), 0);
    CHECK_INT(st.entries, 2);
    int64_t removed, freed;
    CHECK_INT(tcache_prune(store, 5 * 86400.0, 0, &removed, &freed, &e), 0);
    CHECK_INT(removed, 1);
    CHECK(!fs_exists(path) && fs_exists(path2));
    CHECK_INT(tcache_put(c, key, rows, 2, &e), 0);     /* newest now */
    CHECK_INT(tcache_prune(store, 0, fs_file_size(path), &removed, &freed, &e), 0);
    CHECK_INT(removed, 1);
    CHECK(fs_exists(path) && !fs_exists(path2));
    /* a hit refreshes the age */
    age(path, 10 * 86400.0);
    CHECK_INT(tcache_get(c, key, &got, &n), 1);
    tcache_rows_free(got, n);
    CHECK_INT(tcache_prune(store, 5 * 86400.0, 0, &removed, &freed, &e), 0);
    CHECK_INT(removed, 0);
    CHECK_INT(tcache_clear(store, &e), 0);
    CHECK_INT(tcache_stat(store, &st, &e), 0);
    CHECK_INT(st.entries, 0);
    tcache_close(c);
}

int main(void)
{
    hash_init();
    test_key();
    test_store();
    return check_done();
}
