/* inert — frontmatter keys dlm parses but does not act on yet. Every one
 * the document sets gets a note, so no key is silently ignored (keys that
 * cannot be honoured at all are refused at parse time instead, see
 * src/doc/schema.c: galore_adamw*). */
#ifndef DLM_RUN_INERT_H
#define DLM_RUN_INERT_H

#include "doc/doc.h"

typedef void (*inert_note_fn)(void *ctx, const char *note);
/* Call fn once per key of t that differs from its default and that the
 * trainer does not honour, or honours differently from what it names
 * (paged_adamw_8bit trains as adamw_bnb_8bit); returns the count.
 * (training.adapters has its own note in the trainer.) */
int run_inert_notes(const doc_training *t, inert_note_fn fn, void *ctx);

#endif
