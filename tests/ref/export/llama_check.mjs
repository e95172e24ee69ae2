#!/usr/bin/env node
// llama.cpp's side of the export checks, through npm node-llama-cpp
// (pinned in tests/ref/package.json; CPU build, @node-llama-cpp/linux-x64).
//
//   node llama_check.mjs JOBS.json OUT.json
//
// JOBS.json is a list of jobs run in one process (models load in ~50 ms):
//   {"id": ..., "model": PATH, "lora": PATH|null, "ids": [prompt ids],
//    "greedy": N}        the N greedy next tokens (temperature 0), EOG tokens included
//   {"id": ..., "model": PATH, "lora": PATH|null, "ids": [...], "probs": true}
//                        the full next-token distribution after the prompt (temperature 1,
//                        no top-k/top-p/min-p: llama.cpp's softmax of the logits)
//   "loras": [{"path": PATH, "scale": S}, ...] in place of "lora" loads several adapters at once
//   {"id": ..., "model": PATH, "texts": [...]}   llama.cpp's tokenization of each text,
//                        without and with special-token parsing (no BOS added)
// OUT.json maps id to the result ({"tokens": [...]}, {"probs": [...]},
// {"plain": [[...]], "special": [[...]]}) or {"error": message}.
// The KV cache is F32 and flash attention is off (its CPU kernel works in
// F16: 1e-2 log-probability differences even on an F32 model), so what is
// left are llama.cpp's own matmul roundings (f16 / q8 activations for F16 /
// quantized weights).
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const { getLlama, LlamaLogLevel } = await import(path.join(here, "..", "node_modules", "node-llama-cpp", "dist", "index.js"));

const [jobsPath, outPath] = process.argv.slice(2);
const jobs = JSON.parse(fs.readFileSync(jobsPath, "utf8"));
const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error, progressLogs: false, maxThreads: 1 });
const out = {};
const models = new Map();

async function model(p) {
  if (!models.has(p)) models.set(p, await llama.loadModel({ modelPath: p }));
  return models.get(p);
}

for (const job of jobs) {
  try {
    const m = await model(job.model);
    if (job.texts) {
      out[job.id] = {
        plain: job.texts.map((t) => Array.from(m.tokenize(t, false))),
        special: job.texts.map((t) => Array.from(m.tokenize(t, true))),
      };
      continue;
    }
    const opts = { contextSize: 256, batchSize: 256, threads: 1, flashAttention: false,
                   experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32" };
    if (job.lora) opts.lora = { adapters: [{ filePath: job.lora, scale: 1 }] };
    if (job.loras) opts.lora = { adapters: job.loras.map((l) => ({ filePath: l.path, scale: l.scale })) };
    const ctx = await m.createContext(opts);
    const seq = ctx.getSequence();
    if (job.greedy) {
      const toks = [];
      for await (const t of seq.evaluate(job.ids, { temperature: 0, yieldEogToken: true })) {
        toks.push(t);
        if (toks.length >= job.greedy) break;
      }
      out[job.id] = { tokens: toks };
    } else if (job.probs) {
      const items = job.ids.slice(0, -1).concat([[job.ids[job.ids.length - 1],
        { generateNext: { probabilities: true, options: { temperature: 1, topK: 0, topP: 1, minP: 0 } } }]]);
      const res = await seq.controlledEvaluate(items);
      const map = res[res.length - 1].next.probabilities;
      const p = [];
      for (const [tok, v] of map) p[tok] = v;
      out[job.id] = { probs: Array.from(p, (v) => v ?? 0) };
    }
    await ctx.dispose();
  } catch (err) {
    out[job.id] = { error: String(err && err.message ? err.message : err) };
  }
}
fs.writeFileSync(outPath, JSON.stringify(out));
await llama.dispose();
