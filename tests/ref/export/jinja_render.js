#!/usr/bin/env node
// Jinja side of the template drift check: render a chat template with
// @huggingface/jinja (pinned in tests/ref/package.json) for each
// conversation {system, messages} with add_generation_prompt — the system
// prompt, when set and the conversation has none, becomes the first
// message (as dlm renders a document's system_prompt).
//   node jinja_render.js TEMPLATE.jinja CONVS.json [DIALECT]   → JSON array on stdout
// DIALECT adds the variables it stands for (Qwen3's and SmolLM3's
// enable_thinking; see tests/ref/chat/render.js).
'use strict';
const fs = require('fs');
const path = require('path');
const { Template } = require(path.join(__dirname, '..', 'node_modules', '@huggingface', 'jinja'));
const [tpath, cpath, dialect] = process.argv.slice(2);
// SmolLM3's template writes "Today Date: " + strftime_now(...), which
// @huggingface/jinja computes from new Date() (a context variable cannot
// replace it); dlm's smollm3 dialects pin the day to 08 July 2025 (the
// model's release), so the clock is pinned here for them.
function pinClock(dialect) {
  if (!dialect || !dialect.startsWith('smollm3')) return;
  const RealDate = Date;
  global.Date = class extends RealDate {
    constructor(...a) { if (a.length) super(...a); else super(2025, 6, 8, 12, 0, 0); }
    static now() { return new RealDate(2025, 6, 8, 12, 0, 0).getTime(); }
  };
}
const DIALECT_VARS = {
  qwen3: { enable_thinking: false }, qwen3thinking: { enable_thinking: true },
  smollm3: { enable_thinking: false }, smollm3thinking: { enable_thinking: true },
};
// bos_token / eos_token of the dialect's models (their tokenizer_config.json); Llama 3's otherwise
const SPECIALS = {
  gemma2: ['<bos>', '<eos>'], phi3: ['<s>', '<|endoftext|>'], phi4mini: ['<|endoftext|>', '<|endoftext|>'],
  mistral: ['<s>', '</s>'], 'mistral-v3': ['<s>', '</s>'], 'mistral-legacy': ['<s>', '</s>'],
  olmo2: ['<|endoftext|>', '<|endoftext|>'],
};
const [bos, eos] = SPECIALS[dialect] || ['<|begin_of_text|>', '<|eot_id|>'];
pinClock(dialect);
const tmpl = new Template(fs.readFileSync(tpath, 'utf8'));
const out = JSON.parse(fs.readFileSync(cpath, 'utf8')).map((c) => {
  const messages = (c.system !== null && c.system !== undefined && (!c.messages.length || c.messages[0].role !== 'system'))
    ? [{ role: 'system', content: c.system }, ...c.messages] : c.messages;
  return tmpl.render({ messages, add_generation_prompt: true, bos_token: bos, eos_token: eos,
                       date_string: '26 Jul 2024', ...(DIALECT_VARS[dialect] || {}) });
});
process.stdout.write(JSON.stringify(out) + '\n');
