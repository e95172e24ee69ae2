/* test_schema_keys — the frontmatter key list (doc_schema_keys, from the
 * field tables of src/doc/schema.c) is the parser's: every listed key is
 * parsed where it is listed (a value of the wrong type is refused with that
 * key's dotted location and file:line, never "Extra inputs are not
 * permitted"), and no key is listed twice.
 *
 * `test_schema_keys --list` prints the keys one per line: the list
 * tests/cli/t0807-slow-schema-keys.sh walks to show each key's effect. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "doc/doc.h"

typedef struct keys {
    char k[256][128];
    int n;
} keys;

static void collect(void *ctx, const char *key)
{
    keys *ks = ctx;
    if (ks->n < 256) snprintf(ks->k[ks->n++], sizeof ks->k[0], "%s", key);
}

static void print_key(void *ctx, const char *key)
{
    (void)ctx;
    printf("%s\n", key);
}

static int has(const keys *ks, const char *k)
{
    for (int i = 0; i < ks->n; i++)
        if (!strcmp(ks->k[i], k)) return 1;
    return 0;
}

/* 1 when some listed key is inside k (k is an object). */
static int is_object(const keys *ks, const char *k)
{
    size_t n = strlen(k);
    for (int i = 0; i < ks->n; i++)
        if (!strncmp(ks->k[i], k, n) && (ks->k[i][n] == '.' || ks->k[i][n] == '['))
            return 1;
    return 0;
}

/* The document that sets key (dotted as listed) to a mapping, which no leaf
 * accepts. Returns the line the key is on. */
static int doc_with(const char *key, char *out, size_t cap)
{
    char parts[8][64];
    int np = 0;
    const char *s = key;
    while (*s && np < 8) {
        size_t l = strcspn(s, ".");
        snprintf(parts[np++], sizeof parts[0], "%.*s", (int)l, s);
        s += l + (s[l] == '.');
    }
    size_t o = (size_t)snprintf(out, cap, "---\n");
    if (strcmp(parts[0], "dlm_id")) o += (size_t)snprintf(out + o, cap - o, "dlm_id: 01JD0000000000000000000000\n");
    if (strcmp(parts[0], "dlm_version")) o += (size_t)snprintf(out + o, cap - o, "dlm_version: 15\n");
    if (strcmp(parts[0], "base_model")) o += (size_t)snprintf(out + o, cap - o, "base_model: tiny\n");
    int line = 2 + (strcmp(parts[0], "dlm_id") != 0) + (strcmp(parts[0], "dlm_version") != 0) +
               (strcmp(parts[0], "base_model") != 0);
    int depth = 0;
    for (int i = 0; i < np; i++) {
        const char *p = parts[i];
        char name[64];
        snprintf(name, sizeof name, "%s", p);
        int list = 0;
        size_t l = strlen(name);
        if (l > 2 && !strcmp(name + l - 2, "[]")) {
            name[l - 2] = 0;
            list = 1;
        }
        if (!strcmp(name, "*")) snprintf(name, sizeof name, "extra");
        if (i == np - 1) {
            o += (size_t)snprintf(out + o, cap - o, "%*s%s: {zz: 1}\n", depth * 2, "", name);
            break;
        }
        o += (size_t)snprintf(out + o, cap - o, "%*s%s:\n", depth * 2, "", name);
        line++;
        depth++;
        if (list) {
            /* a source: path is required, so give it unless it is the key */
            o += (size_t)snprintf(out + o, cap - o, "%*s- %s\n", depth * 2, "",
                                  strcmp(parts[np - 1], "path") ? "path: notes" : "include: []");
            line++;
            depth++;
        }
    }
    snprintf(out + o, cap - o, "---\nbody\n");
    return line;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--list")) {
        doc_schema_keys(print_key, NULL);
        return 0;
    }
    static keys ks;
    int n = doc_schema_keys(collect, &ks);
    CHECK_INT(n, ks.n);
    CHECK(n > 60);
    for (int i = 0; i < ks.n; i++)
        for (int j = i + 1; j < ks.n; j++) CHECK_MSG(strcmp(ks.k[i], ks.k[j]), "%s listed twice", ks.k[i]);
    static const char *const known[] = {"dlm_id", "training.lora_r", "training.preference.hyperparams.beta",
                                        "training.adapters.*.lora_r", "training.sources[].path",
                                        "export.default_top_p", "training.replay.max_bytes", "system_prompt"};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) CHECK_MSG(has(&ks, known[i]), "%s not listed", known[i]);

    int leaves = 0;
    for (int i = 0; i < ks.n; i++) {
        const char *k = ks.k[i];
        if (is_object(&ks, k)) continue;
        leaves++;
        char text[2048];
        int line = doc_with(k, text, sizeof text);
        dlm_err e;
        err_clear(&e);
        dlm_doc *d = doc_parse("t.dlm", text, strlen(text), &e);
        CHECK_MSG(d == NULL, "%s: a mapping value was accepted:\n%s", k, text);
        doc_free(d);
        if (d) continue;
        /* the location the parser reports, with '*' → the adapter name and
         * "[]" → ".0" */
        char loc[160], want_at[64];
        size_t o = 0;
        for (const char *s = k; *s && o + 8 < sizeof loc; s++) {
            if (*s == '*') o += (size_t)snprintf(loc + o, sizeof loc - o, "extra");
            else if (s[0] == '[' && s[1] == ']') {
                o += (size_t)snprintf(loc + o, sizeof loc - o, ".0");
                s++;
            } else loc[o++] = *s;
        }
        loc[o] = 0;
        snprintf(want_at, sizeof want_at, "t.dlm:%d:", line);
        CHECK_MSG(strstr(e.msg, loc) != NULL && !strstr(e.msg, "Extra inputs"), "%s: %s", k, e.msg);
        char at[4200];
        snprintf(at, sizeof at, "%s:%d:", e.file, e.line);
        CHECK_MSG(!strcmp(at, want_at), "%s: reported at %s, expected %s (%s)\n%s", k, at, want_at, e.msg, text);
    }
    CHECK(leaves > 50);
    return check_done();
}
