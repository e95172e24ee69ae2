#!/usr/bin/env node
// Encode speed of HF tokenizers (Rust, through npm @anush008/tokenizers):
// best of N runs, add_special_tokens=false, either one encode() of the whole
// text or encodeBatch() of its lines (run with RAYON_NUM_THREADS=1).
//   node hf_bench.js TOKENIZER.json TEXT_FILE RUNS whole|lines  ->  "<bytes> <tokens> <best seconds>"
'use strict';
const fs = require('fs');
const path = require('path');
const { Tokenizer } = require(path.join(__dirname, '..', '..', 'tests', 'ref', 'node_modules', '@anush008', 'tokenizers'));
(async () => {
  const [tkPath, textPath, runsArg, mode] = process.argv.slice(2);
  const tok = Tokenizer.fromFile(tkPath);
  const text = fs.readFileSync(textPath, 'utf8');
  const lines = text.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  let best = Infinity, n = 0;
  for (let r = 0; r < Number(runsArg || 3); r++) {
    const t0 = process.hrtime.bigint();
    if (mode === 'lines') {
      const encs = await tok.encodeBatch(lines, { addSpecialTokens: false });
      n = encs.reduce((a, e) => a + e.getLength(), 0);
    } else {
      n = (await tok.encode(text, null, { addSpecialTokens: false })).getLength();
    }
    const dt = Number(process.hrtime.bigint() - t0) / 1e9;
    if (dt < best) best = dt;
  }
  console.log(`${Buffer.byteLength(text, 'utf8')} ${n} ${best.toFixed(4)}`);
})().catch((e) => { console.error(e); process.exit(1); });
