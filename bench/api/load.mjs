// bench/api/load.mjs: the load of load.py (same questions, requests, fields
// and JSON output) from one Node.js event loop instead of python threads.
// Why a second client: at ~900 streamed tokens/s the python client (16
// threads under one GIL, on the same 2 cores as the server) became the
// ceiling of bench/api/run.sh — `dlm api --parallel 8` sat at 77% of its
// core (bench/RESULTS.md, 2026-12-01 23:16). Node's http parser runs in C
// and its event loop has no lock to fight for. Node's own modules only.
//
//   node load.mjs URL [--clients 16] [--requests 8] [--max-tokens 32]
//                     [--model ID] [--endpoint chat|completions] [--timeout 120]
import http from 'node:http';

const QUESTIONS = ['What is the capital of France?', 'Tell me about the water cycle.', 'What is a cloud?',
    'Name a large river.', 'How do bees make honey?', 'What is photosynthesis?',
    'Why is the sky blue?', 'What is a prime number?'];

const argv = process.argv.slice(2);
const url = new URL(argv[0]);
const opt = (name, def) => { const i = argv.indexOf(name); return i >= 0 ? argv[i + 1] : def; };
const clients = +opt('--clients', 16), requests = +opt('--requests', 8), maxTokens = +opt('--max-tokens', 32);
const model = opt('--model', null), endpoint = opt('--endpoint', 'chat'), timeoutS = +opt('--timeout', 120);

const pct = (xs, p) => {
    if (!xs.length) return null;
    const s = [...xs].sort((a, b) => a - b);
    return s[Math.min(s.length - 1, Math.round(p / 100 * (s.length - 1)))];
};
const now = () => Number(process.hrtime.bigint()) / 1e9;

// one streamed request: resolves {first, gaps, tokens, noUsage}
function one(q) {
    const body = { stream: true, max_tokens: maxTokens, temperature: 0.8, seed: 1,
        stream_options: { include_usage: true } };
    let path;
    if (endpoint === 'chat') { body.messages = [{ role: 'user', content: q }]; path = '/v1/chat/completions'; }
    else { body.prompt = q; path = '/v1/completions'; }
    if (model) body.model = model;
    const data = JSON.stringify(body);
    return new Promise((resolve, reject) => {
        const t0 = now();
        const req = http.request({ host: url.hostname, port: url.port, path, method: 'POST', agent: false,
            headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(data) } }, (res) => {
            if (res.statusCode !== 200) {
                let b = '';
                res.on('data', (c) => { b += c; });
                res.on('end', () => reject(new Error(`HTTP ${res.statusCode}: ${b.slice(0, 200)}`)));
                return;
            }
            let buf = '', first = null, usage = null, done = false;
            const stamps = [];
            res.setEncoding('utf8');
            res.on('data', (chunk) => {
                buf += chunk;
                let k;
                while (!done && (k = buf.indexOf('\n\n')) >= 0) {
                    const ev = buf.slice(0, k);
                    buf = buf.slice(k + 2);
                    if (!ev.startsWith('data: ')) { req.destroy(new Error(`bad SSE event ${ev.slice(0, 80)}`)); return; }
                    const d = ev.slice(6);
                    if (d === '[DONE]') { done = true; break; }
                    const j = JSON.parse(d);
                    if (j.usage) usage = j.usage;
                    for (const ch of j.choices || []) {
                        const text = ch.delta ? ch.delta.content : ch.text;
                        if (text) {
                            const t = now();
                            if (first === null) first = t - t0;
                            stamps.push(t);
                        }
                    }
                }
            });
            res.on('end', () => {
                if (!done) return reject(new Error('stream ended without [DONE]'));
                const gaps = stamps.slice(1).map((t, i) => t - stamps[i]);
                if (usage === null) resolve({ first, gaps, tokens: stamps.length, noUsage: 1 });
                else resolve({ first, gaps, tokens: usage.completion_tokens || 0, noUsage: 0 });
            });
            res.on('error', reject);
        });
        req.setTimeout(timeoutS * 1000, () => req.destroy(new Error('timeout')));
        req.on('error', reject);
        req.end(data);
    });
}

const ttft = [], gaps = [], errors = [];
let tokens = 0, noUsage = 0;
async function client(k) {
    for (let i = 0; i < requests; i++) {
        try {   // counted, not fatal: the run reports them
            const r = await one(QUESTIONS[(k + i) % QUESTIONS.length]);
            noUsage += r.noUsage;
            if (r.first !== null) ttft.push(r.first);
            gaps.push(...r.gaps);
            tokens += r.tokens;
        } catch (e) {
            errors.push(String(e.message || e).slice(0, 200));
        }
    }
}

const t0 = now();
await Promise.all(Array.from({ length: clients }, (_, k) => client(k)));
const wall = now() - t0;
const ms = (x) => (x === null ? null : Math.round(10000 * x) / 10);
console.log(JSON.stringify({
    clients, requests: clients * requests, errors: errors.length, error_samples: errors.slice(0, 3),
    wall_s: Math.round(wall * 100) / 100, completion_tokens: tokens, usage_missing: noUsage,
    tokens_per_s: Math.round(tokens / wall * 10) / 10,
    ttft_ms_p50: ms(pct(ttft, 50)), ttft_ms_p99: ms(pct(ttft, 99)),
    token_ms_p50: ms(pct(gaps, 50)), token_ms_p99: ms(pct(gaps, 99)),
}));
process.exitCode = errors.length ? 1 : 0;
