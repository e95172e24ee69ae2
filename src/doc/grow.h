/* grow — edits that tools make to a document: harvested probes, synthesized
 * instruction pairs, mined preference triples (spec §1.5 markers, §8).
 *
 * Both edits work on the document's text, not by regenerating it:
 *   - append adds sections after the last byte (a newline first when the
 *     text lacks one), so every existing section keeps its content and id;
 *   - remove cuts the lines of the chosen fenced sections (fence line up to
 *     the next section's fence), so removing what append added gives back
 *     the text before append byte for byte.
 * The result is parsed again and checked (kept sections, same ids, in
 * order) before it is returned; nothing here writes files except
 * doc_grow_write. Works on the normalised text (LF, no BOM): a CRLF file
 * comes back with LF line ends. */
#ifndef DLM_DOC_GROW_H
#define DLM_DOC_GROW_H

#include "doc/doc.h"
#include "util/str.h"

/* out = the document's text plus secs[0..n) (fields as doc_append_section
 * reads them: type, adapter, content, marker fields). */
int doc_grow_append(const dlm_doc *d, const doc_section *secs, int n, strbuf *out, dlm_err *e);
/* out = the document's text without the sections i where drop[i] != 0.
 * Only fenced sections can be dropped. *removed = how many. */
int doc_grow_remove(const dlm_doc *d, const unsigned char *drop, strbuf *out, int *removed, dlm_err *e);
/* Write text to path atomically. */
int doc_grow_write(const char *path, const strbuf *text, dlm_err *e);

/* Instruction body for one pair: "### Q\n<q>\n### A\n<a>" (q and a
 * stripped; probe → "### Q !probe"). Fails when either is empty after
 * stripping or has a line that would read as a header or fence. */
int doc_grow_qa_content(strbuf *out, const char *q, const char *a, int probe, dlm_err *e);
/* Preference body for one triple. Same rules. */
int doc_grow_pref_content(strbuf *out, const char *prompt, const char *chosen, const char *rejected, dlm_err *e);

/* 1 when some instruction section of d already holds this (q, a) pair
 * (both compared after stripping). */
int doc_grow_has_pair(const dlm_doc *d, const char *q, const char *a);
/* 1 when some preference section holds this exact triple. */
int doc_grow_has_triple(const dlm_doc *d, const char *p, const char *c, const char *r);

/* ---- staging --------------------------------------------------------------
 * `synth` and `preference mine` stage what they generated in
 * <store>/synth/pending.json and <store>/preference/pending.json:
 *   {"kind": "synth"|"preference", "dlm_id": ..., "created_at": ...,
 *    "items": [item, ...]}
 * with items
 *   synth:      {question, answer, synth_teacher, synth_strategy, synth_at,
 *                source_section_id}
 *   preference: {prompt, chosen, rejected, judge_name, judge_score_chosen,
 *                judge_score_rejected, mined_at, mined_run_id}
 * doc_grow_item_section turns one item into the section it becomes (an
 * auto-synth instruction or an auto-mined preference); content receives
 * the body the section points to (keep it alive while s is used). */
int doc_grow_item_section(const json_t *item, const char *kind, doc_section *s, strbuf *content, dlm_err *e);
/* Read a pending file: NULL with no error (*e kind "") when it does not
 * exist. Checks kind and that items is an array. */
json_t *doc_grow_pending_load(const char *path, const char *kind, dlm_err *e);
/* Write it atomically (creating its folder), or remove it when items is
 * empty. */
int doc_grow_pending_save(const char *path, const char *kind, const char *dlm_id, json_t *items, dlm_err *e);

#endif
