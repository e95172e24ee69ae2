#!/usr/bin/env node
// Reference side of the chat-template test: render a Jinja chat template
// with @huggingface/jinja (pinned in tests/ref/package.json).
//   node render.js extract TOKENIZER_CONFIG.json OUT.jinja   its chat_template
//   node render.js render TEMPLATE.jinja CONVS.json OUT.jsonl DIALECT
//       for each conversation {system, messages} (system, when set, becomes the
//       first message), without then with add_generation_prompt; one JSON string a line.
'use strict';
const fs = require('fs');
const path = require('path');
const { Template } = require(path.join(__dirname, '..', 'node_modules', '@huggingface', 'jinja'));

const [cmd, a, b, out, dialect] = process.argv.slice(2);
// Variables a dialect stands for beyond the conversation, from the model
// cards: Qwen3's chat template switches thinking with enable_thinking
// (https://huggingface.co/Qwen/Qwen3-8B, "Switching Between Thinking and
// Non-Thinking Mode"); dlm's qwen3 is the non-thinking mode, qwen3thinking
// the thinking one. SmolLM3's template reads the same variable
// (https://huggingface.co/HuggingFaceTB/SmolLM3-3B, "Enabling and Disabling
// Extended Thinking Mode"; undefined means on): smollm3 is off,
// smollm3thinking on.
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
if (cmd === 'extract') {
  const cfg = JSON.parse(fs.readFileSync(a, 'utf8'));
  let t = cfg.chat_template;
  if (Array.isArray(t)) t = (t.find((x) => x.name === 'default') || t[0]).template;
  fs.writeFileSync(b, t);
} else if (cmd === 'render') {
  pinClock(dialect);
  const tmpl = new Template(fs.readFileSync(a, 'utf8'));
  const convs = JSON.parse(fs.readFileSync(b, 'utf8'));
  const res = [];
  for (const c of convs) {
    if (c.skip && dialect in c.skip) continue;
    const messages = (c.system !== null && c.system !== undefined && (!c.messages.length || c.messages[0].role !== 'system'))
      ? [{ role: 'system', content: c.system }, ...c.messages] : c.messages;
    for (const gen of [false, true]) {
      // A template that raises (raise_exception, a type error) gives the
      // marker line "ERROR", as dlm's test_jinja --render does.
      let s;
      try {
        s = tmpl.render({
          messages, add_generation_prompt: gen, bos_token: '<|begin_of_text|>', eos_token: '<|eot_id|>',
          date_string: '26 Jul 2024', ...(DIALECT_VARS[dialect] || {}),
        });
      } catch (e) {
        s = 'ERROR';
      }
      res.push(JSON.stringify(s));
    }
  }
  fs.writeFileSync(out, res.join('\n') + '\n');
} else {
  console.error('usage: render.js extract|render ...');
  process.exit(2);
}
