/* keys — what hover and completion say about each frontmatter key: its
 * meaning, default and rule (the table of docs/dlm-format.md, which
 * src/doc/schema.c enforces). Keys themselves come from doc_schema_keys, so
 * completion offers exactly what the schema accepts; a key missing here
 * still completes, with no documentation. */
#include "lsp/lsp_internal.h"

#include <stdio.h>
#include <string.h>

#include "util/str.h"

#define V(...) ((const char *const[]){__VA_ARGS__, NULL})

static const key_info KEYS[] = {
    {"dlm_id", "required", "26-char Crockford base32 ULID", "The document's identity: its store is ~/.dlm/store/<dlm_id>.", 0, NULL},
    {"dlm_version", "15", "int 1..15; older versions are migrated in memory", "Schema version the document is written against.", 0, NULL},
    {"base_model", "required", "registry key, hf:org/name[@rev], a path, or tiny", "The pretrained model the adapter is trained on.", 0, NULL},
    {"system_prompt", "null", "string", "System message prepended to training examples and prompts.", 0, NULL},
    {"training", "", "mapping", "Training configuration.", 0, NULL},
    {"export", "", "mapping", "Export (GGUF / Ollama) defaults.", 0, NULL},
    {"training.adapter", "lora", "lora | qlora | dora", "Adapter kind.", 0, V("lora", "qlora", "dora")},
    {"training.lora_r", "8", "1..256", "LoRA rank.", 0, NULL},
    {"training.lora_alpha", "16", ">= 1", "LoRA scaling numerator (scale = alpha / r).", 0, NULL},
    {"training.lora_dropout", "0.05", "0..0.5", "Dropout on the LoRA input.", 0, NULL},
    {"training.target_modules", "auto", "auto or a list of module names", "Projections that get an adapter; auto uses the base's registry list.", 0, NULL},
    {"training.sequence_len", "2048", "64..32768", "Longest training row in tokens.", 0, NULL},
    {"training.micro_batch_size", "auto", "auto or int >= 1", "Rows per forward pass.", 0, NULL},
    {"training.grad_accum", "auto", "auto or int >= 1", "Micro-batches per optimizer step.", 0, NULL},
    {"training.learning_rate", "0.0002", "> 0", "Peak learning rate.", 0, NULL},
    {"training.num_epochs", "3", ">= 1", "Passes over the training data.", 0, NULL},
    {"training.optimizer", "adamw_torch", "adamw_torch | adamw_bnb_8bit | paged_adamw_8bit | galore_adamw | galore_adamw_8bit", "Optimizer (galore_* are refused: dlm trains LoRA adapters).", 0,
     V("adamw_torch", "adamw_bnb_8bit", "paged_adamw_8bit", "galore_adamw", "galore_adamw_8bit")},
    {"training.lr_scheduler", "cosine", "cosine | linear | constant | cosine_min_lr (dlm)", "Learning-rate schedule after warm-up.", 0, V("cosine", "linear", "constant", "cosine_min_lr")},
    {"training.warmup_ratio", "0.1", "0..0.5", "Share of the steps spent warming up.", 0, NULL},
    {"training.precision", "null", "null | bf16 | fp16 | fp32", "Compute precision; null trains bf16 where the CPU has a bf16 back end (AVX512-BF16, AMX), fp32 elsewhere.", 0, V("bf16", "fp16", "fp32")},
    {"training.seed", "42", "int", "Seed of every random choice: same seed, same adapter bytes.", 0, NULL},
    {"training.preference", "", "mapping", "Preference (DPO / ORPO) phase settings.", 0, NULL},
    {"training.preference.enabled", "false (true when the document has preference sections)", "bool", "Run the preference phase.", 0, V("true", "false")},
    {"training.preference.method", "dpo", "dpo | orpo", "Preference objective.", 0, V("dpo", "orpo")},
    {"training.preference.hyperparams", "", "mapping", "Preference hyperparameters.", 0, NULL},
    {"training.preference.hyperparams.beta", "0.1", "0..1", "DPO temperature.", 0, NULL},
    {"training.preference.hyperparams.alpha", "0.1", "0..1", "ORPO odds-ratio weight.", 0, NULL},
    {"training.preference.hyperparams.learning_rate", "5e-6", "> 0", "Preference-phase learning rate.", 0, NULL},
    {"training.preference.hyperparams.num_epochs", "1", ">= 1", "Preference-phase epochs.", 0, NULL},
    {"training.preference.loss_type", "sigmoid", "sigmoid | hinge | ipo", "DPO loss form.", 0, V("sigmoid", "hinge", "ipo")},
    {"training.preference.reference", "pre_adapter", "base | pre_adapter", "Reference model of DPO.", 0, V("base", "pre_adapter")},
    {"training.cpt", "", "mapping", "Continued-pretraining settings for prose.", 0, NULL},
    {"training.cpt.schedule", "auto", "auto | dapt | sft", "How prose is scheduled against instructions.", 0, V("auto", "dapt", "sft")},
    {"training.cpt.embed_warmup_steps", "0", ">= 0", "Steps that train the embeddings first.", 0, NULL},
    {"training.gate", "", "mapping", "Learned router across named adapters.", 0, NULL},
    {"training.gate.enabled", "false", "bool; needs two or more adapters", "Train a gate over training.adapters.", 0, V("true", "false")},
    {"training.gate.hidden_proj_dim", "64", "8..2048", "Gate hidden width.", 0, NULL},
    {"training.gate.steps", "200", "1..10000", "Gate training steps.", 0, NULL},
    {"training.gate.lr", "3e-4", "(0, 1]", "Gate learning rate.", 0, NULL},
    {"training.gate.cold_start_floor", "4", "1..1024", "Sections per adapter below which the gate is uniform.", 0, NULL},
    {"training.gate.entropy_lambda", "0.01", "0..1", "Entropy regulariser of the gate.", 0, NULL},
    {"training.cache", "", "mapping", "Tokenized-section cache.", 0, NULL},
    {"training.cache.enabled", "true", "bool", "Keep tokenized sections between runs.", 0, V("true", "false")},
    {"training.cache.max_bytes", "10737418240", ">= 1", "Cache size bound.", 0, NULL},
    {"training.cache.prune_older_than_days", "90", ">= 1", "Entries unused this long are pruned.", 0, NULL},
    {"training.audio", "", "mapping", "Audio section settings.", 0, NULL},
    {"training.audio.auto_resample", "false", "bool", "Resample audio to the processor's rate.", 0, V("true", "false")},
    {"training.adapters", "null", "map name -> adapter config; names ^[a-z][a-z0-9_]{0,31}$", "Named adapters; `#name` fence suffixes route sections to them.", 0, NULL},
    {"training.adapters.*.adapter", "lora", "lora | qlora | dora", "Adapter kind.", 0, V("lora", "qlora", "dora")},
    {"training.adapters.*.lora_r", "8", "1..256", "LoRA rank.", 0, NULL},
    {"training.adapters.*.lora_alpha", "16", ">= 1", "LoRA scaling numerator.", 0, NULL},
    {"training.adapters.*.lora_dropout", "0.05", "0..0.5", "Dropout on the LoRA input.", 0, NULL},
    {"training.adapters.*.target_modules", "auto", "auto or a list", "Projections that get an adapter.", 0, NULL},
    {"training.adapters.*.learning_rate", "0.0002", "> 0", "This adapter's learning rate.", 0, NULL},
    {"training.sources", "null", "list of {path, include, exclude, max_bytes_per_file, max_files}", "Files and folders whose text trains as prose (docs/sources.md).", 0, NULL},
    {"training.sources[].path", "required", "file or folder, relative to the document", "What to read.", 0, NULL},
    {"training.sources[].include", "[\"**/*\"]", "list of globs", "Files to take.", 0, NULL},
    {"training.sources[].exclude", "[]", "list of globs", "Files to skip.", 0, NULL},
    {"training.sources[].max_bytes_per_file", "null", ">= 1", "Larger files are skipped.", 0, NULL},
    {"training.sources[].max_files", "null", ">= 1", "At most this many files.", 0, NULL},
    {"training.sources_policy", "permissive", "permissive | strict", "strict keeps sources under the document's folder.", 0, V("permissive", "strict")},
    {"training.loss_on", "completion", "completion | all", "Loss on answers only, or on every token.", 1, V("completion", "all")},
    {"training.packing", "true", "bool", "Pack several rows into one sequence.", 1, V("true", "false")},
    {"training.save_steps", "null (auto)", "int >= 1", "Checkpoint period in steps.", 1, NULL},
    {"training.weight_decay", "0.0", ">= 0", "AdamW weight decay.", 1, NULL},
    {"training.min_lr_ratio", "0.1", "0..1", "Final LR of cosine_min_lr as a share of the peak.", 1, NULL},
    {"training.replay", "", "mapping", "Replay of earlier versions' sections.", 1, NULL},
    {"training.replay.max_bytes", "268435456", ">= 1", "Replay corpus bound.", 1, NULL},
    {"training.replay.enabled", "true", "bool", "Mix a sample of the store's corpus into training.", 1, V("true", "false")},
    {"training.recompute", "auto", "auto | on | off", "Activation recomputation.", 1, V("auto", "on", "off")},
    {"training.threads", "auto", "auto or int >= 1", "Training threads.", 1, NULL},
    {"training.val_frac", "null (auto)", "0..0.5 or null", "Fraction of rows held out for validation; 0 = none; null = 0.1 from 20 rows up, none below (docs/training.md).", 1, NULL},
    {"training.multi_turn", "1", "0..8", "Conversation rows per Q/A pair: each pair also trained after 1-3 earlier pairs; 0 = single-turn only.", 1, NULL},
    {"export.default_quant", "Q4_K_M", "Q4_K_M | Q5_K_M | Q6_K | Q8_0", "GGUF quantization of `dlm export`.", 0, V("Q4_K_M", "Q5_K_M", "Q6_K", "Q8_0")},
    {"export.default_temperature", "null", "(0, 2]", "Sampling temperature written into the export.", 0, NULL},
    {"export.default_top_p", "null", "(0, 1]", "Nucleus sampling written into the export.", 0, NULL},
};

const key_info *keys_find(const char *schema_path)
{
    for (size_t i = 0; i < sizeof KEYS / sizeof KEYS[0]; i++)
        if (!strcmp(KEYS[i].path, schema_path)) return &KEYS[i];
    return NULL;
}

typedef struct suggest_ctx {
    const char *parent;   /* "training." or "" */
    const char *name;
    char best[64];
    int dist;
} suggest_ctx;

static void suggest_one(void *vctx, const char *key)
{
    suggest_ctx *c = vctx;
    size_t pl = strlen(c->parent);
    if (strncmp(key, c->parent, pl)) return;
    const char *leaf = key + pl;
    if (strchr(leaf, '.') || strchr(leaf, '[')) return;
    int d = str_edit_distance(leaf, c->name);
    if (d < c->dist) {
        c->dist = d;
        snprintf(c->best, sizeof c->best, "%s", leaf);
    }
}

int keys_suggest(const char *parent, const char *name, char *out, size_t cap)
{
    char pre[256];
    snprintf(pre, sizeof pre, "%s%s", parent, parent[0] ? "." : "");
    suggest_ctx c = {.parent = pre, .name = name, .dist = 1 << 30};
    doc_schema_keys(suggest_one, &c);
    size_t n = strlen(name);
    int limit = n <= 4 ? 1 : n <= 8 ? 2 : 3;
    if (!c.best[0] || c.dist > limit || c.dist == 0) return 0;
    snprintf(out, cap, "%s", c.best);
    return 1;
}
