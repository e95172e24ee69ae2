// llama_bench.mjs — llama.cpp (through node-llama-cpp 3.21.1, CPU build) on
// one GGUF: prompt processing of NP random token ids in one batch, and
// generation of NG tokens one at a time (greedy) after a 16-token prompt.
// Best of RUNS for each; prints one line
//   RESULT {"impl":"llama.cpp","pp_tok_s":...,"tg_tok_s":...}
// usage: node llama_bench.mjs MODEL.gguf THREADS NP NG RUNS
import {getLlama, LlamaLogLevel} from "node-llama-cpp";

const [model_path, threads_s, np_s, ng_s, runs_s] = process.argv.slice(2);
const threads = +threads_s, NP = +np_s, NG = +ng_s, RUNS = +runs_s;
const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error, maxThreads: threads});
const model = await llama.loadModel({modelPath: model_path, gpuLayers: 0, useMmap: true});
const ctx = await model.createContext({contextSize: NP + NG + 64, batchSize: NP, threads: {ideal: threads, min: threads},
                                       sequences: 1});
const seq = ctx.getSequence();
let x = 12345;
const rnd = () => { x = (x * 1103515245 + 12345) >>> 0; return 300 + (x % (model.tokens.bos ? 40000 : 40000)); };
const vocab = model.fileInsights ? null : null;
const toks = (n) => Array.from({length: n}, rnd);
const now = () => Number(process.hrtime.bigint()) / 1e9;

let pp = 0, tg = 0;
// warm-up (page in the weights)
await seq.evaluateWithoutGeneratingNewTokens(toks(32));
await seq.clearHistory();
for (let r = 0; r < RUNS; r++) {
    const p = toks(NP);
    const t0 = now();
    await seq.evaluateWithoutGeneratingNewTokens(p);
    const dt = now() - t0;
    pp = Math.max(pp, NP / dt);
    await seq.clearHistory();
}
for (let r = 0; r < RUNS; r++) {
    let n = 0, t0 = 0;
    // the first yielded token ends the prompt; time the NG tokens after it
    for await (const t of seq.evaluate(toks(16), {temperature: 0})) {
        if (n === 0) t0 = now();
        if (++n > NG) break;
    }
    const dt = now() - t0;
    tg = Math.max(tg, NG / dt);
    await seq.clearHistory();
}
console.log("RESULT " + JSON.stringify({impl: "llama.cpp", threads, np: NP, ng: NG, pp_tok_s: pp, tg_tok_s: tg}));
await ctx.dispose();
await model.dispose();
await llama.dispose();
