// Drives `dlm api` with the official openai npm package (a client nobody
// here wrote): models list, chat completions whole and streamed,
// completions whole and streamed. Prints one JSON object with what it got;
// the shell script compares the answers with `dlm prompt --temp 0`.
// usage: node openai_client.cjs BASE_URL QUESTION RAW_PROMPT MAX_TOKENS [MODEL]
"use strict";
const m = require("openai");
const OpenAI = m.OpenAI || m.default || m;

function check(cond, what) { if (!cond) { console.error("FAIL: " + what); process.exit(1); } }

(async () => {
  const [base, question, raw, maxTok, wantModel] = process.argv.slice(2);
  const max_tokens = Number(maxTok);
  const client = new OpenAI({ baseURL: base + "v1", apiKey: "unused", maxRetries: 0 });
  const out = {};

  const models = await client.models.list();
  out.models = [];
  for await (const mo of models) out.models.push(mo.id);
  check(out.models.length >= 1, "models list is empty");
  const model = wantModel || out.models[out.models.length - 1];
  out.model = model;

  const messages = [{ role: "user", content: question }];
  const whole = await client.chat.completions.create({ model, messages, temperature: 0, max_tokens });
  check(whole.object === "chat.completion", "object " + whole.object);
  check(whole.choices.length === 1 && whole.choices[0].message.role === "assistant", "one assistant choice");
  check(["stop", "length"].includes(whole.choices[0].finish_reason), "finish_reason " + whole.choices[0].finish_reason);
  const u = whole.usage;
  check(u.prompt_tokens > 0 && u.total_tokens === u.prompt_tokens + u.completion_tokens, "usage " + JSON.stringify(u));
  out.chat = whole.choices[0].message.content;
  out.chat_finish = whole.choices[0].finish_reason;
  out.chat_usage = u;

  const stream = await client.chat.completions.create({
    model, messages, temperature: 0, max_tokens, stream: true, stream_options: { include_usage: true },
  });
  let text = "", finish = null, usage = null, chunks = 0;
  for await (const ch of stream) {
    check(ch.object === "chat.completion.chunk", "chunk object " + ch.object);
    if (ch.usage) usage = ch.usage;
    if (ch.choices.length) {
      chunks++;
      if (ch.choices[0].delta.content) text += ch.choices[0].delta.content;
      if (ch.choices[0].finish_reason) finish = ch.choices[0].finish_reason;
    }
  }
  out.chat_stream = text;
  out.chat_stream_chunks = chunks;
  out.chat_stream_finish = finish;
  out.chat_stream_usage = usage;

  const comp = await client.completions.create({ model, prompt: raw, temperature: 0, max_tokens });
  check(comp.object === "text_completion", "completion object " + comp.object);
  out.completion = comp.choices[0].text;
  out.completion_finish = comp.choices[0].finish_reason;
  out.completion_usage = comp.usage;

  const cs = await client.completions.create({ model, prompt: raw, temperature: 0, max_tokens, stream: true });
  let ctext = "";
  for await (const ch of cs) if (ch.choices.length) ctext += ch.choices[0].text;
  out.completion_stream = ctext;

  // a 4xx comes back as the client's typed error, with OpenAI's fields
  try {
    await client.chat.completions.create({ model: "no-such-model", messages });
    check(false, "unknown model accepted");
  } catch (e) {
    check(e.status === 404, "unknown model status " + e.status);
    out.unknown_model_code = e.code;
  }
  try {
    await client.chat.completions.create({ model, messages, n: 2 });
    check(false, "n=2 accepted");
  } catch (e) {
    check(e.status === 400, "n=2 status " + e.status);
    out.n2_param = e.param;
  }
  console.log(JSON.stringify(out));
})().catch((e) => { console.error("FAIL: " + (e.stack || e)); process.exit(1); });
