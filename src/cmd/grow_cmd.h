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

/* Write items (pending items of tool "synth" or "preference") into the
 * document at path as marked sections; an item already in the document
 * (an apply that was interrupted, or written by hand) is skipped.
 * *written counts the sections added. */
int grow_write_items(const char *path, json_t *items, const char *tool, int *written, dlm_err *e);

/* Add items to the staging file pend (what is pending stays); *total is
 * the count pending afterwards. */
int grow_stage_items(const char *pend, const char *tool, const char *dlm_id, json_t *items, int *total, dlm_err *e);

/* Write every staged item (grow_write_items) into the document, then empty
 * the staging file. Prints "<tool>: wrote N <what> section(s) to PATH";
 * nothing staged is exit 2. */
int grow_cmd_apply(dlm_ctx *ctx, const char *path, const char *tool, const char *what);

/* `<tool> list PATH [--json]`: the staged items (each by the first line
 * of its field key) and the tool's sections in the document. entry()
 * gives a section's JSON record, NULL for a section the tool did not
 * write; describe() its text after "line N  ID  ". */
typedef json_t *(*grow_entry_fn)(const doc_section *s);
typedef void (*grow_describe_fn)(const json_t *entry, char *buf, size_t cap);
int grow_cmd_list(dlm_ctx *ctx, const char *path, int json, const char *tool, const char *what, const char *key,
                  grow_entry_fn entry, grow_describe_fn describe);

/* The first line of s (NULL: empty) into buf, cut to cap - 1 bytes. */
void grow_first_line(const char *s, char *buf, size_t cap);

/* Remove the sections pick() chooses (the tool's marker) from the
 * document, byte for byte the text before they were written. Prints
 * "<tool>: removed N <what> section(s) from PATH"; none is exit 2. */
typedef int (*grow_pick_fn)(const doc_section *s);
int grow_cmd_revert(dlm_ctx *ctx, const char *path, const char *tool, const char *what, grow_pick_fn pick);

#endif
