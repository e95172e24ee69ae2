#!/usr/bin/env node
// Reference side of the tokenizer conformance tests: HF tokenizers (the Rust
// library through the npm binding @anush008/tokenizers, pinned in
// tests/ref/package.json). dlm never runs this; tests/ref/r0101 compares.
//
//   node hf_tok.js encode TOKENIZER.json CORPUS OUT.jsonl [--no-special] [--add-special]
//       one JSON array of ids per corpus line (the line exactly, no newline)
//   node hf_tok.js decode TOKENIZER.json IDS.jsonl OUT.jsonl [--skip-special]
//       one JSON string per line of ids
//   node hf_tok.js all TOKENIZER.json CORPUS OUTDIR [default] [--no-special] [--add-special] [skip]
//       OUTDIR/<mode>.jsonl: the encodings asked for, and OUTDIR/skip.jsonl
//       the decode of the default ids with skip_special_tokens
//   node hf_tok.js variant SRC_TOKENIZER.json OUTDIR NAME...
//       OUTDIR/NAME.json: tokenizer.json files derived from SRC with another
//       pipeline (see VARIANTS)
'use strict';
const fs = require('fs');
const path = require('path');
const { Tokenizer } = require(path.join(__dirname, '..', 'node_modules', '@anush008', 'tokenizers'));

function readLines(file) {
  const s = fs.readFileSync(file, 'utf8');
  const lines = s.split('\n');
  if (lines.length && lines[lines.length - 1] === '') lines.pop();
  return lines;
}

// HF's encode_special_tokens (special added tokens are not split out, all
// other added tokens still are) is not exposed by the binding. Renaming the
// special added tokens to strings that never occur in text gives the same
// ids, as long as no special token overlaps a non-special one (true for our
// tokenizers). They are renamed, not dropped: HF numbers added tokens by
// their order in the file, so dropping some would shift the others' ids.
function withoutSpecial(json) {
  const j = JSON.parse(json);
  for (const t of j.added_tokens || []) if (t.special) t.content = `\u0001dlm-disabled-${t.id}\u0001`;
  return JSON.stringify(j);
}

const VARIANTS = {
  // GPT-2: ByteLevel with its own regex, nothing else.
  gpt2: (j) => {
    j.normalizer = null;
    j.pre_tokenizer = { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true };
    j.model.ignore_merges = false;
  },
  // SmolLM2: digits one by one, then the GPT-2 regex.
  smollm: (j) => {
    j.normalizer = null;
    j.pre_tokenizer = { type: 'Sequence', pretokenizers: [
      { type: 'Digits', individual_digits: true },
      { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true }] };
    j.model.ignore_merges = false;
  },
  // ByteLevel's add_prefix_space, Qwen's regex with ignore_merges.
  prefix: (j) => {
    j.pre_tokenizer = { type: 'Sequence', pretokenizers: [
      { type: 'Split', pattern: { Regex: "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+" }, behavior: 'Isolated', invert: false },
      { type: 'ByteLevel', add_prefix_space: true, trim_offsets: false, use_regex: false }] };
    j.model.ignore_merges = true;
  },
  // Other Split behaviours, NFKC, added-token flags and a normalized added token.
  misc1: (j) => {
    j.normalizer = { type: 'NFKC' };
    j.pre_tokenizer = { type: 'Sequence', pretokenizers: [
      { type: 'Split', pattern: { Regex: '\\s+' }, behavior: 'MergedWithPrevious', invert: false },
      { type: 'Digits', individual_digits: false },
      { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: false }] };
    for (const t of j.added_tokens) {
      if (t.content === '<|im_start|>') t.lstrip = true;
      if (t.content === '<|im_end|>') t.rstrip = true;
      if (t.content === '<tool_call>') t.single_word = true;
      if (t.content === '<think>' || t.content === '</think>') t.normalized = true;
    }
  },
  // SentencePiece style (from a byte_fallback tokenizer such as Llama 2's):
  // Metaspace pre-tokenizer and decoder instead of Prepend/Replace, as
  // Mistral v0.3 / Mixtral write it ("first": only where the input starts).
  ms_first: (j) => {
    j.normalizer = null;
    j.pre_tokenizer = { type: 'Metaspace', replacement: '\u2581', prepend_scheme: 'first', split: false };
    j.decoder = { type: 'Metaspace', replacement: '\u2581', prepend_scheme: 'first', split: false };
  },
  // Metaspace splitting at each space, prepending always; no fuse_unk and
  // no byte_fallback (unknown chars become unk one by one).
  ms_split: (j) => {
    j.normalizer = null;
    j.pre_tokenizer = { type: 'Metaspace', replacement: '\u2581', prepend_scheme: 'always', split: true };
    j.decoder = { type: 'Sequence', decoders: [{ type: 'Metaspace', replacement: '\u2581', prepend_scheme: 'always', split: true }] };
    j.model.fuse_unk = false;
    j.model.byte_fallback = false;
  },
  // Prepend/Replace normalizers with fuse_unk and no byte_fallback, NFKC first.
  spm_unk: (j) => {
    j.normalizer = { type: 'Sequence', normalizers: [{ type: 'NFKC' }, { type: 'Prepend', prepend: '\u2581' },
      { type: 'Replace', pattern: { String: ' ' }, content: '\u2581' }] };
    j.model.byte_fallback = false;
    j.model.fuse_unk = true;
  },
  misc2: (j) => {
    j.normalizer = { type: 'Sequence', normalizers: [{ type: 'NFD' }] };
    j.pre_tokenizer = { type: 'Sequence', pretokenizers: [
      { type: 'Split', pattern: { String: 'e' }, behavior: 'MergedWithNext', invert: false },
      { type: 'Split', pattern: { Regex: '[,.;]' }, behavior: 'Removed', invert: false },
      { type: 'Split', pattern: { Regex: '\\p{L}+' }, behavior: 'Contiguous', invert: true },
      { type: 'ByteLevel', add_prefix_space: true, trim_offsets: false, use_regex: true }] };
  },
};

async function encodeAll(tok, lines, add) {
  const res = [];
  for (let i = 0; i < lines.length; i += 256) {
    const encs = await tok.encodeBatch(lines.slice(i, i + 256), { addSpecialTokens: add });
    for (const e of encs) res.push(e.getIds());
  }
  return res;
}

async function decodeAll(tok, ids, skip) {
  const res = [];
  for (let i = 0; i < ids.length; i += 256) res.push(...(await tok.decodeBatch(ids.slice(i, i + 256), skip)));
  return res;
}

const jsonl = (rows) => rows.map((r) => JSON.stringify(r)).join('\n') + (rows.length ? '\n' : '');

async function main() {
  const [cmd, a, b, out, ...flags] = process.argv.slice(2);
  if (cmd === 'all') {
    const json = fs.readFileSync(a, 'utf8');
    const lines = readLines(b);
    const tok = Tokenizer.fromString(json);
    const want = new Set(flags);
    const def = await encodeAll(tok, lines, false);
    fs.writeFileSync(path.join(out, 'default.jsonl'), jsonl(def));
    if (want.has('--add-special'))
      fs.writeFileSync(path.join(out, '--add-special.jsonl'), jsonl(await encodeAll(tok, lines, true)));
    if (want.has('skip')) fs.writeFileSync(path.join(out, 'skip.jsonl'), jsonl(await decodeAll(tok, def, true)));
    if (want.has('--no-special')) {
      const plain = Tokenizer.fromString(withoutSpecial(json));
      fs.writeFileSync(path.join(out, '--no-special.jsonl'), jsonl(await encodeAll(plain, lines, false)));
    }
    return;
  }
  if (cmd === 'variant') {
    const src = fs.readFileSync(a, 'utf8');
    for (const name of [out, ...flags]) {
      if (!VARIANTS[name]) throw new Error(`unknown variant ${name}`);
      const j = JSON.parse(src);
      VARIANTS[name](j);
      fs.writeFileSync(path.join(b, `${name}.json`), JSON.stringify(j));
    }
    return;
  }
  let json = fs.readFileSync(a, 'utf8');
  if (cmd === 'encode' && flags.includes('--no-special')) json = withoutSpecial(json);
  const tok = Tokenizer.fromString(json);
  const lines = readLines(b);
  const res = [];
  if (cmd === 'encode') {
    const add = flags.includes('--add-special');
    for (let i = 0; i < lines.length; i += 256) {
      const encs = await tok.encodeBatch(lines.slice(i, i + 256), { addSpecialTokens: add });
      for (const e of encs) res.push(JSON.stringify(e.getIds()));
    }
  } else if (cmd === 'decode') {
    const skip = flags.includes('--skip-special');
    const ids = lines.map((l) => JSON.parse(l));
    for (let i = 0; i < ids.length; i += 256) {
      const texts = await tok.decodeBatch(ids.slice(i, i + 256), skip);
      for (const t of texts) res.push(JSON.stringify(t));
    }
  } else {
    throw new Error('usage: hf_tok.js encode|decode|variant ...');
  }
  fs.writeFileSync(out, res.join('\n') + (res.length ? '\n' : ''));
}

main().catch((err) => { console.error(`hf_tok.js: ${err.stack || err}`); process.exit(1); });
