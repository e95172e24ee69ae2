"""The documents the language-server tests open: every error kind the CLI
has (tests/cli/t0003-show-errors.sh and the checks the server adds), each
with the position `dlm show` prints for it."""

ID = "01HZX3K4M5N6P7Q8R9S0T1V2W3"
H = f"---\ndlm_id: {ID}\nbase_model: smollm2-135m"

# name -> document text
DOCS = {
    "fence": H + "\n---\nIntro\n\n::Instruction::\n### Q\nq\n### A\na\n",
    "id": "---\ndlm_id: 01KTESTEXAMPLE000000000000\nbase_model: x\n---\n",
    "key": H + "\nfoo: 1\n---\n",
    "ver": H + "\ndlm_version: 99\n---\n",
    "qa": H + "\n---\n::instruction::\n### Q\nq\n### A\n\n",
    "pref": H + "\n---\n::preference::\n### Prompt\np\n### Rejected\nr\n",
    "range": H + "\ntraining:\n  lora_r: 0\n---\n",
    "nofm": "no frontmatter\n",
    "code": H + "\n---\n```\ncode\n",
    "yaml": H + "\ntraining: [\n---\n",
    "route": H + "\ntraining:\n  adapters:\n    tone: {}\n    facts: {}\n---\n::instruction#tonne::\n### Q\nq\n### A\na\n",
    "missing": "---\ndlm_id: " + ID + "\n---\nbody\n",
    "typo": H + "\ntraining:\n  lora_rr: 4\n---\n",
    # the checks the parser leaves to later commands
    "base": "---\ndlm_id: " + ID + "\nbase_model: smollm2-136m\n---\n",
    "sources": H + "\ntraining:\n  sources:\n    - path: no-such-dir\n---\n",
    "ext": H + "\ntraining:\n  loss_on: all\n---\n",
    "old": "---\ndlm_id: " + ID + "\ndlm_version: 1\nbase_model: smollm2-135m\n---\nSome prose.\n",
    # several errors in one document: each is reported at its own line
    "multi": H + "\nfoo: 1\n---\n::Instruction::\n### Q\nq\n### A\na\n::instruction::\n### Q\nq\n### A\n\n"
             "::preference::\n### Prompt\np\n### Rejected\nr\n",
    # a position after characters outside the BMP (UTF-16 surrogate pairs)
    "utf16": H + '\nexport: {default_temperature: 1, "é😀x": 1, default_top_p: 9}\n---\n',
    "good": H + "\ntraining:\n  adapters:\n    tone: {}\n    facts: {}\n---\nIntro prose.\n\n"
            "::instruction#tone::\n### Q\nHi?\n### A\nHello.\n",
}

# (0-based line, UTF-16 character, severity, message start) of each
# diagnostic, in order. Lines and columns are the CLI's (t0003), minus one.
EXPECT = {
    "fence": [(6, 0, 1, "unknown section fence '::Instruction::'")],
    "id": [(1, 0, 1, "dlm_id: Value error, dlm_id must be a 26-char Crockford base32 ULID")],
    "key": [(3, 0, 1, "foo: Extra inputs are not permitted")],
    "ver": [(3, 0, 1, "dlm_version 99 is newer than this parser (CURRENT_SCHEMA_VERSION=15)")],
    "qa": [(7, 0, 1, "### A body is empty")],
    "pref": [(7, 0, 1, "expected `### Chosen` header alone on its line, got '### Rejected'")],
    "range": [(4, 2, 1, "training.lora_r: Input should be greater than or equal to 1")],
    "nofm": [(0, 0, 1, "expected '---' on line 1 to open frontmatter")],
    "code": [(4, 0, 1, "unterminated triple-backtick code block in body")],
    "route": [(8, 0, 1, "")],
    "missing": [(1, 0, 1, "base_model: Field required")],
    "typo": [(4, 2, 1, "training.lora_rr: Extra inputs are not permitted\nhint: did you mean 'lora_r'?")],
    "base": [(2, 12, 2, "Unknown base model 'smollm2-136m'")],
    "sources": [(5, 0, 1, "directive path ")],
    "ext": [(4, 2, 3, "training.loss_on is a dlm extension")],
    "old": [(2, 0, 3, "dlm_version 1 is older than 15")],
    "multi": [(3, 0, 1, "foo: Extra inputs are not permitted"),
              (5, 0, 1, "unknown section fence '::Instruction::'"),
              (13, 0, 1, "### A body is empty"),
              (18, 0, 1, "expected `### Chosen` header")],
    "good": [],
}
