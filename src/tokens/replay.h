/* replay — the store's memory of past sections, so retraining does not
 * forget what an edit removed from the document.
 *
 *   <store>/replay/corpus.zst   append-only; one zstd frame per section, each
 *                               the original's CBOR SectionSnapshot {content,
 *                               auto_mined, section_id, last_seen_at,
 *                               section_type, first_seen_at,
 *                               training_runs_seen} (JSON records, which dlm
 *                               wrote before, are still read)
 *   <store>/replay/index.json   the original's [{section_id, byte_offset,
 *                               length, added_at, weight}] sorted by
 *                               section_id (atomic rewrite)
 *   <store>/replay/dlm-runs.json  {section_id: {section_type, first_run,
 *                               last_run}}: dlm's recency in runs; an entry
 *                               without one (a corpus the original wrote)
 *                               takes them from its record
 *
 * After each committed run the document's new sections are appended and
 * every current section's last_run is bumped. Each run trains on the whole
 * document plus a sample of k = max(32, 2·new) earlier sections (not in the
 * document now), weighted by recency: w = max(weight / (1 + age), 0.01) with
 * age counted in runs (not days, so a retrain is reproducible), drawn
 * without replacement by the key ln(u)/w (Efraimidis–Spirakis), u keyed by
 * (seed + prior adapter version, section id). A size cap evicts the oldest
 * entries first, never a section of the current document.
 *
 * The preference phase (DPO, ORPO) replays past preference sections the
 * same way, as the original's ReplayStore.sample_preference_rows: k =
 * max(8, 2 · the document's triples) sections drawn by the same weight
 * (all of them, in id order, when there are no more than k), each
 * contributing every triple it holds; --no-mined leaves auto-mined records
 * out. */
#ifndef DLM_REPLAY_H
#define DLM_REPLAY_H

#include <stddef.h>
#include <stdint.h>
#include "doc/doc.h"
#include "util/err.h"

typedef struct replay_entry {
    char sid[17];
    char type[16];          /* prose | instruction | preference */
    int64_t off, len;       /* compressed frame in corpus.zst */
    char added_at[24];
    int64_t first_run, last_run;
    double weight;
} replay_entry;

typedef struct replay replay;

int replay_open(const char *store, replay **out, dlm_err *e);
void replay_free(replay *r);
int replay_count(const replay *r);
const replay_entry *replay_at(const replay *r, int i);
int replay_find(const replay *r, const char *sid);      /* index or -1 */
uint64_t replay_bytes(const replay *r);                 /* corpus size */
/* Decompress entry i's record; *content is malloc'ed. */
int replay_read(const replay *r, int i, char **content, size_t *len, dlm_err *e);

/* Sample earlier sections (ids not in cur_ids) for this run. out gets
 * indices (caller frees); returns the count or -1. */
int replay_sample(const replay *r, const char *const *cur_ids, int n_cur, int n_new, uint64_t seed,
                  int64_t run_id, int **out, dlm_err *e);
/* The original's recency weight (dlm.replay.sampler._recency_weight):
 * max(weight / (1 + age), 0.01); age < 0 counts as 0. */
double replay_weight(double weight, double age);
/* Sample earlier preference sections (ids not in cur_ids) for a DPO/ORPO
 * run whose document holds n_doc_pairs triples: k = max(8, 2·n_doc_pairs);
 * no_mined skips records with auto_mined. Same seed and run → same draw. */
int replay_sample_pref(const replay *r, const char *const *cur_ids, int n_cur, int n_doc_pairs, int no_mined,
                       uint64_t seed, int64_t run_id, int **out, dlm_err *e);
/* Build a scratch document holding entries idx[0..n) (prose, instruction
 * and preference sections), for dataset_build / pref_build. NULL when n == 0. */
dlm_doc *replay_doc(const replay *r, const int *idx, int n, dlm_err *e);

/* Record a committed run: append the document's sections not yet in the
 * corpus, set last_run of every current section, then evict oldest-first
 * until the corpus fits max_bytes (never a current section). Writes the
 * corpus and the index crash-safely. */
int replay_commit(replay *r, const dlm_doc *doc, int64_t run_id, uint64_t max_bytes, dlm_err *e);

#endif
