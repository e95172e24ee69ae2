/* Document reader cases: each is a .dlm text and either the exact sections
 * (type[#adapter]@line:id) or the exact error (kind + "file:line:col: msg").
 *
 * Every expected section id and every message text below was produced by
 * the original Python implementation (DocumentLanguageModel @ 1c83a65:
 * dlm.doc.parser + the dlm.data instruction/preference parsers, pydantic
 * 2.13) on the same bytes; dlm reports precise line:col where the original
 * said only line 2 (schema errors) or nothing (Q/A bodies). Cases marked
 * "dlm" in their name cover dlm extensions the original rejects. */
#include "check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "doc/doc.h"
#include "util/json.h"
#include "util/log.h"

#define H "---\ndlm_id: 01HZX3K4M5N6P7Q8R9S0T1V2W3\nbase_model: smollm2-135m\n"

typedef struct tcase {
    const char *name;
    const char *text;
    const char *sections;   /* expected on success */
    const char *kind;       /* expected error kind */
    const char *error;      /* expected "t.dlm:L:C: msg" */
} tcase;

static const tcase CASES[] = {
    {"golden_prose_id", H
        "---\n"
        "# My tutor\n"
        "\n"
        "Some prose.\n"
        "\n",
     "prose@5:c78031fc5ab5a29a", NULL, NULL},
    {"minimal_no_body", H
        "---\n",
     "", NULL, NULL},
    {"no_newline_after_closer", H
        "---",
     "", NULL, NULL},
    {"leading_blank_dropped_once", H
        "---\n"
        "\n"
        "\n"
        "Text\n",
     "prose@6:fb87260631d8ddab", NULL, NULL},
    {"whitespace_prose_dropped", H
        "---\n"
        "  \n"
        "\t\n"
        "::instruction::\n"
        "### Q\n"
        "q\n"
        "### A\n"
        "a\n",
     "instruction@7:876ee20f352437a2", NULL, NULL},
    {"instruction_and_preference", H
        "---\n"
        "Intro.\n"
        "\n"
        "::instruction::\n"
        "### Q\n"
        "What is 2+2?\n"
        "### A\n"
        "4\n"
        "\n"
        "::preference::\n"
        "### Prompt\n"
        "Say hi\n"
        "### Chosen\n"
        "Hello!\n"
        "### Rejected\n"
        "Go away.\n",
     "prose@5:4c7acc6288478d96|instruction@7:fcb4e2e96e91e320|preference@13:cd3eee746dfe1cd3", NULL, NULL},
    {"adapter_suffix_not_in_id", H
        "---\n"
        "::instruction#tone::\n"
        "### Q\n"
        "q\n"
        "### A\n"
        "a\n"
        "::instruction::\n"
        "### Q\n"
        "q\n"
        "### A\n"
        "a\n",
     "instruction#tone@5:876ee20f352437a2|instruction@10:876ee20f352437a2", NULL, NULL},
    {"prose_fence_and_suffix", H
        "---\n"
        "first\n"
        "::prose#notes::\n"
        "second\n"
        "::prose::\n"
        "\n",
     "prose@5:2f094b885ebc9d14|prose#notes@6:85ce1b52fed502b5", NULL, NULL},
    {"code_block_protects_fences", H
        "---\n"
        "```\n"
        "::instruction::\n"
        "::Bogus::\n"
        "```\n"
        "after\n",
     "prose@5:ed8be69b913aa64c", NULL, NULL},
    {"tilde_fence_not_code", H
        "---\n"
        "~~~\n"
        "text\n"
        "~~~\n",
     "prose@5:d51108350eae0fc0", NULL, NULL},
    {"image_and_audio_fences", H
        "---\n"
        "::image path=\"fig/a.png\" alt=\"a cat\"::\n"
        "A cat.\n"
        "::audio path=\"clip.wav\" transcript=\"hello there\"::\n",
     "image@5:24f8e2532c57486f|audio@7:5f96f9f733a89dbb", NULL, NULL},
    {"probe_marker", H
        "---\n"
        "::instruction::\n"
        "### Q !probe\n"
        "Capital of France?\n"
        "### A\n"
        "Paris.\n"
        "\n"
        "  ### Q  \n"
        "  multi\n"
        "\n"
        "  line  \n"
        "### A\n"
        "yes\n",
     "instruction@5:ac7259f12b2d39a9", NULL, NULL},
    {"harvest_marker_not_in_id", H
        "---\n"
        "::instruction::\n"
        "<!-- dlm-auto-harvest: source=\"run_7_sway\" -->\n"
        "### Q\n"
        "q\n"
        "### A\n"
        "a\n",
     "instruction@5:876ee20f352437a2", NULL, NULL},
    {"mined_marker", H
        "---\n"
        "::preference::\n"
        "<!-- dlm-auto-mined: judge_name=\"sway\" judge_score_chosen=\"0.91\" judge_score_rejected=\"0.12\" mined_at=\"2025-03-04T05:06:07Z\" mined_run_id=\"2\" -->\n"
        "### Prompt\n"
        "p\n"
        "### Chosen\n"
        "c\n"
        "### Rejected\n"
        "r\n",
     "preference@5:92fd3c5ad9c7d43f", NULL, NULL},
    {"synth_marker", H
        "---\n"
        "::instruction::\n"
        "<!-- dlm-auto-synth: synth_teacher=\"self\" synth_strategy=\"extraction\" synth_at=\"2025-03-04T05:06:07\" source_section_id=\"c78031fc5ab5a29a\" -->\n"
        "### Q\n"
        "q\n"
        "### A\n"
        "a\n",
     "instruction@5:876ee20f352437a2", NULL, NULL},
    {"html_comment_in_prose_is_text", H
        "---\n"
        "<!-- dlm-auto-harvest: source=\"x\" -->\n"
        "prose\n",
     "prose@5:fd90344839e0cb1f", NULL, NULL},
    {"crlf_and_cr_normalised", "---\r\n"
        "dlm_id: 01HZX3K4M5N6P7Q8R9S0T1V2W3\r\n"
        "base_model: smollm2-135m\r\n"
        "---\r\n"
        "# My tutor\r\n"
        "\r\n"
        "Some prose.\r\n"
        "\r\n",
     "prose@5:c78031fc5ab5a29a", NULL, NULL},
    {"bom_stripped", "\xef\xbb\xbf"H
        "---\n"
        "# My tutor\n"
        "\n"
        "Some prose.\n"
        "\n",
     "prose@5:c78031fc5ab5a29a", NULL, NULL},
    {"err_no_opener", "dlm_id: x\n"
        "---\n",
     NULL, "FrontmatterError", "t.dlm:1:1: expected '---' on line 1 to open frontmatter, got 'dlm_id: x'"},
    {"err_opener_trailing_space", "--- \n"
        "dlm_id: 01HZX3K4M5N6P7Q8R9S0T1V2W3\n"
        "base_model: smollm2-135m\n"
        "---\n",
     NULL, "FrontmatterError", "t.dlm:1:1: expected '---' on line 1 to open frontmatter, got '--- '"},
    {"err_no_closer", H
        "body\n",
     NULL, "FrontmatterError", "t.dlm:1:1: no closing '---' found for frontmatter block"},
    {"err_not_mapping", "---\n"
        "- a\n"
        "- b\n"
        "---\n",
     NULL, "FrontmatterError", "t.dlm:2: frontmatter must be a mapping, got list"},
    {"err_yaml_syntax", H
        "training: [unclosed\n"
        "---\n",
     NULL, "FrontmatterError", "t.dlm:4:11: invalid YAML: while parsing a flow sequence: did not find expected ',' or ']'"},
    /* cut off right after the '[': libyaml notices at the stream's end (the
     * next line); the original (PyYAML, "<text>:4:12") and dlm mark the end of the line */
    {"err_yaml_stream_end", H
        "training: [\n"
        "---\n",
     NULL, "FrontmatterError", "t.dlm:4:12: invalid YAML: while parsing a flow node: did not find expected node content"},
    {"err_yaml_tab", H
        "training:\n"
        "\tlora_r: 8\n"
        "---\n",
     NULL, "FrontmatterError", "t.dlm:5:1: invalid YAML: while scanning for the next token: found character that cannot start any token"},
    {"err_bad_id", "---\n"
        "dlm_id: 01KTESTEXAMPLE000000000000\n"
        "base_model: x\n"
        "---\n",
     NULL, "SchemaValidationError", "t.dlm:2:1: dlm_id: Value error, dlm_id must be a 26-char Crockford base32 ULID, got '01KTESTEXAMPLE000000000000'"},
    {"err_unknown_key", H
        "foo: bar\n"
        "---\n",
     NULL, "SchemaValidationError", "t.dlm:4:1: foo: Extra inputs are not permitted"},
    {"err_missing_required", "---\n"
        "base_model: ''\n"
        "---\n",
     NULL, "SchemaValidationError", "t.dlm:2: dlm_id: Field required; base_model: String should have at least 1 character"},
    {"err_nested_unknown_and_range", H
        "training:\n"
        "  lora_r: 0\n"
        "  lora_dropout: 0.9\n"
        "  colour: blue\n"
        "---\n",
     NULL, "SchemaValidationError", "t.dlm:5:3: training.lora_r: Input should be greater than or equal to 1; training.lora_dropout: Input should be less than or equal to 0.5; training.colour: Extra inputs are not permitted"},
    {"err_types", H
        "training:\n"
        "  sequence_len: long\n"
        "  seed: 1.5\n"
        "  learning_rate: fast\n"
        "  cache:\n"
        "    enabled: maybe\n"
        "---\n",
     NULL, "SchemaValidationError", "t.dlm:5:3: training.sequence_len: Input should be a valid integer, unable to parse string as an integer; training.learning_rate: Input should be a valid number, unable to parse string as a number; training.seed: Input should be a valid integer, got a number with a fractional part; training.cache.enabled: Input should be a valid boolean, unable to interpret input"},
    {"err_literal", H
        "training:\n"
        "  optimizer: sgd\n"
        "  precision: int4\n"
        "export:\n"
        "  default_quant: Q2_K\n"
        "---\n",
     NULL, "SchemaValidationError", "t.dlm:5:3: training.optimizer: Input should be 'adamw_torch', 'adamw_bnb_8bit', 'paged_adamw_8bit', 'galore_adamw' or 'galore_adamw_8bit'; training.precision: Input should be 'bf16', 'fp16' or 'fp32'; export.default_quant: Input should be 'Q4_K_M', 'Q5_K_M', 'Q6_K' or 'Q8_0'"},
    {"err_union_auto_int", H
        "training:\n"
        "  micro_batch_size: 0\n"
        "  grad_accum: lots\n"
        "---\n",
     NULL, "SchemaValidationError", "t.dlm:5:3: training.micro_batch_size: Value error, must be a positive int or 'auto', got 0; training.grad_accum.literal['auto']: Input should be 'auto'; training.grad_accum.int: Input should be a valid integer, unable to parse string as an integer"},
    {"err_target_modules", H
        "training:\n"
        "  target_modules: [q_proj, 3]\n"
        "---\n",
     NULL, "SchemaValidationError", "t.dlm:5:3: training.target_modules.literal['auto']: Input should be 'auto'; training.target_modules.list[str].1: Input should be a valid string"},
    {"err_model_type", H
        "training:\n"
        "  preference: 3\n"
        "  gate: []\n"
        "---\n",
     NULL, "SchemaValidationError", "t.dlm:5:3: training.preference: Input should be a valid dictionary or instance of PreferenceConfig; training.gate: Input should be a valid dictionary or instance of GateConfig"},
    {"err_adapters_empty", H
        "training:\n"
        "  adapters: {}\n"
        "---\n",
     NULL, "SchemaValidationError", "t.dlm:5:3: training.adapters: Value error, training.adapters: at least one adapter must be declared (omit the block entirely for the single-adapter shorthand)"},
    {"err_adapters_bad_name", H
        "training:\n"
        "  adapters:\n"
        "    Tone: {}\n"
        "---\n",
     NULL, "SchemaValidationError", "t.dlm:6:5: training.adapters: Value error, training.adapters: 'Tone' is not a valid adapter name (must match ^[a-z][a-z0-9_]{0,31}$)"},
    {"err_gate_needs_two", H
        "training:\n"
        "  gate:\n"
        "    enabled: true\n"
        "  adapters:\n"
        "    tone: {}\n"
        "---\n",
     NULL, "SchemaValidationError", "t.dlm:4:1: training: Value error, training.gate.enabled=true requires training.adapters with two or more named adapters (a gate over a single adapter has nothing to route between)"},
    {"err_flat_drift", H
        "training:\n"
        "  lora_r: 16\n"
        "  learning_rate: 0.001\n"
        "  adapters:\n"
        "    tone: {}\n"
        "    facts: {lora_r: 4}\n"
        "---\n",
     NULL, "SchemaValidationError", "t.dlm:4:1: training: Value error, training.adapters is declared; flat per-adapter fields ['lora_r', 'learning_rate'] must stay at their defaults (move them into the per-adapter block instead)"},
    {"err_sources", H
        "training:\n"
        "  sources:\n"
        "    - include: ['**/*.md']\n"
        "    - path: docs\n"
        "      max_files: 0\n"
        "---\n",
     NULL, "SchemaValidationError", "t.dlm:6:7: training.sources.0.path: Field required; training.sources.1.max_files: Input should be greater than or equal to 1"},
    {"err_export_range", H
        "export:\n"
        "  default_temperature: 0\n"
        "  default_top_p: 1.5\n"
        "---\n",
     NULL, "SchemaValidationError", "t.dlm:5:3: export.default_temperature: Input should be greater than 0; export.default_top_p: Input should be less than or equal to 1"},
    {"lax_coercions", H
        "training:\n"
        "  lora_r: '16'\n"
        "  lora_alpha: 32.0\n"
        "  learning_rate: 1e-4\n"
        "  micro_batch_size: '4'\n"
        "  packing: no\n"
        "  cache:\n"
        "    enabled: 'off'\n"
        "---\n",
     "", NULL, NULL},
    {"yaml11_types", H
        "training:\n"
        "  seed: 0x10\n"
        "  num_epochs: 0_2\n"
        "  preference:\n"
        "    enabled: yes\n"
        "---\n",
     "", NULL, NULL},
    {"dlm_extensions", H
        "training:\n"
        "  lr_scheduler: cosine_min_lr\n"
        "  loss_on: all\n"
        "  packing: false\n"
        "  save_steps: 50\n"
        "  weight_decay: 0.01\n"
        "  min_lr_ratio: 0.05\n"
        "  replay:\n"
        "    max_bytes: 1000\n"
        "    enabled: false\n"
        "  recompute: off\n"
        "  threads: 4\n"
        "  multi_turn: 0\n"
        "---\n",
     "", NULL, NULL},
    {"err_extension_ranges", H
        "training:\n"
        "  loss_on: prompt\n"
        "  save_steps: 0\n"
        "  min_lr_ratio: 2\n"
        "  threads: 0\n"
        "  multi_turn: 9\n"
        "---\n",
     NULL, "SchemaValidationError", "t.dlm:5:3: training.loss_on: Input should be 'completion' or 'all'; training.save_steps: Input should be greater than or equal to 1; training.min_lr_ratio: Input should be less than or equal to 1; training.threads: Value error, must be a positive int or 'auto', got 0; training.multi_turn: Input should be less than or equal to 8"},
    {"merge_keys_and_anchors", H
        "training:\n"
        "  <<: {lora_r: 4, seed: 7}\n"
        "  seed: 9\n"
        "---\n",
     "", NULL, NULL},
    {"err_future_version", H
        "dlm_version: 99\n"
        "---\n",
     NULL, "DlmVersionError", "t.dlm:4:1: dlm_version 99 is newer than this parser (CURRENT_SCHEMA_VERSION=15); upgrade dlm or check the source's schema."},
    {"err_version_zero", H
        "dlm_version: 0\n"
        "---\n",
     NULL, "DlmVersionError", "t.dlm:4:1: no migrator registered for dlm_version=0; target_version=15."},
    {"err_version_type", H
        "dlm_version: '3'\n"
        "---\n",
     NULL, "SchemaValidationError", "t.dlm:4:1: dlm_version must be an integer, got str"},
    {"v1_dpo_migrated", H
        "training:\n"
        "  dpo:\n"
        "    enabled: true\n"
        "    beta: 0.3\n"
        "    learning_rate: 1e-6\n"
        "    num_epochs: 2\n"
        "    loss_type: hinge\n"
        "    reference: pre_dpo_adapter\n"
        "---\n",
     "", NULL, NULL},
    {"v3_doc_reads", H
        "dlm_version: 3\n"
        "---\n"
        "Text\n",
     "prose@6:845a0313b44272ab", NULL, NULL},
    {"err_unknown_fence_case", H
        "---\n"
        "Intro\n"
        "\n"
        "::Instruction::\n"
        "### Q\n"
        "q\n"
        "### A\n"
        "a\n",
     NULL, "FenceError", "t.dlm:7:1: unknown section fence '::Instruction::'; valid types are ['prose', 'instruction', 'preference', 'image', 'audio']"},
    {"err_unknown_fence_suffix", H
        "---\n"
        "::foo#bar::\n",
     NULL, "FenceError", "t.dlm:5:1: unknown section fence '::foo#bar::'; valid types are ['prose', 'instruction', 'preference', 'image', 'audio']"},
    {"err_empty_adapter_suffix", H
        "---\n"
        "::instruction#::\n",
     NULL, "FenceError", "t.dlm:5:1: fence '::instruction#::' has an empty adapter suffix after '#'"},
    {"err_bad_adapter_suffix", H
        "---\n"
        "::instruction#Tone::\n",
     NULL, "FenceError", "t.dlm:5:1: fence '::instruction#Tone::' has an invalid adapter name 'Tone' (must match ^[a-z][a-z0-9_]{0,31}$)"},
    {"err_image_needs_attrs", H
        "---\n"
        "::image::\n",
     NULL, "FenceError", "t.dlm:5:1: fence '::image::' requires attributes (expected e.g. `::image path=\"...\"::`)"},
    {"err_attr_unknown", H
        "---\n"
        "::image path=\"a.png\" size=\"3\"::\n",
     NULL, "FenceError", "t.dlm:5:1: fence '::image...::' has unknown attribute 'size' (allowed: ['alt', 'path'])"},
    {"err_attr_missing", H
        "---\n"
        "::audio path=\"a.wav\"::\n",
     NULL, "FenceError", "t.dlm:5:1: fence '::audio...::' is missing required attribute(s) ['transcript']"},
    {"err_attr_repeat", H
        "---\n"
        "::image path=\"a\" path=\"b\"::\n",
     NULL, "FenceError", "t.dlm:5:1: fence '::image...::' repeats attribute 'path'"},
    {"err_attr_non_ascii", H
        "---\n"
        "::image path=\"caf\xc3\xa9"".png\"::\n",
     NULL, "FenceError", "t.dlm:5:1: fence '::image...::' attribute 'path' contains non-ASCII characters"},
    {"err_attr_not_media", H
        "---\n"
        "::instruction path=\"x\"::\n",
     NULL, "FenceError", "t.dlm:5:1: fence '::instruction...::' does not take attributes"},
    {"err_attr_unknown_type", H
        "---\n"
        "::video path=\"x\"::\n",
     NULL, "FenceError", "t.dlm:5:1: unknown attribute fence '::video...::'; attribute form is only valid for types ['audio', 'image']"},
    {"err_unterminated_code", H
        "---\n"
        "text\n"
        "\n"
        "```python\n"
        "print(1)\n",
     NULL, "FenceError", "t.dlm:7:1: unterminated triple-backtick code block in body"},
    {"err_mined_bad_score", H
        "---\n"
        "::preference::\n"
        "<!-- dlm-auto-mined: judge_name=\"s\" judge_score_chosen=\"high\" judge_score_rejected=\"0.1\" mined_at=\"2025-01-02\" mined_run_id=\"3\" -->\n",
     NULL, "FenceError", "t.dlm:6:1: dlm-auto-mined marker judge scores must be floats"},
    {"err_mined_missing", H
        "---\n"
        "::preference::\n"
        "<!-- dlm-auto-mined: judge_name=\"s\" -->\n",
     NULL, "FenceError", "t.dlm:6:1: dlm-auto-mined marker is missing required attribute(s) ['judge_score_chosen', 'judge_score_rejected', 'mined_at', 'mined_run_id']"},
    {"err_synth_bad_id", H
        "---\n"
        "::instruction::\n"
        "<!-- dlm-auto-synth: synth_teacher=\"self\" synth_strategy=\"e\" synth_at=\"2025-01-02\" source_section_id=\"XYZ\" -->\n"
        "### Q\n"
        "q\n"
        "### A\n"
        "a\n",
     NULL, "FenceError", "t.dlm:6:1: dlm-auto-synth marker source_section_id must be a 16-char lowercase hex section id"},
    {"err_instr_no_pairs", H
        "---\n"
        "::instruction::\n"
        "\n",
     NULL, "InstructionParseError", "t.dlm:5:1: instruction block has no ### Q / ### A pairs"},
    {"err_instr_inline_q", H
        "---\n"
        "::instruction::\n"
        "### Q what is this?\n"
        "### A\n"
        "x\n",
     NULL, "InstructionParseError", "t.dlm:6:1: expected `### Q` header alone on its line, got '### Q what is this?'"},
    {"err_instr_q_empty", H
        "---\n"
        "::instruction::\n"
        "### Q\n"
        "\n"
        "### A\n"
        "x\n",
     NULL, "InstructionParseError", "t.dlm:6:1: ### Q body is empty"},
    {"err_instr_q_unmatched", H
        "---\n"
        "::instruction::\n"
        "### Q\n"
        "q\n",
     NULL, "InstructionParseError", "t.dlm:6:1: ### Q without matching `### A` at end of section"},
    {"err_instr_q_q", H
        "---\n"
        "::instruction::\n"
        "### Q\n"
        "q\n"
        "### Q\n"
        "q2\n"
        "### A\n"
        "a\n",
     NULL, "InstructionParseError", "t.dlm:8:1: ### Q must be followed by `### A` alone on its line, got '### Q'"},
    {"err_instr_a_empty", H
        "---\n"
        "intro\n"
        "::instruction::\n"
        "### Q\n"
        "q\n"
        "### A\n"
        "\n",
     NULL, "InstructionParseError", "t.dlm:9:1: ### A body is empty"},
    {"err_instr_stray_text", H
        "---\n"
        "::instruction::\n"
        "Hello\n"
        "### Q\n"
        "q\n"
        "### A\n"
        "a\n",
     NULL, "InstructionParseError", "t.dlm:6:1: expected `### Q` header alone on its line, got 'Hello'"},
    {"err_pref_none", H
        "---\n"
        "::preference::\n",
     NULL, "PreferenceParseError", "t.dlm:5:1: preference block has no ### Prompt / ### Chosen / ### Rejected triples"},
    {"err_pref_order", H
        "---\n"
        "::preference::\n"
        "### Prompt\n"
        "p\n"
        "### Rejected\n"
        "r\n",
     NULL, "PreferenceParseError", "t.dlm:8:1: expected `### Chosen` header alone on its line, got '### Rejected'"},
    {"err_pref_eos", H
        "---\n"
        "::preference::\n"
        "### Prompt\n"
        "p\n"
        "### Chosen\n"
        "c\n",
     NULL, "PreferenceParseError", "t.dlm:8:1: expected `### Rejected` header, got end of section"},
    {"err_pref_empty", H
        "---\n"
        "::preference::\n"
        "### Prompt\n"
        "p\n"
        "### Chosen\n"
        "\n"
        "### Rejected\n"
        "r\n",
     NULL, "PreferenceParseError", "t.dlm:8:1: `### Chosen` body is empty"},
};

static void summarize(const dlm_doc *d, strbuf *sb)
{
    for (int i = 0; i < doc_nsections(d); i++) {
        const doc_section *s = doc_section_at(d, i);
        sb_printf(sb, "%s%s%s%s@%d:%s", i ? "|" : "", doc_section_type_name(s->type), s->adapter ? "#" : "",
                  s->adapter ? s->adapter : "", s->line, s->id);
    }
}

static void run_cases(void)
{
    int n = (int)(sizeof CASES / sizeof CASES[0]);
    for (int i = 0; i < n; i++) {
        const tcase *c = &CASES[i];
        dlm_err e;
        err_clear(&e);
        dlm_doc *d = doc_parse("t.dlm", c->text, strlen(c->text), &e);
        if (c->sections) {
            CHECK_MSG(d != NULL, "%s: unexpected error %s: %s", c->name, e.kind, e.msg);
            if (!d) continue;
            strbuf sb = STRBUF_INIT;
            summarize(d, &sb);
            CHECK_MSG(!strcmp(sb_str(&sb), c->sections), "%s:\n  got      %s\n  expected %s", c->name, sb_str(&sb),
                      c->sections);
            sb_free(&sb);
            doc_free(d);
        } else {
            CHECK_MSG(d == NULL, "%s: parsed but expected %s", c->name, c->error);
            if (d) { doc_free(d); continue; }
            char buf[8192];
            err_format(&e, buf, sizeof buf);
            CHECK_MSG(!strcmp(e.kind, c->kind), "%s: kind %s, expected %s", c->name, e.kind, c->kind);
            CHECK_MSG(!strcmp(buf, c->error), "%s:\n  got      %s\n  expected %s", c->name, buf, c->error);
        }
    }
    printf("test_doc: %d table cases\n", n);
}

static dlm_doc *parse_ok(const char *text)
{
    dlm_err e;
    dlm_doc *d = doc_parse("t.dlm", text, strlen(text), &e);
    CHECK_MSG(d != NULL, "parse failed: %s", e.msg);
    return d;
}

/* The spec's golden vector, straight through the id function. */
static void test_golden_ids(void)
{
    char id[17];
    doc_section_id(DOC_PROSE, "# My tutor\n\nSome prose.\n", 24, id);
    CHECK_STR(id, "c78031fc5ab5a29a");
    /* CRLF and a BOM hash like LF (the original's normalize_for_hashing). */
    doc_section_id(DOC_PROSE, "\xef\xbb\xbf# My tutor\r\n\r\nSome prose.\r\n", 30, id);
    CHECK_STR(id, "c78031fc5ab5a29a");
    /* Type is part of identity: sha256("instruction\n# My tutor\n\nSome prose.\n")[:16] */
    doc_section_id(DOC_INSTRUCTION, "# My tutor\n\nSome prose.\n", 24, id);
    CHECK_STR(id, "1e054a550f37f2c6");
    /* Media identity: path (+ blob sha once ingested). */
    doc_media_section_id(DOC_IMAGE, "fig/a.png", NULL, id);
    CHECK_STR(id, "24f8e2532c57486f");
}

static void test_values(void)
{
    dlm_doc *d = parse_ok(H "training:\n  lora_r: '16'\n  lora_alpha: 32.0\n  learning_rate: 1e-4\n"
                            "  micro_batch_size: '4'\n  seed: 0x10\n  num_epochs: 0_2\n  preference:\n    enabled: yes\n---\n");
    if (d) {
        const doc_training *t = &doc_fm(d)->training;
        CHECK_INT(t->lora_r, 16);
        CHECK_INT(t->lora_alpha, 32);
        CHECK_NEAR(t->learning_rate, 1e-4, 0);
        CHECK_INT(t->micro_batch_size, 4);
        CHECK_INT(t->seed, 16);
        CHECK_INT(t->num_epochs, 2);   /* YAML 1.1: leading 0 = octal */
        CHECK_INT(t->preference.enabled, 1);
        CHECK_INT(t->preference.enabled_explicit, 1);
        CHECK_INT(t->grad_accum, 0);   /* auto */
        CHECK_INT(doc_fm(d)->source_version, 1);
        CHECK_INT(doc_fm(d)->dlm_version, 15);
        doc_free(d);
    }
    /* v1 → v2: training.dpo becomes training.preference */
    d = parse_ok(H "training:\n  dpo:\n    enabled: true\n    beta: 0.3\n    learning_rate: 1e-6\n    num_epochs: 2\n"
                   "    loss_type: hinge\n    reference: pre_dpo_adapter\n---\n");
    if (d) {
        const doc_training *t = &doc_fm(d)->training;
        CHECK_INT(t->preference.enabled, 1);
        CHECK_INT(t->preference.method, DOC_PREF_DPO);
        CHECK_NEAR(t->preference.hyperparams.beta, 0.3, 0);
        CHECK_NEAR(t->preference.hyperparams.learning_rate, 1e-6, 0);
        CHECK_INT(t->preference.hyperparams.num_epochs, 2);
        CHECK_NEAR(t->preference.hyperparams.alpha, 0.1, 0);
        CHECK_INT(t->preference.loss_type, DOC_LOSS_HINGE);
        CHECK_INT(t->preference.reference, DOC_REF_PRE_ADAPTER);
        doc_free(d);
    }
    /* merge keys: own keys win over merged ones */
    d = parse_ok(H "training:\n  <<: {lora_r: 4, seed: 7}\n  seed: 9\n---\n");
    if (d) {
        CHECK_INT(doc_fm(d)->training.lora_r, 4);
        CHECK_INT(doc_fm(d)->training.seed, 9);
        doc_free(d);
    }
    /* dlm extensions */
    d = parse_ok(H "training:\n  lr_scheduler: cosine_min_lr\n  loss_on: all\n  packing: false\n  save_steps: 50\n"
                   "  weight_decay: 0.01\n  min_lr_ratio: 0.05\n  replay:\n    max_bytes: 1000\n    enabled: false\n"
                   "  recompute: off\n  threads: 4\n  multi_turn: 3\n---\n");
    if (d) {
        const doc_training *t = &doc_fm(d)->training;
        CHECK_INT(t->lr_scheduler, DOC_SCHED_COSINE_MIN_LR);
        CHECK_INT(t->loss_on, DOC_LOSS_ON_ALL);
        CHECK_INT(t->packing, 0);
        CHECK_INT(t->save_steps, 50);
        CHECK_NEAR(t->weight_decay, 0.01, 0);
        CHECK_NEAR(t->min_lr_ratio, 0.05, 0);
        CHECK_INT(t->replay.max_bytes, 1000);
        CHECK_INT(t->replay.enabled, 0);
        CHECK_INT(t->recompute, DOC_RECOMPUTE_OFF);   /* YAML's bare off is a bool: taken as meant */
        CHECK_INT(t->threads, 4);
        CHECK_INT(t->multi_turn, 3);
        doc_free(d);
    }
    /* adapters, sources, export, system_prompt */
    d = parse_ok(H "system_prompt: |\n  Be brief.\n  Be kind.\ntraining:\n  adapters:\n    tone: {lora_r: 4}\n"
                   "    facts:\n      target_modules: [q_proj, v_proj]\n  sources:\n    - path: notes\n      exclude: ['*.tmp']\n"
                   "export:\n  default_quant: Q8_0\n  default_temperature: 0.2\n---\n");
    if (d) {
        const doc_frontmatter *fm = doc_fm(d);
        CHECK_STR(fm->system_prompt, "Be brief.\nBe kind.\n");   /* a `|` block keeps its final newline */
        CHECK_INT(fm->training.n_adapters, 2);
        CHECK_STR(fm->training.adapters[0].name, "tone");
        CHECK_INT(fm->training.adapters[0].lora_r, 4);
        CHECK_INT(fm->training.adapters[1].target_modules_auto, 0);
        CHECK_INT(fm->training.adapters[1].target_modules.n, 2);
        CHECK_STR(fm->training.adapters[1].target_modules.v[1], "v_proj");
        CHECK_INT(fm->training.n_sources, 1);
        CHECK_STR(fm->training.sources[0].path, "notes");
        CHECK_STR(fm->training.sources[0].include.v[0], "**/*");
        CHECK_STR(fm->training.sources[0].exclude.v[0], "*.tmp");
        CHECK_INT(fm->export.default_quant, DOC_QUANT_Q8_0);
        CHECK_INT(fm->export.has_temperature, 1);
        CHECK_INT(fm->export.has_top_p, 0);
        doc_free(d);
    }
}

static void test_sections_detail(void)
{
    dlm_doc *d = parse_ok(H "---\n::instruction::\n### Q !probe\nCapital of France?\n### A\nParis.\n\n  ### Q  \n  multi\n\n"
                            "  line  \n### A\nyes\n::preference::\n<!-- dlm-auto-mined: judge_name=\"sway\" judge_score_chosen=\"0.91\" "
                            "judge_score_rejected=\"0.12\" mined_at=\"2025-03-04T05:06:07Z\" mined_run_id=\"2\" -->\n### Prompt\np\n"
                            "### Chosen\nc\n### Rejected\nr\n::audio path=\"clip.wav\" transcript=\"hello there\"::\n");
    if (!d) return;
    CHECK_INT(doc_nsections(d), 3);
    const doc_section *s = doc_section_at(d, 0);
    CHECK_INT(s->n_pairs, 2);
    CHECK_STR(s->pairs[0].question, "Capital of France?");
    CHECK_STR(s->pairs[0].answer, "Paris.");
    CHECK_INT(s->pairs[0].probe, 1);
    CHECK_INT(s->pairs[0].q_line, 6);
    CHECK_INT(s->pairs[0].a_line, 8);
    CHECK_STR(s->pairs[1].question, "multi\n\n  line");
    CHECK_INT(s->pairs[1].probe, 0);
    CHECK_INT(s->pairs[1].q_line, 11);
    s = doc_section_at(d, 1);
    CHECK_INT(s->auto_mined, 1);
    CHECK_STR(s->judge_name, "sway");
    CHECK_NEAR(s->judge_score_chosen, 0.91, 0);
    CHECK_INT(s->mined_run_id, 2);
    CHECK_INT(s->n_triples, 1);
    CHECK_STR(s->triples[0].rejected, "r");
    CHECK_INT(s->triples[0].chosen_line, 21);
    CHECK_INT(s->content_line, 19);   /* line 18 is the marker: not content */
    s = doc_section_at(d, 2);
    CHECK_STR(s->media_path, "clip.wav");
    CHECK_STR(s->media_transcript, "hello there");
    CHECK(s->media_alt == NULL);
    doc_free(d);
}

static void test_bom_and_encoding(void)
{
    int before = log_warn_count();
    dlm_doc *d = parse_ok("\xef\xbb\xbf" H "---\nx\n");
    CHECK_INT(log_warn_count(), before + 1);   /* "t.dlm: UTF-8 BOM present; stripped" */
    size_t n;
    if (d) {
        CHECK(doc_raw(d, &n)[0] == (char)0xef);
        CHECK(doc_text(d, &n)[0] == '-');
        doc_free(d);
    }
    dlm_err e;
    char buf[512];
    const char bad[] = "---\ndlm_id: \xe2\x82\n";
    CHECK(doc_parse("t.dlm", bad, sizeof bad - 1, &e) == NULL);
    err_format(&e, buf, sizeof buf);
    CHECK_STR(buf, "t.dlm: invalid UTF-8 at byte 12: invalid continuation byte");
    CHECK(doc_parse("t.dlm", "abc\xe2", 4, &e) == NULL);
    err_format(&e, buf, sizeof buf);
    CHECK_STR(buf, "t.dlm: invalid UTF-8 at byte 3: unexpected end of data");
    CHECK(doc_parse("t.dlm", "---\n\xc0\xaf", 6, &e) == NULL);
    err_format(&e, buf, sizeof buf);
    CHECK_STR(buf, "t.dlm: invalid UTF-8 at byte 4: invalid start byte");
    CHECK_STR(e.kind, "DlmEncodingError");
    CHECK(doc_parse("t.dlm", "---\nx: \0\n---\n", 12, &e) == NULL);
    err_format(&e, buf, sizeof buf);
    CHECK_STR(buf, "t.dlm: NUL character at byte 7: a .dlm document is text");
}

/* show --json's frontmatter: every default, shaped like the original's
 * DlmFrontmatter.model_dump(mode="json") (+ the dlm extensions). */
static void test_frontmatter_json(void)
{
    dlm_doc *d = parse_ok(H "---\n");
    if (!d) return;
    json_t *j = doc_frontmatter_json(d);
    strbuf sb = STRBUF_INIT;
    json_write(&sb, j, JW_SORT | JW_COMPACT);
    CHECK_STR(sb_str(&sb),
              "{\"base_model\":\"smollm2-135m\",\"dlm_id\":\"01HZX3K4M5N6P7Q8R9S0T1V2W3\",\"dlm_version\":15,"
              "\"export\":{\"default_quant\":\"Q4_K_M\",\"default_temperature\":null,\"default_top_p\":null},"
              "\"system_prompt\":null,\"training\":{\"adapter\":\"lora\",\"adapters\":null,"
              "\"audio\":{\"auto_resample\":false},\"cache\":{\"enabled\":true,\"max_bytes\":10737418240,"
              "\"prune_older_than_days\":90},\"cpt\":{\"embed_warmup_steps\":0,\"schedule\":\"auto\"},"
              "\"gate\":{\"cold_start_floor\":4,\"enabled\":false,\"entropy_lambda\":0.01,\"hidden_proj_dim\":64,"
              "\"lr\":0.0003,\"steps\":200},\"grad_accum\":\"auto\",\"learning_rate\":0.0002,\"lora_alpha\":16,"
              "\"lora_dropout\":0.05,\"lora_r\":8,\"loss_on\":\"completion\",\"lr_scheduler\":\"cosine\","
              "\"micro_batch_size\":\"auto\",\"min_lr_ratio\":0.1,\"multi_turn\":1,\"num_epochs\":3,\"optimizer\":\"adamw_torch\","
              "\"packing\":true,\"precision\":null,\"preference\":{\"enabled\":false,\"hyperparams\":{\"alpha\":0.1,"
              "\"beta\":0.1,\"learning_rate\":5e-06,\"num_epochs\":1},\"loss_type\":\"sigmoid\",\"method\":\"dpo\","
              "\"reference\":\"pre_adapter\"},\"recompute\":\"auto\",\"replay\":{\"enabled\":true,"
              "\"max_bytes\":268435456},\"save_steps\":null,\"seed\":42,\"sequence_len\":2048,\"sources\":null,"
              "\"sources_policy\":\"permissive\",\"target_modules\":\"auto\",\"threads\":\"auto\","
              "\"val_frac\":null,\"warmup_ratio\":0.1,\"weight_decay\":0.0}}");
    sb_free(&sb);
    json_decref(j);
    doc_free(d);
}

int main(void)
{
    log_set_level(LOG_QUIET);
    run_cases();
    test_golden_ids();
    test_values();
    test_sections_detail();
    test_bom_and_encoding();
    test_frontmatter_json();
    return check_done();
}
