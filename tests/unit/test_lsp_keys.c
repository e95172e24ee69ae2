/* test_lsp_keys — dlm lsp's key table (src/lsp/keys.c: meaning, default,
 * rule, extension flag, enum values) covers every key the frontmatter
 * schema accepts (doc_schema_keys), so a key added to src/doc/schema.c
 * without its hover and completion text, or without its "dlm extension"
 * mark, fails here instead of showing bare in an editor. */
#include "check.h"

#include "doc/doc.h"
#include "lsp/lsp_internal.h"

static void one(void *ctx, const char *key)
{
    int *n = ctx;
    (*n)++;
    const key_info *k = keys_find(key);
    CHECK_MSG(k != NULL, "schema key '%s' has no entry in src/lsp/keys.c", key);
}

int main(void)
{
    int n = 0;
    CHECK(doc_schema_keys(one, &n) > 50);
    /* dlm's own keys are marked as such: the original refuses them */
    const char *ext[] = {"training.val_frac", "training.multi_turn", "training.loss_on", "training.threads"};
    for (size_t i = 0; i < sizeof ext / sizeof ext[0]; i++) {
        const key_info *k = keys_find(ext[i]);
        CHECK_MSG(k && k->extension, "%s is a dlm extension", ext[i]);
    }
    return check_done();
}
