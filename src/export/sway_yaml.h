/* sway_yaml — `dlm export --emit-sway-json`: the sway.yaml the original
 * DocumentLanguageModel writes beside an export (its
 * dlm.export.sway_json.write_sway_json, which is dlm-sway 0.1.0's
 * dlm_sway.integrations.dlm.autogen.build_spec_dict over the parsed
 * document, dumped with yaml.safe_dump(sort_keys=False)): the same keys,
 * in the same order, with the same values.
 *
 *   version: 1
 *   models: base {kind: hf, base: HF id}, ft {kind: hf, base, adapter: the
 *           current version's folder (absolute; null when the flat store
 *           has none, as for a document of named adapters)}
 *   defaults: {seed: 0, differential: true}
 *   suite: the probe battery of the document's own sections (null_adapter,
 *          delta_kl, adapter_revert, prompt_collapse, section_internalization,
 *          paraphrase_invariance, preference_flip, style_fingerprint,
 *          calibration_drift, external_perplexity, leakage, cluster_kl,
 *          adapter_ablation, each where autogen emits it)
 *   dlm_source: the document's absolute path
 *
 * The base is the registry row's HF id (hf:org/name without "hf:"); a
 * dlm-only base (a local folder, `tiny`) is written as the document names
 * it. Strings are written plain or double-quoted (doc_yaml_scalar), where
 * PyYAML picks its own quoting: the file reads back (yaml.safe_load) as
 * the original's. */
#ifndef DLM_SWAY_YAML_H
#define DLM_SWAY_YAML_H

#include <jansson.h>
#include "doc/doc.h"
#include "util/err.h"
#include "util/str.h"

/* The spec as a JSON tree (keys in the original's order). doc_abs: the
 * document's absolute path; adapter_dir: the current adapter folder or
 * NULL. NULL on allocation failure. */
json_t *sway_spec_build(const dlm_doc *d, const char *doc_abs, const char *adapter_dir);
/* Block YAML of a JSON tree, as yaml.safe_dump lays it out (sequences
 * under a mapping key at the key's indent). */
void sway_yaml_emit(strbuf *out, const json_t *v);
/* Write <export_dir>/sway.yaml for the document at doc_path (store under
 * home); the written path into out. */
int sway_yaml_write(const char *doc_path, const char *home, const char *export_dir, char *out, size_t cap,
                    dlm_err *e);

#endif
