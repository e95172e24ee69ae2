/* grow_cmd — what `dlm synth`, `dlm preference` and `dlm harvest` share:
 * writing staged sections into the document and taking back the sections
 * a tool wrote (each marked by its provenance comment, doc/grow.h). */
#ifndef DLM_GROW_CMD_H
#define DLM_GROW_CMD_H

#include <jansson.h>
#include "cmd/cmd.h"
#include "doc/doc.h"

/* <store>/<tool>/pending.json */
void grow_pending_path(const char *store, const char *tool, char *out, size_t cap);

/* Write every staged item (write_items) into the document, then empty the
 * staging file. Prints "<tool>: wrote N <what> section(s) to PATH";
 * nothing staged is exit 2. */
typedef int (*grow_write_fn)(const char *path, json_t *items, int *written, dlm_err *e);
int grow_cmd_apply(dlm_ctx *ctx, const char *path, const char *tool, const char *what, grow_write_fn write_items);

/* Remove the sections pick() chooses (the tool's marker) from the
 * document, byte for byte the text before they were written. Prints
 * "<tool>: removed N <what> section(s) from PATH"; none is exit 2. */
typedef int (*grow_pick_fn)(const doc_section *s);
int grow_cmd_revert(dlm_ctx *ctx, const char *path, const char *tool, const char *what, grow_pick_fn pick);

#endif
