#!/usr/bin/env node
// Jinja side of the template drift check: render a chat template with
// @huggingface/jinja (pinned in tests/ref/package.json) for each
// conversation {system, messages} with add_generation_prompt — the system
// prompt, when set and the conversation has none, becomes the first
// message (as dlm renders a document's system_prompt).
//   node jinja_render.js TEMPLATE.jinja CONVS.json   → JSON array on stdout
'use strict';
const fs = require('fs');
const path = require('path');
const { Template } = require(path.join(__dirname, '..', 'node_modules', '@huggingface', 'jinja'));
const [tpath, cpath] = process.argv.slice(2);
const tmpl = new Template(fs.readFileSync(tpath, 'utf8'));
const out = JSON.parse(fs.readFileSync(cpath, 'utf8')).map((c) => {
  const messages = (c.system !== null && c.system !== undefined && (!c.messages.length || c.messages[0].role !== 'system'))
    ? [{ role: 'system', content: c.system }, ...c.messages] : c.messages;
  return tmpl.render({ messages, add_generation_prompt: true, bos_token: '<|begin_of_text|>', eos_token: '<|eot_id|>',
                       date_string: '26 Jul 2024' });
});
process.stdout.write(JSON.stringify(out) + '\n');
