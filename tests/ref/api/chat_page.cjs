// Drives the chat page of `dlm api` in headless Chromium (Debian chromium
// through npm playwright-core): types two questions, waits for the streamed
// answers, checks that the text grew while it streamed and that the page
// fetched nothing from elsewhere, keeps a screenshot, and prints the answers.
// usage: node chat_page.cjs BASE_URL SCREENSHOT Q1 Q2
"use strict";
const { chromium } = require("playwright-core");

(async () => {
  const [base, shot, q1, q2] = process.argv.slice(2);
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    args: ["--no-sandbox", "--disable-gpu"],
  });
  const page = await browser.newPage({ viewport: { width: 900, height: 640 } });
  const foreign = [];
  page.on("request", (r) => { if (!r.url().startsWith(base)) foreign.push(r.url()); });
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  await page.goto(base);
  await page.waitForSelector("#model option", { state: "attached" });
  await page.fill("#temp", "0");
  await page.fill("#maxtok", "24");
  const answers = [];
  const grew = [];
  for (const q of [q1, q2]) {
    const n = answers.length;
    await page.fill("#input", q);
    await page.press("#input", "Enter");
    const sel = `.msg.assistant >> nth=${n}`;
    await page.waitForSelector(sel);
    // the text seen while streaming is a prefix of the final one
    const seen = await page.locator(sel).innerText();
    await page.waitForSelector(`.msg.assistant[data-state=done] >> nth=${n}`, { timeout: 20000 });
    const text = await page.locator(sel).textContent();
    grew.push(text.startsWith(seen));
    answers.push(text);
  }
  await page.screenshot({ path: shot, fullPage: true });
  const model = await page.$eval("#model", (s) => s.value);
  await browser.close();
  console.log(JSON.stringify({ answers, grew, foreign, errors, model }));
})().catch((e) => { console.error("FAIL: " + (e.stack || e)); process.exit(1); });
