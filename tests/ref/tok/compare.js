#!/usr/bin/env node
// Compare two JSON-lines files line by line against the corpus they came
// from, and report the first mismatch with its line, its text and both
// values. Exit 1 on any mismatch.
//   node compare.js LABEL CORPUS WANT.jsonl GOT.jsonl         (id lists)
//   node compare.js LABEL CORPUS - GOT.jsonl                   (GOT holds JSON strings
//                                                               that must equal the corpus lines)
//   node compare.js LABEL CORPUS NFC GOT.jsonl                 (... equal to the lines in NFC,
//                                                               by JavaScript's own normalize())
'use strict';
const fs = require('fs');
const [label, corpusPath, wantPath, gotPath] = process.argv.slice(2);
const lines = (p) => { const l = fs.readFileSync(p, 'utf8').split('\n'); if (l[l.length - 1] === '') l.pop(); return l; };
const corpus = lines(corpusPath);
const got = lines(gotPath);
const want = wantPath === '-' ? corpus.map((s) => JSON.stringify(s))
  : wantPath === 'NFC' ? corpus.map((s) => JSON.stringify(s.normalize('NFC'))) : lines(wantPath);
let bad = 0;
if (got.length !== corpus.length || want.length !== corpus.length) {
  console.error(`${label}: ${corpus.length} corpus lines, ${want.length} expected, ${got.length} got`);
  process.exit(1);
}
for (let i = 0; i < corpus.length; i++) {
  const a = JSON.stringify(JSON.parse(want[i])), b = JSON.stringify(JSON.parse(got[i]));
  if (a !== b) {
    if (bad === 0) {
      console.error(`${label}: first mismatch at corpus line ${i + 1}`);
      console.error(`  text: ${JSON.stringify(corpus[i])}`);
      console.error(`  want: ${a}`);
      console.error(`  got:  ${b}`);
    }
    bad++;
  }
}
if (bad) { console.error(`${label}: ${bad} of ${corpus.length} lines differ`); process.exit(1); }
console.log(`${label}: ${corpus.length} lines identical`);
