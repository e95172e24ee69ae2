// llama_engine.mjs — the load of bench/api/load.py run inside llama.cpp's own
// engine (npm node-llama-cpp 3.21.1, its prebuilt CPU binaries, no HTTP):
// CLIENTS workers × REQUESTS requests each, at most PARALLEL of them decoded
// together (one context with PARALLEL sequences: node-llama-cpp batches the
// sequences' pending tokens into one llama_decode per step, continuous
// batching as llama-server does), the same questions in the GGUF's ChatML
// turn, temperature 0.8, at most MAX_TOKENS generated, stopping at an
// end-of-generation token. The stand-in for llama-server where it is not
// built (bench/api/build-llama-server.sh). Prints one JSON object with
// load.py's keys.
// usage: node llama_engine.mjs NODE_LLAMA_CPP_DIR MODEL.gguf PARALLEL THREADS CTX CLIENTS REQUESTS MAX_TOKENS
import {pathToFileURL} from "node:url";

const [nlc, model_path, P_s, thr_s, ctx_s, C_s, R_s, N_s] = process.argv.slice(2);
const [P, threads, CTX, C, R, N] = [P_s, thr_s, ctx_s, C_s, R_s, N_s].map(Number);
const {getLlama, LlamaLogLevel} = await import(pathToFileURL(`${nlc}/dist/index.js`).href);
const QUESTIONS = ["What is the capital of France?", "Tell me about the water cycle.", "What is a cloud?",
                   "Name a large river.", "How do bees make honey?", "What is photosynthesis?",
                   "Why is the sky blue?", "What is a prime number?"];
const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error, maxThreads: threads});
const model = await llama.loadModel({modelPath: model_path, gpuLayers: 0, useMmap: true});
const ctx = await model.createContext({contextSize: P * CTX, sequences: P, batchSize: 512,
                                       threads: {ideal: threads, min: threads}});
const free = Array.from({length: P}, () => ctx.getSequence());
const waiting = [];
const acquire = () => free.length ? Promise.resolve(free.pop()) : new Promise((res) => waiting.push(res));
const release = (s) => { const w = waiting.shift(); if (w) w(s); else free.push(s); };
const now = () => Number(process.hrtime.bigint()) / 1e9;
const eog = (t) => (model.isEogToken ? model.isEogToken(t) : t === model.tokens.eos);
const ttft = [], gaps = [];
let tokens = 0, errors = 0;

async function one(q, k) {
    const t0 = now();
    const seq = await acquire();
    try {
        await seq.clearHistory();
        const prompt = model.tokenize(`<|im_start|>user\n${q}<|im_end|>\n<|im_start|>assistant\n`, true);
        let n = 0, last = 0;
        for await (const t of seq.evaluate(prompt, {temperature: 0.8, seed: k})) {
            if (eog(t)) break;
            const ts = now();
            if (n === 0) ttft.push(ts - t0); else gaps.push(ts - last);
            last = ts;
            if (++n >= N) break;
        }
        tokens += n;
    } catch (e) {
        errors++;
    } finally {
        release(seq);
    }
}

const pct = (xs, p) => {
    if (!xs.length) return null;
    const s = [...xs].sort((a, b) => a - b);
    return Math.round(1e4 * s[Math.min(s.length - 1, Math.round(p / 100 * (s.length - 1)))]) / 10;
};
const t0 = now();
await Promise.all(Array.from({length: C}, async (_, k) => {
    for (let i = 0; i < R; i++) await one(QUESTIONS[(k + i) % QUESTIONS.length], 1 + k * R + i);
}));
const wall = now() - t0;
console.log(JSON.stringify({clients: C, requests: C * R, errors, wall_s: Math.round(100 * wall) / 100,
                            completion_tokens: tokens, usage_missing: 0,
                            tokens_per_s: Math.round(10 * tokens / wall) / 10,
                            ttft_ms_p50: pct(ttft, 50), ttft_ms_p99: pct(ttft, 99),
                            token_ms_p50: pct(gaps, 50), token_ms_p99: pct(gaps, 99)}));
await ctx.dispose();
await model.dispose();
await llama.dispose();
